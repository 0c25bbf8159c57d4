package clickhouse

import (
	"strings"
	"testing"

	"github.com/walshadow/walshadow/internal/desclog"
)

func TestParseTypeOverride(t *testing.T) {
	for _, tc := range []struct {
		in       string
		typ      string
		repr     Repr
		nullable bool
	}{
		{"String", "String", ReprString, false},
		{" Nullable( Int64 ) ", "Int64", ReprInt, true},
		{"UInt8", "UInt8", ReprBool, false},
		{"Bool", "Bool", ReprBool, false},
		{"UInt32", "UInt32", ReprUInt32, false},
		{"Float32", "Float32", ReprFloat, false},
		{"Nullable(Decimal(20,4))", "Decimal(20, 4)", ReprDecimal, true},
		{"UUID", "UUID", ReprUUID, false},
		{"Date32", "Date32", ReprDate, false},
		{"DateTime64(6,'UTC')", "DateTime64(6, 'UTC')", ReprDateTime64, false},
		{"Array(Nullable(Decimal(5, 1)))", "Array(Nullable(Decimal(5, 1)))", ReprArray, false},
	} {
		got, nullable, err := ParseTypeOverride(tc.in)
		if err != nil || got.Type != tc.typ || got.Repr != tc.repr || nullable != tc.nullable {
			t.Errorf("ParseTypeOverride(%q) = %+v, %v, %v; want %s repr %d nullable %v", tc.in, got, nullable, err, tc.typ, tc.repr, tc.nullable)
		}
	}
	if got, _, _ := ParseTypeOverride("Decimal(20, 4)"); got.Precision != 20 || got.Scale != 4 {
		t.Errorf("decimal precision/scale %+v", got)
	}
	for _, bad := range []string{"", "Int128", "LowCardinality(String)", "Nullable(Array(Nullable(Int32)))", "Array(Int32)",
		"Array(Nullable(Array(Nullable(Int32))))", "Decimal(0, 0)", "Decimal(77, 2)", "Decimal(5, 6)", "DateTime64(3, 'UTC')", "Nullable(String"} {
		if _, _, err := ParseTypeOverride(bad); err == nil {
			t.Errorf("ParseTypeOverride(%q) succeeded", bad)
		} else if !strings.Contains(err.Error(), "type override") {
			t.Errorf("ParseTypeOverride(%q): error %v does not say what it parsed", bad, err)
		}
	}
}

func TestOverrideColumn(t *testing.T) {
	date := col(1, "d", oidDate, -1, "date", false)
	ts := col(2, "ts", oidTimestamptz, -1, "timestamp with time zone", false)
	blob := col(3, "b", oidBytea, -1, "bytea", false)
	dates := col(4, "ds", 1182, -1, "date[]", true)
	dates.ElemTypeOid = oidDate
	domainTS := desclog.Column{Num: 5, Name: "dom", TypeOid: 90000, TypeKind: 'd', BaseTypeOid: oidTimestamp, TypeName: "stamp"}
	for _, tc := range []struct {
		d        Dialect
		c        desclog.Column
		override string
		repr     Repr
		elem     Repr
	}{
		{Modern, date, "Int32", ReprUnixDays, 0},
		{Legacy1816, date, "Date", ReprDate, 0},
		{Modern, ts, "Nullable(Int64)", ReprUnixMicros, 0},
		{Legacy1816, domainTS, "Int64", ReprUnixMicros, 0},
		{Legacy1816, blob, "String", ReprBytes, 0},
		{Legacy1816, ts, "String", ReprString, 0},
		{Legacy1816, dates, "Array(Nullable(Int32))", ReprArray, ReprUnixDays},
		{Legacy1816, dates, "String", ReprString, 0},
		{Modern, col(6, "n", oidNumeric, -1, "numeric", false), "Decimal(60, 10)", ReprDecimal, 0},
	} {
		got, _, err := OverrideColumn(tc.d, tc.c, tc.override)
		if err != nil || got.Repr != tc.repr || tc.repr == ReprArray && got.Elem.Repr != tc.elem {
			t.Errorf("OverrideColumn(%s, %s, %q) = %+v, %v; want repr %d", tc.d.Version, tc.c.TypeName, tc.override, got, err, tc.repr)
		}
	}
	for _, tc := range []struct {
		d        Dialect
		c        desclog.Column
		override string
		want     string
	}{
		{Legacy1816, date, "Int64", "Int32 days"},
		{Legacy1816, ts, "Int32", "Int64 microseconds"},
		{Legacy1816, date, "Date32", "has no Date32"},
		{Legacy1816, col(7, "ok", oidBool, -1, "boolean", false), "Bool", "has no Bool"},
		{Legacy1816, ts, "DateTime64(6, 'UTC')", "has no DateTime64"},
		{Legacy1816, col(6, "n", oidNumeric, -1, "numeric", false), "Decimal(60, 10)", "precision 60"},
		{Modern, date, "Array(Nullable(Int32))", "is an array"},
		{Modern, dates, "Int64", "an array can be overridden"},
		{Modern, date, "Blob", `"Blob" is not a type`},
	} {
		_, _, err := OverrideColumn(tc.d, tc.c, tc.override)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `column "`+tc.c.Name+`"`) {
			t.Errorf("OverrideColumn(%s, %s, %q) = %v, want an error naming the column and containing %q", tc.d.Version, tc.c.TypeName, tc.override, err, tc.want)
		}
	}
}

func TestTableConfigValidate(t *testing.T) {
	good := TableConfig{Database: "crm", Table: "people", IncludeColumns: []string{"id"}, ExcludeColumns: []string{"x"},
		ColumnNames: map[string]string{"a": "b"}, Types: map[string]string{"a": "Nullable(String)"}, OrderBy: []string{"id"},
		Settings: []Setting{{Name: "index_granularity", Value: "1024"}}, DropStrategy: DropWarn}
	if err := good.Validate("relation demo.users"); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	for _, tc := range []struct {
		name string
		cfg  TableConfig
		want string
	}{
		{"strategy", TableConfig{DropStrategy: "purge"}, `drop strategy "purge"`},
		{"database", TableConfig{Database: strings.Repeat("é", 67)}, "configured database"},
		{"table", TableConfig{Table: strings.Repeat("é", 100)}, "configured table"},
		{"include and exclude", TableConfig{IncludeColumns: []string{"a"}, ExcludeColumns: []string{"a"}}, "both included and excluded"},
		{"empty column name", TableConfig{ExcludeColumns: []string{""}}, "empty column name"},
		{"renamed to synthetic", TableConfig{ColumnNames: map[string]string{"a": "_lsn"}}, "reserves"},
		{"renamed twice", TableConfig{ColumnNames: map[string]string{"a": "z", "b": "z"}}, `both renamed to "z"`},
		{"bad type", TableConfig{Types: map[string]string{"a": "Int256"}}, `column "a": type override "Int256"`},
		{"order by twice", TableConfig{OrderBy: []string{"a", "a"}}, "twice"},
		{"setting", TableConfig{Settings: []Setting{{Name: "x; DROP", Value: "1"}}}, "not an identifier"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate("relation demo.users")
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "demo.users") {
				t.Fatalf("err = %v, want one naming the relation and containing %q", err, tc.want)
			}
		})
	}
}
