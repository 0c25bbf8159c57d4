package filter

import (
	"fmt"
	"slices"

	"github.com/walshadow/walshadow/internal/wal"
)

// BoundaryKind says what ends at a boundary.
type BoundaryKind uint8

const (
	// BoundaryCommit is a COMMIT or COMMIT PREPARED. (Command boundaries at
	// mid-transaction XLOG_XACT_INVALIDATIONS belong to pending capture, a
	// later issue.)
	BoundaryCommit BoundaryKind = iota + 1
)

func (k BoundaryKind) String() string {
	if k == BoundaryCommit {
		return "commit"
	}
	return fmt.Sprintf("BoundaryKind(%d)", uint8(k))
}

// BoundaryInfo describes a catalog boundary: a commit after which relation
// shapes of the followed database may differ. Publication holds at NextLSN
// until the shadow has replayed exactly to it and the shapes are captured.
type BoundaryInfo struct {
	Kind BoundaryKind
	// DrainXID is the committing top-level xid: the record's xl_xid for a
	// COMMIT, the prepared transaction's xid for a COMMIT PREPARED.
	DrainXID uint32
	// AffectedOids are the user relations (oid >= FirstNormalObjectID)
	// whose pg_class rows the tree wrote, as far as the filter could read
	// them, and those named by the commit's relcache invalidations; sorted,
	// without duplicates.
	AffectedOids []uint32
	// FirstCatalogTouch is the LSN of the tree's first write to the followed
	// database's catalogs. Zero when the filter saw none (the boundary comes
	// from the commit's invalidations alone, e.g. the writes precede the
	// stream's start): callers fall back to their resume position.
	FirstCatalogTouch wal.LSN
	// CaptureAll asks for every relation to be captured: the invalidations
	// cannot enumerate what changed (a whole-relcache flush, a pg_namespace
	// catcache entry, a whole-catalog invalidation).
	CaptureAll bool
	// CommitLSN is the commit record's LSN; NextLSN its EndRecPtr, what the
	// shadow's pg_last_wal_replay_lsn() reports once it has replayed it.
	CommitLSN wal.LSN
	NextLSN   wal.LSN
}

// namespaceCaches holds the syscache ids of pg_namespace's catcaches, which
// are positions in the alphabetical enum SysCacheIdentifier
// (utils/syscache.h) and so move between majors.
type namespaceCaches struct{ byName, byOid int8 }

// namespaceCacheIDs is per PostgreSQL major, from each major's enum
// (utils/syscache.h in 15, catalog/syscache_ids.h generated in 17 and
// later): 15.18: AGGFNOID = 0 ... NAMESPACENAME = 35, NAMESPACEOID = 36
// (RELOID = 55, which pg_waldump output confirms); 17.12: the same; 18.6:
// 37 and 38 (two caches added before them). 16 is inferred, not read: 15
// and 17 agree, so no cache before NAMESPACENAME came or went in between
// (16's headers are not reachable here). A major not listed fails closed
// at its first catalog invalidation.
var namespaceCacheIDs = map[int]namespaceCaches{
	15: {byName: 35, byOid: 36},
	16: {byName: 35, byOid: 36},
	17: {byName: 35, byOid: 36},
	18: {byName: 37, byOid: 38},
}

// invalVerdict is what a set of invalidation messages says about the
// followed database.
type invalVerdict struct {
	hit        bool // a boundary: some relation of the followed db may have changed shape
	captureAll bool
	touches    bool // names any catalog state of the followed db (re-dirties an xid)
}

// scanInvals reads invalidation messages for the followed database, appending
// user relation oids named by relcache messages to *oids.
func (f *Filter) scanInvals(rec *wal.Record, msgs wal.InvalMessages, oids *[]uint32) (invalVerdict, error) {
	var v invalVerdict
	var ns namespaceCaches
	nsKnown := false
	for i := 0; i < msgs.Len(); i++ {
		m := msgs.At(i)
		if m.DbOid != f.cfg.DbOid {
			continue
		}
		switch m.Kind {
		case wal.InvalRelcache:
			v.touches = true
			switch {
			case m.ObjOid == 0:
				v.hit, v.captureAll = true, true
			case m.ObjOid >= FirstNormalObjectID:
				v.hit = true
				if oids != nil {
					*oids = append(*oids, m.ObjOid)
				}
			}
		case wal.InvalCatcache:
			v.touches = true
			if !nsKnown {
				major := 0
				if rec.Layout != nil {
					major = rec.Layout.Major
				}
				var ok bool
				if ns, ok = namespaceCacheIDs[major]; !ok {
					return v, fmt.Errorf("filter: at %s: pg_namespace syscache ids of PostgreSQL %d are not known: cannot classify catalog invalidations", rec.LSN, major)
				}
				nsKnown = true
			}
			if m.ID == ns.byName || m.ID == ns.byOid {
				v.hit, v.captureAll = true, true
			}
		case wal.InvalCatalog:
			v.touches = true
			v.hit, v.captureAll = true, true
		case wal.InvalRelmap:
			v.touches = true
		}
	}
	return v, nil
}

// sortUnique sorts s and removes duplicates in place.
func sortUnique(s []uint32) []uint32 {
	slices.Sort(s)
	return slices.Compact(s)
}
