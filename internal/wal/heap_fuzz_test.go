package wal

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

const heapFuzzLSN LSN = 0xABCD1234

// heapFuzzRecord wraps fuzzed bytes in a Record the way DecodeRecord would
// leave it: block 0 and block 1 optional, nil data when empty.
func heapFuzzRecord(rmid RmgrID, info, major uint8, main, blk0 []byte, hasBlk0, hasBlk1 bool) *Record {
	layout, _ := LayoutForMajor(15 + int(major%4))
	rec := &Record{LSN: heapFuzzLSN, Header: RecordHeader{RmID: rmid, Info: info}, Layout: layout}
	if len(main) > 0 {
		rec.MainData = main
	}
	if hasBlk0 {
		b := BlockRef{ID: 0, BlockNum: 1}
		if len(blk0) > 0 {
			b.Data = blk0
		}
		rec.Blocks = append(rec.Blocks, b)
	}
	if hasBlk1 {
		rec.Blocks = append(rec.Blocks, BlockRef{ID: 1, BlockNum: 2})
	}
	return rec
}

// heapFuzzSeeds adds the golden records of one rmgr, split into the fuzz
// target's arguments.
func heapFuzzSeeds(f *testing.F, rmid RmgrID) {
	for _, g := range heapGoldenFiles {
		raw, err := os.ReadFile(filepath.Join("testdata", "heap", g.name+".bin"))
		if err != nil {
			f.Fatal(err)
		}
		layout, _ := LayoutForMajor(15)
		var rec Record
		if err := DecodeRecord(raw, g.lsn, layout, &rec); err != nil {
			f.Fatal(err)
		}
		if rec.Header.RmID != rmid {
			continue
		}
		var blk0 []byte
		b0 := rec.Block(0)
		if b0 != nil {
			blk0 = b0.Data
		}
		f.Add(rec.Header.Info, uint8(0), rec.MainData, blk0, b0 != nil, rec.Block(1) != nil)
	}
}

// heapFuzzCheck asserts the decoders' contract on arbitrary input: an error
// is a *Error naming the record's LSN and comes without a body; a body can be
// walked with every accessor without panicking.
func heapFuzzCheck(t *testing.T, body Body, err error) {
	if err != nil {
		var e *Error
		if !errors.As(err, &e) || e.LSN != heapFuzzLSN {
			t.Fatalf("error %v (%T) is not a *wal.Error at %s", err, err, heapFuzzLSN)
		}
		if body != nil {
			t.Fatalf("error %v with body %T", err, body)
		}
		return
	}
	tuple := func(tp *HeapTuple) {
		_, _ = tp.Bitmap(), tp.UserData()
		for i := -1; i <= tp.Header.Natts()+1; i++ {
			tp.IsNull(i)
		}
	}
	switch b := body.(type) {
	case *HeapInsert:
		tuple(&b.Tuple)
	case *HeapDelete:
		tuple(&b.OldTuple)
	case *HeapUpdate:
		tuple(&b.NewTuple)
		tuple(&b.OldTuple)
		_, _ = b.NewUserData(nil, b.OldTuple.UserData())
	case *HeapTruncate:
		if got := len(b.AppendRelIDs(nil)); got != b.NumRelIDs() {
			t.Fatalf("AppendRelIDs returned %d of %d relids", got, b.NumRelIDs())
		}
	case *HeapInplace:
		for i := 0; i < b.NumInvalMsgs; i++ {
			_ = b.InvalMsg(i)
		}
	case *HeapMultiInsert:
		for i := 0; i < b.NTuples; i++ {
			_ = b.OffNum(i)
		}
		tuples := b.AppendTuples(nil)
		if b.HasTuples && len(tuples) != b.NTuples {
			t.Fatalf("iterated %d of %d tuples", len(tuples), b.NTuples)
		}
		for i := range tuples {
			tuple(&tuples[i].Tuple)
		}
	case *HeapConfirm, *HeapLock, *HeapNewCID, *Heap2Opaque:
	default:
		t.Fatalf("unexpected body %T", body)
	}
}

func FuzzHeapBody(f *testing.F) {
	heapFuzzSeeds(f, RmgrHeap)
	f.Add(uint8(XLogHeapInplace), uint8(3), heapLE(uint16(1), uint16(0), uint32(5), uint32(0), uint32(0), uint32(1), make([]byte, 16)), []byte{1}, true, false)
	f.Fuzz(func(t *testing.T, info, major uint8, main, blk0 []byte, hasBlk0, hasBlk1 bool) {
		rec := heapFuzzRecord(RmgrHeap, info, major, main, blk0, hasBlk0, hasBlk1)
		body, err := decodeHeapBody(rec)
		heapFuzzCheck(t, body, err)
	})
}

func FuzzHeap2Body(f *testing.F) {
	heapFuzzSeeds(f, RmgrHeap2)
	f.Fuzz(func(t *testing.T, info, major uint8, main, blk0 []byte, hasBlk0, hasBlk1 bool) {
		rec := heapFuzzRecord(RmgrHeap2, info, major, main, blk0, hasBlk0, hasBlk1)
		body, err := decodeHeap2Body(rec)
		heapFuzzCheck(t, body, err)
	})
}

// FuzzHeapTuple checks the standalone tuple decoder: an error or in-range
// accessors.
func FuzzHeapTuple(f *testing.F) {
	f.Add(heapTestTuple)
	f.Add(append(heapXLHeader(10, HeapHasNull, 32), make([]byte, 12)...))
	f.Fuzz(func(t *testing.T, src []byte) {
		var tp HeapTuple
		if err := tp.Decode(src); err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not a *wal.Error", err)
			}
			return
		}
		if len(tp.Bitmap()) != tp.Header.BitmapLen() || len(tp.UserData()) != len(src)-int(tp.Header.Hoff)+18 {
			t.Fatalf("bitmap %d bytes, user data %d bytes for %+v and %d input bytes", len(tp.Bitmap()), len(tp.UserData()), tp.Header, len(src))
		}
		for i := 0; i < tp.Header.Natts(); i++ {
			tp.IsNull(i)
		}
	})
}
