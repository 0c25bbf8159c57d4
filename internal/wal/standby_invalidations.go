package wal

// standbyInvalidationsHeaderSize is offsetof(xl_invalidations, msgs).
const standbyInvalidationsHeaderSize = 16

// StandbyInvalidations is a Standby INVALIDATIONS record (xl_invalidations):
// invalidation messages of a transaction that committed without an xid (so
// without a commit record), e.g. VACUUM's in-place pg_class updates.
type StandbyInvalidations struct {
	DbOid                 uint32
	TsOid                 uint32
	RelcacheInitFileInval bool
	Msgs                  InvalMessages
}

func (*StandbyInvalidations) walBody() {}

// Decode parses rec's main data, reusing dst.
func (dst *StandbyInvalidations) Decode(rec *Record) error {
	*dst = StandbyInvalidations{}
	c := newMainDataCursor(rec, "standby invalidations")
	if err := c.need(standbyInvalidationsHeaderSize-4, "xl_invalidations"); err != nil {
		return err
	}
	dst.DbOid = c.u32()
	dst.TsOid = c.u32()
	dst.RelcacheInitFileInval = c.u8() != 0
	c.skip(3) // padding after the bool
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
