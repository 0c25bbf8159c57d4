package wal

// Noop is an XLOG NOOP record. Its main data means nothing, but its length
// does: walshadow may rewrite records it must hide into NOOPs of the same
// size, so the length is kept rather than validated.
type Noop struct {
	TotLen uint32 // xl_tot_len of the record
	Data   []byte // the main data, aliasing the record
}

func (*Noop) walBody() {}

// Decode fills dst from rec; it cannot fail.
func (dst *Noop) Decode(rec *Record) error {
	*dst = Noop{TotLen: rec.Header.TotLen, Data: rec.MainData}
	return nil
}

// NextOID is an XLOG NEXTOID record: the OID counter advanced past a
// preallocated batch.
type NextOID struct {
	NextOID uint32
}

func (*NextOID) walBody() {}

// Decode parses rec's main data, reusing dst.
func (dst *NextOID) Decode(rec *Record) error {
	*dst = NextOID{}
	c := newMainDataCursor(rec, "nextoid")
	if err := c.need(4, "oid"); err != nil {
		return err
	}
	dst.NextOID = c.u32()
	return nil
}

// Switch is an XLOG SWITCH record: the rest of the segment is unused.
type Switch struct{}

func (*Switch) walBody() {}

// Decode accepts any SWITCH record.
func (*Switch) Decode(*Record) error { return nil }

// FPI is an XLOG FPI or FPI_FOR_HINT record: full-page images only, carried
// in the record's block references (Record.Blocks).
type FPI struct {
	ForHint bool // FPI_FOR_HINT: taken because hint bits changed (checksums / wal_log_hints)
}

func (*FPI) walBody() {}

// Decode fills dst from rec; it cannot fail.
func (dst *FPI) Decode(rec *Record) error {
	*dst = FPI{ForHint: rec.RmgrInfo() == XLogFPIForHint}
	return nil
}

// BackupEnd is an XLOG BACKUP_END record: the end of an online base backup
// that started at StartLSN.
type BackupEnd struct {
	StartLSN LSN
}

func (*BackupEnd) walBody() {}

// Decode parses rec's main data, reusing dst.
func (dst *BackupEnd) Decode(rec *Record) error {
	*dst = BackupEnd{}
	c := newMainDataCursor(rec, "backup end")
	if err := c.need(8, "start LSN"); err != nil {
		return err
	}
	dst.StartLSN = LSN(c.u64())
	return nil
}

// FPWChange is an XLOG FPW_CHANGE record: full_page_writes was changed.
type FPWChange struct {
	FullPageWrites bool
}

func (*FPWChange) walBody() {}

// Decode parses rec's main data, reusing dst.
func (dst *FPWChange) Decode(rec *Record) error {
	*dst = FPWChange{}
	c := newMainDataCursor(rec, "fpw change")
	if err := c.need(1, "full_page_writes"); err != nil {
		return err
	}
	dst.FullPageWrites = c.u8() != 0
	return nil
}
