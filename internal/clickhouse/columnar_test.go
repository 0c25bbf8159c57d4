package clickhouse

import (
	"reflect"
	"testing"
	"time"
)

func TestColumnar(t *testing.T) {
	ts := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	cols := []ColumnSpec{{Name: "id"}, {Name: "note", Nullable: true}, {Name: "at"}, {Name: "n", Nullable: true}}
	rows := [][]any{
		{int32(1), "a", ts, int64(7)},
		{int32(2), nil, ts.Add(time.Second), nil},
	}
	block, ok := columnar(cols, rows)
	if !ok {
		t.Fatal("columnar refused a block of known types")
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
	rows2 := [][]any{{"x"}, {"y"}}
	b2, _ := columnar([]ColumnSpec{{Nullable: true}}, rows2)
	if p := b2[0].([]*string); *p[0] != "x" || *p[1] != "y" {
		t.Errorf("pointers alias: %q %q", *p[0], *p[1])
	}

	for name, bad := range map[string][][]any{
		"mixed types":         {{int32(1)}, {int64(2)}},
		"NULL, not Nullable":  {{int32(1)}, {nil}},
		"only NULLs":          {{nil}, {nil}},
		"a type it leaves be": {{[]string{"a"}}},
	} {
		nullable := name == "only NULLs"
		if _, ok := columnar([]ColumnSpec{{Nullable: nullable}}, bad); ok {
			t.Errorf("%s: columnar built a block", name)
		}
	}
}
