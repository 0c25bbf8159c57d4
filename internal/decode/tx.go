package decode

import (
	"errors"
	"fmt"

	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/wal"
)

// Tx decodes one committed transaction's records, fed in LSN order (in any
// number of Add calls), with the state that spans records carried between
// calls: TOAST chunks and speculative inserts. It is pure: no I/O. A Tx is
// not safe for concurrent use.
type Tx struct {
	cat    Catalog
	commit Commit
	opt    TxOptions
	stats  TxStats

	arena  arena
	datums []Datum
	rawNew [][]byte
	rawOld [][]byte

	toast       map[toastKey]*toastValue
	toastChunks int64 // chunks collected since the last reset
	toastUsed   int64 // of which reassembled into a value

	spec     map[specKey]RowChange
	finished bool

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
	return &Tx{cat: cat, commit: c, opt: opt, toast: map[toastKey]*toastValue{}, spec: map[specKey]RowChange{}}
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
	clear(t.rawNew[:cap(t.rawNew)]) // do not pin record or value buffers
	clear(t.rawOld[:cap(t.rawOld)])
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

// resolve finds the descriptor for a record on rfn (ok false: skip it,
// counted). Present at the record decodes with that shape unless the record
// belongs to a catalog-changing tree; everything that may have been born or
// reshaped inside the transaction resolves at the commit, fenced by the
// log's ambiguity intervals.
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
				return resolved{}, false, fmt.Errorf("record at LSN %s on %s (relation %s): no provable shape, the descriptor log's interval %s covers it",
					lsn, what, relName(at.Desc), a)
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
// false skips the record (counted), toast tells a TOAST relation's chunks
// from a table's rows, and a decodable relation without tuple data is an
// error.
func (t *Tx) insertTarget(rel wal.RelFileNode, rec *wal.Record, deferCat, hasTuple bool, what string) (r resolved, toast, ok bool, err error) {
	r, ok, err = t.resolve(rel, rec.LSN, deferCat)
	if !ok || err != nil {
		return r, false, false, err
	}
	table, toast := t.tableKind(r)
	if !table && !toast {
		return r, false, false, nil
	}
	if !hasTuple {
		return r, toast, false, noTupleErr(rec.LSN, r, what)
	}
	return r, toast, true, nil
}

func (t *Tx) addInsert(dst []RowChange, rec *wal.Record, deferCat bool) ([]RowChange, error) {
	ins := &t.ins
	if err := ins.Decode(rec); err != nil {
		return dst, err
	}
	r, toast, ok, err := t.insertTarget(ins.Rel, rec, deferCat, ins.HasTuple, "INSERT")
	if !ok || err != nil {
		return dst, err
	}
	if toast {
		return dst, t.addChunk(r.desc, ins.Tuple, rec.LSN)
	}
	fields, raws, err := t.tupleFields(r.desc, ins.Tuple, rec.LSN, roleInsert, t.rawNew[:0])
	t.rawNew = raws
	if err != nil {
		return dst, err
	}
	row := RowChange{Op: OpInsert, LSN: rec.LSN, Desc: r.desc, DescFrom: r.from, Fields: fields}
	t.resetToast()
	if ins.IsSpeculative() {
		// INSERT ... ON CONFLICT: final only once confirmed.
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
	t.stats.Inserts++
	return append(dst, row), nil
}

func (t *Tx) addMultiInsert(dst []RowChange, rec *wal.Record, deferCat bool) ([]RowChange, error) {
	mi := &t.mi
	if err := mi.Decode(rec); err != nil {
		return dst, err
	}
	r, toast, ok, err := t.insertTarget(mi.Rel, rec, deferCat, mi.HasTuples, "MULTI_INSERT")
	if !ok || err != nil {
		return dst, err
	}
	it := mi.Tuples()
	for it.Next(&t.mit) {
		if toast {
			if err := t.addChunk(r.desc, t.mit.Tuple, rec.LSN); err != nil {
				return dst, err
			}
			continue
		}
		fields, raws, err := t.tupleFields(r.desc, t.mit.Tuple, rec.LSN, roleInsert, t.rawNew[:0])
		t.rawNew = raws
		if err != nil {
			return dst, err
		}
		dst = append(dst, RowChange{Op: OpInsert, LSN: rec.LSN, Desc: r.desc, DescFrom: r.from, Fields: fields})
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
// column, REPLICA IDENTITY FULL), or an error when the table has none.
func identityKeys(d *desclog.Descriptor, lsn wal.LSN, what string) ([]int16, error) {
	switch d.ReplIdent {
	case 'f':
		return nil, nil
	case 'd', 'i':
		if len(d.KeyAttnums) > 0 {
			return d.KeyAttnums, nil
		}
	}
	return nil, fmt.Errorf("relation %s has no usable replica identity (REPLICA IDENTITY NOTHING or DEFAULT without a primary key): its %s at LSN %s cannot be applied", relName(d), what, lsn)
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
	r, ok, err := t.resolve(del.Rel, rec.LSN, deferCat)
	if !ok || err != nil {
		return dst, err
	}
	if table, _ := t.tableKind(r); !table {
		return dst, nil // TOAST chunk deletions carry nothing to apply
	}
	keys, err := identityKeys(r.desc, rec.LSN, "DELETE")
	if err != nil {
		return dst, err
	}
	if !del.HasOldTuple {
		return dst, fmt.Errorf("relation %s has no usable replica identity (REPLICA IDENTITY NOTHING or DEFAULT without a primary key): its DELETE at LSN %s cannot be applied (no old key logged)", relName(r.desc), rec.LSN)
	}
	fields, raws, err := t.tupleFields(r.desc, del.OldTuple, rec.LSN, roleOld, t.rawOld[:0])
	t.rawOld = raws
	if err != nil {
		return dst, err
	}
	if keys != nil {
		fields = t.project(fields, keys)
	}
	t.resetToast()
	t.stats.Deletes++
	return append(dst, RowChange{Op: OpDelete, LSN: rec.LSN, Desc: r.desc, DescFrom: r.from, Fields: fields}), nil
}

func (t *Tx) addUpdate(dst []RowChange, rec *wal.Record, deferCat bool) ([]RowChange, error) {
	upd := &t.upd
	if err := upd.Decode(rec); err != nil {
		return dst, err
	}
	r, ok, err := t.resolve(upd.Rel, rec.LSN, deferCat)
	if !ok || err != nil {
		return dst, err
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
	keys, err := identityKeys(r.desc, rec.LSN, "UPDATE")
	if err != nil {
		return dst, err
	}
	var newF []Field
	newF, t.rawNew, err = t.tupleFields(r.desc, upd.NewTuple, rec.LSN, roleUpdateNew, t.rawNew[:0])
	if err != nil {
		return dst, err
	}
	if upd.HasOldTuple {
		var oldF []Field
		oldF, t.rawOld, err = t.tupleFields(r.desc, upd.OldTuple, rec.LSN, roleOld, t.rawOld[:0])
		if err != nil {
			return dst, err
		}
		// An omitted (unchanged) value equals the old one when that is logged.
		for i := range newF {
			if newF[i].Omitted && !oldF[i].Null && !oldF[i].Omitted && (oldF[i].Value != nil || oldF[i].Pending) {
				newF[i] = oldF[i]
				t.rawNew[i] = t.rawOld[i]
				t.stats.ToastFilledFromOld++
			}
		}
		// Under REPLICA IDENTITY FULL the rows are a multiset with no key:
		// every update retires its old row explicitly, changed or not.
		if r.desc.ReplIdent == 'f' || keyDiffers(newF, oldF, t.rawNew, t.rawOld, keys) {
			old := oldF
			if keys != nil {
				old = t.project(oldF, keys)
			}
			dst = append(dst, RowChange{Op: OpDelete, LSN: rec.LSN, Desc: r.desc, DescFrom: r.from, Fields: old})
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
	return append(dst, RowChange{Op: OpUpdate, LSN: rec.LSN, Desc: r.desc, DescFrom: r.from, Fields: newF}), nil
}

func (t *Tx) addTruncate(dst []RowChange, rec *wal.Record, deferCat bool) ([]RowChange, error) {
	trn := &t.trn
	if err := trn.Decode(rec); err != nil {
		return dst, err
	}
	for i := 0; i < trn.NumRelIDs(); i++ {
		r, ok, err := t.resolveOid(trn.DbID, trn.RelID(i), rec.LSN, deferCat)
		if err != nil {
			return dst, err
		}
		if !ok {
			continue
		}
		if r.desc.Kind != 'r' && r.desc.Kind != 'p' {
			t.stats.SkippedKind++
			continue
		}
		t.stats.Truncates++
		dst = append(dst, RowChange{Op: OpTruncate, LSN: rec.LSN, Desc: r.desc, DescFrom: r.from})
	}
	return dst, nil
}
