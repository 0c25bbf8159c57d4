package wal

import "encoding/binary"

// The list types below are views over packed little-endian arrays inside a
// record's main data. WAL gives no alignment guarantee that would let Go
// reinterpret the bytes as []uint32, and copying every commit's subxact or
// invalidation array would allocate on the hottest path, so items are decoded
// on access. Like the record they come from, they are valid until the reader
// moves on.

// XIDList is a packed array of TransactionIds (uint32).
type XIDList struct{ b []byte }

// Len returns the number of xids.
func (src XIDList) Len() int { return len(src.b) / 4 }

// At returns the i-th xid; it panics if i is out of range, like a slice.
func (src XIDList) At(i int) uint32 { return binary.LittleEndian.Uint32(src.b[i*4:]) }

// AppendTo appends all xids to dst and returns the extended slice.
func (src XIDList) AppendTo(dst []uint32) []uint32 {
	for i := 0; i+4 <= len(src.b); i += 4 {
		dst = append(dst, binary.LittleEndian.Uint32(src.b[i:]))
	}
	return dst
}

// Contains reports whether xid is in the list.
func (src XIDList) Contains(xid uint32) bool {
	for i := 0; i+4 <= len(src.b); i += 4 {
		if binary.LittleEndian.Uint32(src.b[i:]) == xid {
			return true
		}
	}
	return false
}

// relFileNodeSize is sizeof(RelFileNode) / sizeof(RelFileLocator).
const relFileNodeSize = 12

// RelFileNodeList is a packed array of 12-byte RelFileNodes.
type RelFileNodeList struct{ b []byte }

// Len returns the number of relfilenodes.
func (src RelFileNodeList) Len() int { return len(src.b) / relFileNodeSize }

// At returns the i-th relfilenode; it panics if i is out of range.
func (src RelFileNodeList) At(i int) RelFileNode {
	return DecodeRelFileNode(src.b[i*relFileNodeSize : (i+1)*relFileNodeSize])
}

// DroppedStat is xl_xact_stats_item: a statistics entry dropped with the
// transaction. PG15–17 store a 32-bit object id; PG18 widened it to 64 bits
// (objid_lo, objid_hi).
type DroppedStat struct {
	Kind  int32 // PgStat_Kind
	DbOid uint32
	ObjID uint64
}

// DroppedStatsList is a packed array of xl_xact_stats_item, whose size
// depends on the PostgreSQL version (Layout.DroppedStatsItemSize).
type DroppedStatsList struct {
	b        []byte
	itemSize int
}

// Len returns the number of dropped stats entries.
func (src DroppedStatsList) Len() int {
	if src.itemSize == 0 {
		return 0
	}
	return len(src.b) / src.itemSize
}

// At returns the i-th entry; it panics if i is out of range.
func (src DroppedStatsList) At(i int) DroppedStat {
	p := src.b[i*src.itemSize : (i+1)*src.itemSize]
	s := DroppedStat{
		Kind:  int32(binary.LittleEndian.Uint32(p[0:])),
		DbOid: binary.LittleEndian.Uint32(p[4:]),
		ObjID: uint64(binary.LittleEndian.Uint32(p[8:])),
	}
	if src.itemSize >= 16 {
		s.ObjID |= uint64(binary.LittleEndian.Uint32(p[12:])) << 32
	}
	return s
}
