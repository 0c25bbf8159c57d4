package clickhouse

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/shopspring/decimal"
)

func TestBlockTypedColumns(t *testing.T) {
	ts := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	cols := []ColumnSpec{{Name: "id"}, {Name: "note", Nullable: true}, {Name: "at"}, {Name: "n", Nullable: true}}
	b, err := BlockOf(cols, [][]any{
		{int32(1), "a", ts, int64(7)},
		{int32(2), nil, ts.Add(time.Second), nil},
	})
	if err != nil {
		t.Fatal(err)
	}
	block, ok := b.typedColumns()
	if !ok {
		t.Fatal("typedColumns refused a block of known types")
	}
	if got := block[0].([]int32); !reflect.DeepEqual(got, []int32{1, 2}) {
		t.Errorf("id = %v", got)
	}
	notes := block[1].([]*string)
	if len(notes) != 2 || notes[0] == nil || *notes[0] != "a" || notes[1] != nil {
		t.Errorf("note = %v", notes)
	}
	if got := block[2].([]time.Time); len(got) != 2 || !got[1].Equal(ts.Add(time.Second)) {
		t.Errorf("at = %v", got)
	}
	ns := block[3].([]*int64)
	if ns[0] == nil || *ns[0] != 7 || ns[1] != nil {
		t.Errorf("n = %v", ns)
	}
	// Each pointer has its own value.
	b2, _ := BlockOf([]ColumnSpec{{Nullable: true}}, [][]any{{"x"}, {nil}, {"y"}})
	c2, _ := b2.typedColumns()
	if p := c2[0].([]*string); *p[0] != "x" || p[1] != nil || *p[2] != "y" {
		t.Errorf("pointers alias: %v", p)
	}
	// A Nullable String or number column without a NULL goes as the plain
	// slice; one of another type keeps the pointers.
	b4, _ := BlockOf([]ColumnSpec{{Nullable: true}, {Nullable: true}}, [][]any{{"x", true}, {"y", false}})
	c4, _ := b4.typedColumns()
	if got, ok := c4[0].([]string); !ok || !reflect.DeepEqual(got, []string{"x", "y"}) {
		t.Errorf("Nullable String without NULLs = %#v, want []string", c4[0])
	}
	if got, ok := c4[1].([]*bool); !ok || len(got) != 2 || !*got[0] || *got[1] {
		t.Errorf("Nullable Bool without NULLs = %#v, want []*bool", c4[1])
	}
	// NULLs before the first value are NULLs of the column's type.
	b3, _ := BlockOf([]ColumnSpec{{Nullable: true}}, [][]any{{nil}, {nil}, {int16(3)}})
	c3, ok := b3.typedColumns()
	if !ok {
		t.Fatal("typedColumns refused a Nullable column that starts with NULLs")
	}
	if p := c3[0].([]*int16); len(p) != 3 || p[0] != nil || p[1] != nil || *p[2] != 3 {
		t.Errorf("leading NULLs: %v", p)
	}
	if got := b3.Row(0); got[0] != nil {
		t.Errorf("row 0 = %v, want NULL", got)
	}

	for name, rows := range map[string][][]any{
		"mixed types":         {{int32(1)}, {int64(2)}},
		"NULL, not Nullable":  {{int32(1)}, {nil}},
		"only NULLs":          {{nil}, {nil}},
		"a type it leaves be": {{[]string{"a"}}},
		"decimal":             {{decimal.New(1, 2)}},
	} {
		nullable := name == "only NULLs"
		b, err := BlockOf([]ColumnSpec{{Nullable: nullable}}, rows)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := b.typedColumns(); ok {
			t.Errorf("%s: typedColumns built a block", name)
		}
		// The row-wise path gets the values as they were put.
		for i, row := range rows {
			if got := b.Row(i); !reflect.DeepEqual(got, row) {
				t.Errorf("%s: row %d = %#v, want %#v", name, i, got, row)
			}
		}
	}
	if _, err := BlockOf(cols, [][]any{{int32(1)}}); err == nil {
		t.Error("BlockOf took a row of 1 value for 4 columns")
	}
}

// TestBlockPutMatchesConvertValue: Put's conversions without ConvertValue
// store what ConvertValue returns, and refuse what it refuses.
func TestBlockPutMatchesConvertValue(t *testing.T) {
	specs := []ColumnSpec{
		{Name: "i16", Type: ColumnType{Type: "Int16", Repr: ReprInt}},
		{Name: "i32", Type: ColumnType{Type: "Int32", Repr: ReprInt}},
		{Name: "i64", Type: ColumnType{Type: "Int64", Repr: ReprInt}},
		{Name: "u32", Type: ColumnType{Type: "UInt32", Repr: ReprUInt32}},
		{Name: "s", Type: ColumnType{Type: "String", Repr: ReprString}},
		{Name: "f64", Type: ColumnType{Type: "Float64", Repr: ReprFloat}},
		{Name: "f32", Type: ColumnType{Type: "Float32", Repr: ReprFloat}},
		{Name: "ni32", Type: ColumnType{Type: "Int32", Repr: ReprInt}, Nullable: true},
		{Name: "ns", Type: ColumnType{Type: "String", Repr: ReprString}, Nullable: true},
	}
	values := []any{int64(0), int64(-7), int64(300), int64(math.MaxInt16 + 1), int64(math.MinInt32 - 1), int64(math.MaxInt64),
		"12", "x", 1.5, 1e300, float32(2.5), json.Number("42"), true, nil, Zero, []byte("b")}
	for _, spec := range specs {
		for _, v := range values {
			want, wantErr := ConvertValue(spec, v)
			b := NewBlock([]ColumnSpec{spec})
			err := b.Put(0, v)
			if (err != nil) != (wantErr != nil) {
				t.Errorf("%s %#v: Put error %v, ConvertValue error %v", spec.Name, v, err, wantErr)
				continue
			}
			if err != nil {
				if err.Error() != wantErr.Error() {
					t.Errorf("%s %#v: Put error %q, ConvertValue's %q", spec.Name, v, err, wantErr)
				}
				if b.Filled(0) {
					t.Errorf("%s %#v: a refused value filled the column", spec.Name, v)
				}
				continue
			}
			if err := b.EndRow(); err != nil {
				t.Fatal(err)
			}
			if got := b.Value(0, 0); !reflect.DeepEqual(got, want) {
				t.Errorf("%s %#v: Put stored %#v (%T), ConvertValue returns %#v (%T)", spec.Name, v, got, got, want, want)
			}
		}
	}
}

func TestBlockRows(t *testing.T) {
	cols := []ColumnSpec{
		{Name: "k", Type: ColumnType{Type: "Int32", Repr: ReprInt}},
		{Name: "v", Type: ColumnType{Type: "String", Repr: ReprString}, Nullable: true},
		{Name: "_lsn", Type: ColumnType{Type: "UInt64", Repr: ReprInt}},
	}
	b := NewBlock(cols)
	put := func(k int64, v any, lsn uint64) {
		t.Helper()
		if err := b.Put(0, k); err != nil {
			t.Fatal(err)
		}
		if err := b.Put(1, v); err != nil {
			t.Fatal(err)
		}
		PutValue(b, 2, lsn)
		if err := b.EndRow(); err != nil {
			t.Fatal(err)
		}
	}
	put(1, "a", 10)
	put(2, nil, 20)
	put(3, "ccc", 30)
	if b.Len() != 3 || b.Bytes() != 8+1+8+8+8+8+8+3+8 {
		t.Errorf("Len %d Bytes %d", b.Len(), b.Bytes())
	}
	// An open row given up on.
	if err := b.Put(0, int64(4)); err != nil {
		t.Fatal(err)
	}
	if !b.Filled(0) || b.Filled(1) {
		t.Errorf("Filled: %v %v, want true false", b.Filled(0), b.Filled(1))
	}
	if got := b.Value(b.Len(), 1); got != nil {
		t.Errorf("the open row's unfilled column reads %#v, want nil", got)
	}
	if err := b.EndRow(); err == nil {
		t.Error("EndRow ended a row without all its columns")
	}
	b.Truncate(b.Len())
	if b.Filled(0) {
		t.Error("Truncate(Len()) left the open row's value")
	}
	b.Remove(1)
	want := [][]any{{int32(1), "a", uint64(10)}, {int32(3), "ccc", uint64(30)}}
	for i := range want {
		if got := b.Row(i); !reflect.DeepEqual(got, want[i]) {
			t.Errorf("row %d = %#v, want %#v", i, got, want[i])
		}
	}
	put(5, "e", 50)
	c, ok := b.typedColumns()
	if !ok {
		t.Fatal("typedColumns refused")
	}
	if got := c[0].([]int32); !reflect.DeepEqual(got, []int32{1, 3, 5}) {
		t.Errorf("k = %v", got)
	}
	if got := c[1].([]string); !reflect.DeepEqual(got, []string{"a", "ccc", "e"}) { // (its NULL row removed)
		t.Errorf("v = %v", got)
	}
	// A value of another type boxes the column: the rows keep their values.
	PutValue(b, 0, "not an int")
	if got := b.Value(3, 0); got != "not an int" {
		t.Errorf("boxed value = %#v", got)
	}
	if got := b.Value(0, 0); got != int32(1) {
		t.Errorf("earlier value after boxing = %#v", got)
	}
	b.Truncate(0)
	if b.Len() != 0 || b.Bytes() != 0 {
		t.Errorf("after Truncate(0): Len %d Bytes %d", b.Len(), b.Bytes())
	}
}

// TestBlockLeadingNulls: a column whose first values are NULL takes its
// type from the first value, put either way.
func TestBlockLeadingNulls(t *testing.T) {
	spec := ColumnSpec{Name: "n", Type: ColumnType{Type: "Int32", Repr: ReprInt}, Nullable: true}
	for _, put := range []func(b *Block){
		func(b *Block) { b.Put(0, int64(5)) },
		func(b *Block) { b.PutConverted(0, int32(5)) },
		func(b *Block) { PutValue(b, 0, int32(5)) },
	} {
		b := NewBlock([]ColumnSpec{spec})
		for range 2 {
			b.Put(0, nil)
			b.EndRow()
		}
		put(b)
		if err := b.EndRow(); err != nil {
			t.Fatal(err)
		}
		c, ok := b.typedColumns()
		if !ok {
			t.Fatal("typedColumns refused")
		}
		if p := c[0].([]*int32); len(p) != 3 || p[0] != nil || p[1] != nil || p[2] == nil || *p[2] != 5 {
			t.Errorf("column = %v", p)
		}
	}
}

// TestBlockNullFlagsDropped: a NULL put in a column and truncated away
// leaves no NULL flag behind: later rows read their values and the column
// goes as a plain slice again.
func TestBlockNullFlagsDropped(t *testing.T) {
	b := NewBlock([]ColumnSpec{{Name: "n", Type: ColumnType{Type: "Int32", Repr: ReprInt}}})
	b.Put(0, int64(1))
	b.EndRow()
	b.PutConverted(0, nil) // (a deferred row's placeholder)
	b.Truncate(b.Len())
	b.Put(0, int64(2))
	if err := b.EndRow(); err != nil {
		t.Fatal(err)
	}
	c, ok := b.typedColumns()
	if !ok {
		t.Fatal("typedColumns refused after the NULL was dropped")
	}
	if got := c[0].([]int32); !reflect.DeepEqual(got, []int32{1, 2}) {
		t.Errorf("column = %v", got)
	}
	if len(b.cols[0].nulls) != 0 {
		t.Errorf("NULL flags kept: %v", b.cols[0].nulls)
	}
}
