package wal

import "encoding/binary"

// HeapNewCID is XLOG_HEAP2_NEW_CID, written at wal_level=logical before each
// catalog tuple change so logical decoding can rebuild the transaction's
// command ids (cmin/cmax) for catalog snapshots. Redo ignores it and it has
// no block references.
type HeapNewCID struct {
	TopXID   uint32 // top-level transaction id
	Cmin     uint32
	Cmax     uint32
	ComboCID uint32 // for debugging only
	Target   RelFileNode
	// TargetBlock and TargetOffNum are target_tid, the changed tuple.
	TargetBlock  uint32
	TargetOffNum uint16
}

func (*HeapNewCID) walBody() {}

// Decode parses rec, an XLOG_HEAP2_NEW_CID record.
func (dst *HeapNewCID) Decode(rec *Record) error {
	const what = "heap2 new cid"
	if err := heapCheckOp(rec, what, RmgrHeap2, XLogHeap2NewCID); err != nil {
		return err
	}
	*dst = HeapNewCID{}
	md := rec.MainData
	if len(md) != sizeOfHeapNewCID {
		return errorf(rec.LSN, KindCorrupt, "%s: main data %d bytes, want %d", what, len(md), sizeOfHeapNewCID)
	}
	dst.TopXID = binary.LittleEndian.Uint32(md[0:])
	dst.Cmin = binary.LittleEndian.Uint32(md[4:])
	dst.Cmax = binary.LittleEndian.Uint32(md[8:])
	dst.ComboCID = binary.LittleEndian.Uint32(md[12:])
	dst.Target = DecodeRelFileNode(md[16:])
	// ItemPointerData: BlockIdData{bi_hi, bi_lo} then ip_posid.
	dst.TargetBlock = uint32(binary.LittleEndian.Uint16(md[28:]))<<16 | uint32(binary.LittleEndian.Uint16(md[30:]))
	dst.TargetOffNum = binary.LittleEndian.Uint16(md[32:])
	return nil
}
