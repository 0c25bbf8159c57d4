package clickhouse

import (
	"encoding/hex"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/pgfloat"
)

// CanonicalText renders v, a value clickhouse-go scanned from column spec
// (of the scan type of spec.TypeSQL(), or a pointer to it), as PostgreSQL's
// text output of source column src under rowmodel.CompareSettings: the
// inverse of the output's forward conversion, so tests can compare a
// ClickHouse table with its source value by value. null reports NULL (a nil
// value or nil pointer). src supplies what the ClickHouse type does not
// say: whether a microsecond count is a timestamp or a timestamptz.
func CanonicalText(src desclog.Column, spec ColumnSpec, v any) (text string, null bool, err error) {
	v, null = deref(v)
	if null {
		return "", true, nil
	}
	text, err = canonicalValue(src, effectiveOid(src), spec.Type, v)
	if err != nil {
		return "", false, fmt.Errorf("column %q (%s): %w", spec.Name, spec.TypeSQL(), err)
	}
	return text, false, nil
}

// deref follows pointers; a nil value or nil pointer is NULL.
func deref(v any) (any, bool) {
	if v == nil {
		return nil, true
	}
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return nil, true
		}
		rv = rv.Elem()
	}
	return rv.Interface(), false
}

// effectiveOid is the type oid whose datums the column stores: a domain's
// base type.
func effectiveOid(src desclog.Column) uint32 {
	if src.TypeKind == 'd' && src.BaseTypeOid != 0 {
		return src.BaseTypeOid
	}
	return src.TypeOid
}

// canonicalValue renders non-NULL v of ClickHouse type t; oid is the
// source type of the value (an array's element type for elements).
func canonicalValue(src desclog.Column, oid uint32, t ColumnType, v any) (string, error) {
	switch t.Repr {
	case ReprString:
		if s, ok := v.(string); ok {
			return s, nil
		}
	case ReprBytes:
		switch x := v.(type) {
		case string:
			return `\x` + hex.EncodeToString([]byte(x)), nil
		case []byte:
			return `\x` + hex.EncodeToString(x), nil
		}
	case ReprBool:
		switch x := v.(type) {
		case bool:
			return boolText(x), nil
		case uint8:
			if x > 1 {
				return "", fmt.Errorf("boolean stored as %d, not 0 or 1", x)
			}
			return boolText(x == 1), nil
		}
	case ReprInt, ReprUInt32:
		if s, ok := integerText(v); ok {
			return s, nil
		}
	case ReprFloat:
		switch x := v.(type) {
		case float32:
			return pgfloat.Format(float64(x), 32), nil
		case float64:
			return pgfloat.Format(x, 64), nil
		}
	case ReprDecimal:
		// shopspring/decimal's Decimal, without importing the driver's
		// dependency here: numeric(p,s) prints exactly s fraction digits.
		if d, ok := v.(interface{ StringFixed(places int32) string }); ok {
			return trimScale(d.StringFixed(int32(t.Scale)), t.Scale, src, oid), nil
		}
	case ReprUUID:
		switch x := v.(type) {
		case [16]byte:
			return uuidText(x), nil
		case string:
			return strings.ToLower(x), nil
		}
		// github.com/google/uuid.UUID is a named [16]byte.
		if rv := reflect.ValueOf(v); rv.Kind() == reflect.Array && rv.Len() == 16 && rv.Type().Elem().Kind() == reflect.Uint8 {
			var b [16]byte
			reflect.Copy(reflect.ValueOf(b[:]), rv)
			return uuidText(b), nil
		}
	case ReprDate:
		if x, ok := v.(time.Time); ok {
			// The driver returns a Date as midnight of its calendar day in
			// the column's location: the wall date is the value.
			return dateText(int64(x.Year()), int(x.Month()), x.Day()), nil
		}
	case ReprUnixDays:
		if x, ok := v.(int32); ok {
			switch x {
			case UnixDaysInfinity:
				return "infinity", nil
			case UnixDaysMinusInfinity:
				return "-infinity", nil
			}
			y, m, d := civilFromDays(int64(x))
			return dateText(y, m, d), nil
		}
	case ReprUnixMicros:
		if x, ok := v.(int64); ok {
			withZone, err := timestampWithZone(oid)
			if err != nil {
				return "", err
			}
			switch x {
			case UnixMicrosInfinity:
				return "infinity", nil
			case UnixMicrosMinusInfinity:
				return "-infinity", nil
			}
			return unixMicrosText(x, withZone), nil
		}
	case ReprDateTime64:
		if x, ok := v.(time.Time); ok {
			withZone, err := timestampWithZone(oid)
			if err != nil {
				return "", err
			}
			return unixMicrosText(x.UnixMicro(), withZone), nil
		}
	case ReprArray:
		return arrayText(src, t, v)
	default:
		return "", fmt.Errorf("no canonical text for representation %d", t.Repr)
	}
	return "", fmt.Errorf("unexpected scanned value %T (%v) for %s", v, v, t.Type)
}

func boolText(b bool) string {
	if b {
		return "t"
	}
	return "f"
}

func integerText(v any) (string, bool) {
	switch x := v.(type) {
	case int8:
		return strconv.FormatInt(int64(x), 10), true
	case int16:
		return strconv.FormatInt(int64(x), 10), true
	case int32:
		return strconv.FormatInt(int64(x), 10), true
	case int64:
		return strconv.FormatInt(x, 10), true
	case uint8:
		return strconv.FormatUint(uint64(x), 10), true
	case uint16:
		return strconv.FormatUint(uint64(x), 10), true
	case uint32:
		return strconv.FormatUint(uint64(x), 10), true
	case uint64:
		return strconv.FormatUint(x, 10), true
	}
	return "", false
}

func uuidText(b [16]byte) string {
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// timestampWithZone tells timestamptz (printed with "+00") from timestamp
// by the source type: the ClickHouse column is the same for both.
func timestampWithZone(oid uint32) (bool, error) {
	switch oid {
	case oidTimestamp:
		return false, nil
	case oidTimestamptz:
		return true, nil
	}
	return false, fmt.Errorf("source type oid %d is neither timestamp nor timestamptz", oid)
}

// unixMicrosText prints µs since 1970-01-01 00:00:00 UTC as PostgreSQL's
// timestamp(tz) output with DateStyle ISO and TimeZone UTC:
// "YYYY-MM-DD HH:MM:SS[.ffffff][+00][ BC]", trailing fraction zeros
// trimmed.
func unixMicrosText(micros int64, withZone bool) string {
	days, rem := floorDiv(micros, microsecondsPerDay)
	y, m, d := civilFromDays(days)
	secs, frac := rem/1e6, rem%1e6
	var b strings.Builder
	year, bc := pgYear(y)
	fmt.Fprintf(&b, "%04d-%02d-%02d %02d:%02d:%02d", year, m, d, secs/3600, secs/60%60, secs%60)
	if frac != 0 {
		b.WriteByte('.')
		b.WriteString(strings.TrimRight(fmt.Sprintf("%06d", frac), "0"))
	}
	if withZone {
		b.WriteString("+00")
	}
	if bc {
		b.WriteString(" BC")
	}
	return b.String()
}

// dateText prints a proleptic Gregorian date (astronomical year: 0 is
// 1 BC) as PostgreSQL's date output with DateStyle ISO.
func dateText(y int64, m, d int) string {
	year, bc := pgYear(y)
	s := fmt.Sprintf("%04d-%02d-%02d", year, m, d)
	if bc {
		s += " BC"
	}
	return s
}

// pgYear converts an astronomical year to PostgreSQL's printed year and
// era: there is no year 0, 0 is 1 BC.
func pgYear(y int64) (int64, bool) {
	if y <= 0 {
		return 1 - y, true
	}
	return y, false
}

func floorDiv(a, b int64) (q, r int64) {
	q, r = a/b, a%b
	if r < 0 {
		q--
		r += b
	}
	return q, r
}

// civilFromDays converts days since 1970-01-01 to a proleptic Gregorian
// date with an astronomical year (H. Hinnant's civil_from_days): exact over
// the whole int64 µs range, where time.Time formatting has no BC era.
func civilFromDays(days int64) (y int64, m, d int) {
	z := days + 719468
	era, _ := floorDiv(z, 146097)
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y = yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = int(doy - (153*mp+2)/5 + 1)
	if mp < 10 {
		m = int(mp + 3)
	} else {
		m = int(mp - 9)
	}
	if m <= 2 {
		y++
	}
	return y, m, d
}

// arrayText renders Array(Nullable(T)) as PostgreSQL's array_out does for
// a one-dimensional array with lower bound 1: "{a,b,NULL}", with elements
// quoted where array_out quotes them.
func arrayText(src desclog.Column, t ColumnType, v any) (string, error) {
	if t.Elem == nil {
		return "", fmt.Errorf("array type %s has no element type", t.Type)
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Slice && rv.Kind() != reflect.Array {
		return "", fmt.Errorf("unexpected scanned value %T (%v) for %s", v, v, t.Type)
	}
	var b strings.Builder
	b.WriteByte('{')
	for i := 0; i < rv.Len(); i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		elem, null := deref(rv.Index(i).Interface())
		if null {
			b.WriteString("NULL")
			continue
		}
		text, err := canonicalValue(src, src.ElemTypeOid, *t.Elem, elem)
		if err != nil {
			return "", fmt.Errorf("element %d: %w", i+1, err)
		}
		writeArrayElement(&b, text)
	}
	b.WriteByte('}')
	return b.String(), nil
}

// writeArrayElement quotes as array_out (arrayfuncs.c) does: empty
// strings, "NULL" in any case, and texts containing quotes, backslashes,
// braces, the ',' delimiter or array_isspace whitespace are double-quoted
// with '"' and '\' backslash-escaped.
func writeArrayElement(b *strings.Builder, text string) {
	needsQuotes := text == "" || strings.EqualFold(text, "NULL") ||
		strings.ContainsAny(text, "\"\\{}, \t\n\r\v\f")
	if !needsQuotes {
		b.WriteString(text)
		return
	}
	b.WriteByte('"')
	for i := 0; i < len(text); i++ {
		if text[i] == '"' || text[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(text[i])
	}
	b.WriteByte('"')
}

// trimScale renders text (a decimal printed with scale fraction digits)
// as PostgreSQL prints it for a numeric column of a smaller scale, which
// a wider ClickHouse Decimal kept after a type change holds exactly: the
// digits past the source's scale go when they are zeros (a nonzero one
// stays, so the difference shows).
func trimScale(text string, scale int, src desclog.Column, oid uint32) string {
	const numericOid, varHdrSz = 1700, 4
	if oid != numericOid || src.TypMod < varHdrSz {
		return text
	}
	want := int((src.TypMod - varHdrSz) & 0xffff)
	if want >= scale {
		return text
	}
	cut := text[len(text)-(scale-want):]
	if strings.Trim(cut, "0") != "" {
		return text
	}
	text = text[:len(text)-(scale-want)]
	if want == 0 {
		text = strings.TrimSuffix(text, ".")
	}
	return text
}
