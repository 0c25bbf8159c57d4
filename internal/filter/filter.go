package filter

import (
	"encoding/binary"
	"fmt"

	"github.com/walshadow/walshadow/internal/wal"
)

// Route says where a record's bytes go.
type Route uint8

const (
	// RouteShadow: the record goes to the shadow verbatim. The zero value, so
	// that anything undecided errs on the side of keeping catalog data.
	RouteShadow Route = iota
	// RouteNoop: a user-data record. The shadow gets an XLOG_NOOP of the same
	// length (NoopRecord, Scatter); the decoder gets the original.
	RouteNoop
	numRoutes = 2
)

func (r Route) String() string {
	switch r {
	case RouteShadow:
		return "shadow"
	case RouteNoop:
		return "noop"
	}
	return fmt.Sprintf("Route(%d)", uint8(r))
}

// Class is why a record got its route.
type Class uint8

const (
	// ClassSpecial: a resource manager whose records shape the cluster rather
	// than relation data (XLOG, XACT, SMGR, CLOG, DBASE, TBLSPC, MULTIXACT,
	// RELMAP, STANDBY, COMMIT_TS, REPLORIGIN); kept.
	ClassSpecial Class = iota + 1
	// ClassCatalog: a block (or main-data locator) on a catalog relation; the
	// whole record is kept.
	ClassCatalog
	// ClassUser: every block is on a user relation (or the record names only
	// user relations); NOOP for the shadow.
	ClassUser
	// ClassUnknown: no block and no locator the filter knows; kept, which is
	// always safe.
	ClassUnknown
	numClasses = 5
)

func (c Class) String() string {
	switch c {
	case ClassSpecial:
		return "special"
	case ClassCatalog:
		return "catalog"
	case ClassUser:
		return "user"
	case ClassUnknown:
		return "unknown"
	}
	return fmt.Sprintf("Class(%d)", uint8(c))
}

// Config configures a Filter.
type Config struct {
	// DbOid is the oid of the followed database: the one whose relation
	// shapes boundaries track. Catalog classification covers every database.
	DbOid uint32
}

// Decision is the filter's verdict on one record.
type Decision struct {
	Route Route
	Class Class
	// DeferCatalogDecode flags a user record of a transaction tree that has
	// written catalogs of the followed database: its shape may be one the
	// descriptor log does not hold yet, so the decoder keeps it raw until the
	// tree's commit.
	DeferCatalogDecode bool
	// Boundary is set on the commit of a catalog-dirty tree (see
	// BoundaryInfo).
	Boundary *BoundaryInfo
	// Aborted lists the xids an ABORT / ABORT PREPARED ended (the aborted
	// xid, its subxacts): speculative state kept for them can go. It aliases
	// the filter's memory and is valid until the next Decide.
	Aborted []uint32
}

// Filter classifies WAL records for the shadow and tracks catalog-dirty
// transaction trees. It is a pure state machine: records in, decisions out,
// no I/O. Records must be fed in WAL order, every one of them.
//
// Not safe for concurrent use.
type Filter struct {
	cfg     Config
	tracker CatalogTracker
	trees   xactTrees
	smgr    map[wal.RelFileNode]wal.LSN // main-fork XLOG_SMGR_CREATE positions
	copies  pageCopies
	stats   Stats
	err     error // sticky: the first fatal error

	scratch struct {
		commit      wal.XactCommit
		abort       wal.XactAbort
		prepare     wal.XactPrepare
		assignment  wal.XactAssignment
		invals      wal.XactInvalidations
		relmap      wal.RelMapUpdate
		locks       wal.StandbyLocks
		running     wal.RunningXacts
		smgrCreate  wal.SmgrCreate
		heapInsert  wal.HeapInsert
		heapUpdate  wal.HeapUpdate
		multiInsert wal.HeapMultiInsert
		newCID      wal.HeapNewCID
		truncate    wal.HeapTruncate
		page        []byte
		offsets     []uint16
		agg         treeAggregate
		aborted     []uint32
	}
}

// New returns a filter following database cfg.DbOid.
func New(cfg Config) *Filter {
	return &Filter{cfg: cfg}
}

// Tracker is the filter's catalog tracker, for seeding at attach and for
// inspection.
func (f *Filter) Tracker() *CatalogTracker { return &f.tracker }

// Stats returns a copy of the counters.
func (f *Filter) Stats() Stats { return f.stats }

// OpenXIDs is the number of (sub)transactions the filter holds state for.
func (f *Filter) OpenXIDs() int { return f.trees.size() }

// SmgrCreateLSN returns the LSN of the XLOG_SMGR_CREATE that created rfn's
// main fork, when the filter saw it and the file has not been dropped since:
// the earliest position a descriptor of the new file can be valid from.
func (f *Filter) SmgrCreateLSN(rfn wal.RelFileNode) (wal.LSN, bool) {
	lsn, ok := f.smgr[rfn]
	return lsn, ok
}

// PageCopied reports whether a block of rfn's main fork was written as a
// whole page image (XLOG_FPI, log_newpage) since the resume floor: a file
// filled by copying pages (SET TABLESPACE, VACUUM FULL, CLUSTER), not by
// row records. Safe to call from any goroutine.
func (f *Filter) PageCopied(rfn wal.RelFileNode) bool {
	return f.copies.has(rfn)
}

// ForgetPageCopiesBelow drops what PageCopied knows of copies before lsn
// (the resume floor), once it knows of many files (see pageCopies). Safe
// to call from any goroutine.
func (f *Filter) ForgetPageCopiesBelow(lsn wal.LSN) { f.copies.forgetBelow(lsn) }

// Decide classifies rec and updates the filter's state. An error is fatal:
// the WAL cannot be proven safe to filter (a malformed transaction, relmap,
// lock or storage record, a boundary the filter cannot classify, a commit
// of followed-database catalog changes from another database). It names the
// LSN, and every later call returns it again.
//
// The common case, a user-data record, allocates nothing.
func (f *Filter) Decide(rec *wal.Record) (Decision, error) {
	if f.err != nil {
		return Decision{}, f.err
	}
	d, err := f.decide(rec)
	if err != nil {
		f.err = err
		return Decision{}, err
	}
	f.stats.count(rec, &d)
	return d, nil
}

func fatalf(rec *wal.Record, format string, args ...any) error {
	return fmt.Errorf("filter: at %s: %s", rec.LSN, fmt.Sprintf(format, args...))
}

// wrapBody wraps a body decoding error, which already names the LSN.
func wrapBody(err error, what string) error {
	return fmt.Errorf("filter: %s: %w", what, err)
}

func (f *Filter) decide(rec *wal.Record) (Decision, error) {
	xid := rec.Header.XID
	if rec.TopLevelXID != 0 {
		f.trees.link(xid, rec.TopLevelXID)
	}
	switch rec.Header.RmID {
	case wal.RmgrXLOG:
		return f.xlog(rec)
	case wal.RmgrXact:
		return f.xact(rec)
	case wal.RmgrSmgr:
		return f.smgrRecord(rec)
	case wal.RmgrRelMap:
		return f.relmapRecord(rec)
	case wal.RmgrStandby:
		return f.standbyRecord(rec)
	case wal.RmgrDatabase:
		return f.databaseRecord(rec)
	case wal.RmgrCLOG, wal.RmgrTablespace, wal.RmgrMultiXact, wal.RmgrCommitTs, wal.RmgrReplOrigin:
		return Decision{Route: RouteShadow, Class: ClassSpecial}, nil
	}
	if len(rec.Blocks) > 0 {
		return f.blockRecord(rec)
	}
	return f.locatorRecord(rec)
}

// userDecision is the NOOP verdict for a record of xid.
func (f *Filter) userDecision(xid uint32) Decision {
	d := Decision{Route: RouteNoop, Class: ClassUser}
	if xid != 0 {
		d.DeferCatalogDecode, _ = f.trees.rootFlags(xid)
	}
	return d
}

// anyCatalogBlock reports whether any block of rec is on a catalog file.
func (f *Filter) anyCatalogBlock(rec *wal.Record) bool {
	for i := range rec.Blocks {
		if f.tracker.IsCatalog(rec.Blocks[i].Rel) {
			return true
		}
	}
	return false
}

func (f *Filter) xlog(rec *wal.Record) (Decision, error) {
	switch info := rec.RmgrInfo(); info {
	case wal.XLogFPI, wal.XLogFPIForHint:
		// Full-page images of user relations would put user pages on the
		// shadow's disk (redo creates the file): NOOP them like any user
		// record. Rewrites of catalogs write their new files with XLOG_FPI
		// too; the tracker knows those files before their first image.
		if len(rec.Blocks) > 0 {
			if f.anyCatalogBlock(rec) {
				return Decision{Route: RouteShadow, Class: ClassCatalog}, nil
			}
			if info == wal.XLogFPI {
				f.copies.note(rec)
			}
			return f.userDecision(rec.Header.XID), nil
		}
	}
	return Decision{Route: RouteShadow, Class: ClassSpecial}, nil
}

// blockRecord classifies a record of a data resource manager by its blocks:
// any block on a catalog keeps the whole record.
func (f *Filter) blockRecord(rec *wal.Record) (Decision, error) {
	if !f.anyCatalogBlock(rec) {
		return f.userDecision(rec.Header.XID), nil
	}
	if err := f.catalogWrite(rec); err != nil {
		return Decision{}, err
	}
	return Decision{Route: RouteShadow, Class: ClassCatalog}, nil
}

// isContentWrite reports heap records that change catalog rows, as opposed
// to pruning, freezing, visibility, locks and index maintenance.
func isContentWrite(rec *wal.Record) bool {
	op := rec.Header.Info & wal.XLogHeapOpMask
	switch rec.Header.RmID {
	case wal.RmgrHeap:
		return op == wal.XLogHeapInsert || op == wal.XLogHeapDelete ||
			op == wal.XLogHeapUpdate || op == wal.XLogHeapHotUpdate
	case wal.RmgrHeap2:
		return op == wal.XLogHeap2MultiInsert
	}
	return false
}

// catalogWrite handles a kept record with catalog blocks: pg_class rows feed
// the tracker, and content writes to the followed database's catalogs
// dirty the writing transaction.
func (f *Filter) catalogWrite(rec *wal.Record) error {
	if !isContentWrite(rec) {
		return nil
	}
	xid := rec.Header.XID
	dirty := false
	for i := range rec.Blocks {
		rel := rec.Blocks[i].Rel
		if rel.DbOid != f.cfg.DbOid || !f.tracker.IsCatalog(rel) {
			continue
		}
		if oid, known := f.tracker.CatalogOid(rel); !known || !isStatisticsCatalog(oid) {
			dirty = true
		}
	}
	if dirty {
		f.trees.dirty(xid, rec.LSN)
	}
	b0 := rec.Block(0)
	if b0 == nil || b0.Rel.DbOid == 0 || b0.Rel.RelNum != f.tracker.PgClassRelNum(b0.Rel.DbOid) {
		return nil
	}
	db := b0.Rel.DbOid
	res, err := f.readPgClassRows(rec, func(row pgClassRow) {
		f.stats.PgClassRows++
		if row.oid < FirstNormalObjectID {
			if f.tracker.add(db, row.relfilenode, row.oid) {
				f.stats.TrackedPgClass++
			}
		} else if db == f.cfg.DbOid {
			f.trees.addOid(xid, row.oid)
		}
	})
	if err != nil {
		return wrapBody(err, "reading a pg_class row")
	}
	if res == pgClassUndecoded {
		// The oid is lost to prefix compression (or the row is not in the
		// record). Nothing is missed for all that: a pg_class change always
		// queues a relcache invalidation of the row's relation, which the
		// commit record carries, so the boundary still names the oid; and a
		// catalog's relfilenode only moves under an AccessExclusiveLock on it,
		// whose STANDBY LOCK record made the tracker follow the new file from
		// its creation (standbyRecord).
		f.stats.PgClassUndecodable++
	}
	return nil
}

// Main-data locators of records without blocks: HEAP2_NEW_CID's
// target_node (@16) is read by wal.HeapNewCID; the page-reuse records of
// btree and GiST start with the index's RelFileNode.
const (
	pageReuseLocatorOff = 0 // xl_btree_reuse_page.node, gistxlogPageReuse.node
	xlogBtreeReusePage  = 0xD0
	xlogGistPageReuse   = 0x20
	relFileNodeSize     = 12
)

// locatorRecord classifies a data-rmgr record without blocks by the
// relation its main data names, if any.
func (f *Filter) locatorRecord(rec *wal.Record) (Decision, error) {
	keep := Decision{Route: RouteShadow, Class: ClassUnknown}
	info := rec.RmgrInfo()
	switch rec.Header.RmID {
	case wal.RmgrHeap2:
		if info&wal.XLogHeapOpMask != wal.XLogHeap2NewCID {
			return keep, nil
		}
		c := &f.scratch.newCID
		if err := c.Decode(rec); err != nil {
			return keep, nil // unknown layout: keep it, redo ignores NEW_CID anyway
		}
		f.trees.link(rec.Header.XID, c.TopXID)
		if !f.tracker.IsCatalog(c.Target) {
			return f.userDecision(rec.Header.XID), nil
		}
		// NEW_CID precedes each catalog row change: the earliest sign of it.
		if c.Target.DbOid == f.cfg.DbOid {
			if oid, known := f.tracker.CatalogOid(c.Target); !known || !isStatisticsCatalog(oid) {
				f.trees.dirty(rec.Header.XID, rec.LSN)
			}
		}
		return Decision{Route: RouteShadow, Class: ClassCatalog}, nil
	case wal.RmgrBtree, wal.RmgrGist:
		if (rec.Header.RmID == wal.RmgrBtree && info != xlogBtreeReusePage) ||
			(rec.Header.RmID == wal.RmgrGist && info != xlogGistPageReuse) {
			return keep, nil
		}
		if len(rec.MainData) < pageReuseLocatorOff+relFileNodeSize {
			return keep, nil
		}
		if f.tracker.IsCatalog(wal.DecodeRelFileNode(rec.MainData[pageReuseLocatorOff:])) {
			return Decision{Route: RouteShadow, Class: ClassCatalog}, nil
		}
		return f.userDecision(rec.Header.XID), nil
	case wal.RmgrHeap:
		if info&wal.XLogHeapOpMask != wal.XLogHeapTruncate {
			return keep, nil
		}
		// Logged for logical decoding only; redo does nothing. It names
		// relations by oid.
		t := &f.scratch.truncate
		if err := t.Decode(rec); err != nil {
			return keep, nil
		}
		for i := 0; i < t.NumRelIDs(); i++ {
			if t.RelID(i) < FirstNormalObjectID {
				return Decision{Route: RouteShadow, Class: ClassCatalog}, nil
			}
		}
		return f.userDecision(rec.Header.XID), nil
	case wal.RmgrLogicalMsg:
		return f.userDecision(rec.Header.XID), nil
	}
	return keep, nil
}

// u32At reads a little-endian uint32 at off of b, reporting false when b is
// too short.
func u32At(b []byte, off int) (uint32, bool) {
	if off < 0 || len(b) < off+4 {
		return 0, false
	}
	return binary.LittleEndian.Uint32(b[off:]), true
}
