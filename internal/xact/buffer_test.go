package xact

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/walshadow/walshadow/internal/wal"
)

// op is one step of a table test.
type op struct {
	kind  string // add, assign, commit, abort, prepare, floor
	xid   uint32
	subs  []uint32
	lsn   wal.LSN   // add: the record's LSN; floor: the expected floor
	want  []wal.LSN // commit: the drained LSNs in order
	bytes int       // add: record size (default 100)
}

func add(lsn wal.LSN, xid uint32) op        { return op{kind: "add", lsn: lsn, xid: xid} }
func assign(top uint32, subs ...uint32) op  { return op{kind: "assign", xid: top, subs: subs} }
func abort(xid uint32, subs ...uint32) op   { return op{kind: "abort", xid: xid, subs: subs} }
func prepare(top uint32, subs ...uint32) op { return op{kind: "prepare", xid: top, subs: subs} }
func floor(want wal.LSN) op                 { return op{kind: "floor", lsn: want} }
func commit(top uint32, subs []uint32, want ...wal.LSN) op {
	return op{kind: "commit", xid: top, subs: subs, want: want}
}

var tableCases = []struct {
	name string
	ops  []op
}{
	{"interleaved xids", []op{
		add(10, 1), add(20, 2), add(30, 1), add(40, 2), add(50, 3),
		floor(10),
		commit(2, nil, 20, 40), floor(10),
		commit(1, nil, 10, 30), floor(50),
		commit(3, nil, 50), floor(0),
	}},
	{"commit merges top and subxids by LSN", []op{
		add(10, 5), add(20, 6), add(30, 5), add(40, 7), add(50, 6), add(60, 5),
		commit(5, []uint32{6, 7}, 10, 20, 30, 40, 50, 60), floor(0),
	}},
	{"subxid records before the top's", []op{
		add(10, 6), add(20, 6), add(30, 5),
		commit(5, []uint32{6}, 10, 20, 30),
	}},
	{"rollback to savepoint drops only the subxid", []op{
		add(10, 5), add(20, 6), add(30, 7), add(40, 6), add(50, 5),
		abort(6), floor(10),
		commit(5, []uint32{7}, 10, 30, 50), floor(0),
	}},
	{"subxact abort takes its listed children", []op{
		add(10, 5), add(20, 6), add(30, 8), add(40, 7),
		abort(6, 8),
		commit(5, []uint32{7}, 10, 40),
	}},
	{"top abort drops listed subxids only", []op{
		add(10, 5), add(20, 6), add(30, 7), add(40, 9), add(50, 8),
		abort(5, 6, 7), floor(40),
		commit(9, nil, 40), floor(50),
		commit(8, nil, 50), floor(0),
	}},
	{"prepare then commit prepared", []op{
		add(10, 5), add(20, 6), prepare(5, 6), add(30, 9),
		commit(9, nil, 30), floor(10),
		commit(5, []uint32{6}, 10, 20), floor(0),
	}},
	{"commit prepared finds prepared subxids without the list", []op{
		add(10, 5), add(20, 6), add(25, 7), prepare(5, 6, 7),
		commit(5, nil, 10, 20, 25), floor(0),
	}},
	{"prepare then rollback prepared", []op{
		add(10, 5), add(20, 6), add(30, 9), prepare(5, 6),
		abort(5), floor(30),
		commit(9, nil, 30),
	}},
	{"prepared subxid only", []op{
		add(10, 6), prepare(5, 6), floor(10),
		commit(5, []uint32{6}, 10),
	}},
	{"unannounced subxids and a subxid listed nowhere", []op{
		add(10, 5), add(15, 8), add(20, 6), add(30, 7),
		commit(5, []uint32{6, 7}, 10, 20, 30),
		floor(15), // xid 8 never ends: it stays until Reset
	}},
	{"assignment hint is united with the commit's list", []op{
		add(10, 5), assign(5, 6, 7), add(20, 6), add(30, 7), add(40, 9),
		commit(5, nil, 10, 20, 30), floor(40),
	}},
	{"assignment hint on abort", []op{
		assign(5, 6), add(20, 6), add(30, 5), add(40, 9),
		abort(5), floor(40),
	}},
	{"commit of an xid without records", []op{
		add(10, 1),
		commit(42, nil), commit(43, []uint32{44}),
		floor(10),
	}},
	{"duplicate and repeated xids in the lists", []op{
		add(10, 5), add(20, 6),
		commit(5, []uint32{6, 6, 5}, 10, 20),
		commit(5, nil),
	}},
}

func TestBufferTable(t *testing.T) {
	configs := []struct {
		name string
		cfg  Config
	}{
		{"memory", Config{}},
		{"spill everything", Config{MemoryBudget: 1}},
		{"tiny slices", Config{SliceRecords: 2, SliceBytes: 150}},
	}
	for _, cc := range configs {
		for _, tc := range tableCases {
			t.Run(cc.name+"/"+tc.name, func(t *testing.T) {
				b := newTestBuffer(t, cc.cfg)
				runOps(t, b, tc.ops)
				b.Reset()
				if b.Floor() != 0 {
					t.Fatalf("Floor after Reset = %s", b.Floor())
				}
				mustNoSpillFiles(t, b.cfg.SpillDir)
				if st := b.Stats(); st.MemoryBytes != 0 || st.SpillFiles != 0 || st.OpenXIDs != 0 || st.SpilledBytes != 0 {
					t.Fatalf("Stats after Reset = %+v", st)
				}
			})
		}
	}
}

func runOps(t *testing.T, b *Buffer, ops []op) {
	t.Helper()
	added := map[wal.LSN]Change{}
	for i, o := range ops {
		switch o.kind {
		case "add":
			n := o.bytes
			if n == 0 {
				n = 100
			}
			c := change(o.lsn, o.xid, n)
			added[o.lsn] = c
			if err := b.Add(c); err != nil {
				t.Fatalf("op %d: Add: %v", i, err)
			}
		case "assign":
			b.Assign(o.xid, o.subs)
		case "abort":
			b.Abort(o.xid, o.subs)
		case "prepare":
			b.Prepare(o.xid, o.subs)
		case "floor":
			if got := b.Floor(); got != o.lsn {
				t.Fatalf("op %d: Floor = %d, want %d", i, got, o.lsn)
			}
		case "commit":
			d, err := b.Commit(o.xid, o.subs)
			if err != nil {
				t.Fatalf("op %d: Commit: %v", i, err)
			}
			want := make([]Change, len(o.want))
			for j, l := range o.want {
				want[j] = added[l]
			}
			if len(want) == 0 && (d.Len() != 0 || d.FirstLSN() != 0) {
				t.Fatalf("op %d: empty commit has Len %d FirstLSN %s", i, d.Len(), d.FirstLSN())
			}
			sameChanges(t, drainAll(t, b, d), want)
		default:
			t.Fatalf("op %d: unknown kind %q", i, o.kind)
		}
	}
}

func TestSliceLimits(t *testing.T) {
	b := newTestBuffer(t, Config{SliceRecords: 3, SliceBytes: 1000})
	sizes := []int{400, 400, 400, 5000, 100, 100, 100, 100, 980, 20, 1000}
	for i, n := range sizes {
		if err := b.Add(change(wal.LSN(100*(i+1)), 9, n)); err != nil {
			t.Fatal(err)
		}
	}
	d, err := b.Commit(9, nil)
	if err != nil {
		t.Fatal(err)
	}
	var shape [][]int
	for {
		s, err := d.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var ns []int
		for _, c := range s {
			ns = append(ns, len(c.Raw))
		}
		shape = append(shape, ns)
	}
	d.Close()
	want := [][]int{{400, 400}, {400}, {5000}, {100, 100, 100}, {100}, {980, 20}, {1000}}
	if !slices.EqualFunc(shape, want, slices.Equal) {
		t.Fatalf("slices %v, want %v", shape, want)
	}
}

func TestAddRejects(t *testing.T) {
	b := newTestBuffer(t, Config{})
	if err := b.Add(change(10, 0, 50)); err == nil {
		t.Fatal("Add with xid 0 succeeded")
	}
	if err := b.Add(change(20, 3, 50)); err != nil {
		t.Fatal(err)
	}
	if err := b.Add(change(20, 3, 50)); err == nil || !strings.Contains(err.Error(), "not after") {
		t.Fatalf("Add of a repeated LSN: %v", err)
	}
	if err := b.Add(change(15, 4, 50)); err != nil {
		t.Fatalf("an earlier LSN of another xid is fine: %v", err)
	}
}

func TestAddCopiesRaw(t *testing.T) {
	b := newTestBuffer(t, Config{})
	raw := []byte("original bytes")
	if err := b.Add(Change{LSN: 1, Next: 2, XID: 7, Raw: raw}); err != nil {
		t.Fatal(err)
	}
	copy(raw, "XXXXXXXX")
	d, _ := b.Commit(7, nil)
	got := drainAll(t, b, d)
	if string(got[0].Raw) != "original bytes" {
		t.Fatalf("Raw = %q: the buffer did not copy", got[0].Raw)
	}
}

func TestNewRemovesStaleSpillFiles(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, spillFileName(12, 0x1000))
	other := filepath.Join(dir, "keep.txt")
	for _, p := range []string{stale, filepath.Join(dir, "odd.spill"), other} {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	newTestBuffer(t, Config{SpillDir: dir})
	mustNoSpillFiles(t, dir)
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("a non-spill file was removed: %v", err)
	}
	if _, err := New(Config{}); err == nil {
		t.Fatal("New without SpillDir succeeded")
	}
}

func TestDrainAfterReset(t *testing.T) {
	b := newTestBuffer(t, Config{MemoryBudget: 1})
	for i := range 10 {
		if err := b.Add(change(wal.LSN(10*(i+1)), 5, 300)); err != nil {
			t.Fatal(err)
		}
	}
	d, err := b.Commit(5, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.Floor() != 10 || b.Stats().DrainingTrees != 1 {
		t.Fatalf("an open drain must hold the floor: Floor %s, %+v", b.Floor(), b.Stats())
	}
	b.Reset()
	// A new transaction reuses the same xid and first LSN (re-read WAL):
	// the dead drain's Close must not remove its spill file.
	for i := range 10 {
		if err := b.Add(change(wal.LSN(10*(i+1)), 5, 300)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.Next(); err == nil {
		t.Fatal("Next on a drain of a reset buffer succeeded")
	}
	d.Close()
	if len(spillFilesIn(t, b.cfg.SpillDir)) != 1 {
		t.Fatalf("the new transaction's spill file is gone")
	}
	d2, _ := b.Commit(5, nil)
	if got := drainAll(t, b, d2); len(got) != 10 {
		t.Fatalf("drained %d records after reset, want 10", len(got))
	}
	mustNoSpillFiles(t, b.cfg.SpillDir)
}

func TestCloseRemovesSpillFiles(t *testing.T) {
	dir := t.TempDir()
	b, err := New(Config{SpillDir: dir, MemoryBudget: 1})
	if err != nil {
		t.Fatal(err)
	}
	for xid := uint32(1); xid <= 5; xid++ {
		if err := b.Add(change(wal.LSN(xid*10), xid, 200)); err != nil {
			t.Fatal(err)
		}
	}
	d, _ := b.Commit(1, nil) // left open
	if n := len(spillFilesIn(t, dir)); n != 5 {
		t.Fatalf("%d spill files, want 5", n)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	mustNoSpillFiles(t, dir)
	d.Close()
	if err := b.Add(change(100, 9, 10)); !errors.Is(err, errClosed) {
		t.Fatalf("Add after Close: %v", err)
	}
}

func TestSpillFailureSticksUntilReset(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spill")
	b := newTestBuffer(t, Config{SpillDir: dir, MemoryBudget: 1000})
	if err := b.Add(change(10, 5, 600)); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	err := b.Add(change(20, 5, 600))
	if err == nil || !strings.Contains(err.Error(), "spill") {
		t.Fatalf("Add with the spill dir gone: %v", err)
	}
	if err2 := b.Add(change(30, 6, 10)); err2 == nil {
		t.Fatal("the buffer accepted work after a failed spill")
	}
	if _, err2 := b.Commit(5, nil); err2 == nil {
		t.Fatal("Commit succeeded after a failed spill")
	}
	b.Reset()
	for i := range 5 {
		if err := b.Add(change(wal.LSN(100+i*10), 5, 600)); err != nil {
			t.Fatalf("after Reset: %v", err)
		}
	}
	d, err := b.Commit(5, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := drainAll(t, b, d); len(got) != 5 {
		t.Fatalf("drained %d, want 5", len(got))
	}
}

func TestEntrySize(t *testing.T) {
	if got := unsafe.Sizeof(entry{}); got != entrySize {
		t.Fatalf("entry is %d bytes, entrySize says %d", got, entrySize)
	}
}

// TestStartedDrainIsPinned: a tree being drained cannot spill; its bytes
// count beside the budget, so Adds do not spill small xids because of it.
func TestStartedDrainIsPinned(t *testing.T) {
	b := newTestBuffer(t, Config{MemoryBudget: 4000, SliceRecords: 1})
	for i := range 6 {
		if err := b.Add(change(wal.LSN(100+i*10), 1, 600)); err != nil {
			t.Fatal(err)
		}
	}
	d, err := b.Commit(1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Next(); err != nil {
		t.Fatal(err)
	}
	spills := b.Stats().Spills
	for i := range 5 {
		if err := b.Add(change(wal.LSN(1000+i*10), 2, 500)); err != nil {
			t.Fatal(err)
		}
	}
	st := b.Stats()
	if st.Spills != spills || st.PinnedBytes != 3600 || st.MemoryBytes != 3600+2500 {
		t.Fatalf("spilled beside a pinned drain: %+v (spills before %d)", st, spills)
	}
	d.Close()
	if st := b.Stats(); st.PinnedBytes != 0 || st.MemoryBytes != 2500 {
		t.Fatalf("after Close: %+v", st)
	}
}

// TestAddDoesNotAllocate: steady-state Add (recycled chunks and entries)
// allocates nothing per record.
func TestAddDoesNotAllocate(t *testing.T) {
	b := newTestBuffer(t, Config{})
	raw := make([]byte, 1024)
	lsn := wal.LSN(1000)
	cycle := func() {
		for range 1000 {
			lsn += 1024
			if err := b.Add(Change{LSN: lsn, Next: lsn + 1024, XID: 5, Raw: raw}); err != nil {
				t.Fatal(err)
			}
		}
		b.Abort(5, nil)
	}
	cycle() // warm the pools
	if allocs := testing.AllocsPerRun(20, cycle); allocs > 0 {
		t.Fatalf("%.1f allocations per 1000 Adds", allocs)
	}
}
