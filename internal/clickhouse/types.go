package clickhouse

import (
	"fmt"
	"strings"

	"github.com/walshadow/walshadow/internal/desclog"
)

// PostgreSQL type OIDs the map knows (pg_type.dat); the decoder's set plus
// jsonb, int2vector and oidvector.
const (
	oidBool        = 16
	oidBytea       = 17
	oidChar        = 18
	oidName        = 19
	oidInt8        = 20
	oidInt2        = 21
	oidInt2vector  = 22
	oidInt4        = 23
	oidText        = 25
	oidOid         = 26
	oidOidvector   = 30
	oidJSON        = 114
	oidCidr        = 650
	oidFloat4      = 700
	oidFloat8      = 701
	oidMoney       = 790
	oidMacaddr     = 829
	oidInet        = 869
	oidBpchar      = 1042
	oidVarchar     = 1043
	oidDate        = 1082
	oidTime        = 1083
	oidTimestamp   = 1114
	oidTimestamptz = 1184
	oidInterval    = 1186
	oidTimetz      = 1266
	oidNumeric     = 1700
	oidUUID        = 2950
	oidJSONB       = 3802
)

// Repr says how a value of a mapped column is written to ClickHouse: the
// output converts decoded values by it.
type Repr uint8

const (
	// ReprString: PostgreSQL's text output as a String (also the fallback).
	ReprString Repr = iota
	// ReprBytes: bytea's raw bytes as a String.
	ReprBytes
	// ReprBool: Bool, or UInt8 0/1 without the Bool type.
	ReprBool
	// ReprInt: Int16, Int32 or Int64.
	ReprInt
	// ReprUInt32: oid.
	ReprUInt32
	// ReprFloat: Float32 or Float64 (NaN and ±Infinity included).
	ReprFloat
	// ReprDecimal: Decimal(p,s); NaN and ±Infinity cannot be stored and
	// fail closed at insert.
	ReprDecimal
	// ReprUUID: UUID.
	ReprUUID
	// ReprDate: Date32 (or a Date chosen by an override); dates outside
	// the type's range fail closed at insert.
	ReprDate
	// ReprDateTime64: DateTime64(6,'UTC'); outside DateRange fails closed.
	ReprDateTime64
	// ReprUnixMicros: Int64 microseconds since 1970-01-01 00:00:00 UTC,
	// the lossless timestamp of servers without DateTime64; ±infinity and
	// instants past the Int64 range (after year 294246) fail closed.
	ReprUnixMicros
	// ReprArray: Array(Nullable(elem)) of one-dimensional arrays with
	// lower bound 1; other arrays fail closed at insert.
	ReprArray
	// ReprUnixDays: Int32 days since 1970-01-01, the lossless date of
	// servers without Date32 (Date holds only 1970..2105): every
	// PostgreSQL date fits, -infinity and infinity are math.MinInt32 and
	// math.MaxInt32 (UnixDaysMinusInfinity, UnixDaysInfinity), as
	// PostgreSQL stores them.
	ReprUnixDays
)

// ColumnType is the ClickHouse type of one source column, without the
// Nullable wrapper (ColumnSpec adds it).
type ColumnType struct {
	// Type is the ClickHouse type, e.g. "Decimal(10, 2)", "Array(Nullable(Int32))".
	Type string
	Repr Repr
	// Elem is an array's element type.
	Elem *ColumnType
	// Precision and Scale of a Decimal.
	Precision, Scale int
	// Reason says why a type fell back to String, for logs ("" when the
	// mapping is a native one or String is the natural type).
	Reason string
}

func str(reason string) ColumnType {
	return ColumnType{Type: "String", Repr: ReprString, Reason: reason}
}

// MapColumn maps a source column to its ClickHouse type on dialect d; see
// the type map in doc.go. inKey says the column is part of the sorting key
// (never Nullable; no mapping depends on it today). It never fails: what has no native mapping is a String
// of PostgreSQL's text output, with Reason set.
func MapColumn(d Dialect, c desclog.Column, inKey bool) ColumnType {
	switch c.TypeKind {
	case 'd':
		// A domain stores its base type's datums; the domain's own typmod
		// is not in the descriptor, so numeric domains are unconstrained.
		if c.BaseTypeOid == 0 {
			return str("domain without a base type")
		}
		t := mapOid(d, c.BaseTypeOid, -1)
		if t.Reason == "" && t.Repr == ReprString && !isTextLike(c.BaseTypeOid) {
			t.Reason = fmt.Sprintf("domain %s over an unmapped type", c.TypeName)
		}
		return t
	case 'e':
		// Enum labels can be added and renamed: a ClickHouse Enum would
		// need an ALTER each time, a string holds them all. Few distinct
		// values: LowCardinality where the server has it.
		if d.LowCardinality {
			return ColumnType{Type: "LowCardinality(String)", Repr: ReprString}
		}
		return str("")
	case 'r', 'm':
		return str("") // ranges have no ClickHouse type
	case 'c':
		return str("") // composites: their text form
	case 'p':
		return str(fmt.Sprintf("pseudo-type %s", c.TypeName))
	}
	if isArray(c) {
		// A nullable array's NULLs go to its NULL flag column
		// (ColumnSpec.NullFlag): ClickHouse has no Nullable(Array(...)).
		elem := mapOid(d, c.ElemTypeOid, c.TypMod)
		return ColumnType{Type: "Array(Nullable(" + elem.Type + "))", Repr: ReprArray, Elem: &elem}
	}
	return mapOid(d, c.TypeOid, c.TypMod)
}

// isArray: a true array type (typelem set and varlena, with "[]" in its
// formatted name). name (elem char, fixed length) and point (elem float8)
// also have typelem; int2vector and oidvector print as space-separated
// lists, not array text.
func isArray(c desclog.Column) bool {
	return c.ElemTypeOid != 0 && c.Len == -1 && c.TypeOid != oidInt2vector && c.TypeOid != oidOidvector &&
		strings.HasSuffix(c.TypeName, "[]")
}

func isTextLike(oid uint32) bool {
	switch oid {
	case oidText, oidVarchar, oidBpchar, oidName, oidChar, oidJSON, oidJSONB, oidTime, oidTimetz,
		oidInterval, oidInet, oidCidr, oidMacaddr, oidMoney:
		return true
	}
	return false
}

// mapOid maps a base (non-array, non-domain) type.
func mapOid(d Dialect, oid uint32, typmod int32) ColumnType {
	switch oid {
	case oidBool:
		if d.Bool {
			return ColumnType{Type: "Bool", Repr: ReprBool}
		}
		return ColumnType{Type: "UInt8", Repr: ReprBool}
	case oidInt2:
		return ColumnType{Type: "Int16", Repr: ReprInt}
	case oidInt4:
		return ColumnType{Type: "Int32", Repr: ReprInt}
	case oidInt8:
		return ColumnType{Type: "Int64", Repr: ReprInt}
	case oidOid:
		return ColumnType{Type: "UInt32", Repr: ReprUInt32}
	case oidFloat4:
		return ColumnType{Type: "Float32", Repr: ReprFloat}
	case oidFloat8:
		return ColumnType{Type: "Float64", Repr: ReprFloat}
	case oidNumeric:
		return mapNumeric(d, typmod)
	case oidUUID:
		return ColumnType{Type: "UUID", Repr: ReprUUID}
	case oidBytea:
		return ColumnType{Type: "String", Repr: ReprBytes}
	case oidDate:
		if d.Date32 {
			return ColumnType{Type: "Date32", Repr: ReprDate}
		}
		// Date would refuse everything before 1970 and after 2105.
		return ColumnType{Type: "Int32", Repr: ReprUnixDays}
	case oidTimestamp, oidTimestamptz:
		if d.DateTime64 {
			return ColumnType{Type: "DateTime64(6, 'UTC')", Repr: ReprDateTime64}
		}
		return ColumnType{Type: "Int64", Repr: ReprUnixMicros}
	}
	if isTextLike(oid) {
		return str("")
	}
	return str(fmt.Sprintf("type oid %d has no ClickHouse mapping", oid))
}

// mapNumeric: numeric(p,s) with 0 <= s <= p and p within the server's
// Decimal limit is Decimal(p,s); unconstrained numeric, negative scales,
// scales above the precision (both legal in PostgreSQL 15) and wider
// precisions are String.
func mapNumeric(d Dialect, typmod int32) ColumnType {
	if typmod < 4 { // VARHDRSZ: -1 is unconstrained
		return str("unconstrained numeric")
	}
	precision := int((typmod - 4) >> 16 & 0xffff)
	scale := int(((typmod-4)&0x7ff ^ 1024) - 1024)
	maxPrecision := 38
	if d.Decimal256 {
		maxPrecision = 76
	}
	switch {
	case precision < 1 || precision > maxPrecision:
		return str(fmt.Sprintf("numeric(%d,%d) exceeds Decimal's precision limit %d", precision, scale, maxPrecision))
	case scale < 0 || scale > precision:
		return str(fmt.Sprintf("numeric(%d,%d) has a scale outside 0..precision", precision, scale))
	}
	return ColumnType{Type: fmt.Sprintf("Decimal(%d, %d)", precision, scale), Repr: ReprDecimal, Precision: precision, Scale: scale}
}

// NumericTypmod builds numeric(p,s)'s atttypmod (for tests and overrides).
func NumericTypmod(precision, scale int) int32 {
	return int32(precision<<16|(scale&0x7ff)) + 4
}

// DateRange is the inclusive range of calendar dates ReprDate and
// ReprDateTime64 columns can hold on d, as "YYYY-MM-DD" (the output
// refuses values outside it rather than letting ClickHouse wrap them).
// Without Date32 it is Date's range (UInt16 days since 1970, functions stop
// at 2105); the type map uses ReprUnixDays there, so only an override
// produces such a Date column.
func (d Dialect) DateRange() (first, last string) {
	switch {
	case !d.Date32:
		return "1970-01-01", "2105-12-31"
	case d.WideDateRange:
		return "1900-01-01", "2299-12-31"
	default:
		return "1925-01-01", "2283-11-11"
	}
}
