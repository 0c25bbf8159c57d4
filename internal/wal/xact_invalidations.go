package wal

// XactInvalidations is a Transaction-rmgr INVALIDATIONS record
// (xl_xact_invals): at wal_level=logical, the invalidation messages of each
// command of a transaction, so logical decoding can apply them mid-stream.
type XactInvalidations struct {
	Msgs InvalMessages
}

func (*XactInvalidations) walBody() {}

// Decode parses rec's main data, reusing dst.
func (dst *XactInvalidations) Decode(rec *Record) error {
	*dst = XactInvalidations{}
	c := newMainDataCursor(rec, "xact invalidations")
	n, err := c.count("invalidation messages")
	if err != nil {
		return err
	}
	b, err := c.array(n, InvalMessageSize, "invalidation messages")
	if err != nil {
		return err
	}
	return dst.Msgs.Decode(rec, b, n)
}
