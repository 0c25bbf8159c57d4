package wal

// Heap2Opaque is a Heap2 record whose body this package does not interpret:
// REWRITE, the prune/vacuum/freeze family, VISIBLE and LOCK_UPDATED. They
// matter to a page store replaying heap pages, not to row decoding.
type Heap2Opaque struct {
	Op   uint8  // xl_info & XLogHeapOpMask
	Name string // pg_waldump's name, which depends on the major: 0x10 is PRUNE in 15/16, PRUNE_ON_ACCESS in 17+
}

func (*Heap2Opaque) walBody() {}

// Decode records rec's opcode and name. rec must be a Heap2 record of one of
// the opaque types.
func (dst *Heap2Opaque) Decode(rec *Record) error {
	*dst = Heap2Opaque{}
	if rec.Header.RmID != RmgrHeap2 {
		return errorf(rec.LSN, KindCorrupt, "heap2 opaque: record is %s, want Heap2", rec.Header.RmID)
	}
	if rec.Layout == nil {
		return errorf(rec.LSN, KindUnsupported, "heap2 opaque: record has no layout (PostgreSQL major)")
	}
	name := heap2Identify(rec.Layout, rec.Header.Info)
	if name == "" {
		return errorf(rec.LSN, KindUnsupported, "unknown Heap2 record type: info 0x%02X", rec.Header.Info)
	}
	op := rec.Header.Info & XLogHeapOpMask
	if op == XLogHeap2MultiInsert || op == XLogHeap2NewCID {
		return errorf(rec.LSN, KindCorrupt, "heap2 opaque: %s has a typed body", name)
	}
	dst.Op, dst.Name = op, name
	return nil
}

// heap2Identify returns pg_waldump's name for an RM_HEAP2 record type in the
// given major (heap2_identify), e.g. "MULTI_INSERT+INIT", or "" for a
// combination PostgreSQL never writes or a nil layout where the name depends
// on the major. info is xl_info; its generic low bits are ignored.
func heap2Identify(l *Layout, info uint8) string {
	switch info & XLRRmgrInfoMask {
	case XLogHeap2Rewrite:
		return "REWRITE"
	case XLogHeap2Visible:
		return "VISIBLE"
	case XLogHeap2MultiInsert:
		return "MULTI_INSERT"
	case XLogHeap2MultiInsert | XLogHeapInitPage:
		return "MULTI_INSERT+INIT"
	case XLogHeap2LockUpdated:
		return "LOCK_UPDATED"
	case XLogHeap2NewCID:
		return "NEW_CID"
	case 0x10, 0x20, 0x30:
		if l == nil {
			return ""
		}
		names := [...]string{"PRUNE", "VACUUM", "FREEZE_PAGE"}
		if l.HeapPruneFormat >= 17 {
			names = [...]string{"PRUNE_ON_ACCESS", "PRUNE_VACUUM_SCAN", "PRUNE_VACUUM_CLEANUP"}
		}
		return names[(info&XLogHeapOpMask)>>4-1]
	}
	return ""
}
