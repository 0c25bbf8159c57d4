package copybin

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/walshadow/walshadow/internal/decode"
	"github.com/walshadow/walshadow/internal/desclog"
)

// copySignature starts every binary COPY stream.
const copySignature = "PGCOPY\n\377\r\n\000"

const (
	flagWithOids   = 1 << 16
	readBufferSize = 1 << 20
	// maxFieldLen is the largest datum PostgreSQL can send (1 GB varlena).
	maxFieldLen = 1<<30 - 1
	// growStep bounds how much a field buffer grows ahead of the bytes that
	// actually arrived, so a corrupt length cannot allocate a gigabyte.
	growStep = 1 << 20
)

// FormatError is a malformed or unexpected binary COPY stream. Row is the
// 1-based data row (0 in the header), Column and Type the field's column
// (empty outside a field), Offset the stream byte offset where the bad
// element starts.
type FormatError struct {
	Row    int64
	Column string
	Type   string
	Offset int64
	Err    error
}

func (e *FormatError) Error() string {
	switch {
	case e.Row == 0:
		return fmt.Sprintf("binary COPY header at byte %d: %v", e.Offset, e.Err)
	case e.Column == "":
		return fmt.Sprintf("binary COPY row %d at byte %d: %v", e.Row, e.Offset, e.Err)
	}
	return fmt.Sprintf("binary COPY row %d column %q (%s) at byte %d: %v", e.Row, e.Column, e.Type, e.Offset, e.Err)
}

func (e *FormatError) Unwrap() error { return e.Err }

// Reader decodes a binary COPY stream of the columns SelectExprs selected.
type Reader struct {
	br   *bufio.Reader
	cols []*desclog.Column // live columns, in SELECT order
	kind []fieldKind
	// width is each column's exact field length (0: variable).
	width []int
	rows  int64
	off   int64
	// err is the first error Next returned: the stream position is lost
	// after it, so every later call returns it again (io.EOF after the
	// trailer).
	err error
	// word holds a field count or length (a field, not a local, so that
	// passing it to the io.Reader does not allocate per row).
	word [4]byte
	// fixed holds one fixed-width datum in on-disk byte order.
	fixed [16]byte
	// buf holds one variable-length datum: a 4-byte varlena header and
	// the payload, reused across fields (decode.Value copies what it keeps).
	buf []byte
}

// fieldKind is how a column's field bytes become a value.
type fieldKind uint8

const (
	kindText     fieldKind = iota // output function text -> string
	kindCopy                      // fixed width, same bytes on disk (bool, "char", uuid, macaddr)
	kindSwap                      // fixed width, one big-endian integer: reverse
	kindTimetz                    // int64 time + int32 zone
	kindInterval                  // int64 time + int32 day + int32 month
	kindVarlena                   // payload of a 4-byte-header varlena
	kindName                      // name: the text, NUL-terminated on disk
	kindInet                      // family, bits, is_cidr, nb, address
	kindNumeric                   // ndigits, weight, sign, dscale, digits (all int16)
)

// fieldLayout gives a natively selected type's kind and exact field length
// (0: variable).
func fieldLayout(oid uint32) (fieldKind, int) {
	switch oid {
	case decode.OidBool, decode.OidChar:
		return kindCopy, 1
	case decode.OidUUID:
		return kindCopy, 16
	case decode.OidMacaddr:
		return kindCopy, 6
	case decode.OidInt2:
		return kindSwap, 2
	case decode.OidInt4, decode.OidOid, decode.OidFloat4, decode.OidDate:
		return kindSwap, 4
	case decode.OidInt8, decode.OidFloat8, decode.OidMoney, decode.OidTime, decode.OidTimestamp, decode.OidTimestamptz:
		return kindSwap, 8
	case decode.OidTimetz:
		return kindTimetz, 12
	case decode.OidInterval:
		return kindInterval, 16
	case decode.OidText, decode.OidVarchar, decode.OidBpchar, decode.OidJSON, decode.OidBytea:
		return kindVarlena, 0
	case decode.OidName:
		return kindName, 0
	case decode.OidInet, decode.OidCidr:
		return kindInet, 0
	case decode.OidNumeric:
		return kindNumeric, 0
	}
	return kindText, 0
}

// NewReader reads and checks the stream header. cols are the relation's
// columns; dropped ones are skipped, so the stream must carry the live ones
// in order, as SelectExprs selects them.
func NewReader(r io.Reader, cols []*desclog.Column) (*Reader, error) {
	rd := &Reader{br: bufio.NewReaderSize(r, readBufferSize), buf: make([]byte, 4, 4096)}
	for _, c := range cols {
		if c.Dropped {
			continue
		}
		k, w := kindText, 0
		if native(c) {
			k, w = fieldLayout(valueOid(c))
		}
		rd.cols = append(rd.cols, c)
		rd.kind = append(rd.kind, k)
		rd.width = append(rd.width, w)
	}
	var hdr [len(copySignature) + 8]byte
	if err := rd.readFull(hdr[:]); err != nil {
		return nil, err
	}
	if string(hdr[:len(copySignature)]) != copySignature {
		return nil, &FormatError{Err: fmt.Errorf("signature %q is not binary COPY's", hdr[:len(copySignature)])}
	}
	flags := binary.BigEndian.Uint32(hdr[len(copySignature):])
	if flags&flagWithOids != 0 {
		return nil, &FormatError{Offset: int64(len(copySignature)), Err: errors.New("stream has OIDs (WITH OIDS is not supported)")}
	}
	if flags>>17 != 0 {
		// Bits 17-31 are critical per the format: an unknown one means we
		// cannot read the stream.
		return nil, &FormatError{Offset: int64(len(copySignature)), Err: fmt.Errorf("unknown critical flags %#x", flags)}
	}
	extOff := rd.off - 4
	extLen := int32(binary.BigEndian.Uint32(hdr[len(copySignature)+4:]))
	if extLen < 0 {
		return nil, &FormatError{Offset: extOff, Err: fmt.Errorf("header extension length %d", extLen)}
	}
	n, err := rd.br.Discard(int(extLen))
	rd.off += int64(n)
	if err != nil {
		return nil, unexpectedEOF(err)
	}
	return rd, nil
}

// Columns are the live columns whose values Next returns, in order.
func (r *Reader) Columns() []*desclog.Column { return r.cols }

// Rows is the number of data rows decoded so far.
func (r *Reader) Rows() int64 { return r.rows }

// Bytes is the number of stream bytes consumed so far.
func (r *Reader) Bytes() int64 { return r.off }

// Next decodes the next row into dst[:len(r.Columns())] (nil: SQL NULL).
// It returns io.EOF after the trailer, io.ErrUnexpectedEOF when the stream
// ends early, and a *FormatError for malformed data.
func (r *Reader) Next(dst []any) error {
	if r.err != nil {
		return r.err
	}
	if len(dst) < len(r.cols) {
		return fmt.Errorf("binary COPY: destination of %d values for %d columns", len(dst), len(r.cols))
	}
	r.err = r.next(dst)
	return r.err
}

func (r *Reader) next(dst []any) error {
	rowOff := r.off
	b := r.word[:]
	if err := r.readFull(b[:2]); err != nil {
		return err
	}
	n := int16(binary.BigEndian.Uint16(b[:2]))
	if n == -1 {
		return io.EOF
	}
	row := r.rows + 1
	if int(n) != len(r.cols) {
		return &FormatError{Row: row, Offset: rowOff, Err: fmt.Errorf("%d fields, want %d columns", n, len(r.cols))}
	}
	for i, col := range r.cols {
		fieldOff := r.off
		if err := r.readFull(b); err != nil {
			return err
		}
		l := int32(binary.BigEndian.Uint32(b))
		if l == -1 {
			dst[i] = nil
			continue
		}
		v, err := r.field(i, l)
		if err != nil {
			var re *readError
			if err == io.ErrUnexpectedEOF || errors.As(err, &re) {
				return err // the stream, not the data, failed
			}
			return &FormatError{Row: row, Column: col.Name, Type: col.TypeName, Offset: fieldOff, Err: err}
		}
		dst[i] = v
	}
	r.rows = row
	return nil
}

// field reads one non-NULL field of l bytes and returns its value.
func (r *Reader) field(i int, l int32) (any, error) {
	kind, col := r.kind[i], r.cols[i]
	if l < 0 || l > maxFieldLen {
		return nil, fmt.Errorf("field length %d", l)
	}
	n := int(l)
	if exact := r.width[i]; exact != 0 {
		if n != exact {
			return nil, fmt.Errorf("field of %d bytes, want %d", n, exact)
		}
		return r.fixedField(kind, col, n)
	}
	payload, err := r.readField(n)
	if err != nil {
		return nil, err
	}
	switch kind {
	case kindText:
		return string(payload), nil
	case kindName:
		// decode renders name up to its first NUL: the unpadded text is
		// the same datum for it as the 64-byte on-disk one.
		return decodeValue(col, payload)
	case kindVarlena:
		return decodeValue(col, r.plainVarlena(n))
	case kindInet:
		return r.inet(col, payload)
	case kindNumeric:
		return r.numeric(col, payload)
	}
	return nil, fmt.Errorf("field kind %d", kind)
}

// fixedField converts a fixed-width send format to its little-endian
// on-disk struct.
func (r *Reader) fixedField(kind fieldKind, col *desclog.Column, n int) (any, error) {
	buf := r.fixed[:n]
	if err := r.readFull(buf); err != nil {
		return nil, err
	}
	switch kind {
	case kindSwap:
		reverse(buf)
	case kindTimetz: // TimeTzADT {int64 time; int32 zone}, attlen 12
		reverse(buf[:8])
		reverse(buf[8:12])
	case kindInterval: // Interval {int64 time; int32 day; int32 month}
		reverse(buf[:8])
		reverse(buf[8:12])
		reverse(buf[12:16])
	}
	return decodeValue(col, buf)
}

func reverse(b []byte) {
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
}

// decodeValue is decode.Value for a datum rebuilt from a natively selected
// field, which decode must never report pending.
func decodeValue(col *desclog.Column, raw []byte) (any, error) {
	v, pending, err := decode.Value(col, raw)
	if err != nil {
		return nil, err
	}
	if pending {
		return nil, fmt.Errorf("type %d is selected natively but decode leaves it to the bridge", valueOid(col))
	}
	return v, nil
}

// readField reads n field bytes into r.buf[4:] (leaving room for a
// varlena header) and returns them. The buffer grows with the bytes that
// arrive, not with the announced length.
func (r *Reader) readField(n int) ([]byte, error) {
	r.buf = r.buf[:4]
	for len(r.buf)-4 < n {
		chunk := min(n-(len(r.buf)-4), growStep)
		start := len(r.buf)
		r.buf = grow(r.buf, chunk)
		if err := r.readFull(r.buf[start:]); err != nil {
			return nil, err
		}
	}
	return r.buf[4:], nil
}

func grow(b []byte, n int) []byte {
	if cap(b)-len(b) < n {
		nb := make([]byte, len(b), max(2*cap(b), len(b)+n))
		copy(nb, b)
		b = nb
	}
	return b[:len(b)+n]
}

// plainVarlena puts a 4-byte varlena header in front of the n payload bytes
// readField left in r.buf.
func (r *Reader) plainVarlena(n int) []byte {
	binary.LittleEndian.PutUint32(r.buf, uint32(n+4)<<2)
	return r.buf[:n+4]
}

// inet turns inet_send's family, bits, is_cidr, nb, address (in
// r.buf[4:]) into the on-disk family, bits, address varlena, built in
// place ending where the field ends.
func (r *Reader) inet(col *desclog.Column, p []byte) (any, error) {
	if len(p) < 4 {
		return nil, fmt.Errorf("inet field of %d bytes", len(p))
	}
	if int(p[3]) != len(p)-4 {
		return nil, fmt.Errorf("inet field of %d bytes with address length %d", len(p), p[3])
	}
	nb := len(p) - 4
	family, bits := p[0], p[1]
	v := r.buf[2 : 4+4+nb] // header | family | bits | address (already at r.buf[8:])
	binary.LittleEndian.PutUint32(v, uint32(len(v))<<2)
	v[4], v[5] = family, bits
	return decodeValue(col, v)
}

// Numeric sign words shared by numeric_send and the on-disk header.
const (
	numericPos  = 0x0000
	numericNeg  = 0x4000
	numericNaN  = 0xC000
	numericPInf = 0xD000
	numericNInf = 0xF000
	// numericDscaleMask bounds a long-format on-disk display scale.
	numericDscaleMask = 0x3FFF
)

// numeric turns numeric_send's ndigits, weight, sign, dscale, digits (all
// big-endian 16-bit, in r.buf[4:]) into an on-disk long-format numeric
// (sign|dscale, weight, digits little-endian), or a special value's lone
// header word, built in place.
func (r *Reader) numeric(col *desclog.Column, p []byte) (any, error) {
	if len(p) < 8 {
		return nil, fmt.Errorf("numeric field of %d bytes", len(p))
	}
	ndigits := int16(binary.BigEndian.Uint16(p))
	weight := binary.BigEndian.Uint16(p[2:])
	sign := binary.BigEndian.Uint16(p[4:])
	dscale := int16(binary.BigEndian.Uint16(p[6:]))
	if ndigits < 0 || len(p) != 8+2*int(ndigits) {
		return nil, fmt.Errorf("numeric field of %d bytes with %d digits", len(p), ndigits)
	}
	switch sign {
	case numericNaN, numericPInf, numericNInf:
		v := r.buf[4:10]
		binary.LittleEndian.PutUint32(v, uint32(len(v))<<2)
		binary.LittleEndian.PutUint16(v[4:], sign)
		return decodeValue(col, v)
	case numericPos, numericNeg:
	default:
		return nil, fmt.Errorf("numeric sign %#04x", sign)
	}
	if dscale < 0 || dscale > numericDscaleMask {
		return nil, fmt.Errorf("numeric display scale %d", dscale)
	}
	v := r.buf[4 : 4+len(p)] // header | sign_dscale | weight | digits (already at r.buf[12:])
	binary.LittleEndian.PutUint32(v, uint32(len(v))<<2)
	binary.LittleEndian.PutUint16(v[4:], sign|uint16(dscale))
	binary.LittleEndian.PutUint16(v[6:], weight)
	for d := v[8:]; len(d) >= 2; d = d[2:] {
		d[0], d[1] = d[1], d[0]
	}
	return decodeValue(col, v)
}

// readFull fills b from the stream, counting the bytes; a short stream is
// io.ErrUnexpectedEOF.
func (r *Reader) readFull(b []byte) error {
	n, err := io.ReadFull(r.br, b)
	r.off += int64(n)
	if err != nil {
		return unexpectedEOF(err)
	}
	return nil
}

// readError is a failure of the underlying reader (not of the data).
type readError struct{ err error }

func (e *readError) Error() string { return "reading binary COPY stream: " + e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

// unexpectedEOF maps the end of the stream inside an element to
// io.ErrUnexpectedEOF; other read errors pass through as *readError.
func unexpectedEOF(err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return io.ErrUnexpectedEOF
	}
	return &readError{err}
}
