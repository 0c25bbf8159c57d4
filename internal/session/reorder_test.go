package session

import (
	"slices"
	"testing"

	"github.com/walshadow/walshadow/internal/msg"
	"github.com/walshadow/walshadow/internal/wal"
	"github.com/walshadow/walshadow/internal/wal/walbuild"
	"github.com/walshadow/walshadow/internal/xact"
)

// fixtureBatches reads the committed fixture WAL into pump-like batches of
// the records the decoder receives.
func fixtureBatches(t *testing.T, per int) ([]*Batch, []*wal.Record) {
	t.Helper()
	files, err := wal.SegmentFiles(fixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	r, err := wal.NewFileReader(files...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var all []*wal.Record
	var batches []*Batch
	cur := &Batch{}
	for {
		rec, err := r.Next()
		if err != nil {
			break // end of the fixture's valid WAL
		}
		switch rec.Header.RmID {
		case wal.RmgrHeap, wal.RmgrHeap2, wal.RmgrXact:
		default:
			continue
		}
		c := rec.Clone()
		all = append(all, c)
		if len(cur.Items) == 0 {
			cur.First = c.LSN
		}
		cur.Items = append(cur.Items, Item{Record: c, Decision: Decision{ToDecoder: true}})
		cur.Through = c.Next
		if len(cur.Items) == per {
			batches = append(batches, cur)
			cur = &Batch{}
		}
	}
	if len(cur.Items) > 0 {
		batches = append(batches, cur)
	}
	return batches, all
}

// expectedTransactions is a plain model of what the reorderer must emit:
// for each commit in WAL order, the row changes of its xid and listed
// subxids that no abort discarded, in LSN order.
func expectedTransactions(t *testing.T, all []*wal.Record, db uint32) [][]wal.LSN {
	byXID := map[uint32][]wal.LSN{}
	var out [][]wal.LSN
	for _, rec := range all {
		switch rec.Header.RmID {
		case wal.RmgrHeap, wal.RmgrHeap2:
			if rec.Header.XID == 0 || !isRowChange(rec) {
				continue
			}
			if d, ok := recordDB(rec); ok && d != db {
				continue
			}
			byXID[rec.Header.XID] = append(byXID[rec.Header.XID], rec.LSN)
		case wal.RmgrXact:
			var end wal.XactEnd
			op := rec.RmgrInfo() & wal.XLogXactOpMask
			switch op {
			case wal.XLogXactCommit, wal.XLogXactCommitPrepared:
				var c wal.XactCommit
				if err := c.Decode(rec); err != nil {
					t.Fatal(err)
				}
				end = c.XactEnd
			case wal.XLogXactAbort, wal.XLogXactAbortPrepared:
				var a wal.XactAbort
				if err := a.Decode(rec); err != nil {
					t.Fatal(err)
				}
				end = a.XactEnd
			default:
				continue
			}
			xid := rec.Header.XID
			if end.IsPrepared() {
				xid = end.TwoPhaseXID
			}
			xids := end.Subxacts.AppendTo([]uint32{xid})
			var lsns []wal.LSN
			for _, x := range xids {
				lsns = append(lsns, byXID[x]...)
				delete(byXID, x)
			}
			if op == wal.XLogXactCommit || op == wal.XLogXactCommitPrepared {
				slices.Sort(lsns)
				out = append(out, append([]wal.LSN{rec.LSN}, lsns...))
			}
		}
	}
	return out
}

func TestReordererEmitsCommittedTransactionsWhole(t *testing.T) {
	for _, tc := range []struct {
		name     string
		budget   int64
		per      int
		max      int
		maxBytes int
	}{
		{"in memory", 64 << 20, 1024, 1024, defaultBatchBytes},
		{"spilling, small batches", 1 << 10, 7, 5, defaultBatchBytes},
		{"byte-bounded batches", 64 << 20, 1024, 1024, 2 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			batches, all := fixtureBatches(t, tc.per)
			db := uint32(0)
			for _, rec := range all {
				if b := rec.Block(0); b != nil && isRowChange(rec) && b.Rel.DbOid > 1 {
					db = b.Rel.DbOid
					break
				}
			}
			want := expectedTransactions(t, all, db)
			buf, err := xact.New(xact.Config{MemoryBudget: tc.budget, SpillDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			defer buf.Close()
			r := newReorderer(buf, db, tc.max, batches[0].First, 0)
			r.maxBytes = tc.maxBytes
			var got [][]wal.LSN
			var cur []wal.LSN
			collect := func(out *Batch) {
				for _, it := range out.Items {
					if it.Tx == nil {
						t.Fatalf("item at %s without its transaction", it.Record.LSN)
					}
					if it.Record.LSN == it.Tx.CommitLSN && cur != nil {
						t.Fatalf("transaction at %s began before the previous ended", it.Record.LSN)
					}
					cur = append(cur, it.Record.LSN)
					if it.Last {
						got = append(got, cur)
						cur = nil
					}
				}
			}
			for _, b := range batches {
				if err := r.consume(b); err != nil {
					t.Fatal(err)
				}
				if f := r.floor(); f > b.Through {
					t.Fatalf("floor %s past the consumed position %s", f, b.Through)
				}
				for !r.idle() {
					out := &Batch{}
					if err := r.fill(out); err != nil {
						t.Fatal(err)
					}
					if len(out.Items) > tc.max {
						t.Fatalf("batch of %d items, limit %d", len(out.Items), tc.max)
					}
					// A batch may pass the byte bound by its last record only.
					if last := len(out.Items[len(out.Items)-1].Record.Raw); out.size-last > tc.maxBytes {
						t.Fatalf("batch of %d bytes, bound %d", out.size, tc.maxBytes)
					}
					collect(out)
				}
			}
			if cur != nil {
				t.Fatalf("unfinished transaction: %v", cur)
			}
			if len(got) != len(want) {
				t.Fatalf("%d transactions, want %d", len(got), len(want))
			}
			changes := 0
			for i := range want {
				if !slices.Equal(got[i], want[i]) {
					t.Fatalf("transaction %d: got %v, want %v", i, got[i], want[i])
				}
				changes += len(want[i]) - 1
			}
			if changes == 0 {
				t.Fatal("the fixture yielded no row changes: the test checks nothing")
			}
			st := buf.Stats()
			if tc.budget < 1<<20 && st.Spills == 0 {
				t.Fatal("a 1 KiB budget never spilled")
			}
			t.Logf("%d transactions, %d row changes, %d spills", len(got), changes, st.Spills)
		})
	}
}

// TestAddChangesRecordsStayApart: the records of a drained slice, decoded
// into shared byte and block arrays, each equal a fresh decode of their
// bytes, and appending to one's blocks reaches no other record's (more
// blocks than the shared array holds included).
func TestAddChangesRecordsStayApart(t *testing.T) {
	layout, err := wal.LayoutForMajor(15)
	if err != nil {
		t.Fatal(err)
	}
	rel := wal.RelFileNode{SpcOid: 1663, DbOid: 5, RelNum: 16400}
	var changes []xact.Change
	lsn := wal.LSN(0x1000)
	for i := 0; i < 12; i++ {
		// 1 to 5 block references: more than the shared array's share.
		var blocks []walbuild.Block
		for j := 0; j <= i%5; j++ {
			blocks = append(blocks, walbuild.Block{Rel: rel, Blk: uint32(10*i + j), Data: []byte{byte(i), byte(j)}})
		}
		raw := walbuild.Record(wal.RmgrHeap, wal.XLogHeapInsert, 900, blocks, []byte{1, 0, 0})
		changes = append(changes, xact.Change{LSN: lsn, Next: lsn + 0x100, XID: 900, Raw: raw})
		lsn += 0x100
	}
	b := &Batch{}
	tx := &TxInfo{Tx: msg.Tx{TopXID: 900, CommitLSN: lsn, FirstLSN: 0x1000}}
	if err := b.addChanges(changes, tx, layout); err != nil {
		t.Fatal(err)
	}
	check := func() {
		t.Helper()
		for i, it := range b.Items {
			var want wal.Record
			if err := wal.DecodeRecord(changes[i].Raw, changes[i].LSN, layout, &want); err != nil {
				t.Fatal(err)
			}
			got := it.Record
			if len(got.Blocks) != len(want.Blocks) || len(got.Blocks) != 1+i%5 {
				t.Fatalf("record %d: %d blocks, want %d", i, len(got.Blocks), len(want.Blocks))
			}
			for j := range got.Blocks {
				if g, w := got.Blocks[j], want.Blocks[j]; g.BlockNum != w.BlockNum || string(g.Data) != string(w.Data) {
					t.Fatalf("record %d block %d: %+v, want %+v", i, j, g, w)
				}
			}
		}
	}
	check()
	// An append to one record's blocks must not land in the next one's.
	for _, it := range b.Items {
		_ = append(it.Record.Blocks, wal.BlockRef{BlockNum: 999999})
	}
	check()
}
