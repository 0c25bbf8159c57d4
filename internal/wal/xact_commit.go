package wal

// XactEnd is the parsed form shared by commit and abort records
// (xl_xact_parsed_commit / xl_xact_parsed_abort, built like ParseCommitRecord
// and ParseAbortRecord in rmgrdesc/xactdesc.c). Lists alias the record.
type XactEnd struct {
	Op       uint8 // XLogXactCommit, XLogXactCommitPrepared, XLogXactAbort or XLogXactAbortPrepared
	XactTime int64 // TimestampTz: microseconds since 2000-01-01 00:00 UTC
	Xinfo    uint32

	DbOid uint32 // valid with XactXinfoHasDBInfo
	TsOid uint32

	Subxacts     XIDList
	Rels         RelFileNodeList  // relations whose storage is dropped
	DroppedStats DroppedStatsList // statistics entries dropped
	Invals       InvalMessages    // commit only; abort records never carry them

	TwoPhaseXID uint32 // the prepared transaction, with XactXinfoHasTwoPhase
	GID         []byte // its GID (without NUL), with XactXinfoHasGID

	OriginLSN  LSN // with XactXinfoHasOrigin; the origin id is Record.Origin
	OriginTime int64
}

// HasInfo reports whether xinfo has all bits of flag set.
func (src *XactEnd) HasInfo(flag uint32) bool { return src.Xinfo&flag == flag }

// IsPrepared reports whether this finishes a prepared transaction
// (COMMIT PREPARED / ROLLBACK PREPARED).
func (src *XactEnd) IsPrepared() bool {
	return src.Op == XLogXactCommitPrepared || src.Op == XLogXactAbortPrepared
}

// RelcacheInitFileInval reports XACT_COMPLETION_UPDATE_RELCACHE_FILE.
func (src *XactEnd) RelcacheInitFileInval() bool {
	return src.Xinfo&XactCompletionUpdateRelcacheFile != 0
}

// decode parses the main data of a commit (withInvals) or abort record.
func (dst *XactEnd) decode(rec *Record, what string, withInvals bool) error {
	*dst = XactEnd{Op: XactOpcode(rec.Header.Info)}
	layout, err := layoutOf(rec, what)
	if err != nil {
		return err
	}
	c := newMainDataCursor(rec, what)
	if err := c.need(8, "xact_time"); err != nil {
		return err
	}
	dst.XactTime = int64(c.u64())
	if rec.Header.Info&XLogXactHasInfo != 0 {
		if err := c.need(4, "xinfo"); err != nil {
			return err
		}
		dst.Xinfo = c.u32()
	}
	x := dst.Xinfo
	if x&XactXinfoHasDBInfo != 0 {
		if err := c.need(8, "dbinfo"); err != nil {
			return err
		}
		dst.DbOid = c.u32()
		dst.TsOid = c.u32()
	}
	if x&XactXinfoHasSubxacts != 0 {
		b, err := c.countedArray(4, "subxacts")
		if err != nil {
			return err
		}
		dst.Subxacts = XIDList{b}
	}
	if x&XactXinfoHasRelFileNodes != 0 {
		b, err := c.countedArray(relFileNodeSize, "relfilenodes")
		if err != nil {
			return err
		}
		dst.Rels = RelFileNodeList{b}
	}
	if x&XactXinfoHasDroppedStats != 0 {
		b, err := c.countedArray(layout.DroppedStatsItemSize, "dropped stats")
		if err != nil {
			return err
		}
		dst.DroppedStats = DroppedStatsList{b, layout.DroppedStatsItemSize}
	}
	// ParseAbortRecord ignores the bit: abort records have no messages.
	if withInvals && x&XactXinfoHasInvals != 0 {
		n, err := c.count("invalidation messages")
		if err != nil {
			return err
		}
		b, err := c.array(n, InvalMessageSize, "invalidation messages")
		if err != nil {
			return err
		}
		if err := dst.Invals.Decode(rec, b, n); err != nil {
			return err
		}
	}
	if x&XactXinfoHasTwoPhase != 0 {
		if err := c.need(4, "twophase xid"); err != nil {
			return err
		}
		dst.TwoPhaseXID = c.u32()
		if x&XactXinfoHasGID != 0 {
			if dst.GID, err = c.cstring("GID"); err != nil {
				return err
			}
		}
	}
	// xl_xact_origin follows unaligned, which reading by offset ignores.
	if x&XactXinfoHasOrigin != 0 {
		if err := c.need(16, "origin"); err != nil {
			return err
		}
		dst.OriginLSN = LSN(c.u64())
		dst.OriginTime = int64(c.u64())
	}
	return nil
}

// XactCommit is a COMMIT or COMMIT_PREPARED record.
type XactCommit struct {
	XactEnd
}

func (*XactCommit) walBody() {}

// Decode parses rec's main data, reusing dst.
func (dst *XactCommit) Decode(rec *Record) error {
	return dst.decode(rec, "xact commit", true)
}

// XactAbort is an ABORT or ABORT_PREPARED record. A subtransaction abort is
// an ABORT whose Record.Header.XID is the subxact's xid.
type XactAbort struct {
	XactEnd
}

func (*XactAbort) walBody() {}

// Decode parses rec's main data, reusing dst.
func (dst *XactAbort) Decode(rec *Record) error {
	return dst.decode(rec, "xact abort", false)
}
