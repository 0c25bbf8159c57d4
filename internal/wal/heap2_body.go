package wal

// decodeHeap2Body decodes an RM_HEAP2 record: MULTI_INSERT and NEW_CID into
// typed bodies, the other opcodes into Heap2Opaque. Record types pg_waldump
// cannot name (INIT_PAGE on anything but MULTI_INSERT) are KindUnsupported.
func decodeHeap2Body(rec *Record) (Body, error) {
	switch rec.Header.Info & XLRRmgrInfoMask {
	case XLogHeap2MultiInsert, XLogHeap2MultiInsert | XLogHeapInitPage:
		return heapDecodeInto[HeapMultiInsert](rec)
	case XLogHeap2NewCID:
		return heapDecodeInto[HeapNewCID](rec)
	}
	return heapDecodeInto[Heap2Opaque](rec)
}
