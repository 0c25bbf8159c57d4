package clickhouse

// RowLayout is where a replicated relation's values go in a row of its
// ClickHouse table, derived entirely from its agreement: the mapped
// columns in agreed order, then the synthetic ones. The output's writer
// and the initial load both build rows in it.
type RowLayout struct {
	Cols     []ColumnSpec  // the insert's column list: mapped, then synthetic
	ByAttnum map[int16]int // mapped source attnum → index in Cols
	KeyIdx   []int         // indexes in Cols of the sorting key
	Layout   Layout
	LSNIdx   int
	XIDIdx   int
	TSIdx    int
	DelIdx   int
	SeqIdx   int // _seq of a change log, else -1
	// FileIdx, then the block and offset after it: a physical table's
	// _filenode, _block, _offset (-1 otherwise).
	FileIdx int
}

// NewRowLayout is the row layout of the table agreed as a, rendered for d.
func NewRowLayout(d Dialect, a *Agreed) RowLayout {
	rl := RowLayout{ByAttnum: make(map[int16]int, len(a.Columns))}
	byName := map[string]int{}
	for i, mc := range a.Columns {
		rl.ByAttnum[mc.Attnum] = i
		rl.Cols = append(rl.Cols, mc.Spec)
		byName[mc.Spec.Name] = i
	}
	rl.Layout = LayoutOf(a.OrderBy)
	for _, name := range a.OrderBy {
		if i, ok := byName[name]; ok {
			rl.KeyIdx = append(rl.KeyIdx, i)
		}
	}
	base := len(rl.Cols)
	rl.Cols = append(rl.Cols, TableSyntheticColumns(d, rl.Layout)...)
	rl.LSNIdx, rl.XIDIdx, rl.TSIdx, rl.DelIdx, rl.SeqIdx, rl.FileIdx = base, base+1, base+2, base+3, -1, -1
	switch rl.Layout {
	case LayoutChangeLog:
		rl.SeqIdx = base + 4
	case LayoutPhysical:
		rl.FileIdx = base + 4
		rl.KeyIdx = []int{base + 4, base + 5, base + 6}
	}
	return rl
}

// Mapped is the number of mapped columns (Cols[:Mapped()]).
func (rl *RowLayout) Mapped() int { return rl.LSNIdx }

// SetTID writes a physical table's row identity into row.
func (rl *RowLayout) SetTID(row []any, filenode uint32, block uint32, off uint16) {
	row[rl.FileIdx], row[rl.FileIdx+1], row[rl.FileIdx+2] = filenode, block, off
}

// ValueSize approximates a converted value's bytes (for sealing batches
// of rows).
func ValueSize(v any) int {
	switch x := v.(type) {
	case string:
		return len(x)
	case *string:
		if x != nil {
			return len(*x)
		}
	case []byte:
		return len(x)
	}
	return 8
}
