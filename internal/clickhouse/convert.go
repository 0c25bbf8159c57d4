package clickhouse

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/shopspring/decimal"

	"github.com/walshadow/walshadow/internal/pgfloat"
)

// ConvertValue converts one decoded value (the walshadow_decode payload
// types, or what a Benthos mapping left: see the package documentation) to
// the Go value clickhouse-go's batch.Append takes for a column of type
// spec.TypeSQL(). Nullable columns get nil for NULL and the plain value
// otherwise (clickhouse-go's Nullable columns take both). Zero is NULL in a
// Nullable column and the type's zero value in others; nil in a column that
// is not Nullable is an error. What the column cannot hold exactly is an
// error naming the value and the type, never rounded or wrapped.
func ConvertValue(spec ColumnSpec, v any) (any, error) {
	if v == nil || v == Zero {
		switch {
		case spec.Nullable:
			return nil, nil
		case v == Zero:
			return zeroValue(spec.Type)
		}
		return nil, convertError(spec, v, "NULL in a column that is not Nullable")
	}
	out, err := convertNonNull(spec.Type, v)
	if err != nil {
		return nil, wrapConvertError(spec, v, err)
	}
	return out, nil
}

// conversionError is a refusal of one value; wrapConvertError adds the
// value and the column type.
type conversionError struct{ reason string }

func (e *conversionError) Error() string { return e.reason }

func refuse(format string, args ...any) error {
	return &conversionError{reason: fmt.Sprintf(format, args...)}
}

func convertError(spec ColumnSpec, v any, reason string) error {
	return wrapConvertError(spec, v, refuse("%s", reason))
}

func wrapConvertError(spec ColumnSpec, v any, err error) error {
	msg := fmt.Sprintf("value %s does not fit %s", previewValue(v), spec.TypeSQL())
	if spec.Name != "" {
		msg = fmt.Sprintf("column %q: %s", spec.Name, msg)
	}
	return &ValueError{Column: spec.Name, Type: spec.Type.Type, Null: v == nil, msg: msg, err: err}
}

// ValueError is a value that column's ClickHouse type (Type, without
// Nullable) cannot hold: ConvertValue refused it. Null: the value is NULL
// and the column not Nullable.
type ValueError struct {
	Column, Type string
	Null         bool
	msg          string
	err          error
}

func (e *ValueError) Error() string { return e.msg + ": " + e.err.Error() }
func (e *ValueError) Unwrap() error { return e.err }

// maxPreviewBytes bounds the value shown in an error: a row can carry
// megabytes of text.
const maxPreviewBytes = 64

func previewValue(v any) string {
	var s string
	switch v := v.(type) {
	case nil:
		return "NULL"
	case zeroMarker:
		return "Zero"
	case string:
		s = strconv.Quote(truncateUTF8(v, maxPreviewBytes-2))
	case []byte:
		s = `\x` + fmt.Sprintf("%x", v[:min(len(v), (maxPreviewBytes-2)/2)])
	case time.Time:
		s = v.Format(time.RFC3339Nano)
	case json.Number:
		s = string(v)
	default:
		s = fmt.Sprintf("%v (%T)", v, v)
	}
	return truncateUTF8(s, maxPreviewBytes)
}

func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// convertNonNull converts a non-NULL value for column type t.
func convertNonNull(t ColumnType, v any) (any, error) {
	if v == Zero {
		return zeroValue(t)
	}
	switch t.Repr {
	case ReprString:
		return toStringValue(v)
	case ReprBytes:
		switch v := v.(type) {
		case []byte:
			return string(v), nil
		case string:
			return v, nil
		}
		return nil, refuse("%T is not bytes", v)
	case ReprBool:
		b, err := toBool(v)
		if err != nil {
			return nil, err
		}
		if t.Type == "Bool" {
			return b, nil
		}
		if b {
			return uint8(1), nil
		}
		return uint8(0), nil
	case ReprInt, ReprUInt32:
		return toInteger(t.Type, v)
	case ReprFloat:
		return toFloat(t.Type, v)
	case ReprDecimal:
		return toDecimal(t, v)
	case ReprUUID:
		s, ok := v.(string)
		if !ok {
			return nil, refuse("%T is not a uuid's text", v)
		}
		if !isUUIDText(s) {
			return nil, refuse("not a uuid in canonical form")
		}
		return strings.ToLower(s), nil
	case ReprDate:
		return toDate(t.Type, v)
	case ReprUnixDays:
		return toUnixDays(v)
	case ReprDateTime64:
		return toDateTime64(v)
	case ReprUnixMicros:
		return toUnixMicros(t.Type, v)
	case ReprArray:
		return toArray(t, v)
	}
	return nil, refuse("no conversion for representation %d", t.Repr)
}

// toStringValue: strings as they are, other scalars as PostgreSQL prints
// them (a String column of a number or bool only arises from an override).
func toStringValue(v any) (any, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case []byte:
		return string(v), nil
	case json.Number:
		return string(v), nil
	case bool:
		return strconv.FormatBool(v), nil
	case float64:
		return pgfloat.Format(v, 64), nil
	case float32:
		return pgfloat.Format(float64(v), 32), nil
	case time.Time:
		return nil, refuse("a time.Time has no single PostgreSQL text form (date, timestamp or timestamptz?)")
	}
	if n, ok := integerOf(v); ok {
		return n.String(), nil
	}
	return nil, refuse("%T has no text form", v)
}

func toBool(v any) (bool, error) {
	switch v := v.(type) {
	case bool:
		return v, nil
	case string:
		switch v {
		case "t", "true":
			return true, nil
		case "f", "false":
			return false, nil
		}
		return false, refuse("not a boolean (t, f, true or false)")
	}
	return false, refuse("%T is not a boolean", v)
}

// wideInt is an integer of any Go integer type: a magnitude and a sign.
type wideInt struct {
	negative  bool
	magnitude uint64
}

func (n wideInt) String() string {
	s := strconv.FormatUint(n.magnitude, 10)
	if n.negative {
		return "-" + s
	}
	return s
}

// integerOf reads Go's integer types.
func integerOf(v any) (wideInt, bool) {
	signed := func(i int64) wideInt {
		if i < 0 {
			return wideInt{negative: true, magnitude: uint64(-(i + 1)) + 1}
		}
		return wideInt{magnitude: uint64(i)}
	}
	switch v := v.(type) {
	case int:
		return signed(int64(v)), true
	case int8:
		return signed(int64(v)), true
	case int16:
		return signed(int64(v)), true
	case int32:
		return signed(int64(v)), true
	case int64:
		return signed(v), true
	case uint:
		return wideInt{magnitude: uint64(v)}, true
	case uint8:
		return wideInt{magnitude: uint64(v)}, true
	case uint16:
		return wideInt{magnitude: uint64(v)}, true
	case uint32:
		return wideInt{magnitude: uint64(v)}, true
	case uint64:
		return wideInt{magnitude: v}, true
	}
	return wideInt{}, false
}

// parseWideInt parses an optionally signed decimal integer.
func parseWideInt(s string) (wideInt, error) {
	body, negative := strings.CutPrefix(s, "-")
	if !negative {
		body = strings.TrimPrefix(body, "+")
	}
	if body == "" || !allDigits(body) {
		return wideInt{}, refuse("not an integer")
	}
	m, err := strconv.ParseUint(body, 10, 64)
	if err != nil {
		return wideInt{}, refuse("integer out of range")
	}
	return wideInt{negative: negative && m != 0, magnitude: m}, nil
}

// integerBits gives the width and signedness of the integer types ReprInt
// and ReprUInt32 columns use (UInt8 and UInt64 for the synthetic columns).
var integerBits = map[string]struct {
	bits   int
	signed bool
}{
	"Int16": {16, true}, "Int32": {32, true}, "Int64": {64, true},
	"UInt8": {8, false}, "UInt32": {32, false}, "UInt64": {64, false},
}

func toInteger(typ string, v any) (any, error) {
	if i, ok := v.(int64); ok {
		// The decoder's integers: the common case, without the general
		// path's width lookup (a value out of range takes that path and
		// is refused there).
		switch {
		case typ == "Int64":
			return i, nil
		case typ == "Int32" && i >= math.MinInt32 && i <= math.MaxInt32:
			return int32(i), nil
		case typ == "Int16" && i >= math.MinInt16 && i <= math.MaxInt16:
			return int16(i), nil
		}
	}
	width, ok := integerBits[typ]
	if !ok {
		return nil, refuse("%s is not an integer type", typ)
	}
	var n wideInt
	switch v := v.(type) {
	case json.Number:
		p, err := parseWideInt(string(v))
		if err != nil {
			return nil, err
		}
		n = p
	case string:
		p, err := parseWideInt(v)
		if err != nil {
			return nil, err
		}
		n = p
	case float64:
		f, err := integralFloat(v)
		if err != nil {
			return nil, err
		}
		n = f
	case float32:
		f, err := integralFloat(float64(v))
		if err != nil {
			return nil, err
		}
		n = f
	default:
		i, ok := integerOf(v)
		if !ok {
			return nil, refuse("%T is not an integer", v)
		}
		n = i
	}
	if width.signed {
		limit := uint64(1) << (width.bits - 1) // |min|; max is limit-1
		if n.negative && n.magnitude > limit || !n.negative && n.magnitude >= limit {
			return nil, refuse("out of %s's range", typ)
		}
		i := int64(n.magnitude)
		if n.negative {
			i = -int64(n.magnitude-1) - 1
		}
		switch width.bits {
		case 16:
			return int16(i), nil
		case 32:
			return int32(i), nil
		}
		return i, nil
	}
	if n.negative || width.bits < 64 && n.magnitude >= uint64(1)<<width.bits {
		return nil, refuse("out of %s's range", typ)
	}
	switch width.bits {
	case 8:
		return uint8(n.magnitude), nil
	case 32:
		return uint32(n.magnitude), nil
	}
	return n.magnitude, nil
}

func integralFloat(f float64) (wideInt, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) || f != math.Trunc(f) {
		return wideInt{}, refuse("not an integral number")
	}
	if math.Abs(f) >= 1<<64 {
		return wideInt{}, refuse("integer out of range")
	}
	if f < 0 {
		return wideInt{negative: true, magnitude: uint64(-f)}, nil
	}
	return wideInt{magnitude: uint64(f)}, nil
}

func toFloat(typ string, v any) (any, error) {
	bits := 64
	switch typ {
	case "Float32":
		bits = 32
	case "Float64":
	default:
		return nil, refuse("%s is not a float type", typ)
	}
	var f float64
	switch v := v.(type) {
	case float64:
		f = v
	case float32:
		f = float64(v)
	case json.Number:
		p, err := parseFloatText(string(v), bits)
		if err != nil {
			return nil, err
		}
		f = p
	case string:
		p, err := parseFloatText(v, bits)
		if err != nil {
			return nil, err
		}
		f = p
	default:
		n, ok := integerOf(v)
		if !ok {
			return nil, refuse("%T is not a number", v)
		}
		// Integers convert only when the float holds them exactly.
		f = float64(n.magnitude)
		if n.negative {
			f = -f
		}
		if bits == 32 {
			f = float64(float32(f))
		}
		if back, err := integralFloat(f); err != nil || back != n {
			return nil, refuse("integer has no exact %s form", typ)
		}
	}
	if bits == 32 {
		narrow := float32(f)
		if math.IsInf(float64(narrow), 0) && !math.IsInf(f, 0) {
			return nil, refuse("out of Float32's range")
		}
		return narrow, nil
	}
	return f, nil
}

// parseFloatText parses float4/float8 output, "NaN" and "±Infinity"
// included.
func parseFloatText(s string, bits int) (float64, error) {
	switch s {
	case "NaN":
		return math.NaN(), nil
	case "Infinity":
		return math.Inf(1), nil
	case "-Infinity":
		return math.Inf(-1), nil
	}
	f, err := strconv.ParseFloat(s, bits)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		// ParseFloat also takes "inf" and "nan" spellings and reports
		// overflow as ±Inf: neither is PostgreSQL output.
		return 0, refuse("not a %d-bit float", bits)
	}
	return f, nil
}

func toDecimal(t ColumnType, v any) (any, error) {
	var text string
	switch v := v.(type) {
	case json.Number:
		text = string(v)
	case string:
		text = v
	case decimal.Decimal:
		text = v.String()
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, refuse("NaN and ±Infinity have no Decimal form (map the column to String with tables.<name>.column_types to keep them)")
		}
		text = strconv.FormatFloat(v, 'f', -1, 64)
	case float32:
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, refuse("NaN and ±Infinity have no Decimal form (map the column to String with tables.<name>.column_types to keep them)")
		}
		text = strconv.FormatFloat(float64(v), 'f', -1, 32)
	default:
		n, ok := integerOf(v)
		if !ok {
			return nil, refuse("%T is not a number", v)
		}
		text = n.String()
	}
	switch text {
	case "NaN", "Infinity", "-Infinity":
		return nil, refuse("NaN and ±Infinity have no Decimal form (map the column to String with tables.<name>.column_types to keep them)")
	}
	if err := checkDecimalDigits(text, t.Precision, t.Scale); err != nil {
		return nil, err
	}
	d, err := decimal.NewFromString(text)
	if err != nil {
		return nil, refuse("not a number: %v", err)
	}
	return d, nil
}

// checkDecimalDigits accepts plain decimal text (optional sign, digits,
// optional fraction) with at most precision-scale integer digits and at
// most scale fraction digits: the Decimal holds it without rounding.
func checkDecimalDigits(text string, precision, scale int) error {
	body := strings.TrimPrefix(text, "-")
	intPart, frac, hasPoint := strings.Cut(body, ".")
	if intPart == "" || !allDigits(intPart) || !allDigits(frac) || hasPoint && frac == "" {
		return refuse("not a plain decimal number")
	}
	if significant := strings.TrimLeft(intPart, "0"); len(significant) > precision-scale {
		return refuse("%d integer digits exceed Decimal(%d, %d)'s %d", len(significant), precision, scale, precision-scale)
	}
	// Trailing zeros of the fraction are only the source's display scale.
	if digits := strings.TrimRight(frac, "0"); len(digits) > scale {
		return refuse("%d fraction digits exceed the scale %d (values are never rounded)", len(digits), scale)
	}
	return nil
}

// dateBounds are the inclusive day ranges (days since 1970-01-01) of Date
// and Date32 as the output uses them: Date's functions stop at 2105, and
// Date32 is taken at its 22.8+ width (1900..2299).
var dateBounds = map[string]struct {
	first, last int64
	text        string
}{
	"Date":   {0, 49672, "1970-01-01..2105-12-31"},
	"Date32": {-25567, 120529, "1900-01-01..2299-12-31"},
}

// calendarDays is the calendar date of t (in t's own location) as days
// since 1970-01-01; a time of day is refused rather than dropped.
func calendarDays(t time.Time) (int64, error) {
	y, m, d := t.Date()
	if h, mi, s := t.Clock(); h != 0 || mi != 0 || s != 0 || t.Nanosecond() != 0 {
		return 0, refuse("a date has no time of day")
	}
	return floorDivide(time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix(), 86400), nil
}

// dateDays reads a date from a time.Time or PostgreSQL's date text.
func dateDays(v any) (int64, error) {
	switch v := v.(type) {
	case time.Time:
		return calendarDays(v)
	case string:
		days, err := pgDateDays(v)
		if err != nil {
			return 0, refuse("%v", err)
		}
		return int64(days), nil
	}
	return 0, refuse("%T is not a date", v)
}

func toDate(typ string, v any) (any, error) {
	bounds, ok := dateBounds[typ]
	if !ok {
		return nil, refuse("%s is not a date type", typ)
	}
	days, err := dateDays(v)
	if err != nil {
		return nil, err
	}
	if days < bounds.first || days > bounds.last {
		return nil, refuse("outside %s's range %s", typ, bounds.text)
	}
	return time.Unix(days*86400, 0).UTC(), nil
}

func toUnixDays(v any) (any, error) {
	days, err := dateDays(v)
	if err != nil {
		return nil, err
	}
	if days < math.MinInt32 || days > math.MaxInt32 {
		return nil, refuse("outside Int32 days")
	}
	return int32(days), nil
}

// timestampMicros reads an instant from a time.Time or PostgreSQL's
// timestamp text as µs since the epoch (the infinities as sentinels).
func timestampMicros(v any) (int64, error) {
	switch v := v.(type) {
	case time.Time:
		if v.Nanosecond()%1000 != 0 {
			return 0, refuse("sub-microsecond precision would be lost")
		}
		if y := v.UTC().Year(); y < -290000 || y > 290000 {
			return 0, refuse("outside the int64 microsecond range")
		}
		return v.UnixMicro(), nil
	case string:
		us, err := pgTimestampMicros(v)
		if err != nil {
			return 0, refuse("%v", err)
		}
		return us, nil
	}
	return 0, refuse("%T is not a timestamp", v)
}

// DateTime64(6, 'UTC') bounds as the output uses them (22.8+ width).
const (
	dateTime64FirstMicros int64 = -2208988800_000000 // 1900-01-01 00:00:00
	dateTime64LastMicros  int64 = 10413791999_999999 // 2299-12-31 23:59:59.999999
)

func toDateTime64(v any) (any, error) {
	us, err := timestampMicros(v)
	if err != nil {
		return nil, err
	}
	if us < dateTime64FirstMicros || us > dateTime64LastMicros {
		return nil, refuse("outside DateTime64's range 1900-01-01 00:00:00..2299-12-31 23:59:59.999999")
	}
	return time.UnixMicro(us).UTC(), nil
}

func toUnixMicros(typ string, v any) (any, error) {
	us, err := timestampMicros(v)
	if err != nil {
		return nil, err
	}
	switch typ {
	case "Int64":
		return us, nil
	case "UInt64":
		if us < 0 || us == UnixMicrosInfinity {
			return nil, refuse("UInt64 microseconds hold only finite instants from 1970 on")
		}
		return uint64(us), nil
	}
	return nil, refuse("%s is not a microsecond type", typ)
}

// toArray parses PostgreSQL's array text into the []*T clickhouse-go takes
// for Array(Nullable(T)), converting each element from its text by the
// element type.
func toArray(t ColumnType, v any) (any, error) {
	if t.Elem == nil {
		return nil, refuse("array type without an element type")
	}
	text, ok := v.(string)
	if !ok {
		return nil, refuse("%T is not an array's text", v)
	}
	elems, err := parsePGArray(text)
	if err != nil {
		return nil, refuse("%v", err)
	}
	values := make([]any, len(elems))
	for i, e := range elems {
		if e == nil {
			continue
		}
		var elem any = *e
		if t.Elem.Repr == ReprBytes {
			// bytea elements are hex text inside the array.
			raw, err := parseByteaHex(*e)
			if err != nil {
				return nil, refuse("element %d: %v", i+1, err)
			}
			elem = raw
		}
		out, err := convertNonNull(*t.Elem, elem)
		if err != nil {
			return nil, fmt.Errorf("element %d: value %s does not fit %s: %w", i+1, previewValue(*e), t.Elem.Type, err)
		}
		values[i] = out
	}
	return typedArray(*t.Elem, values)
}

// typedArray builds the []*T of the element type's Go value type, nil
// entries for NULL elements.
func typedArray(elem ColumnType, values []any) (any, error) {
	zero, err := zeroValue(elem)
	if err != nil {
		return nil, err
	}
	switch zero.(type) {
	case string:
		return pointerSlice[string](values), nil
	case bool:
		return pointerSlice[bool](values), nil
	case uint8:
		return pointerSlice[uint8](values), nil
	case int16:
		return pointerSlice[int16](values), nil
	case int32:
		return pointerSlice[int32](values), nil
	case int64:
		return pointerSlice[int64](values), nil
	case uint32:
		return pointerSlice[uint32](values), nil
	case uint64:
		return pointerSlice[uint64](values), nil
	case float32:
		return pointerSlice[float32](values), nil
	case float64:
		return pointerSlice[float64](values), nil
	case decimal.Decimal:
		return pointerSlice[decimal.Decimal](values), nil
	case time.Time:
		return pointerSlice[time.Time](values), nil
	}
	return nil, refuse("arrays of %s are not supported", elem.Type)
}

func pointerSlice[T any](values []any) []*T {
	out := make([]*T, len(values))
	for i, v := range values {
		if v != nil {
			x := v.(T)
			out[i] = &x
		}
	}
	return out
}

// zeroValue is the value of type t a non-Nullable column gets for Zero:
// what ClickHouse itself uses as the type's default.
func zeroValue(t ColumnType) (any, error) {
	switch t.Repr {
	case ReprString, ReprBytes:
		return "", nil
	case ReprBool:
		if t.Type == "Bool" {
			return false, nil
		}
		return uint8(0), nil
	case ReprInt, ReprUInt32:
		return toInteger(t.Type, int64(0))
	case ReprFloat:
		return toFloat(t.Type, 0.0)
	case ReprDecimal:
		return decimal.Zero, nil
	case ReprUUID:
		return "00000000-0000-0000-0000-000000000000", nil
	case ReprDate, ReprDateTime64:
		return time.Unix(0, 0).UTC(), nil
	case ReprUnixDays:
		return int32(0), nil
	case ReprUnixMicros:
		return toUnixMicros(t.Type, time.Unix(0, 0))
	case ReprArray:
		if t.Elem == nil {
			return nil, errors.New("array type without an element type")
		}
		return typedArray(*t.Elem, nil)
	}
	return nil, fmt.Errorf("no zero value for %s", t.Type)
}
