package decode

import (
	"errors"
	"fmt"

	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/wal"
)

// Tx decodes one committed transaction's records, fed in LSN order (in any
// number of Add calls), with the state that spans records carried between
// calls: TOAST chunks, speculative inserts and failed relations. It is
// pure: no I/O. A Tx is not safe for concurrent use.
//
// Errors come in two kinds. What can only be wrong for one relation (a
// record with no provable shape, a TOAST value missing or inconsistent, a
// datum that does not decode, a DELETE without the key its replica identity
// promises) is not an error: that relation gets an OpFail row and its later
// changes in the transaction are dropped, while the other relations go on.
// What threatens every table (a record that does not parse, a source
// without wal_level = logical, a descriptor log that answers nothing
// usable) is an error from Add, and the transaction cannot go on.
type Tx struct {
	cat    Catalog
	commit Commit
	opt    TxOptions
	stats  TxStats

	arena *arena // and the record scratch (datums, raw values)

	toast       map[toastKey]*toastValue
	toastChunks int64 // chunks collected since the last reset
	toastUsed   int64 // of which reassembled into a value

	spec     map[specKey]RowChange
	finished bool

	// failed are the relations (by oid) that failed in this transaction:
	// their later changes are dropped.
	failed map[uint32]struct{}
	// toastBroken are TOAST relations (by oid) a chunk of which, since the
	// last reset, could not be read: a pointer into one fails its row.
	toastBroken map[uint32]error

	// record bodies, reused
	ins  wal.HeapInsert
	mi   wal.HeapMultiInsert
	upd  wal.HeapUpdate
	del  wal.HeapDelete
	trn  wal.HeapTruncate
	conf wal.HeapConfirm
	mit  wal.MultiInsertTuple
}

// specKey is where a speculative insertion's tuple lives until its CONFIRM.
type specKey struct {
	rfn    wal.RelFileNode
	block  uint32
	offnum uint16
}

// NewTx starts decoding the transaction committed by c.
func NewTx(cat Catalog, c Commit, opt TxOptions) *Tx {
	if opt.MaxValueBytes <= 0 {
		opt.MaxValueBytes = DefaultMaxValueBytes
	}
	a := new(arena)
	if opt.Arena != nil {
		a = &opt.Arena.a
	}
	// The maps are made at their first use: most transactions have no
	// TOAST chunk and no speculative insertion.
	return &Tx{cat: cat, commit: c, opt: opt, arena: a}
}

// toastMap is the transaction's TOAST values, made at the first chunk.
func (t *Tx) toastMap() map[toastKey]*toastValue {
	if t.toast == nil {
		t.toast = map[toastKey]*toastValue{}
	}
	return t.toast
}

// Stats returns the counters so far.
func (t *Tx) Stats() TxStats { return t.stats }

// errFinished is returned by Add after Finish.
var errFinished = errors.New("decode: transaction already finished")

// Add decodes rec, one of the transaction's records, appending its row
// changes to dst. deferCatalogDecode marks a record of a catalog-changing
// transaction tree: its relation is resolved at the commit. Records other
// than heap INSERT, MULTI_INSERT, UPDATE, HOT_UPDATE, DELETE, TRUNCATE and
// CONFIRM are ignored. rec's memory may be reused once Add returns.
func (t *Tx) Add(dst []RowChange, rec *wal.Record, deferCatalogDecode bool) ([]RowChange, error) {
	if t.finished {
		return dst, errFinished
	}
	info := rec.Header.Info & wal.XLRRmgrInfoMask
	switch rec.Header.RmID {
	case wal.RmgrHeap:
		switch info & wal.XLogHeapOpMask {
		case wal.XLogHeapInsert:
			return t.addInsert(dst, rec, deferCatalogDecode)
		case wal.XLogHeapUpdate, wal.XLogHeapHotUpdate:
			return t.addUpdate(dst, rec, deferCatalogDecode)
		case wal.XLogHeapDelete:
			return t.addDelete(dst, rec, deferCatalogDecode)
		case wal.XLogHeapTruncate:
			return t.addTruncate(dst, rec, deferCatalogDecode)
		case wal.XLogHeapConfirm:
			return t.addConfirm(dst, rec)
		}
	case wal.RmgrHeap2:
		if info&wal.XLogHeapOpMask == wal.XLogHeap2MultiInsert {
			return t.addMultiInsert(dst, rec, deferCatalogDecode)
		}
	}
	return dst, nil
}

// Finish ends the transaction: speculative inserts never confirmed are
// dropped, leftover TOAST chunks released (both counted). Add fails after it.
func (t *Tx) Finish(dst []RowChange) ([]RowChange, error) {
	if t.finished {
		return dst, errFinished
	}
	t.finished = true
	clear(t.arena.rawNew[:cap(t.arena.rawNew)]) // do not pin record or value buffers
	clear(t.arena.rawOld[:cap(t.arena.rawOld)])
	t.stats.SpeculativeDropped += int64(len(t.spec))
	clear(t.spec)
	t.resetToast()
	return dst, nil
}

// resolved is a record's relation: the shape to decode it with.
type resolved struct {
	desc *desclog.Descriptor
	from wal.LSN
}

// FailRelation drops the relation's later changes in this transaction, as
// if one of its rows had failed here: for a caller that fails a row after
// decoding (a value the shadow's bridge cannot render) and emits the
// OpFail itself.
func (t *Tx) FailRelation(oid uint32) {
	if t.failed == nil {
		t.failed = map[uint32]struct{}{}
	}
	t.failed[oid] = struct{}{}
}

// isFailed reports whether the relation failed earlier in the transaction
// (the change at hand is dropped, counted).
func (t *Tx) isFailed(oid uint32) bool {
	if _, ok := t.failed[oid]; ok {
		t.stats.DroppedAfterFailure++
		return true
	}
	return false
}

// fail appends r's relation's OpFail for its record at lsn and drops the
// relation's later changes in the transaction. A relation fails once.
func (t *Tx) fail(dst []RowChange, r resolved, lsn wal.LSN, filenode uint32, tid TID, err error) []RowChange {
	if t.isFailed(r.desc.Oid) {
		return dst
	}
	t.FailRelation(r.desc.Oid)
	t.stats.Failures++
	return append(dst, RowChange{Op: OpFail, LSN: lsn, Desc: r.desc, DescFrom: r.from, TID: tid, Filenode: filenode, Err: err})
}

// shapeFailure is an error resolving one relation's record: its shape is
// not provable (an ambiguity interval covers it). r names the relation.
type shapeFailure struct {
	r   resolved
	err error
}

func (e *shapeFailure) Error() string { return e.err.Error() }

// failResolve handles resolve's error for a record on rel: a shape failure
// of a table fails it (the record's changes are not emitted) and of a
// TOAST relation breaks its chunks; anything else is the caller's error.
func (t *Tx) failResolve(dst []RowChange, err error, lsn wal.LSN, filenode uint32, tid TID) ([]RowChange, error) {
	var sf *shapeFailure
	if !errors.As(err, &sf) {
		return dst, err
	}
	switch sf.r.desc.Kind {
	case 'r', 'p':
		return t.fail(dst, sf.r, lsn, filenode, tid, sf.err), nil
	case 't':
		t.breakToast(sf.r.desc.Oid, sf.err)
	default:
		t.stats.SkippedKind++
	}
	return dst, nil
}

// breakToast marks a TOAST relation's chunks since the last reset as
// unreadable: a row whose pointer names the relation fails.
func (t *Tx) breakToast(oid uint32, err error) {
	if t.toastBroken == nil {
		t.toastBroken = map[uint32]error{}
	}
	if _, ok := t.toastBroken[oid]; !ok {
		t.toastBroken[oid] = err
	}
}

// resolve finds the descriptor for a record on rfn (ok false: skip it,
// counted). Present at the record decodes with that shape unless the record
// belongs to a catalog-changing tree; everything that may have been born or
// reshaped inside the transaction resolves at the commit, fenced by the
// log's ambiguity intervals (a record inside one is a *shapeFailure).
func (t *Tx) resolve(rfn wal.RelFileNode, lsn wal.LSN, deferCat bool) (resolved, bool, error) {
	lk := t.cat.DescriptorAt(rfn, lsn)
	switch lk.Result {
	case desclog.ForeignDb:
		t.stats.SkippedForeignDb++
		return resolved{}, false, nil
	case desclog.Retired:
		t.stats.SkippedRetired++
		return resolved{}, false, nil
	case desclog.Present:
		if !deferCat {
			return resolved{lk.Desc, lk.ValidFrom}, true, nil
		}
	}
	at := t.cat.DescriptorAt(rfn, t.commit.NextLSN)
	return t.atCommit(at, rfn, 0, lsn, fmt.Sprintf("filenode %s", rfn))
}

// resolveOid is resolve for records naming a relation by oid (TRUNCATE).
func (t *Tx) resolveOid(db, oid uint32, lsn wal.LSN, deferCat bool) (resolved, bool, error) {
	lk := t.cat.DescriptorByOidInDBAt(db, oid, lsn)
	switch lk.Result {
	case desclog.ForeignDb:
		t.stats.SkippedForeignDb++
		return resolved{}, false, nil
	case desclog.Retired:
		t.stats.SkippedRetired++
		return resolved{}, false, nil
	case desclog.Present:
		if !deferCat {
			return resolved{lk.Desc, lk.ValidFrom}, true, nil
		}
	}
	at := t.cat.DescriptorByOidInDBAt(db, oid, t.commit.NextLSN)
	return t.atCommit(at, wal.RelFileNode{}, oid, lsn, fmt.Sprintf("relation oid %d", oid))
}

func (t *Tx) atCommit(at desclog.Lookup, rfn wal.RelFileNode, oid uint32, lsn wal.LSN, what string) (resolved, bool, error) {
	switch at.Result {
	case desclog.Present:
		if oid == 0 {
			oid = at.Desc.Oid
		}
		if rfn == (wal.RelFileNode{}) {
			rfn = at.Desc.Rfn
		}
		for _, a := range t.cat.AmbiguitiesIntersecting(rfn, oid, lsn, t.commit.NextLSN) {
			if a.Contains(lsn) {
				return resolved{}, false, &shapeFailure{resolved{at.Desc, at.ValidFrom},
					fmt.Errorf("record at LSN %s on %s (relation %s): no provable shape, the descriptor log's interval %s covers it",
						lsn, what, relName(at.Desc), a)}
			}
		}
		return resolved{at.Desc, at.ValidFrom}, true, nil
	case desclog.Dropped, desclog.Retired:
		t.stats.SkippedDropped++
		return resolved{}, false, nil
	case desclog.NotCovered:
		t.stats.SkippedNotCovered++
		return resolved{}, false, nil
	case desclog.ForeignDb:
		t.stats.SkippedForeignDb++
		return resolved{}, false, nil
	}
	return resolved{}, false, fmt.Errorf("record at LSN %s on %s: the descriptor log answers %s at the commit's next LSN %s (interval %s)",
		lsn, what, at.Result, t.commit.NextLSN, at.Interval)
}

// kindOK sorts a resolved relation: tables decode, TOAST relations carry
// chunks, everything else (materialized views) is skipped.
func (t *Tx) tableKind(r resolved) (table, toast bool) {
	switch r.desc.Kind {
	case 'r':
		return true, false
	case 't':
		return false, true
	}
	t.stats.SkippedKind++
	return false, false
}

func noTupleErr(lsn wal.LSN, r resolved, what string) error {
	return fmt.Errorf("%s at LSN %s on relation %s carries no tuple data (only a full-page image): the source must run with wal_level = logical", what, lsn, relName(r.desc))
}

// insertTarget resolves the relation an INSERT or MULTI_INSERT writes: ok
// false skips the record (counted, or the relation failed: dst has its
// OpFail), toast tells a TOAST relation's chunks from a table's rows, and a
// decodable relation without tuple data is an error.
func (t *Tx) insertTarget(dst []RowChange, rel wal.RelFileNode, rec *wal.Record, deferCat, hasTuple bool, tid TID, what string) (_ []RowChange, r resolved, toast, ok bool, err error) {
	r, ok, err = t.resolve(rel, rec.LSN, deferCat)
	if err != nil {
		dst, err = t.failResolve(dst, err, rec.LSN, rel.RelNum, tid)
		return dst, r, false, false, err
	}
	if !ok {
		return dst, r, false, false, nil
	}
	table, toast := t.tableKind(r)
	if !table && !toast {
		return dst, r, false, false, nil
	}
	if !hasTuple {
		return dst, r, toast, false, noTupleErr(rec.LSN, r, what)
	}
	if table && t.isFailed(r.desc.Oid) {
		t.resetToast() // the chunks were the dropped row's
		return dst, r, false, false, nil
	}
	return dst, r, toast, true, nil
}

func (t *Tx) addInsert(dst []RowChange, rec *wal.Record, deferCat bool) ([]RowChange, error) {
	ins := &t.ins
	if err := ins.Decode(rec); err != nil {
		return dst, err
	}
	tid := TID{ins.Block, ins.OffNum}
	dst, r, toast, ok, err := t.insertTarget(dst, ins.Rel, rec, deferCat, ins.HasTuple, tid, "INSERT")
	if !ok || err != nil {
		return dst, err
	}
	if toast {
		t.addChunk(r.desc, ins.Tuple, rec.LSN)
		return dst, nil
	}
	fields, raws, err := t.tupleFields(r.desc, ins.Tuple, rec.LSN, roleInsert, t.arena.rawNew[:0])
	t.arena.rawNew = raws
	t.resetToast()
	if err != nil {
		return t.fail(dst, r, rec.LSN, ins.Rel.RelNum, tid, err), nil
	}
	row := RowChange{Op: OpInsert, LSN: rec.LSN, Desc: r.desc, DescFrom: r.from, Fields: fields, TID: tid, Filenode: ins.Rel.RelNum}
	if ins.IsSpeculative() {
		// INSERT ... ON CONFLICT: final only once confirmed.
		if t.spec == nil {
			t.spec = map[specKey]RowChange{}
		}
		t.spec[specKey{ins.Rel, ins.Block, ins.OffNum}] = row
		return dst, nil
	}
	t.stats.Inserts++
	return append(dst, row), nil
}

func (t *Tx) addConfirm(dst []RowChange, rec *wal.Record) ([]RowChange, error) {
	if err := t.conf.Decode(rec); err != nil {
		return dst, err
	}
	k := specKey{t.conf.Rel, t.conf.Block, t.conf.OffNum}
	row, ok := t.spec[k]
	if !ok {
		return dst, nil // its relation was skipped
	}
	delete(t.spec, k)
	if t.isFailed(row.Desc.Oid) {
		return dst, nil
	}
	t.stats.Inserts++
	return append(dst, row), nil
}

func (t *Tx) addMultiInsert(dst []RowChange, rec *wal.Record, deferCat bool) ([]RowChange, error) {
	mi := &t.mi
	if err := mi.Decode(rec); err != nil {
		return dst, err
	}
	// A failure of the whole record names no single tuple.
	dst, r, toast, ok, err := t.insertTarget(dst, mi.Rel, rec, deferCat, mi.HasTuples, TID{}, "MULTI_INSERT")
	if !ok || err != nil {
		return dst, err
	}
	start := len(dst)
	it := mi.Tuples()
	for it.Next(&t.mit) {
		if toast {
			t.addChunk(r.desc, t.mit.Tuple, rec.LSN)
			continue
		}
		tid := TID{mi.Block, t.mit.OffNum}
		fields, raws, err := t.tupleFields(r.desc, t.mit.Tuple, rec.LSN, roleInsert, t.arena.rawNew[:0])
		t.arena.rawNew = raws
		if err != nil {
			// The record's tuples stand or fall together.
			t.stats.Inserts -= int64(len(dst) - start)
			t.resetToast()
			return t.fail(dst[:start], r, rec.LSN, mi.Rel.RelNum, tid, err), nil
		}
		dst = append(dst, RowChange{Op: OpInsert, LSN: rec.LSN, Desc: r.desc, DescFrom: r.from, Fields: fields, TID: tid, Filenode: mi.Rel.RelNum})
		t.stats.Inserts++
	}
	// COPY toasts a whole batch before logging its pages: the chunks of
	// later records' tuples are already collected.
	if !toast && mi.Flags&wal.XLHInsertLastInMulti != 0 {
		t.resetToast()
	}
	return dst, nil
}

// identityKeys returns the replica identity columns (nil: every live
// column, REPLICA IDENTITY FULL); ok is false when the table has none
// (REPLICA IDENTITY NOTHING, or DEFAULT without a primary key): its rows
// are known by their physical identity (filenode and TID) only.
func identityKeys(d *desclog.Descriptor) (keys []int16, ok bool) {
	switch d.ReplIdent {
	case 'f':
		return nil, true
	case 'd', 'i':
		if len(d.KeyAttnums) > 0 {
			return d.KeyAttnums, true
		}
	}
	return nil, false
}

func (t *Tx) addDelete(dst []RowChange, rec *wal.Record, deferCat bool) ([]RowChange, error) {
	del := &t.del
	if err := del.Decode(rec); err != nil {
		return dst, err
	}
	if del.IsSuper() {
		// Kills a speculative insertion that met a conflict.
		k := specKey{del.Rel, del.Block, del.OffNum}
		if _, ok := t.spec[k]; ok {
			delete(t.spec, k)
			t.stats.SpeculativeDropped++
		}
		return dst, nil
	}
	tid := TID{del.Block, del.OffNum}
	r, ok, err := t.resolve(del.Rel, rec.LSN, deferCat)
	if err != nil {
		return t.failResolve(dst, err, rec.LSN, del.Rel.RelNum, tid)
	}
	if !ok {
		return dst, nil
	}
	if table, _ := t.tableKind(r); !table {
		return dst, nil // TOAST chunk deletions carry nothing to apply
	}
	t.resetToast()
	if t.isFailed(r.desc.Oid) {
		return dst, nil
	}
	row := RowChange{Op: OpDelete, LSN: rec.LSN, Desc: r.desc, DescFrom: r.from, TID: tid, Filenode: del.Rel.RelNum}
	keys, ok := identityKeys(r.desc)
	switch {
	case !ok:
		// No key to name the row by: the TID does.
		t.stats.NoIdentity++
	case !del.HasOldTuple:
		return t.fail(dst, r, rec.LSN, del.Rel.RelNum, tid, fmt.Errorf("DELETE at LSN %s on relation %s logs no old key although its replica identity (%s) has one: the descriptor does not match the record",
			rec.LSN, relName(r.desc), identityWord(r.desc.ReplIdent))), nil
	default:
		fields, raws, err := t.tupleFields(r.desc, del.OldTuple, rec.LSN, roleOld, t.arena.rawOld[:0])
		t.arena.rawOld = raws
		if err != nil {
			return t.fail(dst, r, rec.LSN, del.Rel.RelNum, tid, err), nil
		}
		if keys != nil {
			fields = t.project(fields, keys)
		}
		row.Fields = fields
	}
	t.stats.Deletes++
	return append(dst, row), nil
}

func identityWord(c byte) string {
	switch c {
	case 'd':
		return "DEFAULT"
	case 'i':
		return "USING INDEX"
	case 'f':
		return "FULL"
	case 'n':
		return "NOTHING"
	}
	return string(c)
}

func (t *Tx) addUpdate(dst []RowChange, rec *wal.Record, deferCat bool) ([]RowChange, error) {
	upd := &t.upd
	if err := upd.Decode(rec); err != nil {
		return dst, err
	}
	tid, oldTID := TID{upd.NewBlock, upd.NewOffNum}, TID{upd.OldBlock, upd.OldOffNum}
	filenode := upd.Rel.RelNum
	r, ok, err := t.resolve(upd.Rel, rec.LSN, deferCat)
	if err != nil {
		return t.failResolve(dst, err, rec.LSN, filenode, tid)
	}
	if !ok {
		return dst, nil
	}
	if table, _ := t.tableKind(r); !table {
		return dst, nil
	}
	if !upd.HasNewTuple {
		return dst, noTupleErr(rec.LSN, r, "UPDATE")
	}
	if upd.PrefixLen != 0 || upd.SuffixLen != 0 {
		return dst, fmt.Errorf("UPDATE at LSN %s on relation %s shares a prefix/suffix with the old tuple (wal_level below logical): the new row is incomplete", rec.LSN, relName(r.desc))
	}
	if t.isFailed(r.desc.Oid) {
		t.resetToast()
		return dst, nil
	}
	keys, identity := identityKeys(r.desc)
	var newF []Field
	newF, t.arena.rawNew, err = t.tupleFields(r.desc, upd.NewTuple, rec.LSN, roleUpdateNew, t.arena.rawNew[:0])
	if err != nil {
		t.resetToast()
		return t.fail(dst, r, rec.LSN, filenode, tid, err), nil
	}
	if !identity {
		// No key, so no key change: the TIDs say which tuple became which.
		t.stats.NoIdentity++
	} else if upd.HasOldTuple {
		var oldF []Field
		oldF, t.arena.rawOld, err = t.tupleFields(r.desc, upd.OldTuple, rec.LSN, roleOld, t.arena.rawOld[:0])
		if err != nil {
			t.resetToast()
			return t.fail(dst, r, rec.LSN, filenode, tid, err), nil
		}
		// An omitted (unchanged) value equals the old one when that is logged.
		for i := range newF {
			if newF[i].Omitted && !oldF[i].Null && !oldF[i].Omitted && (oldF[i].Value != nil || oldF[i].Pending) {
				newF[i] = oldF[i]
				t.arena.rawNew[i] = t.arena.rawOld[i]
				t.stats.ToastFilledFromOld++
			}
		}
		// Under REPLICA IDENTITY FULL the rows are a multiset with no key:
		// every update retires its old row explicitly, changed or not.
		if r.desc.ReplIdent == 'f' || keyDiffers(newF, oldF, t.arena.rawNew, t.arena.rawOld, keys) {
			old := oldF
			if keys != nil {
				old = t.project(oldF, keys)
			}
			dst = append(dst, RowChange{Op: OpDelete, LSN: rec.LSN, Desc: r.desc, DescFrom: r.from, Fields: old, TID: oldTID, Filenode: filenode})
			t.stats.Deletes++
			t.stats.KeyChangeDeletes++
		}
	}
	for i := range newF {
		if newF[i].Omitted {
			t.stats.ToastOmitted++
		}
	}
	t.resetToast()
	t.stats.Updates++
	return append(dst, RowChange{Op: OpUpdate, LSN: rec.LSN, Desc: r.desc, DescFrom: r.from, Fields: newF,
		TID: tid, OldTID: oldTID, Filenode: filenode}), nil
}

func (t *Tx) addTruncate(dst []RowChange, rec *wal.Record, deferCat bool) ([]RowChange, error) {
	trn := &t.trn
	if err := trn.Decode(rec); err != nil {
		return dst, err
	}
	for i := 0; i < trn.NumRelIDs(); i++ {
		r, ok, err := t.resolveOid(trn.DbID, trn.RelID(i), rec.LSN, deferCat)
		if err != nil {
			if dst, err = t.failResolve(dst, err, rec.LSN, 0, TID{}); err != nil {
				return dst, err
			}
			continue
		}
		if !ok {
			continue
		}
		if r.desc.Kind != 'r' && r.desc.Kind != 'p' {
			t.stats.SkippedKind++
			continue
		}
		if t.isFailed(r.desc.Oid) {
			continue
		}
		t.stats.Truncates++
		dst = append(dst, RowChange{Op: OpTruncate, LSN: rec.LSN, Desc: r.desc, DescFrom: r.from})
	}
	return dst, nil
}
