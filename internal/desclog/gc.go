package desclog

import (
	"fmt"

	"github.com/walshadow/walshadow/internal/wal"
)

// Compaction hints: ShouldCompact turns true past either.
const (
	CompactMinDroppable = 512
	CompactTailBytes    = 8 << 20
)

// ShouldCompact hints that Compact would pay off: enough entries were
// superseded (or tombstoned) since the checkpoint, or the tail grew large.
func (l *Log) ShouldCompact() bool {
	ix := l.snap.Load()
	return ix.superseded-ix.supersededAtCkpt >= CompactMinDroppable || l.stats.tailBytes.Load() >= CompactTailBytes
}

// Compact drops history no reader can need any more against a persisted
// resume floor (a WAL re-read never starts below it) and rewrites the
// checkpoint with everything, resetting the tail. Per key, of the entries
// captured at or below the floor only the last survives, and only when it
// is Present (a Dropped or Retired there takes its whole chain with it);
// batches above the floor survive whole, stubs included; an interval
// survives while it reaches past the floor. The floor is capped at the last
// batch, so a boundary the log has not seen is never taken as baked in.
// Appends wait while it runs; call it off the hot path.
func (l *Log) Compact(floor wal.LSN) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	cur := l.snap.Load()
	if !cur.seeded {
		return fmt.Errorf("descriptor log: compacting at %s before the log was seeded", floor)
	}
	floor = max(min(floor, cur.lastCapturedAt()), cur.floor)
	batches, dropped := compactBatches(cur.batches, floor)
	m := meta{CoveredThrough: cur.coveredThrough, Floor: floor, Through: cur.lastCapturedAt()}
	ix, err := buildIndex(l.id.DbOid, m, true, batches, nil)
	if err != nil {
		return fmt.Errorf("descriptor log: compacting at %s: %w", floor, err)
	}
	if err := l.writeCheckpoint(m, batches); err != nil {
		return err
	}
	l.publish(ix)
	l.stats.compactions.Add(1)
	l.stats.gcDropped.Add(uint64(dropped))
	return nil
}

// compactBatches applies the retention rule; it returns the surviving
// batches (new ones where something was dropped) and the entries dropped.
func compactBatches(batches []*Batch, floor wal.LSN) ([]*Batch, int) {
	type ref struct{ batch, entry int }
	lastOid := map[uint32]ref{}
	lastRfn := map[wal.RelFileNode]ref{}
	split := len(batches)
	for bi, b := range batches {
		if b.CapturedAt > floor {
			split = bi
			break
		}
		for ei := range b.Entries {
			e := &b.Entries[ei]
			r := ref{bi, ei}
			if e.Kind != EntryRetired {
				lastOid[e.Oid] = r
			}
			if hasStorage(e.Rfn) {
				lastRfn[e.Rfn] = r
			}
		}
	}
	// A Present survives only as the head of every chain it keys: keeping
	// it in one chain would resurrect it in the other.
	survives := func(r ref, e *Entry) bool {
		if e.Kind != EntryPresent || lastOid[e.Oid] != r {
			return false
		}
		return !hasStorage(e.Rfn) || lastRfn[e.Rfn] == r
	}
	var out []*Batch
	dropped := 0
	for bi, b := range batches[:split] {
		nb := &Batch{CapturedAt: b.CapturedAt, DrainXID: b.DrainXID}
		for ei := range b.Entries {
			if survives(ref{bi, ei}, &b.Entries[ei]) {
				nb.Entries = append(nb.Entries, b.Entries[ei])
			} else {
				dropped++
			}
		}
		for _, a := range b.Ambiguities {
			if a.Through > floor {
				nb.Ambiguities = append(nb.Ambiguities, a)
			}
		}
		switch {
		case nb.IsStub():
			// Nothing left: the boundary is baked in below the horizon.
		case len(nb.Entries) == len(b.Entries) && len(nb.Ambiguities) == len(b.Ambiguities):
			out = append(out, b)
		default:
			out = append(out, nb)
		}
	}
	return append(out, batches[split:]...), dropped
}
