package clickhouse

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/walshadow/walshadow/internal/desclog"
)

// col is a live column of a hand-built descriptor.
func col(num int16, name string, oid uint32, typmod int32, typeName string, notNull bool) desclog.Column {
	return desclog.Column{Num: num, Name: name, TypeOid: oid, TypMod: typmod, TypeName: typeName, TypeKind: 'b', NotNull: notNull, Len: -1}
}

func intCol(num int16, name string, notNull bool) desclog.Column {
	return col(num, name, oidInt4, -1, "integer", notNull)
}

func textCol(num int16, name string) desclog.Column {
	return col(num, name, oidText, -1, "text", false)
}

func droppedCol(num int16) desclog.Column {
	return desclog.Column{Num: num, Name: "........pg.dropped." + string(rune('0'+num)) + "........", Dropped: true}
}

func rel(key []int16, cols ...desclog.Column) *desclog.Descriptor {
	return &desclog.Descriptor{Oid: 16384, DbOid: 5, Namespace: "demo", Name: "users", Kind: 'r', ReplIdent: 'd', Columns: cols, KeyAttnums: key}
}

// chFor is what ClickHouse reports for a table holding specs plus the
// synthetic columns.
func chFor(d Dialect, specs ...ColumnSpec) CHTable {
	t := CHTable{Exists: true}
	for _, s := range append(slices.Clone(specs), SyntheticColumns(d)...) {
		t.Columns = append(t.Columns, CHColumn{Name: s.Name, Type: s.TypeSQL()})
	}
	return t
}

// chAfter is the ClickHouse table an applied plan leaves.
func chAfter(d Dialect, a *Agreed) CHTable {
	specs := make([]ColumnSpec, len(a.Columns))
	for i, m := range a.Columns {
		specs[i] = m.Spec
	}
	t := chFor(d, Physical(specs)...)
	if len(a.OrderBy) == 0 {
		t.Columns = append(t.Columns, CHColumn{Name: ColSeq, Type: "UInt32"})
	}
	return t
}

func reconcile(t *testing.T, d Dialect, cfg TableConfig, prev *Agreed, ch CHTable, shape *desclog.Descriptor) Plan {
	t.Helper()
	p, err := Reconcile(d, "mirror", cfg, prev, ch, shape)
	if err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	if p.Agreed == nil {
		t.Fatal("Reconcile returned no agreement")
	}
	return p
}

func mappedNames(a *Agreed) []string {
	var names []string
	for _, m := range a.Columns {
		names = append(names, m.Source+"→"+m.Spec.Name+":"+m.Spec.TypeSQL())
	}
	return names
}

func wantStatements(t *testing.T, p Plan, want ...string) {
	t.Helper()
	if !slices.Equal(p.Statements, want) {
		t.Errorf("statements:\n%s\nwant:\n%s", strings.Join(p.Statements, "\n---\n"), strings.Join(want, "\n---\n"))
	}
}

func wantMapped(t *testing.T, a *Agreed, want ...string) {
	t.Helper()
	if got := mappedNames(a); !slices.Equal(got, want) {
		t.Errorf("mapped columns %q, want %q", got, want)
	}
}

func users() *desclog.Descriptor {
	return rel([]int16{1}, intCol(1, "id", true), textCol(2, "name"), textCol(3, "email"), textCol(4, "internal_notes"))
}

func TestReconcileFirstSightCreates(t *testing.T) {
	created := col(5, "created", oidDate, -1, "date", false)
	shape := rel([]int16{1}, intCol(1, "id", true), textCol(2, "name"), droppedCol(3), col(4, "amount", oidNumeric, NumericTypmod(10, 2), "numeric(10,2)", true), created)
	cfg := TableConfig{PartitionBy: "tuple()", Settings: []Setting{{Name: "index_granularity", Value: "8192"}}}
	p := reconcile(t, Legacy1816, cfg, nil, CHTable{}, shape)
	wantStatements(t, p,
		"CREATE DATABASE IF NOT EXISTS `mirror`",
		"CREATE TABLE IF NOT EXISTS `mirror`.`demo.users`\n(\n"+
			"    `id` Int32,\n    `name` Nullable(String),\n    `amount` Decimal(10, 2),\n    `created` Nullable(Int32),\n"+
			"    `_lsn` UInt64,\n    `_xid` UInt32,\n    `_commit_ts_us` UInt64,\n    `_is_deleted` UInt8\n)\n"+
			"ENGINE = ReplacingMergeTree(`_lsn`)\nPARTITION BY tuple()\nORDER BY (`id`)\nSETTINGS index_granularity = 8192")
	a := p.Agreed
	if a.Target != (Target{Database: "mirror", Table: "demo.users"}) || a.Oid != 16384 || a.DbOid != 5 || a.Schema != "demo" || a.Table != "users" {
		t.Errorf("agreement identity = %+v", a)
	}
	if len(a.Shape) != 4 || !slices.Equal(a.KeyAttnums, []int16{1}) || !slices.Equal(a.OrderBy, []string{"id"}) {
		t.Errorf("shape %d columns (want the 4 live ones), key %v, order by %v", len(a.Shape), a.KeyAttnums, a.OrderBy)
	}
	if !a.Columns[0].Key || a.Columns[1].Key {
		t.Errorf("key flags: %+v", a.Columns)
	}
	if a.Columns[3].Spec.Type.Repr != ReprUnixDays {
		t.Errorf("legacy date repr = %d, want ReprUnixDays", a.Columns[3].Spec.Type.Repr)
	}
	if len(p.Refused) != 0 || len(p.Notes) != 0 {
		t.Errorf("refused %v, notes %v", p.Refused, p.Notes)
	}
}

func TestReconcileFirstSightConfigured(t *testing.T) {
	cfg := TableConfig{
		Database: "crm", Table: "people",
		ColumnNames: map[string]string{"name": "full_name"},
		Types:       map[string]string{"id": "Int64", "email": "Nullable(UUID)"},
		OrderBy:     []string{"full_name"},
	}
	shape := users()
	shape.Columns[1].NotNull = true
	p := reconcile(t, Modern, cfg, nil, CHTable{}, shape)
	if p.Agreed.Target != (Target{Database: "crm", Table: "people"}) {
		t.Errorf("target %+v", p.Agreed.Target)
	}
	wantMapped(t, p.Agreed, "id→id:Int64", "name→full_name:String", "email→email:Nullable(UUID)", "internal_notes→internal_notes:Nullable(String)")
	if !slices.Equal(p.Agreed.OrderBy, []string{"full_name"}) || p.Agreed.Columns[0].Key || !p.Agreed.Columns[1].Key {
		t.Errorf("order by %v, columns %+v", p.Agreed.OrderBy, p.Agreed.Columns)
	}
	if !strings.Contains(p.Statements[1], "ORDER BY (`full_name`)") || !strings.Contains(p.Statements[1], "ReplacingMergeTree(`_lsn`, `_is_deleted`)") {
		t.Errorf("create: %s", p.Statements[1])
	}
}

func TestReconcileFirstSightErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  TableConfig
		ch   CHTable
		want string
	}{
		{"key excluded", TableConfig{ExcludeColumns: []string{"id"}}, CHTable{}, "replica identity column 1 is not mapped"},
		{"include unknown", TableConfig{IncludeColumns: []string{"id", "nope"}}, CHTable{}, `includes column "nope"`},
		{"order by unmapped", TableConfig{OrderBy: []string{"ghost"}}, CHTable{}, `sorting key column "ghost" is not a mapped column`},
		{"order by nullable", TableConfig{OrderBy: []string{"id"}, Types: map[string]string{"id": "Nullable(Int32)"}}, CHTable{}, `sorting key column "id" is Nullable`},
		{"name clash", TableConfig{ColumnNames: map[string]string{"email": "name"}}, CHTable{}, `would both be ClickHouse column "name"`},
		{"bad strategy", TableConfig{DropStrategy: "shred"}, CHTable{}, `drop strategy "shred"`},
		{"foreign table", TableConfig{}, CHTable{Exists: true, Columns: []CHColumn{{Name: "id", Type: "Int32"}}}, "has no column `_lsn`"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Reconcile(Legacy1816, "mirror", tc.cfg, nil, tc.ch, users())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
	if _, err := Reconcile(Legacy1816, "mirror", TableConfig{ColumnNames: map[string]string{"email": "_xid"}}, nil, CHTable{}, users()); err == nil || !strings.Contains(err.Error(), "walshadow reserves") {
		t.Errorf("configured onto a synthetic name: %v", err)
	}
}

func TestReconcileAdopt(t *testing.T) {
	d := Legacy1816
	ch := chFor(d,
		ColumnSpec{Name: "note_by_hand", Type: ColumnType{Type: "String"}},
		ColumnSpec{Name: "name", Type: ColumnType{Type: "String"}, Nullable: true},
		ColumnSpec{Name: "id", Type: ColumnType{Type: "Int32"}},
		ColumnSpec{Name: "email", Type: ColumnType{Type: "Int64"}},
	)
	p := reconcile(t, d, TableConfig{}, nil, ch, users())
	wantStatements(t, p, "ALTER TABLE `mirror`.`demo.users` ADD COLUMN `internal_notes` Nullable(String)")
	// ClickHouse's order first, the added column last; the hand-made column untouched.
	wantMapped(t, p.Agreed, "name→name:Nullable(String)", "id→id:Int32", "email→email:Nullable(String)", "internal_notes→internal_notes:Nullable(String)")
	if len(p.Refused) != 1 {
		t.Fatalf("refused %v, want the email type mismatch", p.Refused)
	}
	var mismatch *TypeMismatchError
	if !errors.As(p.Refused[0], &mismatch) || !errors.Is(p.Refused[0], ErrTypeChange) || mismatch.CHType != "Int64" || mismatch.WantType != "Nullable(String)" {
		t.Errorf("refusal %v", p.Refused[0])
	}

	// Modern: ADD COLUMN IF NOT EXISTS, and "Decimal(10,2)" spelled either way matches.
	amount := col(5, "amount", oidNumeric, NumericTypmod(10, 2), "numeric(10,2)", true)
	shape := rel([]int16{1}, intCol(1, "id", true), amount)
	ch = chFor(Modern, ColumnSpec{Name: "id", Type: ColumnType{Type: "Int32"}}, ColumnSpec{Name: "amount", Type: ColumnType{Type: "Decimal(10,2)"}})
	p = reconcile(t, Modern, TableConfig{}, nil, ch, shape)
	if len(p.Statements) != 0 || len(p.Refused) != 0 {
		t.Errorf("adopting an agreeing table: statements %q refused %v", p.Statements, p.Refused)
	}
}

// evolve is the previous agreement after a table was created for shape
// (as the caller would have Put it) and ClickHouse as it then is.
func evolve(t *testing.T, d Dialect, cfg TableConfig, shape *desclog.Descriptor) (*Agreed, CHTable) {
	t.Helper()
	p := reconcile(t, d, cfg, nil, CHTable{}, shape)
	return p.Agreed, chAfter(d, p.Agreed)
}

func TestReconcileAddRenameDrop(t *testing.T) {
	start := rel([]int16{1}, intCol(1, "id", true), textCol(2, "b"), textCol(3, "gone"), textCol(4, "keep"))
	next := rel([]int16{1}, intCol(1, "id", true), textCol(2, "c"), droppedCol(3), textCol(4, "keep"), intCol(5, "added", false))
	for _, tc := range []struct {
		d      Dialect
		stmts  []string
		mapped []string
		notes  int
	}{
		{Legacy1816, []string{
			"ALTER TABLE `mirror`.`demo.users` DROP COLUMN `gone`",
			"ALTER TABLE `mirror`.`demo.users` ADD COLUMN `added` Nullable(Int32)",
		}, []string{"id→id:Int32", "c→b:Nullable(String)", "keep→keep:Nullable(String)", "added→added:Nullable(Int32)"}, 1},
		{Modern, []string{
			"ALTER TABLE `mirror`.`demo.users` DROP COLUMN IF EXISTS `gone`",
			"ALTER TABLE `mirror`.`demo.users` RENAME COLUMN IF EXISTS `b` TO `c`",
			"ALTER TABLE `mirror`.`demo.users` ADD COLUMN IF NOT EXISTS `added` Nullable(Int32)",
		}, []string{"id→id:Int32", "c→c:Nullable(String)", "keep→keep:Nullable(String)", "added→added:Nullable(Int32)"}, 0},
	} {
		t.Run(tc.d.Version.String(), func(t *testing.T) {
			prev, ch := evolve(t, tc.d, TableConfig{}, start)
			p := reconcile(t, tc.d, TableConfig{}, prev, ch, next)
			wantStatements(t, p, tc.stmts...)
			wantMapped(t, p.Agreed, tc.mapped...)
			if len(p.Notes) != tc.notes {
				t.Errorf("notes %q, want %d", p.Notes, tc.notes)
			}
			if tc.notes > 0 && !strings.Contains(p.Notes[0], `column "b" of relation demo.users renamed to "c" on the source: kept as `+"`b`"+` (no RENAME COLUMN on 18.16.1)`) {
				t.Errorf("note %q", p.Notes[0])
			}
			if len(p.Agreed.Shape) != 4 || p.Agreed.Shape[1].Name != "c" {
				t.Errorf("agreed shape %+v", p.Agreed.Shape)
			}
			// Applied and reconciled again: nothing left to do.
			again := reconcile(t, tc.d, TableConfig{}, p.Agreed, chAfter(tc.d, p.Agreed), next)
			wantStatements(t, again)
			if !reflect.DeepEqual(again.Agreed, p.Agreed) {
				t.Errorf("second reconcile changed the agreement:\n%+v\n%+v", again.Agreed, p.Agreed)
			}
		})
	}
}

func TestReconcileRenameKeptCases(t *testing.T) {
	start := rel([]int16{1}, intCol(1, "id", true), textCol(2, "b"), textCol(3, "x"))
	for _, tc := range []struct {
		name string
		cfg  TableConfig
		next *desclog.Descriptor
		note string
	}{
		{"key column", TableConfig{}, rel([]int16{1}, intCol(1, "ident", true), textCol(2, "b"), textCol(3, "x")), "cannot rename a sorting key column"},
		{"configured name", TableConfig{ColumnNames: map[string]string{"b": "bee"}}, rel([]int16{1}, intCol(1, "id", true), textCol(2, "c"), textCol(3, "x")), "its ClickHouse name is not its source name's"},
		{"swap", TableConfig{}, rel([]int16{1}, intCol(1, "id", true), textCol(2, "x"), textCol(3, "b")), "is taken by another column"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prev, ch := evolve(t, Modern, tc.cfg, start)
			p := reconcile(t, Modern, tc.cfg, prev, ch, tc.next)
			for _, s := range p.Statements {
				if strings.Contains(s, "DROP") || strings.Contains(s, "ADD") {
					t.Errorf("a rename became %s", s)
				}
			}
			if len(p.Notes) == 0 || !strings.Contains(strings.Join(p.Notes, "\n"), tc.note) {
				t.Errorf("notes %q, want one containing %q", p.Notes, tc.note)
			}
			for i, m := range p.Agreed.Columns {
				if m.Spec.Name != prev.Columns[i].Spec.Name && tc.name != "swap" {
					t.Errorf("column %d renamed to %q", i, m.Spec.Name)
				}
			}
		})
	}
}

func TestReconcileDropErrors(t *testing.T) {
	prev, ch := evolve(t, Legacy1816, TableConfig{}, users())
	// Dropping the key column drops the primary key: nothing in ClickHouse
	// says where its rows live in the heap, so the table is reloaded under
	// its physical identity.
	p, err := Reconcile(Legacy1816, "mirror", TableConfig{}, prev, ch, rel(nil, droppedCol(1), textCol(2, "name"), textCol(3, "email"), textCol(4, "internal_notes")))
	if err != nil {
		t.Fatalf("dropping the key column: %v", err)
	}
	if len(p.Reload) != 1 || !strings.Contains(p.Reload[0].Error(), "keyed by their physical identity") {
		t.Errorf("dropping the key column: reload %v, want one naming the physical identity", p.Reload)
	}
	if all := strings.Join(p.Statements, "\n"); strings.Contains(all, "DROP COLUMN") || strings.Contains(all, "CREATE TABLE") {
		t.Errorf("dropping the key column planned %q, want nothing before the reload", p.Statements)
	}
	cfgPrev, cfgCH := evolve(t, Legacy1816, TableConfig{OrderBy: []string{"id"}}, users())
	_, err = Reconcile(Legacy1816, "mirror", TableConfig{OrderBy: []string{"id"}}, cfgPrev, cfgCH, rel(nil, droppedCol(1), textCol(2, "name"), textCol(3, "email"), textCol(4, "internal_notes")))
	if err == nil || !strings.Contains(err.Error(), "part of the sorting key") {
		t.Errorf("dropping the order_by column: %v", err)
	}
	_, err = Reconcile(Legacy1816, "mirror", TableConfig{OrderBy: []string{"name"}}, cfgPrev, cfgCH, users())
	if err == nil || !strings.Contains(err.Error(), "cannot change a sorting key") {
		t.Errorf("changing order_by: %v", err)
	}
	other := users()
	other.Oid++
	if _, err := Reconcile(Legacy1816, "mirror", TableConfig{}, prev, ch, other); err == nil {
		t.Error("reconciling against another relation's agreement succeeded")
	}
}

// A pinned subset of columns: only the source shape
// at agreement tells the excluded internal_notes from the added signup_ts.
func TestReconcilePinnedSubset(t *testing.T) {
	for _, cfg := range []TableConfig{
		{IncludeColumns: []string{"id", "name", "email"}},
		{ExcludeColumns: []string{"internal_notes"}},
	} {
		prev, ch := evolve(t, Legacy1816, cfg, users())
		wantMapped(t, prev, "id→id:Int32", "name→name:Nullable(String)", "email→email:Nullable(String)")
		if len(prev.Shape) != 4 {
			t.Errorf("agreed shape has %d columns, want all 4 (internal_notes included)", len(prev.Shape))
		}
		later := users()
		later.Columns = append(later.Columns, col(5, "signup_ts", oidTimestamptz, -1, "timestamp with time zone", false))
		p := reconcile(t, Legacy1816, cfg, prev, ch, later)
		wantStatements(t, p, "ALTER TABLE `mirror`.`demo.users` ADD COLUMN `signup_ts` Nullable(Int64)")
		wantMapped(t, p.Agreed, "id→id:Int32", "name→name:Nullable(String)", "email→email:Nullable(String)", "signup_ts→signup_ts:Nullable(Int64)")
		if m := p.Agreed.Columns[3]; m.Spec.Type.Repr != ReprUnixMicros {
			t.Errorf("signup_ts repr %d", m.Spec.Type.Repr)
		}
		// The table dropped on ClickHouse meanwhile: re-created with the subset.
		p = reconcile(t, Legacy1816, cfg, p.Agreed, CHTable{}, later)
		if len(p.Statements) != 2 || strings.Contains(p.Statements[1], "internal_notes") || !strings.Contains(p.Statements[1], "`signup_ts` Nullable(Int64)") {
			t.Errorf("re-create: %q", p.Statements)
		}
	}
	// An excluded column the source adds later stays out.
	cfg := TableConfig{ExcludeColumns: []string{"secret"}}
	prev, ch := evolve(t, Modern, cfg, users())
	later := users()
	later.Columns = append(later.Columns, textCol(5, "secret"))
	p := reconcile(t, Modern, cfg, prev, ch, later)
	wantStatements(t, p)
	if len(p.Agreed.Columns) != 4 || len(p.Agreed.Shape) != 5 {
		t.Errorf("excluded column: %d mapped, shape %d", len(p.Agreed.Columns), len(p.Agreed.Shape))
	}
}

func TestReconcileTypeChange(t *testing.T) {
	start := rel([]int16{1}, intCol(1, "id", true), intCol(2, "n", false), col(3, "v", oidVarchar, 14, "character varying(10)", false), intCol(4, "strict", true),
		col(5, "small", oidInt8, -1, "bigint", false))
	prev, ch := evolve(t, Legacy1816, TableConfig{}, start)
	next := rel([]int16{1}, intCol(1, "id", true), col(2, "n", oidInt8, -1, "bigint", false), col(3, "v", oidVarchar, 24, "character varying(20)", false), intCol(4, "strict", false),
		col(5, "small", oidInt4, -1, "integer", false))
	p := reconcile(t, Legacy1816, TableConfig{}, prev, ch, next)
	// n's Int32→Int64 and strict's DROP NOT NULL are exact; varchar(10)→(20)
	// is String either way; small's narrowing needs a reload.
	wantStatements(t, p,
		"ALTER TABLE `mirror`.`demo.users` MODIFY COLUMN `n` Nullable(Int64)",
		"ALTER TABLE `mirror`.`demo.users` MODIFY COLUMN `strict` Nullable(Int32)")
	if len(p.Refused) != 0 {
		t.Errorf("refused %v", p.Refused)
	}
	var change *TypeChangeError
	if len(p.Reload) != 1 || !errors.As(p.Reload[0], &change) || change.Column != "small" || change.OldType != "Nullable(Int64)" || change.NewType != "Nullable(Int32)" || change.Reason == "" {
		t.Fatalf("reload %v", p.Reload)
	}
	// The column to reload keeps its old mapping.
	wantMapped(t, p.Agreed, "id→id:Int32", "n→n:Nullable(Int64)", "v→v:Nullable(String)", "strict→strict:Nullable(Int32)", "small→small:Nullable(Int64)")
	if p.Agreed.Shape[1].TypeOid != oidInt8 {
		t.Error("the agreed shape is not the new source shape")
	}
	// SET NOT NULL keeps the Nullable column, silently.
	setNotNull := rel([]int16{1}, intCol(1, "id", true), intCol(2, "n", true), col(3, "v", oidVarchar, 14, "character varying(10)", false), intCol(4, "strict", true),
		col(5, "small", oidInt8, -1, "bigint", false))
	p = reconcile(t, Legacy1816, TableConfig{}, prev, ch, setNotNull)
	if len(p.Refused) != 0 || len(p.Reload) != 0 || len(p.Statements) != 0 || p.Agreed.Columns[1].Spec.TypeSQL() != "Nullable(Int32)" {
		t.Errorf("SET NOT NULL: refused %v reload %v statements %q mapping %v", p.Refused, p.Reload, p.Statements, mappedNames(p.Agreed))
	}
}

// TestReconcileCompositeAttributes: a column of a composite type whose
// attributes changed (same type oid; the descriptor's TypeName names the
// attributes) reloads the table: PostgreSQL reads the stored values anew.
func TestReconcileCompositeAttributes(t *testing.T) {
	pair := func(attrs string) desclog.Column {
		c := col(2, "p", 40001, -1, "pair ("+attrs+")", false)
		c.TypeKind = 'c'
		return c
	}
	prev, ch := evolve(t, Legacy1816, TableConfig{}, rel([]int16{1}, intCol(1, "id", true), pair("a integer")))
	p := reconcile(t, Legacy1816, TableConfig{}, prev, ch, rel([]int16{1}, intCol(1, "id", true), pair("b integer")))
	wantStatements(t, p)
	var change *TypeChangeError
	if len(p.Reload) != 1 || !errors.As(p.Reload[0], &change) || change.Column != "p" || !strings.Contains(change.Error(), "composite type's attributes changed") {
		t.Fatalf("reload %v, want one for column p", p.Reload)
	}
	// The same attributes: nothing.
	p = reconcile(t, Legacy1816, TableConfig{}, prev, ch, rel([]int16{1}, intCol(1, "id", true), pair("a integer")))
	if len(p.Reload) != 0 || len(p.Statements) != 0 {
		t.Errorf("unchanged composite: reload %v statements %q", p.Reload, p.Statements)
	}
}

func TestReconcileSelfHeal(t *testing.T) {
	start := rel([]int16{1}, intCol(1, "id", true), textCol(2, "b"))
	renamed := rel([]int16{1}, intCol(1, "id", true), textCol(2, "c"))
	prev, _ := evolve(t, Legacy1816, TableConfig{}, start)
	afterRename := reconcile(t, Legacy1816, TableConfig{}, prev, chAfter(Legacy1816, prev), renamed).Agreed

	// Table dropped on ClickHouse: CREATE with the agreed mapping (b kept).
	p := reconcile(t, Legacy1816, TableConfig{}, afterRename, CHTable{}, renamed)
	if len(p.Statements) != 2 || !strings.HasPrefix(p.Statements[1], "CREATE TABLE IF NOT EXISTS `mirror`.`demo.users`") || !strings.Contains(p.Statements[1], "`b` Nullable(String)") {
		t.Errorf("self-heal create: %q", p.Statements)
	}
	// A mapped column dropped on ClickHouse by hand: ADD it back.
	ch := chFor(Legacy1816, ColumnSpec{Name: "id", Type: ColumnType{Type: "Int32"}}, ColumnSpec{Name: "extra", Type: ColumnType{Type: "String"}})
	p = reconcile(t, Legacy1816, TableConfig{}, afterRename, ch, renamed)
	wantStatements(t, p, "ALTER TABLE `mirror`.`demo.users` ADD COLUMN `b` Nullable(String)")

	// A column the source dropped is already gone from ClickHouse: no DROP.
	dropped := rel([]int16{1}, intCol(1, "id", true), droppedCol(2))
	p = reconcile(t, Legacy1816, TableConfig{}, afterRename, chFor(Legacy1816, ColumnSpec{Name: "id", Type: ColumnType{Type: "Int32"}}), dropped)
	wantStatements(t, p)
	wantMapped(t, p.Agreed, "id→id:Int32")

	// A rename an earlier run already applied (crash before Put): adopt it.
	prevModern, _ := evolve(t, Modern, TableConfig{}, start)
	ch = chFor(Modern, ColumnSpec{Name: "id", Type: ColumnType{Type: "Int32"}}, ColumnSpec{Name: "c", Type: ColumnType{Type: "String"}, Nullable: true})
	p = reconcile(t, Modern, TableConfig{}, prevModern, ch, renamed)
	wantStatements(t, p)
	wantMapped(t, p.Agreed, "id→id:Int32", "c→c:Nullable(String)")
}

func TestReconcileTableRename(t *testing.T) {
	prev, ch := evolve(t, Legacy1816, TableConfig{}, users())
	moved := users()
	moved.Name = "members"
	p := reconcile(t, Legacy1816, TableConfig{}, prev, ch, moved)
	wantStatements(t, p, "RENAME TABLE `mirror`.`demo.users` TO `mirror`.`demo.members`")
	if p.Agreed.Target.Table != "demo.members" || p.Agreed.Table != "members" {
		t.Errorf("agreement %+v", p.Agreed)
	}
	// A configured table name does not follow the source.
	prev, ch = evolve(t, Legacy1816, TableConfig{Table: "people"}, users())
	p = reconcile(t, Legacy1816, TableConfig{Table: "people"}, prev, ch, moved)
	wantStatements(t, p)
}

// Warm vs cold: the same (prev, ch, shape) through a Store round trip
// gives byte-identical statements and agreement.
func TestReconcileWarmVsCold(t *testing.T) {
	cfg := TableConfig{ExcludeColumns: []string{"internal_notes"}, ColumnNames: map[string]string{"email": "mail"}, Types: map[string]string{"name": "String"}}
	shape := users()
	shape.Columns = append(shape.Columns, col(5, "born", oidDate, -1, "date", false), col(6, "tags", 1009, -1, "text[]", true))
	shape.Columns[5].ElemTypeOid = oidText
	missing := "2020-01-02"
	shape.Columns[4].HasMissing, shape.Columns[4].Missing = true, &missing
	later := rel([]int16{1}, intCol(1, "id", true), textCol(2, "full_name"), textCol(3, "email"), textCol(4, "internal_notes"), droppedCol(5), shape.Columns[5], intCol(7, "age", false))
	for _, d := range []Dialect{Legacy1816, Modern} {
		t.Run(d.Version.String(), func(t *testing.T) {
			prev, ch := evolve(t, d, cfg, shape)
			prev.ValidFrom = 0x1234
			store, err := OpenStore(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			if err := store.Put(prev); err != nil {
				t.Fatal(err)
			}
			reopened, err := OpenStore(store.dir)
			if err != nil {
				t.Fatal(err)
			}
			cold := reopened.Get(prev.Oid)
			if !reflect.DeepEqual(cold, prev) {
				t.Fatalf("store round trip:\n%+v\nwant\n%+v", cold, prev)
			}
			warmPlan := reconcile(t, d, cfg, prev, ch, later)
			coldPlan := reconcile(t, d, cfg, cold, ch, later)
			if len(warmPlan.Statements) == 0 {
				t.Fatal("the scenario plans no statements")
			}
			if !slices.Equal(warmPlan.Statements, coldPlan.Statements) {
				t.Errorf("statements differ:\n%q\n%q", warmPlan.Statements, coldPlan.Statements)
			}
			warmJSON, _ := json.Marshal(warmPlan.Agreed)
			coldJSON, _ := json.Marshal(coldPlan.Agreed)
			if string(warmJSON) != string(coldJSON) || !reflect.DeepEqual(warmPlan.Agreed, coldPlan.Agreed) {
				t.Errorf("agreements differ:\n%s\n%s", warmJSON, coldJSON)
			}
		})
	}
}

func TestPlanDropAndTruncate(t *testing.T) {
	prev, _ := evolve(t, Legacy1816, TableConfig{}, users())
	for _, tc := range []struct {
		strategy DropStrategy
		stmts    []string
		dropped  bool
		warn     bool
	}{
		{DropRetain, nil, true, false},
		{"", nil, true, false},
		{DropWarn, nil, true, true},
		{DropDrop, []string{"DROP TABLE IF EXISTS `mirror`.`demo.users`"}, false, false},
	} {
		stmts, next, note := PlanDrop(tc.strategy, prev)
		if !slices.Equal(stmts, tc.stmts) || (next != nil) != tc.dropped || (note != "") != tc.warn {
			t.Errorf("%q: statements %q, next %v, note %q", tc.strategy, stmts, next, note)
		}
		if next != nil && (!next.Dropped || prev.Dropped) {
			t.Errorf("%q: next.Dropped %v, prev mutated %v", tc.strategy, next.Dropped, prev.Dropped)
		}
	}
	if got := PlanTruncate(prev, 0x3000200); !slices.Equal(got, []string{"TRUNCATE TABLE IF EXISTS `mirror`.`demo.users`",
		"ALTER TABLE `mirror`.`demo.users` DELETE WHERE `_lsn` < 50332160"}) {
		t.Errorf("truncate: %q", got)
	}
	if got := PlanTruncate(nil, 1); got != nil {
		t.Errorf("truncate without agreement: %q", got)
	}
}

// sortedColumns: ALTER ADD COLUMN appends after the synthetic columns, so
// only the set of columns is comparable.
func sortedColumns(t CHTable) []CHColumn {
	cols := slices.Clone(t.Columns)
	slices.SortFunc(cols, func(a, b CHColumn) int { return strings.Compare(a.Name, b.Name) })
	return cols
}

// TestReconcileRekey: a primary key added to a table created without one
// (pgbench -i does this) rebuilds the change log as a ReplacingMergeTree
// ordered by the key, its rows copied, swapped in by one RENAME.
func TestReconcileRekey(t *testing.T) {
	keyless := rel(nil, intCol(1, "id", false), textCol(2, "name"))
	prev, ch := evolve(t, Legacy1816, TableConfig{ChangeLog: true}, keyless)
	if len(prev.OrderBy) != 0 {
		t.Fatalf("keyless table ordered by %v", prev.OrderBy)
	}
	keyed := rel([]int16{1}, intCol(1, "id", true), textCol(2, "name"))
	p := reconcile(t, Legacy1816, TableConfig{}, prev, ch, keyed)
	tbl := QuoteQualified(prev.Target)
	fresh := QuoteQualified(Target{Database: prev.Target.Database, Table: prev.Target.Table + "__rekey"})
	old := QuoteQualified(Target{Database: prev.Target.Database, Table: prev.Target.Table + "__rekey_old"})
	wantStatements(t, p,
		"DROP TABLE IF EXISTS "+fresh,
		"CREATE TABLE IF NOT EXISTS "+fresh+"\n(\n    `id` Int32,\n    `name` Nullable(String),\n    `_lsn` UInt64,\n    `_xid` UInt32,\n    `_commit_ts_us` UInt64,\n    `_is_deleted` UInt8\n)\nENGINE = ReplacingMergeTree(`_lsn`)\nORDER BY (`id`)",
		"INSERT INTO "+fresh+" (`id`, `name`, `_lsn`, `_xid`, `_commit_ts_us`, `_is_deleted`) SELECT assumeNotNull(`id`), `name`, max(`_lsn`), any(`_xid`), any(`_commit_ts_us`), toUInt8(0) FROM "+tbl+" FINAL GROUP BY `id`, `name` HAVING sum(if(`_is_deleted` = 1, -1, 1)) > 0",
		"RENAME TABLE "+tbl+" TO "+old+", "+fresh+" TO "+tbl,
		"DROP TABLE IF EXISTS "+old)
	wantMapped(t, p.Agreed, "id→id:Int32", "name→name:Nullable(String)")
	if strings.Join(p.Agreed.OrderBy, ",") != "id" {
		t.Errorf("order by %v", p.Agreed.OrderBy)
	}
}
