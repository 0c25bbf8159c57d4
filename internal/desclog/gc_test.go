package desclog

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/walshadow/walshadow/internal/wal"
)

// probeKeys lists every rfn and oid a scenario ever used.
func probeKeys(steps []step) (rfns []wal.RelFileNode, oids []uint32) {
	seenR, seenO := map[wal.RelFileNode]bool{}, map[uint32]bool{}
	for _, st := range steps {
		for _, d := range st.fetched {
			if !seenR[d.Rfn] {
				seenR[d.Rfn] = true
				rfns = append(rfns, d.Rfn)
			}
			if !seenO[d.Oid] {
				seenO[d.Oid] = true
				oids = append(oids, d.Oid)
			}
		}
	}
	return rfns, oids
}

func TestCompactKeepsEverythingAboveTheFloor(t *testing.T) {
	dir := t.TempDir()
	l, steps, _ := scenarioLog(t, dir, 31, 120)
	defer l.Close()
	split := 60
	floor := steps[split].in.NextLSN
	rfns, oids := probeKeys(steps)
	type answer struct{ byRfn, byOid []Lookup }
	var probes []wal.LSN
	for _, st := range steps[split+1:] {
		probes = append(probes, st.firstTouch, st.in.NextLSN-1, st.in.NextLSN)
	}
	probes = append(probes, floor+1)
	snapshot := func() []answer {
		var out []answer
		for _, at := range probes {
			var a answer
			for _, r := range rfns {
				a.byRfn = append(a.byRfn, l.DescriptorAt(r, at))
			}
			for _, o := range oids {
				a.byOid = append(a.byOid, l.DescriptorByOidInDBAt(testDB, o, at))
			}
			out = append(out, a)
		}
		return out
	}
	var eventsBefore [][]Event
	for _, st := range steps[split+1:] {
		b, _ := l.BatchAt(st.in.NextLSN)
		eventsBefore = append(eventsBefore, l.ReplayEvents(b))
	}
	before := snapshot()
	entriesBefore := l.Stats().Entries

	if err := l.Compact(floor); err != nil {
		t.Fatal(err)
	}
	s := l.Stats()
	if s.Compactions != 1 || s.GCDroppedEntries == 0 || s.Entries != entriesBefore-int64(s.GCDroppedEntries) || s.TailBytes != headerLen {
		t.Fatalf("stats %+v (entries before %d)", s, entriesBefore)
	}
	if l.Horizon() != floor {
		t.Fatalf("horizon %s, want %s", l.Horizon(), floor)
	}
	after := snapshot()
	for i := range before {
		for j := range before[i].byRfn {
			compareAfterGC(t, "rfn "+rfns[j].String(), probes[i], before[i].byRfn[j], after[i].byRfn[j])
		}
		for j := range before[i].byOid {
			compareAfterGC(t, "oid "+itoa(oids[j]), probes[i], before[i].byOid[j], after[i].byOid[j])
		}
	}
	// Batches above the floor replay the same events against the compacted
	// history; those at or below it are baked in.
	for i, st := range steps[split+1:] {
		plan, b, err := l.PlanBoundary(st.in.NextLSN, st.in.NextLSN)
		if err != nil || plan != PlanReplay {
			t.Fatalf("plan above the floor: %s %v", plan, err)
		}
		if got := l.ReplayEvents(b); !reflect.DeepEqual(got, eventsBefore[i]) {
			t.Fatalf("boundary at %s: events changed by compaction", st.in.NextLSN)
		}
	}
	for _, st := range steps[:split+1] {
		if plan, _, err := l.PlanBoundary(st.in.NextLSN, st.in.NextLSN); err != nil || plan != PlanSkip {
			t.Fatalf("plan at or below the floor: %s %v", plan, err)
		}
	}
	// The compacted log reopens to the same content and keeps going.
	want := content(l)
	l.Close()
	r, err := Open(dir, testID)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	sameContent(t, want, content(r), "reopened after compaction")
	if st, _ := os.Stat(filepath.Join(dir, TailFile)); st.Size() != headerLen {
		t.Fatalf("tail not reset: %d bytes", st.Size())
	}
	s2 := newScenario(31)
	s2.seed(6)
	more := s2.run(130)
	for _, st := range more[120:] {
		captureAppend(t, r, st.in, st.fetched...)
	}
	checkScenario(t, r, more[split+1:])
}

func compareAfterGC(t *testing.T, key string, at wal.LSN, before, after Lookup) {
	t.Helper()
	if before == after {
		return
	}
	// A tombstone at or below the floor takes its chain with it.
	if (before.Result == Dropped || before.Result == Retired) && after.Result == NotCovered {
		return
	}
	t.Fatalf("%s at %s: %s before compaction, %s after", key, at, before.Result, after.Result)
}

func TestCompactRetention(t *testing.T) {
	a := table(16400, 16400, "a", col(1, "id", typInt4))
	b := table(16410, 16410, "b", col(1, "id", typInt4))
	c := table(16420, 16420, "c", col(1, "id", typInt4))
	l := seededLog(t, a, b, c)
	// 0x3000: a changes; b is truncated (rotation); c is dropped.
	a2 := table(16400, 16400, "a", col(1, "id", typInt4), col(2, "x", typInt8))
	b2 := table(16410, 16411, "b", col(1, "id", typInt4))
	captureAppend(t, l, BoundaryInput{NextLSN: 0x3000, AffectedOids: []uint32{a.Oid, b.Oid, c.Oid}, FirstCatalogTouch: 0x2000}, a2, b2)
	// 0x5000: a physical in-place change of a: an interval [0x4000, 0x5000).
	a3 := table(16400, 16400, "a", col(1, "id", typInt8), col(2, "x", typInt8))
	captureAppend(t, l, BoundaryInput{NextLSN: 0x5000, AffectedOids: []uint32{a.Oid}, FirstCatalogTouch: 0x4000}, a3)
	captureAppend(t, l, BoundaryInput{NextLSN: 0x6000}) // stub
	captureAppend(t, l, BoundaryInput{NextLSN: 0x8000}) // stub above the floor

	if err := l.Compact(0x6000); err != nil {
		t.Fatal(err)
	}
	ix := l.snap.Load()
	var kept []Entry
	for _, batch := range ix.batches {
		kept = append(kept, batch.Entries...)
	}
	// Survivors: a3 (head of a) and b2 (head of b); a, a2, b's retired
	// filenode and c's whole chain are gone.
	if len(kept) != 2 || !kept[0].Desc.Equal(&b2) || !kept[1].Desc.Equal(&a3) {
		t.Fatalf("kept %+v", kept)
	}
	if len(ix.batches) != 3 || ix.batches[2].CapturedAt != 0x8000 || !ix.batches[2].IsStub() {
		t.Fatalf("batches %d", len(ix.batches))
	}
	// The interval ended at 0x5000, below the floor: gone.
	if got := l.AmbiguitiesIntersecting(a.Rfn, a.Oid, 0, 0x9000); got != nil {
		t.Fatalf("intervals %+v", got)
	}
	mustLookup(t, l.DescriptorAt(c.Rfn, 0x7000), NotCovered)
	mustLookup(t, l.DescriptorByOidInDBAt(testDB, c.Oid, 0x7000), NotCovered)
	mustLookup(t, l.DescriptorAt(b.Rfn, 0x7000), NotCovered)
	if got := mustLookup(t, l.DescriptorAt(a.Rfn, 0x7000), Present); !got.Desc.Equal(&a3) {
		t.Fatalf("%+v", got)
	}
	mustLookup(t, l.DescriptorAt(b2.Rfn, 0x7000), Present)

	// An interval still reaching past the floor survives.
	l2 := seededLog(t, a)
	captureAppend(t, l2, BoundaryInput{NextLSN: 0x5000, AffectedOids: []uint32{a.Oid}, FirstCatalogTouch: 0x4000},
		table(16400, 16400, "a", col(1, "id", typInt8)))
	captureAppend(t, l2, BoundaryInput{NextLSN: 0x6000})
	if err := l2.Compact(0x4800); err != nil { // inside the interval
		t.Fatal(err)
	}
	if got := l2.AmbiguitiesIntersecting(a.Rfn, a.Oid, 0, 0x9000); len(got) != 2 {
		t.Fatalf("intervals %+v", got)
	}
	mustLookup(t, l2.DescriptorAt(a.Rfn, 0x4900), Ambiguous)
}

func TestCompactFloorCappedAtTheLastBatch(t *testing.T) {
	l := seededLog(t)
	captureAppend(t, l, BoundaryInput{NextLSN: 0x3000})
	if err := l.Compact(0xffff_0000); err != nil {
		t.Fatal(err)
	}
	if l.Horizon() != 0x3000 {
		t.Fatalf("horizon %s", l.Horizon())
	}
	// A boundary the log never saw is still captured, not taken as baked in.
	if plan, _, err := l.PlanBoundary(0x4000, 0x4000); err != nil || plan != PlanCapture {
		t.Fatalf("plan %s %v", plan, err)
	}
	captureAppend(t, l, BoundaryInput{NextLSN: 0x4000})
	// The floor never moves back.
	if err := l.Compact(0x100); err != nil || l.Horizon() != 0x3000 {
		t.Fatalf("%v, horizon %s", err, l.Horizon())
	}
}

func TestShouldCompact(t *testing.T) {
	t.Run("droppable entries", func(t *testing.T) {
		d := table(16400, 16400, "t", col(1, "id", typInt4))
		l := seededLog(t, d)
		next := wal.LSN(0x2000)
		for i := range CompactMinDroppable {
			if l.ShouldCompact() {
				t.Fatalf("hint after %d changes", i)
			}
			d.Name = "t" + itoa(uint32(i))
			captureAppend(t, l, BoundaryInput{NextLSN: next, AffectedOids: []uint32{d.Oid}, FirstCatalogTouch: next - 0x10}, d)
			next += 0x100
		}
		if !l.ShouldCompact() {
			t.Fatal("no hint")
		}
		if err := l.Compact(next); err != nil {
			t.Fatal(err)
		}
		if l.ShouldCompact() {
			t.Fatal("hint after compaction")
		}
	})
	t.Run("tail bytes", func(t *testing.T) {
		l := seededLog(t)
		oid, next := uint32(16400), wal.LSN(0x2000)
		for !l.ShouldCompact() {
			var fetched []Descriptor
			var affected []uint32
			for range 1000 {
				d := table(oid, oid, "a_table_with_a_long_name_"+itoa(oid))
				for c := range 20 {
					d.Columns = append(d.Columns, col(int16(c+1), "column_number_"+itoa(uint32(c)), typText))
				}
				fetched, affected = append(fetched, d), append(affected, oid)
				oid++
			}
			captureAppend(t, l, BoundaryInput{NextLSN: next, AffectedOids: affected, FirstCatalogTouch: next - 0x10}, fetched...)
			next += 0x100
			if s := l.Stats(); s.DroppableEntries != 0 && s.TailBytes < CompactTailBytes {
				t.Fatalf("new relations counted droppable: %+v", s)
			}
		}
		if s := l.Stats(); s.TailBytes < CompactTailBytes {
			t.Fatalf("hint at %d tail bytes", s.TailBytes)
		}
	})
}
