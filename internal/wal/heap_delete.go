package wal

import "encoding/binary"

// HeapDelete is XLOG_HEAP_DELETE: the tuple at (Block, OffNum) gets xmax.
type HeapDelete struct {
	Rel         RelFileNode
	Block       uint32
	OffNum      uint16
	Xmax        uint32
	InfobitsSet uint8 // XLHL*
	Flags       uint8 // XLHDelete*

	// HasOldTuple reports the replica identity logged after xl_heap_delete
	// (wal_level=logical only): the whole old row with
	// XLHDeleteContainsOldTuple (REPLICA IDENTITY FULL), only the key
	// columns, the rest NULL, with XLHDeleteContainsOldKey.
	HasOldTuple bool
	OldTuple    HeapTuple
}

func (*HeapDelete) walBody() {}

// Decode parses rec, an XLOG_HEAP_DELETE record. OldTuple aliases rec.
func (dst *HeapDelete) Decode(rec *Record) error {
	const what = "heap delete"
	if err := heapCheckOp(rec, what, RmgrHeap, XLogHeapDelete); err != nil {
		return err
	}
	*dst = HeapDelete{}
	md := rec.MainData
	if len(md) < sizeOfHeapDelete {
		return errorf(rec.LSN, KindCorrupt, "%s: main data %d bytes, want >= %d", what, len(md), sizeOfHeapDelete)
	}
	dst.Xmax = binary.LittleEndian.Uint32(md[0:])
	dst.OffNum = binary.LittleEndian.Uint16(md[4:])
	dst.InfobitsSet = md[6]
	dst.Flags = md[7]
	b, err := heapBlock0(rec, what)
	if err != nil {
		return err
	}
	dst.Rel, dst.Block = b.Rel, b.BlockNum
	old := md[sizeOfHeapDelete:]
	if dst.Flags&XLHDeleteContainsOld == 0 {
		if len(old) != 0 {
			return errorf(rec.LSN, KindCorrupt, "%s: %d bytes after xl_heap_delete but flags 0x%02X log no old tuple", what, len(old), dst.Flags)
		}
		return nil
	}
	if err := dst.OldTuple.decode(rec.LSN, what+" old tuple", old); err != nil {
		return err
	}
	dst.HasOldTuple = true
	return nil
}

// IsSuper reports that this delete kills an aborted speculative insertion
// rather than a committed-visible row.
func (src *HeapDelete) IsSuper() bool { return src.Flags&XLHDeleteIsSuper != 0 }

// IsPartitionMove reports that the row moved to another partition (an UPDATE
// of the partition key); the new version is an insert elsewhere.
func (src *HeapDelete) IsPartitionMove() bool { return src.Flags&XLHDeleteIsPartitionMove != 0 }
