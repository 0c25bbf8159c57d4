package clickhouse

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"github.com/walshadow/walshadow/internal/desclog"
)

// canonicalCase is a scanned ClickHouse value and the text PostgreSQL
// prints for the source value it stands for.
type canonicalCase struct {
	name string
	src  desclog.Column
	typ  ColumnType
	v    any
	want string
	null bool
	// pg is an SQL expression PostgreSQL's output function prints as want
	// under rowmodel.CompareSettings ("" when the case has no source value).
	pg string
}

func baseColumn(oid uint32) desclog.Column {
	return desclog.Column{Name: "c", TypeOid: oid, TypeKind: 'b', Len: -1}
}

func arrayColumn(elemOid uint32) desclog.Column {
	return desclog.Column{Name: "c", TypeOid: 1, TypeKind: 'b', ElemTypeOid: elemOid, Len: -1, NotNull: true}
}

func ref[T any](v T) *T { return &v }

// microsExpr is an exact PostgreSQL expression for `typ` micros µs after
// the epoch (interval * float is exact below 2^53 µs, so whole days go
// separately).
func microsExpr(typ string, micros int64) string {
	days, rem := micros/86400e6, micros%86400e6
	return "'epoch'::" + typ + " + " + itoa(days) + " * interval '1 day' + " + itoa(rem) + " * interval '1 microsecond'"
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

var (
	int32Array  = ColumnType{Type: "Array(Nullable(Int32))", Repr: ReprArray, Elem: &ColumnType{Type: "Int32", Repr: ReprInt}}
	stringArray = ColumnType{Type: "Array(Nullable(String))", Repr: ReprArray, Elem: &ColumnType{Type: "String", Repr: ReprString}}
	bytesArray  = ColumnType{Type: "Array(Nullable(String))", Repr: ReprArray, Elem: &ColumnType{Type: "String", Repr: ReprBytes}}
	microsArray = ColumnType{Type: "Array(Nullable(Int64))", Repr: ReprArray, Elem: &ColumnType{Type: "Int64", Repr: ReprUnixMicros}}
	float4Array = ColumnType{Type: "Array(Nullable(Float32))", Repr: ReprArray, Elem: &ColumnType{Type: "Float32", Repr: ReprFloat}}
	uuidArray   = ColumnType{Type: "Array(Nullable(UUID))", Repr: ReprArray, Elem: &ColumnType{Type: "UUID", Repr: ReprUUID}}
	unixDays    = ColumnType{Type: "Int32", Repr: ReprUnixDays}
	unixMicros  = ColumnType{Type: "Int64", Repr: ReprUnixMicros}
)

func canonicalCases() []canonicalCase {
	u := uuid.MustParse("A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11")
	return []canonicalCase{
		{name: "text", src: baseColumn(oidText), typ: str(""), v: "héllo, world", want: "héllo, world", pg: `'héllo, world'::text`},
		{name: "text pointer", src: baseColumn(oidText), typ: str(""), v: ref("x"), want: "x"},
		{name: "null text", src: baseColumn(oidText), typ: str(""), v: (*string)(nil), null: true},
		{name: "untyped nil", src: baseColumn(oidInt4), typ: ColumnType{Type: "Int32", Repr: ReprInt}, v: nil, null: true},
		{name: "interval", src: baseColumn(oidInterval), typ: str(""), v: "1 year 2 mons 3 days 04:05:06.5", want: "1 year 2 mons 3 days 04:05:06.5", pg: `'1 year 2 months 3 days 4 hours 5 minutes 6.5 seconds'::interval`},
		{name: "inet", src: baseColumn(oidInet), typ: str(""), v: "10.0.0.1", want: "10.0.0.1", pg: `'10.0.0.1'::inet`},
		{name: "bpchar", src: baseColumn(oidBpchar), typ: str(""), v: "ab  ", want: "ab  ", pg: `'ab'::char(4)`},
		{name: "bytea", src: baseColumn(oidBytea), typ: ColumnType{Type: "String", Repr: ReprBytes}, v: "\x00\x01\xab\xff", want: `\x0001abff`, pg: `'\x0001ABFF'::bytea`},
		{name: "empty bytea", src: baseColumn(oidBytea), typ: ColumnType{Type: "String", Repr: ReprBytes}, v: "", want: `\x`, pg: `''::bytea`},
		{name: "bool UInt8 1", src: baseColumn(oidBool), typ: ColumnType{Type: "UInt8", Repr: ReprBool}, v: uint8(1), want: "t", pg: "true"},
		{name: "bool UInt8 0", src: baseColumn(oidBool), typ: ColumnType{Type: "UInt8", Repr: ReprBool}, v: ref(uint8(0)), want: "f", pg: "false"},
		{name: "bool Bool", src: baseColumn(oidBool), typ: ColumnType{Type: "Bool", Repr: ReprBool}, v: true, want: "t"},
		{name: "int2", src: baseColumn(oidInt2), typ: ColumnType{Type: "Int16", Repr: ReprInt}, v: int16(-32768), want: "-32768", pg: "(-32768)::int2"},
		{name: "int8", src: baseColumn(oidInt8), typ: ColumnType{Type: "Int64", Repr: ReprInt}, v: ref(int64(math.MaxInt64)), want: "9223372036854775807", pg: "9223372036854775807::int8"},
		{name: "oid", src: baseColumn(oidOid), typ: ColumnType{Type: "UInt32", Repr: ReprUInt32}, v: uint32(math.MaxUint32), want: "4294967295", pg: "4294967295::oid"},
		{name: "float4 0.1", src: baseColumn(oidFloat4), typ: ColumnType{Type: "Float32", Repr: ReprFloat}, v: float32(0.1), want: "0.1", pg: "'0.1'::float4"},
		{name: "float4 max", src: baseColumn(oidFloat4), typ: ColumnType{Type: "Float32", Repr: ReprFloat}, v: float32(math.MaxFloat32), want: "3.4028235e+38", pg: "'3.4028235e38'::float4"},
		{name: "float4 million", src: baseColumn(oidFloat4), typ: ColumnType{Type: "Float32", Repr: ReprFloat}, v: float32(1e6), want: "1e+06", pg: "'1000000'::float4"},
		{name: "float8 third", src: baseColumn(oidFloat8), typ: ColumnType{Type: "Float64", Repr: ReprFloat}, v: 1.0 / 3, want: "0.3333333333333333", pg: "1::float8 / 3"},
		{name: "float8 1e20", src: baseColumn(oidFloat8), typ: ColumnType{Type: "Float64", Repr: ReprFloat}, v: 1e20, want: "1e+20", pg: "'1e20'::float8"},
		{name: "float8 -0", src: baseColumn(oidFloat8), typ: ColumnType{Type: "Float64", Repr: ReprFloat}, v: math.Copysign(0, -1), want: "-0", pg: "'-0'::float8"},
		{name: "float8 NaN", src: baseColumn(oidFloat8), typ: ColumnType{Type: "Float64", Repr: ReprFloat}, v: math.NaN(), want: "NaN", pg: "'NaN'::float8"},
		{name: "float8 -Infinity", src: baseColumn(oidFloat8), typ: ColumnType{Type: "Float64", Repr: ReprFloat}, v: math.Inf(-1), want: "-Infinity", pg: "'-Infinity'::float8"},
		{name: "numeric(10,2)", src: baseColumn(oidNumeric), typ: ColumnType{Type: "Decimal(10, 2)", Repr: ReprDecimal, Precision: 10, Scale: 2}, v: decimal.RequireFromString("1.5"), want: "1.50", pg: "1.5::numeric(10,2)"},
		{name: "numeric(5,3) negative", src: baseColumn(oidNumeric), typ: ColumnType{Type: "Decimal(5, 3)", Repr: ReprDecimal, Precision: 5, Scale: 3}, v: ref(decimal.RequireFromString("-0.5")), want: "-0.500", pg: "(-0.5)::numeric(5,3)"},
		{name: "numeric(38,0)", src: baseColumn(oidNumeric), typ: ColumnType{Type: "Decimal(38, 0)", Repr: ReprDecimal, Precision: 38}, v: decimal.RequireFromString("99999999999999999999999999999999999999"), want: "99999999999999999999999999999999999999", pg: "99999999999999999999999999999999999999::numeric(38,0)"},
		{name: "numeric(4,2) zero", src: baseColumn(oidNumeric), typ: ColumnType{Type: "Decimal(4, 2)", Repr: ReprDecimal, Precision: 4, Scale: 2}, v: decimal.Zero, want: "0.00", pg: "0::numeric(4,2)"},
		{name: "uuid", src: baseColumn(oidUUID), typ: ColumnType{Type: "UUID", Repr: ReprUUID}, v: u, want: "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", pg: "'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'::uuid"},
		{name: "uuid pointer", src: baseColumn(oidUUID), typ: ColumnType{Type: "UUID", Repr: ReprUUID}, v: &u, want: "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"},
		{name: "Date", src: baseColumn(oidDate), typ: ColumnType{Type: "Date", Repr: ReprDate}, v: time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC), want: "2024-02-29", pg: "'2024-02-29'::date"},
		{name: "Date in a server zone", src: baseColumn(oidDate), typ: ColumnType{Type: "Date", Repr: ReprDate}, v: time.Date(2024, 3, 1, 0, 0, 0, 0, time.FixedZone("MSK", 3*3600)), want: "2024-03-01"},
		{name: "unix days epoch", src: baseColumn(oidDate), typ: unixDays, v: int32(0), want: "1970-01-01", pg: "'1970-01-01'::date + 0"},
		{name: "unix days -1", src: baseColumn(oidDate), typ: unixDays, v: ref(int32(-1)), want: "1969-12-31", pg: "'1970-01-01'::date + (-1)"},
		{name: "unix days leap", src: baseColumn(oidDate), typ: unixDays, v: int32(19782), want: "2024-02-29", pg: "'1970-01-01'::date + 19782"},
		{name: "unix days BC", src: baseColumn(oidDate), typ: unixDays, v: int32(-735160), want: "0044-03-15 BC", pg: "'1970-01-01'::date + (-735160)"},
		{name: "unix days 1 BC end", src: baseColumn(oidDate), typ: unixDays, v: int32(-719163), want: "0001-12-31 BC", pg: "'1970-01-01'::date + (-719163)"},
		{name: "unix days year 10000", src: baseColumn(oidDate), typ: unixDays, v: int32(2932897), want: "10000-01-01", pg: "'1970-01-01'::date + 2932897"},
		{name: "unix days max date", src: baseColumn(oidDate), typ: unixDays, v: int32(2145042905), want: "5874897-12-31", pg: "'1970-01-01'::date + 2145042905"},
		{name: "unix days infinity", src: baseColumn(oidDate), typ: unixDays, v: int32(math.MaxInt32), want: "infinity", pg: "'infinity'::date"},
		{name: "unix days -infinity", src: baseColumn(oidDate), typ: unixDays, v: int32(math.MinInt32), want: "-infinity", pg: "'-infinity'::date"},
		{name: "timestamptz epoch", src: baseColumn(oidTimestamptz), typ: unixMicros, v: int64(0), want: "1970-01-01 00:00:00+00", pg: microsExpr("timestamptz", 0)},
		{name: "timestamp fraction", src: baseColumn(oidTimestamp), typ: unixMicros, v: int64(1_500_000), want: "1970-01-01 00:00:01.5", pg: microsExpr("timestamp", 1_500_000)},
		{name: "timestamp before epoch", src: baseColumn(oidTimestamp), typ: unixMicros, v: int64(-1), want: "1969-12-31 23:59:59.999999", pg: microsExpr("timestamp", -1)},
		{name: "timestamptz leap day", src: baseColumn(oidTimestamptz), typ: unixMicros, v: ref(int64(1709251199999999)), want: "2024-02-29 23:59:59.999999+00", pg: microsExpr("timestamptz", 1709251199999999)},
		{name: "timestamp BC", src: baseColumn(oidTimestamp), typ: unixMicros, v: int64(-63517778999750000), want: "0044-03-15 12:30:00.25 BC", pg: microsExpr("timestamp", -63517778999750000)},
		{name: "timestamptz BC", src: baseColumn(oidTimestamptz), typ: unixMicros, v: int64(-62135596800000001), want: "0001-12-31 23:59:59.999999+00 BC", pg: microsExpr("timestamptz", -62135596800000001)},
		{name: "timestamptz year 10000", src: baseColumn(oidTimestamptz), typ: unixMicros, v: int64(253402300800000001), want: "10000-01-01 00:00:00.000001+00", pg: microsExpr("timestamptz", 253402300800000001)},
		{name: "timestamp infinity", src: baseColumn(oidTimestamp), typ: unixMicros, v: int64(math.MaxInt64), want: "infinity", pg: "'infinity'::timestamp"},
		{name: "timestamptz -infinity", src: baseColumn(oidTimestamptz), typ: unixMicros, v: int64(math.MinInt64), want: "-infinity", pg: "'-infinity'::timestamptz"},
		{name: "timestamptz domain", src: desclog.Column{Name: "c", TypeOid: 99999, TypeKind: 'd', BaseTypeOid: oidTimestamptz}, typ: unixMicros, v: int64(0), want: "1970-01-01 00:00:00+00"},
		{name: "DateTime64 timestamp", src: baseColumn(oidTimestamp), typ: ColumnType{Type: "DateTime64(6, 'UTC')", Repr: ReprDateTime64}, v: time.Date(2024, 1, 2, 3, 4, 5, 600_000_000, time.UTC), want: "2024-01-02 03:04:05.6", pg: "'2024-01-02 03:04:05.6'::timestamp"},
		{name: "DateTime64 timestamptz", src: baseColumn(oidTimestamptz), typ: ColumnType{Type: "DateTime64(6, 'UTC')", Repr: ReprDateTime64}, v: ref(time.Date(2024, 1, 2, 5, 4, 5, 0, time.FixedZone("", 2*3600))), want: "2024-01-02 03:04:05+00", pg: "'2024-01-02 03:04:05Z'::timestamptz"},
		{name: "int4[]", src: arrayColumn(oidInt4), typ: int32Array, v: []*int32{ref(int32(1)), nil, ref(int32(-3))}, want: "{1,NULL,-3}", pg: "ARRAY[1, NULL, -3]::int4[]"},
		{name: "empty int4[]", src: arrayColumn(oidInt4), typ: int32Array, v: []*int32{}, want: "{}", pg: "'{}'::int4[]"},
		{name: "text[] quoting", src: arrayColumn(oidText), typ: stringArray,
			v:    []*string{ref(""), ref("NULL"), ref("null"), ref("a b"), ref(`q"\`), ref("{x}"), ref("a,b"), ref("tab\there"), ref("plain"), nil, ref("é")},
			want: `{"","NULL","null","a b","q\"\\","{x}","a,b","tab	here",plain,NULL,é}`,
			pg:   `ARRAY['', 'NULL', 'null', 'a b', 'q"\', '{x}', 'a,b', E'tab\there', 'plain', NULL, 'é']`},
		{name: "bytea[]", src: arrayColumn(oidBytea), typ: bytesArray, v: []*string{ref("\x01\xff"), nil}, want: `{"\\x01ff",NULL}`, pg: `ARRAY['\x01ff'::bytea, NULL]`},
		{name: "timestamptz[]", src: arrayColumn(oidTimestamptz), typ: microsArray, v: []*int64{ref(int64(0)), ref(int64(math.MaxInt64))}, want: `{"1970-01-01 00:00:00+00",infinity}`, pg: `ARRAY['epoch', 'infinity']::timestamptz[]`},
		{name: "float4[]", src: arrayColumn(oidFloat4), typ: float4Array, v: []*float32{ref(float32(0.1)), ref(float32(math.Inf(1)))}, want: "{0.1,Infinity}", pg: "ARRAY['0.1', 'Infinity']::float4[]"},
		{name: "uuid[]", src: arrayColumn(oidUUID), typ: uuidArray, v: []*uuid.UUID{&u}, want: "{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}", pg: "ARRAY['a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11']::uuid[]"},
	}
}

func TestCanonicalText(t *testing.T) {
	for _, c := range canonicalCases() {
		t.Run(c.name, func(t *testing.T) {
			spec := ColumnSpec{Name: "c", Type: c.typ, Nullable: c.typ.Repr != ReprArray}
			got, null, err := CanonicalText(c.src, spec, c.v)
			if err != nil {
				t.Fatalf("CanonicalText(%#v): %v", c.v, err)
			}
			if null != c.null || got != c.want {
				t.Fatalf("CanonicalText(%#v) = %q, null %v; want %q, null %v", c.v, got, null, c.want, c.null)
			}
		})
	}
}

func TestCanonicalTextRefusesMismatches(t *testing.T) {
	for _, c := range []struct {
		name string
		src  desclog.Column
		typ  ColumnType
		v    any
		want string // a fragment of the error
	}{
		{"bool out of range", baseColumn(oidBool), ColumnType{Type: "UInt8", Repr: ReprBool}, uint8(2), "boolean stored as 2"},
		{"int for string", baseColumn(oidText), str(""), int64(1), "unexpected scanned value int64"},
		{"string for int", baseColumn(oidInt8), ColumnType{Type: "Int64", Repr: ReprInt}, "1", "unexpected scanned value string"},
		{"micros of a date column", baseColumn(oidDate), unixMicros, int64(0), "neither timestamp nor timestamptz"},
		{"days as int64", baseColumn(oidDate), unixDays, int64(0), "unexpected scanned value int64"},
		{"array element", arrayColumn(oidInt4), int32Array, []*string{ref("x")}, "element 1: unexpected scanned value string"},
		{"array as scalar", arrayColumn(oidInt4), int32Array, int32(1), "unexpected scanned value int32"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := CanonicalText(c.src, ColumnSpec{Name: "col", Type: c.typ}, c.v)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), `column "col"`) {
				t.Fatalf("CanonicalText(%#v) error = %v; want one naming the column and containing %q", c.v, err, c.want)
			}
		})
	}
}

// TestCanonicalDecimalAtSourceScale: a Decimal wider than its numeric
// source column (kept after numeric(10,2) became numeric(8,1)) renders at
// the source's scale, as PostgreSQL prints it, unless a digit past it is
// not zero.
func TestCanonicalDecimalAtSourceScale(t *testing.T) {
	spec := ColumnSpec{Name: "amount", Type: ColumnType{Repr: ReprDecimal, Precision: 10, Scale: 2}}
	for _, c := range []struct {
		typmod int32
		v      string
		want   string
	}{
		{typmod: 8<<16 | 1 + 4, v: "1105637.5", want: "1105637.5"},
		{typmod: 8<<16 | 1 + 4, v: "-9053422.25", want: "-9053422.25"}, // not the source's value: shown whole
		{typmod: 8<<16 | 0 + 4, v: "7", want: "7"},
		{typmod: 10<<16 | 2 + 4, v: "7", want: "7.00"},
		{typmod: -1, v: "7", want: "7.00"},
	} {
		src := desclog.Column{Name: "amount", TypeOid: 1700, TypMod: c.typmod}
		got, null, err := CanonicalText(src, spec, decimal.RequireFromString(c.v))
		if err != nil || null || got != c.want {
			t.Errorf("typmod %d, %s: %q (%v, %v), want %q", c.typmod, c.v, got, null, err, c.want)
		}
	}
}
