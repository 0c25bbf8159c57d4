package wal

import (
	"bytes"
	"fmt"
	"testing"
)

// heapMultiTuple is an xl_multi_insert_tuple followed by its data.
func heapMultiTuple(infomask2, infomask uint16, hoff uint8, data []byte) []byte {
	return heapLE(uint16(len(data)), infomask2, infomask, hoff, data)
}

func TestHeapMultiInsert(t *testing.T) {
	// Tuple A ends at byte 15, so tuple B's header is SHORTALIGNed to 16;
	// the pad byte is garbage the decoder must skip.
	tupA := heapMultiTuple(2, HeapHasVarWidth, 24, []byte{0, 1, 2, 3, 4, 5, 6, 7})
	tupB := heapMultiTuple(1, HeapHasNull, 24, []byte{0x01, 9, 9, 9, 9})
	data := heapLE(tupA, uint8(0xEE), tupB)
	main := heapLE(uint8(XLHInsertContainsNewTuple|XLHInsertLastInMulti), uint8(0), uint16(2), uint16(12), uint16(40))
	want := []MultiInsertTuple{
		{12, HeapTuple{HeapTupleHeader{2, HeapHasVarWidth, 24}, []byte{0, 1, 2, 3, 4, 5, 6, 7}}},
		{40, HeapTuple{HeapTupleHeader{1, HeapHasNull, 24}, []byte{0x01, 9, 9, 9, 9}}},
	}
	t.Run("offsets", func(t *testing.T) {
		rec := heapTestRecord(t, 15, RmgrHeap2, XLogHeap2MultiInsert, []heapTestBlock{heapBlk(0, 8, data)}, main)
		var b HeapMultiInsert
		if err := b.Decode(rec); err != nil {
			t.Fatal(err)
		}
		if b.InitPage || b.Rel != heapTestRel || b.Block != 8 || b.NTuples != 2 || !b.HasTuples || b.Flags != 0x0A {
			t.Fatalf("got %+v", b)
		}
		if got := b.AppendTuples(nil); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("tuples\n got %v\nwant %v", got, want)
		}
		it := b.Tuples()
		var tup MultiInsertTuple
		if !it.Next(&tup) || &tup.Tuple.Data[0] != &rec.Block(0).Data[sizeOfMultiInsertTuple] {
			t.Fatal("tuple data must alias the record")
		}
		if n := testing.AllocsPerRun(100, func() {
			_ = b.Decode(rec)
			for it := b.Tuples(); it.Next(&tup); {
			}
		}); n != 0 {
			t.Fatalf("Decode and iteration allocate %v times", n)
		}
		var zero MultiInsertIter
		if zero.Next(&tup) {
			t.Fatal("zero iterator yielded a tuple")
		}
	})
	t.Run("init page", func(t *testing.T) {
		rec := heapTestRecord(t, 15, RmgrHeap2, XLogHeap2MultiInsert|XLogHeapInitPage, []heapTestBlock{heapBlk(0, 8, data)}, main[:4])
		var b HeapMultiInsert
		if err := b.Decode(rec); err != nil {
			t.Fatal(err)
		}
		got := b.AppendTuples(nil)
		if !b.InitPage || len(got) != 2 || got[0].OffNum != 1 || got[1].OffNum != 2 || b.OffNum(6) != 7 {
			t.Fatalf("got %+v %v", b, got)
		}
	})
	t.Run("image without data", func(t *testing.T) {
		blk := heapBlk(0, 8, nil)
		blk.image = true
		rec := heapTestRecord(t, 15, RmgrHeap2, XLogHeap2MultiInsert, []heapTestBlock{blk}, heapLE(uint8(0), main[1:]))
		var b HeapMultiInsert
		if err := b.Decode(rec); err != nil {
			t.Fatal(err)
		}
		var tup MultiInsertTuple
		if it := b.Tuples(); b.HasTuples || b.NTuples != 2 || b.OffNum(1) != 40 || it.Next(&tup) {
			t.Fatalf("got %+v", b)
		}
	})
	blk := func(d []byte) []heapTestBlock { return []heapTestBlock{heapBlk(0, 8, d)} }
	for _, c := range []struct {
		name   string
		info   uint8
		blocks []heapTestBlock
		main   []byte
		msg    string
	}{
		{"main data short", XLogHeap2MultiInsert | XLogHeapInitPage, blk(data), main[:3], "main data 3 bytes, want >= 4"},
		{"offsets cut", XLogHeap2MultiInsert, blk(data), main[:7], "main data 7 bytes, want 8 for 2 tuples (init page false)"},
		{"offsets with init page", XLogHeap2MultiInsert | XLogHeapInitPage, blk(data), main, "main data 8 bytes, want 4 for 2 tuples (init page true)"},
		{"no block 0", XLogHeap2MultiInsert, []heapTestBlock{heapBlk(1, 8, data)}, main, "no block reference 0"},
		{"flag without data", XLogHeap2MultiInsert, blk(nil), main, "claim new tuples but block 0 has no data"},
		{"datalen past end", XLogHeap2MultiInsert, blk(data[:len(data)-1]), main, "tuple 1 datalen 5 at byte 23 past 27 bytes of block data"},
		{"header past end", XLogHeap2MultiInsert, blk(data[:20]), main, "tuple 1 header at byte 16 past 20 bytes of block data"},
		{"too few tuples", XLogHeap2MultiInsert, blk(tupA), main, "tuple 1 header at byte 16 past 15 bytes"},
		{"trailing bytes", XLogHeap2MultiInsert, blk(heapLE(data, uint8(0), uint16(0))), main, "2 tuples end at byte 28 of 31 bytes of block data"},
		{"bad hoff", XLogHeap2MultiInsert, blk(heapLE(tupA, uint8(0), heapMultiTuple(1, 0, 64, []byte{1}))), main, "t_hoff 64 past 24"},
		{"wrong opcode", XLogHeap2NewCID, blk(data), main, "want Heap2 opcode 0x50"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := heapTestRecord(t, 15, RmgrHeap2, c.info, c.blocks, c.main)
			wantHeapError(t, new(HeapMultiInsert).Decode(rec), KindCorrupt, rec.LSN, c.msg)
		})
	}
}

func TestHeapNewCID(t *testing.T) {
	main := heapLE(uint32(724), uint32(3), uint32(0xFFFFFFFF), uint32(0xFFFFFFFF),
		uint32(1663), uint32(5), uint32(1259), uint16(0x0001), uint16(0x0002), uint16(44))
	var b HeapNewCID
	rec := heapTestRecord(t, 15, RmgrHeap2, XLogHeap2NewCID, nil, main)
	if err := b.Decode(rec); err != nil {
		t.Fatal(err)
	}
	want := HeapNewCID{TopXID: 724, Cmin: 3, Cmax: 0xFFFFFFFF, ComboCID: 0xFFFFFFFF,
		Target: RelFileNode{1663, 5, 1259}, TargetBlock: 0x10002, TargetOffNum: 44}
	if b != want {
		t.Fatalf("got %+v", b)
	}
	if n := testing.AllocsPerRun(100, func() { _ = b.Decode(rec) }); n != 0 {
		t.Fatalf("Decode allocates %v times", n)
	}
	for _, m := range [][]byte{main[:33], append(main, 0)} {
		rec := heapTestRecord(t, 15, RmgrHeap2, XLogHeap2NewCID, nil, m)
		wantHeapError(t, new(HeapNewCID).Decode(rec), KindCorrupt, rec.LSN, fmt.Sprintf("main data %d bytes, want 34", len(m)))
	}
}

func TestHeap2Opaque(t *testing.T) {
	for _, c := range []struct {
		major int
		info  uint8
		name  string
	}{
		{15, 0x00, "REWRITE"}, {15, 0x10, "PRUNE"}, {15, 0x20, "VACUUM"}, {16, 0x30, "FREEZE_PAGE"},
		{15, 0x40, "VISIBLE"}, {15, 0x60, "LOCK_UPDATED"},
		{17, 0x10, "PRUNE_ON_ACCESS"}, {17, 0x20, "PRUNE_VACUUM_SCAN"}, {18, 0x30, "PRUNE_VACUUM_CLEANUP"},
		{18, 0x40, "VISIBLE"},
	} {
		rec := heapTestRecord(t, c.major, RmgrHeap2, c.info, []heapTestBlock{heapBlk(0, 0, []byte{1, 2})}, []byte{1, 2, 3})
		body, err := decodeHeap2Body(rec)
		if err != nil {
			t.Fatalf("PG%d info 0x%02X: %v", c.major, c.info, err)
		}
		if b, ok := body.(*Heap2Opaque); !ok || b.Op != c.info || b.Name != c.name {
			t.Fatalf("PG%d info 0x%02X: %#v, want %s", c.major, c.info, body, c.name)
		}
	}
	rec := heapTestRecord(t, 15, RmgrHeap2, XLogHeap2Visible, nil, []byte{1})
	rec.Layout = nil
	wantHeapError(t, new(Heap2Opaque).Decode(rec), KindUnsupported, rec.LSN, "no layout")
	rec = heapTestRecord(t, 15, RmgrHeap, XLogHeap2Visible, nil, []byte{1})
	wantHeapError(t, new(Heap2Opaque).Decode(rec), KindCorrupt, rec.LSN, "record is Heap, want Heap2")
	rec = heapTestRecord(t, 15, RmgrHeap2, XLogHeap2MultiInsert, nil, []byte{1})
	wantHeapError(t, new(Heap2Opaque).Decode(rec), KindCorrupt, rec.LSN, "MULTI_INSERT has a typed body")
}

func TestDecodeHeap2Body(t *testing.T) {
	mi := heapMultiTuple(1, 0, 24, []byte{0, 1, 0, 0, 0})
	rec := heapTestRecord(t, 15, RmgrHeap2, XLogHeap2MultiInsert|XLogHeapInitPage, []heapTestBlock{heapBlk(0, 0, mi)}, heapLE(uint8(0), uint8(0), uint16(1)))
	if b, err := decodeHeap2Body(rec); err != nil || fmt.Sprintf("%T", b) != "*wal.HeapMultiInsert" {
		t.Fatalf("multi insert: %T, %v", b, err)
	}
	rec = heapTestRecord(t, 15, RmgrHeap2, XLogHeap2NewCID, nil, make([]byte, 34))
	if b, err := decodeHeap2Body(rec); err != nil || fmt.Sprintf("%T", b) != "*wal.HeapNewCID" {
		t.Fatalf("new cid: %T, %v", b, err)
	}
	for _, info := range []uint8{0x80, 0x90, 0xA0, 0xB0, 0xC0, 0xE0, 0xF0} { // INIT_PAGE is MULTI_INSERT's only
		rec := heapTestRecord(t, 17, RmgrHeap2, info, nil, make([]byte, 34))
		b, err := decodeHeap2Body(rec)
		if b != nil {
			t.Fatalf("info 0x%02X: body %T", info, b)
		}
		wantHeapError(t, err, KindUnsupported, rec.LSN, fmt.Sprintf("unknown Heap2 record type: info 0x%02X", info))
	}
	rec = heapTestRecord(t, 15, RmgrHeap2, XLogHeap2NewCID, nil, make([]byte, 3))
	if b, err := decodeHeap2Body(rec); b != nil || err == nil {
		t.Fatalf("got %T, %v", b, err)
	}
}

func TestHeap2Identify(t *testing.T) {
	pg15, _ := LayoutForMajor(15)
	pg17, _ := LayoutForMajor(17)
	for _, c := range []struct {
		l    *Layout
		info uint8
		want string
	}{
		{pg15, 0x00, "REWRITE"}, {pg15, 0x10, "PRUNE"}, {pg15, 0x20, "VACUUM"}, {pg15, 0x30, "FREEZE_PAGE"},
		{pg15, 0x40, "VISIBLE"}, {pg15, 0x50, "MULTI_INSERT"}, {pg15, 0xD0, "MULTI_INSERT+INIT"},
		{pg15, 0x60, "LOCK_UPDATED"}, {pg15, 0x70, "NEW_CID"}, {pg15, 0x90, ""}, {pg15, 0xF0, ""},
		{pg17, 0x10, "PRUNE_ON_ACCESS"}, {pg17, 0x20, "PRUNE_VACUUM_SCAN"}, {pg17, 0x30, "PRUNE_VACUUM_CLEANUP"},
		{pg17, 0x50 | XLRSpecialRelUpdate, "MULTI_INSERT"},
		{nil, 0x10, ""}, {nil, 0x70, "NEW_CID"},
	} {
		if got := heap2Identify(c.l, c.info); got != c.want {
			t.Errorf("heap2Identify(%v, 0x%02X) = %q, want %q", c.l, c.info, got, c.want)
		}
	}
}

// The multi-insert offsets must come from the main data, not from guesses.
func TestHeapMultiInsertOffsetsAliasMainData(t *testing.T) {
	main := heapLE(uint8(0), uint8(0), uint16(1), uint16(77))
	rec := heapTestRecord(t, 15, RmgrHeap2, XLogHeap2MultiInsert, []heapTestBlock{heapBlk(0, 0, heapMultiTuple(1, 0, 24, []byte{0}))}, main)
	var b HeapMultiInsert
	if err := b.Decode(rec); err != nil {
		t.Fatal(err)
	}
	rec.MainData[4] = 78 // the decoded body aliases the record
	if b.OffNum(0) != 78 || !bytes.Equal(b.AppendTuples(nil)[0].Tuple.Data, []byte{0}) {
		t.Fatalf("OffNum(0) = %d", b.OffNum(0))
	}
}
