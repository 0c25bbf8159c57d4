package output

import (
	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/desclog"
)

// tableState is one replicated relation as the output writes it: derived
// entirely from its durable agreement (the store's Agreed), rebuilt whenever
// that changes, plus the rows not yet inserted.
type tableState struct {
	agreed   *clickhouse.Agreed
	label    string                    // `db`.`table`, for metrics and errors
	cols     []clickhouse.ColumnSpec   // the insert's column list: mapped, then synthetic
	byAttnum map[int16]int             // mapped source attnum → index in cols
	shape    map[int16]*desclog.Column // the agreed source shape by attnum
	keyIdx   []int                     // indexes in cols of the sorting key
	layout   clickhouse.Layout
	lsnIdx   int
	xidIdx   int
	tsIdx    int
	delIdx   int
	seqIdx   int // _seq of a change log, else -1
	// fileIdx, then the block and offset after it: a physical table's
	// _filenode, _block, _offset (-1 otherwise).
	fileIdx int
	// zero are the mapped columns' zero values (a delete marker's).
	zero []any

	rows  [][]any
	bytes int
	// slab is where newRow cuts rows from: one allocation for many rows.
	slab []any
	// plans caches, per row shape, each payload column name's index in
	// cols (-1: not replicated); planShape/plan is the last one used.
	plans     map[*rowShape]map[string]int
	planShape *rowShape
	plan      map[string]int
}

// rowSlabRows is how many rows newRow allocates at once.
const rowSlabRows = 256

// newRow is a zeroed row of len(cols) values. Rows share slabs, never
// reused: a row kept past its flush (a deferred row, a prior version)
// stays valid.
func (ts *tableState) newRow() []any {
	n := len(ts.cols)
	if len(ts.slab) < n {
		ts.slab = make([]any, n*rowSlabRows)
	}
	row := ts.slab[:n:n]
	ts.slab = ts.slab[n:]
	return row
}

// planOf is the name → index cache of a row shape. The agreement a
// tableState is built from never changes under it, so an index found once
// holds for every row of the shape.
func (ts *tableState) planOf(shape *rowShape) map[string]int {
	if ts.planShape == shape {
		return ts.plan
	}
	if ts.plans == nil {
		ts.plans = map[*rowShape]map[string]int{}
	}
	p := ts.plans[shape]
	if p == nil {
		p = make(map[string]int, len(shape.attnums))
		ts.plans[shape] = p
	}
	ts.planShape, ts.plan = shape, p
	return p
}

func newTableState(d clickhouse.Dialect, a *clickhouse.Agreed) *tableState {
	ts := &tableState{agreed: a, label: clickhouse.QuoteQualified(a.Target),
		byAttnum: make(map[int16]int, len(a.Columns)), shape: make(map[int16]*desclog.Column, len(a.Shape))}
	byName := map[string]int{}
	for i, mc := range a.Columns {
		ts.byAttnum[mc.Attnum] = i
		ts.cols = append(ts.cols, mc.Spec)
		byName[mc.Spec.Name] = i
	}
	for i := range a.Shape {
		ts.shape[a.Shape[i].Num] = &a.Shape[i]
	}
	ts.layout = clickhouse.LayoutOf(a.OrderBy)
	for _, name := range a.OrderBy {
		if i, ok := byName[name]; ok {
			ts.keyIdx = append(ts.keyIdx, i)
		}
	}
	base := len(ts.cols)
	ts.cols = append(ts.cols, clickhouse.TableSyntheticColumns(d, ts.layout)...)
	ts.lsnIdx, ts.xidIdx, ts.tsIdx, ts.delIdx, ts.seqIdx, ts.fileIdx = base, base+1, base+2, base+3, -1, -1
	switch ts.layout {
	case clickhouse.LayoutChangeLog:
		ts.seqIdx = base + 4
	case clickhouse.LayoutPhysical:
		ts.fileIdx = base + 4
		ts.keyIdx = []int{base + 4, base + 5, base + 6}
		ts.zero = make([]any, len(a.Columns))
		for i, mc := range a.Columns {
			// A value every column can hold (ConvertValue of Zero): the
			// marker's values are never read.
			ts.zero[i], _ = clickhouse.ConvertValue(mc.Spec, clickhouse.Zero)
		}
	}
	return ts
}

// setTID writes a physical table's row identity into row.
func (ts *tableState) setTID(row []any, filenode uint32, block uint32, off uint16) {
	row[ts.fileIdx], row[ts.fileIdx+1], row[ts.fileIdx+2] = filenode, block, off
}

// deleted reports whether a pending row is a delete marker.
func (ts *tableState) deleted(row []any) bool {
	v, _ := row[ts.delIdx].(uint8)
	return v == 1
}

func (ts *tableState) rowLSN(row []any) uint64 {
	v, _ := row[ts.lsnIdx].(uint64)
	return v
}

// sameKey reports whether two rows have equal sorting-key values (false
// for a table without a key: its rows are a change log).
func (ts *tableState) sameKey(a, b []any) bool {
	if len(ts.keyIdx) == 0 {
		return false
	}
	for _, i := range ts.keyIdx {
		if !equalValue(a[i], b[i]) {
			return false
		}
	}
	return true
}

// findLatest returns the newest pending row with key's values (a row of
// the same shape as the pending ones), skipping the delete marker at
// skipLSN (the first half of a key-changing update being written).
func (ts *tableState) findLatest(key []any, skipLSN uint64) []any {
	for r := len(ts.rows) - 1; r >= 0; r-- {
		row := ts.rows[r]
		if ts.sameKey(row, key) && !(ts.deleted(row) && ts.rowLSN(row) == skipLSN) {
			return row
		}
	}
	return nil
}

// add appends a row. An upsert right after a delete marker of the same key
// at the same LSN (REPLICA IDENTITY FULL logs every update as the pair)
// replaces the marker: both would carry the same version, and which of two
// equal versions ReplacingMergeTree keeps is not specified.
func (ts *tableState) add(row []any, size int) {
	if n := len(ts.rows); n > 0 && !ts.deleted(row) {
		last := ts.rows[n-1]
		if ts.deleted(last) && ts.rowLSN(last) == ts.rowLSN(row) && ts.sameKey(last, row) {
			ts.rows = ts.rows[:n-1]
		}
	}
	if ts.rows == nil {
		ts.rows = make([][]any, 0, 1024)
	}
	ts.rows = append(ts.rows, row)
	ts.bytes += size
}

func (ts *tableState) reset() {
	ts.rows = nil
	ts.bytes = 0
}

// deleteMarker is a physical table's delete of tuple (block, off) of
// filenode, at row's version: its key, zero values, _is_deleted = 1.
func (ts *tableState) deleteMarker(row []any, filenode, block uint32, off uint16) []any {
	m := ts.newRow()
	for i := range ts.agreed.Columns {
		m[i] = ts.zero[i]
	}
	copy(m[ts.lsnIdx:ts.delIdx], row[ts.lsnIdx:ts.delIdx])
	m[ts.delIdx] = uint8(1)
	ts.setTID(m, filenode, block, off)
	return m
}
