package clickhouse

import (
	"testing"

	"github.com/walshadow/walshadow/internal/desclog"
)

// base is a NOT NULL base-type column.
func base(oid uint32, typmod int32, typeName string) desclog.Column {
	return desclog.Column{Name: "c", TypeOid: oid, TypMod: typmod, TypeName: typeName, TypeKind: 'b', NotNull: true, Len: -1}
}

func array(elem uint32, typmod int32, typeName string, notNull bool) desclog.Column {
	return desclog.Column{Name: "c", TypeOid: 1, TypMod: typmod, TypeName: typeName, TypeKind: 'b', ElemTypeOid: elem, NotNull: notNull, Len: -1}
}

func TestMapColumn(t *testing.T) {
	for _, tc := range []struct {
		name           string
		col            desclog.Column
		legacy, modern string
		repr           Repr // on Modern
	}{
		{"bool", base(oidBool, -1, "boolean"), "UInt8", "Bool", ReprBool},
		{"int2", base(oidInt2, -1, "smallint"), "Int16", "Int16", ReprInt},
		{"int4", base(oidInt4, -1, "integer"), "Int32", "Int32", ReprInt},
		{"int8", base(oidInt8, -1, "bigint"), "Int64", "Int64", ReprInt},
		{"oid", base(oidOid, -1, "oid"), "UInt32", "UInt32", ReprUInt32},
		{"float4", base(oidFloat4, -1, "real"), "Float32", "Float32", ReprFloat},
		{"float8", base(oidFloat8, -1, "double precision"), "Float64", "Float64", ReprFloat},
		{"numeric(10,2)", base(oidNumeric, NumericTypmod(10, 2), "numeric(10,2)"), "Decimal(10, 2)", "Decimal(10, 2)", ReprDecimal},
		{"numeric(1,0)", base(oidNumeric, NumericTypmod(1, 0), "numeric(1,0)"), "Decimal(1, 0)", "Decimal(1, 0)", ReprDecimal},
		{"numeric(38,38)", base(oidNumeric, NumericTypmod(38, 38), "numeric(38,38)"), "Decimal(38, 38)", "Decimal(38, 38)", ReprDecimal},
		{"numeric(39,2)", base(oidNumeric, NumericTypmod(39, 2), "numeric(39,2)"), "String", "Decimal(39, 2)", ReprDecimal},
		{"numeric(76,10)", base(oidNumeric, NumericTypmod(76, 10), "numeric(76,10)"), "String", "Decimal(76, 10)", ReprDecimal},
		{"numeric(77,0)", base(oidNumeric, NumericTypmod(77, 0), "numeric(77,0)"), "String", "String", ReprString},
		{"numeric(5,-2)", base(oidNumeric, NumericTypmod(5, -2), "numeric(5,-2)"), "String", "String", ReprString},
		{"numeric(3,5)", base(oidNumeric, NumericTypmod(3, 5), "numeric(3,5)"), "String", "String", ReprString},
		{"numeric", base(oidNumeric, -1, "numeric"), "String", "String", ReprString},
		{"uuid", base(oidUUID, -1, "uuid"), "UUID", "UUID", ReprUUID},
		{"bytea", base(oidBytea, -1, "bytea"), "String", "String", ReprBytes},
		{"date", base(oidDate, -1, "date"), "Int32", "Date32", ReprDate},
		{"timestamp", base(oidTimestamp, -1, "timestamp without time zone"), "Int64", "DateTime64(6, 'UTC')", ReprDateTime64},
		{"timestamptz", base(oidTimestamptz, 3, "timestamp(3) with time zone"), "Int64", "DateTime64(6, 'UTC')", ReprDateTime64},
		{"text", base(oidText, -1, "text"), "String", "String", ReprString},
		{"varchar", base(oidVarchar, 14, "character varying(10)"), "String", "String", ReprString},
		{"bpchar", base(oidBpchar, 14, "character(10)"), "String", "String", ReprString},
		{"name", desclog.Column{TypeOid: oidName, TypeKind: 'b', ElemTypeOid: oidChar, Len: 64, TypeName: "name", NotNull: true}, "String", "String", ReprString},
		{"char", base(oidChar, -1, `"char"`), "String", "String", ReprString},
		{"json", base(oidJSON, -1, "json"), "String", "String", ReprString},
		{"jsonb", base(oidJSONB, -1, "jsonb"), "String", "String", ReprString},
		{"time", base(oidTime, -1, "time without time zone"), "String", "String", ReprString},
		{"timetz", base(oidTimetz, -1, "time with time zone"), "String", "String", ReprString},
		{"interval", base(oidInterval, -1, "interval"), "String", "String", ReprString},
		{"inet", base(oidInet, -1, "inet"), "String", "String", ReprString},
		{"cidr", base(oidCidr, -1, "cidr"), "String", "String", ReprString},
		{"macaddr", base(oidMacaddr, -1, "macaddr"), "String", "String", ReprString},
		{"money", base(oidMoney, -1, "money"), "String", "String", ReprString},
		{"int4[] not null", array(oidInt4, -1, "integer[]", true), "Array(Nullable(Int32))", "Array(Nullable(Int32))", ReprArray},
		{"numeric(10,2)[]", array(oidNumeric, NumericTypmod(10, 2), "numeric(10,2)[]", true), "Array(Nullable(Decimal(10, 2)))", "Array(Nullable(Decimal(10, 2)))", ReprArray},
		{"timestamptz[]", array(oidTimestamptz, -1, "timestamp with time zone[]", true), "Array(Nullable(Int64))", "Array(Nullable(DateTime64(6, 'UTC')))", ReprArray},
		{"text[]", array(oidText, -1, "text[]", true), "Array(Nullable(String))", "Array(Nullable(String))", ReprArray},
		{"nullable int4[]", array(oidInt4, -1, "integer[]", false), "Array(Nullable(Int32))", "Array(Nullable(Int32))", ReprArray},
		{"int2vector", desclog.Column{TypeOid: oidInt2vector, TypeKind: 'b', ElemTypeOid: oidInt2, Len: -1, TypeName: "int2vector", NotNull: true}, "String", "String", ReprString},
		{"point", desclog.Column{TypeOid: 600, TypeKind: 'b', ElemTypeOid: oidFloat8, Len: 16, TypeName: "point", NotNull: true}, "String", "String", ReprString},
		{"domain over int4", desclog.Column{TypeOid: 90000, TypeKind: 'd', BaseTypeOid: oidInt4, TypeName: "posint", NotNull: true}, "Int32", "Int32", ReprInt},
		{"domain over numeric", desclog.Column{TypeOid: 90001, TypeKind: 'd', BaseTypeOid: oidNumeric, TypeName: "money2", NotNull: true}, "String", "String", ReprString},
		{"domain over text", desclog.Column{TypeOid: 90002, TypeKind: 'd', BaseTypeOid: oidText, TypeName: "email", NotNull: true}, "String", "String", ReprString},
		{"domain over hstore", desclog.Column{TypeOid: 90003, TypeKind: 'd', BaseTypeOid: 90100, TypeName: "kv", NotNull: true}, "String", "String", ReprString},
		{"enum", desclog.Column{TypeOid: 90004, TypeKind: 'e', TypeName: "mood", NotNull: true}, "String", "LowCardinality(String)", ReprString},
		{"range", desclog.Column{TypeOid: 3904, TypeKind: 'r', TypeName: "int4range", NotNull: true}, "String", "String", ReprString},
		{"multirange", desclog.Column{TypeOid: 4451, TypeKind: 'm', TypeName: "int4multirange", NotNull: true}, "String", "String", ReprString},
		{"composite", desclog.Column{TypeOid: 90005, TypeKind: 'c', TypeName: "pair", NotNull: true}, "String", "String", ReprString},
		{"extension", base(90006, -1, "hstore"), "String", "String", ReprString},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := MapColumn(Legacy1816, tc.col, false); got.Type != tc.legacy {
				t.Errorf("Legacy1816: %s (%s), want %s", got.Type, got.Reason, tc.legacy)
			}
			got := MapColumn(Modern, tc.col, false)
			if got.Type != tc.modern || got.Repr != tc.repr {
				t.Errorf("Modern: %s repr %d (%s), want %s repr %d", got.Type, got.Repr, got.Reason, tc.modern, tc.repr)
			}
		})
	}
}

func TestMapColumnLegacyDate(t *testing.T) {
	// Date holds only 1970..2105: legacy dates are Int32 days, lossless.
	if got := MapColumn(Legacy1816, base(oidDate, -1, "date"), false); got.Type != "Int32" || got.Repr != ReprUnixDays {
		t.Errorf("legacy date: %+v", got)
	}
	if got := MapColumn(Legacy1816, array(oidDate, -1, "date[]", true), false); got.Type != "Array(Nullable(Int32))" || got.Elem.Repr != ReprUnixDays {
		t.Errorf("legacy date[]: %+v", got)
	}
}

func TestMapColumnReasons(t *testing.T) {
	for _, c := range []desclog.Column{
		base(oidNumeric, -1, "numeric"),
		base(90006, -1, "hstore"),
		{TypeOid: 90003, TypeKind: 'd', BaseTypeOid: 90100, TypeName: "kv"},
	} {
		if got := MapColumn(Modern, c, false); got.Reason == "" {
			t.Errorf("%s: String fallback without a reason", c.TypeName)
		}
	}
	// A nullable array column in the key is not Nullable, so it is an Array.
	if got := MapColumn(Modern, array(oidInt4, -1, "integer[]", false), true); got.Repr != ReprArray {
		t.Errorf("key array: %+v", got)
	}
}

func TestNumericTypmodRoundTrip(t *testing.T) {
	for p := 1; p <= 1000; p += 37 {
		for _, s := range []int{-1000, -5, 0, 1, p, p + 3, 1000} {
			got := MapColumn(Modern, base(oidNumeric, NumericTypmod(p, s), ""), false)
			fits := p <= 76 && s >= 0 && s <= p
			if fits != (got.Repr == ReprDecimal) || fits && (got.Precision != p || got.Scale != s) {
				t.Errorf("numeric(%d,%d): %+v", p, s, got)
			}
		}
	}
}
