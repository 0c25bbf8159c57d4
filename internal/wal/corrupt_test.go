package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fixtureRecords returns the fixture's records (cloned) and its bytes.
func fixtureRecords(t *testing.T) ([]*Record, []byte, LSN) {
	t.Helper()
	all, start := fixtureBytes(t)
	recs, err := readBytesErr(start, all, len(all))
	if !IsKind(err, KindEndOfWAL) {
		t.Fatalf("reading fixture: %v", err)
	}
	return recs, all, start
}

func TestCorruptFlippedByteIsCRCError(t *testing.T) {
	recs, all, start := fixtureRecords(t)
	victim := recs[len(recs)/3]
	for _, off := range []int{RecordHeaderSize + 1, int(victim.Header.TotLen) - 1} {
		bad := bytes.Clone(all)
		pos := int(victim.LSN-start) + off
		if victim.LSN/BlockSize != (victim.LSN+LSN(off))/BlockSize {
			t.Fatalf("test expects the victim record on one page")
		}
		bad[pos] ^= 0x40
		sr, _ := NewStreamReader(start, StreamOptions{})
		sr.Push(bad)
		var n int
		var crcErrs []*Error
		for {
			_, err := sr.Next()
			if err == nil {
				n++
				continue
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("non-*Error %T: %v", err, err)
			}
			if e.Kind == KindCRC {
				crcErrs = append(crcErrs, e)
				continue // the reader steps past a CRC failure
			}
			if e.Kind != KindEndOfWAL {
				t.Fatalf("unexpected error: %v", err)
			}
			break
		}
		if len(crcErrs) != 1 || crcErrs[0].LSN != victim.LSN {
			t.Fatalf("CRC errors %v, want one at %s", crcErrs, victim.LSN)
		}
		if n != len(recs)-1 {
			t.Fatalf("read %d good records, want %d", n, len(recs)-1)
		}
		if !strings.Contains(crcErrs[0].Error(), victim.LSN.String()) {
			t.Fatalf("message does not name the LSN: %v", crcErrs[0])
		}
	}
}

func TestCorruptBadPrevLink(t *testing.T) {
	recs, all, start := fixtureRecords(t)
	victim := recs[100]
	if BlockSize-victim.LSN%BlockSize < RecordHeaderSize {
		victim = recs[101]
	}
	bad := bytes.Clone(all)
	p := int(victim.LSN-start) + 8
	binary.LittleEndian.PutUint64(bad[p:], uint64(victim.Header.Prev)+8)
	_, err := readBytesErr(start, bad, 4096)
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindCorrupt || e.LSN != victim.LSN || !strings.Contains(e.Msg, "prev-link") {
		t.Fatalf("err = %v, want a prev-link error at %s", err, victim.LSN)
	}
}

func TestCorruptWrongMagic(t *testing.T) {
	_, all, start := fixtureRecords(t)
	bad := bytes.Clone(all)
	page := 5 * BlockSize
	binary.LittleEndian.PutUint16(bad[page:], 0xD10D) // PostgreSQL 14's magic
	_, err := readBytesErr(start, bad, 1<<16)
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindCorrupt || e.LSN != start+LSN(page) || !strings.Contains(e.Msg, "magic") {
		t.Fatalf("err = %v, want an invalid magic error at %s", err, start+LSN(page))
	}
	// A first page with an unknown magic is refused too.
	bad = bytes.Clone(all)
	binary.LittleEndian.PutUint16(bad[0:], 0x1234)
	_, err = readBytesErr(start, bad, 1<<16)
	if !IsKind(err, KindCorrupt) || !strings.Contains(err.Error(), "0x1234") {
		t.Fatalf("err = %v", err)
	}
}

func TestCorruptContrecordLength(t *testing.T) {
	recs, all, start := fixtureRecords(t)
	for _, r := range recs {
		if r.LSN/BlockSize == (r.End-1)/BlockSize {
			continue
		}
		page := int((r.LSN/BlockSize+1)*BlockSize - start)
		bad := bytes.Clone(all)
		binary.LittleEndian.PutUint32(bad[page+16:], binary.LittleEndian.Uint32(bad[page+16:])+1)
		_, err := readBytesErr(start, bad, 1<<16)
		if !IsKind(err, KindCorrupt) || !strings.Contains(err.Error(), "contrecord length") {
			t.Fatalf("err = %v", err)
		}
		return
	}
	t.Fatal("no page-crossing record in the fixture")
}

func TestTruncatedSegmentEndsInsideRecord(t *testing.T) {
	recs, all, start := fixtureRecords(t)
	var cross *Record
	for _, r := range recs {
		if r.LSN/BlockSize != (r.End-1)/BlockSize {
			cross = r
			break
		}
	}
	// Cut the segment at the page boundary inside that record.
	cut := int((cross.LSN/BlockSize+1)*BlockSize - start)
	dir := t.TempDir()
	name := "000000010000000000000007"
	if err := os.WriteFile(filepath.Join(dir, name), all[:cut], 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := NewFileReader(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	for {
		_, err = r.Next()
		if err != nil {
			break
		}
		n++
	}
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindEndOfWAL || !strings.Contains(e.Msg, "inside a record") {
		t.Fatalf("err = %v", err)
	}
	if recs[n].LSN != cross.LSN {
		t.Fatalf("stopped before %s, want before %s", recs[n].LSN, cross.LSN)
	}

	// Cut exactly between records: a clean io.EOF.
	if err := os.WriteFile(filepath.Join(dir, name), all[:cross.LSN-start], 0o600); err != nil {
		t.Fatal(err)
	}
	r, _ = NewFileReader(dir)
	for err == nil || !errors.Is(err, io.EOF) {
		if _, err = r.Next(); err != nil && !errors.Is(err, io.EOF) {
			t.Fatalf("err = %v", err)
		}
	}
}

func TestFileReaderRejectsGap(t *testing.T) {
	files, _ := SegmentFiles(fixtureDir)
	dir := t.TempDir()
	b, _ := os.ReadFile(files[0])
	os.WriteFile(filepath.Join(dir, "000000010000000000000007"), b, 0o600)
	// Pretend the next segment is number 9: its page addresses will not
	// match the name, and the gap is named.
	b2, _ := os.ReadFile(files[1])
	os.WriteFile(filepath.Join(dir, "000000010000000000000009"), b2, 0o600)
	r, _ := NewFileReader(dir)
	var err error
	for err == nil {
		_, err = r.Next()
	}
	if !strings.Contains(err.Error(), "segments missing or out of order") {
		t.Fatalf("err = %v", err)
	}
}

func TestParseSegmentName(t *testing.T) {
	n, ok := ParseSegmentName("0000000200000001000000FE.partial")
	if !ok || n.TLI != 2 || n.Log != 1 || n.Seg != 0xFE || !n.Partial {
		t.Fatalf("%+v %v", n, ok)
	}
	lsn, err := n.StartLSN(16 << 20)
	if err != nil || lsn != LSN(0x1_FE000000) {
		t.Fatalf("%s %v", lsn, err)
	}
	if _, err := n.StartLSN(1 << 30); err == nil {
		t.Fatal("segment FE is out of range for 1 GiB segments")
	}
	for _, bad := range []string{"00000001000000000000000", "00000001000000000000000g", "000000010000000000000001.history"} {
		if _, ok := ParseSegmentName(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestLSNText(t *testing.T) {
	l, err := ParseLSN("16/B374D848")
	if err != nil || l != 0x16_B374D848 || l.String() != "16/B374D848" {
		t.Fatalf("%v %v", l, err)
	}
	if LSN(0x1000).String() != "0/00001000" {
		t.Fatal(LSN(0x1000).String())
	}
	for _, bad := range []string{"", "16", "x/1", "1/y"} {
		if _, err := ParseLSN(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
