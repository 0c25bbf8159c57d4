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
