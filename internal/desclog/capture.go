package desclog

import (
	"fmt"
	"slices"

	"github.com/walshadow/walshadow/internal/wal"
)

// BoundaryInput is what the filter knows about a catalog boundary.
type BoundaryInput struct {
	// NextLSN is the commit's end: the batch's CapturedAt, the tombstones'
	// position, and the upper bound of every ValidFrom.
	NextLSN  wal.LSN
	DrainXID uint32
	// AffectedOids are the relations the boundary may have changed (pg_class
	// decodes and relcache invalidations). A Present relation among them
	// missing from the fetch is Dropped; see WithToastOids.
	AffectedOids []uint32
	// CaptureAll: the fetch read every relation; any Present relation
	// missing from it is Dropped.
	CaptureAll bool
	// FirstCatalogTouch is the transaction tree's first catalog write (0 when
	// unknown).
	FirstCatalogTouch wal.LSN
	// SmgrCreates returns the XLOG_SMGR_CREATE position of a main fork the
	// pump saw, PgClassTouch the first pg_class write for an oid in this
	// transaction. Either may be nil.
	SmgrCreates  func(wal.RelFileNode) (wal.LSN, bool)
	PgClassTouch func(oid uint32) (wal.LSN, bool)
}

// WithToastOids adds to oids the toast relations of their current shapes in
// the log. A boundary that rewrites or drops a table also drops or rotates
// its toast table; fetching (and so covering) the old toast oid as well
// lets the capture tombstone it. The caller fetches exactly the returned
// list and passes it as AffectedOids.
func WithToastOids(log *Log, oids []uint32) []uint32 {
	ix := log.snap.Load()
	out := slices.Clone(oids)
	for _, oid := range oids {
		if h, ok := ix.oidHead(oid); ok && h.kind == EntryPresent && h.desc.ToastOid != 0 {
			out = append(out, h.desc.ToastOid)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Capture diffs the descriptors fetched at a boundary (the shadow parked at
// NextLSN) against each relation's latest entry in the log and returns the
// batch to Append and the events it yields. It does no I/O and does not
// change the log; the caller appends the batch before the next capture.
//
//   - no predecessor, or a Dropped one: Present + Added
//   - a different shape: Present (+ Changed when the attribute diff is not
//     empty); an unchanged shape records nothing
//   - a new filenode: Retired on the old rfn, Present on the new one
//   - a covered Present relation missing from fetched: Dropped + Dropped event
//
// ValidFrom is biased early: the new filenode's SMGR_CREATE, else the oid's
// first pg_class touch, else the tree's first catalog touch, never after
// NextLSN nor before the predecessor's own validity. A physical in-place
// change (CompatibleReader) lands at NextLSN instead and fences
// [first touch, NextLSN) with Ambiguity intervals on the rfn and the oid.
// Toast relations record entries but only Dropped events; other relkinds
// (indexes, sequences, views) are ignored.
func Capture(log *Log, b BoundaryInput, fetched []Descriptor) (*Batch, []Event, error) {
	ix := log.snap.Load()
	if err := checkBoundary(ix, b); err != nil {
		return nil, nil, err
	}
	descs, err := captured(ix, b, fetched)
	if err != nil {
		return nil, nil, err
	}
	var (
		retired, dropped, present []Entry
		ambiguities               []Ambiguity
	)
	for _, d := range descs {
		pred, hasPred := ix.oidHead(d.Oid)
		predPresent := hasPred && pred.kind == EntryPresent
		if predPresent && pred.desc.Equal(d) {
			continue
		}
		rotated := predPresent && pred.desc.Rfn != d.Rfn
		var (
			vf  wal.LSN
			src ValidFromSource
		)
		if predPresent && !rotated && CompatibleReader(pred.desc, d).Class == Physical {
			vf, src = b.NextLSN, SourceBoundary
			ambiguities = append(ambiguities, fence(ix.db, b, d, pred)...)
		} else {
			vf, src = biasEarly(b, d, !predPresent || rotated)
		}
		// Never earlier than what either chain already holds.
		low := wal.LSN(0)
		if hasPred {
			low = pred.validFrom
		}
		if hasStorage(d.Rfn) {
			if h, ok := ix.rfnHead(d.Rfn); ok {
				low = max(low, h.validFrom)
			}
		}
		if vf < low {
			vf, src = low, SourcePredecessor
		}
		if rotated && hasStorage(pred.desc.Rfn) {
			retired = append(retired, retire(ix, b, pred.desc, vf, src))
		}
		present = append(present, Entry{Kind: EntryPresent, Source: src, Oid: d.Oid, Rfn: d.Rfn, ValidFrom: vf, Desc: cloneDescriptor(d)})
	}
	for _, oid := range coveredOids(ix, b) {
		if _, found := slices.BinarySearchFunc(descs, oid, func(d *Descriptor, o uint32) int { return cmpUint32(d.Oid, o) }); found {
			continue
		}
		if h, ok := ix.oidHead(oid); ok && h.kind == EntryPresent {
			dropped = append(dropped, Entry{Kind: EntryDropped, Source: SourceBoundary, Oid: oid, Rfn: h.desc.Rfn, ValidFrom: b.NextLSN})
		}
	}
	// A tombstone or retirement in this batch on the rfn a new shape takes
	// (a filenode number reused) orders before it: the Present lands no
	// earlier.
	tombstones := slices.Concat(retired, dropped)
	for i := range present {
		p := &present[i]
		for _, t := range tombstones {
			if hasStorage(p.Rfn) && t.Rfn == p.Rfn && p.ValidFrom < t.ValidFrom {
				p.ValidFrom, p.Source = t.ValidFrom, SourcePredecessor
			}
		}
	}
	batch := &Batch{CapturedAt: b.NextLSN, DrainXID: b.DrainXID}
	batch.Entries = slices.Concat(retired, dropped, present)
	if len(batch.Entries) == 0 {
		batch.Entries = nil
	}
	batch.Ambiguities = ambiguities
	return batch, ix.eventsFor(batch), nil
}

func checkBoundary(ix *index, b BoundaryInput) error {
	switch {
	case !ix.seeded:
		return fmt.Errorf("capture at %s: the descriptor log is not seeded", b.NextLSN)
	case b.NextLSN <= ix.horizon():
		return fmt.Errorf("capture at %s: at or below the log's horizon %s (baked into the checkpoint)", b.NextLSN, ix.horizon())
	case b.NextLSN <= ix.lastCapturedAt():
		return fmt.Errorf("capture at %s: the log already holds a batch at %s (replay it instead)", b.NextLSN, ix.lastCapturedAt())
	case b.FirstCatalogTouch > b.NextLSN:
		return fmt.Errorf("capture at %s: first catalog touch %s is after the boundary", b.NextLSN, b.FirstCatalogTouch)
	}
	return nil
}

// captured validates the fetched descriptors and keeps those the log
// records, in oid order.
func captured(ix *index, b BoundaryInput, fetched []Descriptor) ([]*Descriptor, error) {
	var descs []*Descriptor
	for i := range fetched {
		d := &fetched[i]
		if d.Oid < firstNormalObjectID || !capturedKind(d.Kind) {
			continue
		}
		if err := validateDescriptor(d, ix.db); err != nil {
			return nil, fmt.Errorf("capture at %s: %w", b.NextLSN, err)
		}
		descs = append(descs, d)
	}
	slices.SortFunc(descs, func(x, y *Descriptor) int { return cmpUint32(x.Oid, y.Oid) })
	rfns := make(map[wal.RelFileNode]uint32, len(descs))
	for i, d := range descs {
		if i > 0 && descs[i-1].Oid == d.Oid {
			return nil, fmt.Errorf("capture at %s: relation %d fetched twice", b.NextLSN, d.Oid)
		}
		if !hasStorage(d.Rfn) {
			continue
		}
		if other, dup := rfns[d.Rfn]; dup {
			return nil, fmt.Errorf("capture at %s: relations %d and %d both stored in %s", b.NextLSN, other, d.Oid, d.Rfn)
		}
		rfns[d.Rfn] = d.Oid
	}
	return descs, nil
}

// coveredOids are the relations the fetch was asked about, in oid order.
func coveredOids(ix *index, b BoundaryInput) []uint32 {
	if b.CaptureAll {
		return ix.presentOids()
	}
	out := slices.Clone(b.AffectedOids)
	slices.Sort(out)
	return slices.Compact(out)
}

// biasEarly picks the earliest position at which d provably reads the
// relation's rows. The SMGR_CREATE marker counts only for a filenode new in
// this capture: a marker of the predecessor's own filenode predates it.
func biasEarly(b BoundaryInput, d *Descriptor, newFilenode bool) (wal.LSN, ValidFromSource) {
	if newFilenode && hasStorage(d.Rfn) && b.SmgrCreates != nil {
		if lsn, ok := b.SmgrCreates(d.Rfn); ok && lsn <= b.NextLSN {
			return lsn, SourceSmgrCreate
		}
	}
	if b.PgClassTouch != nil {
		if lsn, ok := b.PgClassTouch(d.Oid); ok && lsn <= b.NextLSN {
			return lsn, SourcePgClassTouch
		}
	}
	if b.FirstCatalogTouch != 0 {
		return b.FirstCatalogTouch, SourceFirstCatalogTouch
	}
	return b.NextLSN, SourceBoundary
}

// fence is the Ambiguity of a physical in-place change: from the tree's
// first catalog touch (else the oid's pg_class touch, else the
// predecessor's capture, where its shape was last exact) to NextLSN, on the
// rfn then the oid.
func fence(db uint32, b BoundaryInput, d *Descriptor, pred chainEntry) []Ambiguity {
	from := pred.capturedAt
	if b.FirstCatalogTouch != 0 {
		from = b.FirstCatalogTouch
	} else if b.PgClassTouch != nil {
		if lsn, ok := b.PgClassTouch(d.Oid); ok {
			from = lsn
		}
	}
	if from >= b.NextLSN {
		from = pred.capturedAt
	}
	var out []Ambiguity
	if hasStorage(d.Rfn) {
		out = append(out, Ambiguity{Scope: ScopeRfn, Reason: ReasonUnknownMutationPosition, Rfn: d.Rfn, DbOid: db, From: from, Through: b.NextLSN})
	}
	return append(out, Ambiguity{Scope: ScopeOid, Reason: ReasonUnknownMutationPosition, DbOid: db, Oid: d.Oid, From: from, Through: b.NextLSN})
}

// retire closes the old filenode's chain. With the new filenode's
// SMGR_CREATE known, the rotation point is proven and the old rfn retires
// there (no rows land on it after); otherwise at NextLSN, so that rows the
// transaction wrote before an unproven rotation still decode.
func retire(ix *index, b BoundaryInput, old *Descriptor, newFrom wal.LSN, newSrc ValidFromSource) Entry {
	vf, src := b.NextLSN, SourceBoundary
	if newSrc == SourceSmgrCreate {
		vf, src = newFrom, SourceSmgrCreate
	}
	if h, ok := ix.rfnHead(old.Rfn); ok && vf < h.validFrom {
		vf, src = h.validFrom, SourcePredecessor
	}
	return Entry{Kind: EntryRetired, Source: src, Oid: old.Oid, Rfn: old.Rfn, ValidFrom: vf}
}

// eventsFor derives a batch's events from its entries and, for each oid,
// the log's last entry recorded before the batch (or the batch's own
// earlier entry for that oid). A fresh capture and every replay of the
// stored batch therefore produce the same events.
func (ix *index) eventsFor(b *Batch) []Event {
	var (
		events []Event
		local  map[uint32]chainEntry
	)
	for i := range b.Entries {
		e := &b.Entries[i]
		if e.Kind == EntryRetired {
			continue
		}
		pred, ok := local[e.Oid]
		if !ok {
			c, _ := ix.byOid.get(oidHash(e.Oid), e.Oid)
			pred, ok = c.before(b.CapturedAt)
		}
		predPresent := ok && pred.kind == EntryPresent
		if local == nil {
			local = make(map[uint32]chainEntry)
		}
		ev := Event{Oid: e.Oid, DrainXID: b.DrainXID, ValidFrom: e.ValidFrom, CapturedAt: b.CapturedAt}
		switch e.Kind {
		case EntryPresent:
			local[e.Oid] = chainEntry{kind: EntryPresent, desc: e.Desc, validFrom: e.ValidFrom}
			if e.Desc.Kind == 't' {
				continue
			}
			ev.Desc = e.Desc
			if !predPresent {
				ev.Kind = EventAdded
			} else if diff := Diff(pred.desc, e.Desc); !diff.Empty() {
				ev.Kind, ev.Prev, ev.Diff = EventChanged, pred.desc, diff
			} else {
				continue
			}
		case EntryDropped:
			local[e.Oid] = chainEntry{kind: EntryDropped, validFrom: e.ValidFrom}
			if !predPresent {
				continue
			}
			ev.Kind, ev.Desc = EventDropped, pred.desc
		}
		events = append(events, ev)
	}
	// By where each takes effect, except that the drop of a relation with
	// no other event here comes first: seen from outside the transaction
	// every event takes effect at its commit, and a drop takes effect
	// there by its ValidFrom too, after the creation of a relation that
	// may take the dropped one's name (DROP TABLE t; CREATE TABLE t ...).
	perOid := make(map[uint32]int, len(events))
	for _, ev := range events {
		perOid[ev.Oid]++
	}
	loneDrop := func(ev Event) bool { return ev.Kind == EventDropped && perOid[ev.Oid] == 1 }
	slices.SortStableFunc(events, func(x, y Event) int {
		switch dx, dy := loneDrop(x), loneDrop(y); {
		case dx && !dy:
			return -1
		case dy && !dx:
			return 1
		case x.ValidFrom < y.ValidFrom:
			return -1
		case x.ValidFrom > y.ValidFrom:
			return 1
		}
		return 0
	})
	return events
}
