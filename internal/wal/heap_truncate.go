package wal

import "encoding/binary"

// HeapTruncate is XLOG_HEAP_TRUNCATE, written only at wal_level=logical for
// logical decoding; redo does nothing (storage is handled by smgr records).
// It names relations by OID, not relfilenode, and has no block references.
type HeapTruncate struct {
	DbID   uint32
	Flags  uint8 // XLHTruncate*
	relids []byte
}

func (*HeapTruncate) walBody() {}

// Decode parses rec, an XLOG_HEAP_TRUNCATE record. The relids alias rec.
func (dst *HeapTruncate) Decode(rec *Record) error {
	const what = "heap truncate"
	if err := heapCheckOp(rec, what, RmgrHeap, XLogHeapTruncate); err != nil {
		return err
	}
	*dst = HeapTruncate{}
	md := rec.MainData
	if len(md) < sizeOfHeapTruncate {
		return errorf(rec.LSN, KindCorrupt, "%s: main data %d bytes, want >= %d", what, len(md), sizeOfHeapTruncate)
	}
	n := binary.LittleEndian.Uint32(md[4:])
	if uint64(len(md)-sizeOfHeapTruncate) != 4*uint64(n) {
		return errorf(rec.LSN, KindCorrupt, "%s: nrelids %d needs %d bytes of relids, main data has %d", what, n, 4*uint64(n), len(md)-sizeOfHeapTruncate)
	}
	dst.DbID = binary.LittleEndian.Uint32(md[0:])
	dst.Flags = md[8]
	dst.relids = md[sizeOfHeapTruncate:]
	return nil
}

// NumRelIDs is nrelids.
func (src *HeapTruncate) NumRelIDs() int { return len(src.relids) / 4 }

// RelID returns the i-th truncated relation's OID (pg_class.oid).
func (src *HeapTruncate) RelID(i int) uint32 { return binary.LittleEndian.Uint32(src.relids[4*i:]) }

// AppendRelIDs appends all relation OIDs to dst and returns it.
func (src *HeapTruncate) AppendRelIDs(dst []uint32) []uint32 {
	for i := 0; i < src.NumRelIDs(); i++ {
		dst = append(dst, src.RelID(i))
	}
	return dst
}

// Cascade reports TRUNCATE ... CASCADE.
func (src *HeapTruncate) Cascade() bool { return src.Flags&XLHTruncateCascade != 0 }

// RestartSeqs reports TRUNCATE ... RESTART IDENTITY.
func (src *HeapTruncate) RestartSeqs() bool { return src.Flags&XLHTruncateRestartSeqs != 0 }
