package desclog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/walshadow/walshadow/internal/wal"
)

// Frame bodies: see the package doc for the layout.

const (
	bodyVersion = 1

	bodyMeta  = 1
	bodyBatch = 2

	colNotNull     = 1
	colDropped     = 2
	colByVal       = 4
	colHasMissing  = 8
	colMissingText = 16
	colFlagsAll    = colNotNull | colDropped | colByVal | colHasMissing | colMissingText

	// Smallest encodings, to bound counts read from untrusted input before
	// allocating for them.
	minEntryLen     = 1 + 1 + 8 + 16
	minColumnLen    = 2 + 1 + 4 + 4 + 1 + 1 + 4 + 4 + 2 + 1 + 1 + 1
	minAmbiguityLen = 1 + 1 + 12 + 4 + 4 + 8 + 8
)

// meta is the checkpoint's first frame.
type meta struct {
	CoveredThrough wal.LSN // the seed's horizon
	Floor          wal.LSN // the GC floor the checkpoint was compacted at
	Through        wal.LSN // CapturedAt of the checkpoint's last batch
}

var le = binary.LittleEndian

func encodeMeta(m meta) []byte {
	b := []byte{bodyVersion, bodyMeta}
	b = le.AppendUint64(b, uint64(m.CoveredThrough))
	b = le.AppendUint64(b, uint64(m.Floor))
	return le.AppendUint64(b, uint64(m.Through))
}

// appendBatch appends b's body encoding to dst.
func appendBatch(dst []byte, b *Batch) []byte {
	dst = append(dst, bodyVersion, bodyBatch)
	dst = le.AppendUint64(dst, uint64(b.CapturedAt))
	dst = le.AppendUint32(dst, b.DrainXID)
	dst = binary.AppendUvarint(dst, uint64(len(b.Entries)))
	for i := range b.Entries {
		dst = appendEntry(dst, &b.Entries[i])
	}
	dst = binary.AppendUvarint(dst, uint64(len(b.Ambiguities)))
	for i := range b.Ambiguities {
		a := &b.Ambiguities[i]
		dst = append(dst, byte(a.Scope), byte(a.Reason))
		dst = appendRfn(dst, a.Rfn)
		dst = le.AppendUint32(dst, a.DbOid)
		dst = le.AppendUint32(dst, a.Oid)
		dst = le.AppendUint64(dst, uint64(a.From))
		dst = le.AppendUint64(dst, uint64(a.Through))
	}
	return dst
}

func appendEntry(dst []byte, e *Entry) []byte {
	dst = append(dst, byte(e.Kind), byte(e.Source))
	dst = le.AppendUint64(dst, uint64(e.ValidFrom))
	if e.Kind == EntryPresent && e.Desc != nil {
		return appendDescriptor(dst, e.Desc)
	}
	dst = le.AppendUint32(dst, e.Oid)
	return appendRfn(dst, e.Rfn)
}

func appendRfn(dst []byte, r wal.RelFileNode) []byte {
	dst = le.AppendUint32(dst, r.SpcOid)
	dst = le.AppendUint32(dst, r.DbOid)
	return le.AppendUint32(dst, r.RelNum)
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendDescriptor(dst []byte, d *Descriptor) []byte {
	dst = le.AppendUint32(dst, d.Oid)
	dst = le.AppendUint32(dst, d.DbOid)
	dst = appendRfn(dst, d.Rfn)
	dst = le.AppendUint32(dst, d.NamespaceOid)
	dst = appendString(dst, d.Namespace)
	dst = appendString(dst, d.Name)
	dst = append(dst, d.Kind, d.Persistence, d.ReplIdent)
	dst = le.AppendUint32(dst, d.ToastOid)
	dst = le.AppendUint32(dst, d.IdentityIndexOid)
	dst = binary.AppendUvarint(dst, uint64(len(d.KeyAttnums)))
	for _, k := range d.KeyAttnums {
		dst = le.AppendUint16(dst, uint16(k))
	}
	dst = binary.AppendUvarint(dst, uint64(len(d.Columns)))
	for i := range d.Columns {
		c := &d.Columns[i]
		dst = le.AppendUint16(dst, uint16(c.Num))
		dst = appendString(dst, c.Name)
		dst = le.AppendUint32(dst, c.TypeOid)
		dst = le.AppendUint32(dst, uint32(c.TypMod))
		dst = appendString(dst, c.TypeName)
		dst = append(dst, c.TypeKind)
		dst = le.AppendUint32(dst, c.BaseTypeOid)
		dst = le.AppendUint32(dst, c.ElemTypeOid)
		dst = le.AppendUint16(dst, uint16(c.Len))
		dst = append(dst, c.Align, c.Storage)
		var flags byte
		if c.NotNull {
			flags |= colNotNull
		}
		if c.Dropped {
			flags |= colDropped
		}
		if c.ByVal {
			flags |= colByVal
		}
		if c.HasMissing {
			flags |= colHasMissing
		}
		if c.Missing != nil {
			flags |= colMissingText
		}
		dst = append(dst, flags)
		if c.Missing != nil {
			dst = appendString(dst, *c.Missing)
		}
	}
	return dst
}

// errShortBody is a body that ends inside a field.
var errShortBody = errors.New("body ends inside a field")

// reader decodes a body; the first failure sticks and later reads return
// zeros, so decoders check once at the end of each record.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = fmt.Errorf("at body offset %d: %w", r.off, err)
	}
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || len(r.b)-r.off < n {
		r.fail(errShortBody)
		return nil
	}
	s := r.b[r.off : r.off+n]
	r.off += n
	return s
}

func (r *reader) u8() byte {
	if s := r.take(1); s != nil {
		return s[0]
	}
	return 0
}

func (r *reader) u16() uint16 {
	if s := r.take(2); s != nil {
		return le.Uint16(s)
	}
	return 0
}

func (r *reader) u32() uint32 {
	if s := r.take(4); s != nil {
		return le.Uint32(s)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if s := r.take(8); s != nil {
		return le.Uint64(s)
	}
	return 0
}

func (r *reader) lsn() wal.LSN { return wal.LSN(r.u64()) }

func (r *reader) rfn() wal.RelFileNode {
	return wal.RelFileNode{SpcOid: r.u32(), DbOid: r.u32(), RelNum: r.u32()}
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		r.fail(errors.New("bad uvarint"))
		return 0
	}
	r.off += n
	return v
}

// count reads a uvarint element count, refusing one the remaining bytes
// cannot hold at minLen bytes apiece.
func (r *reader) count(minLen int, what string) int {
	n := r.uvarint()
	if r.err != nil {
		return 0
	}
	if n > uint64(len(r.b)-r.off)/uint64(minLen) {
		r.fail(fmt.Errorf("%s count %d exceeds the body", what, n))
		return 0
	}
	return int(n)
}

func (r *reader) str() string {
	n := r.uvarint()
	if r.err != nil {
		return ""
	}
	if n > math.MaxInt32 {
		r.fail(fmt.Errorf("string length %d", n))
		return ""
	}
	return string(r.take(int(n)))
}

func (r *reader) header(want byte) {
	if v := r.u8(); r.err == nil && v != bodyVersion {
		r.fail(fmt.Errorf("unsupported body version %d (this build reads %d)", v, bodyVersion))
	}
	if t := r.u8(); r.err == nil && t != want {
		r.fail(fmt.Errorf("body type %d, want %d", t, want))
	}
}

func (r *reader) end() error {
	if r.err == nil && r.off != len(r.b) {
		r.fail(fmt.Errorf("%d trailing bytes", len(r.b)-r.off))
	}
	return r.err
}

func decodeMeta(body []byte) (meta, error) {
	r := &reader{b: body}
	r.header(bodyMeta)
	m := meta{CoveredThrough: r.lsn(), Floor: r.lsn(), Through: r.lsn()}
	if err := r.end(); err != nil {
		return meta{}, fmt.Errorf("meta frame: %w", err)
	}
	return m, nil
}

// decodeBatch decodes a batch body. It checks the encoding (enums, flags,
// lengths); the log invariants (ordering, keys) are the index builder's.
func decodeBatch(body []byte) (*Batch, error) {
	r := &reader{b: body}
	r.header(bodyBatch)
	b := &Batch{CapturedAt: r.lsn(), DrainXID: r.u32()}
	if n := r.count(minEntryLen, "entry"); n > 0 {
		b.Entries = make([]Entry, n)
		for i := range b.Entries {
			decodeEntry(r, &b.Entries[i])
		}
	}
	if n := r.count(minAmbiguityLen, "ambiguity"); n > 0 {
		b.Ambiguities = make([]Ambiguity, n)
		for i := range b.Ambiguities {
			a := &b.Ambiguities[i]
			a.Scope, a.Reason = Scope(r.u8()), AmbiguityReason(r.u8())
			a.Rfn, a.DbOid, a.Oid = r.rfn(), r.u32(), r.u32()
			a.From, a.Through = r.lsn(), r.lsn()
			if r.err == nil && (a.Scope < ScopeRfn || a.Scope > ScopeDatabase) {
				r.fail(fmt.Errorf("ambiguity %d: unknown scope %d", i, a.Scope))
			}
		}
	}
	if err := r.end(); err != nil {
		return nil, fmt.Errorf("batch frame: %w", err)
	}
	return b, nil
}

func decodeEntry(r *reader, e *Entry) {
	e.Kind, e.Source = EntryKind(r.u8()), ValidFromSource(r.u8())
	e.ValidFrom = r.lsn()
	if r.err != nil {
		return
	}
	if e.Kind < EntryPresent || e.Kind > EntryDropped {
		r.fail(fmt.Errorf("unknown entry kind %d", e.Kind))
		return
	}
	if e.Source < SourceSmgrCreate || e.Source > SourcePredecessor {
		r.fail(fmt.Errorf("unknown valid_from source %d", e.Source))
		return
	}
	if e.Kind != EntryPresent {
		e.Oid, e.Rfn = r.u32(), r.rfn()
		return
	}
	e.Desc = decodeDescriptor(r)
	if e.Desc != nil {
		e.Oid, e.Rfn = e.Desc.Oid, e.Desc.Rfn
	}
}

func decodeDescriptor(r *reader) *Descriptor {
	d := &Descriptor{Oid: r.u32(), DbOid: r.u32(), Rfn: r.rfn(), NamespaceOid: r.u32()}
	d.Namespace, d.Name = r.str(), r.str()
	d.Kind, d.Persistence, d.ReplIdent = r.u8(), r.u8(), r.u8()
	d.ToastOid, d.IdentityIndexOid = r.u32(), r.u32()
	if n := r.count(2, "key attnum"); n > 0 {
		d.KeyAttnums = make([]int16, n)
		for i := range d.KeyAttnums {
			d.KeyAttnums[i] = int16(r.u16())
		}
	}
	if n := r.count(minColumnLen, "column"); n > 0 {
		d.Columns = make([]Column, n)
		for i := range d.Columns {
			c := &d.Columns[i]
			c.Num = int16(r.u16())
			c.Name = r.str()
			c.TypeOid, c.TypMod = r.u32(), int32(r.u32())
			c.TypeName = r.str()
			c.TypeKind = r.u8()
			c.BaseTypeOid, c.ElemTypeOid = r.u32(), r.u32()
			c.Len = int16(r.u16())
			c.Align, c.Storage = r.u8(), r.u8()
			flags := r.u8()
			if r.err != nil {
				return nil
			}
			if flags&^colFlagsAll != 0 {
				r.fail(fmt.Errorf("relation %d column %d: unknown flags %#x", d.Oid, c.Num, flags))
				return nil
			}
			c.NotNull, c.Dropped, c.ByVal = flags&colNotNull != 0, flags&colDropped != 0, flags&colByVal != 0
			c.HasMissing = flags&colHasMissing != 0
			if flags&colMissingText != 0 {
				s := r.str()
				c.Missing = &s
			}
		}
	}
	if r.err != nil {
		return nil
	}
	return d
}
