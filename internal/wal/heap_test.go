package wal

import (
	"bytes"
	"fmt"
	"testing"
)

// A tuple of (int4 7, text 'hi') logged from offset 23: pad byte, user data.
var (
	heapTestTupleHeader = heapXLHeader(2, HeapHasVarWidth, 24)
	heapTestTupleData   = []byte{0, 7, 0, 0, 0, 0x07, 'h', 'i'}
	heapTestTuple       = append(append([]byte(nil), heapTestTupleHeader...), heapTestTupleData...)
)

func TestHeapTupleHeader(t *testing.T) {
	var h HeapTupleHeader
	if err := h.Decode([]byte{0x03, 0xC0, 0x07, 0x28, 32, 0xEE}); err != nil {
		t.Fatal(err)
	}
	if h != (HeapTupleHeader{Infomask2: 0xC003, Infomask: 0x2807, Hoff: 32}) {
		t.Fatalf("got %+v", h)
	}
	if h.Natts() != 3 || !h.HasNulls() || !h.HasVarWidth() || !h.HasExternal() || h.KeysUpdated() || !h.HotUpdated() || !h.HeapOnly() || h.BitmapLen() != 1 {
		t.Fatalf("helpers on %+v", h)
	}
	h = HeapTupleHeader{Infomask2: HeapKeysUpdated | 9, Infomask: 0}
	if !h.KeysUpdated() || h.HasNulls() || h.BitmapLen() != 0 || h.Natts() != 9 {
		t.Fatalf("helpers on %+v", h)
	}
	h.Infomask = HeapHasNull
	if h.BitmapLen() != 2 {
		t.Fatalf("BitmapLen of 9 attributes = %d, want 2", h.BitmapLen())
	}
	wantHeapError(t, h.Decode([]byte{1, 2, 3, 4}), KindCorrupt, 0, "4 bytes, want 5")
}

func TestHeapTupleDecode(t *testing.T) {
	var tup HeapTuple
	// natts 10 with nulls: a 2-byte bitmap, t_hoff 32 leaves 9 bytes before user data.
	src := append(heapXLHeader(10, HeapHasNull, 32), 0xFD, 0x03, 0, 0, 0, 0, 0, 0, 0, 0xAA, 0xBB)
	if err := tup.Decode(src); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(tup.Bitmap(), []byte{0xFD, 0x03}) || !bytes.Equal(tup.UserData(), []byte{0xAA, 0xBB}) {
		t.Fatalf("bitmap % x user data % x", tup.Bitmap(), tup.UserData())
	}
	for i, want := range []bool{false, true, false, false, false, false, false, false, false, false} {
		if tup.IsNull(i) != want {
			t.Fatalf("IsNull(%d) = %t", i, !want)
		}
	}
	if tup.IsNull(10) || tup.IsNull(-1) {
		t.Fatal("attributes outside natts must not report NULL")
	}
	for _, c := range []struct {
		name string
		src  []byte
		msg  string
	}{
		{"short", []byte{1, 0, 0, 0}, "4 bytes, want >= 5"},
		{"hoff below 23", append(heapXLHeader(1, 0, 22), 0, 0), "t_hoff 22 < 23"},
		{"hoff past data", append(heapXLHeader(1, 0, 32), 0, 0), "t_hoff 32 past 25 stored tuple bytes"},
		{"bitmap past hoff", append(heapXLHeader(100, HeapHasNull, 24), 0, 0), "null bitmap of 100 attributes needs 13 bytes, t_hoff 24 leaves 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantHeapError(t, new(HeapTuple).Decode(c.src), KindCorrupt, 0, c.msg)
		})
	}
	// A hand-built tuple whose bitmap is missing must not panic.
	bad := HeapTuple{Header: HeapTupleHeader{Infomask2: 20, Infomask: HeapHasNull, Hoff: 20}}
	if bad.IsNull(17) || bad.UserData() != nil || bad.Bitmap() != nil {
		t.Fatal("inconsistent hand-built tuple")
	}
}

func TestHeapInsert(t *testing.T) {
	main := heapLE(uint16(5), uint8(XLHInsertContainsNewTuple))
	t.Run("tuple", func(t *testing.T) {
		rec := heapTestRecord(t, 15, RmgrHeap, XLogHeapInsert|XLogHeapInitPage, []heapTestBlock{heapBlk(0, 3, heapTestTuple)}, main)
		var b HeapInsert
		if err := b.Decode(rec); err != nil {
			t.Fatal(err)
		}
		if !b.InitPage || b.Rel != heapTestRel || b.Block != 3 || b.OffNum != 5 || b.Flags != 8 || !b.HasTuple || b.IsSpeculative() {
			t.Fatalf("got %+v", b)
		}
		if b.Tuple.Header != (HeapTupleHeader{2, HeapHasVarWidth, 24}) || !bytes.Equal(b.Tuple.Data, heapTestTupleData) {
			t.Fatalf("tuple %+v % x", b.Tuple.Header, b.Tuple.Data)
		}
		if &b.Tuple.Data[0] != &rec.Block(0).Data[sizeOfHeapHeader] {
			t.Fatal("tuple data must alias the record")
		}
		if n := testing.AllocsPerRun(100, func() { _ = b.Decode(rec) }); n != 0 {
			t.Fatalf("Decode allocates %v times", n)
		}
	})
	t.Run("vm block refs of 17.12", func(t *testing.T) {
		// Minor releases register the VM page as block 1; the heap block stays id 0.
		vm := heapTestBlock{id: 1, fork: ForkVM, rel: heapTestRel, blk: 0}
		rec := heapTestRecord(t, 17, RmgrHeap, XLogHeapInsert, []heapTestBlock{heapBlk(0, 9, heapTestTuple), vm}, main)
		var b HeapInsert
		if err := b.Decode(rec); err != nil || b.Block != 9 || !b.HasTuple {
			t.Fatalf("got %+v, %v", b, err)
		}
	})
	t.Run("image without data", func(t *testing.T) {
		blk := heapBlk(0, 3, nil)
		blk.image = true
		rec := heapTestRecord(t, 15, RmgrHeap, XLogHeapInsert, []heapTestBlock{blk}, heapLE(uint16(5), uint8(0)))
		var b HeapInsert
		if err := b.Decode(rec); err != nil || b.HasTuple || b.OffNum != 5 || b.Tuple.Data != nil {
			t.Fatalf("got %+v, %v", b, err)
		}
	})
	for _, c := range []struct {
		name   string
		info   uint8
		blocks []heapTestBlock
		main   []byte
		msg    string
	}{
		{"main data short", XLogHeapInsert, []heapTestBlock{heapBlk(0, 0, heapTestTuple)}, heapLE(uint16(5)), "main data 2 bytes, want 3"},
		{"main data long", XLogHeapInsert, []heapTestBlock{heapBlk(0, 0, heapTestTuple)}, heapLE(uint16(5), uint16(0)), "main data 4 bytes, want 3"},
		{"no block 0", XLogHeapInsert, []heapTestBlock{heapBlk(1, 0, heapTestTuple)}, main, "no block reference 0"},
		{"flag without data", XLogHeapInsert, []heapTestBlock{heapBlk(0, 0, nil)}, main, "claim a new tuple but block 0 has no data"},
		{"tuple short", XLogHeapInsert, []heapTestBlock{heapBlk(0, 0, []byte{1, 2, 3})}, main, "heap insert tuple: 3 bytes"},
		{"tuple hoff", XLogHeapInsert, []heapTestBlock{heapBlk(0, 0, heapXLHeader(1, 0, 200))}, main, "t_hoff 200 past"},
		{"wrong opcode", XLogHeapDelete, []heapTestBlock{heapBlk(0, 0, heapTestTuple)}, main, "want Heap opcode 0x00"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := heapTestRecord(t, 15, RmgrHeap, c.info, c.blocks, c.main)
			wantHeapError(t, new(HeapInsert).Decode(rec), KindCorrupt, rec.LSN, c.msg)
		})
	}
	t.Run("wrong rmgr", func(t *testing.T) {
		rec := heapTestRecord(t, 15, RmgrHeap2, XLogHeapInsert, []heapTestBlock{heapBlk(0, 0, heapTestTuple)}, main)
		wantHeapError(t, new(HeapInsert).Decode(rec), KindCorrupt, rec.LSN, "record is Heap2 info 0x00")
	})
}

func TestHeapDelete(t *testing.T) {
	del := func(flags uint8) []byte { return heapLE(uint32(900), uint16(4), uint8(XLHLKeysUpdated), flags) }
	blk0 := []heapTestBlock{heapBlk(0, 2, nil)}
	t.Run("plain", func(t *testing.T) {
		rec := heapTestRecord(t, 15, RmgrHeap, XLogHeapDelete, blk0, del(XLHDeleteAllVisibleCleared))
		var b HeapDelete
		if err := b.Decode(rec); err != nil {
			t.Fatal(err)
		}
		want := HeapDelete{Rel: heapTestRel, Block: 2, OffNum: 4, Xmax: 900, InfobitsSet: XLHLKeysUpdated, Flags: XLHDeleteAllVisibleCleared}
		if fmt.Sprint(b) != fmt.Sprint(want) {
			t.Fatalf("got %+v", b)
		}
	})
	t.Run("old key", func(t *testing.T) {
		rec := heapTestRecord(t, 15, RmgrHeap, XLogHeapDelete, blk0, append(del(XLHDeleteContainsOldKey), heapTestTuple...))
		var b HeapDelete
		if err := b.Decode(rec); err != nil {
			t.Fatal(err)
		}
		if !b.HasOldTuple || !bytes.Equal(b.OldTuple.Data, heapTestTupleData) || b.OldTuple.Header.Hoff != 24 {
			t.Fatalf("got %+v", b)
		}
		if n := testing.AllocsPerRun(100, func() { _ = b.Decode(rec) }); n != 0 {
			t.Fatalf("Decode allocates %v times", n)
		}
	})
	t.Run("super", func(t *testing.T) {
		rec := heapTestRecord(t, 15, RmgrHeap, XLogHeapDelete, blk0, del(XLHDeleteIsSuper))
		var b HeapDelete
		if err := b.Decode(rec); err != nil || !b.IsSuper() || b.IsPartitionMove() {
			t.Fatalf("got %+v, %v", b, err)
		}
	})
	for _, c := range []struct {
		name   string
		blocks []heapTestBlock
		main   []byte
		msg    string
	}{
		{"main data short", blk0, del(0)[:7], "main data 7 bytes, want >= 8"},
		{"no block 0", nil, del(0), "no block reference 0"},
		{"trailing bytes", blk0, append(del(0), 1), "1 bytes after xl_heap_delete but flags 0x00 log no old tuple"},
		{"old tuple truncated", blk0, append(del(XLHDeleteContainsOldTuple), 1, 2, 3), "heap delete old tuple: 3 bytes"},
		{"old tuple bad hoff", blk0, append(del(XLHDeleteContainsOldKey), heapXLHeader(1, 0, 40)...), "t_hoff 40 past"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := heapTestRecord(t, 15, RmgrHeap, XLogHeapDelete, c.blocks, c.main)
			wantHeapError(t, new(HeapDelete).Decode(rec), KindCorrupt, rec.LSN, c.msg)
		})
	}
}

func TestHeapUpdate(t *testing.T) {
	upd := func(flags uint8) []byte {
		return heapLE(uint32(800), uint16(3), uint8(0), flags, uint32(0), uint16(9))
	}
	t.Run("hot prefix suffix", func(t *testing.T) {
		// Old user data "PPPP" + "old" + "SSS", new "PPPP" + "new!" + "SSS".
		data := heapLE(uint16(4), uint16(3), heapXLHeader(0x8002, HeapHasVarWidth|HeapUpdated, 24), uint8(0), "new!")
		rec := heapTestRecord(t, 15, RmgrHeap, XLogHeapHotUpdate, []heapTestBlock{heapBlk(0, 6, data)},
			upd(XLHUpdatePrefixFromOld|XLHUpdateSuffixFromOld))
		var b HeapUpdate
		if err := b.Decode(rec); err != nil {
			t.Fatal(err)
		}
		if !b.HOT || b.InitPage || b.NewBlock != 6 || b.OldBlock != 6 || b.OldXmax != 800 || b.OldOffNum != 3 || b.NewOffNum != 9 ||
			b.PrefixLen != 4 || b.SuffixLen != 3 || !b.HasNewTuple || b.HasOldTuple || string(b.NewTuple.UserData()) != "new!" {
			t.Fatalf("got %+v", b)
		}
		buf := make([]byte, 0, 64)
		got, err := b.NewUserData(buf, []byte("PPPPoldSSS"))
		if err != nil || string(got) != "PPPPnew!SSS" {
			t.Fatalf("NewUserData = %q, %v", got, err)
		}
		if n := testing.AllocsPerRun(100, func() { _, _ = b.NewUserData(buf[:0], []byte("PPPPoldSSS")) }); n != 0 {
			t.Fatalf("NewUserData with capacity allocates %v times", n)
		}
		_, err = b.NewUserData(nil, []byte("PPPPSS"))
		wantHeapError(t, err, KindCorrupt, rec.LSN, "prefix 4 + suffix 3 exceed old user data of 6 bytes")
	})
	t.Run("suffix only", func(t *testing.T) {
		data := heapLE(uint16(7), heapTestTuple)
		rec := heapTestRecord(t, 15, RmgrHeap, XLogHeapUpdate, []heapTestBlock{heapBlk(0, 6, data)}, upd(XLHUpdateSuffixFromOld))
		var b HeapUpdate
		if err := b.Decode(rec); err != nil || b.PrefixLen != 0 || b.SuffixLen != 7 || !bytes.Equal(b.NewTuple.Data, heapTestTupleData) {
			t.Fatalf("got %+v, %v", b, err)
		}
	})
	t.Run("cross page with old tuple and vm blocks", func(t *testing.T) {
		vmNew := heapTestBlock{id: 2, fork: ForkVM, rel: heapTestRel, blk: 0}
		vmOld := heapTestBlock{id: 3, fork: ForkVM, rel: heapTestRel, blk: 1}
		old := heapLE(heapXLHeader(2, HeapHasNull, 24), uint8(0x01), uint32(42))
		rec := heapTestRecord(t, 18, RmgrHeap, XLogHeapUpdate|XLogHeapInitPage,
			[]heapTestBlock{heapBlk(0, 11, heapTestTuple), heapBlk(1, 4, nil), vmNew, vmOld},
			append(upd(XLHUpdateContainsNewTuple|XLHUpdateContainsOldKey), old...))
		var b HeapUpdate
		if err := b.Decode(rec); err != nil {
			t.Fatal(err)
		}
		if b.HOT || !b.InitPage || b.NewBlock != 11 || b.OldBlock != 4 || !b.HasOldTuple || !b.HasNewTuple ||
			!bytes.Equal(b.OldTuple.UserData(), heapInt4(42)) || !b.OldTuple.IsNull(1) {
			t.Fatalf("got %+v", b)
		}
		if n := testing.AllocsPerRun(100, func() { _ = b.Decode(rec) }); n != 0 {
			t.Fatalf("Decode allocates %v times", n)
		}
	})
	t.Run("no data without flag", func(t *testing.T) {
		blk := heapBlk(0, 6, nil)
		blk.image = true
		rec := heapTestRecord(t, 15, RmgrHeap, XLogHeapHotUpdate, []heapTestBlock{blk}, upd(XLHUpdatePrefixFromOld))
		var b HeapUpdate
		if err := b.Decode(rec); err != nil || b.HasNewTuple || b.PrefixLen != 0 {
			t.Fatalf("got %+v, %v", b, err)
		}
		_, err := b.NewUserData(nil, []byte("anything"))
		wantHeapError(t, err, KindCorrupt, rec.LSN, "new tuple not logged")
	})
	same := []heapTestBlock{heapBlk(0, 6, heapTestTuple)}
	for _, c := range []struct {
		name   string
		info   uint8
		blocks []heapTestBlock
		main   []byte
		msg    string
	}{
		{"main data short", XLogHeapUpdate, same, upd(0)[:13], "main data 13 bytes, want >= 14"},
		{"no block 0", XLogHeapUpdate, []heapTestBlock{heapBlk(1, 6, heapTestTuple)}, upd(0), "no block reference 0"},
		{"hot across pages", XLogHeapHotUpdate, []heapTestBlock{heapBlk(0, 6, heapTestTuple), heapBlk(1, 7, nil)}, upd(0), "HOT update references a second heap block 7"},
		{"prefix across pages", XLogHeapUpdate, []heapTestBlock{heapBlk(0, 6, heapLE(uint16(3), heapTestTuple)), heapBlk(1, 7, nil)}, upd(XLHUpdatePrefixFromOld), "prefix/suffix from old tuple across blocks 7 and 6"},
		{"prefix length cut", XLogHeapUpdate, []heapTestBlock{heapBlk(0, 6, []byte{3})}, upd(XLHUpdatePrefixFromOld), "too short for the prefix length"},
		{"suffix length cut", XLogHeapUpdate, []heapTestBlock{heapBlk(0, 6, []byte{3, 0, 1})}, upd(XLHUpdatePrefixFromOld | XLHUpdateSuffixFromOld), "too short for the suffix length"},
		{"new tuple header cut", XLogHeapUpdate, []heapTestBlock{heapBlk(0, 6, []byte{3, 0, 1, 2})}, upd(XLHUpdatePrefixFromOld), "heap update new tuple: 2 bytes"},
		{"flag without data", XLogHeapUpdate, []heapTestBlock{heapBlk(0, 6, nil)}, upd(XLHUpdateContainsNewTuple), "claim a new tuple but block 0 has no data"},
		{"trailing bytes", XLogHeapUpdate, same, append(upd(0), 1, 2), "2 bytes after xl_heap_update but flags 0x00 log no old tuple"},
		{"old tuple truncated", XLogHeapUpdate, same, append(upd(XLHUpdateContainsOldTuple), 1, 2), "heap update old tuple: 2 bytes"},
		{"old tuple bitmap", XLogHeapUpdate, same, append(upd(XLHUpdateContainsOldKey), heapXLHeader(9, HeapHasNull, 24)...), "t_hoff 24 past 23"},
		{"wrong opcode", XLogHeapInsert, same, upd(0), "want Heap opcode 0x20"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := heapTestRecord(t, 15, RmgrHeap, c.info, c.blocks, c.main)
			wantHeapError(t, new(HeapUpdate).Decode(rec), KindCorrupt, rec.LSN, c.msg)
		})
	}
}

func TestHeapTruncate(t *testing.T) {
	trunc := func(n uint32, flags uint8, relids ...uint32) []byte {
		b := heapLE(uint32(5), n, flags, uint8(0), uint16(0))
		for _, r := range relids {
			b = heapLE(b, r)
		}
		return b
	}
	rec := heapTestRecord(t, 15, RmgrHeap, XLogHeapTruncate, nil, trunc(3, XLHTruncateRestartSeqs, 16384, 16390, 70000))
	var b HeapTruncate
	if err := b.Decode(rec); err != nil {
		t.Fatal(err)
	}
	if b.DbID != 5 || b.Cascade() || !b.RestartSeqs() || b.NumRelIDs() != 3 || b.RelID(2) != 70000 {
		t.Fatalf("got %+v", b)
	}
	ids := make([]uint32, 0, 8)
	if got := b.AppendRelIDs(ids); fmt.Sprint(got) != "[16384 16390 70000]" {
		t.Fatalf("relids %v", got)
	}
	if n := testing.AllocsPerRun(100, func() { _ = b.Decode(rec); _ = b.AppendRelIDs(ids[:0]) }); n != 0 {
		t.Fatalf("Decode allocates %v times", n)
	}
	for _, c := range []struct {
		name string
		main []byte
		msg  string
	}{
		{"short", trunc(0, 0)[:11], "main data 11 bytes, want >= 12"},
		{"relids cut", trunc(2, 0, 1), "nrelids 2 needs 8 bytes of relids, main data has 4"},
		{"relids extra", trunc(1, 0, 1, 2), "nrelids 1 needs 4 bytes of relids, main data has 8"},
		{"nrelids huge", trunc(0xFFFFFFFF, 0, 1), "nrelids 4294967295 needs 17179869180 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := heapTestRecord(t, 15, RmgrHeap, XLogHeapTruncate, nil, c.main)
			wantHeapError(t, new(HeapTruncate).Decode(rec), KindCorrupt, rec.LSN, c.msg)
		})
	}
}

func TestHeapConfirmAndLock(t *testing.T) {
	blk0 := []heapTestBlock{heapBlk(0, 12, nil)}
	var c HeapConfirm
	if err := c.Decode(heapTestRecord(t, 15, RmgrHeap, XLogHeapConfirm, blk0, heapLE(uint16(17)))); err != nil {
		t.Fatal(err)
	}
	if c != (HeapConfirm{Rel: heapTestRel, Block: 12, OffNum: 17}) {
		t.Fatalf("got %+v", c)
	}
	lockMain := heapLE(uint32(0x80000001), uint16(33), uint8(XLHLXmaxIsMulti|XLHLXmaxLockOnly), uint8(XLHLockAllFrozenCleared))
	var l HeapLock
	if err := l.Decode(heapTestRecord(t, 15, RmgrHeap, XLogHeapLock, blk0, lockMain)); err != nil {
		t.Fatal(err)
	}
	if l != (HeapLock{Rel: heapTestRel, Block: 12, OffNum: 33, LockingXID: 0x80000001, InfobitsSet: 3, Flags: 1}) {
		t.Fatalf("got %+v", l)
	}
	for _, c := range []struct {
		name   string
		info   uint8
		blocks []heapTestBlock
		main   []byte
		dec    interface{ Decode(*Record) error }
		msg    string
	}{
		{"confirm short", XLogHeapConfirm, blk0, []byte{1}, new(HeapConfirm), "main data 1 bytes, want 2"},
		{"confirm long", XLogHeapConfirm, blk0, []byte{1, 0, 0}, new(HeapConfirm), "main data 3 bytes, want 2"},
		{"confirm no block", XLogHeapConfirm, nil, []byte{1, 0}, new(HeapConfirm), "no block reference 0"},
		{"lock short", XLogHeapLock, blk0, lockMain[:7], new(HeapLock), "main data 7 bytes, want 8"},
		{"lock long", XLogHeapLock, blk0, append(lockMain, 0), new(HeapLock), "main data 9 bytes, want 8"},
		{"lock no block", XLogHeapLock, nil, lockMain, new(HeapLock), "no block reference 0"},
		{"lock wrong opcode", XLogHeapConfirm, blk0, lockMain, new(HeapLock), "want Heap opcode 0x60"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := heapTestRecord(t, 15, RmgrHeap, c.info, c.blocks, c.main)
			wantHeapError(t, c.dec.Decode(rec), KindCorrupt, rec.LSN, c.msg)
		})
	}
}

func TestHeapInplace(t *testing.T) {
	userData := []byte("new pg_class bytes")
	t.Run("pg15", func(t *testing.T) {
		rec := heapTestRecord(t, 15, RmgrHeap, XLogHeapInplace, []heapTestBlock{heapBlk(0, 0, userData)}, heapLE(uint16(5)))
		var b HeapInplace
		if err := b.Decode(rec); err != nil {
			t.Fatal(err)
		}
		if !b.HasTuple || b.OffNum != 5 || !bytes.Equal(b.UserData, userData) || b.NumInvalMsgs != 0 || b.InvalMsgs != nil {
			t.Fatalf("got %+v", b)
		}
	})
	t.Run("pg15 image", func(t *testing.T) {
		blk := heapBlk(0, 0, nil)
		blk.image = true
		var b HeapInplace
		if err := b.Decode(heapTestRecord(t, 17, RmgrHeap, XLogHeapInplace, []heapTestBlock{blk}, heapLE(uint16(5)))); err != nil || b.HasTuple || b.UserData != nil {
			t.Fatalf("got %+v, %v", b, err)
		}
	})
	inval18 := func(nmsgs uint32, msgs ...byte) []byte {
		return heapLE(uint16(7), uint16(0), uint32(5), uint32(1663), uint8(1), uint8(0), uint16(0), nmsgs, msgs)
	}
	t.Run("pg18", func(t *testing.T) {
		msgs := make([]byte, 32)
		msgs[0], msgs[16] = 0xFE, 0x37 // a relcache and a catcache message
		rec := heapTestRecord(t, 18, RmgrHeap, XLogHeapInplace, []heapTestBlock{heapBlk(0, 0, userData)}, inval18(2, msgs...))
		var b HeapInplace
		if err := b.Decode(rec); err != nil {
			t.Fatal(err)
		}
		if b.OffNum != 7 || b.DbID != 5 || b.TsID != 1663 || !b.RelcacheInitFileInval || b.NumInvalMsgs != 2 ||
			!bytes.Equal(b.InvalMsgs, msgs) || b.InvalMsg(1)[0] != 0x37 || len(b.InvalMsg(0)) != 16 {
			t.Fatalf("got %+v", b)
		}
		if n := testing.AllocsPerRun(100, func() { _ = b.Decode(rec) }); n != 0 {
			t.Fatalf("Decode allocates %v times", n)
		}
	})
	for _, c := range []struct {
		name   string
		major  int
		blocks []heapTestBlock
		main   []byte
		msg    string
	}{
		{"pg15 short", 15, []heapTestBlock{heapBlk(0, 0, userData)}, []byte{5}, "main data 1 bytes, want 2"},
		{"pg17 with pg18 layout", 17, []heapTestBlock{heapBlk(0, 0, userData)}, inval18(0), "main data 20 bytes, want 2"},
		{"pg18 short", 18, []heapTestBlock{heapBlk(0, 0, userData)}, inval18(0)[:19], "main data 19 bytes, want >= 20"},
		{"pg18 nmsgs past data", 18, []heapTestBlock{heapBlk(0, 0, userData)}, inval18(1), "nmsgs 1 needs 16 bytes of messages, main data has 0"},
		{"pg18 nmsgs negative", 18, []heapTestBlock{heapBlk(0, 0, userData)}, inval18(0xFFFFFFFF, make([]byte, 16)...), "nmsgs -1"},
		{"pg18 no block", 18, nil, inval18(0), "no block reference 0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := heapTestRecord(t, c.major, RmgrHeap, XLogHeapInplace, c.blocks, c.main)
			wantHeapError(t, new(HeapInplace).Decode(rec), KindCorrupt, rec.LSN, c.msg)
		})
	}
	t.Run("no layout", func(t *testing.T) {
		rec := heapTestRecord(t, 15, RmgrHeap, XLogHeapInplace, []heapTestBlock{heapBlk(0, 0, userData)}, heapLE(uint16(5)))
		rec.Layout = nil
		wantHeapError(t, new(HeapInplace).Decode(rec), KindUnsupported, rec.LSN, "no layout")
	})
}

func TestDecodeHeapBody(t *testing.T) {
	blk := []heapTestBlock{heapBlk(0, 1, heapTestTuple)}
	upd := heapLE(uint32(1), uint16(1), uint8(0), uint8(0), uint32(0), uint16(2))
	for _, c := range []struct {
		info uint8
		main []byte
		want string
	}{
		{XLogHeapInsert | XLRSpecialRelUpdate, heapLE(uint16(1), uint8(0)), "*wal.HeapInsert"}, // generic low bits are not the rmgr's
		{XLogHeapInsert | XLogHeapInitPage, heapLE(uint16(1), uint8(0)), "*wal.HeapInsert"},
		{XLogHeapDelete, heapLE(uint32(1), uint16(1), uint16(0)), "*wal.HeapDelete"},
		{XLogHeapUpdate, upd, "*wal.HeapUpdate"},
		{XLogHeapHotUpdate | XLogHeapInitPage, upd, "*wal.HeapUpdate"},
		{XLogHeapConfirm, heapLE(uint16(1)), "*wal.HeapConfirm"},
		{XLogHeapLock, heapLE(uint32(1), uint16(1), uint16(0)), "*wal.HeapLock"},
		{XLogHeapInplace, heapLE(uint16(1)), "*wal.HeapInplace"},
	} {
		rec := heapTestRecord(t, 15, RmgrHeap, c.info, blk, c.main)
		b, err := decodeHeapBody(rec)
		if err != nil || fmt.Sprintf("%T", b) != c.want {
			t.Fatalf("info 0x%02X: %T, %v; want %s", c.info, b, err, c.want)
		}
	}
	rec := heapTestRecord(t, 15, RmgrHeap, XLogHeapTruncate, nil, heapLE(uint32(1), uint32(0), uint32(0)))
	if b, err := decodeHeapBody(rec); err != nil || fmt.Sprintf("%T", b) != "*wal.HeapTruncate" {
		t.Fatalf("truncate: %T, %v", b, err)
	}
	for _, info := range []uint8{0x90, 0xB0, 0xD0, 0xE0, 0xF0} { // INIT_PAGE on an opcode that never sets it
		rec := heapTestRecord(t, 15, RmgrHeap, info, blk, heapLE(uint16(1)))
		b, err := decodeHeapBody(rec)
		if b != nil {
			t.Fatalf("info 0x%02X: body %T", info, b)
		}
		wantHeapError(t, err, KindUnsupported, rec.LSN, fmt.Sprintf("info 0x%02X", info))
	}
	// A decoding error yields no body.
	rec = heapTestRecord(t, 15, RmgrHeap, XLogHeapConfirm, blk, heapLE(uint8(1)))
	if b, err := decodeHeapBody(rec); b != nil || err == nil {
		t.Fatalf("got %T, %v", b, err)
	}
}

func TestHeapIdentify(t *testing.T) {
	want := map[uint8]string{
		0x00: "INSERT", 0x80: "INSERT+INIT", 0x10: "DELETE", 0x20: "UPDATE", 0xA0: "UPDATE+INIT",
		0x30: "TRUNCATE", 0x40: "HOT_UPDATE", 0xC0: "HOT_UPDATE+INIT", 0x50: "HEAP_CONFIRM", 0x60: "LOCK", 0x70: "INPLACE",
		0x90: "", 0xB0: "", 0xD0: "", 0xE0: "", 0xF0: "",
	}
	for info, name := range want {
		if got := heapIdentify(info | XLRCheckConsistency); got != name {
			t.Errorf("heapIdentify(0x%02X) = %q, want %q", info, got, name)
		}
	}
}
