package filter

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/walshadow/walshadow/internal/wal"
)

func TestRelMapUpdateTracksMappedCatalogs(t *testing.T) {
	f := New(Config{DbOid: followedDB})
	tr := f.Tracker()
	if got := tr.PgClassRelNum(followedDB); got != 1259 {
		t.Fatalf("default pg_class file %d", got)
	}
	d := mustDecide(t, f, relmapRec(0x1000028, 824, followedDB, [2]uint32{1259, 16417}, [2]uint32{1249, 1249}, [2]uint32{2662, 16420}))
	if d.Route != RouteShadow || d.Class != ClassSpecial {
		t.Fatalf("relmap update: %s/%s", d.Route, d.Class)
	}
	if got := tr.PgClassRelNum(followedDB); got != 16417 {
		t.Fatalf("pg_class file after relmap %d, want 16417", got)
	}
	if got := tr.Relocated(followedDB); !slices.Equal(got, []uint32{16417, 16420}) {
		t.Fatalf("Relocated = %v", got)
	}
	if oid, ok := tr.CatalogOid(rfn(followedDB, 16420)); !ok || oid != 2662 {
		t.Fatalf("CatalogOid(16420) = %d, %t", oid, ok)
	}
	if tr.PgClassRelNum(16390) != 1259 {
		t.Fatal("another database's pg_class moved too")
	}
	// The shared map (db 0) never names a database's pg_class.
	mustDecide(t, f, relmapRec(0x1000100, 0, 0, [2]uint32{1262, 16600}))
	if got := tr.Relocated(0); !slices.Equal(got, []uint32{16600}) {
		t.Fatalf("shared Relocated = %v", got)
	}
	// pg_class rows are now read from the new file.
	mustDecide(t, f, heapInsertRec(0x1000200, 830, rfn(followedDB, 16417), pgClassUserData(2608, 16700)))
	if !tr.IsCatalog(rfn(followedDB, 16700)) {
		t.Fatal("pg_class row in the relocated pg_class not read")
	}
	if st := f.Stats(); st.TrackedRelMap != 3 || st.TrackedPgClass != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestPgClassRows(t *testing.T) {
	pgClass := rfn(followedDB, 1259)
	t.Run("insert of a relocated catalog row", func(t *testing.T) {
		f := New(Config{DbOid: followedDB})
		mustDecide(t, f, heapInsertRec(0x1000028, 800, pgClass, pgClassUserData(2608, 16800)))
		if !f.Tracker().IsCatalog(rfn(followedDB, 16800)) {
			t.Fatal("relocated pg_depend not tracked")
		}
		// A user relation's row is an affected oid, not a catalog file.
		mustDecide(t, f, heapInsertRec(0x1000100, 800, pgClass, pgClassUserData(16801, 16801)))
		if f.Tracker().IsCatalog(rfn(followedDB, 16801)) {
			t.Fatal("user relation tracked as catalog")
		}
		d := mustDecide(t, f, commitRec(0x1000200, 800, xactEnd{dbOid: followedDB}))
		if d.Boundary == nil || !slices.Equal(d.Boundary.AffectedOids, []uint32{16801}) {
			t.Fatalf("boundary %+v", d.Boundary)
		}
	})
	t.Run("uncompressed update", func(t *testing.T) {
		f := New(Config{DbOid: followedDB})
		mustDecide(t, f, heapUpdateRec(0x1000028, 800, pgClass, pgClassUserData(2608, 16802), 0, false))
		mustDecide(t, f, heapUpdateRec(0x1000100, 800, pgClass, pgClassUserData(2609, 16803), 0, true))
		if !f.Tracker().IsCatalog(rfn(followedDB, 16802)) || !f.Tracker().IsCatalog(rfn(followedDB, 16803)) {
			t.Fatal("UPDATE / HOT_UPDATE rows not read")
		}
	})
	t.Run("prefix-compressed update is counted, not guessed", func(t *testing.T) {
		f := New(Config{DbOid: followedDB})
		d := mustDecide(t, f, heapUpdateRec(0x1000028, 800, pgClass, pgClassUserData(2608, 16804), 88, false))
		if d.Route != RouteShadow {
			t.Fatal(d.Route)
		}
		if f.Tracker().IsCatalog(rfn(followedDB, 16804)) {
			t.Fatal("compressed row decoded without its oid")
		}
		if st := f.Stats(); st.PgClassUndecodable != 1 {
			t.Fatalf("PgClassUndecodable = %d", st.PgClassUndecodable)
		}
		// Still a catalog write: the tree is dirty and commits a boundary.
		d = mustDecide(t, f, commitRec(0x1000100, 800, xactEnd{dbOid: followedDB, invals: [][]byte{relcacheInval(followedDB, 16900)}}))
		if d.Boundary == nil || !slices.Equal(d.Boundary.AffectedOids, []uint32{16900}) || d.Boundary.FirstCatalogTouch != 0x1000028 {
			t.Fatalf("boundary %+v", d.Boundary)
		}
	})
	t.Run("row too short or with nulls in the prefix", func(t *testing.T) {
		f := New(Config{DbOid: followedDB})
		mustDecide(t, f, heapInsertRec(0x1000028, 800, pgClass, pgClassUserData(2608, 16805)[:80]))
		if f.Tracker().Len() != 0 || f.Stats().PgClassUndecodable != 1 {
			t.Fatalf("short row: tracker %d, stats %+v", f.Tracker().Len(), f.Stats())
		}
	})
	t.Run("row only in a full-page image", func(t *testing.T) {
		f := New(Config{DbOid: followedDB})
		page := heapPage(t, 3, pgClassUserData(2608, 16806))
		b := wal.BlockRef{ID: 0, ForkFlags: wal.BkpBlockHasImage, Rel: pgClass,
			Image: wal.BlockImage{Length: wal.BlockSize, Info: wal.BkpImageApply}, ImageData: page}
		rec := rb{rm: wal.RmgrHeap, info: wal.XLogHeapInsert, xid: 800, blocks: []wal.BlockRef{b}, main: le{}.u16(3).u8(0)}.rec()
		mustDecide(t, f, rec)
		if !f.Tracker().IsCatalog(rfn(followedDB, 16806)) {
			t.Fatal("row not read from the image")
		}
		// A wrong line pointer is undecodable, not a crash.
		rec.MainData = le{}.u16(9).u8(0)
		mustDecide(t, f, rec)
		if f.Stats().PgClassUndecodable != 1 {
			t.Fatalf("stats %+v", f.Stats())
		}
	})
	t.Run("multi insert", func(t *testing.T) {
		f := New(Config{DbOid: followedDB})
		row := func(oid, fn uint32) []byte {
			tup := heapTupleData(33, pgClassUserData(oid, fn))
			// xl_multi_insert_tuple: datalen, infomask2, infomask, t_hoff.
			return append(le{}.u16(uint16(len(tup)-5)), tup...)
		}
		data := append(row(2608, 16807), row(16808, 16808)...)
		if len(row(2608, 16807))%2 != 0 {
			t.Fatal("test row not SHORTALIGNed")
		}
		rec := rb{rm: wal.RmgrHeap2, info: wal.XLogHeap2MultiInsert, xid: 800,
			blocks: []wal.BlockRef{block(0, pgClass, data)}, main: le{}.u8(0).u8(0).u16(2).u16(1).u16(2)}.rec()
		mustDecide(t, f, rec)
		if !f.Tracker().IsCatalog(rfn(followedDB, 16807)) || f.Stats().PgClassRows != 2 {
			t.Fatalf("multi insert rows: stats %+v", f.Stats())
		}
	})
	t.Run("pg_class of another database", func(t *testing.T) {
		f := New(Config{DbOid: followedDB})
		d := mustDecide(t, f, heapInsertRec(0x1000028, 800, rfn(16390, 1259), pgClassUserData(2608, 16809)))
		if d.Route != RouteShadow || !f.Tracker().IsCatalog(rfn(16390, 16809)) || f.Tracker().IsCatalog(rfn(followedDB, 16809)) {
			t.Fatal("per-database tracking broken")
		}
		if dirty, _ := f.trees.rootFlags(800); dirty {
			t.Fatal("a foreign database's catalog write dirtied the tree")
		}
	})
}

// heapPage builds an 8 KiB heap page holding one tuple with user data ud
// at line pointer off (earlier line pointers unused).
func heapPage(t *testing.T, off uint16, ud []byte) []byte {
	t.Helper()
	page := make([]byte, wal.BlockSize)
	tupLen := 24 + len(ud)
	at := wal.BlockSize - tupLen
	lower := pageHeaderSize + int(off)*itemIDSize
	binary.LittleEndian.PutUint16(page[12:], uint16(lower))
	binary.LittleEndian.PutUint16(page[14:], uint16(at))
	binary.LittleEndian.PutUint32(page[pageHeaderSize+int(off-1)*itemIDSize:], uint32(at)|lpNormal<<15|uint32(tupLen)<<17)
	binary.LittleEndian.PutUint16(page[at+tupleInfomask2At:], 33)
	page[at+tupleHoffAt] = 24
	copy(page[at+24:], ud)
	return page
}

func TestRewritingTransactionTracksNewFiles(t *testing.T) {
	f := New(Config{DbOid: followedDB})
	newFile := rfn(followedDB, 17000)
	fpi := fpiRec(0x1000400, 824, newFile)

	// Without a catalog lock, new storage is a user relation's.
	mustDecide(t, f, smgrCreateRec(0x1000028, 820, rfn(followedDB, 16990), wal.ForkMain))
	if f.Tracker().IsCatalog(rfn(followedDB, 16990)) {
		t.Fatal("plain CREATE TABLE storage tracked as catalog")
	}
	// VACUUM FULL pg_class: LOCK on 1259, then the transient heap's storage,
	// then its pages as XLOG_FPI, all before the relmap update names it.
	mustDecide(t, f, lockRec(0x1000100, 824, followedDB, 1259))
	mustDecide(t, f, smgrCreateRec(0x1000200, 824, newFile, wal.ForkMain))
	if d := mustDecide(t, f, fpi); d.Route != RouteShadow || d.Class != ClassCatalog {
		t.Fatalf("rewrite page: %s/%s", d.Route, d.Class)
	}
	// A subtransaction of the rewriting tree is part of it.
	mustDecide(t, f, rb{rm: wal.RmgrHeap, info: wal.XLogHeapLock, xid: 825, top: 824, blocks: []wal.BlockRef{block(0, rfn(followedDB, 1259), nil)}}.rec())
	mustDecide(t, f, smgrCreateRec(0x1000500, 825, rfn(followedDB, 17001), wal.ForkMain))
	if !f.Tracker().IsCatalog(rfn(followedDB, 17001)) {
		t.Fatal("subxact storage of a rewriting tree not tracked")
	}
	// The commit drops the old files; the lock flag ends with the tree.
	mustDecide(t, f, commitRec(0x1000600, 824, xactEnd{dbOid: followedDB, subxacts: []uint32{825}, rels: []wal.RelFileNode{rfn(followedDB, 17001)}}))
	if f.Tracker().IsCatalog(rfn(followedDB, 17001)) {
		t.Fatal("dropped file still tracked")
	}
	if !f.Tracker().IsCatalog(newFile) {
		t.Fatal("new catalog file forgotten at commit")
	}
	mustDecide(t, f, smgrCreateRec(0x1000700, 824, rfn(followedDB, 17002), wal.ForkMain))
	if f.Tracker().IsCatalog(rfn(followedDB, 17002)) {
		t.Fatal("rewrite flag outlived its transaction")
	}
	if st := f.Stats(); st.TrackedRewrite != 2 {
		t.Fatalf("TrackedRewrite = %d", st.TrackedRewrite)
	}
	// A lock on a user relation flags nothing.
	mustDecide(t, f, lockRec(0x1000800, 830, followedDB, 16990))
	mustDecide(t, f, smgrCreateRec(0x1000900, 830, rfn(followedDB, 17003), wal.ForkMain))
	if f.Tracker().IsCatalog(rfn(followedDB, 17003)) {
		t.Fatal("user lock flagged a rewrite")
	}
}

func TestCreateDatabase(t *testing.T) {
	f := New(Config{DbOid: followedDB})
	tr := f.Tracker()
	tr.Seed(1, []uint32{16500}) // template1's pg_depend was rewritten
	mustDecide(t, f, relmapRec(0x1000000, 700, 1, [2]uint32{1259, 16501}))

	// FILE_COPY copies the directory: same file numbers.
	mustDecide(t, f, rb{rm: wal.RmgrDatabase, info: xlogDbaseCreateFileCopy, xid: 700, main: le{}.u32(16600).u32(1663).u32(1).u32(1663)}.rec())
	if !tr.IsCatalog(rfn(16600, 16500)) || tr.PgClassRelNum(16600) != 16501 {
		t.Fatal("FILE_COPY did not copy the template's catalog files")
	}
	// WAL_LOG copies page by page inside the creating transaction.
	mustDecide(t, f, rb{rm: wal.RmgrDatabase, info: xlogDbaseCreateWalLog, xid: 701, main: le{}.u32(16700).u32(1663)}.rec())
	mustDecide(t, f, smgrCreateRec(0x1000100, 701, rfn(16700, 16500), wal.ForkMain))
	if d := mustDecide(t, f, fpiRec(0x1000200, 701, rfn(16700, 16500))); d.Route != RouteShadow {
		t.Fatal("WAL_LOG copy of a relocated catalog NOOP'd")
	}
	// DROP DATABASE forgets the database.
	mustDecide(t, f, rb{rm: wal.RmgrDatabase, info: xlogDbaseDrop, xid: 702, main: le{}.u32(16600).u32(1).u32(1663)}.rec())
	if tr.IsCatalog(rfn(16600, 16500)) || tr.PgClassRelNum(16600) != 1259 {
		t.Fatal("dropped database still tracked")
	}
	for _, main := range [][]byte{nil, le{}.u32(1)} {
		g := New(Config{DbOid: followedDB})
		rec := rb{lsn: 0x1234568, rm: wal.RmgrDatabase, info: xlogDbaseCreateFileCopy, main: main}.rec()
		if _, err := g.Decide(rec); err == nil || !containsLSN(err, rec.LSN) {
			t.Fatalf("malformed CREATE DATABASE: %v", err)
		}
	}
}

func TestSmgrCreateLSN(t *testing.T) {
	f := New(Config{DbOid: followedDB})
	r := rfn(followedDB, 16400)
	mustDecide(t, f, smgrCreateRec(0x1000028, 700, r, wal.ForkMain))
	mustDecide(t, f, smgrCreateRec(0x1000100, 700, rfn(followedDB, 16401), wal.ForkFSM))
	if lsn, ok := f.SmgrCreateLSN(r); !ok || lsn != 0x1000028 {
		t.Fatalf("SmgrCreateLSN = %s, %t", lsn, ok)
	}
	if _, ok := f.SmgrCreateLSN(rfn(followedDB, 16401)); ok {
		t.Fatal("FSM fork creation recorded")
	}
	mustDecide(t, f, abortRec(0x1000200, 700, xactEnd{rels: []wal.RelFileNode{r}}))
	if _, ok := f.SmgrCreateLSN(r); ok {
		t.Fatal("storage dropped by the abort still recorded")
	}
	rec := rb{lsn: 0x1234568, rm: wal.RmgrSmgr, info: wal.XLogSmgrCreate, main: le{}.u32(1)}.rec()
	if _, err := New(Config{DbOid: followedDB}).Decide(rec); err == nil || !containsLSN(err, rec.LSN) {
		t.Fatalf("malformed SMGR_CREATE: %v", err)
	}
}
