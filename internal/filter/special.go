package filter

import (
	"github.com/walshadow/walshadow/internal/wal"
)

var keepSpecial = Decision{Route: RouteShadow, Class: ClassSpecial}

// xact handles the transaction rmgr: links, dirt and boundaries.
func (f *Filter) xact(rec *wal.Record) (Decision, error) {
	switch wal.XactOpcode(rec.Header.Info) {
	case wal.XLogXactCommit, wal.XLogXactCommitPrepared:
		return f.commit(rec)
	case wal.XLogXactAbort, wal.XLogXactAbortPrepared:
		return f.abort(rec)
	case wal.XLogXactPrepare:
		p := &f.scratch.prepare
		if err := p.Decode(rec); err != nil {
			return Decision{}, wrapBody(err, "prepare")
		}
		// The tree keeps its state until COMMIT PREPARED / ROLLBACK PREPARED.
		for i := 0; i < p.Subxacts.Len(); i++ {
			f.trees.link(p.Subxacts.At(i), p.XID)
		}
		f.trees.markPrepared(p.XID)
	case wal.XLogXactAssignment:
		a := &f.scratch.assignment
		if err := a.Decode(rec); err != nil {
			return Decision{}, wrapBody(err, "assignment")
		}
		for i := 0; i < a.Subxacts.Len(); i++ {
			f.trees.link(a.Subxacts.At(i), a.XTop)
		}
	case wal.XLogXactInvalidations:
		inv := &f.scratch.invals
		if err := inv.Decode(rec); err != nil {
			return Decision{}, wrapBody(err, "invalidations")
		}
		v, err := f.scanInvals(rec, inv.Msgs, nil)
		if err != nil {
			return Decision{}, err
		}
		// A command's invalidations (wal_level=logical) re-dirty its xid, so
		// that a tree whose catalog writes precede the stream's start is still
		// known dirty. Holding here (a command boundary) is pending capture,
		// a later issue; the commit's boundary covers these changes.
		if v.touches {
			f.trees.dirty(rec.Header.XID, rec.LSN)
		}
	default:
		return Decision{}, fatalf(rec, "transaction record with unknown info 0x%02X", rec.Header.Info)
	}
	return keepSpecial, nil
}

// forgetDropped drops state about relation files a commit or abort deleted.
func (f *Filter) forgetDropped(rels wal.RelFileNodeList) {
	for i := 0; i < rels.Len(); i++ {
		r := rels.At(i)
		f.tracker.forget(r.DbOid, r.RelNum)
		delete(f.smgr, r)
	}
}

func (f *Filter) commit(rec *wal.Record) (Decision, error) {
	c := &f.scratch.commit
	if err := c.Decode(rec); err != nil {
		return Decision{}, wrapBody(err, "commit")
	}
	drain := rec.Header.XID
	if c.Op == wal.XLogXactCommitPrepared {
		if !c.HasInfo(wal.XactXinfoHasTwoPhase) {
			return Decision{}, fatalf(rec, "COMMIT PREPARED without the prepared transaction's xid")
		}
		drain = c.TwoPhaseXID
	}
	if drain == 0 {
		return Decision{}, fatalf(rec, "commit record without a transaction id")
	}

	agg := &f.scratch.agg
	*agg = treeAggregate{members: agg.members[:0], oids: agg.oids[:0]}
	f.trees.drain(drain, c.Subxacts, agg)
	f.forgetDropped(c.Rels)

	v, err := f.scanInvals(rec, c.Invals, &agg.oids)
	if err != nil {
		return Decision{}, err
	}
	if agg.dirty && c.HasInfo(wal.XactXinfoHasDBInfo) && c.DbOid != f.cfg.DbOid {
		return Decision{}, fatalf(rec, "transaction %d wrote catalogs of database %d but commits in database %d", drain, f.cfg.DbOid, c.DbOid)
	}
	if !agg.dirty && !v.hit {
		return keepSpecial, nil
	}
	b := &BoundaryInfo{
		Kind:              BoundaryCommit,
		DrainXID:          drain,
		FirstCatalogTouch: agg.firstTouch,
		CaptureAll:        v.captureAll,
		CommitLSN:         rec.LSN,
		NextLSN:           rec.Next,
	}
	if len(agg.oids) > 0 {
		b.AffectedOids = sortUnique(append([]uint32(nil), agg.oids...))
	}
	f.stats.Boundaries++
	if b.CaptureAll {
		f.stats.CaptureAll++
	}
	d := keepSpecial
	d.Boundary = b
	return d, nil
}

func (f *Filter) abort(rec *wal.Record) (Decision, error) {
	a := &f.scratch.abort
	if err := a.Decode(rec); err != nil {
		return Decision{}, wrapBody(err, "abort")
	}
	xid := rec.Header.XID
	if a.Op == wal.XLogXactAbortPrepared {
		if !a.HasInfo(wal.XactXinfoHasTwoPhase) {
			return Decision{}, fatalf(rec, "ROLLBACK PREPARED without the prepared transaction's xid")
		}
		xid = a.TwoPhaseXID
	}
	if xid == 0 {
		return Decision{}, fatalf(rec, "abort record without a transaction id")
	}
	f.scratch.aborted = f.trees.abort(xid, a.Subxacts, f.scratch.aborted[:0])
	f.forgetDropped(a.Rels)
	f.stats.Aborts++
	f.stats.AbortedXIDs += uint64(len(f.scratch.aborted))
	d := keepSpecial
	d.Aborted = f.scratch.aborted
	return d, nil
}

// smgrRecord records main-fork creations and follows the storage a
// catalog-rewriting transaction creates.
func (f *Filter) smgrRecord(rec *wal.Record) (Decision, error) {
	if rec.RmgrInfo() != wal.XLogSmgrCreate {
		return keepSpecial, nil
	}
	c := &f.scratch.smgrCreate
	if err := c.Decode(rec); err != nil {
		return Decision{}, wrapBody(err, "smgr create")
	}
	if c.Fork == wal.ForkMain {
		if f.smgr == nil {
			f.smgr = make(map[wal.RelFileNode]wal.LSN)
		}
		f.smgr[c.Rel] = rec.LSN
	}
	if _, rewrite := f.trees.rootFlags(rec.Header.XID); rewrite {
		if f.tracker.add(c.Rel.DbOid, c.Rel.RelNum, 0) {
			f.stats.TrackedRewrite++
		}
	}
	return keepSpecial, nil
}

func (f *Filter) relmapRecord(rec *wal.Record) (Decision, error) {
	if rec.RmgrInfo() != wal.XLogRelMapUpdate {
		return Decision{}, fatalf(rec, "relmap record with unknown info 0x%02X", rec.Header.Info)
	}
	u := &f.scratch.relmap
	if err := u.Decode(rec); err != nil {
		return Decision{}, wrapBody(err, "relmap update")
	}
	f.stats.TrackedRelMap += uint64(f.tracker.applyRelMap(u.DbOid, &u.Map))
	if u.DbOid == f.cfg.DbOid {
		f.trees.dirty(rec.Header.XID, rec.LSN)
	}
	return keepSpecial, nil
}

// standbyRecord follows catalog locks and prunes state at RUNNING_XACTS.
//
// The shadow does not get STANDBY LOCK records (a NOOP instead). It reads
// catalogs only, and only while its replay stands at a boundary (captures)
// or between records (the bridge), never a user relation; but a replayed
// AccessExclusiveLock is held by its startup process until the locking
// transaction ends, which replay held at a boundary never reaches. A
// VACUUM FULL pg_am or pg_class in progress at a boundary then blocks every
// new connection to the followed database (relcache initialisation locks
// those catalogs) and every catalog read: the capture, and after a
// restart the bridge worker's own start, wait forever. Without the lock a
// reader sees the catalog as of the boundary: a rewrite's new file is named
// (pg_class row, relation map) only by its own transaction, and the old
// file is unlinked only at that commit.
//
// Why locks: VACUUM FULL, CLUSTER and REINDEX of a catalog write the new
// file (XLOG_FPI pages, heap and index inserts) before the pg_class update
// or relmap update that names it, and for mapped indexes there is no
// pg_class update at all. Each takes an AccessExclusiveLock on the catalog
// (or its index) first, logged as STANDBY LOCK: from then on the tree is a
// rewriting one and every file it creates is followed as a catalog file
// (smgrRecord). The cost is that a transaction which also creates user
// relations while holding such a lock keeps their records on the shadow.
func (f *Filter) standbyRecord(rec *wal.Record) (Decision, error) {
	switch rec.RmgrInfo() {
	case wal.XLogStandbyLock:
		l := &f.scratch.locks
		if err := l.Decode(rec); err != nil {
			return Decision{}, wrapBody(err, "standby lock")
		}
		for i := 0; i < l.Len(); i++ {
			if lk := l.At(i); lk.RelOid < FirstNormalObjectID {
				f.trees.markRewrite(lk.XID)
			}
		}
		return Decision{Route: RouteNoop, Class: ClassSpecial}, nil
	case wal.XLogRunningXacts:
		r := &f.scratch.running
		if err := r.Decode(rec); err != nil {
			return Decision{}, wrapBody(err, "running xacts")
		}
		f.stats.PrunedXIDs += uint64(f.trees.prune(r.OldestRunningXID))
	}
	return keepSpecial, nil
}

// Database rmgr (commands/dbcommands_xlog.h).
const (
	xlogDbaseCreateFileCopy = 0x00 // {db_id, tablespace_id, src_db_id, src_tablespace_id}
	xlogDbaseCreateWalLog   = 0x10 // {db_id, tablespace_id}
	xlogDbaseDrop           = 0x20 // {db_id, ntablespaces, tablespace_ids[]}
)

func (f *Filter) databaseRecord(rec *wal.Record) (Decision, error) {
	md := rec.MainData
	switch rec.RmgrInfo() {
	case xlogDbaseCreateFileCopy:
		db, ok1 := u32At(md, 0)
		src, ok2 := u32At(md, 8)
		if !ok1 || !ok2 {
			return Decision{}, fatalf(rec, "CREATE DATABASE (file copy) record: main data %d bytes, want 16", len(md))
		}
		// The new database's files are copies of src's, numbers included.
		f.tracker.copyDatabase(src, db)
	case xlogDbaseCreateWalLog:
		if _, ok := u32At(md, 0); !ok {
			return Decision{}, fatalf(rec, "CREATE DATABASE (WAL log) record: main data %d bytes, want 8", len(md))
		}
		// The copy follows as SMGR_CREATE + XLOG_FPI per relation of the
		// template, relocated catalogs keeping their numbers: follow every
		// file the transaction creates, as for a catalog rewrite.
		f.trees.markRewrite(rec.Header.XID)
	case xlogDbaseDrop:
		db, ok := u32At(md, 0)
		if !ok {
			return Decision{}, fatalf(rec, "DROP DATABASE record: main data %d bytes, want >= 8", len(md))
		}
		f.tracker.dropDatabase(db)
	}
	return keepSpecial, nil
}
