package wal

import "encoding/binary"

// HeapInsert is XLOG_HEAP_INSERT: one new tuple on block 0.
type HeapInsert struct {
	InitPage bool // XLOG_HEAP_INIT_PAGE: the tuple is the first on a fresh page
	Rel      RelFileNode
	Block    uint32 // heap block of the new tuple
	OffNum   uint16 // its line pointer
	Flags    uint8  // XLHInsert*

	// HasTuple is false when block 0 carries no data: the block has a
	// full-page image and the relation is not logically logged (wal_level
	// replica, catalogs), so the tuple is only in the image at OffNum.
	HasTuple bool
	Tuple    HeapTuple
}

func (*HeapInsert) walBody() {}

// Decode parses rec, an XLOG_HEAP_INSERT record. Tuple aliases rec.
func (dst *HeapInsert) Decode(rec *Record) error {
	const what = "heap insert"
	if err := heapCheckOp(rec, what, RmgrHeap, XLogHeapInsert); err != nil {
		return err
	}
	*dst = HeapInsert{InitPage: rec.Header.Info&XLogHeapInitPage != 0}
	if n := len(rec.MainData); n != sizeOfHeapInsert {
		return errorf(rec.LSN, KindCorrupt, "%s: main data %d bytes, want %d", what, n, sizeOfHeapInsert)
	}
	dst.OffNum = binary.LittleEndian.Uint16(rec.MainData[0:])
	dst.Flags = rec.MainData[2]
	b, err := heapBlock0(rec, what)
	if err != nil {
		return err
	}
	dst.Rel, dst.Block = b.Rel, b.BlockNum
	if len(b.Data) == 0 {
		if dst.Flags&XLHInsertContainsNewTuple != 0 {
			// KEEP_DATA goes with this flag: the writer never drops the tuple.
			return errorf(rec.LSN, KindCorrupt, "%s: flags 0x%02X claim a new tuple but block 0 has no data", what, dst.Flags)
		}
		return nil
	}
	if err := dst.Tuple.decode(rec.LSN, what+" tuple", b.Data); err != nil {
		return err
	}
	dst.HasTuple = true
	return nil
}

// IsSpeculative reports an INSERT ... ON CONFLICT tuple, final only after a
// matching HeapConfirm (or killed by a HeapDelete with XLHDeleteIsSuper).
func (src *HeapInsert) IsSpeculative() bool { return src.Flags&XLHInsertIsSpeculative != 0 }
