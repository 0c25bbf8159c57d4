package desclog

import (
	"fmt"
	"slices"

	"github.com/walshadow/walshadow/internal/wal"
)

// The index is an immutable snapshot: lookups read it without locks while
// the single writer builds the next one. Keys live in 256 shards so a
// batch copies only the shards it touches, and chains are append-only
// slices: the writer appends past the published length, which no reader of
// an older snapshot ever looks at.

const numShards = 256

type shardMap[K comparable, V any] struct {
	shards [numShards]map[K]V
}

func (m *shardMap[K, V]) get(h uint32, k K) (V, bool) {
	v, ok := m.shards[h%numShards][k]
	return v, ok
}

// set writes into shard h%numShards, copying it first unless this build
// already owns it.
func (m *shardMap[K, V]) set(h uint32, k K, v V, owned *[numShards]bool) {
	s := h % numShards
	if !owned[s] {
		old := m.shards[s]
		cp := make(map[K]V, len(old)+1)
		for kk, vv := range old {
			cp[kk] = vv
		}
		m.shards[s] = cp
		owned[s] = true
	}
	m.shards[s][k] = v
}

func (m *shardMap[K, V]) each(f func(K, V)) {
	for _, s := range m.shards {
		for k, v := range s {
			f(k, v)
		}
	}
}

// Fibonacci hashing: the top byte of the product picks the shard.
func rfnHash(r wal.RelFileNode) uint32 { return ((r.RelNum ^ r.SpcOid*0x85ebca6b) * 0x9e3779b1) >> 24 }

func oidHash(oid uint32) uint32 { return (oid * 0x9e3779b1) >> 24 }

// chain is one key's version chain in append (batch) order, in which both
// validFrom and capturedAt never decrease. The validFrom column is kept
// apart so the lookup's binary search touches a few cache lines, not the
// whole chain.
type chain struct {
	validFrom []wal.LSN
	entries   []chainEntry
	// last repeats the newest entry inside the map slot: live decoding asks
	// about it almost always, and then touches no other memory.
	last chainEntry
}

func (c chain) push(ce chainEntry) chain {
	return chain{validFrom: append(c.validFrom, ce.validFrom), entries: append(c.entries, ce), last: ce}
}

func (c chain) head() (chainEntry, bool) { return c.last, len(c.entries) > 0 }

// chainEntry is an Entry as one chain sees it.
type chainEntry struct {
	validFrom  wal.LSN
	capturedAt wal.LSN
	desc       *Descriptor // Present only
	kind       EntryKind
	source     ValidFromSource
}

type index struct {
	db             uint32
	coveredThrough wal.LSN // the seed's horizon
	floor          wal.LSN // the GC floor the checkpoint was written at
	seeded         bool

	byRfn  shardMap[wal.RelFileNode, chain]
	byOid  shardMap[uint32, chain]
	ambRfn shardMap[wal.RelFileNode, []Ambiguity]
	ambOid shardMap[uint32, []Ambiguity]
	ambDb  []Ambiguity

	batches []*Batch // CapturedAt strictly increasing
	// through is the CapturedAt of the newest batch ever appended (compaction
	// may have dropped it as empty); new batches must follow it.
	through wal.LSN
	entries int
	// superseded counts chain entries a later entry (or a tombstone) made
	// droppable once the floor passes: the ShouldCompact hint, counted
	// from supersededAtCkpt, its value over the checkpoint's batches.
	superseded       int
	supersededAtCkpt int
}

func newIndex(db uint32) *index { return &index{db: db} }

// horizon is the LSN at or below which boundaries are baked into the
// checkpoint (seed or compaction).
func (ix *index) horizon() wal.LSN { return max(ix.coveredThrough, ix.floor) }

func (ix *index) lastCapturedAt() wal.LSN { return ix.through }

// builder derives the next snapshot from a published one.
type builder struct {
	ix                                   *index
	ownRfn, ownOid, ownAmbRfn, ownAmbOid [numShards]bool
}

func (ix *index) builder() *builder {
	cp := *ix
	return &builder{ix: &cp}
}

// apply adds a batch, checking every invariant lookups rely on; an error
// leaves the builder unusable (the published snapshot is untouched).
func (bd *builder) apply(b *Batch) error {
	ix := bd.ix
	if b.CapturedAt <= ix.through {
		return fmt.Errorf("batch at %s does not follow the last batch at %s", b.CapturedAt, ix.through)
	}
	for i := range b.Entries {
		if err := bd.applyEntry(b, &b.Entries[i]); err != nil {
			return fmt.Errorf("batch at %s entry %d: %w", b.CapturedAt, i, err)
		}
	}
	for i := range b.Ambiguities {
		if err := bd.applyAmbiguity(&b.Ambiguities[i]); err != nil {
			return fmt.Errorf("batch at %s ambiguity %d: %w", b.CapturedAt, i, err)
		}
	}
	ix.batches = append(ix.batches, b)
	ix.through = b.CapturedAt
	return nil
}

func (bd *builder) applyEntry(b *Batch, e *Entry) error {
	ix := bd.ix
	if e.ValidFrom > b.CapturedAt {
		return fmt.Errorf("%s entry for relation %d valid from %s, after its capture", e.Kind, e.Oid, e.ValidFrom)
	}
	ce := chainEntry{validFrom: e.ValidFrom, capturedAt: b.CapturedAt, kind: e.Kind, source: e.Source}
	keyOid, keyRfn := false, false
	switch e.Kind {
	case EntryPresent:
		if e.Desc == nil {
			return fmt.Errorf("present entry for relation %d without a descriptor", e.Oid)
		}
		if e.Desc.Oid != e.Oid || e.Desc.Rfn != e.Rfn {
			return fmt.Errorf("present entry keys %d/%s but its descriptor is %d/%s", e.Oid, e.Rfn, e.Desc.Oid, e.Desc.Rfn)
		}
		if err := validateDescriptor(e.Desc, ix.db); err != nil {
			return err
		}
		ce.desc = e.Desc
		keyOid, keyRfn = true, hasStorage(e.Rfn)
	case EntryDropped:
		keyOid, keyRfn = true, hasStorage(e.Rfn)
	case EntryRetired:
		if !hasStorage(e.Rfn) {
			return fmt.Errorf("retired entry for relation %d names no filenode", e.Oid)
		}
		keyRfn = true
	default:
		return fmt.Errorf("unknown entry kind %d", e.Kind)
	}
	if keyOid {
		h := oidHash(e.Oid)
		c, _ := ix.byOid.get(h, e.Oid)
		if head, ok := c.head(); ok && ce.validFrom < head.validFrom {
			return orderError(fmt.Sprintf("oid %d", e.Oid), ce, head)
		}
		ix.byOid.set(h, e.Oid, c.push(ce), &bd.ownOid)
		ix.count(c, ce)
	}
	if keyRfn {
		h := rfnHash(e.Rfn)
		c, _ := ix.byRfn.get(h, e.Rfn)
		if head, ok := c.head(); ok && ce.validFrom < head.validFrom {
			return orderError("rfn "+e.Rfn.String(), ce, head)
		}
		ix.byRfn.set(h, e.Rfn, c.push(ce), &bd.ownRfn)
		if !keyOid {
			ix.count(c, ce)
		}
	}
	ix.entries++
	return nil
}

func (ix *index) count(c chain, ce chainEntry) {
	if len(c.entries) > 0 {
		ix.superseded++
	}
	if ce.kind != EntryPresent {
		ix.superseded++
	}
}

func orderError(key string, ce, head chainEntry) error {
	return fmt.Errorf("%s: %s entry valid from %s precedes the chain head's %s", key, ce.kind, ce.validFrom, head.validFrom)
}

func (bd *builder) applyAmbiguity(a *Ambiguity) error {
	ix := bd.ix
	if a.From >= a.Through {
		return fmt.Errorf("empty interval [%s, %s)", a.From, a.Through)
	}
	if a.Reason != ReasonUnknownMutationPosition {
		return fmt.Errorf("unknown ambiguity reason %d", a.Reason)
	}
	if a.DbOid != ix.db {
		return fmt.Errorf("%s: database %d, the log's is %d", a, a.DbOid, ix.db)
	}
	switch a.Scope {
	case ScopeRfn:
		if !hasStorage(a.Rfn) || a.Rfn.DbOid != ix.db {
			return fmt.Errorf("%s: bad filenode", a)
		}
		h := rfnHash(a.Rfn)
		list, _ := ix.ambRfn.get(h, a.Rfn)
		ix.ambRfn.set(h, a.Rfn, append(list, *a), &bd.ownAmbRfn)
	case ScopeOid:
		h := oidHash(a.Oid)
		list, _ := ix.ambOid.get(h, a.Oid)
		ix.ambOid.set(h, a.Oid, append(list, *a), &bd.ownAmbOid)
	case ScopeDatabase:
		ix.ambDb = append(ix.ambDb, *a)
	default:
		return fmt.Errorf("unknown ambiguity scope %d", a.Scope)
	}
	return nil
}

// buildIndex builds a snapshot from scratch (load, seed, compaction): the
// checkpoint's batches, then the tail's.
func buildIndex(db uint32, m meta, seeded bool, ckpt, tail []*Batch) (*index, error) {
	bd := newIndex(db).builder()
	bd.ix.coveredThrough, bd.ix.floor, bd.ix.seeded = m.CoveredThrough, m.Floor, seeded
	for _, b := range ckpt {
		if err := bd.apply(b); err != nil {
			return nil, err
		}
	}
	bd.ix.through = max(bd.ix.through, m.Through)
	bd.ix.supersededAtCkpt = bd.ix.superseded
	for _, b := range tail {
		if err := bd.apply(b); err != nil {
			return nil, err
		}
	}
	return bd.ix, nil
}

// at returns the chain entry in force at lsn: the last one whose validFrom
// is at or below it (the latest appended among equals).
func (c chain) at(lsn wal.LSN) (chainEntry, bool) {
	if len(c.entries) > 0 && c.last.validFrom <= lsn {
		return c.last, true
	}
	vf := c.validFrom
	lo, hi := 0, len(vf)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if vf[m] <= lsn {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 {
		return chainEntry{}, false
	}
	return c.entries[lo-1], true
}

// before returns the last chain entry recorded by a batch captured before
// capturedAt: the key's state as the log knew it just ahead of that batch.
func (c chain) before(capturedAt wal.LSN) (chainEntry, bool) {
	e := c.entries
	lo, hi := 0, len(e)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if e[m].capturedAt < capturedAt {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 {
		return chainEntry{}, false
	}
	return e[lo-1], true
}

// presentBefore is the last Present entry whose validFrom is below lsn.
func (c chain) presentBefore(lsn wal.LSN) (chainEntry, bool) {
	for i := len(c.entries) - 1; i >= 0; i-- {
		if e := c.entries[i]; e.validFrom < lsn && e.kind == EntryPresent {
			return e, true
		}
	}
	return chainEntry{}, false
}

func lookupOf(ce chainEntry, ok bool) Lookup {
	if !ok {
		return Lookup{Result: NotCovered}
	}
	switch ce.kind {
	case EntryPresent:
		return Lookup{Result: Present, Desc: ce.desc, ValidFrom: ce.validFrom}
	case EntryDropped:
		return Lookup{Result: Dropped, ValidFrom: ce.validFrom}
	default:
		return Lookup{Result: Retired, ValidFrom: ce.validFrom}
	}
}

// allCaptures is the horizon of a lookup that sees every capture.
const allCaptures = ^wal.LSN(0)

// asOf is the chain as the log stood once every batch captured at or
// before horizon was applied: a prefix, since capturedAt never decreases.
func (c chain) asOf(horizon wal.LSN) chain {
	if horizon == allCaptures || len(c.entries) == 0 || c.last.capturedAt <= horizon {
		return c
	}
	n, _ := slices.BinarySearchFunc(c.entries, horizon+1, func(e chainEntry, l wal.LSN) int {
		if e.capturedAt < l {
			return -1
		}
		return 1
	})
	if n == 0 {
		return chain{}
	}
	return chain{validFrom: c.validFrom[:n], entries: c.entries[:n], last: c.entries[n-1]}
}

// containingAsOf is containing among the intervals captured at or before
// horizon (an interval is captured at its Through).
func containingAsOf(list []Ambiguity, lsn, horizon wal.LSN) (Ambiguity, bool) {
	for i := range list {
		if list[i].Through <= horizon && list[i].Contains(lsn) {
			return list[i], true
		}
	}
	return Ambiguity{}, false
}

func (ix *index) descriptorAt(rfn wal.RelFileNode, lsn, horizon wal.LSN) Lookup {
	if rfn.DbOid != ix.db && rfn.DbOid != 0 {
		return Lookup{Result: ForeignDb}
	}
	h := rfnHash(rfn)
	if list, ok := ix.ambRfn.get(h, rfn); ok {
		if a, ok := containingAsOf(list, lsn, horizon); ok {
			return Lookup{Result: Ambiguous, Interval: a}
		}
	}
	if rfn.DbOid != 0 {
		if a, ok := containingAsOf(ix.ambDb, lsn, horizon); ok {
			return Lookup{Result: Ambiguous, Interval: a}
		}
	}
	c, _ := ix.byRfn.get(h, rfn)
	return lookupOf(c.asOf(horizon).at(lsn))
}

func (ix *index) descriptorByOidAt(oid uint32, lsn, horizon wal.LSN) Lookup {
	h := oidHash(oid)
	if list, ok := ix.ambOid.get(h, oid); ok {
		if a, ok := containingAsOf(list, lsn, horizon); ok {
			return Lookup{Result: Ambiguous, Interval: a}
		}
	}
	if a, ok := containingAsOf(ix.ambDb, lsn, horizon); ok {
		return Lookup{Result: Ambiguous, Interval: a}
	}
	c, _ := ix.byOid.get(h, oid)
	return lookupOf(c.asOf(horizon).at(lsn))
}

func (ix *index) ambiguitiesIntersecting(rfn wal.RelFileNode, oid uint32, from, to, horizon wal.LSN) []Ambiguity {
	var out []Ambiguity
	pick := func(list []Ambiguity) {
		for _, a := range list {
			if a.Through <= horizon && a.Intersects(from, to) {
				out = append(out, a)
			}
		}
	}
	if hasStorage(rfn) {
		list, _ := ix.ambRfn.get(rfnHash(rfn), rfn)
		pick(list)
	}
	if oid != 0 {
		list, _ := ix.ambOid.get(oidHash(oid), oid)
		pick(list)
	}
	pick(ix.ambDb)
	return out
}

func (ix *index) batchAt(capturedAt wal.LSN) (*Batch, bool) {
	i, ok := slices.BinarySearchFunc(ix.batches, capturedAt, func(b *Batch, l wal.LSN) int {
		switch {
		case b.CapturedAt < l:
			return -1
		case b.CapturedAt > l:
			return 1
		}
		return 0
	})
	if !ok {
		return nil, false
	}
	return ix.batches[i], true
}

// oidHead is the oid chain's latest entry.
func (ix *index) oidHead(oid uint32) (chainEntry, bool) {
	c, _ := ix.byOid.get(oidHash(oid), oid)
	return c.head()
}

func (ix *index) rfnHead(rfn wal.RelFileNode) (chainEntry, bool) {
	c, _ := ix.byRfn.get(rfnHash(rfn), rfn)
	return c.head()
}

// presentOids lists, in oid order, the relations whose latest entry is
// Present.
func (ix *index) presentOids() []uint32 {
	var out []uint32
	ix.byOid.each(func(oid uint32, c chain) {
		if h, ok := c.head(); ok && h.kind == EntryPresent {
			out = append(out, oid)
		}
	})
	slices.Sort(out)
	return out
}
