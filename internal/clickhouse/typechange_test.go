package clickhouse

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/walshadow/walshadow/internal/desclog"
)

// pg is a nullable source column v of a base type.
func pg(oid uint32, typmod int32, typeName string) desclog.Column {
	return desclog.Column{Num: 2, Name: "v", TypeOid: oid, TypMod: typmod, TypeName: typeName, TypeKind: 'b', Len: -1}
}

func notNull(c desclog.Column) desclog.Column {
	c.NotNull = true
	return c
}

// pgArray is a NOT NULL array column v (array type oid arrOid).
func pgArray(arrOid, elem uint32, typmod int32, typeName string) desclog.Column {
	c := pg(arrOid, typmod, typeName)
	c.ElemTypeOid, c.NotNull = elem, true
	return c
}

const (
	oidInt4Array    = 1007
	oidInt8Array    = 1016
	oidTextArray    = 1009
	oidVarcharArray = 1015
)

var (
	pgSmallint  = pg(oidInt2, -1, "smallint")
	pgInteger   = pg(oidInt4, -1, "integer")
	pgBigint    = pg(oidInt8, -1, "bigint")
	pgOid       = pg(oidOid, -1, "oid")
	pgReal      = pg(oidFloat4, -1, "real")
	pgDouble    = pg(oidFloat8, -1, "double precision")
	pgNumeric   = pg(oidNumeric, -1, "numeric")
	pgText      = pg(oidText, -1, "text")
	pgVarchar   = pg(oidVarchar, -1, "character varying")
	pgJSON      = pg(oidJSON, -1, "json")
	pgJSONB     = pg(oidJSONB, -1, "jsonb")
	pgTimestamp = pg(oidTimestamp, -1, "timestamp without time zone")
	pgTstz      = pg(oidTimestamptz, -1, "timestamp with time zone")
	pgDate      = pg(oidDate, -1, "date")
	pgBool      = pg(oidBool, -1, "boolean")
	pgUUID      = pg(oidUUID, -1, "uuid")
	pgBytea     = pg(oidBytea, -1, "bytea")
	pgInterval  = pg(oidInterval, -1, "interval")
)

func pgNumericPS(p, s int) desclog.Column {
	return pg(oidNumeric, NumericTypmod(p, s), fmt.Sprintf("numeric(%d,%d)", p, s))
}

func pgVarcharN(n int) desclog.Column {
	return pg(oidVarchar, int32(n+4), fmt.Sprintf("character varying(%d)", n))
}

func pgCharN(n int) desclog.Column {
	return pg(oidBpchar, int32(n+4), fmt.Sprintf("character(%d)", n))
}

func pgTimestampP(p int32) desclog.Column {
	return pg(oidTimestamp, p, fmt.Sprintf("timestamp(%d) without time zone", p))
}

func pgDomain(oid, base uint32, name string) desclog.Column {
	c := pg(oid, -1, name)
	c.TypeKind, c.BaseTypeOid = 'd', base
	return c
}

func pgEnum() desclog.Column {
	c := pg(90004, -1, "mood")
	c.TypeKind = 'e'
	return c
}

// typeChangeCase is one source change of column v; want is the action on
// Legacy1816 and on Modern.
type typeChangeCase struct {
	name          string
	before, after desclog.Column
	key           bool
	want          [2]TypeChangeAction
}

const (
	keep   = TypeChangeKeep
	modify = TypeChangeModify
	reload = TypeChangeReload
)

func both(a TypeChangeAction) [2]TypeChangeAction { return [2]TypeChangeAction{a, a} }

// typeChangeCases are the type changes users make: the table of doc.go.
func typeChangeCases() []typeChangeCase {
	return []typeChangeCase{
		{"int2 to int4", pgSmallint, pgInteger, false, both(modify)},
		{"int2 to int8", pgSmallint, pgBigint, false, both(modify)},
		{"int4 to int8", pgInteger, pgBigint, false, both(modify)},
		{"int8 to int4 (narrowing)", pgBigint, pgInteger, false, both(reload)},
		{"int4 to int2 (narrowing)", pgInteger, pgSmallint, false, both(reload)},
		{"int8 to int4, key column", notNull(pgBigint), notNull(pgInteger), true, both(reload)},
		{"int4 to int8, key column", notNull(pgInteger), notNull(pgBigint), true, both(reload)},
		{"oid to int8", pgOid, pgBigint, false, both(modify)},
		{"int4 to oid", pgInteger, pgOid, false, both(reload)},
		{"float4 to float8", pgReal, pgDouble, false, both(modify)},
		{"float8 to float4", pgDouble, pgReal, false, both(reload)},
		{"int2 to float4", pgSmallint, pgReal, false, both(modify)},
		{"int4 to float4", pgInteger, pgReal, false, both(reload)},
		{"int2 to float8", pgSmallint, pgDouble, false, both(modify)},
		{"int4 to float8", pgInteger, pgDouble, false, both(modify)},
		{"int8 to float8", pgBigint, pgDouble, false, both(reload)},
		{"float8 to numeric(20,4)", pgDouble, pgNumericPS(20, 4), false, both(reload)},
		{"numeric(10,2) to numeric(12,4) (Decimal widening)", pgNumericPS(10, 2), pgNumericPS(12, 4), false, both(modify)},
		{"numeric(10,2) to numeric(12,2)", pgNumericPS(10, 2), pgNumericPS(12, 2), false, both(modify)},
		{"numeric(10,2) to numeric(11,3)", pgNumericPS(10, 2), pgNumericPS(11, 3), false, both(modify)},
		{"numeric(10,2) to numeric(10,3) (fewer integer digits)", pgNumericPS(10, 2), pgNumericPS(10, 3), false, both(reload)},
		{"numeric(12,4) to numeric(10,2) (Decimal narrowing)", pgNumericPS(12, 4), pgNumericPS(10, 2), false, both(reload)},
		{"numeric(10,2) to numeric(12,1) (smaller scale)", pgNumericPS(10, 2), pgNumericPS(12, 1), false, both(reload)},
		{"numeric(10,2) to numeric", pgNumericPS(10, 2), pgNumeric, false, both(reload)},
		{"numeric to numeric(10,2)", pgNumeric, pgNumericPS(10, 2), false, both(reload)},
		{"numeric(30,2) to numeric(40,2)", pgNumericPS(30, 2), pgNumericPS(40, 2), false, [2]TypeChangeAction{reload, modify}},
		{"numeric(40,2) to numeric(45,2)", pgNumericPS(40, 2), pgNumericPS(45, 2), false, [2]TypeChangeAction{keep, modify}},
		{"numeric(40,2) to numeric(45,4)", pgNumericPS(40, 2), pgNumericPS(45, 4), false, [2]TypeChangeAction{reload, modify}},
		{"numeric(40,2) to numeric", pgNumericPS(40, 2), pgNumeric, false, [2]TypeChangeAction{keep, reload}},
		{"int4 to numeric(12,2)", pgInteger, pgNumericPS(12, 2), false, both(modify)},
		{"int4 to numeric(11,2)", pgInteger, pgNumericPS(11, 2), false, both(reload)},
		{"int8 to numeric(19,0)", pgBigint, pgNumericPS(19, 0), false, both(modify)},
		{"int4 to numeric", pgInteger, pgNumeric, false, both(reload)},
		{"numeric(10,0) to int8", pgNumericPS(10, 0), pgBigint, false, both(reload)},
		{"varchar(10) to varchar(20)", pgVarcharN(10), pgVarcharN(20), false, both(keep)},
		{"varchar(20) to varchar(10)", pgVarcharN(20), pgVarcharN(10), false, both(reload)},
		{"varchar(10) to text", pgVarcharN(10), pgText, false, both(keep)},
		{"varchar(10) to varchar", pgVarcharN(10), pgVarchar, false, both(keep)},
		{"text to varchar", pgText, pgVarchar, false, both(keep)},
		{"text to varchar(10)", pgText, pgVarcharN(10), false, both(reload)},
		{"char(10) to char(20)", pgCharN(10), pgCharN(20), false, both(reload)},
		{"char(10) to text", pgCharN(10), pgText, false, both(reload)},
		{"text to char(10)", pgText, pgCharN(10), false, both(reload)},
		{"json to jsonb", pgJSON, pgJSONB, false, both(reload)},
		{"jsonb to json", pgJSONB, pgJSON, false, both(keep)},
		{"json to text", pgJSON, pgText, false, both(keep)},
		{"jsonb to text", pgJSONB, pgText, false, both(keep)},
		{"text to json", pgText, pgJSON, false, both(keep)},
		{"text to jsonb", pgText, pgJSONB, false, both(reload)},
		{"enum to text", pgEnum(), pgText, false, [2]TypeChangeAction{keep, modify}},
		{"interval to text", pgInterval, pgText, false, both(reload)},
		{"int4 to text", pgInteger, pgText, false, both(reload)},
		{"uuid to text", pgUUID, pgText, false, both(reload)},
		{"bytea to text", pgBytea, pgText, false, both(reload)},
		{"text to int4", pgText, pgInteger, false, both(reload)},
		{"bool to int4", pgBool, pgInteger, false, both(reload)},
		{"timestamp to timestamptz", pgTimestamp, pgTstz, false, both(reload)},
		{"timestamptz to timestamp", pgTstz, pgTimestamp, false, both(reload)},
		{"timestamp(3) to timestamp", pgTimestampP(3), pgTimestamp, false, both(keep)},
		{"timestamp to timestamp(3)", pgTimestamp, pgTimestampP(3), false, both(reload)},
		{"date to timestamp", pgDate, pgTimestamp, false, both(reload)},
		{"domain over int4 to int4", pgDomain(90000, oidInt4, "posint"), pgInteger, false, both(keep)},
		{"int4 to domain over int4", pgInteger, pgDomain(90000, oidInt4, "posint"), false, both(keep)},
		{"int4 to domain over int8", pgInteger, pgDomain(90001, oidInt8, "bigposint"), false, both(modify)},
		{"varchar(10) to domain over varchar", pgVarcharN(10), pgDomain(90002, oidVarchar, "shortname"), false, both(reload)},
		{"DROP NOT NULL int4", notNull(pgInteger), pgInteger, false, both(modify)},
		{"DROP NOT NULL text", notNull(pgText), pgText, false, both(modify)},
		{"DROP NOT NULL with int4 to int8", notNull(pgInteger), pgBigint, false, both(modify)},
		{"DROP NOT NULL with varchar(10) to text", notNull(pgVarcharN(10)), pgText, false, both(modify)},
		{"DROP NOT NULL with int8 to int4", notNull(pgBigint), pgInteger, false, both(reload)},
		{"int4[] to int8[]", pgArray(oidInt4Array, oidInt4, -1, "integer[]"), pgArray(oidInt8Array, oidInt8, -1, "bigint[]"), false, both(reload)},
		{"varchar(10)[] to text[]", pgArray(oidVarcharArray, oidVarchar, 14, "character varying(10)[]"), pgArray(oidTextArray, oidText, -1, "text[]"), false, both(keep)},
		{"DROP NOT NULL int4[]", pgArray(oidInt4Array, oidInt4, -1, "integer[]"), func() desclog.Column {
			c := pgArray(oidInt4Array, oidInt4, -1, "integer[]")
			c.NotNull = false
			return c
		}(), false, both(modify)},
	}
}

// typeChangeShapes are relation demo.users before and after tc: id int4
// and v, keyed by id, or by v for a key case.
func typeChangeShapes(tc typeChangeCase) (before, after *desclog.Descriptor) {
	key := []int16{1}
	if tc.key {
		key = []int16{2}
	}
	id := intCol(1, "id", true)
	b, a := tc.before, tc.after
	b.Num, b.Name, a.Num, a.Name = 2, "v", 2, "v"
	return rel(key, id, b), rel(key, id, a)
}

// planTypeChange reconciles tc on d from the agreement that created the
// table for the old shape.
func planTypeChange(t *testing.T, d Dialect, cfg TableConfig, tc typeChangeCase) (prev *Agreed, p Plan) {
	t.Helper()
	before, after := typeChangeShapes(tc)
	prev, ch := evolve(t, d, cfg, before)
	return prev, reconcile(t, d, cfg, prev, ch, after)
}

func TestClassifyTypeChange(t *testing.T) {
	for i, d := range []Dialect{Legacy1816, Modern} {
		for _, tc := range typeChangeCases() {
			t.Run(d.Version.String()+"/"+tc.name, func(t *testing.T) {
				prev, p := planTypeChange(t, d, TableConfig{}, tc)
				if len(p.Refused) != 0 {
					t.Errorf("refused %v", p.Refused)
				}
				v := func(a *Agreed) MappedColumn {
					return a.Columns[slices.IndexFunc(a.Columns, func(m MappedColumn) bool { return m.Attnum == 2 })]
				}
				old, now := v(prev), v(p.Agreed)
				modifies := slices.ContainsFunc(p.Statements, func(s string) bool {
					return strings.Contains(s, " MODIFY COLUMN ") || strings.Contains(s, NullFlagSuffix+"` UInt8 DEFAULT 0")
				})
				got := keep
				switch {
				case len(p.Reload) > 0:
					got = reload
				case modifies:
					got = modify
				}
				if got != tc.want[i] {
					t.Fatalf("%s, want %s; statements %q, reload %v, notes %q", got, tc.want[i], p.Statements, p.Reload, p.Notes)
				}
				switch got {
				case keep:
					if len(p.Statements) != 0 || now.Spec.TypeSQL() != old.Spec.TypeSQL() {
						t.Errorf("kept column: statements %q, %s became %s", p.Statements, old.Spec.TypeSQL(), now.Spec.TypeSQL())
					}
				case modify:
					want := fmt.Sprintf("ALTER TABLE `mirror`.`demo.users` MODIFY COLUMN %s`v` %s", map[bool]string{true: "IF EXISTS "}[d.IfNotExistsColumns], now.Spec.TypeSQL())
					if now.Spec.NullFlag() != "" {
						// DROP NOT NULL of an array: its NULL flag, 0 for the rows so far.
						want = fmt.Sprintf("ALTER TABLE `mirror`.`demo.users` ADD COLUMN %s`v__is_null` UInt8 DEFAULT 0", map[bool]string{true: "IF NOT EXISTS "}[d.IfNotExistsColumns])
					}
					wantStatements(t, p, want)
					// The new mapping is the new shape's, as a first sight maps it.
					fresh := reconcile(t, d, TableConfig{}, nil, CHTable{}, after(tc)).Agreed
					if now.Spec.TypeSQL() != v(fresh).Spec.TypeSQL() || now.Spec.Type.Repr != v(fresh).Spec.Type.Repr {
						t.Errorf("modified to %s (repr %d), a first sight maps %s (repr %d)", now.Spec.TypeSQL(), now.Spec.Type.Repr, v(fresh).Spec.TypeSQL(), v(fresh).Spec.Type.Repr)
					}
					if len(p.Notes) != 1 || !strings.Contains(p.Notes[0], "is now "+now.Spec.TypeSQL()) {
						t.Errorf("notes %q", p.Notes)
					}
				case reload:
					if len(p.Statements) != 0 {
						t.Errorf("a reload planned statements %q", p.Statements)
					}
					var change *TypeChangeError
					if len(p.Reload) != 1 || !errors.As(p.Reload[0], &change) || !errors.Is(p.Reload[0], ErrTypeChange) || change.Reason == "" ||
						change.Column != "v" || change.OldSourceType != tc.before.TypeName || change.NewSourceType != tc.after.TypeName || change.OldType != old.Spec.TypeSQL() {
						t.Fatalf("reload %#v", p.Reload)
					}
					if !reflect.DeepEqual(now.Spec, old.Spec) {
						t.Errorf("the column to reload was remapped from %+v to %+v", old.Spec, now.Spec)
					}
					if !strings.Contains(change.Error(), "needs a reload") || strings.Contains(change.Error(), "not replicated") || strings.Contains(change.Error(), ": ;") {
						t.Errorf("error text %q", change.Error())
					}
				}
				if p.Agreed.Shape[1].TypeOid != tc.after.TypeOid {
					t.Error("the agreed shape is not the new source shape")
				}
				// Applied and reconciled again: nothing more.
				again := reconcile(t, d, TableConfig{}, p.Agreed, chAfter(d, p.Agreed), after(tc))
				if len(again.Statements) != 0 || len(again.Reload) != 0 || len(again.Refused) != 0 {
					t.Errorf("second reconcile: statements %q reload %v refused %v", again.Statements, again.Reload, again.Refused)
				}
			})
		}
	}
}

func after(tc typeChangeCase) *desclog.Descriptor {
	_, a := typeChangeShapes(tc)
	return a
}

// TestClassifyTypeChangeDirect pins the classifier's own rules where
// Reconcile cannot reach them: a Nullable column made non-Nullable, and
// the reasons given.
func TestClassifyTypeChangeDirect(t *testing.T) {
	int32Spec := ColumnSpec{Name: "v", Type: ColumnType{Type: "Int32", Repr: ReprInt}, Nullable: true}
	int64Spec := ColumnSpec{Name: "v", Type: ColumnType{Type: "Int64", Repr: ReprInt}}
	if c := ClassifyTypeChange(pgInteger, pgBigint, int32Spec, int64Spec, false); c.Action != TypeChangeReload || !strings.Contains(c.Reason, "lose NULLs") {
		t.Errorf("Nullable to non-Nullable: %+v", c)
	}
	int64Spec.Nullable = true
	if c := ClassifyTypeChange(pgInteger, pgBigint, int32Spec, int64Spec, false); c.Action != TypeChangeModify {
		t.Errorf("int4 to int8: %+v", c)
	}
	if c := ClassifyTypeChange(pgBigint, pgInteger, int64Spec, int32Spec, false); c.Action != TypeChangeReload || !strings.Contains(c.Reason, "narrowing") {
		t.Errorf("int8 to int4: %+v", c)
	}
	if c := ClassifyTypeChange(pgInteger, pgBigint, int32Spec, int64Spec, true); c.Action != TypeChangeReload || !strings.Contains(c.Reason, "sorting key") {
		t.Errorf("key column: %+v", c)
	}
	// An override that keeps the ClickHouse type: the decoded values decide.
	str := ColumnSpec{Name: "v", Type: ColumnType{Type: "String", Repr: ReprString}, Nullable: true}
	if c := ClassifyTypeChange(pgInteger, pgBigint, str, str, false); c.Action != TypeChangeKeep {
		t.Errorf("int4 to int8 overridden to String: %+v", c)
	}
	if c := ClassifyTypeChange(pgNumericPS(10, 2), pgNumericPS(12, 4), str, str, false); c.Action != TypeChangeReload {
		t.Errorf("numeric scale change overridden to String: %+v", c)
	}
	dec := ColumnSpec{Name: "v", Type: ColumnType{Type: "Decimal(20, 4)", Repr: ReprDecimal, Precision: 20, Scale: 4}, Nullable: true}
	if c := ClassifyTypeChange(pgNumericPS(10, 2), pgNumericPS(12, 4), dec, dec, false); c.Action != TypeChangeKeep {
		t.Errorf("numeric scale change overridden to Decimal(20, 4): %+v", c)
	}
	for _, a := range []TypeChangeAction{keep, modify, reload, 9} {
		if a.String() == "" {
			t.Errorf("%d has no name", a)
		}
	}
}

func TestReconcileTypeChangeEdges(t *testing.T) {
	intToBig := typeChangeCase{name: "int4 to int8", before: pgInteger, after: pgBigint}

	// A column with a DEFAULT (added with one): the MODIFY carries it,
	// converted like the values.
	withDefault := func(c desclog.Column) desclog.Column {
		c.HasMissing, c.Missing = true, ptr("7")
		return c
	}
	for _, d := range []Dialect{Legacy1816, Modern} {
		start := rel([]int16{1}, intCol(1, "id", true))
		prev, ch := evolve(t, d, TableConfig{}, start)
		added := rel([]int16{1}, intCol(1, "id", true), withDefault(pg(oidInt4, -1, "integer")))
		p := reconcile(t, d, TableConfig{}, prev, ch, added)
		prev, ch = p.Agreed, chAfter(d, p.Agreed)
		p = reconcile(t, d, TableConfig{}, prev, ch, rel([]int16{1}, intCol(1, "id", true), pg(oidInt8, -1, "bigint")))
		ifExists := map[bool]string{true: "IF EXISTS "}[d.IfNotExistsColumns]
		wantStatements(t, p, "ALTER TABLE `mirror`.`demo.users` MODIFY COLUMN "+ifExists+"`v` Nullable(Int64) DEFAULT CAST(CAST('7' AS Int32) AS Int64)")
	}

	// ClickHouse already has the new type (a crash after the MODIFY, before
	// the agreement was put): nothing to run.
	prev, p := planTypeChange(t, Legacy1816, TableConfig{}, intToBig)
	_, ch := evolve(t, Legacy1816, TableConfig{}, after(intToBig))
	replay := reconcile(t, Legacy1816, TableConfig{}, prev, ch, after(intToBig))
	wantStatements(t, replay)
	if len(replay.Refused) != 0 || replay.Agreed.Columns[1].Spec.TypeSQL() != "Nullable(Int64)" {
		t.Errorf("replay: refused %v, mapped %q", replay.Refused, mappedNames(replay.Agreed))
	}
	// The column is absent on ClickHouse: added with the new type.
	absent := chFor(Legacy1816, ColumnSpec{Name: "id", Type: ColumnType{Type: "Int32"}})
	p = reconcile(t, Legacy1816, TableConfig{}, prev, absent, after(intToBig))
	wantStatements(t, p, "ALTER TABLE `mirror`.`demo.users` ADD COLUMN `v` Nullable(Int64)")
	// A third type on ClickHouse: no MODIFY, the mismatch is refused.
	third := chFor(Legacy1816, ColumnSpec{Name: "id", Type: ColumnType{Type: "Int32"}}, ColumnSpec{Name: "v", Type: ColumnType{Type: "String"}, Nullable: true})
	p = reconcile(t, Legacy1816, TableConfig{}, prev, third, after(intToBig))
	var mismatch *TypeMismatchError
	if len(p.Statements) != 0 || len(p.Refused) != 1 || !errors.As(p.Refused[0], &mismatch) || len(p.Reload) != 0 {
		t.Errorf("third type: statements %q refused %v reload %v", p.Statements, p.Refused, p.Reload)
	}
	// The table is absent: created with the new type.
	p = reconcile(t, Legacy1816, TableConfig{}, prev, CHTable{}, after(intToBig))
	if len(p.Statements) != 2 || !strings.Contains(p.Statements[1], "`v` Nullable(Int64)") {
		t.Errorf("absent table: %q", p.Statements)
	}

	// A column the partition expression uses cannot be modified.
	cfg := TableConfig{PartitionBy: "intDiv(`v`, 1000)"}
	_, p = planTypeChange(t, Modern, cfg, intToBig)
	if len(p.Statements) != 0 || len(p.Reload) != 1 || !strings.Contains(p.Reload[0].Error(), "partition key") {
		t.Errorf("partition column: statements %q reload %v", p.Statements, p.Reload)
	}

	// A configured order_by column is a key column too.
	cfg = TableConfig{OrderBy: []string{"id", "v"}}
	_, p = planTypeChange(t, Modern, cfg, typeChangeCase{name: "key", before: notNull(pgInteger), after: notNull(pgBigint)})
	if len(p.Statements) != 0 || len(p.Reload) != 1 || !strings.Contains(p.Reload[0].Error(), "sorting key") {
		t.Errorf("order_by column: statements %q reload %v", p.Statements, p.Reload)
	}

	// A reload of one column leaves the other changes planned.
	start := rel([]int16{1}, intCol(1, "id", true), pgInteger, col(3, "w", oidInt2, -1, "smallint", false))
	prev, ch = evolve(t, Modern, TableConfig{}, start)
	next := rel([]int16{1}, intCol(1, "id", true), pgSmallint, col(3, "w", oidInt4, -1, "integer", false), textCol(4, "added"))
	p = reconcile(t, Modern, TableConfig{}, prev, ch, next)
	wantStatements(t, p,
		"ALTER TABLE `mirror`.`demo.users` MODIFY COLUMN IF EXISTS `w` Nullable(Int32)",
		"ALTER TABLE `mirror`.`demo.users` ADD COLUMN IF NOT EXISTS `added` Nullable(String)")
	if len(p.Reload) != 1 || !strings.Contains(p.Reload[0].Error(), `column "v" of relation demo.users changed type from integer (ClickHouse Nullable(Int32)) to smallint (ClickHouse Nullable(Int16)): integer to smallint is a narrowing`) {
		t.Errorf("reload %v", p.Reload)
	}
	wantMapped(t, p.Agreed, "id→id:Int32", "v→v:Nullable(Int32)", "w→w:Nullable(Int32)", "added→added:Nullable(String)")
}

// typeChangeGolden renders every case of typeChangeCases on d: the
// decision, then the statements or the reload's reason.
func typeChangeGolden(t *testing.T, d Dialect) string {
	var b strings.Builder
	fmt.Fprintf(&b, "-- generated by TestGoldenTypeChange (go test -run TestGoldenTypeChange -update) for ClickHouse %s\n", d.Version)
	fmt.Fprintf(&b, "-- table `mirror`.`demo.users` (id integer PRIMARY KEY, v ...); ALTER COLUMN v TYPE ...\n")
	for _, tc := range typeChangeCases() {
		prev, p := planTypeChange(t, d, TableConfig{}, tc)
		v := prev.Columns[slices.IndexFunc(prev.Columns, func(m MappedColumn) bool { return m.Attnum == 2 })]
		action := keep
		if len(p.Reload) > 0 {
			action = reload
		} else if len(p.Statements) > 0 {
			action = modify
		}
		key := ""
		if tc.key {
			key = " (sorting key)"
		}
		fmt.Fprintf(&b, "\n-- %s%s: %s %s -> %s: %s\n", tc.name, key, tc.before.TypeName, v.Spec.TypeSQL(), tc.after.TypeName, action)
		for _, s := range p.Statements {
			b.WriteString(s + ";\n")
		}
		for _, n := range p.Notes {
			b.WriteString("-- note: " + n + "\n")
		}
		for _, err := range p.Reload {
			b.WriteString("-- reload: " + err.Error() + "\n")
		}
	}
	return b.String()
}

func TestGoldenTypeChange(t *testing.T) {
	for name, d := range map[string]Dialect{"legacy1816": Legacy1816, "modern": Modern} {
		t.Run(name, func(t *testing.T) {
			got := typeChangeGolden(t, d)
			checkGolden(t, "typechange_"+name+".sql", got, "TestGoldenTypeChange")
		})
	}
}

// TestModifyValuesCoverModifyCases: TestTypeChangeModifyOnClickHouse has
// values for every case that modifies a column on 18.16, and only those.
func TestModifyValuesCoverModifyCases(t *testing.T) {
	values := modifyValues()
	for _, tc := range typeChangeCases() {
		_, has := values[tc.name]
		// A NULL flag added (DROP NOT NULL of an array) converts no value.
		_, p := planTypeChange(t, Legacy1816, TableConfig{}, tc)
		converts := slices.ContainsFunc(p.Statements, func(s string) bool { return strings.Contains(s, " MODIFY COLUMN ") })
		if modifies := tc.want[0] == modify && converts; modifies != has {
			t.Errorf("%s: modifies on 18.16 %v, has values %v", tc.name, modifies, has)
		}
	}
}
