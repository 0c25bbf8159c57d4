package output

import (
	"fmt"

	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/desclog"
)

// tableState is one replicated relation as the output writes it: derived
// entirely from its durable agreement (the store's Agreed), rebuilt whenever
// that changes, plus the rows not yet inserted.
type tableState struct {
	clickhouse.RowLayout
	agreed *clickhouse.Agreed
	label  string                    // `db`.`table`, for metrics and errors
	shape  map[int16]*desclog.Column // the agreed source shape by attnum
	// zero are the mapped columns' zero values (a delete marker's).
	zero []any

	// block is the pending rows (nil until the first): typed columns,
	// reused after each flush.
	block *clickhouse.Block
	// plans caches, per row shape, each payload column name's index in
	// cols (-1: not replicated); planShape/plan is the last one used.
	plans     map[*rowShape]*rowPlan
	planShape *rowShape
	plan      *rowPlan
}

// pending is the block of pending rows.
func (ts *tableState) pending() *clickhouse.Block {
	if ts.block == nil {
		ts.block = clickhouse.NewBlock(ts.Cols)
	}
	return ts.block
}

// rowCount is the pending rows.
func (ts *tableState) rowCount() int {
	if ts.block == nil {
		return 0
	}
	return ts.block.Len()
}

// rowPlan is where a row shape's payload columns go: each name's index
// in cols (-1: not replicated), learnt as names are first met.
type rowPlan struct {
	index map[string]int
	known []plannedColumn // the same, in the order learnt
}

type plannedColumn struct {
	name string
	idx  int
}

func (p *rowPlan) learn(name string, idx int) {
	if _, ok := p.index[name]; !ok {
		p.known = append(p.known, plannedColumn{name, idx})
	}
	p.index[name] = idx
}

// planOf is the plan of a row shape. The agreement a tableState is built
// from never changes under it, so an index found once holds for every row
// of the shape.
func (ts *tableState) planOf(shape *rowShape) *rowPlan {
	if ts.planShape == shape {
		return ts.plan
	}
	if ts.plans == nil {
		ts.plans = map[*rowShape]*rowPlan{}
	}
	p := ts.plans[shape]
	if p == nil {
		p = &rowPlan{index: make(map[string]int, len(shape.attnums))}
		ts.plans[shape] = p
	}
	ts.planShape, ts.plan = shape, p
	return p
}

func newTableState(d clickhouse.Dialect, a *clickhouse.Agreed) *tableState {
	ts := &tableState{RowLayout: clickhouse.NewRowLayout(d, a), agreed: a, label: clickhouse.QuoteQualified(a.Target),
		shape: make(map[int16]*desclog.Column, len(a.Shape))}
	for i := range a.Shape {
		ts.shape[a.Shape[i].Num] = &a.Shape[i]
	}
	if ts.Layout == clickhouse.LayoutPhysical {
		ts.zero = make([]any, len(a.Columns))
		for i, mc := range a.Columns {
			// A value every column can hold (ConvertValue of Zero): the
			// marker's values are never read.
			ts.zero[i], _ = clickhouse.ConvertValue(mc.Spec, clickhouse.Zero)
		}
	}
	return ts
}

// putTID puts a physical table's row identity into the open row.
func (ts *tableState) putTID(filenode uint32, block uint32, off uint16) {
	b := ts.pending()
	clickhouse.PutValue(b, ts.FileIdx, filenode)
	clickhouse.PutValue(b, ts.FileIdx+1, block)
	clickhouse.PutValue(b, ts.FileIdx+2, off)
}

// putVersion puts the change's version columns (_lsn, _xid, the commit
// time, _is_deleted) into the open row.
func (ts *tableState) putVersion(c change, deleted bool) {
	b := ts.pending()
	clickhouse.PutValue(b, ts.LSNIdx, uint64(c.lsn))
	clickhouse.PutValue(b, ts.XIDIdx, c.xid)
	if ts.Cols[ts.TSIdx].Name == clickhouse.ColCommitTS {
		clickhouse.PutValue(b, ts.TSIdx, c.commitTime.UTC())
	} else {
		clickhouse.PutValue(b, ts.TSIdx, uint64(c.commitTime.UnixMicro()))
	}
	var del uint8
	if deleted {
		del = 1
	}
	clickhouse.PutValue(b, ts.DelIdx, del)
}

// deletedAt reports whether pending row i is a delete marker.
func (ts *tableState) deletedAt(i int) bool {
	v, _ := clickhouse.ValueOf[uint8](ts.block, i, ts.DelIdx)
	return v == 1
}

// lsnAt is pending row i's _lsn.
func (ts *tableState) lsnAt(i int) uint64 {
	v, _ := clickhouse.ValueOf[uint64](ts.block, i, ts.LSNIdx)
	return v
}

// sameKeyAt reports whether pending row i has key's sorting-key values
// (key in the table's column layout; false for a table without a key:
// its rows are a change log).
func (ts *tableState) sameKeyAt(i int, key []any) bool {
	if len(ts.KeyIdx) == 0 {
		return false
	}
	for _, k := range ts.KeyIdx {
		if !equalValue(ts.block.Value(i, k), key[k]) {
			return false
		}
	}
	return true
}

// findLatest returns the newest pending row with key's values, skipping
// the delete marker at skipLSN (the first half of a key-changing update
// being written).
func (ts *tableState) findLatest(key []any, skipLSN uint64) []any {
	for r := ts.rowCount() - 1; r >= 0; r-- {
		if ts.sameKeyAt(r, key) && !(ts.deletedAt(r) && ts.lsnAt(r) == skipLSN) {
			return ts.block.Row(r)
		}
	}
	return nil
}

// endRow ends the open row. An upsert right after a delete marker of the
// same key at the same LSN (REPLICA IDENTITY FULL logs every update as the
// pair) replaces the marker: both would carry the same version, and which
// of two equal versions ReplacingMergeTree keeps is not specified.
func (ts *tableState) endRow() error {
	b := ts.block
	if err := b.EndRow(); err != nil {
		return fmt.Errorf("%s: %w", ts.label, err)
	}
	n := b.Len()
	if n > 1 && !ts.deletedAt(n-1) && ts.deletedAt(n-2) && ts.lsnAt(n-2) == ts.lsnAt(n-1) && len(ts.KeyIdx) > 0 &&
		ts.sameKeyAt(n-2, b.Row(n-1)) {
		b.Remove(n - 2)
	}
	return nil
}

// reset empties the pending rows, keeping the block's buffers.
func (ts *tableState) reset() {
	if ts.block != nil {
		ts.block.Truncate(0)
	}
}

// addMarker adds a physical table's delete of tuple (block, off) of
// filenode, at c's version: zero values, _is_deleted = 1.
func (ts *tableState) addMarker(c change, filenode, block uint32, off uint16) error {
	b := ts.pending()
	for i := range ts.agreed.Columns {
		b.PutConverted(i, ts.zero[i])
	}
	ts.putVersion(c, true)
	ts.putTID(filenode, block, off)
	return ts.endRow()
}
