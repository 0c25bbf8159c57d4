package clickhouse

import (
	"fmt"
	"math"
	"time"
)

// Block is the rows of one insert held as columns, each of its values'
// own Go type ([]int32, []string, ... plus a NULL flag per row when the
// column is Nullable): what clickhouse-go appends a column at a time,
// with no value boxed in an `any` on the way. The writer fills a row a
// column at a time, in any column order (Put, PutConverted, PutValue),
// then ends it (EndRow); a row it gives up on is dropped with
// Truncate(Len()).
//
// A column takes the Go type of its first value as ConvertValue returns it
// (string, the integer and float widths, bool, time.Time); a value of
// another type later, or a column of a type outside that list (Decimal,
// UUID, arrays, ...), keeps the column's values boxed, and such a column
// makes the insert go row by row. Put converts the decoder's common
// values (int64 into an integer column, a string into a String) without
// ConvertValue's boxing; anything else goes through ConvertValue, so a
// value reads the same either way.
type Block struct {
	specs []ColumnSpec
	cols  []blockColumn
	rows  int // ended rows
	bytes int
}

// blockColumn is one column: its values and, when Nullable, which are
// NULL.
type blockColumn struct {
	vals  columnValues // nil until the first non-NULL value sets the type
	nulls []bool       // per value (Nullable columns)
	n     int          // values held (rows, plus the open row's when put)
	fast  fastKind
	// empty is a Nullable array's [], what its NULLs are sent as (nil
	// for other columns).
	empty any
}

// columnValues is one column's values, of one Go type.
type columnValues interface {
	// put appends v when it is of the column's type.
	put(v any) bool
	putZero()
	value(i int) any
	truncate(n int)
	remove(i int)
	// typed is the first n values as clickhouse-go's Column.Append takes
	// them: []T, or []*T (nil for NULL) when nulls is not nil.
	typed(n int, nulls []bool) any
}

// NewBlock is an empty block of cols.
func NewBlock(cols []ColumnSpec) *Block {
	b := &Block{specs: cols, cols: make([]blockColumn, len(cols))}
	for i := range cols {
		b.cols[i].fast = fastKindOf(cols[i].Type)
		if cols[i].NullFlag() != "" {
			b.cols[i].empty, _ = zeroValue(cols[i].Type) // nil (no element type): physicalRow refuses the row
		}
	}
	return b
}

// Columns are the block's columns.
func (b *Block) Columns() []ColumnSpec { return b.specs }

// Len is the ended rows.
func (b *Block) Len() int { return b.rows }

// Bytes approximates the ended and open rows' data (a string its length,
// any other value 8), for sealing blocks by size.
func (b *Block) Bytes() int { return b.bytes }

// Filled reports whether the open row has column col.
func (b *Block) Filled(col int) bool { return b.cols[col].n > b.rows }

// Put appends v, a decoded value (ConvertValue's input), to column col of
// the open row, converted as ConvertValue converts it.
func (b *Block) Put(col int, v any) error {
	c := &b.cols[col]
	switch c.fast {
	case fastString:
		if x, ok := v.(string); ok && putAs(c, x) {
			b.added(c, false)
			b.bytes += len(x) - 8
			return nil
		}
	case fastInt64:
		if x, ok := v.(int64); ok && putAs(c, x) {
			b.added(c, false)
			return nil
		}
	case fastInt32:
		if x, ok := v.(int64); ok && x >= math.MinInt32 && x <= math.MaxInt32 && putAs(c, int32(x)) {
			b.added(c, false)
			return nil
		}
	case fastInt16:
		if x, ok := v.(int64); ok && x >= math.MinInt16 && x <= math.MaxInt16 && putAs(c, int16(x)) {
			b.added(c, false)
			return nil
		}
	case fastFloat64:
		if x, ok := v.(float64); ok && putAs(c, x) {
			b.added(c, false)
			return nil
		}
	}
	// (What is out of range is refused there.)
	cv, err := ConvertValue(b.specs[col], v)
	if err != nil {
		return err
	}
	b.PutConverted(col, cv)
	return nil
}

// fastKind is the decoded values Put stores without ConvertValue: the
// decoder's int64 into an integer column, float64 into Float64, a string
// into a String of text.
type fastKind uint8

const (
	fastNone fastKind = iota
	fastString
	fastInt16
	fastInt32
	fastInt64
	fastFloat64
)

func fastKindOf(t ColumnType) fastKind {
	switch {
	case t.Repr == ReprString:
		return fastString
	case t.Repr == ReprInt && t.Type == "Int16":
		return fastInt16
	case t.Repr == ReprInt && t.Type == "Int32":
		return fastInt32
	case t.Repr == ReprInt && t.Type == "Int64":
		return fastInt64
	case t.Repr == ReprFloat && t.Type == "Float64":
		return fastFloat64
	}
	return fastNone
}

// putAs appends x to c when c holds (or can start holding) T.
func putAs[T any](c *blockColumn, x T) bool {
	if c.vals == nil {
		// (Zeros for the NULLs before the first value.)
		c.vals = &typedValues[T]{vals: make([]T, c.n, max(c.n, 16))}
	}
	t, ok := c.vals.(*typedValues[T])
	if ok {
		t.vals = append(t.vals, x)
	}
	return ok
}

// PutValue appends x, a value of the Go type ConvertValue returns for the
// column (a synthetic column's uint64 _lsn, say), to column col of the
// open row.
func PutValue[T any](b *Block, col int, x T) {
	c := &b.cols[col]
	if putAs(c, x) {
		b.added(c, false)
		return
	}
	b.PutConverted(col, x)
}

// PutConverted appends v, a value as ConvertValue returns it (nil: NULL),
// to column col of the open row.
func (b *Block) PutConverted(col int, v any) {
	c := &b.cols[col]
	if v == nil {
		if c.vals == nil {
			// The type is not known yet: NULLs so far are counted, and
			// stored once it is.
			c.nulls = append(c.nulls, true)
			c.n++
			return
		}
		c.vals.putZero()
		b.added(c, true)
		return
	}
	if c.vals == nil {
		c.vals = valuesFor(v)
		for range c.n {
			c.vals.putZero() // the NULLs before the first value
		}
	}
	if !c.vals.put(v) {
		c.vals = boxed(c.vals, c.n)
		c.vals.put(v)
	}
	b.added(c, false)
	if s, ok := v.(string); ok {
		b.bytes += len(s) - 8
	}
}

// added accounts for a value just appended to c. NULL flags are kept only
// from a column's first NULL among its held values on (Truncate drops them
// with the rows), so a column without NULLs costs none.
func (b *Block) added(c *blockColumn, null bool) {
	if len(c.nulls) > 0 || null {
		for len(c.nulls) < c.n {
			c.nulls = append(c.nulls, false)
		}
		c.nulls = append(c.nulls, null)
	}
	c.n++
	b.bytes += 8
}

// EndRow ends the open row, which must have every column.
func (b *Block) EndRow() error {
	for i := range b.cols {
		if b.cols[i].n != b.rows+1 {
			return fmt.Errorf("a row of the block for column %s has %d values where %d rows are written", QuoteIdent(b.specs[i].Name), b.cols[i].n-b.rows, 1)
		}
	}
	b.rows++
	return nil
}

// Truncate keeps the first n ended rows (dropping the open row's values).
func (b *Block) Truncate(n int) {
	for i := range b.cols {
		c := &b.cols[i]
		if c.n <= n {
			continue
		}
		if c.vals != nil {
			c.vals.truncate(n)
		}
		if len(c.nulls) > n {
			c.nulls = c.nulls[:n]
		}
		if !containsTrue(c.nulls) {
			c.nulls = c.nulls[:0] // no NULL left: no flags to keep
		}
		c.n = n
	}
	if n < b.rows {
		b.rows = n
	}
	if n == 0 {
		b.bytes = 0
	}
}

// Remove drops ended row i (the open row, if any, moves up with the rest).
func (b *Block) Remove(i int) {
	for j := range b.cols {
		c := &b.cols[j]
		if c.vals != nil {
			c.vals.remove(i)
		}
		if i < len(c.nulls) {
			c.nulls = append(c.nulls[:i], c.nulls[i+1:]...)
		}
		c.n--
	}
	b.rows--
}

// Value is column col of row i (ended or open) as ConvertValue returns it;
// nil for NULL, and for a column the open row does not have yet.
func (b *Block) Value(i, col int) any {
	c := &b.cols[col]
	if i >= c.n || i < len(c.nulls) && c.nulls[i] || c.vals == nil {
		return nil
	}
	return c.vals.value(i)
}

// ValueOf is column col of row i when it is a T (without boxing it when
// the column holds T).
func ValueOf[T any](b *Block, i, col int) (T, bool) {
	c := &b.cols[col]
	if t, ok := c.vals.(*typedValues[T]); ok && i < c.n && !(i < len(c.nulls) && c.nulls[i]) {
		return t.vals[i], true
	}
	v, ok := b.Value(i, col).(T)
	return v, ok
}

// Row is row i's values, as ConvertValue returns them.
func (b *Block) Row(i int) []any {
	row := make([]any, len(b.cols))
	for col := range b.cols {
		row[col] = b.Value(i, col)
	}
	return row
}

// physicalRow is row i as the table's ClickHouse columns (Physical): a
// Nullable array's NULL is [] in the array and 1 in its NULL flag.
func (b *Block) physicalRow(i int) ([]any, error) {
	row := make([]any, 0, len(b.cols)+1)
	for col := range b.cols {
		v := b.Value(i, col)
		spec := b.specs[col]
		if spec.NullFlag() == "" {
			row = append(row, v)
			continue
		}
		null := uint8(0)
		if v == nil {
			null, v = 1, b.cols[col].empty
			if v == nil {
				return nil, fmt.Errorf("column %s: array type %s without an element type", QuoteIdent(spec.Name), spec.Type.Type)
			}
		}
		row = append(row, v, null)
	}
	return row, nil
}

// typedColumns is every column as clickhouse-go's Column.Append takes it,
// or false when one is boxed or only NULLs (the block goes row by row).
// Arrays are boxed: a Nullable one's NULL flag is made by physicalRow.
func (b *Block) typedColumns() ([]any, bool) {
	out := make([]any, len(b.cols))
	for i := range b.cols {
		c := &b.cols[i]
		if c.vals == nil || b.specs[i].NullFlag() != "" {
			return nil, false
		}
		hasNull := containsTrue(c.nulls[:min(len(c.nulls), b.rows)])
		var nulls []bool
		switch {
		case !b.specs[i].Nullable && hasNull:
			return nil, false // NULL in a column that is not Nullable: the row-wise path says so
		case b.specs[i].Nullable && (hasNull || !plainIntoNullable(c.vals)):
			nulls = c.nulls
			for len(nulls) < b.rows {
				nulls = append(nulls, false)
			}
		}
		col := c.vals.typed(b.rows, nulls)
		if col == nil {
			return nil, false
		}
		out[i] = col
	}
	return out, true
}

// plainIntoNullable reports whether a Nullable column without a NULL can
// take vals' plain slice ([]T, not []*T): clickhouse-go's String and
// numeric columns answer such a slice with a NULL flag per value (Bool,
// for one, answers none, which would leave the Nullable's map short).
func plainIntoNullable(vals columnValues) bool {
	switch vals.(type) {
	case *typedValues[string], *typedValues[int8], *typedValues[int16], *typedValues[int32], *typedValues[int64],
		*typedValues[uint8], *typedValues[uint16], *typedValues[uint32], *typedValues[uint64],
		*typedValues[float32], *typedValues[float64]:
		return true
	}
	return false
}

func containsTrue(bs []bool) bool {
	for _, b := range bs {
		if b {
			return true
		}
	}
	return false
}

// valuesFor is the column for values of v's Go type.
func valuesFor(v any) columnValues {
	switch v.(type) {
	case string:
		return &typedValues[string]{}
	case int8:
		return &typedValues[int8]{}
	case int16:
		return &typedValues[int16]{}
	case int32:
		return &typedValues[int32]{}
	case int64:
		return &typedValues[int64]{}
	case uint8:
		return &typedValues[uint8]{}
	case uint16:
		return &typedValues[uint16]{}
	case uint32:
		return &typedValues[uint32]{}
	case uint64:
		return &typedValues[uint64]{}
	case float32:
		return &typedValues[float32]{}
	case float64:
		return &typedValues[float64]{}
	case bool:
		return &typedValues[bool]{}
	case time.Time:
		return &typedValues[time.Time]{}
	}
	return &boxedValues{}
}

// boxed is the first n values of c, boxed (a column that met a value of
// another type).
func boxed(c columnValues, n int) columnValues {
	if b, ok := c.(*boxedValues); ok {
		return b
	}
	b := &boxedValues{vals: make([]any, n)}
	for i := range n {
		b.vals[i] = c.value(i)
	}
	return b
}

// typedValues is a column of T.
type typedValues[T any] struct{ vals []T }

func (t *typedValues[T]) put(v any) bool {
	x, ok := v.(T)
	if ok {
		t.vals = append(t.vals, x)
	}
	return ok
}

func (t *typedValues[T]) putZero() {
	var zero T
	t.vals = append(t.vals, zero)
}

func (t *typedValues[T]) value(i int) any { return t.vals[i] }

func (t *typedValues[T]) truncate(n int) {
	clear(t.vals[n:]) // let go of what strings and times point to
	t.vals = t.vals[:n]
}

func (t *typedValues[T]) remove(i int) {
	t.vals = append(t.vals[:i], t.vals[i+1:]...)
}

func (t *typedValues[T]) typed(n int, nulls []bool) any {
	if nulls == nil {
		return t.vals[:n]
	}
	ptrs := make([]*T, n)
	for i := range n {
		if !nulls[i] {
			ptrs[i] = &t.vals[i]
		}
	}
	return ptrs
}

// boxedValues is a column of values of a type appended row by row.
type boxedValues struct{ vals []any }

func (b *boxedValues) put(v any) bool        { b.vals = append(b.vals, v); return true }
func (b *boxedValues) putZero()              { b.vals = append(b.vals, nil) }
func (b *boxedValues) value(i int) any       { return b.vals[i] }
func (b *boxedValues) typed(int, []bool) any { return nil }
func (b *boxedValues) remove(i int)          { b.vals = append(b.vals[:i], b.vals[i+1:]...) }
func (b *boxedValues) truncate(n int)        { clear(b.vals[n:]); b.vals = b.vals[:n] }
