package wal

// Opcodes and flag bits of the Heap and Heap2 resource managers, named after
// src/include/access/heapam_xlog.h (identical in PostgreSQL 15–18 unless
// noted). The opcode is xl_info & XLogHeapOpMask.
const (
	XLogHeapInsert    = 0x00
	XLogHeapDelete    = 0x10
	XLogHeapUpdate    = 0x20
	XLogHeapTruncate  = 0x30
	XLogHeapHotUpdate = 0x40
	XLogHeapConfirm   = 0x50
	XLogHeapLock      = 0x60
	XLogHeapInplace   = 0x70
	XLogHeapOpMask    = 0x70
	XLogHeapInitPage  = 0x80 // the page is re-initialised (INSERT, UPDATE, HOT_UPDATE, MULTI_INSERT)

	XLogHeap2Rewrite            = 0x00
	XLogHeap2Prune              = 0x10 // PG15/16
	XLogHeap2Vacuum             = 0x20 // PG15/16
	XLogHeap2FreezePage         = 0x30 // PG15/16
	XLogHeap2Visible            = 0x40
	XLogHeap2MultiInsert        = 0x50
	XLogHeap2LockUpdated        = 0x60
	XLogHeap2NewCID             = 0x70
	XLogHeap2PruneOnAccess      = 0x10 // PG17+, xl_heap_prune format
	XLogHeap2PruneVacuumScan    = 0x20 // PG17+
	XLogHeap2PruneVacuumCleanup = 0x30 // PG17+
)

// xl_heap_insert / xl_heap_multi_insert flags (XLH_INSERT_*).
const (
	XLHInsertAllVisibleCleared = 1 << 0
	XLHInsertLastInMulti       = 1 << 1
	XLHInsertIsSpeculative     = 1 << 2
	XLHInsertContainsNewTuple  = 1 << 3
	XLHInsertOnToastRelation   = 1 << 4
	XLHInsertAllFrozenSet      = 1 << 5
)

// xl_heap_update flags (XLH_UPDATE_*).
const (
	XLHUpdateOldAllVisibleCleared = 1 << 0
	XLHUpdateNewAllVisibleCleared = 1 << 1
	XLHUpdateContainsOldTuple     = 1 << 2
	XLHUpdateContainsOldKey       = 1 << 3
	XLHUpdateContainsNewTuple     = 1 << 4
	XLHUpdatePrefixFromOld        = 1 << 5
	XLHUpdateSuffixFromOld        = 1 << 6
	XLHUpdateContainsOld          = XLHUpdateContainsOldTuple | XLHUpdateContainsOldKey
)

// xl_heap_delete flags (XLH_DELETE_*).
const (
	XLHDeleteAllVisibleCleared = 1 << 0
	XLHDeleteContainsOldTuple  = 1 << 1
	XLHDeleteContainsOldKey    = 1 << 2
	XLHDeleteIsSuper           = 1 << 3 // kills an aborted speculative insertion
	XLHDeleteIsPartitionMove   = 1 << 4
	XLHDeleteContainsOld       = XLHDeleteContainsOldTuple | XLHDeleteContainsOldKey
)

// xl_heap_truncate flags (XLH_TRUNCATE_*).
const (
	XLHTruncateCascade     = 1 << 0
	XLHTruncateRestartSeqs = 1 << 1
)

// infobits_set of xl_heap_delete, xl_heap_update (old tuple) and xl_heap_lock
// (XLHL_*): the xmax-related infomask bits redo sets on the tuple.
const (
	XLHLXmaxIsMulti    = 0x01
	XLHLXmaxLockOnly   = 0x02
	XLHLXmaxExclLock   = 0x04
	XLHLXmaxKeyshrLock = 0x08
	XLHLKeysUpdated    = 0x10
)

// xl_heap_lock / xl_heap_lock_updated flags (XLH_LOCK_*).
const XLHLockAllFrozenCleared = 0x01

// Fixed sizes of the heap WAL structs (SizeOfHeap* in access/heapam_xlog.h).
const (
	sizeOfHeapHeader          = 5
	sizeOfHeapInsert          = 3
	sizeOfHeapDelete          = 8
	sizeOfHeapUpdate          = 14
	sizeOfHeapTruncate        = 12
	sizeOfHeapConfirm         = 2
	sizeOfHeapLock            = 8
	sizeOfHeapInplace         = 2  // PG15–17
	minSizeOfHeapInplace18    = 20 // PG18: header before the invalidation messages
	sizeOfHeapMultiInsert     = 4
	sizeOfMultiInsertTuple    = 7
	sizeOfHeapNewCID          = 34
	heapInvalMsgSize          = 16 // SharedInvalidationMessage
	sizeofHeapTupleHeaderData = 23 // SizeofHeapTupleHeader: offset of t_bits
)

// heapCheckOp verifies that rec belongs to rmgr and carries opcode op, so a
// decoder never reinterprets another record type's bytes.
func heapCheckOp(rec *Record, what string, rmgr RmgrID, op uint8) error {
	if rec.Header.RmID != rmgr || rec.Header.Info&XLogHeapOpMask != op {
		return errorf(rec.LSN, KindCorrupt, "%s: record is %s info 0x%02X, want %s opcode 0x%02X",
			what, rec.Header.RmID, rec.Header.Info, rmgr, op)
	}
	return nil
}

// heapBlock0 returns block 0, the heap page every Heap record except
// TRUNCATE modifies. Blocks are looked up by id: 17.12/18.6 add VM blocks.
func heapBlock0(rec *Record, what string) (*BlockRef, error) {
	b := rec.Block(0)
	if b == nil {
		return nil, errorf(rec.LSN, KindCorrupt, "%s: no block reference 0", what)
	}
	return b, nil
}
