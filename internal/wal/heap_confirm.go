package wal

import "encoding/binary"

// HeapConfirm is XLOG_HEAP_CONFIRM: the speculative insertion at
// (Block, OffNum) succeeded (INSERT ... ON CONFLICT found no conflict).
type HeapConfirm struct {
	Rel    RelFileNode
	Block  uint32
	OffNum uint16
}

func (*HeapConfirm) walBody() {}

// Decode parses rec, an XLOG_HEAP_CONFIRM record.
func (dst *HeapConfirm) Decode(rec *Record) error {
	const what = "heap confirm"
	if err := heapCheckOp(rec, what, RmgrHeap, XLogHeapConfirm); err != nil {
		return err
	}
	*dst = HeapConfirm{}
	if n := len(rec.MainData); n != sizeOfHeapConfirm {
		return errorf(rec.LSN, KindCorrupt, "%s: main data %d bytes, want %d", what, n, sizeOfHeapConfirm)
	}
	b, err := heapBlock0(rec, what)
	if err != nil {
		return err
	}
	dst.Rel, dst.Block = b.Rel, b.BlockNum
	dst.OffNum = binary.LittleEndian.Uint16(rec.MainData)
	return nil
}
