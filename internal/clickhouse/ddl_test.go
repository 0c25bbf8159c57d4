package clickhouse

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"testing"

	"github.com/walshadow/walshadow/internal/desclog"
)

var update = flag.Bool("update", false, "rewrite testdata/*.sql golden files")

func ptr(s string) *string { return &s }

// everyTypeColumns is a relation with one column per mapped type (and the
// fallbacks), key "id".
func everyTypeColumns() []desclog.Column {
	cols := []desclog.Column{
		base(oidInt8, -1, "bigint"),
		{TypeOid: oidBool, TypeKind: 'b', TypeName: "boolean"},
		{TypeOid: oidInt2, TypeKind: 'b', TypeName: "smallint"},
		{TypeOid: oidInt4, TypeKind: 'b', TypeName: "integer"},
		{TypeOid: oidInt8, TypeKind: 'b', TypeName: "bigint"},
		{TypeOid: oidOid, TypeKind: 'b', TypeName: "oid"},
		{TypeOid: oidFloat4, TypeKind: 'b', TypeName: "real"},
		{TypeOid: oidFloat8, TypeKind: 'b', TypeName: "double precision"},
		{TypeOid: oidNumeric, TypMod: NumericTypmod(10, 2), TypeKind: 'b', TypeName: "numeric(10,2)"},
		{TypeOid: oidNumeric, TypMod: NumericTypmod(50, 5), TypeKind: 'b', TypeName: "numeric(50,5)"},
		{TypeOid: oidNumeric, TypMod: -1, TypeKind: 'b', TypeName: "numeric"},
		{TypeOid: oidUUID, TypeKind: 'b', TypeName: "uuid"},
		{TypeOid: oidBytea, TypeKind: 'b', TypeName: "bytea", Len: -1},
		{TypeOid: oidDate, TypeKind: 'b', TypeName: "date"},
		{TypeOid: oidTimestamp, TypeKind: 'b', TypeName: "timestamp without time zone"},
		{TypeOid: oidTimestamptz, TypeKind: 'b', TypeName: "timestamp with time zone", NotNull: true},
		{TypeOid: oidText, TypeKind: 'b', TypeName: "text"},
		{TypeOid: oidVarchar, TypMod: 14, TypeKind: 'b', TypeName: "character varying(10)"},
		{TypeOid: oidBpchar, TypMod: 14, TypeKind: 'b', TypeName: "character(10)"},
		{TypeOid: oidName, TypeKind: 'b', TypeName: "name", ElemTypeOid: oidChar, Len: 64},
		{TypeOid: oidChar, TypeKind: 'b', TypeName: `"char"`},
		{TypeOid: oidJSON, TypeKind: 'b', TypeName: "json"},
		{TypeOid: oidJSONB, TypeKind: 'b', TypeName: "jsonb"},
		{TypeOid: oidTime, TypeKind: 'b', TypeName: "time without time zone"},
		{TypeOid: oidTimetz, TypeKind: 'b', TypeName: "time with time zone"},
		{TypeOid: oidInterval, TypeKind: 'b', TypeName: "interval"},
		{TypeOid: oidInet, TypeKind: 'b', TypeName: "inet"},
		{TypeOid: oidCidr, TypeKind: 'b', TypeName: "cidr"},
		{TypeOid: oidMacaddr, TypeKind: 'b', TypeName: "macaddr"},
		{TypeOid: oidMoney, TypeKind: 'b', TypeName: "money"},
		array(oidInt4, -1, "integer[]", true),
		array(oidText, -1, "text[]", true),
		array(oidNumeric, NumericTypmod(10, 2), "numeric(10,2)[]", true),
		array(oidTimestamptz, -1, "timestamp with time zone[]", true),
		array(oidUUID, -1, "uuid[]", true),
		array(oidDate, -1, "date[]", true),
		array(oidBool, -1, "boolean[]", true),
		array(oidInt8, -1, "bigint[]", false),
		{TypeOid: 90000, TypeKind: 'd', BaseTypeOid: oidInt4, TypeName: "posint"},
		{TypeOid: 90004, TypeKind: 'e', TypeName: "mood"},
		{TypeOid: 3904, TypeKind: 'r', TypeName: "int4range"},
		{TypeOid: 90005, TypeKind: 'c', TypeName: "pair"},
		{TypeOid: 90006, TypeKind: 'b', TypeName: "hstore"},
	}
	for i := range cols {
		cols[i].Num = int16(i + 1)
		cols[i].Name = columnName(cols[i])
	}
	cols[0].Name = "id"
	return cols
}

// columnName derives a readable column name from a type name.
func columnName(c desclog.Column) string {
	r := strings.NewReplacer(" ", "_", "(", "_", ")", "", ",", "_", "[]", "_arr", `"`, "")
	name := "c_" + r.Replace(c.TypeName)
	if !c.NotNull && strings.HasSuffix(c.TypeName, "[]") {
		name += "_nullable"
	}
	return name
}

func specsFor(t testing.TB, d Dialect, source string, cols []desclog.Column, key ...string) []ColumnSpec {
	t.Helper()
	inKey := map[string]bool{}
	for _, k := range key {
		inKey[k] = true
	}
	specs := make([]ColumnSpec, len(cols))
	for i, c := range cols {
		s, err := ColumnSpecFor(d, source, c, inKey[c.Name])
		if err != nil {
			t.Fatal(err)
		}
		specs[i] = s
	}
	return specs
}

// goldenStatements renders the DDL the golden files pin for d.
func goldenStatements(t *testing.T, d Dialect) []string {
	var out []string
	emit := func(sql string, err error) {
		if err != nil {
			out = append(out, "-- error: "+err.Error())
			return
		}
		out = append(out, sql+";")
	}
	emitFlag := func(sql string, mustCheck bool, err error) {
		if err == nil && mustCheck {
			sql = "-- caller must check system.columns first\n" + sql
		}
		emit(sql, err)
	}
	emitResult := func(what string, err error) {
		if err == nil {
			out = append(out, "-- ok: "+what)
			return
		}
		emit("", err)
	}
	const db = "walshadow"
	every := DefaultTarget(db, "public", "every_type")
	emit(CreateDatabase(db))
	emit(CreateTable(d, every, specsFor(t, d, "public.every_type", everyTypeColumns(), "id"), []string{"id"},
		TableOptions{Settings: []Setting{{"index_granularity", "8192"}}}))

	weird := DefaultTarget(db, "we`ird\\schema", "t.a%ble")
	weirdCols := []desclog.Column{
		{Name: "k`1", TypeOid: oidInt4, TypeKind: 'b', NotNull: true},
		{Name: "k.2", TypeOid: oidText, TypeKind: 'b', NotNull: true},
		{Name: "créé", TypeOid: oidDate, TypeKind: 'b', NotNull: true},
	}
	emit(CreateTable(d, weird, specsFor(t, d, "weird", weirdCols, "k`1", "k.2"), []string{"k`1", "k.2"},
		TableOptions{PartitionBy: "toYYYYMM(`créé`)"}))

	keyless := DefaultTarget(db, "public", "events")
	emit(CreateTable(d, keyless, specsFor(t, d, "public.events", everyTypeColumns()[:3]), nil, TableOptions{}))

	added := []desclog.Column{
		{Name: "price", TypeOid: oidNumeric, TypMod: NumericTypmod(12, 3), TypeKind: 'b', HasMissing: true, Missing: ptr("-1.250")},
		{Name: "note", TypeOid: oidText, TypeKind: 'b', HasMissing: true, Missing: ptr("it's \\ new")},
		{Name: "seen_at", TypeOid: oidTimestamptz, TypeKind: 'b', NotNull: true, HasMissing: true, Missing: ptr("2024-01-02 03:04:05.123456+00")},
		{Name: "flag", TypeOid: oidBool, TypeKind: 'b', NotNull: true, HasMissing: true, Missing: ptr("t")},
		{Name: "born", TypeOid: oidDate, TypeKind: 'b', HasMissing: true, Missing: ptr("2001-02-03")},
		{Name: "blob", TypeOid: oidBytea, TypeKind: 'b', HasMissing: true, Missing: ptr(`\x00270a5c`)},
		{Name: "nothing", TypeOid: oidInt4, TypeKind: 'b', HasMissing: true},
	}
	for _, c := range added {
		spec, err := ColumnSpecFor(d, "public.every_type", c, false)
		if err != nil {
			emit("", err)
			continue
		}
		emitFlag(AddColumn(d, every, spec))
	}
	_, err := ColumnSpecFor(d, "public.every_type", desclog.Column{Name: "ancient", TypeOid: oidDate, TypeKind: 'b', HasMissing: true, Missing: ptr("1900-01-01")}, false)
	emitResult("ancient DEFAULT 1900-01-01", err)
	emit(RenameColumn(d, every, "c_text", "c_text_renamed"))
	emitFlag(DropColumn(d, every, "c_money"))
	emit(ModifyColumn(d, every, ColumnSpec{Name: "c_integer", Type: ColumnType{Type: "Int64", Repr: ReprInt}, Nullable: true}))
	emit(ModifyColumn(d, weird, ColumnSpec{Name: "n`o\\te", Type: ColumnType{Type: "Decimal(14, 4)", Repr: ReprDecimal, Precision: 14, Scale: 4},
		Default: "CAST(CAST('-1.250' AS Decimal(12, 3)) AS Decimal(14, 4))"}))
	emit(ModifyColumn(d, every, ColumnSpec{Name: "", Type: ColumnType{Type: "Int64", Repr: ReprInt}}))
	out = append(out, TruncateTable(every)+";", DropTable(every)+";")
	emitResult("type change", RefuseTypeChange("public.every_type", "c_integer", "integer", "bigint"))
	return out
}

func TestGoldenDDL(t *testing.T) {
	for name, d := range map[string]Dialect{"legacy1816": Legacy1816, "modern": Modern} {
		t.Run(name, func(t *testing.T) {
			got := fmt.Sprintf("-- generated by TestGoldenDDL (go test -run TestGoldenDDL -update) for ClickHouse %s\n\n%s\n",
				d.Version, strings.Join(goldenStatements(t, d), "\n\n"))
			checkGolden(t, name+".sql", got, "TestGoldenDDL")
		})
	}
}

func TestCreateTableErrors(t *testing.T) {
	target := DefaultTarget("db", "public", "t")
	id := ColumnSpec{Name: "id", Type: ColumnType{Type: "Int64", Repr: ReprInt}}
	nullable := ColumnSpec{Name: "n", Type: ColumnType{Type: "Int64", Repr: ReprInt}, Nullable: true}
	for _, tc := range []struct {
		name string
		cols []ColumnSpec
		key  []string
		opts TableOptions
		want string
	}{
		{"synthetic collision", []ColumnSpec{id, {Name: "_lsn", Type: id.Type}}, []string{"id"}, TableOptions{}, "collides with a synthetic column"},
		{"duplicate", []ColumnSpec{id, id}, []string{"id"}, TableOptions{}, "appears twice"},
		{"missing key", []ColumnSpec{id}, []string{"nope"}, TableOptions{}, "not a column"},
		{"nullable key", []ColumnSpec{id, nullable}, []string{"n"}, TableOptions{}, "is Nullable"},
		{"bad setting", []ColumnSpec{id}, []string{"id"}, TableOptions{Settings: []Setting{{"a b", "1"}}}, "not an identifier"},
		{"empty column name", []ColumnSpec{{Type: id.Type}}, nil, TableOptions{}, "empty name"},
	} {
		if _, err := CreateTable(Modern, target, tc.cols, tc.key, tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := CreateTable(Modern, Target{Database: "db", Table: ""}, []ColumnSpec{id}, nil, TableOptions{}); err == nil {
		t.Error("empty table name accepted")
	}
	if _, err := RenameColumn(Legacy1816, target, "a", "b"); !errors.Is(err, ErrRenameUnsupported) {
		t.Errorf("legacy rename: %v", err)
	}
	if err := RefuseTypeChange("public.t", "a", "int4", "int8"); !errors.Is(err, ErrTypeChange) {
		t.Errorf("type change: %v", err)
	}
	if _, err := ColumnSpecFor(Modern, "public.t", desclog.Column{Name: "", TypeOid: oidInt4}, false); err == nil || !strings.Contains(err.Error(), "public.t") {
		t.Errorf("empty column name: %v", err)
	}
}

func BenchmarkCreateTable(b *testing.B) {
	specs := specsFor(b, Modern, "public.every_type", everyTypeColumns(), "id")
	target := DefaultTarget("walshadow", "public", "every_type")
	sql, _ := CreateTable(Modern, target, specs, []string{"id"}, TableOptions{})
	b.SetBytes(int64(len(sql)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := CreateTable(Modern, target, specs, []string{"id"}, TableOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkQuoteIdent(b *testing.B) {
	const name = "some_schema.a_rather_long`table\\name"
	b.SetBytes(int64(len(name)))
	b.ReportAllocs()
	for b.Loop() {
		_ = QuoteIdent(name)
	}
}

func TestRenameTable(t *testing.T) {
	from, to := Target{Database: "db", Table: "public.a`b"}, Target{Database: "other", Table: "public.c"}
	got, err := RenameTable(from, to)
	if want := "RENAME TABLE `db`.`public.a\\`b` TO `other`.`public.c`"; err != nil || got != want {
		t.Errorf("RenameTable = %q, %v; want %q", got, err, want)
	}
	if _, err := RenameTable(from, Target{Database: "db", Table: ""}); err == nil || !strings.Contains(err.Error(), "target table") {
		t.Errorf("renaming to an empty name: %v", err)
	}
}
