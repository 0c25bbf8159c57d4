package wal

// restorePointNameSize is MAXFNAMELEN, the size of xl_restore_point.rp_name.
const restorePointNameSize = 64

// RestorePoint is an XLOG RESTORE_POINT record (pg_create_restore_point).
type RestorePoint struct {
	Time int64  // TimestampTz
	Name []byte // without its NUL, aliasing the record
}

func (*RestorePoint) walBody() {}

// Decode parses rec's main data, reusing dst.
func (dst *RestorePoint) Decode(rec *Record) error {
	const what = "restore point"
	*dst = RestorePoint{}
	c := newMainDataCursor(rec, what)
	if err := c.need(8+restorePointNameSize, "xl_restore_point"); err != nil {
		return err
	}
	dst.Time = int64(c.u64())
	name := c.src[c.off : c.off+restorePointNameSize]
	for i, b := range name {
		if b == 0 {
			dst.Name = name[:i:i]
			return nil
		}
	}
	return errorf(rec.LSN, KindCorrupt, "%s: name has no terminating NUL within %d bytes", what, restorePointNameSize)
}

// endOfRecoverySize is the used part of xl_end_of_recovery in PG15/16:
// end_time and two timeline ids. PG17 appends wal_level.
const endOfRecoverySize = 16

// EndOfRecovery is an XLOG END_OF_RECOVERY record (xl_end_of_recovery),
// written when a standby is promoted without a checkpoint.
type EndOfRecovery struct {
	EndTime        int64 // TimestampTz
	ThisTimeLineID uint32
	PrevTimeLineID uint32
	WalLevel       WalLevel // PG17+; WalLevelUnknown before
}

func (*EndOfRecovery) walBody() {}

// Decode parses rec's main data, reusing dst.
func (dst *EndOfRecovery) Decode(rec *Record) error {
	const what = "end of recovery"
	*dst = EndOfRecovery{WalLevel: WalLevelUnknown}
	layout, err := layoutOf(rec, what)
	if err != nil {
		return err
	}
	c := newMainDataCursor(rec, what)
	size := endOfRecoverySize
	if layout.HasCheckpointRedo {
		size += 4
	}
	if err := c.need(size, "xl_end_of_recovery"); err != nil {
		return err
	}
	dst.EndTime = int64(c.u64())
	dst.ThisTimeLineID = c.u32()
	dst.PrevTimeLineID = c.u32()
	if layout.HasCheckpointRedo {
		dst.WalLevel = WalLevel(int32(c.u32()))
	}
	return nil
}

// OverwriteContrecord is an XLOG OVERWRITE_CONTRECORD record: recovery
// found a record cut off at OverwrittenLSN and wrote new WAL over it. The
// page carrying it has XLP_FIRST_IS_OVERWRITE_CONTRECORD set.
type OverwriteContrecord struct {
	OverwrittenLSN LSN
	Time           int64 // TimestampTz
}

func (*OverwriteContrecord) walBody() {}

// Decode parses rec's main data, reusing dst.
func (dst *OverwriteContrecord) Decode(rec *Record) error {
	*dst = OverwriteContrecord{}
	c := newMainDataCursor(rec, "overwrite contrecord")
	if err := c.need(16, "xl_overwrite_contrecord"); err != nil {
		return err
	}
	dst.OverwrittenLSN = LSN(c.u64())
	dst.Time = int64(c.u64())
	return nil
}
