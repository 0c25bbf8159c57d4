package shadow

// The bridge wire format, spoken over the worker's unix socket (pgext/walshadow.h
// is the C side of the same contract). Both directions are frames:
//
//	+---------------+------------------------------------------+
//	| length u32 BE | payload: length bytes (requests: 1 .. the |
//	|               | worker's max_request_mb; responses: 1 ..  |
//	|               | MaxBridgeResponse on this side)           |
//	+---------------+------------------------------------------+
//
// A request payload starts with its opcode, a response payload with a
// status byte. Integers are big-endian; bytes left after the last field are
// an error both ways.
//
//	op              request after the opcode          response after status 0
//	HELLO      0x01 -                                 protocol u32 (=1), server_version_num u32,
//	                                                  in_recovery u8
//	DECODE     0x02 n u32, n × (type oid u32,         n u32, n × (kind u8: 0 text, 1 error,
//	                length u32, on-disk datum)        length u32, UTF-8 text or message)
//	SCAN       0x03 catalog u8, top_xid u32,          lsn_start u64, lsn_end u64, ncols u16,
//	                noids u32 (<= 65536), oids u32…   rows of ncols cells to the end; a cell
//	                                                  is length i32 (-1 = NULL) + UTF-8 text
//	REPLAY_LSN 0x04 -                                 lsn u64
//
// A failed request is answered with status 1, length u32 and the message
// "SQLSTATE: text". The worker keeps the connection after an error unless
// the framing itself broke (oversized or truncated frame).
//
// The parsers below are pure: a payload in, values or an error out. An error
// wraps ErrBridgeTruncated when the payload ended inside a field, and
// ErrBridgeCorrupt when it cannot be a response at all (bad status or kind,
// trailing bytes, impossible lengths).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"regexp"

	"github.com/walshadow/walshadow/internal/wal"
)

// BridgeProtocolVersion is the protocol HELLO must report.
const BridgeProtocolVersion = 1

// MaxBridgeResponse caps a response frame the client accepts.
const MaxBridgeResponse = 256 << 20

// MaxScanOids is the most oids one SCAN request may name.
const MaxScanOids = 65536

// bridgeOp is a request opcode.
type bridgeOp uint8

const (
	opHello     bridgeOp = 0x01
	opDecode    bridgeOp = 0x02
	opScan      bridgeOp = 0x03
	opReplayLSN bridgeOp = 0x04
)

func (o bridgeOp) String() string {
	switch o {
	case opHello:
		return "hello"
	case opDecode:
		return "decode"
	case opScan:
		return "scan"
	case opReplayLSN:
		return "replay_lsn"
	}
	return fmt.Sprintf("op_0x%02x", uint8(o))
}

const (
	bridgeStatusOK    = 0
	bridgeStatusError = 1
	decodeKindText    = 0
	decodeKindError   = 1
)

// Catalog names a SCAN projection.
type Catalog uint8

const (
	// CatalogClass: oid, relnamespace, relname, relkind, relpersistence,
	// relreplident, reltoastrelid, reltablespace, relfilenode. Oids are
	// relation oids.
	CatalogClass Catalog = 1
	// CatalogAttribute: attrelid, attnum (>= 1 only), attname, atttypid,
	// atttypmod, attnotnull, attisdropped, attbyval, attlen, attalign,
	// attstorage, atthasmissing, first element of attmissingval (or NULL).
	// Oids are relation oids.
	CatalogAttribute Catalog = 2
	// CatalogIndex: indexrelid, indrelid, indisprimary, indisreplident,
	// indkey. Oids are the indexed relations' oids (indrelid).
	CatalogIndex Catalog = 3
	// CatalogNamespace: oid, nspname. Oids are namespace oids.
	CatalogNamespace Catalog = 4
	// CatalogType: oid, typname, typtype, typbasetype, typelem, typlen,
	// typbyval, typalign, typcategory. Oids are type oids.
	CatalogType Catalog = 5
)

var catalogColumns = [...]int{CatalogClass: 9, CatalogAttribute: 13, CatalogIndex: 5, CatalogNamespace: 2, CatalogType: 9}
var catalogNames = [...]string{CatalogClass: "pg_class", CatalogAttribute: "pg_attribute", CatalogIndex: "pg_index",
	CatalogNamespace: "pg_namespace", CatalogType: "pg_type"}

// Valid reports whether c is a catalog the worker projects.
func (c Catalog) Valid() bool { return c >= CatalogClass && c <= CatalogType }

// Columns is the number of cells in each row of c's projection.
func (c Catalog) Columns() int {
	if !c.Valid() {
		return 0
	}
	return catalogColumns[c]
}

func (c Catalog) String() string {
	if !c.Valid() {
		return fmt.Sprintf("catalog(%d)", uint8(c))
	}
	return catalogNames[c]
}

// Hello is the worker's HELLO answer.
type Hello struct {
	Protocol     uint32
	PGVersionNum uint32
	InRecovery   bool
}

// DecodeItem is one datum as a heap tuple stores it: a varlena with its
// header (1- or 4-byte, possibly inline-compressed), a NUL-terminated
// cstring, or the typlen bytes of a fixed-length type. NULLs are not sent.
type DecodeItem struct {
	TypeOid uint32
	Data    []byte
}

// DecodeResult is one item's typoutput text, or the error its output
// function raised (Err non-empty).
type DecodeResult struct {
	Text string
	Err  string
}

// ScanResult is one SCAN: the shadow's replay LSN before and after it, and
// rows of Columns cells (nil = NULL) in the projection's column order.
type ScanResult struct {
	LSNStart, LSNEnd wal.LSN
	Columns          int
	Rows             [][]*string
}

var (
	// ErrBridgeTruncated: a response ended inside a field.
	ErrBridgeTruncated = errors.New("truncated bridge response")
	// ErrBridgeCorrupt: bytes that cannot be a bridge response.
	ErrBridgeCorrupt = errors.New("corrupt bridge response")
)

// BridgeError is a request the worker answered with status 1.
type BridgeError struct {
	Op       string
	SQLState string // empty when the message carried none
	Message  string
}

func (e *BridgeError) Error() string {
	if e.SQLState != "" {
		return fmt.Sprintf("shadow bridge %s: %s (SQLSTATE %s)", e.Op, e.Message, e.SQLState)
	}
	return fmt.Sprintf("shadow bridge %s: %s", e.Op, e.Message)
}

// SQLStateLockNotAvailable is what a catalog lock wait past
// walshadow.lock_timeout_ms fails with.
const SQLStateLockNotAvailable = "55P03"

// ---- Requests ----------------------------------------------------------------

func newRequest(op bridgeOp, size int) []byte {
	b := make([]byte, 4, 4+1+size)
	return append(b, byte(op))
}

// finishFrame fills in the length prefix of a frame built by newRequest.
func finishFrame(b []byte) ([]byte, error) {
	if len(b)-4 > int(^uint32(0)) {
		return nil, fmt.Errorf("bridge request of %d bytes does not fit a frame", len(b)-4)
	}
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b, nil
}

func encodeHelloRequest() []byte {
	b, _ := finishFrame(newRequest(opHello, 0))
	return b
}

func encodeReplayLSNRequest() []byte {
	b, _ := finishFrame(newRequest(opReplayLSN, 0))
	return b
}

func encodeDecodeRequest(items []DecodeItem) ([]byte, error) {
	size := 4
	for _, it := range items {
		size += 8 + len(it.Data)
	}
	if uint64(len(items)) > uint64(^uint32(0)) {
		return nil, fmt.Errorf("bridge decode: %d items do not fit a request", len(items))
	}
	b := newRequest(opDecode, size)
	b = binary.BigEndian.AppendUint32(b, uint32(len(items)))
	for i, it := range items {
		if uint64(len(it.Data)) > uint64(^uint32(0)) {
			return nil, fmt.Errorf("bridge decode: item %d (type %d) of %d bytes does not fit a request", i, it.TypeOid, len(it.Data))
		}
		b = binary.BigEndian.AppendUint32(b, it.TypeOid)
		b = binary.BigEndian.AppendUint32(b, uint32(len(it.Data)))
		b = append(b, it.Data...)
	}
	return finishFrame(b)
}

func encodeScanRequest(c Catalog, topXID uint32, oids []uint32) ([]byte, error) {
	if !c.Valid() {
		return nil, fmt.Errorf("bridge scan: unknown catalog %d", uint8(c))
	}
	if len(oids) > MaxScanOids {
		return nil, fmt.Errorf("bridge scan of %s: %d oids exceed the limit of %d", c, len(oids), MaxScanOids)
	}
	b := newRequest(opScan, 9+4*len(oids))
	b = append(b, byte(c))
	b = binary.BigEndian.AppendUint32(b, topXID)
	b = binary.BigEndian.AppendUint32(b, uint32(len(oids)))
	for _, o := range oids {
		b = binary.BigEndian.AppendUint32(b, o)
	}
	return finishFrame(b)
}

// ---- Responses ---------------------------------------------------------------

// readFrame reads one frame and returns its payload. A length of zero or
// above limit is refused before anything is allocated.
func readFrame(r io.Reader, limit uint32) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n == 0 {
		return nil, fmt.Errorf("%w: empty frame", ErrBridgeCorrupt)
	}
	if n > limit {
		return nil, fmt.Errorf("%w: frame of %d bytes exceeds the %d-byte cap", ErrBridgeCorrupt, n, limit)
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return p, nil
}

// respReader walks a response payload; the first failure sticks.
type respReader struct {
	op  bridgeOp
	p   []byte
	off int
	err error
}

func (r *respReader) fail(base error, format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s response: %s", base, r.op, fmt.Sprintf(format, args...))
	}
}

func (r *respReader) take(n int, field string) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || len(r.p)-r.off < n {
		r.fail(ErrBridgeTruncated, "%s needs %d bytes at offset %d, %d left", field, n, r.off, len(r.p)-r.off)
		return nil
	}
	b := r.p[r.off : r.off+n]
	r.off += n
	return b
}

func (r *respReader) u8(field string) uint8 {
	if b := r.take(1, field); b != nil {
		return b[0]
	}
	return 0
}

func (r *respReader) u16(field string) uint16 {
	if b := r.take(2, field); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}

func (r *respReader) u32(field string) uint32 {
	if b := r.take(4, field); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

func (r *respReader) u64(field string) uint64 {
	if b := r.take(8, field); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

func (r *respReader) remaining() int { return len(r.p) - r.off }

func (r *respReader) end() error {
	if r.err == nil && r.off != len(r.p) {
		r.fail(ErrBridgeCorrupt, "%d trailing bytes", len(r.p)-r.off)
	}
	return r.err
}

var sqlStatePrefix = regexp.MustCompile(`^([0-9A-Z]{5}): `)

// status consumes the status byte; a status 1 response becomes a
// *BridgeError (or a parse error when it is malformed).
func (r *respReader) status() error {
	switch s := r.u8("status"); {
	case r.err != nil:
		return r.err
	case s == bridgeStatusOK:
		return nil
	case s == bridgeStatusError:
		msg := string(r.take(int(r.u32("error length")), "error message"))
		if err := r.end(); err != nil {
			return err
		}
		e := &BridgeError{Op: r.op.String(), Message: msg}
		if m := sqlStatePrefix.FindStringSubmatch(msg); m != nil {
			e.SQLState, e.Message = m[1], msg[len(m[0]):]
		}
		return e
	default:
		r.fail(ErrBridgeCorrupt, "status %d", s)
		return r.err
	}
}

func parseHelloResponse(p []byte) (Hello, error) {
	r := &respReader{op: opHello, p: p}
	if err := r.status(); err != nil {
		return Hello{}, err
	}
	h := Hello{Protocol: r.u32("protocol"), PGVersionNum: r.u32("server_version_num")}
	switch rec := r.u8("in_recovery"); {
	case r.err != nil:
	case rec > 1:
		r.fail(ErrBridgeCorrupt, "in_recovery %d", rec)
	default:
		h.InRecovery = rec == 1
	}
	if err := r.end(); err != nil {
		return Hello{}, err
	}
	return h, nil
}

func parseReplayLSNResponse(p []byte) (wal.LSN, error) {
	r := &respReader{op: opReplayLSN, p: p}
	if err := r.status(); err != nil {
		return 0, err
	}
	lsn := wal.LSN(r.u64("lsn"))
	if err := r.end(); err != nil {
		return 0, err
	}
	return lsn, nil
}

// parseDecodeResponse parses a DECODE answer to a request of want items.
func parseDecodeResponse(p []byte, want int) ([]DecodeResult, error) {
	r := &respReader{op: opDecode, p: p}
	if err := r.status(); err != nil {
		return nil, err
	}
	n := r.u32("item count")
	if r.err == nil && int64(n) != int64(want) {
		r.fail(ErrBridgeCorrupt, "%d items for a request of %d", n, want)
	}
	// Each item takes at least 5 bytes: never allocate past what is there.
	if r.err == nil && int64(n)*5 > int64(r.remaining()) {
		r.fail(ErrBridgeTruncated, "%d items need at least %d bytes, %d left", n, int64(n)*5, r.remaining())
	}
	if r.err != nil {
		return nil, r.err
	}
	out := make([]DecodeResult, n)
	for i := range out {
		kind := r.u8("item kind")
		text := string(r.take(int(r.u32("item length")), "item text"))
		if r.err != nil {
			return nil, r.err
		}
		switch kind {
		case decodeKindText:
			out[i].Text = text
		case decodeKindError:
			if text == "" {
				text = "unknown error"
			}
			out[i].Err = text
		default:
			r.fail(ErrBridgeCorrupt, "item %d has kind %d", i, kind)
			return nil, r.err
		}
	}
	if err := r.end(); err != nil {
		return nil, err
	}
	return out, nil
}

func parseScanResponse(p []byte) (*ScanResult, error) {
	r := &respReader{op: opScan, p: p}
	if err := r.status(); err != nil {
		return nil, err
	}
	res := &ScanResult{LSNStart: wal.LSN(r.u64("lsn_start")), LSNEnd: wal.LSN(r.u64("lsn_end"))}
	res.Columns = int(r.u16("ncols"))
	if r.err != nil {
		return nil, r.err
	}
	if res.Columns == 0 {
		if err := r.end(); err != nil {
			return nil, err
		}
		return res, nil
	}
	for r.remaining() > 0 {
		row := make([]*string, res.Columns)
		cells := make([]string, res.Columns)
		for i := range row {
			n := int32(r.u32("cell length"))
			if r.err != nil {
				return nil, fmt.Errorf("row %d: %w", len(res.Rows), r.err)
			}
			if n < -1 {
				r.fail(ErrBridgeCorrupt, "row %d cell %d has length %d", len(res.Rows), i, n)
				return nil, r.err
			}
			if n == -1 {
				continue
			}
			cells[i] = string(r.take(int(n), "cell text"))
			if r.err != nil {
				return nil, fmt.Errorf("row %d: %w", len(res.Rows), r.err)
			}
			row[i] = &cells[i]
		}
		res.Rows = append(res.Rows, row)
	}
	return res, nil
}
