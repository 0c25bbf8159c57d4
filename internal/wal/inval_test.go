package wal

import "testing"

func TestInvalMessageKinds(t *testing.T) {
	src := xtBuf{}.
		inval(55, 5, 0xCAFEBABE).                  // catcache RELOID
		inval(0, 0, 7).                            // catcache id 0, shared
		inval(SharedInvalCatalogID, 5, 2608).      // catalog pg_depend
		inval(SharedInvalRelcacheID, 5, 0).        // all relcache entries
		u8(0xFD).u8(0xFF).u16(0xFFFF).rel(xtRelA). // smgr, InvalidBackendId
		u8(0xFD).u8(0x01).u16(0x1170).rel(xtRelB). // smgr, backend 70000
		inval(SharedInvalRelmapID, 0, 0xFFFFFFFF). // shared relmap; junk after dbId
		inval(SharedInvalSnapshotID, 5, 1259)      // snapshot
	want := []InvalMessage{
		{Kind: InvalCatcache, ID: 55, DbOid: 5, HashValue: 0xCAFEBABE},
		{Kind: InvalCatcache, ID: 0, DbOid: 0, HashValue: 7},
		{Kind: InvalCatalog, ID: -1, DbOid: 5, ObjOid: 2608},
		{Kind: InvalRelcache, ID: -2, DbOid: 5, ObjOid: 0},
		{Kind: InvalSmgr, ID: -3, DbOid: 5, Backend: -1, Rel: xtRelA},
		{Kind: InvalSmgr, ID: -3, DbOid: 0, Backend: 70000, Rel: xtRelB},
		{Kind: InvalRelmap, ID: -4, DbOid: 0},
		{Kind: InvalSnapshot, ID: -5, DbOid: 5, ObjOid: 1259},
	}
	rec := xtRec(t, RmgrXact, XLogXactInvalidations, 15, nil)
	var msgs InvalMessages
	// One extra trailing byte: Decode takes exactly n messages.
	if err := msgs.Decode(rec, append(src, 0xEE), len(want)); err != nil {
		t.Fatal(err)
	}
	if msgs.Len() != len(want) || len(msgs.Bytes()) != len(want)*InvalMessageSize {
		t.Fatalf("Len %d", msgs.Len())
	}
	for i, w := range want {
		if got := msgs.At(i); got != w {
			t.Errorf("message %d: got %+v, want %+v", i, got, w)
		}
	}
	if msgs.At(0).CacheID() != 55 || msgs.At(2).CacheID() != -1 {
		t.Error("CacheID")
	}
	if InvalSmgr.String() != "smgr" || InvalRelSync.String() != "relsync" || InvalKind(0).String() != "InvalKind(0)" {
		t.Error("InvalKind.String")
	}

	// -6 exists only from PG18 on.
	relsync := xtBuf{}.inval(SharedInvalRelSyncID, 5, 16400)
	xtWantErr(t, msgs.Decode(rec, relsync, 1), KindCorrupt, "message 0: unrecognized id -6")
	if msgs.Len() != 0 {
		t.Error("failed Decode left messages behind")
	}
	rec18 := xtRec(t, RmgrXact, XLogXactInvalidations, 18, nil)
	if err := msgs.Decode(rec18, relsync, 1); err != nil {
		t.Fatal(err)
	}
	if got := msgs.At(0); got != (InvalMessage{Kind: InvalRelSync, ID: -6, DbOid: 5, ObjOid: 16400}) {
		t.Errorf("relsync %+v", got)
	}
	xtWantErr(t, msgs.Decode(rec18, xtBuf{}.inval(1, 0, 0).inval(-7, 0, 0), 2), KindCorrupt, "message 1: unrecognized id -7")
}

func TestInvalMessagesDecodeErrors(t *testing.T) {
	rec := xtRec(t, RmgrXact, XLogXactInvalidations, 15, nil)
	var msgs InvalMessages
	xtWantErr(t, msgs.Decode(rec, nil, -1), KindCorrupt, "negative count -1")
	xtWantErr(t, msgs.Decode(rec, make([]byte, 31), 2), KindCorrupt, "2 messages need 32 bytes, have 31")
	if err := msgs.Decode(rec, nil, 0); err != nil || msgs.Len() != 0 {
		t.Errorf("empty: %v %d", err, msgs.Len())
	}
	rec.Layout = nil
	xtWantErr(t, msgs.Decode(rec, make([]byte, 16), 1), KindUnsupported, "no layout")
}
