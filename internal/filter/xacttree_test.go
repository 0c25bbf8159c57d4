package filter

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/wal"
)

func containsLSN(err error, lsn wal.LSN) bool {
	return err != nil && strings.Contains(err.Error(), lsn.String())
}

var (
	pgClassRel = rfn(followedDB, 1259)
	pgAttrRel  = rfn(followedDB, 1249)
	userRel    = rfn(followedDB, 16400)
)

// catalogInsert is a content write to pg_attribute by xid.
func catalogInsert(lsn wal.LSN, xid uint32) *wal.Record {
	return heapInsertRec(lsn, xid, pgAttrRel, []byte("attribute row"))
}

func userInsert(lsn wal.LSN, xid uint32) *wal.Record {
	return heapInsertRec(lsn, xid, userRel, []byte("user row"))
}

func TestDirtyTreeCommitBoundary(t *testing.T) {
	f := New(Config{DbOid: followedDB})
	if d := mustDecide(t, f, userInsert(0x100, 700)); d.DeferCatalogDecode {
		t.Fatal("clean tree deferred")
	}
	mustDecide(t, f, heapInsertRec(0x200, 700, pgClassRel, pgClassUserData(16401, 16401)))
	mustDecide(t, f, catalogInsert(0x300, 700))
	if d := mustDecide(t, f, userInsert(0x400, 700)); !d.DeferCatalogDecode || d.Route != RouteNoop {
		t.Fatalf("user record of a dirty tree: %+v", d)
	}
	if d := mustDecide(t, f, userInsert(0x500, 701)); d.DeferCatalogDecode {
		t.Fatal("another transaction deferred")
	}
	c := commitRec(0x600, 700, xactEnd{dbOid: followedDB, invals: [][]byte{
		relcacheInval(followedDB, 16401), relcacheInval(followedDB, 16390), relcacheInval(followedDB, 16390),
		relcacheInval(followedDB, 1259), // a catalog's entry: not a user relation
		relcacheInval(16390, 16395),     // another database
		catcacheInval(55, followedDB),   // RELOID: not capture-all
		snapshotInval(followedDB, 1259),
	}})
	d := mustDecide(t, f, c)
	b := d.Boundary
	if b == nil {
		t.Fatal("no boundary")
	}
	want := BoundaryInfo{Kind: BoundaryCommit, DrainXID: 700, AffectedOids: []uint32{16390, 16401},
		FirstCatalogTouch: 0x200, CommitLSN: c.LSN, NextLSN: c.Next}
	if b.Kind != want.Kind || b.DrainXID != want.DrainXID || !slices.Equal(b.AffectedOids, want.AffectedOids) ||
		b.FirstCatalogTouch != want.FirstCatalogTouch || b.CaptureAll || b.CommitLSN != want.CommitLSN || b.NextLSN != want.NextLSN {
		t.Fatalf("boundary %+v, want %+v", *b, want)
	}
	if d := mustDecide(t, f, userInsert(0x700, 700)); d.DeferCatalogDecode {
		t.Fatal("tree state survived its commit")
	}
	if f.OpenXIDs() != 0 {
		t.Fatalf("%d xids still held", f.OpenXIDs())
	}
	if st := f.Stats(); st.Boundaries != 1 || st.Deferred != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestCommitWithoutDirt(t *testing.T) {
	cases := []struct {
		name       string
		invals     [][]byte
		boundary   bool
		captureAll bool
		oids       []uint32
	}{
		{"DML only", nil, false, false, nil},
		{"user relcache inval", [][]byte{relcacheInval(followedDB, 16400)}, true, false, []uint32{16400}},
		{"whole relcache", [][]byte{relcacheInval(followedDB, 0)}, true, true, nil},
		{"namespace by name", [][]byte{catcacheInval(35, followedDB)}, true, true, nil},
		{"namespace by oid", [][]byte{catcacheInval(36, followedDB)}, true, true, nil},
		{"whole catalog", [][]byte{catalogInval(followedDB, 2608)}, true, true, nil},
		{"catalog relcache only", [][]byte{relcacheInval(followedDB, 2608)}, false, false, nil},
		{"other database", [][]byte{relcacheInval(16390, 16400), catcacheInval(35, 16390), catalogInval(16390, 2608), relcacheInval(16390, 0)}, false, false, nil},
		{"shared catcache", [][]byte{catcacheInval(21, 0)}, false, false, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := New(Config{DbOid: followedDB})
			mustDecide(t, f, userInsert(0x100, 700))
			d := mustDecide(t, f, commitRec(0x200, 700, xactEnd{dbOid: followedDB, invals: c.invals}))
			if (d.Boundary != nil) != c.boundary {
				t.Fatalf("boundary %+v, want %t", d.Boundary, c.boundary)
			}
			if d.Boundary == nil {
				return
			}
			if d.Boundary.CaptureAll != c.captureAll || !slices.Equal(d.Boundary.AffectedOids, c.oids) || d.Boundary.FirstCatalogTouch != 0 {
				t.Fatalf("boundary %+v", *d.Boundary)
			}
		})
	}
}

func TestStatisticsWritesDoNotDirty(t *testing.T) {
	f := New(Config{DbOid: followedDB})
	mustDecide(t, f, heapInsertRec(0x100, 700, rfn(followedDB, 2619), []byte("stats")))
	mustDecide(t, f, heapInsertRec(0x200, 700, rfn(followedDB, 2840), []byte("stats toast")))
	mustDecide(t, f, newCIDRec(0x300, 700, 700, rfn(followedDB, 2619)))
	if d := mustDecide(t, f, commitRec(0x400, 700, xactEnd{dbOid: followedDB})); d.Boundary != nil {
		t.Fatalf("ANALYZE-like commit: %+v", d.Boundary)
	}
	// Non-content catalog records (prune, lock) do not dirty either.
	mustDecide(t, f, rb{lsn: 0x500, rm: wal.RmgrHeap2, info: wal.XLogHeap2Prune, xid: 701, blocks: []wal.BlockRef{block(0, pgAttrRel, nil)}}.rec())
	mustDecide(t, f, rb{lsn: 0x600, rm: wal.RmgrHeap, info: wal.XLogHeapLock, xid: 701, blocks: []wal.BlockRef{block(0, pgClassRel, nil)}}.rec())
	mustDecide(t, f, fpiRec(0x650, 701, pgAttrRel))
	if d := mustDecide(t, f, commitRec(0x700, 701, xactEnd{dbOid: followedDB})); d.Boundary != nil {
		t.Fatalf("prune/lock commit: %+v", d.Boundary)
	}
}

func TestSubtransactions(t *testing.T) {
	t.Run("toplevel xid link", func(t *testing.T) {
		f := New(Config{DbOid: followedDB})
		r := catalogInsert(0x100, 701)
		r.TopLevelXID = 700
		mustDecide(t, f, r)
		if d := mustDecide(t, f, userInsert(0x200, 700)); !d.DeferCatalogDecode {
			t.Fatal("top of a dirty subxact not deferred")
		}
		d := mustDecide(t, f, commitRec(0x300, 700, xactEnd{dbOid: followedDB, subxacts: []uint32{701}}))
		if d.Boundary == nil || d.Boundary.DrainXID != 700 || d.Boundary.FirstCatalogTouch != 0x100 {
			t.Fatalf("boundary %+v", d.Boundary)
		}
		if f.OpenXIDs() != 0 {
			t.Fatalf("%d xids held", f.OpenXIDs())
		}
	})
	t.Run("linked only by the commit", func(t *testing.T) {
		f := New(Config{DbOid: followedDB})
		mustDecide(t, f, catalogInsert(0x100, 701)) // wal_level=replica: no toplevel xid
		d := mustDecide(t, f, commitRec(0x300, 700, xactEnd{dbOid: followedDB, subxacts: []uint32{701}}))
		if d.Boundary == nil || d.Boundary.FirstCatalogTouch != 0x100 {
			t.Fatalf("boundary %+v", d.Boundary)
		}
		if f.OpenXIDs() != 0 {
			t.Fatalf("%d xids held", f.OpenXIDs())
		}
	})
	t.Run("assignment and new_cid links", func(t *testing.T) {
		f := New(Config{DbOid: followedDB})
		mustDecide(t, f, catalogInsert(0x100, 702))
		mustDecide(t, f, assignmentRec(0x200, 700, 701, 702))
		if d := mustDecide(t, f, userInsert(0x300, 701)); !d.DeferCatalogDecode {
			t.Fatal("sibling of a dirty subxact (ASSIGNMENT) not deferred")
		}
		mustDecide(t, f, newCIDRec(0x400, 703, 700, pgAttrRel))
		if dirty, _ := f.trees.rootFlags(703); !dirty {
			t.Fatal("NEW_CID did not link/dirty its subxact")
		}
		d := mustDecide(t, f, commitRec(0x500, 700, xactEnd{dbOid: followedDB}))
		if d.Boundary == nil {
			t.Fatal("no boundary")
		}
		if f.OpenXIDs() != 0 {
			t.Fatalf("%d xids held after draining linked subxacts", f.OpenXIDs())
		}
	})
	t.Run("rolled back savepoint", func(t *testing.T) {
		f := New(Config{DbOid: followedDB})
		mustDecide(t, f, userInsert(0x100, 700))
		r := catalogInsert(0x200, 701)
		r.TopLevelXID = 700
		mustDecide(t, f, r)
		mustDecide(t, f, xactInvalsRec(0x250, 701, relcacheInval(followedDB, 16400)))
		r = catalogInsert(0x260, 702) // a subxact of the savepoint
		r.TopLevelXID = 700
		mustDecide(t, f, r)
		d := mustDecide(t, f, abortRec(0x300, 701, xactEnd{dbOid: followedDB, subxacts: []uint32{702}}))
		slices.Sort(d.Aborted)
		if !slices.Equal(d.Aborted, []uint32{701, 702}) || d.Boundary != nil {
			t.Fatalf("subxact abort: %+v", d)
		}
		if dd := mustDecide(t, f, userInsert(0x400, 700)); dd.DeferCatalogDecode {
			t.Fatal("aborted subxact's dirt kept the top dirty")
		}
		if d := mustDecide(t, f, commitRec(0x500, 700, xactEnd{dbOid: followedDB})); d.Boundary != nil {
			t.Fatalf("boundary for a rolled-back savepoint: %+v", d.Boundary)
		}
	})
	t.Run("subxact abort keeps the parent's dirt", func(t *testing.T) {
		f := New(Config{DbOid: followedDB})
		mustDecide(t, f, catalogInsert(0x100, 700))
		r := catalogInsert(0x200, 701)
		r.TopLevelXID = 700
		mustDecide(t, f, r)
		mustDecide(t, f, abortRec(0x300, 701, xactEnd{}))
		if d := mustDecide(t, f, userInsert(0x400, 700)); !d.DeferCatalogDecode {
			t.Fatal("parent's own dirt lost")
		}
		if d := mustDecide(t, f, commitRec(0x500, 700, xactEnd{dbOid: followedDB})); d.Boundary == nil || d.Boundary.FirstCatalogTouch != 0x100 {
			t.Fatalf("boundary %+v", d.Boundary)
		}
	})
	t.Run("top-level abort", func(t *testing.T) {
		f := New(Config{DbOid: followedDB})
		mustDecide(t, f, catalogInsert(0x100, 700))
		r := catalogInsert(0x200, 701)
		r.TopLevelXID = 700
		mustDecide(t, f, r)
		d := mustDecide(t, f, abortRec(0x300, 700, xactEnd{subxacts: []uint32{701}}))
		slices.Sort(d.Aborted)
		if !slices.Equal(d.Aborted, []uint32{700, 701}) || d.Boundary != nil || f.OpenXIDs() != 0 {
			t.Fatalf("abort: %+v, %d held", d, f.OpenXIDs())
		}
		if st := f.Stats(); st.Aborts != 1 || st.AbortedXIDs != 2 {
			t.Fatalf("stats %+v", st)
		}
	})
}

func TestTwoPhase(t *testing.T) {
	t.Run("commit prepared", func(t *testing.T) {
		f := New(Config{DbOid: followedDB})
		mustDecide(t, f, catalogInsert(0x100, 701))
		mustDecide(t, f, prepareRec(0x200, 700, 701))
		mustDecide(t, f, runningXactsRec(0x250, 750)) // prepared trees survive pruning
		if d := mustDecide(t, f, userInsert(0x300, 701)); !d.DeferCatalogDecode {
			t.Fatal("prepared tree forgot its dirt")
		}
		d := mustDecide(t, f, commitRec(0x400, 0, xactEnd{dbOid: followedDB, twoPhase: 700}))
		if d.Boundary == nil || d.Boundary.DrainXID != 700 || d.Boundary.FirstCatalogTouch != 0x100 {
			t.Fatalf("COMMIT PREPARED boundary %+v", d.Boundary)
		}
		if f.OpenXIDs() != 0 {
			t.Fatalf("%d xids held", f.OpenXIDs())
		}
	})
	t.Run("rollback prepared", func(t *testing.T) {
		f := New(Config{DbOid: followedDB})
		mustDecide(t, f, catalogInsert(0x100, 700))
		if d := mustDecide(t, f, prepareRec(0x200, 700)); d.Boundary != nil {
			t.Fatal("boundary at PREPARE")
		}
		d := mustDecide(t, f, abortRec(0x300, 0, xactEnd{dbOid: followedDB, twoPhase: 700}))
		if d.Boundary != nil || !slices.Equal(d.Aborted, []uint32{700}) || f.OpenXIDs() != 0 {
			t.Fatalf("ROLLBACK PREPARED: %+v", d)
		}
	})
}

func TestInvalidationsRedirty(t *testing.T) {
	f := New(Config{DbOid: followedDB})
	// The stream started after the tree's catalog writes: only its
	// command's invalidations are seen.
	mustDecide(t, f, xactInvalsRec(0x100, 700, catcacheInval(55, followedDB), relcacheInval(followedDB, 16400)))
	if d := mustDecide(t, f, userInsert(0x200, 700)); !d.DeferCatalogDecode {
		t.Fatal("invalidations did not re-dirty the xid")
	}
	d := mustDecide(t, f, commitRec(0x300, 700, xactEnd{dbOid: followedDB}))
	if d.Boundary == nil || d.Boundary.FirstCatalogTouch != 0x100 {
		t.Fatalf("boundary %+v", d.Boundary)
	}
	// Another database's invalidations do nothing.
	mustDecide(t, f, xactInvalsRec(0x400, 701, relcacheInval(16390, 16400)))
	if d := mustDecide(t, f, commitRec(0x500, 701, xactEnd{dbOid: 16390})); d.Boundary != nil {
		t.Fatalf("foreign invalidations made a boundary: %+v", d.Boundary)
	}
}

func TestRelMapDirtiesFollowedDatabase(t *testing.T) {
	f := New(Config{DbOid: followedDB})
	mustDecide(t, f, relmapRec(0x100, 700, followedDB, [2]uint32{2662, 16420}))
	mustDecide(t, f, relmapRec(0x200, 701, 16390, [2]uint32{2662, 16421}))
	if d := mustDecide(t, f, commitRec(0x300, 700, xactEnd{dbOid: followedDB})); d.Boundary == nil {
		t.Fatal("REINDEX of a mapped index: no boundary")
	}
	if d := mustDecide(t, f, commitRec(0x400, 701, xactEnd{dbOid: 16390})); d.Boundary != nil {
		t.Fatal("another database's relmap made a boundary")
	}
}

func TestRunningXactsPrunes(t *testing.T) {
	f := New(Config{DbOid: followedDB})
	mustDecide(t, f, catalogInsert(0x100, 700)) // its backend crashed: no abort record
	r := catalogInsert(0x200, 701)
	r.TopLevelXID = 700
	mustDecide(t, f, r)
	mustDecide(t, f, catalogInsert(0x300, 800))
	mustDecide(t, f, runningXactsRec(0x400, 800))
	if f.OpenXIDs() != 1 {
		t.Fatalf("%d xids held after pruning, want 1", f.OpenXIDs())
	}
	if st := f.Stats(); st.PrunedXIDs != 2 {
		t.Fatalf("PrunedXIDs = %d", st.PrunedXIDs)
	}
	if d := mustDecide(t, f, userInsert(0x500, 800)); !d.DeferCatalogDecode {
		t.Fatal("running transaction pruned")
	}
	// Wraparound: xid 5 follows 4294967000.
	if !xidPrecedes(4294967000, 5) || xidPrecedes(5, 4294967000) {
		t.Fatal("xidPrecedes ignores wraparound")
	}
}

func TestFatalErrors(t *testing.T) {
	t.Run("foreign database commits followed dirt", func(t *testing.T) {
		f := New(Config{DbOid: followedDB})
		mustDecide(t, f, catalogInsert(0x100, 700))
		c := commitRec(0x12345678, 700, xactEnd{dbOid: 16390})
		_, err := f.Decide(c)
		if !containsLSN(err, c.LSN) {
			t.Fatalf("err = %v", err)
		}
		// Sticky: later records get the same error.
		if _, err2 := f.Decide(userInsert(0x12345700, 701)); err2 != err {
			t.Fatalf("not sticky: %v", err2)
		}
	})
	malformed := []*wal.Record{
		rb{lsn: 0x1234568, rm: wal.RmgrXact, info: wal.XLogXactCommit, xid: 700, main: le{}.u32(1)}.rec(),
		rb{lsn: 0x1234568, rm: wal.RmgrXact, info: wal.XLogXactCommit | wal.XLogXactHasInfo, xid: 700, main: le{}.u64(1).u32(wal.XactXinfoHasSubxacts).u32(5)}.rec(),
		rb{lsn: 0x1234568, rm: wal.RmgrXact, info: wal.XLogXactAbort, xid: 700}.rec(),
		rb{lsn: 0x1234568, rm: wal.RmgrXact, info: wal.XLogXactPrepare, xid: 700, main: le{}.u32(1)}.rec(),
		rb{lsn: 0x1234568, rm: wal.RmgrXact, info: wal.XLogXactAssignment, xid: 700, main: le{}.u32(1)}.rec(),
		rb{lsn: 0x1234568, rm: wal.RmgrXact, info: wal.XLogXactInvalidations, xid: 700, main: le{}.u32(3)}.rec(),
		rb{lsn: 0x1234568, rm: wal.RmgrXact, info: 0x70, xid: 700}.rec(),
		commitRec(0x1234568, 0, xactEnd{dbOid: followedDB}),                                             // commit without xid
		rb{lsn: 0x1234568, rm: wal.RmgrXact, info: wal.XLogXactCommitPrepared, main: le{}.u64(1)}.rec(), // no prepared xid
		rb{lsn: 0x1234568, rm: wal.RmgrXact, info: wal.XLogXactAbortPrepared, main: le{}.u64(1)}.rec(),
		rb{lsn: 0x1234568, rm: wal.RmgrRelMap, info: wal.XLogRelMapUpdate, main: le{}.u32(5).u32(1663).u32(512)}.rec(),
		rb{lsn: 0x1234568, rm: wal.RmgrRelMap, info: 0x10}.rec(),
		rb{lsn: 0x1234568, rm: wal.RmgrStandby, info: wal.XLogStandbyLock, main: le{}.u32(2)}.rec(),
		rb{lsn: 0x1234568, rm: wal.RmgrStandby, info: wal.XLogRunningXacts, main: le{}.u32(2)}.rec(),
		// a pg_class insert whose block data is not a tuple
		rb{lsn: 0x1234568, rm: wal.RmgrHeap, info: wal.XLogHeapInsert, xid: 700, blocks: []wal.BlockRef{block(0, pgClassRel, []byte{1, 2})}, main: le{}.u16(1).u8(0)}.rec(),
		// commit naming pg_namespace entries of a major without a syscache table
		func() *wal.Record {
			r := commitRec(0x1234568, 700, xactEnd{dbOid: followedDB, invals: [][]byte{catcacheInval(36, followedDB)}})
			l, _ := wal.LayoutForMajor(18)
			unknown := *l
			unknown.Major = 19
			r.Layout = &unknown
			return r
		}(),
	}
	for i, rec := range malformed {
		f := New(Config{DbOid: followedDB})
		if _, err := f.Decide(rec); !containsLSN(err, rec.LSN) {
			t.Errorf("malformed record %d (%s info 0x%02X): err = %v", i, rec.Header.RmID, rec.Header.Info, err)
		}
	}
}

func TestManySubtransactions(t *testing.T) {
	// A PL/pgSQL loop with an exception block: one subtransaction per
	// iteration, every third rolled back, one writing catalogs.
	f := New(Config{DbOid: followedDB})
	const n = 60000
	var committed []uint32
	lsn := wal.LSN(0x100000)
	for i := uint32(1); i <= n; i++ {
		sub := 1000 + i
		r := userInsert(lsn, sub)
		if i == n/2 {
			r = catalogInsert(lsn, sub)
		}
		r.TopLevelXID = 1000
		mustDecide(t, f, r)
		lsn += 0x40
		if i%3 == 0 && i != n/2 {
			mustDecide(t, f, abortRec(lsn, sub, xactEnd{}))
			lsn += 0x40
		} else {
			committed = append(committed, sub)
		}
	}
	start := time.Now()
	d := mustDecide(t, f, commitRec(lsn, 1000, xactEnd{dbOid: followedDB, subxacts: committed}))
	if d.Boundary == nil || d.Boundary.FirstCatalogTouch == 0 {
		t.Fatalf("boundary %+v", d.Boundary)
	}
	if f.OpenXIDs() != 0 {
		t.Fatalf("%d xids held", f.OpenXIDs())
	}
	t.Logf("commit of %d subxacts drained in %v", len(committed), time.Since(start))
}

func TestLateLinkThenAbort(t *testing.T) {
	// wal_level=replica: the subxact's dirt is seen before its link.
	f := New(Config{DbOid: followedDB})
	mustDecide(t, f, catalogInsert(0x100, 701))
	mustDecide(t, f, assignmentRec(0x200, 700, 701))
	if dirty, _ := f.trees.rootFlags(700); !dirty {
		t.Fatal("link did not carry the subxact's dirt to the top")
	}
	mustDecide(t, f, abortRec(0x300, 701, xactEnd{}))
	if dirty, _ := f.trees.rootFlags(700); dirty {
		t.Fatal("aborted subxact's dirt stayed with the top")
	}
	if d := mustDecide(t, f, commitRec(0x400, 700, xactEnd{dbOid: followedDB})); d.Boundary != nil {
		t.Fatalf("boundary %+v", d.Boundary)
	}
}

// TestRelinkAfterAbortedSubxactReborn is the fuzzer's finding (CI, FuzzDecide
// 421664b7b7ff8914): 701 linked under 700, aborted (its state gone, the link
// lingering in 700's list), then re-born as a root of its own; linking 700
// under 701 then pointed 701 at itself and gave it root counts as a subxact.
func TestRelinkAfterAbortedSubxactReborn(t *testing.T) {
	var tr xactTrees
	tr.link(701, 700)
	tr.dirty(700, 0x100)
	tr.abort(701, wal.XIDList{}, nil)
	tr.dirty(701, 0x200)
	tr.link(700, 701)
	if err := tr.checkCounts(); err != nil {
		t.Fatal(err)
	}
	if s := tr.m[701]; s.top != 0 || s.dirtyCount != 2 {
		t.Fatalf("701 should be the root with both dirty members, got %+v", *s)
	}
	if s := tr.m[700]; s.top != 701 {
		t.Fatalf("700 should hang under 701, got %+v", *s)
	}
	var agg treeAggregate
	tr.drain(701, wal.XIDList{}, &agg)
	if !agg.dirty || agg.firstTouch != 0x100 || tr.size() != 0 {
		t.Fatalf("drain: %+v, %d xids left", agg, tr.size())
	}
}

// TestNamespaceCacheIDsPerMajor: pg_namespace's catcache ids are read by
// the record's major (18 moved them from 35/36 to 37/38): a namespace
// change is a capture-all boundary on each, RELOID's neighbours are not.
func TestNamespaceCacheIDsPerMajor(t *testing.T) {
	for _, c := range []struct {
		major     int
		namespace []int8
		unrelated []int8
	}{
		{15, []int8{35, 36}, []int8{37, 55}},
		{16, []int8{35, 36}, []int8{37, 55}},
		{17, []int8{35, 36}, []int8{37, 55}},
		{18, []int8{37, 38}, []int8{35, 36, 57}},
	} {
		layout, err := wal.LayoutForMajor(c.major)
		if err != nil {
			t.Fatal(err)
		}
		rec := &wal.Record{LSN: 0x1000028, Layout: layout}
		for _, ids := range [][]int8{c.namespace, c.unrelated} {
			for _, id := range ids {
				var msgs wal.InvalMessages
				if err := msgs.Decode(rec, catcacheInval(id, followedDB), 1); err != nil {
					t.Fatal(err)
				}
				v, err := New(Config{DbOid: followedDB}).scanInvals(rec, msgs, nil)
				if err != nil {
					t.Fatal(err)
				}
				if want := slices.Contains(c.namespace, id); v.captureAll != want || !v.touches {
					t.Errorf("PostgreSQL %d, catcache %d: %+v, want capture-all %v", c.major, id, v, want)
				}
			}
		}
	}
	// A major without known ids fails closed.
	rec := &wal.Record{LSN: 0x1000028, Layout: &wal.Layout{Major: 19}}
	var msgs wal.InvalMessages
	if err := msgs.Decode(rec, catcacheInval(35, followedDB), 1); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{DbOid: followedDB}).scanInvals(rec, msgs, nil); err == nil {
		t.Error("PostgreSQL 19's catcache ids were taken")
	}
}
