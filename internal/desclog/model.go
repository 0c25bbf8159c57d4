package desclog

import (
	"fmt"

	"github.com/walshadow/walshadow/internal/wal"
)

// EntryKind is what a log entry says about its key from ValidFrom on.
type EntryKind uint8

const (
	// EntryPresent: the relation has Desc's shape.
	EntryPresent EntryKind = 1
	// EntryRetired: the filenode rotated away (rewrite, TRUNCATE, SET
	// TABLESPACE); only the rfn chain carries it.
	EntryRetired EntryKind = 2
	// EntryDropped: the relation is gone (tombstone on its oid and last rfn).
	EntryDropped EntryKind = 3
)

func (k EntryKind) String() string {
	switch k {
	case EntryPresent:
		return "present"
	case EntryRetired:
		return "retired"
	case EntryDropped:
		return "dropped"
	}
	return fmt.Sprintf("entry-kind(%d)", uint8(k))
}

// ValidFromSource says where an entry's ValidFrom came from, in the
// preference order of the bias-early rule.
type ValidFromSource uint8

const (
	// SourceSmgrCreate: the new filenode's XLOG_SMGR_CREATE (before any of
	// its pages was written; proves the rotation point).
	SourceSmgrCreate ValidFromSource = 1
	// SourcePgClassTouch: the oid's first pg_class write in the transaction.
	SourcePgClassTouch ValidFromSource = 2
	// SourceFirstCatalogTouch: the transaction tree's first catalog write.
	SourceFirstCatalogTouch ValidFromSource = 3
	// SourceBoundary: the boundary's next_lsn itself (tombstones, physical
	// in-place changes, and entries with no earlier proof).
	SourceBoundary ValidFromSource = 4
	// SourceSeed: the seed batch, valid from the aligned start.
	SourceSeed ValidFromSource = 5
	// SourcePredecessor: clamped up to the predecessor's own validity.
	SourcePredecessor ValidFromSource = 6
)

func (s ValidFromSource) String() string {
	switch s {
	case SourceSmgrCreate:
		return "smgr_create"
	case SourcePgClassTouch:
		return "pg_class_touch"
	case SourceFirstCatalogTouch:
		return "first_catalog_touch"
	case SourceBoundary:
		return "boundary"
	case SourceSeed:
		return "seed"
	case SourcePredecessor:
		return "predecessor"
	}
	return fmt.Sprintf("source(%d)", uint8(s))
}

// Entry is one version-chain element. A Present entry keys its
// descriptor's rfn and oid chains (Oid and Rfn repeat Desc's); Retired keys
// the old rfn only; Dropped keys the oid and its last rfn. Relations
// without storage (partitioned tables: relfilenode 0) have no rfn chain.
type Entry struct {
	Kind      EntryKind
	Source    ValidFromSource
	Oid       uint32
	Rfn       wal.RelFileNode
	ValidFrom wal.LSN
	Desc      *Descriptor // EntryPresent only
}

// Scope is what an ambiguity interval fences.
type Scope uint8

const (
	ScopeRfn      Scope = 1 // one filenode
	ScopeOid      Scope = 2 // one relation (the oid-keyed truncate path)
	ScopeDatabase Scope = 3 // every relation: the fallback for unenumerable ones
)

func (s Scope) String() string {
	switch s {
	case ScopeRfn:
		return "rfn"
	case ScopeOid:
		return "oid"
	case ScopeDatabase:
		return "database"
	}
	return fmt.Sprintf("scope(%d)", uint8(s))
}

// AmbiguityReason says why no descriptor is proven inside an interval.
type AmbiguityReason uint8

// ReasonUnknownMutationPosition: a physical in-place change happened
// somewhere after the transaction's first catalog touch; only that touch is
// tracked, so the mutation's exact position inside the interval is unknown.
const ReasonUnknownMutationPosition AmbiguityReason = 1

func (r AmbiguityReason) String() string {
	if r == ReasonUnknownMutationPosition {
		return "unknown_mutation_position"
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// Ambiguity is an interval [From, Through) in which no single descriptor
// provably decodes the scoped rows. Rfn is set for ScopeRfn, Oid for
// ScopeOid, DbOid always.
type Ambiguity struct {
	Scope         Scope
	Reason        AmbiguityReason
	Rfn           wal.RelFileNode
	DbOid         uint32
	Oid           uint32
	From, Through wal.LSN
}

// Contains reports whether lsn lies inside the interval.
func (a Ambiguity) Contains(lsn wal.LSN) bool { return a.From <= lsn && lsn < a.Through }

// Intersects reports whether [from, to) overlaps the interval.
func (a Ambiguity) Intersects(from, to wal.LSN) bool { return a.From < to && from < a.Through }

func (a Ambiguity) String() string {
	var key string
	switch a.Scope {
	case ScopeRfn:
		key = "rfn " + a.Rfn.String()
	case ScopeOid:
		key = fmt.Sprintf("oid %d", a.Oid)
	default:
		key = fmt.Sprintf("database %d", a.DbOid)
	}
	return fmt.Sprintf("%s ambiguous over [%s, %s): %s", key, a.From, a.Through, a.Reason)
}

// Batch is everything one catalog boundary captured. Batches are immutable
// once appended; the log hands out shared pointers.
type Batch struct {
	CapturedAt  wal.LSN // the boundary's next_lsn
	DrainXID    uint32  // the boundary's drain xid (0 for the seed)
	Entries     []Entry
	Ambiguities []Ambiguity
}

// IsStub reports whether the boundary changed nothing.
func (b *Batch) IsStub() bool { return len(b.Entries) == 0 && len(b.Ambiguities) == 0 }

// Result is a lookup's answer.
type Result uint8

const (
	// NotCovered: the log has nothing for the key at that LSN (before its
	// first entry, or at or below the seed horizon for a relation that died
	// before the seed).
	NotCovered Result = iota
	Present
	// Ambiguous: the LSN lies inside an ambiguity interval; see Interval.
	Ambiguous
	Dropped
	Retired
	// ForeignDb: the key names another database than the log's.
	ForeignDb
	numResults
)

func (r Result) String() string {
	switch r {
	case NotCovered:
		return "not_covered"
	case Present:
		return "present"
	case Ambiguous:
		return "ambiguous"
	case Dropped:
		return "dropped"
	case Retired:
		return "retired"
	case ForeignDb:
		return "foreign_db"
	}
	return fmt.Sprintf("result(%d)", uint8(r))
}

// Lookup is the answer to "what was this relation's shape at LSN L?".
// Desc and ValidFrom come from one index snapshot, so they always belong to
// the same entry.
type Lookup struct {
	Result Result
	// Desc is the shape for Present (shared, do not modify).
	Desc *Descriptor
	// ValidFrom is the matched entry's ValidFrom (Present, Dropped, Retired).
	ValidFrom wal.LSN
	// Interval is the fencing interval for Ambiguous.
	Interval Ambiguity
}

// EventKind classifies a schema event.
type EventKind uint8

const (
	EventAdded   EventKind = 1
	EventChanged EventKind = 2
	EventDropped EventKind = 3
)

func (k EventKind) String() string {
	switch k {
	case EventAdded:
		return "added"
	case EventChanged:
		return "changed"
	case EventDropped:
		return "dropped"
	}
	return fmt.Sprintf("event(%d)", uint8(k))
}

// Event is a schema event a boundary produced, keyed (DrainXID, ValidFrom)
// for the transaction buffer. Events are derived from a batch's entries and
// the log's history before it, so a replayed batch yields the same events.
// Desc and Prev are the log's own descriptors: shared, do not modify.
type Event struct {
	Kind       EventKind
	Oid        uint32
	DrainXID   uint32
	ValidFrom  wal.LSN
	CapturedAt wal.LSN
	// Desc: the new shape (Added, Changed) or the last shape (Dropped; nil
	// when the log never held it).
	Desc *Descriptor
	// Prev and Diff: the predecessor and what changed (Changed only).
	Prev *Descriptor
	Diff SchemaDiff
}

// SchemaDiff is the attribute-based difference between two shapes of one
// relation. Columns are matched by attnum, so a rename keeps its attnum.
type SchemaDiff struct {
	Added   []Column // live now, not live before
	Dropped []Column // live before (as it was), dropped or gone now
	Renamed []ColumnRename
	Retyped []ColumnRetype
	// Key: the replica identity changed (its kind or its key columns), e.g.
	// a primary key added to a table created without one.
	Key bool
	// Moved: the relation's schema or name changed (ALTER TABLE … RENAME
	// TO, SET SCHEMA). Its rows keep their oid; a consumer that selects
	// relations by name may start or stop following it here.
	Moved bool
	// Persistence: LOGGED ↔ UNLOGGED (an UNLOGGED table's changes are not
	// in the WAL).
	Persistence bool
}

// ColumnRename is a live column whose name changed.
type ColumnRename struct {
	Num              int16
	OldName, NewName string
}

// ColumnRetype is a live column whose type or typmod changed.
type ColumnRetype struct {
	Num      int16
	Old, New Column
}

// Empty reports whether nothing changed: no column, no replica identity,
// no name, no persistence.
func (d SchemaDiff) Empty() bool {
	return len(d.Added) == 0 && len(d.Dropped) == 0 && len(d.Renamed) == 0 && len(d.Retyped) == 0 && !d.Key && !d.Moved && !d.Persistence
}

// Identity binds a log to one source database; a log written for another is
// refused at open.
type Identity struct {
	PGMajor     uint32
	SystemID    uint64
	Timeline    uint32
	DbOid       uint32
	SegmentSize uint32
}

// hasStorage reports whether an rfn names real storage: relations without
// storage (partitioned tables) have relfilenode 0 and no rfn chain.
func hasStorage(rfn wal.RelFileNode) bool { return rfn.RelNum != 0 }
