package wal

// XactAssignment is an ASSIGNMENT record (xl_xact_assignment): subxact xids
// reported to standbys once a top-level transaction has more than
// PGPROC_MAX_CACHED_SUBXIDS (64) of them unreported.
type XactAssignment struct {
	XTop     uint32 // the top-level xid
	Subxacts XIDList
}

func (*XactAssignment) walBody() {}

// Decode parses rec's main data, reusing dst.
func (dst *XactAssignment) Decode(rec *Record) error {
	*dst = XactAssignment{}
	c := newMainDataCursor(rec, "xact assignment")
	if err := c.need(4, "xtop"); err != nil {
		return err
	}
	dst.XTop = c.u32()
	b, err := c.countedArray(4, "subxacts")
	if err != nil {
		return err
	}
	dst.Subxacts = XIDList{b}
	return nil
}
