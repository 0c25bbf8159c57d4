package decode

import (
	"fmt"
	"strconv"
	"time"
	"unsafe"

	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/wal"
)

// Op is a row change's operation.
type Op uint8

const (
	OpInsert Op = iota + 1
	OpUpdate
	OpDelete
	OpTruncate
	// OpFail: the relation's change at LSN cannot be decoded exactly (no
	// provable shape, a missing or inconsistent TOAST value, a datum that
	// does not decode, a value the bridge cannot render). Err says why; the
	// relation's later changes in the same transaction are dropped, since
	// they would apply to an unknown state. Other relations go on.
	OpFail
)

func (o Op) String() string {
	switch o {
	case OpInsert:
		return "insert"
	case OpUpdate:
		return "update"
	case OpDelete:
		return "delete"
	case OpTruncate:
		return "truncate"
	case OpFail:
		return "fail"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Field is one live column's value in a row change.
type Field struct {
	Col  *desclog.Column
	Null bool
	// Value is the typed value (see Value), valid unless Null, Pending or
	// Omitted. For a row written before the column existed it comes from
	// MissingValue; when that text could not be parsed it is the text.
	Value any
	// Pending: the type is not decoded here; Raw holds the expanded on-disk
	// datum (plain varlena or fixed bytes) for the bridge's DECODE.
	Pending bool
	Raw     []byte
	// Omitted: an unchanged TOASTed value whose chunks are not in the
	// transaction (ToastOmit): the stored value stays.
	Omitted bool
}

// TID is a heap tuple's physical identity (ItemPointerData): its block and
// its line pointer within the block (1-based; 0 is no tuple). Within one
// filenode it names one live tuple at a time.
type TID struct {
	Block uint32
	Off   uint16
}

// Valid reports whether t names a tuple (offset numbers start at 1).
func (t TID) Valid() bool { return t.Off != 0 }

// String is "block:offset".
func (t TID) String() string {
	b := strconv.AppendUint(make([]byte, 0, 16), uint64(t.Block), 10)
	b = append(b, ':')
	return string(strconv.AppendUint(b, uint64(t.Off), 10))
}

// RowChange is one decoded row change. Its memory does not alias the WAL
// record it came from.
type RowChange struct {
	Op  Op
	LSN wal.LSN // the record's LSN
	// Desc is the shape the row was decoded with; DescFrom its ValidFrom.
	Desc     *desclog.Descriptor
	DescFrom wal.LSN
	// Fields are the live columns in attnum order: the new row for insert
	// and update, the old key columns (every live column under REPLICA
	// IDENTITY FULL) for delete, none for truncate and fail, and none for a
	// delete of a table without a usable replica identity (its TID names
	// the deleted tuple).
	Fields []Field

	// TID is the tuple the change leaves live, as the WAL record names it:
	// the inserted tuple (insert, each multi-insert tuple), the new version
	// (update, HOT or not), the deleted tuple (delete; for the delete half
	// of a key-changing update, the old version). Zero for truncate, and for
	// a fail whose record names no single tuple.
	TID TID
	// OldTID is the version an update replaced (zero for other operations).
	OldTID TID
	// Filenode is the relfilenode of the heap the record's block reference
	// names: the relation's storage generation, which TRUNCATE, VACUUM
	// FULL, CLUSTER and rewrites change. Zero for truncate, and for a fail
	// whose record names no heap block.
	Filenode uint32

	// Err says why the relation failed (OpFail only): it names the LSN,
	// the relation and, where one is at fault, the column.
	Err error
}

// Catalog is what decoding needs from the descriptor log (*desclog.Log
// satisfies it).
type Catalog interface {
	DescriptorAt(rfn wal.RelFileNode, lsn wal.LSN) desclog.Lookup
	DescriptorByOidInDBAt(db, oid uint32, lsn wal.LSN) desclog.Lookup
	AmbiguitiesIntersecting(rfn wal.RelFileNode, oid uint32, from, to wal.LSN) []desclog.Ambiguity
}

var _ Catalog = (*desclog.Log)(nil)

// Commit identifies the committed transaction being decoded.
type Commit struct {
	TopXID  uint32
	LSN     wal.LSN // the commit record
	NextLSN wal.LSN // the record after it: commit-time descriptor resolution asks here
	Time    time.Time
	DbOid   uint32
}

// ToastPolicy says what to do with a TOASTed value whose chunks are not in
// the transaction (an unchanged column of an UPDATE).
type ToastPolicy uint8

const (
	// ToastOmit leaves the column out of the row (Field.Omitted).
	ToastOmit ToastPolicy = iota
	// ToastFail fails the transaction.
	ToastFail
)

// DefaultMaxValueBytes bounds one expanded value (PostgreSQL's own limit).
const DefaultMaxValueBytes = 1 << 30

// TxOptions tunes a Tx.
type TxOptions struct {
	ToastPolicy   ToastPolicy
	MaxValueBytes int // 0: DefaultMaxValueBytes
	// Arena, shared by the transactions decoded one after another, holds
	// their rows' memory (nil: each transaction its own). A transaction of
	// a few rows would otherwise allocate whole slabs for them.
	Arena *Arena
}

// Arena is the memory rows are decoded into, in append-only slabs: what
// it handed out stays valid (and immutable) however long it lives. Use one
// from one goroutine at a time.
type Arena struct{ a arena }

// TxStats counts what a Tx did.
type TxStats struct {
	Inserts, Updates, Deletes, Truncates int64
	// KeyChangeDeletes: deletes of an old key emitted before a key-changing update.
	KeyChangeDeletes int64

	SkippedForeignDb  int64 // records of another database
	SkippedNotCovered int64 // relation unknown to the log even at commit
	SkippedRetired    int64 // filenode already rotated away at the record
	SkippedDropped    int64 // relation dropped or rotated away by commit
	SkippedKind       int64 // relations that are neither tables nor TOAST (matviews)

	ToastChunks        int64 // chunks collected
	ToastValues        int64 // external values reassembled
	ToastOmitted       int64 // external values left out (ToastOmit)
	ToastFilledFromOld int64 // external values taken from the logged old tuple
	ToastChunksUnused  int64 // chunks dropped without being referenced

	SpeculativeDropped int64 // speculative inserts killed or never confirmed
	MissingAsText      int64 // attmissingval texts kept as text (see MissingValue)

	Failures            int64 // relations failed (OpFail rows emitted)
	DroppedAfterFailure int64 // changes of a failed relation dropped after its failure
	// NoIdentity counts updates and deletes of tables without a usable
	// replica identity, emitted with their physical row identity only.
	NoIdentity int64
}

// Add sums counters.
func (s *TxStats) Add(o TxStats) {
	s.Inserts += o.Inserts
	s.Updates += o.Updates
	s.Deletes += o.Deletes
	s.Truncates += o.Truncates
	s.KeyChangeDeletes += o.KeyChangeDeletes
	s.SkippedForeignDb += o.SkippedForeignDb
	s.SkippedNotCovered += o.SkippedNotCovered
	s.SkippedRetired += o.SkippedRetired
	s.SkippedDropped += o.SkippedDropped
	s.SkippedKind += o.SkippedKind
	s.ToastChunks += o.ToastChunks
	s.ToastValues += o.ToastValues
	s.ToastOmitted += o.ToastOmitted
	s.ToastFilledFromOld += o.ToastFilledFromOld
	s.ToastChunksUnused += o.ToastChunksUnused
	s.SpeculativeDropped += o.SpeculativeDropped
	s.MissingAsText += o.MissingAsText
	s.Failures += o.Failures
	s.DroppedAfterFailure += o.DroppedAfterFailure
	s.NoIdentity += o.NoIdentity
}

// tupleRole says which tuple of a record is being decoded: it decides what
// a TOAST pointer without chunks means.
type tupleRole uint8

const (
	roleInsert    tupleRole = iota // new row of an INSERT: chunks must be here
	roleUpdateNew                  // new row of an UPDATE: unchanged values may be omitted
	roleOld                        // logged old key/row: PostgreSQL flattens it, never external
)

func relName(d *desclog.Descriptor) string {
	return fmt.Sprintf("%s.%s (oid %d)", d.Namespace, d.Name, d.Oid)
}

// tupleFields deforms tup with desc and builds its live Fields, appending
// each field's expanded datum (nil for NULL, missing or omitted) to raws.
// The expanded datums may alias the record; Fields never do.
func (t *Tx) tupleFields(desc *desclog.Descriptor, tup wal.HeapTuple, lsn wal.LSN, role tupleRole, raws [][]byte) ([]Field, [][]byte, error) {
	var err error
	t.arena.datums, err = Deform(desc, tup, t.arena.datums)
	if err != nil {
		return nil, raws, fmt.Errorf("LSN %s, relation %s: %w", lsn, relName(desc), err)
	}
	fields := t.arena.fieldSlice(len(t.arena.datums))
	for i, d := range t.arena.datums {
		col := &desc.Columns[d.Column]
		f := &fields[i]
		f.Col = col
		switch {
		case d.Null:
			f.Null = true
			raws = append(raws, nil)
			continue
		case d.Missing != nil:
			v, pending, err := missingValue(t.arena, col)
			if err != nil {
				return nil, raws, fmt.Errorf("LSN %s, relation %s: %w", lsn, relName(desc), err)
			}
			if pending {
				t.stats.MissingAsText++
			}
			f.Value = v
			raws = append(raws, nil)
			continue
		}
		raw, owned := d.Raw, false
		if col.Len == -1 {
			var ptr *ToastPointer
			raw, owned, ptr, err = t.expand(raw)
			if err != nil {
				return nil, raws, fmt.Errorf("LSN %s, relation %s, column %q: %w", lsn, relName(desc), col.Name, err)
			}
			if ptr != nil {
				if role == roleUpdateNew && t.opt.ToastPolicy == ToastOmit {
					f.Omitted = true
					raws = append(raws, nil)
					continue
				}
				return nil, raws, fmt.Errorf("LSN %s, relation %s, column %q: TOAST value %d of relation %d is not in the transaction (%s)",
					lsn, relName(desc), col.Name, ptr.ValueID, ptr.ToastRelID, missingChunksWhy(role))
			}
		}
		raws = append(raws, raw)
		if owned {
			// Reassembled or inflated: a fresh plain varlena nobody writes
			// again, so big text and bytea values are used without a copy.
			switch valueOid(col) {
			case OidText, OidVarchar, OidBpchar, OidJSON:
				f.Value = t.arena.boxString(unsafe.String(unsafe.SliceData(raw[4:]), len(raw)-4))
				continue
			case OidBytea:
				f.Value = raw[4:len(raw):len(raw)]
				continue
			}
		}
		v, pending, err := value(t.arena, col, raw)
		if err != nil {
			return nil, raws, fmt.Errorf("LSN %s, relation %s, column %q (%s): %w", lsn, relName(desc), col.Name, col.TypeName, err)
		}
		if pending {
			f.Pending = true
			if owned {
				f.Raw = raw
			} else {
				f.Raw = t.arena.copyBytes(raw)
			}
			continue
		}
		f.Value = v
	}
	return fields, raws, nil
}

func missingChunksWhy(role tupleRole) string {
	switch role {
	case roleInsert:
		return "an inserted row's chunks are always written by its transaction"
	case roleOld:
		return "a logged old tuple is always flattened"
	}
	return "toast policy fail"
}

// project keeps the fields whose attnum is in keys (attnum order kept).
func (t *Tx) project(fields []Field, keys []int16) []Field {
	n := 0
	for i := range fields {
		if hasAttnum(keys, fields[i].Col.Num) {
			n++
		}
	}
	out := t.arena.fieldSlice(n)
	j := 0
	for i := range fields {
		if hasAttnum(keys, fields[i].Col.Num) {
			out[j] = fields[i]
			j++
		}
	}
	return out
}

func hasAttnum(keys []int16, n int16) bool {
	for _, k := range keys {
		if k == n {
			return true
		}
	}
	return false
}

// keyDiffers compares the identity columns of two tuples of one descriptor
// by their expanded bytes (all live columns when keys is nil). An omitted
// new value is unchanged by definition.
func keyDiffers(newF, oldF []Field, newRaw, oldRaw [][]byte, keys []int16) bool {
	for i := range newF {
		if keys != nil && !hasAttnum(keys, newF[i].Col.Num) {
			continue
		}
		if newF[i].Omitted {
			continue
		}
		if newF[i].Null != oldF[i].Null {
			return true
		}
		if newF[i].Null {
			continue
		}
		if newRaw[i] == nil || oldRaw[i] == nil {
			// missing values: compare the values themselves
			if fmt.Sprint(newF[i].Value) != fmt.Sprint(oldF[i].Value) {
				return true
			}
			continue
		}
		if !equalDatum(newRaw[i], oldRaw[i], newF[i].Col.Len == -1) {
			return true
		}
	}
	return false
}

// equalDatum compares two expanded datums; varlenas by payload, so a 1-byte
// and a 4-byte header of the same bytes are equal.
func equalDatum(a, b []byte, varlena bool) bool {
	if varlena {
		va, err1 := ParseVarlena(a)
		vb, err2 := ParseVarlena(b)
		if err1 == nil && err2 == nil {
			a, b = va.Payload, vb.Payload
		}
	}
	return string(a) == string(b)
}
