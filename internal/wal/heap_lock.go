package wal

import "encoding/binary"

// HeapLock is XLOG_HEAP_LOCK: a row lock (SELECT ... FOR UPDATE/SHARE,
// foreign-key checks) sets xmax on the tuple at (Block, OffNum).
type HeapLock struct {
	Rel         RelFileNode
	Block       uint32
	OffNum      uint16
	LockingXID  uint32 // xmax; a MultiXactId when InfobitsSet has XLHLXmaxIsMulti
	InfobitsSet uint8  // XLHL*
	Flags       uint8  // XLHLockAllFrozenCleared
}

func (*HeapLock) walBody() {}

// Decode parses rec, an XLOG_HEAP_LOCK record.
func (dst *HeapLock) Decode(rec *Record) error {
	const what = "heap lock"
	if err := heapCheckOp(rec, what, RmgrHeap, XLogHeapLock); err != nil {
		return err
	}
	*dst = HeapLock{}
	md := rec.MainData
	if len(md) != sizeOfHeapLock {
		return errorf(rec.LSN, KindCorrupt, "%s: main data %d bytes, want %d", what, len(md), sizeOfHeapLock)
	}
	b, err := heapBlock0(rec, what)
	if err != nil {
		return err
	}
	dst.Rel, dst.Block = b.Rel, b.BlockNum
	dst.LockingXID = binary.LittleEndian.Uint32(md[0:])
	dst.OffNum = binary.LittleEndian.Uint16(md[4:])
	dst.InfobitsSet = md[6]
	dst.Flags = md[7]
	return nil
}
