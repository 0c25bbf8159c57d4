package filter

import (
	"testing"

	"github.com/walshadow/walshadow/internal/wal"
)

// TestPageCopied: a user file that receives a whole page image (XLOG_FPI)
// is one filled by copying pages; a hint-bit image (FPI_FOR_HINT), an
// image of another fork, a catalog's image and a file with only row
// records are not. What is known is forgotten below the resume floor.
func TestPageCopied(t *testing.T) {
	f := New(Config{DbOid: followedDB})
	copied, hinted, inserted, other := rfn(followedDB, 16500), rfn(followedDB, 16501), rfn(followedDB, 16502), rfn(followedDB, 16503)
	hint := fpiRec(0x1000028, 0, hinted)
	hint.Header.Info = wal.XLogFPIForHint
	fsm := fpiRec(0x1000100, 0, other)
	fsm.Blocks[0].ForkFlags |= byte(wal.ForkFSM)
	for _, rec := range []*wal.Record{
		fpiRec(0x1000028, 700, copied), hint, fsm,
		rb{lsn: 0x1000200, rm: wal.RmgrHeap, info: wal.XLogHeapInsert, xid: 701, blocks: []wal.BlockRef{block(0, inserted, nil)}, main: le{}.u16(1).u8(0)}.rec(),
	} {
		if _, err := f.Decide(rec); err != nil {
			t.Fatal(err)
		}
	}
	for rel, want := range map[wal.RelFileNode]bool{copied: true, hinted: false, inserted: false, other: false} {
		if got := f.PageCopied(rel); got != want {
			t.Errorf("PageCopied(%s) = %v, want %v", rel, got, want)
		}
	}
	// The floor passing a copy does not forget it while few are known:
	// its transaction's commit may still be on the way to the decoder.
	f.ForgetPageCopiesBelow(0x1000029)
	if !f.PageCopied(copied) {
		t.Error("a page copy below the floor was forgotten while few are known")
	}
	// Past the cap, those below the floor go, those at it stay.
	f.copies.maxKept = 1
	later := rfn(followedDB, 16504)
	if _, err := f.Decide(fpiRec(0x1000300, 702, later)); err != nil {
		t.Fatal(err)
	}
	f.ForgetPageCopiesBelow(0x1000300)
	if f.PageCopied(copied) || !f.PageCopied(later) {
		t.Errorf("past the cap: the copy below the floor known %v, the one at it %v", f.PageCopied(copied), f.PageCopied(later))
	}
}
