package clickhouse

import (
	"fmt"

	"github.com/walshadow/walshadow/internal/desclog"
)

// TypeChangeAction is what a source column's type change (ALTER COLUMN
// ... TYPE, or DROP NOT NULL) does to its ClickHouse column.
type TypeChangeAction uint8

const (
	// TypeChangeKeep: the ClickHouse column stays as it is. Its type is the
	// new mapping's and every value it holds is what the output writes for
	// the value under the new source type.
	TypeChangeKeep TypeChangeAction = iota
	// TypeChangeModify: ALTER TABLE ... MODIFY COLUMN to the new type.
	// ClickHouse's conversion of every value the old column type can hold
	// is exactly the value the output writes for the new source type.
	TypeChangeModify
	// TypeChangeReload: no statement brings the column there exactly; the
	// table is reloaded under its new shape.
	TypeChangeReload
)

func (a TypeChangeAction) String() string {
	switch a {
	case TypeChangeKeep:
		return "keep"
	case TypeChangeModify:
		return "modify"
	case TypeChangeReload:
		return "reload"
	}
	return fmt.Sprintf("TypeChangeAction(%d)", uint8(a))
}

// TypeChange is the classification of one column type change.
type TypeChange struct {
	Action TypeChangeAction
	// Reason says why, for logs and errors.
	Reason string
}

// ClassifyTypeChange decides what the type change of a source column from
// before to after does to its ClickHouse column, whose spec is from and whose
// new mapping is to (same name; to.Nullable stays true where from was
// Nullable: SET NOT NULL keeps a Nullable column). inKey: the column is
// part of the table's sorting key, which ClickHouse cannot modify.
//
// The rule: the ClickHouse column is kept or modified only when ClickHouse
// already holds, or its CAST to the new type yields, exactly what the
// output would write for every value the old type can hold after
// PostgreSQL converted it to the new type. Anything else, and anything not
// known for certain, reloads. See the table in doc.go ("Type changes").
//
// PostgreSQL's ALTER COLUMN ... TYPE ... USING expr transforms values and
// leaves the same catalog as a plain cast, so nothing here can tell them
// apart: the classification assumes the values were cast (the default
// USING, an assignment cast), not transformed. A caller that knows a
// USING expression was given must reload instead.
func ClassifyTypeChange(before, after desclog.Column, from, to ColumnSpec, inKey bool) TypeChange {
	change, why := sourceValueChange(before, after)
	reload := func(format string, args ...any) TypeChange {
		return TypeChange{Action: TypeChangeReload, Reason: fmt.Sprintf(format, args...)}
	}
	// The values walshadow writes after the change are the new values
	// converted by the new ColumnType, so the old column agrees with them
	// when the representation is the same and the values are.
	sameValues := func() bool {
		return from.Type.Repr == to.Type.Repr && (change == sameDecoded || change == sameNumber && numericRepr(to.Type.Repr))
	}
	fromType, toType := normalizeType(from.TypeSQL()), normalizeType(to.TypeSQL())
	switch {
	case from.NullFlag() == "" && to.NullFlag() != "":
		// DROP NOT NULL of an array: the array column can stay as it is;
		// NULLs need its NULL flag column, every row so far being 0.
		if fromType != toType || from.Type.Repr != to.Type.Repr || !sameValues() {
			return reload("NOT NULL dropped with another change: %s to %s", from.TypeSQL(), to.TypeSQL())
		}
		return TypeChange{Action: TypeChangeModify, Reason: fmt.Sprintf("NOT NULL dropped: NULL flag column %s added", QuoteIdent(to.NullFlag()))}
	case fromType == toType:
		if from.Type.Repr != to.Type.Repr {
			return reload("the ClickHouse type %s is unchanged but the output writes %s's values into it differently than %s's", to.TypeSQL(), after.TypeName, before.TypeName)
		}
		if !sameValues() {
			return reload("the ClickHouse type %s is unchanged but the values change: %s", to.TypeSQL(), why)
		}
		return TypeChange{Action: TypeChangeKeep, Reason: fmt.Sprintf("ClickHouse type %s unchanged and every value is the same", to.TypeSQL())}
	case from.Nullable && !to.Nullable:
		return reload("%s to %s would lose NULLs", from.TypeSQL(), to.TypeSQL())
	case inKey:
		return reload("%s is in the sorting key, which ClickHouse cannot modify", QuoteIdent(from.Name))
	case normalizeType(from.Type.Type) == normalizeType(to.Type.Type):
		// Only the Nullable wrapper is new: DROP NOT NULL (perhaps with a
		// change that keeps every value, e.g. varchar(10) to text).
		if !sameValues() {
			return reload("the values change: %s", why)
		}
		return TypeChange{Action: TypeChangeModify, Reason: fmt.Sprintf("NOT NULL dropped: %s becomes %s", from.TypeSQL(), to.TypeSQL())}
	case from.Type.Repr == ReprString && to.Type.Repr == ReprString && plainType(from.Type.Type) == plainType(to.Type.Type):
		// String to and from LowCardinality(String): the same strings.
		if !sameValues() {
			return reload("the values change: %s", why)
		}
		return TypeChange{Action: TypeChangeModify, Reason: fmt.Sprintf("ClickHouse converts %s to %s exactly", from.TypeSQL(), to.TypeSQL())}
	case from.Type.Repr == ReprString || to.Type.Repr == ReprString:
		// ClickHouse's text of a value (toString) is not PostgreSQL's
		// output, nor does it parse PostgreSQL's text the way the output
		// converts it.
		return reload("%s to %s: ClickHouse's conversion to or from String is not PostgreSQL's text", from.TypeSQL(), to.TypeSQL())
	case change == valuesChange:
		return reload("%s", why)
	case !numericRepr(from.Type.Repr) || !numericRepr(to.Type.Repr):
		return reload("%s to %s is not a conversion known to be exact", from.TypeSQL(), to.TypeSQL())
	}
	if exact, why := exactCast(from.Type, to.Type); !exact {
		return reload("%s", why)
	}
	return TypeChange{Action: TypeChangeModify, Reason: fmt.Sprintf("ClickHouse converts %s to %s exactly", from.TypeSQL(), to.TypeSQL())}
}

// plainType is t without a LowCardinality wrapper.
func plainType(t string) string {
	if inner, ok := unwrapType(t, "LowCardinality"); ok {
		return inner
	}
	return t
}

func numericRepr(r Repr) bool {
	return r == ReprInt || r == ReprUInt32 || r == ReprFloat || r == ReprDecimal
}

// valueChange says how PostgreSQL's conversion to the new type changes
// the values of a column, as walshadow_decode delivers them.
type valueChange uint8

const (
	// valuesChange: some value can change, or it is not known that none
	// does.
	valuesChange valueChange = iota
	// sameNumber: every value is the same number, its decoded form may
	// differ (int64 becomes float64, numeric gains trailing zeros).
	sameNumber
	// sameDecoded: every value decodes exactly as before.
	sameDecoded
)

// pgType is a column's type as its datums are stored: a domain is its
// base type, with the domain's typmod unknown.
type pgType struct {
	name   string
	oid    uint32
	typmod int32
	kind   byte
	// domain: typmod is not known (the descriptor has no domain typmod);
	// as an old type it is taken as unconstrained (it may hold anything
	// the base type holds), as a new one as unknown.
	domain bool
}

func scalarType(c desclog.Column) pgType {
	if c.TypeKind == 'd' {
		return pgType{name: c.TypeName, oid: c.BaseTypeOid, typmod: -1, kind: 'b', domain: true}
	}
	return pgType{name: c.TypeName, oid: c.TypeOid, typmod: c.TypMod, kind: c.TypeKind}
}

// sourceValueChange compares before's values with what PostgreSQL's cast
// to after's type makes of them.
func sourceValueChange(before, after desclog.Column) (valueChange, string) {
	if desclog.CompositeChanged(&before, &after) {
		// Same type, other attributes: PostgreSQL reads the stored values
		// with the new ones, writing nothing.
		return valuesChange, fmt.Sprintf("the composite type's attributes changed (%s to %s), which changes how every stored value reads", before.TypeName, after.TypeName)
	}
	oldArr, newArr := isArray(before), isArray(after)
	switch {
	case oldArr && newArr:
		// Arrays are decoded as their text: only a change that keeps each
		// element's text keeps the array's.
		o := pgType{name: before.TypeName, oid: before.ElemTypeOid, typmod: before.TypMod, kind: 'b'}
		n := pgType{name: after.TypeName, oid: after.ElemTypeOid, typmod: after.TypMod, kind: 'b'}
		if c, why := scalarChange(o, n, true); c != sameDecoded {
			return valuesChange, why
		}
		return sameDecoded, ""
	case oldArr || newArr:
		return valuesChange, fmt.Sprintf("%s to %s changes between an array and a scalar", before.TypeName, after.TypeName)
	}
	return scalarChange(scalarType(before), scalarType(after), false)
}

// typmodFree are types whose typmod is always -1.
func typmodFree(oid uint32) bool {
	switch oid {
	case oidBool, oidBytea, oidChar, oidName, oidInt8, oidInt2, oidInt4, oidText, oidOid, oidJSON, oidFloat4, oidFloat8,
		oidMoney, oidMacaddr, oidInet, oidCidr, oidDate, oidUUID, oidJSONB:
		return true
	}
	return false
}

// integerRank orders the integer types by width (0: not one).
func integerRank(oid uint32) int {
	switch oid {
	case oidInt2:
		return 1
	case oidInt4:
		return 2
	case oidInt8:
		return 3
	}
	return 0
}

// integerDigits is the most decimal digits a value of integer type oid
// has.
func integerDigits(oid uint32) int {
	switch oid {
	case oidInt2:
		return 5
	case oidInt4, oidOid:
		return 10
	case oidInt8:
		return 19
	}
	return 0
}

// numericPS decodes numeric's typmod; ok is false when unconstrained.
func numericPS(typmod int32) (precision, scale int, ok bool) {
	if typmod < 4 {
		return 0, 0, false
	}
	return int((typmod - 4) >> 16 & 0xffff), int(((typmod-4)&0x7ff ^ 1024) - 1024), true
}

// fractionDigits is the precision of a time or timestamp typmod: -1 is 6.
func fractionDigits(typmod int32) int32 {
	if typmod < 0 {
		return 6
	}
	return typmod
}

// textual are types decoded as their text, which text (and unconstrained
// varchar) takes over unchanged: an assignment or I/O cast to text is the
// type's output. Types whose text cast is not their output (bpchar trims
// the padding, inet's text adds the netmask, "char" escapes) and types
// whose output depends on the session (money, interval, time) are not.
func textual(t pgType) bool {
	switch {
	case t.kind == 'e':
		return true // an enum's text is its label
	case t.kind != 'b':
		return false
	}
	switch t.oid {
	case oidText, oidVarchar, oidName, oidJSON, oidJSONB:
		return true
	}
	return false
}

// scalarChange: text asks for a change that keeps each value's text
// output (the elements of an array), not only its decoded value.
func scalarChange(o, n pgType, text bool) (valueChange, string) {
	changes := func(format string, args ...any) (valueChange, string) {
		return valuesChange, fmt.Sprintf(format, args...)
	}
	if n.domain && !typmodFree(n.oid) {
		return changes("%s is a domain whose typmod the descriptor does not hold", n.name)
	}
	if o.oid == n.oid {
		if typmodFree(o.oid) || o.typmod == n.typmod || o.kind != 'b' {
			return sameDecoded, ""
		}
		switch o.oid {
		case oidVarchar:
			if n.typmod < 0 || o.typmod >= 0 && n.typmod >= o.typmod {
				return sameDecoded, ""
			}
			return changes("%s to %s shortens the limit: PostgreSQL cuts trailing spaces past it", o.name, n.name)
		case oidBpchar:
			return changes("%s to %s changes the blank padding of every value", o.name, n.name)
		case oidNumeric:
			return numericChange(o, n, text)
		case oidTimestamp, oidTimestamptz, oidTime, oidTimetz:
			if n.typmod < 0 || fractionDigits(n.typmod) >= fractionDigits(o.typmod) {
				return sameDecoded, ""
			}
			return changes("%s to %s rounds to fewer fractional digits", o.name, n.name)
		}
		return changes("%s to %s: a typmod change of a type whose values it may change", o.name, n.name)
	}
	oldInt, newInt := integerRank(o.oid), integerRank(n.oid)
	switch {
	case oldInt > 0 && newInt > 0:
		if newInt > oldInt {
			return sameDecoded, ""
		}
		return changes("%s to %s is a narrowing", o.name, n.name)
	case o.oid == oidOid && n.oid == oidInt8:
		return sameDecoded, ""
	case (oldInt > 0 || o.oid == oidOid) && n.oid == oidNumeric:
		if text {
			return changes("%s to %s changes the text of the values", o.name, n.name)
		}
		if p, s, ok := numericPS(n.typmod); n.typmod < 0 || ok && p-s >= integerDigits(o.oid) {
			return sameNumber, fmt.Sprintf("%s to %s keeps every number, the values become numerics", o.name, n.name)
		}
		return changes("%s to %s has fewer integer digits than %s's values", o.name, n.name, o.name)
	case oldInt > 0 && (n.oid == oidFloat8 || n.oid == oidFloat4):
		if text {
			return changes("%s to %s changes the text of the values", o.name, n.name)
		}
		if o.oid == oidInt8 || o.oid == oidInt4 && n.oid == oidFloat4 {
			return changes("%s to %s rounds integers the float's mantissa cannot hold", o.name, n.name)
		}
		return sameNumber, fmt.Sprintf("%s to %s keeps every number, the values become floats", o.name, n.name)
	case o.oid == oidFloat4 && n.oid == oidFloat8:
		if text {
			return changes("%s to %s changes the text of the values", o.name, n.name)
		}
		// float4's value widened to float8 is the float64 the decoder
		// already delivers for it.
		return sameDecoded, ""
	case o.oid == oidFloat8 && n.oid == oidFloat4:
		return changes("%s to %s rounds to float4", o.name, n.name)
	case textual(o) && (n.oid == oidText || n.oid == oidVarchar && n.typmod < 0):
		return sameDecoded, ""
	case (o.oid == oidText || o.oid == oidVarchar || o.oid == oidJSONB) && n.oid == oidJSON:
		// json keeps its input text verbatim (jsonb's is its output).
		return sameDecoded, ""
	case o.oid == oidJSON && n.oid == oidJSONB:
		return changes("%s to %s normalizes the text (key order, duplicate keys, white space)", o.name, n.name)
	case n.oid == oidBpchar:
		return changes("%s to %s pads the values with blanks", o.name, n.name)
	case o.oid == oidBpchar:
		return changes("%s to %s trims the values' trailing blanks", o.name, n.name)
	case n.oid == oidVarchar && textual(o):
		return changes("%s to %s: PostgreSQL cuts trailing spaces past the limit", o.name, n.name)
	case isTimestamp(o.oid) && isTimestamp(n.oid):
		return changes("%s to %s converts every value in the session's time zone", o.name, n.name)
	}
	return changes("%s to %s is not a conversion known to keep every value", o.name, n.name)
}

func isTimestamp(oid uint32) bool { return oid == oidTimestamp || oid == oidTimestamptz }

// numericChange: numeric(p,s) to numeric(p',s').
func numericChange(o, n pgType, text bool) (valueChange, string) {
	if n.typmod < 0 {
		return sameDecoded, "" // no rounding, the display scale stays
	}
	op, os, ok := numericPS(o.typmod)
	if !ok {
		return valuesChange, fmt.Sprintf("%s to %s rounds values to the new scale", o.name, n.name)
	}
	np, ns, _ := numericPS(n.typmod)
	switch {
	case np-ns < op-os:
		return valuesChange, fmt.Sprintf("%s to %s has fewer integer digits", o.name, n.name)
	case ns < os:
		return valuesChange, fmt.Sprintf("%s to %s rounds values to the smaller scale", o.name, n.name)
	case ns == os:
		return sameDecoded, ""
	case text:
		return valuesChange, fmt.Sprintf("%s to %s adds trailing zeros to the text of the values", o.name, n.name)
	}
	return sameNumber, fmt.Sprintf("%s to %s keeps every number, its text gains trailing zeros", o.name, n.name)
}

// exactCast: ClickHouse's CAST of every value of from gives the same
// number in to.
func exactCast(from, to ColumnType) (bool, string) {
	intDigits := map[string]int{"Int16": 5, "Int32": 10, "Int64": 19, "UInt32": 10}
	intBits := map[string]int{"Int16": 16, "Int32": 32, "Int64": 64, "UInt32": 32}
	no := func(why string) (bool, string) {
		return false, fmt.Sprintf("%s to %s: %s", from.Type, to.Type, why)
	}
	fromInt, toInt := intBits[from.Type], intBits[to.Type]
	switch {
	case fromInt > 0 && toInt > 0:
		if toInt > fromInt && to.Type != "UInt32" {
			return true, ""
		}
		return no("a narrowing or a change of sign")
	case fromInt > 0 && to.Type == "Float64":
		if fromInt <= 32 {
			return true, ""
		}
		return no("Float64 does not hold every Int64")
	case fromInt > 0 && to.Type == "Float32":
		if fromInt <= 16 {
			return true, ""
		}
		return no("Float32 does not hold every " + from.Type)
	case fromInt > 0 && to.Repr == ReprDecimal:
		if to.Precision > 0 && to.Precision-to.Scale >= intDigits[from.Type] {
			return true, ""
		}
		return no("the Decimal has fewer integer digits")
	case from.Type == "Float32" && to.Type == "Float64":
		return true, ""
	case from.Repr == ReprDecimal && to.Repr == ReprDecimal:
		if from.Precision > 0 && to.Precision > 0 && to.Scale >= from.Scale && to.Precision-to.Scale >= from.Precision-from.Scale {
			return true, ""
		}
		return no("fewer integer digits or a smaller scale")
	}
	return no("not a conversion known to be exact")
}
