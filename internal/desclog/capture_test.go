package desclog

import (
	"strings"
	"testing"

	"github.com/walshadow/walshadow/internal/wal"
)

func TestCaptureAddedAndValidFromSources(t *testing.T) {
	d := table(16400, 16400, "t", col(1, "id", typInt4))
	cases := []struct {
		name    string
		marker  map[wal.RelFileNode]wal.LSN
		touch   map[uint32]wal.LSN
		first   wal.LSN
		wantVF  wal.LSN
		wantSrc ValidFromSource
	}{
		{"smgr create marker first", map[wal.RelFileNode]wal.LSN{d.Rfn: 0x2000}, map[uint32]wal.LSN{d.Oid: 0x2100}, 0x1f00, 0x2000, SourceSmgrCreate},
		{"pg_class touch without marker", nil, map[uint32]wal.LSN{d.Oid: 0x2100}, 0x1f00, 0x2100, SourcePgClassTouch},
		{"first catalog touch", nil, nil, 0x1f00, 0x1f00, SourceFirstCatalogTouch},
		{"nothing known: the boundary", nil, nil, 0, 0x3000, SourceBoundary},
		{"marker past the boundary ignored", map[wal.RelFileNode]wal.LSN{d.Rfn: 0x3001}, nil, 0x1f00, 0x1f00, SourceFirstCatalogTouch},
		{"touch past the boundary ignored", nil, map[uint32]wal.LSN{d.Oid: 0x3001}, 0, 0x3000, SourceBoundary},
		{"never before the filenode's previous entry", nil, nil, 0x100, 0x1800, SourcePredecessor},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var l *Log
			if c.wantSrc == SourcePredecessor {
				// The rfn chain already holds a tombstone at 0x1800 (another
				// relation stored in the same filenode, dropped): the new
				// one cannot start before it.
				l = seededLog(t, table(16390, 16400, "old", col(1, "a", typInt4)))
				captureAppend(t, l, BoundaryInput{NextLSN: 0x1800, AffectedOids: []uint32{16390}})
			} else {
				l = seededLog(t)
			}
			in := BoundaryInput{NextLSN: 0x3000, DrainXID: 900, AffectedOids: []uint32{d.Oid}, FirstCatalogTouch: c.first,
				SmgrCreates: markers(c.marker), PgClassTouch: touches(c.touch)}
			batch, events := captureAppend(t, l, in, d)
			if len(batch.Entries) != 1 || batch.Entries[0].Kind != EntryPresent {
				t.Fatalf("entries %+v", batch.Entries)
			}
			e := batch.Entries[0]
			if e.ValidFrom != c.wantVF || e.Source != c.wantSrc {
				t.Fatalf("valid from %s (%s), want %s (%s)", e.ValidFrom, e.Source, c.wantVF, c.wantSrc)
			}
			if len(events) != 1 || events[0].Kind != EventAdded || events[0].ValidFrom != c.wantVF || events[0].DrainXID != 900 || !events[0].Desc.Equal(&d) {
				t.Fatalf("events %+v", events)
			}
			mustLookup(t, l.DescriptorAt(d.Rfn, c.wantVF), Present)
			if c.wantVF > 0x800 && c.wantSrc != SourcePredecessor {
				mustLookup(t, l.DescriptorAt(d.Rfn, c.wantVF-1), NotCovered)
			}
		})
	}
}

func TestCaptureUnchangedIsStub(t *testing.T) {
	d := table(16400, 16400, "t", col(1, "id", typInt4))
	l := seededLog(t, d)
	batch, events := captureAppend(t, l, BoundaryInput{NextLSN: 0x3000, AffectedOids: []uint32{d.Oid}, FirstCatalogTouch: 0x2000}, d)
	if !batch.IsStub() || batch.Entries != nil || len(events) != 0 {
		t.Fatalf("batch %+v events %+v", batch, events)
	}
	// Nothing fetched and nothing affected: a stub too.
	batch, _ = captureAppend(t, l, BoundaryInput{NextLSN: 0x4000})
	if !batch.IsStub() {
		t.Fatalf("batch %+v", batch)
	}
	if b, ok := l.BatchAt(0x4000); !ok || b != batch {
		t.Fatal("stub not stored")
	}
	if got := l.Stats().Batches; got != 3 {
		t.Fatalf("batches %d, want 3 (seed + 2 stubs)", got)
	}
}

func TestCaptureChanged(t *testing.T) {
	d := table(16400, 16400, "t", col(1, "id", typInt4), col(2, "name", typText))
	l := seededLog(t, d)

	// ADD COLUMN (nullable): proven, biased early to the pg_class touch.
	d2 := table(16400, 16400, "t", col(1, "id", typInt4), col(2, "name", typText), col(3, "n", typInt8))
	batch, events := captureAppend(t, l, BoundaryInput{NextLSN: 0x3000, AffectedOids: []uint32{d.Oid}, FirstCatalogTouch: 0x2000,
		PgClassTouch: touches(map[uint32]wal.LSN{d.Oid: 0x2400})}, d2)
	if e := batch.Entries[0]; e.ValidFrom != 0x2400 || e.Source != SourcePgClassTouch || len(batch.Ambiguities) != 0 {
		t.Fatalf("batch %+v", batch)
	}
	if len(events) != 1 || events[0].Kind != EventChanged || len(events[0].Diff.Added) != 1 || events[0].Diff.Added[0].Name != "n" ||
		!events[0].Prev.Equal(&d) || !events[0].Desc.Equal(&d2) {
		t.Fatalf("events %+v", events)
	}
	if got := mustLookup(t, l.DescriptorAt(d.Rfn, 0x23ff), Present); !got.Desc.Equal(&d) || got.ValidFrom != 0x800 {
		t.Fatalf("before: %+v", got)
	}
	if got := mustLookup(t, l.DescriptorAt(d.Rfn, 0x2400), Present); !got.Desc.Equal(&d2) || got.ValidFrom != 0x2400 {
		t.Fatalf("after: %+v", got)
	}

	// RENAME COLUMN + typmod (benign): one Changed with both, no fence.
	d3 := *cloneDescriptor(&d2)
	d3.Columns[1].Name = "label"
	d3.Columns[2].TypMod = 12
	batch, events = captureAppend(t, l, BoundaryInput{NextLSN: 0x5000, AffectedOids: []uint32{d.Oid}, FirstCatalogTouch: 0x4000}, d3)
	if len(batch.Ambiguities) != 0 || batch.Entries[0].ValidFrom != 0x4000 {
		t.Fatalf("batch %+v", batch)
	}
	if ev := events[0]; ev.Kind != EventChanged || len(ev.Diff.Renamed) != 1 || ev.Diff.Renamed[0].Num != 2 || len(ev.Diff.Retyped) != 1 {
		t.Fatalf("event %+v", ev)
	}

	// RENAME TABLE: a new entry (the name is part of the shape), and a
	// Changed event with no column change (consumers that select tables
	// by name start or stop following it).
	d4 := *cloneDescriptor(&d3)
	d4.Name = "renamed"
	batch, events = captureAppend(t, l, BoundaryInput{NextLSN: 0x7000, AffectedOids: []uint32{d.Oid}, FirstCatalogTouch: 0x6000}, d4)
	if len(batch.Entries) != 1 || len(events) != 1 || events[0].Kind != EventChanged || !events[0].Diff.Moved || len(events[0].Diff.Renamed) != 0 {
		t.Fatalf("batch %+v events %+v", batch, events)
	}
	if got := mustLookup(t, l.DescriptorByOidInDBAt(testDB, d.Oid, 0x6000), Present); got.Desc.Name != "renamed" {
		t.Fatalf("%+v", got)
	}

	// DROP COLUMN: Changed with Dropped.
	d5 := *cloneDescriptor(&d4)
	d5.Columns[2] = droppedCol(d5.Columns[2])
	_, events = captureAppend(t, l, BoundaryInput{NextLSN: 0x9000, AffectedOids: []uint32{d.Oid}, FirstCatalogTouch: 0x8000}, d5)
	if len(events) != 1 || len(events[0].Diff.Dropped) != 1 || events[0].Diff.Dropped[0].Name != "n" {
		t.Fatalf("events %+v", events)
	}
}

func TestCaptureRotation(t *testing.T) {
	d := table(16400, 16400, "t", col(1, "id", typInt4))
	t.Run("truncate with marker", func(t *testing.T) {
		l := seededLog(t, d)
		nd := table(16400, 16410, "t", col(1, "id", typInt4))
		batch, events := captureAppend(t, l, BoundaryInput{NextLSN: 0x3000, AffectedOids: []uint32{d.Oid}, FirstCatalogTouch: 0x2000,
			SmgrCreates: markers(map[wal.RelFileNode]wal.LSN{nd.Rfn: 0x2200})}, nd)
		if len(events) != 0 || len(batch.Entries) != 2 {
			t.Fatalf("batch %+v events %+v", batch, events)
		}
		ret, pre := batch.Entries[0], batch.Entries[1]
		if ret.Kind != EntryRetired || ret.Rfn != d.Rfn || ret.ValidFrom != 0x2200 || ret.Source != SourceSmgrCreate {
			t.Fatalf("retired %+v", ret)
		}
		if pre.Kind != EntryPresent || pre.Rfn != nd.Rfn || pre.ValidFrom != 0x2200 {
			t.Fatalf("present %+v", pre)
		}
		mustLookup(t, l.DescriptorAt(d.Rfn, 0x21ff), Present)
		if got := mustLookup(t, l.DescriptorAt(d.Rfn, 0x2200), Retired); got.ValidFrom != 0x2200 {
			t.Fatalf("%+v", got)
		}
		mustLookup(t, l.DescriptorAt(nd.Rfn, 0x21ff), NotCovered)
		mustLookup(t, l.DescriptorAt(nd.Rfn, 0x2200), Present)
		if got := mustLookup(t, l.DescriptorByOidInDBAt(testDB, d.Oid, 0x2200), Present); got.Desc.Rfn != nd.Rfn {
			t.Fatalf("%+v", got)
		}
		// The truncate apply's fallback: the retired filenode's last shape.
		if desc, vf, ok := l.PresentBeforeRfn(d.Rfn, 0x2800); !ok || desc.Rfn != d.Rfn || vf != 0x800 {
			t.Fatalf("present before rfn: %v %s %v", desc, vf, ok)
		}
	})
	t.Run("rotation without marker retires at the boundary", func(t *testing.T) {
		l := seededLog(t, d)
		nd := table(16400, 16410, "t", col(1, "id", typInt4))
		batch, _ := captureAppend(t, l, BoundaryInput{NextLSN: 0x3000, AffectedOids: []uint32{d.Oid}, FirstCatalogTouch: 0x2000}, nd)
		if ret := batch.Entries[0]; ret.Kind != EntryRetired || ret.ValidFrom != 0x3000 || ret.Source != SourceBoundary {
			t.Fatalf("retired %+v", ret)
		}
		if pre := batch.Entries[1]; pre.ValidFrom != 0x2000 {
			t.Fatalf("present %+v", pre)
		}
		mustLookup(t, l.DescriptorAt(d.Rfn, 0x2fff), Present)
		mustLookup(t, l.DescriptorAt(d.Rfn, 0x3000), Retired)
	})
	t.Run("rewrite with a new type skips the predicate", func(t *testing.T) {
		l := seededLog(t, d)
		nd := table(16400, 16410, "t", col(1, "id", typInt8))
		batch, events := captureAppend(t, l, BoundaryInput{NextLSN: 0x3000, AffectedOids: []uint32{d.Oid}, FirstCatalogTouch: 0x2000,
			SmgrCreates: markers(map[wal.RelFileNode]wal.LSN{nd.Rfn: 0x2100})}, nd)
		if len(batch.Ambiguities) != 0 {
			t.Fatalf("a rotation published %+v", batch.Ambiguities)
		}
		if len(events) != 1 || events[0].Kind != EventChanged || len(events[0].Diff.Retyped) != 1 || events[0].ValidFrom != 0x2100 {
			t.Fatalf("events %+v", events)
		}
	})
}

func TestCapturePhysicalInPlaceFences(t *testing.T) {
	d := table(16400, 16400, "t", col(1, "id", typInt4), col(2, "v", typText))
	l := seededLog(t, d)
	nd := table(16400, 16400, "t", col(1, "id", typInt4), col(2, "v", typVarchar))
	batch, events := captureAppend(t, l, BoundaryInput{NextLSN: 0x3000, AffectedOids: []uint32{d.Oid}, FirstCatalogTouch: 0x2000,
		PgClassTouch: touches(map[uint32]wal.LSN{d.Oid: 0x2500})}, nd)
	if e := batch.Entries[0]; e.ValidFrom != 0x3000 || e.Source != SourceBoundary {
		t.Fatalf("physical change biased early: %+v", e)
	}
	want := []Ambiguity{
		{Scope: ScopeRfn, Reason: ReasonUnknownMutationPosition, Rfn: d.Rfn, DbOid: testDB, From: 0x2000, Through: 0x3000},
		{Scope: ScopeOid, Reason: ReasonUnknownMutationPosition, DbOid: testDB, Oid: d.Oid, From: 0x2000, Through: 0x3000},
	}
	if len(batch.Ambiguities) != 2 || batch.Ambiguities[0] != want[0] || batch.Ambiguities[1] != want[1] {
		t.Fatalf("ambiguities %+v", batch.Ambiguities)
	}
	if len(events) != 1 || events[0].Kind != EventChanged || events[0].ValidFrom != 0x3000 {
		t.Fatalf("events %+v", events)
	}
	// Ambiguity is checked before the chain, on both keys.
	mustLookup(t, l.DescriptorAt(d.Rfn, 0x1fff), Present)
	if got := mustLookup(t, l.DescriptorAt(d.Rfn, 0x2000), Ambiguous); got.Interval != want[0] {
		t.Fatalf("%+v", got)
	}
	mustLookup(t, l.DescriptorAt(d.Rfn, 0x2fff), Ambiguous)
	if got := mustLookup(t, l.DescriptorByOidInDBAt(testDB, d.Oid, 0x2fff), Ambiguous); got.Interval != want[1] {
		t.Fatalf("%+v", got)
	}
	if got := mustLookup(t, l.DescriptorAt(d.Rfn, 0x3000), Present); !got.Desc.Equal(&nd) {
		t.Fatalf("%+v", got)
	}
	if got := l.AmbiguitiesIntersecting(d.Rfn, d.Oid, 0x2fff, 0x4000); len(got) != 2 {
		t.Fatalf("intersecting %+v", got)
	}
	if got := l.AmbiguitiesIntersecting(d.Rfn, d.Oid, 0x3000, 0x4000); got != nil {
		t.Fatalf("intersecting past the interval %+v", got)
	}
	if got := l.AmbiguitiesIntersecting(rfn(999), 0, 0, 0x4000); got != nil {
		t.Fatalf("other keys %+v", got)
	}

	t.Run("no first touch falls back to the pg_class touch", func(t *testing.T) {
		l := seededLog(t, d)
		batch, _ := captureAppend(t, l, BoundaryInput{NextLSN: 0x3000, AffectedOids: []uint32{d.Oid},
			PgClassTouch: touches(map[uint32]wal.LSN{d.Oid: 0x2500})}, nd)
		if batch.Ambiguities[0].From != 0x2500 {
			t.Fatalf("%+v", batch.Ambiguities)
		}
	})
	t.Run("nothing known fences from the predecessor's capture", func(t *testing.T) {
		l := seededLog(t, d)
		batch, _ := captureAppend(t, l, BoundaryInput{NextLSN: 0x3000, AffectedOids: []uint32{d.Oid}}, nd)
		if batch.Ambiguities[0].From != 0x1000 {
			t.Fatalf("%+v", batch.Ambiguities)
		}
	})
	t.Run("partitioned table fences by oid only", func(t *testing.T) {
		p := table(16500, 0, "p", col(1, "id", typInt4))
		p.Kind = 'p'
		l := seededLog(t, p)
		np := *cloneDescriptor(&p)
		np.Columns[0] = col(1, "id", typInt8)
		batch, _ := captureAppend(t, l, BoundaryInput{NextLSN: 0x3000, AffectedOids: []uint32{p.Oid}, FirstCatalogTouch: 0x2000}, np)
		if len(batch.Ambiguities) != 1 || batch.Ambiguities[0].Scope != ScopeOid {
			t.Fatalf("%+v", batch.Ambiguities)
		}
		mustLookup(t, l.DescriptorAt(p.Rfn, 0x3000), NotCovered) // no storage, no rfn chain
		mustLookup(t, l.DescriptorByOidInDBAt(testDB, p.Oid, 0x3000), Present)
	})
}

func TestCaptureDropped(t *testing.T) {
	a := table(16400, 16400, "a", col(1, "id", typInt4))
	a.ToastOid = 16403
	toast := toastOf(16403, 16403, 16400)
	b := table(16410, 16410, "b", col(1, "id", typInt4))
	c := table(16420, 16420, "c", col(1, "id", typInt4))

	t.Run("affected and absent", func(t *testing.T) {
		l := seededLog(t, a, toast, b, c)
		affected := WithToastOids(l, []uint32{a.Oid})
		if len(affected) != 2 || affected[0] != a.Oid || affected[1] != toast.Oid {
			t.Fatalf("with toast: %v", affected)
		}
		batch, events := captureAppend(t, l, BoundaryInput{NextLSN: 0x3000, DrainXID: 7, AffectedOids: affected, FirstCatalogTouch: 0x2000})
		if len(batch.Entries) != 2 || batch.Entries[0].Kind != EntryDropped || batch.Entries[0].ValidFrom != 0x3000 || batch.Entries[0].Rfn != a.Rfn {
			t.Fatalf("entries %+v", batch.Entries)
		}
		// Toast relations get Dropped events too.
		if len(events) != 2 || events[0].Kind != EventDropped || !events[0].Desc.Equal(&a) || events[1].Desc.Kind != 't' {
			t.Fatalf("events %+v", events)
		}
		mustLookup(t, l.DescriptorAt(a.Rfn, 0x2fff), Present)
		if got := mustLookup(t, l.DescriptorAt(a.Rfn, 0x3000), Dropped); got.ValidFrom != 0x3000 {
			t.Fatalf("%+v", got)
		}
		mustLookup(t, l.DescriptorByOidInDBAt(testDB, a.Oid, 0x3000), Dropped)
		// b is not covered by this capture: untouched.
		mustLookup(t, l.DescriptorAt(b.Rfn, 0x3000), Present)
		if desc, _, ok := l.PresentBefore(a.Oid, 0x9000); !ok || !desc.Equal(&a) {
			t.Fatal("present before a tombstone")
		}

		// The oid comes back (an oid reused): Added again.
		again := table(16400, 16430, "a2", col(1, "x", typText))
		_, events = captureAppend(t, l, BoundaryInput{NextLSN: 0x5000, AffectedOids: []uint32{again.Oid}, FirstCatalogTouch: 0x4000}, again)
		if len(events) != 1 || events[0].Kind != EventAdded {
			t.Fatalf("events %+v", events)
		}
	})
	t.Run("a drop before the creation of another relation in its transaction", func(t *testing.T) {
		// DROP TABLE a; CREATE TABLE a: the new relation is valid from its
		// creation, before the drop's commit, yet the drop comes first.
		l := seededLog(t, a, toast, b, c)
		n := table(16440, 16440, "a", col(1, "v", typText))
		_, events := captureAppend(t, l, BoundaryInput{NextLSN: 0x3000, AffectedOids: []uint32{a.Oid, n.Oid}, FirstCatalogTouch: 0x2000}, n)
		if len(events) != 2 || events[0].Kind != EventDropped || events[0].Oid != a.Oid || events[1].Kind != EventAdded || events[1].Oid != n.Oid || events[1].ValidFrom >= events[0].ValidFrom {
			t.Fatalf("events %+v, want a's drop (at the commit) before n's creation (earlier)", events)
		}
	})
	t.Run("capture all", func(t *testing.T) {
		l := seededLog(t, a, toast, b, c)
		batch, events := captureAppend(t, l, BoundaryInput{NextLSN: 0x3000, CaptureAll: true, FirstCatalogTouch: 0x2000}, a, toast, c)
		if len(batch.Entries) != 1 || batch.Entries[0].Oid != b.Oid || batch.Entries[0].Kind != EntryDropped {
			t.Fatalf("entries %+v", batch.Entries)
		}
		if len(events) != 1 || events[0].Oid != b.Oid {
			t.Fatalf("events %+v", events)
		}
	})
	t.Run("toast gets entries but no added or changed events", func(t *testing.T) {
		l := seededLog(t)
		batch, events := captureAppend(t, l, BoundaryInput{NextLSN: 0x3000, AffectedOids: []uint32{a.Oid, toast.Oid}, FirstCatalogTouch: 0x2000}, a, toast)
		if len(batch.Entries) != 2 || len(events) != 1 || events[0].Oid != a.Oid {
			t.Fatalf("batch %+v events %+v", batch, events)
		}
		nt := toastOf(16403, 16450, 16400) // truncated: toast rotates too
		batch, events = captureAppend(t, l, BoundaryInput{NextLSN: 0x5000, AffectedOids: []uint32{toast.Oid}, FirstCatalogTouch: 0x4000}, nt)
		if len(batch.Entries) != 2 || len(events) != 0 {
			t.Fatalf("batch %+v events %+v", batch, events)
		}
	})
}

func TestCaptureIgnoresIndexesAndCatalogs(t *testing.T) {
	l := seededLog(t)
	idx := table(16401, 16401, "t_pkey", col(1, "id", typInt4))
	idx.Kind = 'i'
	cat := table(1259, 1259, "pg_class", col(1, "oid", typInt4))
	batch, events := captureAppend(t, l, BoundaryInput{NextLSN: 0x3000, AffectedOids: []uint32{16401}, FirstCatalogTouch: 0x2000}, idx, cat)
	if !batch.IsStub() || len(events) != 0 {
		t.Fatalf("batch %+v events %+v", batch, events)
	}
}

func TestCaptureRefuses(t *testing.T) {
	d := table(16400, 16400, "t", col(1, "id", typInt4))
	l := seededLog(t, d)
	captureAppend(t, l, BoundaryInput{NextLSN: 0x3000})
	foreign := d
	foreign.DbOid = 6
	twin := table(16401, 16400, "twin", col(1, "id", typInt4))
	unordered := table(16402, 16402, "u", col(2, "b", typInt4), col(1, "a", typInt4))
	cases := []struct {
		name    string
		in      BoundaryInput
		fetched []Descriptor
		want    string
	}{
		{"at the last batch", BoundaryInput{NextLSN: 0x3000}, nil, "already holds"},
		{"at the horizon", BoundaryInput{NextLSN: 0x1000}, nil, "horizon"},
		{"first touch after the boundary", BoundaryInput{NextLSN: 0x4000, FirstCatalogTouch: 0x4001}, nil, "first catalog touch"},
		{"foreign database", BoundaryInput{NextLSN: 0x4000}, []Descriptor{foreign}, "database 6"},
		{"fetched twice", BoundaryInput{NextLSN: 0x4000}, []Descriptor{d, d}, "fetched twice"},
		{"two relations in one filenode", BoundaryInput{NextLSN: 0x4000}, []Descriptor{d, twin}, "both stored"},
		{"columns out of order", BoundaryInput{NextLSN: 0x4000}, []Descriptor{unordered}, "out of order"},
	}
	for _, c := range cases {
		if _, _, err := Capture(l, c.in, c.fetched); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", c.name, err, c.want)
		}
	}
	empty, err := Open(t.TempDir(), testID)
	if err != nil {
		t.Fatal(err)
	}
	defer empty.Close()
	if _, _, err := Capture(empty, BoundaryInput{NextLSN: 0x4000}, nil); err == nil || !strings.Contains(err.Error(), "not seeded") {
		t.Errorf("unseeded: %v", err)
	}
}

// A predecessor valid later than every bias-early source clamps the new
// entry to its own validity, never before.
func TestCaptureClampsToPredecessor(t *testing.T) {
	d := table(16400, 16400, "t", col(1, "id", typInt4))
	l := seededLog(t)
	captureAppend(t, l, BoundaryInput{NextLSN: 0x6000, AffectedOids: []uint32{d.Oid}, FirstCatalogTouch: 0x5000}, d)
	d2 := table(16400, 16400, "t", col(1, "id", typInt4), col(2, "x", typInt4))
	// A long transaction touched catalogs at 0x4000, before the previous
	// boundary.
	batch, events := captureAppend(t, l, BoundaryInput{NextLSN: 0x8000, AffectedOids: []uint32{d.Oid}, FirstCatalogTouch: 0x4000}, d2)
	if e := batch.Entries[0]; e.ValidFrom != 0x5000 || e.Source != SourcePredecessor {
		t.Fatalf("entry %+v", e)
	}
	if events[0].ValidFrom != 0x5000 {
		t.Fatalf("events %+v", events)
	}
}
