package shadow

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/walshadow/walshadow/internal/wal"
)

// unhex turns "00 00 00 01 | 01" (spaces and bars ignored) into bytes.
func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.NewReplacer(" ", "", "|", "", "\n", "", "\t", "").Replace(s))
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

func TestBridgeRequestGolden(t *testing.T) {
	decode, err := encodeDecodeRequest([]DecodeItem{
		{TypeOid: 23, Data: []byte{0x2a, 0, 0, 0}},
		{TypeOid: 25, Data: []byte{0x0d, 'h', 'e', 'l', 'l', 'o'}},
	})
	if err != nil {
		t.Fatal(err)
	}
	scan, err := encodeScanRequest(CatalogAttribute, 0x2f1, []uint32{16384, 16390})
	if err != nil {
		t.Fatal(err)
	}
	emptyDecode, err := encodeDecodeRequest(nil)
	if err != nil {
		t.Fatal(err)
	}
	wholeScan, err := encodeScanRequest(CatalogType, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		got  []byte
		want string
	}{
		{"hello", encodeHelloRequest(), "00000001 | 01"},
		{"replay_lsn", encodeReplayLSNRequest(), "00000001 | 04"},
		{"decode", decode, `0000001f | 02 | 00000002
			| 00000017 00000004 2a000000
			| 00000019 00000006 0d68656c6c6f`},
		{"decode empty", emptyDecode, "00000005 | 02 | 00000000"},
		{"scan", scan, "00000012 | 03 | 02 | 000002f1 | 00000002 | 00004000 00004006"},
		{"scan whole catalog", wholeScan, "0000000a | 03 | 05 | 00000000 | 00000000"},
	} {
		if want := unhex(t, tc.want); !bytes.Equal(tc.got, want) {
			t.Errorf("%s request:\n got %x\nwant %x", tc.name, tc.got, want)
		}
	}
}

func TestBridgeRequestLimits(t *testing.T) {
	if _, err := encodeScanRequest(CatalogClass, 0, make([]uint32, MaxScanOids+1)); err == nil {
		t.Error("a scan of 65537 oids was encoded")
	}
	if _, err := encodeScanRequest(CatalogClass, 0, make([]uint32, MaxScanOids)); err != nil {
		t.Errorf("a scan of 65536 oids: %v", err)
	}
	if _, err := encodeScanRequest(Catalog(9), 0, nil); err == nil {
		t.Error("catalog 9 was encoded")
	}
}

const (
	goldenHello     = "00 | 00000001 | 000249f2 | 01"
	goldenReplayLSN = "00 | 00000000016b3c28"
	goldenDecode    = "00 | 00000002 | 00 00000002 3432 | 01 00000005 626f6f6d21"
	goldenScan      = `00 | 0000000001000028 | 0000000001000028 | 0002
		| 00000005 3136333834 | ffffffff
		| 00000001 78 | 00000000`
	goldenError = "01 | 0000002e | 35355030333a2063616e63656c696e672073746174656d656e742064756520746f206c6f636b2074696d656f7574"
)

func TestBridgeResponseGolden(t *testing.T) {
	h, err := parseHelloResponse(unhex(t, goldenHello))
	if err != nil || h != (Hello{Protocol: 1, PGVersionNum: 150002, InRecovery: true}) {
		t.Errorf("hello: %+v, %v", h, err)
	}
	lsn, err := parseReplayLSNResponse(unhex(t, goldenReplayLSN))
	if err != nil || lsn != wal.LSN(0x16B3C28) {
		t.Errorf("replay lsn: %s, %v", lsn, err)
	}
	items, err := parseDecodeResponse(unhex(t, goldenDecode), 2)
	if err != nil || len(items) != 2 || items[0] != (DecodeResult{Text: "42"}) || items[1] != (DecodeResult{Err: "boom!"}) {
		t.Errorf("decode: %+v, %v", items, err)
	}
	scan, err := parseScanResponse(unhex(t, goldenScan))
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	if scan.LSNStart != 0x1000028 || scan.LSNEnd != 0x1000028 || scan.Columns != 2 || len(scan.Rows) != 2 {
		t.Fatalf("scan: %+v", scan)
	}
	if got := rowStrings(scan.Rows); got != "16384,NULL;x,;" {
		t.Errorf("scan rows: %s", got)
	}
	// Every parser turns status 1 into a *BridgeError with the SQLSTATE split off.
	for name, parse := range map[string]func([]byte) error{
		"hello":      func(p []byte) error { _, err := parseHelloResponse(p); return err },
		"replay_lsn": func(p []byte) error { _, err := parseReplayLSNResponse(p); return err },
		"decode":     func(p []byte) error { _, err := parseDecodeResponse(p, 2); return err },
		"scan":       func(p []byte) error { _, err := parseScanResponse(p); return err },
	} {
		err := parse(unhex(t, goldenError))
		var be *BridgeError
		if !errors.As(err, &be) || be.Op != name || be.SQLState != SQLStateLockNotAvailable ||
			be.Message != "canceling statement due to lock timeout" {
			t.Errorf("%s error response: %#v", name, err)
		}
	}
}

func rowStrings(rows [][]*string) string {
	var b strings.Builder
	for _, r := range rows {
		for i, c := range r {
			if i > 0 {
				b.WriteByte(',')
			}
			if c == nil {
				b.WriteString("NULL")
			} else {
				b.WriteString(*c)
			}
		}
		b.WriteByte(';')
	}
	return b.String()
}

// TestBridgeResponseDamage cuts and extends every golden response: a cut
// inside a field is truncation, an extra byte corruption.
func TestBridgeResponseDamage(t *testing.T) {
	parsers := map[string]struct {
		golden string
		parse  func([]byte) error
		// rowEnds are the prefix lengths at which a SCAN is complete.
		rowEnds []int
	}{
		"hello":      {goldenHello, func(p []byte) error { _, err := parseHelloResponse(p); return err }, nil},
		"replay_lsn": {goldenReplayLSN, func(p []byte) error { _, err := parseReplayLSNResponse(p); return err }, nil},
		"decode":     {goldenDecode, func(p []byte) error { _, err := parseDecodeResponse(p, 2); return err }, nil},
		"scan":       {goldenScan, func(p []byte) error { _, err := parseScanResponse(p); return err }, []int{19, 32}},
		"error":      {goldenError, func(p []byte) error { _, err := parseHelloResponse(p); return err }, nil},
	}
	for name, tc := range parsers {
		full := unhex(t, tc.golden)
		for n := 0; n < len(full); n++ {
			err := tc.parse(full[:n])
			complete := false
			for _, e := range tc.rowEnds {
				complete = complete || e == n
			}
			if complete {
				if err != nil {
					t.Errorf("%s cut to %d bytes (a row boundary): %v", name, n, err)
				}
				continue
			}
			if !errors.Is(err, ErrBridgeTruncated) {
				t.Errorf("%s cut to %d bytes: %v, want truncated", name, n, err)
			}
		}
		if name == "scan" {
			continue // a scan's rows run to the end: an extra byte is a truncated row
		}
		if err := tc.parse(append(append([]byte{}, full...), 0)); !errors.Is(err, ErrBridgeCorrupt) {
			t.Errorf("%s with a trailing byte: %v, want corrupt", name, err)
		}
	}
	for name, p := range map[string]string{
		"status 2":        "02",
		"in_recovery 2":   "00 | 00000001 | 000249f2 | 02",
		"decode kind 7":   "00 | 00000001 | 07 00000000",
		"decode count":    "00 | 00000003 | 00 00000000",
		"scan cell -2":    "00 | 0000000000000000 | 0000000000000000 | 0001 | fffffffe",
		"scan zero cols":  "00 | 0000000000000000 | 0000000000000000 | 0000 | 00",
		"hello trailing":  "00 | 00000001 | 000249f2 | 01 | 00",
		"error trailing":  "01 | 00000001 | 41 | 00",
		"decode too many": "00 | 00000002 | 00 00000000 | 00 00000000 | 00 00000000",
	} {
		var err error
		switch {
		case strings.HasPrefix(name, "decode"):
			_, err = parseDecodeResponse(unhex(t, p), 2)
		case strings.HasPrefix(name, "scan"):
			_, err = parseScanResponse(unhex(t, p))
		default:
			_, err = parseHelloResponse(unhex(t, p))
		}
		if !errors.Is(err, ErrBridgeCorrupt) {
			t.Errorf("%s: %v, want corrupt", name, err)
		}
	}
	// A count larger than the bytes could hold fails before allocating.
	if _, err := parseDecodeResponse(unhex(t, "00 | ffffffff"), 0xffffffff); !errors.Is(err, ErrBridgeTruncated) {
		t.Errorf("huge decode count: %v", err)
	}
}

func TestBridgeReadFrame(t *testing.T) {
	p, err := readFrame(bytes.NewReader(unhex(t, "00000002 | 0001 | ff")), 16)
	if err != nil || !bytes.Equal(p, []byte{0, 1}) {
		t.Errorf("frame: %x, %v", p, err)
	}
	if _, err := readFrame(bytes.NewReader(unhex(t, "00000011")), 16); !errors.Is(err, ErrBridgeCorrupt) {
		t.Errorf("over the cap: %v", err)
	}
	if _, err := readFrame(bytes.NewReader(unhex(t, "00000000")), 16); !errors.Is(err, ErrBridgeCorrupt) {
		t.Errorf("empty frame: %v", err)
	}
	if _, err := readFrame(bytes.NewReader(unhex(t, "00000004 | 0001")), 16); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("short payload: %v", err)
	}
	if _, err := readFrame(bytes.NewReader(nil), 16); !errors.Is(err, io.EOF) {
		t.Errorf("no frame: %v", err)
	}
}

// Test-side encoders of the worker's responses: the fuzz targets check that
// whatever parses re-encodes to the same bytes.

func encodeHelloResponse(h Hello) []byte {
	b := []byte{bridgeStatusOK}
	b = binary.BigEndian.AppendUint32(b, h.Protocol)
	b = binary.BigEndian.AppendUint32(b, h.PGVersionNum)
	if h.InRecovery {
		return append(b, 1)
	}
	return append(b, 0)
}

func encodeErrorResponse(e *BridgeError) []byte {
	msg := e.Message
	if e.SQLState != "" {
		msg = e.SQLState + ": " + msg
	}
	b := binary.BigEndian.AppendUint32([]byte{bridgeStatusError}, uint32(len(msg)))
	return append(b, msg...)
}

func encodeDecodeResponse(items []DecodeResult) []byte {
	b := binary.BigEndian.AppendUint32([]byte{bridgeStatusOK}, uint32(len(items)))
	for _, it := range items {
		kind, text := byte(decodeKindText), it.Text
		if it.Err != "" {
			kind, text = decodeKindError, it.Err
		}
		b = append(b, kind)
		b = binary.BigEndian.AppendUint32(b, uint32(len(text)))
		b = append(b, text...)
	}
	return b
}

func encodeScanResponse(r *ScanResult) []byte {
	b := binary.BigEndian.AppendUint64([]byte{bridgeStatusOK}, uint64(r.LSNStart))
	b = binary.BigEndian.AppendUint64(b, uint64(r.LSNEnd))
	b = binary.BigEndian.AppendUint16(b, uint16(r.Columns))
	for _, row := range r.Rows {
		for _, c := range row {
			if c == nil {
				b = binary.BigEndian.AppendUint32(b, 0xffffffff)
				continue
			}
			b = binary.BigEndian.AppendUint32(b, uint32(len(*c)))
			b = append(b, *c...)
		}
	}
	return b
}

func FuzzBridgeResponse(f *testing.F) {
	for i, g := range []string{goldenHello, goldenReplayLSN, goldenDecode, goldenScan, goldenError} {
		f.Add(uint8(i), unhex(f, g))
	}
	f.Add(uint8(2), unhex(f, "00 | 00000001 | 01 00000000"))
	f.Fuzz(func(t *testing.T, which uint8, p []byte) {
		var got []byte
		var err error
		switch which % 4 {
		case 0:
			var h Hello
			if h, err = parseHelloResponse(p); err == nil {
				got = encodeHelloResponse(h)
			}
		case 1:
			var lsn wal.LSN
			if lsn, err = parseReplayLSNResponse(p); err == nil {
				got = binary.BigEndian.AppendUint64([]byte{bridgeStatusOK}, uint64(lsn))
			}
		case 2:
			want := 0
			if len(p) >= 5 {
				want = int(binary.BigEndian.Uint32(p[1:5]))
			}
			var items []DecodeResult
			if items, err = parseDecodeResponse(p, want); err == nil {
				if len(items) != want {
					t.Fatalf("%d items, asked for %d", len(items), want)
				}
				got = encodeDecodeResponse(items)
			}
		case 3:
			var r *ScanResult
			if r, err = parseScanResponse(p); err == nil {
				for _, row := range r.Rows {
					if len(row) != r.Columns {
						t.Fatalf("row of %d cells, %d columns", len(row), r.Columns)
					}
				}
				got = encodeScanResponse(r)
			}
		}
		var be *BridgeError
		switch {
		case errors.As(err, &be):
			got = encodeErrorResponse(be)
		case err != nil:
			if !errors.Is(err, ErrBridgeTruncated) && !errors.Is(err, ErrBridgeCorrupt) {
				t.Fatalf("error of no known class: %v", err)
			}
			return
		}
		// A parsed response re-encodes to exactly its bytes; an empty decode
		// error message is the one spelling the parser normalises.
		if !bytes.Equal(got, p) && !bytes.Contains(got, []byte("unknown error")) {
			t.Fatalf("round trip:\n got %x\nwant %x", got, p)
		}
	})
}

func FuzzBridgeFrame(f *testing.F) {
	f.Add(unhex(f, "00000002 | 0001"))
	f.Add(unhex(f, "ffffffff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := readFrame(bytes.NewReader(b), 64)
		if err != nil {
			return
		}
		if len(p) == 0 || len(p) > 64 || int(binary.BigEndian.Uint32(b)) != len(p) || !bytes.Equal(p, b[4:4+len(p)]) {
			t.Fatalf("frame %x from %x", p, b)
		}
	})
}
