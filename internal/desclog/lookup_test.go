package desclog

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/walshadow/walshadow/internal/wal"
)

func TestLookupResults(t *testing.T) {
	d := table(16400, 16400, "t", col(1, "id", typInt4))
	l := seededLog(t, d)

	// Foreign database: counted before any chain read, on both lookups.
	other := d.Rfn
	other.DbOid = 6
	mustLookup(t, l.DescriptorAt(other, 0x1000), ForeignDb)
	mustLookup(t, l.DescriptorByOidInDBAt(6, d.Oid, 0x1000), ForeignDb)
	// Shared catalogs (database 0) pass the check and hold nothing.
	shared := wal.RelFileNode{SpcOid: 1664, DbOid: 0, RelNum: 1262}
	mustLookup(t, l.DescriptorAt(shared, 0x1000), NotCovered)

	// The seed: valid from the aligned start, NotCovered before it, and for
	// a relation the seed does not know (died before the snapshot).
	if got := mustLookup(t, l.DescriptorAt(d.Rfn, 0x800), Present); got.ValidFrom != 0x800 {
		t.Fatalf("%+v", got)
	}
	mustLookup(t, l.DescriptorAt(d.Rfn, 0x7ff), NotCovered)
	mustLookup(t, l.DescriptorAt(rfn(16999), 0xf00), NotCovered)
	mustLookup(t, l.DescriptorByOidInDBAt(testDB, 16999, 0xf00), NotCovered)
	if l.CoveredThrough() != 0x1000 || l.Horizon() != 0x1000 {
		t.Fatalf("horizon %s %s", l.CoveredThrough(), l.Horizon())
	}

	s := l.Stats()
	if s.Lookups[ForeignDb] != 2 || s.Lookups[NotCovered] != 4 || s.Lookups[Present] != 1 {
		t.Fatalf("lookup counters %+v", s.Lookups)
	}
}

func TestDatabaseScopeAmbiguity(t *testing.T) {
	d := table(16400, 16400, "t", col(1, "id", typInt4))
	l := seededLog(t, d)
	db := Ambiguity{Scope: ScopeDatabase, Reason: ReasonUnknownMutationPosition, DbOid: testDB, From: 0x2000, Through: 0x3000}
	if err := l.Append(&Batch{CapturedAt: 0x3000, Ambiguities: []Ambiguity{db}}); err != nil {
		t.Fatal(err)
	}
	if got := mustLookup(t, l.DescriptorAt(d.Rfn, 0x2000), Ambiguous); got.Interval != db {
		t.Fatalf("%+v", got)
	}
	mustLookup(t, l.DescriptorByOidInDBAt(testDB, d.Oid, 0x2fff), Ambiguous)
	mustLookup(t, l.DescriptorAt(d.Rfn, 0x3000), Present)
	// Shared catalogs are outside the database's scope.
	mustLookup(t, l.DescriptorAt(wal.RelFileNode{SpcOid: 1664, RelNum: 1262}, 0x2000), NotCovered)
	if got := l.AmbiguitiesIntersecting(rfn(1), 1, 0x1000, 0x2001); len(got) != 1 || got[0] != db {
		t.Fatalf("%+v", got)
	}
}

func TestAppendRefusesBrokenBatches(t *testing.T) {
	d := table(16400, 16400, "t", col(1, "id", typInt4))
	l := seededLog(t, d)
	if err := l.Append(&Batch{CapturedAt: 0x3000}); err != nil {
		t.Fatal(err)
	}
	dd := cloneDescriptor(&d)
	cases := []struct {
		name string
		b    *Batch
		want string
	}{
		{"not after the last", &Batch{CapturedAt: 0x3000}, "does not follow"},
		{"below the horizon", &Batch{CapturedAt: 0x900}, "horizon"},
		{"valid after its capture", &Batch{CapturedAt: 0x4000, Entries: []Entry{{Kind: EntryPresent, Oid: d.Oid, Rfn: d.Rfn, ValidFrom: 0x4001, Desc: dd, Source: SourceBoundary}}}, "after its capture"},
		{"before the chain head", &Batch{CapturedAt: 0x4000, Entries: []Entry{{Kind: EntryPresent, Oid: d.Oid, Rfn: d.Rfn, ValidFrom: 0x700, Desc: dd, Source: SourceBoundary}}}, "precedes the chain head"},
		{"present without descriptor", &Batch{CapturedAt: 0x4000, Entries: []Entry{{Kind: EntryPresent, Oid: d.Oid, Rfn: d.Rfn, ValidFrom: 0x4000}}}, "without a descriptor"},
		{"keys disagree", &Batch{CapturedAt: 0x4000, Entries: []Entry{{Kind: EntryPresent, Oid: 1, Rfn: d.Rfn, ValidFrom: 0x4000, Desc: dd}}}, "keys"},
		{"retired without filenode", &Batch{CapturedAt: 0x4000, Entries: []Entry{{Kind: EntryRetired, Oid: d.Oid, ValidFrom: 0x4000}}}, "names no filenode"},
		{"empty interval", &Batch{CapturedAt: 0x4000, Ambiguities: []Ambiguity{{Scope: ScopeOid, Reason: ReasonUnknownMutationPosition, DbOid: testDB, Oid: 1, From: 5, Through: 5}}}, "empty interval"},
		{"foreign interval", &Batch{CapturedAt: 0x4000, Ambiguities: []Ambiguity{{Scope: ScopeOid, Reason: ReasonUnknownMutationPosition, DbOid: 9, Oid: 1, From: 5, Through: 6}}}, "database 9"},
	}
	for _, c := range cases {
		if err := l.Append(c.b); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	// None of them reached the disk or the index.
	if s := l.Stats(); s.Batches != 2 || s.Appends != 1 {
		t.Fatalf("stats %+v", s)
	}
	mustLookup(t, l.DescriptorAt(d.Rfn, 0x5000), Present)
}

func TestPlanBoundary(t *testing.T) {
	l := seededLog(t)
	captureAppend(t, l, BoundaryInput{NextLSN: 0x3000})
	captureAppend(t, l, BoundaryInput{NextLSN: 0x5000})
	check := func(next, replay wal.LSN, want Plan) {
		t.Helper()
		plan, b, err := l.PlanBoundary(next, replay)
		if err != nil || plan != want || (want == PlanReplay) != (b != nil) {
			t.Fatalf("plan(%s, %s) = %s, %v, %v; want %s", next, replay, plan, b, err, want)
		}
	}
	check(0x1000, 0x9000, PlanSkip) // baked into the seed
	check(0x0800, 0x9000, PlanSkip)
	check(0x3000, 0x9000, PlanReplay)
	check(0x5000, 0x5000, PlanReplay)
	check(0x6000, 0x6000, PlanCapture) // the shadow parked at the boundary
	check(0x6000, 0x5800, PlanCapture) // the hold will wait
	for _, c := range []struct{ next, replay wal.LSN }{{0x6000, 0x6001}, {0x4000, 0x4000}} {
		_, _, err := l.PlanBoundary(c.next, c.replay)
		if !errors.Is(err, ErrCoverageLost) || !strings.Contains(err.Error(), "re-bootstrap") || !strings.Contains(err.Error(), l.Dir()) {
			t.Fatalf("plan(%s, %s): %v", c.next, c.replay, err)
		}
	}
}

func TestActivePresent(t *testing.T) {
	a := table(16400, 16400, "a", col(1, "id", typInt4))
	b := table(16410, 16410, "b", col(1, "id", typInt4))
	toast := toastOf(16403, 16403, 16400)
	l := seededLog(t, b, toast, a)
	captureAppend(t, l, BoundaryInput{NextLSN: 0x3000, AffectedOids: []uint32{b.Oid}})
	got := l.ActivePresent()
	if len(got) != 1 || got[0].Oid != a.Oid {
		t.Fatalf("%+v", got)
	}
}

// Readers never block on or observe a half-applied append; run with -race.
func TestConcurrentReadersDuringAppends(t *testing.T) {
	const rels, rounds = 64, 200
	var seed []Descriptor
	for i := range uint32(rels) {
		seed = append(seed, table(16400+i, 16400+i, "t", col(1, "c0", typInt4)))
	}
	l := seededLog(t, seed...)
	var (
		done    atomic.Bool
		wg      sync.WaitGroup
		lastLSN atomic.Uint64
	)
	lastLSN.Store(0x1000)
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			i := r
			for !done.Load() {
				i++
				oid := uint32(16400 + i%rels)
				at := wal.LSN(lastLSN.Load())
				got := l.DescriptorAt(rfn(oid), at)
				if got.Result != Present || got.Desc.Oid != oid {
					t.Errorf("lookup %d at %s: %+v", oid, at, got)
					return
				}
				// One snapshot: the descriptor matches the entry's validity:
				// round k's shape has k+1 columns and is valid from round k's
				// boundary minus 0x800.
				if n := len(got.Desc.Columns); n > 1 && got.ValidFrom != wal.LSN(0x10000*(n-1)+0x800) {
					t.Errorf("lookup %d: %d columns valid from %s", oid, n, got.ValidFrom)
					return
				}
			}
		}()
	}
	for k := 1; k < rounds; k++ {
		next := wal.LSN(0x10000*k + 0x1000)
		var fetched []Descriptor
		oid := uint32(16400 + k%rels)
		prev, _ := l.snap.Load().oidHead(oid)
		d := *cloneDescriptor(prev.desc)
		d.Columns = nil
		for c := range k + 1 {
			d.Columns = append(d.Columns, col(int16(c+1), "c"+itoa(uint32(c)), typInt4))
		}
		fetched = append(fetched, d)
		b, _, err := Capture(l, BoundaryInput{NextLSN: next, AffectedOids: []uint32{oid}, FirstCatalogTouch: next - 0x800}, fetched)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Append(b); err != nil {
			t.Fatal(err)
		}
		lastLSN.Store(uint64(next))
	}
	done.Store(true)
	wg.Wait()
}

func TestDescriptorAtDoesNotAllocate(t *testing.T) {
	l := benchLog(t, 200, 20)
	r := rfn(16400 + 7)
	allocs := testing.AllocsPerRun(1000, func() {
		if got := l.DescriptorAt(r, 0x5000_0000); got.Result != Present {
			t.Fatalf("%+v", got)
		}
		l.DescriptorByOidInDBAt(testDB, 16407, 0x5000_0000)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per lookup", allocs)
	}
}

// TestLookupsAsOfHorizon: a lookup as of a horizon sees the log as it stood
// once every capture at or before the horizon was applied, so a transaction
// that committed before a later capture decodes as an in-order capture
// would have let it, however early that capture's valid_from was biased.
func TestLookupsAsOfHorizon(t *testing.T) {
	d := table(16400, 16400, "t", col(1, "id", typInt4))
	l := seededLog(t, d)
	// ADD COLUMN committed at 0x3000, its tree first touched the catalogs at
	// 0x2000: the new shape is biased back to 0x2000.
	added := table(16400, 16400, "t", col(1, "id", typInt4), col(2, "v", typText))
	captureAppend(t, l, BoundaryInput{NextLSN: 0x3000, DrainXID: 900, AffectedOids: []uint32{16400}, FirstCatalogTouch: 0x2000}, added)
	// A physical in-place change (type oid) at 0x5000 fences [0x4000, 0x5000).
	retyped := cloneDescriptor(&added)
	retyped.Columns[1].TypeOid = typVarchar
	captureAppend(t, l, BoundaryInput{NextLSN: 0x5000, DrainXID: 901, AffectedOids: []uint32{16400}, FirstCatalogTouch: 0x4000}, *retyped)

	// Everything seen: the biased shape answers at 0x2800.
	if got := mustLookup(t, l.DescriptorAt(d.Rfn, 0x2800), Present); len(got.Desc.Columns) != 2 {
		t.Fatalf("all captures: %d columns", len(got.Desc.Columns))
	}
	// As of 0x2900 (a writer that committed before the ALTER): the old shape.
	if got := mustLookup(t, l.DescriptorAtAsOf(d.Rfn, 0x2800, 0x2900), Present); len(got.Desc.Columns) != 1 {
		t.Fatalf("as of 0x2900: %d columns", len(got.Desc.Columns))
	}
	if got := mustLookup(t, l.DescriptorByOidInDBAtAsOf(testDB, d.Oid, 0x2800, 0x2900), Present); len(got.Desc.Columns) != 1 {
		t.Fatalf("by oid as of 0x2900: %d columns", len(got.Desc.Columns))
	}
	// As of the ALTER's own commit: its shape.
	if got := mustLookup(t, l.DescriptorAtAsOf(d.Rfn, 0x2800, 0x3000), Present); len(got.Desc.Columns) != 2 {
		t.Fatalf("as of 0x3000: %d columns", len(got.Desc.Columns))
	}
	// The fence of the 0x5000 capture is invisible before it, visible after.
	mustLookup(t, l.DescriptorAt(d.Rfn, 0x4800), Ambiguous)
	mustLookup(t, l.DescriptorAtAsOf(d.Rfn, 0x4800, 0x4900), Present)
	mustLookup(t, l.DescriptorAtAsOf(d.Rfn, 0x4800, 0x5000), Ambiguous)
	if got := l.AmbiguitiesIntersectingAsOf(d.Rfn, d.Oid, 0x4000, 0x4900, 0x4900); len(got) != 0 {
		t.Fatalf("intervals as of 0x4900: %+v", got)
	}
	if got := l.AmbiguitiesIntersectingAsOf(d.Rfn, d.Oid, 0x4000, 0x4900, 0x5000); len(got) != 2 {
		t.Fatalf("intervals as of 0x5000: %+v", got)
	}
	// Before the seed's first capture nothing is seen.
	mustLookup(t, l.DescriptorAtAsOf(d.Rfn, 0x2800, 0x10), NotCovered)
	// The view type serves decode.Catalog.
	v := l.AsOf(0x2900)
	if got := v.DescriptorAt(d.Rfn, 0x2800); got.Result != Present || len(got.Desc.Columns) != 1 {
		t.Fatalf("view: %+v", got)
	}
}
