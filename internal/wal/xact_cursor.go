package wal

import "encoding/binary"

// mainDataCursor reads a record's main data front to back for the rmgr body
// decoders of this package. Every failure is a *Error naming the record's LSN
// and the record type, so the decoders themselves stay free of bounds checks.
// It lives on the caller's stack: nothing here allocates unless an error is
// returned.
type mainDataCursor struct {
	lsn  LSN
	what string // record type for messages, e.g. "xact commit"
	src  []byte
	off  int
}

func newMainDataCursor(rec *Record, what string) mainDataCursor {
	return mainDataCursor{lsn: rec.LSN, what: what, src: rec.MainData}
}

func (c *mainDataCursor) remaining() int { return len(c.src) - c.off }

// need fails unless n more bytes are available for field.
func (c *mainDataCursor) need(n int, field string) error {
	if n < 0 || c.remaining() < n {
		return errorf(c.lsn, KindCorrupt, "%s: %s needs %d bytes at offset %d, main data has %d", c.what, field, n, c.off, len(c.src))
	}
	return nil
}

// The fixed-size readers below assume need() succeeded.

func (c *mainDataCursor) u8() uint8 {
	v := c.src[c.off]
	c.off++
	return v
}

func (c *mainDataCursor) u16() uint16 {
	v := binary.LittleEndian.Uint16(c.src[c.off:])
	c.off += 2
	return v
}

func (c *mainDataCursor) u32() uint32 {
	v := binary.LittleEndian.Uint32(c.src[c.off:])
	c.off += 4
	return v
}

func (c *mainDataCursor) u64() uint64 {
	v := binary.LittleEndian.Uint64(c.src[c.off:])
	c.off += 8
	return v
}

func (c *mainDataCursor) relFileNode() RelFileNode {
	v := DecodeRelFileNode(c.src[c.off:])
	c.off += relFileNodeSize
	return v
}

func (c *mainDataCursor) skip(n int) { c.off += n }

// count reads an int32 array length and rejects negative values, which the
// C code would turn into a wild pointer walk.
func (c *mainDataCursor) count(field string) (int, error) {
	if c.remaining() < 4 {
		// Not via need: building "field count" there would allocate.
		return 0, errorf(c.lsn, KindCorrupt, "%s: %s count needs 4 bytes at offset %d, main data has %d", c.what, field, c.off, len(c.src))
	}
	n := int32(c.u32())
	if n < 0 {
		return 0, errorf(c.lsn, KindCorrupt, "%s: negative %s count %d at offset %d", c.what, field, n, c.off-4)
	}
	return int(n), nil
}

// array returns the next n items of itemSize bytes, aliasing the record.
// The bound is checked by division so that no count can overflow.
func (c *mainDataCursor) array(n, itemSize int, field string) ([]byte, error) {
	if n < 0 || n > c.remaining()/itemSize {
		return nil, errorf(c.lsn, KindCorrupt, "%s: %d %s of %d bytes at offset %d exceed main data of %d bytes", c.what, n, field, itemSize, c.off, len(c.src))
	}
	size := n * itemSize
	b := c.src[c.off : c.off+size : c.off+size]
	c.off += size
	return b, nil
}

// countedArray reads an int32 count followed by that many items.
func (c *mainDataCursor) countedArray(itemSize int, field string) ([]byte, error) {
	n, err := c.count(field)
	if err != nil {
		return nil, err
	}
	return c.array(n, itemSize, field)
}

// cstring returns the bytes up to the next NUL (excluded) and steps past it.
func (c *mainDataCursor) cstring(field string) ([]byte, error) {
	rest := c.src[c.off:]
	for i, b := range rest {
		if b == 0 {
			c.off += i + 1
			return rest[:i:i], nil
		}
	}
	return nil, errorf(c.lsn, KindCorrupt, "%s: %s at offset %d has no terminating NUL", c.what, field, c.off)
}

// layoutOf returns the record's layout, failing for records that were built
// without one rather than guessing a PostgreSQL version.
func layoutOf(rec *Record, what string) (*Layout, error) {
	if rec.Layout == nil {
		return nil, errorf(rec.LSN, KindUnsupported, "%s: record has no layout (PostgreSQL version unknown)", what)
	}
	return rec.Layout, nil
}
