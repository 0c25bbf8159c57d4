package filter

import (
	"testing"

	"github.com/walshadow/walshadow/internal/wal"
)

func TestClassifyRoutes(t *testing.T) {
	user := rfn(followedDB, 16400)
	userOtherDB := rfn(16390, 16400)
	catalog := rfn(followedDB, 1247)
	shared := wal.RelFileNode{SpcOid: 1664, DbOid: 0, RelNum: 16500} // a relocated shared catalog
	ins := le{}.u16(1).u8(0)

	cases := []struct {
		name  string
		rec   *wal.Record
		route Route
		class Class
	}{
		{"heap insert on a user table", rb{rm: wal.RmgrHeap, info: wal.XLogHeapInsert, blocks: []wal.BlockRef{block(0, user, nil)}, main: ins}.rec(), RouteNoop, ClassUser},
		{"user table of another database", rb{rm: wal.RmgrHeap, info: wal.XLogHeapDelete, blocks: []wal.BlockRef{block(0, userOtherDB, nil)}}.rec(), RouteNoop, ClassUser},
		{"heap insert on a catalog", rb{rm: wal.RmgrHeap, info: wal.XLogHeapLock, blocks: []wal.BlockRef{block(0, catalog, nil)}}.rec(), RouteShadow, ClassCatalog},
		{"catalog of another database", rb{rm: wal.RmgrBtree, blocks: []wal.BlockRef{block(0, rfn(16390, 2662), nil)}}.rec(), RouteShadow, ClassCatalog},
		{"shared catalog above 16384", rb{rm: wal.RmgrHeap2, info: wal.XLogHeap2Visible, blocks: []wal.BlockRef{block(0, shared, nil)}}.rec(), RouteShadow, ClassCatalog},
		{"user and catalog blocks keep the whole record", rb{rm: wal.RmgrBtree, blocks: []wal.BlockRef{block(0, user, nil), block(1, catalog, nil)}}.rec(), RouteShadow, ClassCatalog},
		{"index on a user table", rb{rm: wal.RmgrGin, info: 0x20, blocks: []wal.BlockRef{block(0, user, nil)}}.rec(), RouteNoop, ClassUser},
		{"sequence", rb{rm: wal.RmgrSequence, blocks: []wal.BlockRef{block(0, user, nil)}}.rec(), RouteNoop, ClassUser},
		{"custom rmgr on user blocks", rb{rm: 200, blocks: []wal.BlockRef{block(0, user, nil)}}.rec(), RouteNoop, ClassUser},
		{"custom rmgr without blocks", rb{rm: 200}.rec(), RouteShadow, ClassUnknown},

		{"FPI of user pages", fpiRec(0x1000028, 0, user, rfn(followedDB, 16401)), RouteNoop, ClassUser},
		{"FPI with a catalog page", fpiRec(0x1000028, 0, user, catalog), RouteShadow, ClassCatalog},
		{"FPI_FOR_HINT of a user page", func() *wal.Record {
			r := fpiRec(0x1000028, 0, user)
			r.Header.Info = wal.XLogFPIForHint
			return r
		}(), RouteNoop, ClassUser},
		{"FPI without blocks", rb{rm: wal.RmgrXLOG, info: wal.XLogFPI}.rec(), RouteShadow, ClassSpecial},
		{"checkpoint", rb{rm: wal.RmgrXLOG, info: wal.XLogCheckpointOnline}.rec(), RouteShadow, ClassSpecial},

		{"NEW_CID on a catalog", newCIDRec(0x1000028, 700, 700, catalog), RouteShadow, ClassCatalog},
		{"NEW_CID on a user catalog table", newCIDRec(0x1000028, 700, 700, user), RouteNoop, ClassUser},
		{"NEW_CID too short", rb{rm: wal.RmgrHeap2, info: wal.XLogHeap2NewCID, main: le{}.u32(1)}.rec(), RouteShadow, ClassUnknown},
		{"BTREE_REUSE_PAGE of a user index", rb{rm: wal.RmgrBtree, info: xlogBtreeReusePage, main: le{}.rel(user).u32(7).u64(9)}.rec(), RouteNoop, ClassUser},
		{"BTREE_REUSE_PAGE of a catalog index", rb{rm: wal.RmgrBtree, info: xlogBtreeReusePage, main: le{}.rel(rfn(followedDB, 2662)).u32(7).u64(9)}.rec(), RouteShadow, ClassCatalog},
		{"BTREE_REUSE_PAGE too short", rb{rm: wal.RmgrBtree, info: xlogBtreeReusePage, main: le{}.u32(1)}.rec(), RouteShadow, ClassUnknown},
		{"GIST_PAGE_REUSE of a user index", rb{rm: wal.RmgrGist, info: xlogGistPageReuse, main: le{}.rel(user).u32(7).u64(9)}.rec(), RouteNoop, ClassUser},
		{"GIST_ASSIGN_LSN", rb{rm: wal.RmgrGist, info: 0x70}.rec(), RouteShadow, ClassUnknown},
		{"btree record without blocks or locator", rb{rm: wal.RmgrBtree, info: 0x00}.rec(), RouteShadow, ClassUnknown},
		{"HEAP_TRUNCATE of user tables", rb{rm: wal.RmgrHeap, info: wal.XLogHeapTruncate, main: le{}.u32(followedDB).u32(2).u8(0).pad(3).u32(16400).u32(16410)}.rec(), RouteNoop, ClassUser},
		{"HEAP_TRUNCATE naming a catalog", rb{rm: wal.RmgrHeap, info: wal.XLogHeapTruncate, main: le{}.u32(followedDB).u32(2).u8(0).pad(3).u32(16400).u32(2608)}.rec(), RouteShadow, ClassCatalog},
		{"HEAP_TRUNCATE malformed", rb{rm: wal.RmgrHeap, info: wal.XLogHeapTruncate, main: le{}.u32(followedDB).u32(3)}.rec(), RouteShadow, ClassUnknown},
		{"logical message", rb{rm: wal.RmgrLogicalMsg, xid: 700, main: []byte("hello")}.rec(), RouteNoop, ClassUser},
		// The shadow holds no replayed AccessExclusiveLock: one of a catalog
		// (VACUUM FULL pg_am) held while replay stands at a boundary would
		// block every new connection to the database there.
		{"STANDBY LOCK of a catalog", lockRec(0x1000028, 700, followedDB, 2601), RouteNoop, ClassSpecial},
		{"STANDBY LOCK of a user table", lockRec(0x1000028, 700, followedDB, 16400), RouteNoop, ClassSpecial},
	}
	for _, special := range []wal.RmgrID{wal.RmgrCLOG, wal.RmgrTablespace, wal.RmgrMultiXact, wal.RmgrCommitTs, wal.RmgrReplOrigin} {
		cases = append(cases, struct {
			name  string
			rec   *wal.Record
			route Route
			class Class
		}{"special " + special.String(), rb{rm: special, info: 0x10, blocks: []wal.BlockRef{block(0, user, nil)}}.rec(), RouteShadow, ClassSpecial})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := New(Config{DbOid: followedDB})
			d := mustDecide(t, f, c.rec)
			if d.Route != c.route || d.Class != c.class {
				t.Errorf("got %s/%s, want %s/%s", d.Route, d.Class, c.route, c.class)
			}
			if d.Boundary != nil || d.Aborted != nil || d.DeferCatalogDecode {
				t.Errorf("unexpected extras: %+v", d)
			}
			st := f.Stats()
			if got := st.Rmgr(c.route, c.rec.Header.RmID); got.Records != 1 || got.Bytes != uint64(c.rec.Header.TotLen) {
				t.Errorf("stats for %s/%s = %+v", c.route, c.rec.Header.RmID, got)
			}
			if st.ByClass[c.class].Records != 1 {
				t.Errorf("class stats = %+v", st.ByClass)
			}
		})
	}
}

func TestTrackedFileIsCatalog(t *testing.T) {
	f := New(Config{DbOid: followedDB})
	moved := rfn(followedDB, 16999)
	rec := rb{rm: wal.RmgrHeap, info: wal.XLogHeapDelete, blocks: []wal.BlockRef{block(0, moved, nil)}}.rec()
	if d := mustDecide(t, f, rec); d.Route != RouteNoop {
		t.Fatalf("untracked file: %s", d.Route)
	}
	f.Tracker().Seed(followedDB, []uint32{16999, 1247})
	if d := mustDecide(t, f, rec); d.Route != RouteShadow || d.Class != ClassCatalog {
		t.Fatalf("seeded file: %s/%s", d.Route, d.Class)
	}
	// The same number in another database is another relation.
	other := rb{rm: wal.RmgrHeap, info: wal.XLogHeapDelete, blocks: []wal.BlockRef{block(0, rfn(16390, 16999), nil)}}.rec()
	if d := mustDecide(t, f, other); d.Route != RouteNoop {
		t.Fatalf("other database: %s", d.Route)
	}
	if got := f.Tracker().Relocated(followedDB); len(got) != 1 || got[0] != 16999 {
		t.Fatalf("Relocated = %v (numbers below 16384 need no tracking)", got)
	}
}

func TestUserRecordDoesNotAllocate(t *testing.T) {
	f := New(Config{DbOid: followedDB})
	f.Tracker().Seed(followedDB, []uint32{17000})
	mustDecide(t, f, heapInsertRec(0x1000028, 900, rfn(followedDB, 1259), pgClassUserData(17001, 17001)))
	recs := []*wal.Record{
		heapInsertRec(0x2000028, 901, rfn(followedDB, 16400), []byte("row")),
		fpiRec(0x2000100, 901, rfn(followedDB, 16400)),
		heapInsertRec(0x2000200, 900, rfn(followedDB, 16400), []byte("row of a dirty tree")),
	}
	allocs := testing.AllocsPerRun(1000, func() {
		for _, r := range recs {
			if _, err := f.Decide(r); err != nil {
				t.Fatal(err)
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per user record batch, want 0", allocs)
	}
}

func TestNoopRoundTripOfDecision(t *testing.T) {
	// A user record routed to NOOP rewrites to a record DecodeRecord accepts
	// and identifies as XLOG/NOOP.
	f := New(Config{DbOid: followedDB})
	rec := heapInsertRec(0x1000028, 900, rfn(followedDB, 16400), []byte("some row bytes"))
	rec.Header.Prev = 0x1000000
	d := mustDecide(t, f, rec)
	if d.Route != RouteNoop {
		t.Fatal(d.Route)
	}
	buf, err := NoopRecord(nil, rec.Header.TotLen, rec.Header.XID, rec.Header.Prev)
	if err != nil {
		t.Fatal(err)
	}
	var out wal.Record
	if err := wal.DecodeRecord(buf, rec.LSN, pg15, &out); err != nil {
		t.Fatal(err)
	}
	if out.Header.RmID != wal.RmgrXLOG || out.RmgrInfo() != wal.XLogNoop || out.Header.XID != 900 || out.Header.Prev != 0x1000000 {
		t.Fatalf("rewritten header %+v", out.Header)
	}
}
