package clickhouse

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/walshadow/walshadow/internal/desclog"
)

func arrayCol(num int16, name string, notNull bool) desclog.Column {
	c := array(oidText, -1, "text[]", notNull)
	c.Num, c.Name = num, name
	return c
}

// TestPhysicalAndLogical: a Nullable array is its array column then its
// NULL flag; Logical folds a row read back into one value per spec.
func TestPhysicalAndLogical(t *testing.T) {
	elem := ColumnType{Type: "String", Repr: ReprString}
	arr := ColumnType{Type: "Array(Nullable(String))", Repr: ReprArray, Elem: &elem}
	cols := []ColumnSpec{
		{Name: "id", Type: ColumnType{Type: "Int32", Repr: ReprInt}},
		{Name: "tags", Type: arr, Nullable: true},
		{Name: "must", Type: arr},
		{Name: "preset", Type: arr, Nullable: true, Default: "CAST([] AS Array(Nullable(String)))"},
	}
	var got []string
	for _, p := range Physical(cols) {
		got = append(got, p.definition())
	}
	want := []string{"`id` Int32", "`tags` Array(Nullable(String))", "`tags__is_null` UInt8 DEFAULT 1", "`must` Array(Nullable(String))",
		"`preset` Array(Nullable(String)) DEFAULT CAST([] AS Array(Nullable(String)))", "`preset__is_null` UInt8 DEFAULT 0"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Physical:\n%q\nwant\n%q", got, want)
	}
	a := "a"
	empty := []*string{}
	row := Logical(cols, []any{int32(1), empty, uint8(1), []*string{&a}, empty, uint8(0)})
	if !reflect.DeepEqual(row, []any{int32(1), nil, []*string{&a}, empty}) {
		t.Errorf("Logical = %#v", row)
	}
	plain := cols[:1]
	if p := Physical(plain); &p[0] != &plain[0] {
		t.Error("Physical copied a list without NULL flags")
	}

	// The block writes NULL as [] with the flag set, '{}' as [] without.
	b := NewBlock(cols)
	for _, r := range [][]any{{int64(1), nil, "{}", "{x}"}, {int64(2), "{}", "{NULL}", nil}} {
		for i, v := range r {
			if err := b.Put(i, v); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.EndRow(); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := b.typedColumns(); ok {
		t.Error("a block with a NULL flag went a column at a time")
	}
	for i, want := range []string{"[1 [] 1 [] [x] 0]", "[2 [] 0 [<nil>] [] 1]"} {
		r, err := b.physicalRow(i)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(strings.Fields(showRow(r)), " "); got != want {
			t.Errorf("physical row %d = %s, want %s", i, got, want)
		}
	}
}

func showRow(r []any) string {
	parts := make([]string, len(r))
	for i, v := range r {
		switch x := v.(type) {
		case []*string:
			var elems []string
			for _, e := range x {
				if e == nil {
					elems = append(elems, "<nil>")
				} else {
					elems = append(elems, *e)
				}
			}
			parts[i] = "[" + strings.Join(elems, ",") + "]"
		default:
			parts[i] = fmt.Sprint(v)
		}
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// TestReconcileNullFlagPairs: a nullable array's flag is added, renamed and
// dropped with its array; a name it would take is refused.
func TestReconcileNullFlagPairs(t *testing.T) {
	start := rel([]int16{1}, intCol(1, "id", true), arrayCol(2, "tags", false), arrayCol(3, "gone", false))
	next := rel([]int16{1}, intCol(1, "id", true), arrayCol(2, "labels", false), droppedCol(3), arrayCol(4, "added", false))
	for _, tc := range []struct {
		d     Dialect
		stmts []string
	}{
		{Legacy1816, []string{
			"ALTER TABLE `mirror`.`demo.users` DROP COLUMN `gone`",
			"ALTER TABLE `mirror`.`demo.users` DROP COLUMN `gone__is_null`",
			"ALTER TABLE `mirror`.`demo.users` ADD COLUMN `added` Array(Nullable(String))",
			"ALTER TABLE `mirror`.`demo.users` ADD COLUMN `added__is_null` UInt8 DEFAULT 1",
		}},
		{Modern, []string{
			"ALTER TABLE `mirror`.`demo.users` DROP COLUMN IF EXISTS `gone`",
			"ALTER TABLE `mirror`.`demo.users` DROP COLUMN IF EXISTS `gone__is_null`",
			"ALTER TABLE `mirror`.`demo.users` RENAME COLUMN IF EXISTS `tags` TO `labels`",
			"ALTER TABLE `mirror`.`demo.users` RENAME COLUMN IF EXISTS `tags__is_null` TO `labels__is_null`",
			"ALTER TABLE `mirror`.`demo.users` ADD COLUMN IF NOT EXISTS `added` Array(Nullable(String))",
			"ALTER TABLE `mirror`.`demo.users` ADD COLUMN IF NOT EXISTS `added__is_null` UInt8 DEFAULT 1",
		}},
	} {
		t.Run(tc.d.Version.String(), func(t *testing.T) {
			prev, ch := evolve(t, tc.d, TableConfig{}, start)
			p := reconcile(t, tc.d, TableConfig{}, prev, ch, next)
			wantStatements(t, p, tc.stmts...)
			again := reconcile(t, tc.d, TableConfig{}, p.Agreed, chAfter(tc.d, p.Agreed), next)
			wantStatements(t, again)
			// A flag missing on ClickHouse is healed alone.
			ch = chAfter(tc.d, p.Agreed)
			kept := ch.Columns[:0]
			for _, c := range ch.Columns {
				if c.Name != "added__is_null" {
					kept = append(kept, c)
				}
			}
			ch.Columns = kept
			healed := reconcile(t, tc.d, TableConfig{}, p.Agreed, ch, next)
			if len(healed.Statements) != 1 || !strings.Contains(healed.Statements[0], "ADD COLUMN") || !strings.Contains(healed.Statements[0], "`added__is_null` UInt8") {
				t.Errorf("healing a missing flag: %q", healed.Statements)
			}
		})
	}

	// Names: a column named like another's flag, either way round: the
	// later one (in attnum order) lands apart.
	for _, tc := range []struct {
		shape *desclog.Descriptor
		want  []string
	}{
		{rel([]int16{1}, intCol(1, "id", true), arrayCol(2, "tags", false), textCol(3, "tags__is_null")),
			[]string{"id", "tags", "tags__is_null", "tags__is_null__pg"}},
		{rel([]int16{1}, intCol(1, "id", true), textCol(2, "tags__is_null"), arrayCol(3, "tags", false)),
			[]string{"id", "tags__is_null", "tags__pg", "tags__pg__is_null"}},
	} {
		p, err := Reconcile(Legacy1816, "mirror", TableConfig{}, nil, CHTable{}, tc.shape)
		if err != nil {
			t.Fatalf("colliding flag: %v", err)
		}
		var got []string
		for _, m := range p.Agreed.Columns {
			for _, c := range Physical([]ColumnSpec{m.Spec}) {
				got = append(got, c.Name)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("colliding flag: ClickHouse columns %q, want %q", got, tc.want)
		}
	}
	// Renamed onto a name another column's flag has: kept.
	before := rel([]int16{1}, intCol(1, "id", true), arrayCol(2, "tags", false), textCol(3, "x"))
	after := rel([]int16{1}, intCol(1, "id", true), arrayCol(2, "tags", false), textCol(3, "tags__is_null"))
	prev, ch := evolve(t, Modern, TableConfig{}, before)
	p := reconcile(t, Modern, TableConfig{}, prev, ch, after)
	wantStatements(t, p)
	if len(p.Notes) != 1 || !strings.Contains(p.Notes[0], "is taken by another column") {
		t.Errorf("notes %q", p.Notes)
	}
}

// TestReconcileRekeyNullFlag: a rebuild under a new key copies a nullable
// array's flag, and groups a change log's images by it too.
func TestReconcileRekeyNullFlag(t *testing.T) {
	before := rel(nil, intCol(1, "id", true), arrayCol(2, "tags", false))
	after := rel([]int16{1}, intCol(1, "id", true), arrayCol(2, "tags", false))
	prev, ch := evolve(t, Legacy1816, TableConfig{ChangeLog: true}, before)
	p := reconcile(t, Legacy1816, TableConfig{}, prev, ch, after)
	var insert string
	for _, s := range p.Statements {
		if strings.HasPrefix(s, "INSERT INTO") {
			insert = s
		}
	}
	if !strings.Contains(insert, "(`id`, `tags`, `tags__is_null`, `_lsn`") || !strings.Contains(insert, "SELECT `id`, `tags`, `tags__is_null`, max(`_lsn`)") ||
		!strings.Contains(insert, "GROUP BY `id`, `tags`, `tags__is_null` HAVING") {
		t.Errorf("rekey copy: %s", insert)
	}
}
