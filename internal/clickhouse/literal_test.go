package clickhouse

import (
	"strings"
	"testing"
)

func TestQuoteString(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"abc", "'abc'"},
		{"a'b", `'a\'b'`},
		{`a\b`, `'a\\b'`},
		{"a\nb\x00\x7f", `'a\x0Ab\x00\x7F'`},
		{"é", "'é'"},
	} {
		if got := QuoteString(tc.in); got != tc.want {
			t.Errorf("QuoteString(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestDefaultLiteral(t *testing.T) {
	typ := func(d Dialect, oid uint32, typmod int32) ColumnType {
		return MapColumn(d, base(oid, typmod, ""), false)
	}
	for _, tc := range []struct {
		name string
		d    Dialect
		t    ColumnType
		text string
		want string // "" wants an error
	}{
		{"text", Legacy1816, typ(Legacy1816, oidText, -1), "it's", `'it\'s'`},
		{"json", Modern, typ(Modern, oidJSON, -1), `{"a": "\n"}`, `'{"a": "\\n"}'`},
		{"bytea", Legacy1816, typ(Legacy1816, oidBytea, -1), `\x00ff27`, `'\x00` + "\xff" + `\''`},
		{"bytea escape form", Legacy1816, typ(Legacy1816, oidBytea, -1), `abc`, ""},
		{"bool legacy", Legacy1816, typ(Legacy1816, oidBool, -1), "t", "CAST(1 AS UInt8)"},
		{"bool modern", Modern, typ(Modern, oidBool, -1), "f", "false"},
		{"bool junk", Modern, typ(Modern, oidBool, -1), "yes", ""},
		{"int2 min", Legacy1816, typ(Legacy1816, oidInt2, -1), "-32768", "CAST('-32768' AS Int16)"},
		{"int2 overflow", Legacy1816, typ(Legacy1816, oidInt2, -1), "32768", ""},
		{"int8 min", Legacy1816, typ(Legacy1816, oidInt8, -1), "-9223372036854775808", "CAST('-9223372036854775808' AS Int64)"},
		{"oid", Legacy1816, typ(Legacy1816, oidOid, -1), "4294967295", "CAST('4294967295' AS UInt32)"},
		{"oid negative", Legacy1816, typ(Legacy1816, oidOid, -1), "-1", ""},
		{"float8", Legacy1816, typ(Legacy1816, oidFloat8, -1), "1.5e+300", "reinterpretAsFloat64(unhex('355800662DEB417E'))"},
		{"float4", Legacy1816, typ(Legacy1816, oidFloat4, -1), "3.1415927", "reinterpretAsFloat32(unhex('DB0F4940'))"},
		{"float NaN", Legacy1816, typ(Legacy1816, oidFloat8, -1), "NaN", "CAST('nan' AS Float64)"},
		{"float -Infinity", Legacy1816, typ(Legacy1816, oidFloat4, -1), "-Infinity", "CAST('-inf' AS Float32)"},
		{"float junk", Legacy1816, typ(Legacy1816, oidFloat8, -1), "1.5.3", ""},
		{"numeric", Legacy1816, typ(Legacy1816, oidNumeric, NumericTypmod(10, 2)), "-12345678.90", "CAST('-12345678.90' AS Decimal(10, 2))"},
		{"numeric too wide", Legacy1816, typ(Legacy1816, oidNumeric, NumericTypmod(4, 2)), "123.00", ""},
		{"numeric NaN", Legacy1816, typ(Legacy1816, oidNumeric, NumericTypmod(4, 2)), "NaN", ""},
		{"numeric exponent", Legacy1816, typ(Legacy1816, oidNumeric, NumericTypmod(4, 2)), "1e2", ""},
		{"unconstrained numeric", Legacy1816, typ(Legacy1816, oidNumeric, -1), "NaN", "'NaN'"},
		{"uuid", Legacy1816, typ(Legacy1816, oidUUID, -1), "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "CAST('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11' AS UUID)"},
		{"uuid junk", Legacy1816, typ(Legacy1816, oidUUID, -1), "a0eebc999c0b4ef8bb6d6bb9bd380a11", ""},
		{"date legacy", Legacy1816, typ(Legacy1816, oidDate, -1), "2020-01-02", "18263"},
		{"date legacy before 1970", Legacy1816, typ(Legacy1816, oidDate, -1), "1969-12-31", "-1"},
		{"date legacy infinity", Legacy1816, typ(Legacy1816, oidDate, -1), "infinity", "2147483647"},
		{"date legacy -infinity", Legacy1816, typ(Legacy1816, oidDate, -1), "-infinity", "-2147483648"},
		{"date legacy BC", Legacy1816, typ(Legacy1816, oidDate, -1), "0044-03-15 BC", "-735160"},
		{"date legacy past 9999", Legacy1816, typ(Legacy1816, oidDate, -1), "10000-01-01", "2932897"},
		{"date legacy junk", Legacy1816, typ(Legacy1816, oidDate, -1), "2020-02-30", ""},
		{"date override Date", Legacy1816, ColumnType{Type: "Date", Repr: ReprDate}, "1969-12-31", ""},
		{"date modern before 1970", Modern, typ(Modern, oidDate, -1), "1969-12-31", "CAST('1969-12-31' AS Date32)"},
		{"date BC", Modern, typ(Modern, oidDate, -1), "0044-03-15 BC", ""},
		{"date infinity", Modern, typ(Modern, oidDate, -1), "infinity", ""},
		{"timestamp legacy", Legacy1816, typ(Legacy1816, oidTimestamp, -1), "2024-01-02 03:04:05.123456", "CAST('1704164645123456' AS Int64)"},
		{"timestamptz legacy", Legacy1816, typ(Legacy1816, oidTimestamptz, -1), "1969-12-31 23:59:59.999999+00", "CAST('-1' AS Int64)"},
		{"timestamptz offset", Modern, typ(Modern, oidTimestamptz, -1), "2024-01-02 05:34:05+02:30", "CAST('2024-01-02 03:04:05.000000' AS DateTime64(6, 'UTC'))"},
		{"timestamp modern out of range", Modern, typ(Modern, oidTimestamp, -1), "2300-01-01 00:00:00", ""},
		{"timestamp infinity", Modern, typ(Modern, oidTimestamp, -1), "infinity", ""},
		{"timestamp legacy infinity", Legacy1816, typ(Legacy1816, oidTimestamp, -1), "infinity", "CAST('9223372036854775807' AS Int64)"},
		{"timestamptz legacy BC", Legacy1816, typ(Legacy1816, oidTimestamptz, -1), "0044-03-15 12:00:00+00 BC", "CAST('-63517780800000000' AS Int64)"},
		{"array", Modern, MapColumn(Modern, array(oidInt4, -1, "integer[]", true), false), "{1,NULL}", "CAST([CAST('1' AS Int32), NULL] AS Array(Nullable(Int32)))"},
		{"empty array", Legacy1816, MapColumn(Legacy1816, array(oidText, -1, "text[]", false), false), "{}", "CAST([] AS Array(Nullable(String)))"},
		{"array of quoted text", Legacy1816, MapColumn(Legacy1816, array(oidText, -1, "text[]", false), false), `{"a,b","it's",NULL}`, `CAST(['a,b', 'it\'s', NULL] AS Array(Nullable(String)))`},
		{"array element out of range", Legacy1816, MapColumn(Legacy1816, array(oidInt2, -1, "smallint[]", false), false), "{99999}", ""},
		{"two-dimensional array", Legacy1816, MapColumn(Legacy1816, array(oidInt4, -1, "integer[]", false), false), "{{1},{2}}", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DefaultLiteral(tc.d, tc.t, tc.text)
			switch {
			case tc.want == "" && err == nil:
				t.Errorf("DefaultLiteral(%s, %q) = %s, want an error", tc.t.Type, tc.text, got)
			case tc.want != "" && (err != nil || got != tc.want):
				t.Errorf("DefaultLiteral(%s, %q) = %s, %v; want %s", tc.t.Type, tc.text, got, err, tc.want)
			}
		})
	}
}

func FuzzDefaultLiteral(f *testing.F) {
	f.Add(uint32(oidNumeric), NumericTypmod(10, 2), "12.50", true)
	f.Add(uint32(oidTimestamptz), int32(-1), "2024-01-02 03:04:05+00", false)
	f.Add(uint32(oidBytea), int32(-1), `\x00ff`, false)
	f.Add(uint32(oidFloat4), int32(-1), "NaN", true)
	f.Fuzz(func(t *testing.T, oid uint32, typmod int32, text string, modern bool) {
		d := Legacy1816
		if modern {
			d = Modern
		}
		lit, err := DefaultLiteral(d, MapColumn(d, base(oid, typmod, ""), false), text)
		if err == nil && strings.ContainsAny(lit, "\n\x00") {
			t.Fatalf("literal %q contains a raw control byte", lit)
		}
	})
}
