package wal

// decodeHeapBody decodes an RM_HEAP record into its typed body. Record types
// pg_waldump cannot name (the INIT_PAGE bit on an opcode that never sets it)
// are KindUnsupported.
func decodeHeapBody(rec *Record) (Body, error) {
	info := rec.Header.Info & XLRRmgrInfoMask
	if heapIdentify(info) == "" {
		return nil, errorf(rec.LSN, KindUnsupported, "unknown Heap record type: info 0x%02X", rec.Header.Info)
	}
	switch info & XLogHeapOpMask {
	case XLogHeapInsert:
		return heapDecodeInto[HeapInsert](rec)
	case XLogHeapDelete:
		return heapDecodeInto[HeapDelete](rec)
	case XLogHeapUpdate, XLogHeapHotUpdate:
		return heapDecodeInto[HeapUpdate](rec)
	case XLogHeapTruncate:
		return heapDecodeInto[HeapTruncate](rec)
	case XLogHeapConfirm:
		return heapDecodeInto[HeapConfirm](rec)
	case XLogHeapLock:
		return heapDecodeInto[HeapLock](rec)
	default: // XLogHeapInplace: the opcode has 3 bits, all 8 are in use
		return heapDecodeInto[HeapInplace](rec)
	}
}

// heapDecodeInto allocates a T, decodes rec into it and returns it as a Body.
func heapDecodeInto[T any, P interface {
	*T
	Body
	Decode(*Record) error
}](rec *Record) (Body, error) {
	v := P(new(T))
	if err := v.Decode(rec); err != nil {
		return nil, err
	}
	return v, nil
}

// heapIdentify returns pg_waldump's name for an RM_HEAP record type
// (heap_identify), e.g. "INSERT+INIT", or "" for a combination PostgreSQL
// never writes. info is xl_info; its generic low bits are ignored.
func heapIdentify(info uint8) string {
	switch info & XLRRmgrInfoMask {
	case XLogHeapInsert:
		return "INSERT"
	case XLogHeapInsert | XLogHeapInitPage:
		return "INSERT+INIT"
	case XLogHeapDelete:
		return "DELETE"
	case XLogHeapUpdate:
		return "UPDATE"
	case XLogHeapUpdate | XLogHeapInitPage:
		return "UPDATE+INIT"
	case XLogHeapHotUpdate:
		return "HOT_UPDATE"
	case XLogHeapHotUpdate | XLogHeapInitPage:
		return "HOT_UPDATE+INIT"
	case XLogHeapTruncate:
		return "TRUNCATE"
	case XLogHeapConfirm:
		return "HEAP_CONFIRM"
	case XLogHeapLock:
		return "LOCK"
	case XLogHeapInplace:
		return "INPLACE"
	}
	return ""
}
