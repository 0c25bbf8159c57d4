package wal

// Body is the typed body of a record: one struct per record type, decoded by
// DecodeBody. Record types this package does not interpret decode to Opaque.
type Body interface {
	walBody()
}

// Opaque is a record whose body is deliberately not interpreted (index
// records, prune/vacuum, ...). Its bytes are still framed and CRC-checked.
type Opaque struct {
	Rmgr RmgrID
	Info uint8 // rmgr-owned bits of xl_info
}

func (Opaque) walBody() {}

// DecodeBody decodes the record's body into its typed form: heap and heap2
// row records, transaction, storage, relmap, standby and XLOG records. Every
// other resource manager (indexes, sequences, ...) decodes to Opaque. Errors
// are *Error values naming the record's LSN.
func DecodeBody(rec *Record) (Body, error) {
	switch rec.Header.RmID {
	case RmgrHeap:
		return decodeHeapBody(rec)
	case RmgrHeap2:
		return decodeHeap2Body(rec)
	case RmgrXact:
		return decodeXactBody(rec)
	case RmgrSmgr:
		return decodeSmgrBody(rec)
	case RmgrRelMap:
		return decodeRelMapBody(rec)
	case RmgrStandby:
		return decodeStandbyBody(rec)
	case RmgrXLOG:
		return decodeXLOGBody(rec)
	}
	return Opaque{Rmgr: rec.Header.RmID, Info: rec.RmgrInfo()}, nil
}
