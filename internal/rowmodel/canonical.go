package rowmodel

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
)

// valueKind is what a column's type means for rendering typed Go values
// whose text depends on the type (floats, dates, timestamps). Every other
// type arrives as a string already or renders the same whatever the type.
type valueKind uint8

const (
	kindOther valueKind = iota
	kindFloat4
	kindFloat8
	kindDate
	kindTimestamp
	kindTimestamptz
)

// Type oids of the kinds above (pg_type.h).
const (
	oidFloat4      = 700
	oidFloat8      = 701
	oidDate        = 1082
	oidTimestamp   = 1114
	oidTimestamptz = 1184
)

// kindOf classifies a column by its type oid when known, else by its type
// name: format_type output ("timestamp(3) with time zone", "double
// precision") or the short internal names ("timestamptz", "float8").
func kindOf(typeName string, typeOid uint32) valueKind {
	switch typeOid {
	case oidFloat4:
		return kindFloat4
	case oidFloat8:
		return kindFloat8
	case oidDate:
		return kindDate
	case oidTimestamp:
		return kindTimestamp
	case oidTimestamptz:
		return kindTimestamptz
	}
	name := strings.ToLower(strings.TrimSpace(typeName))
	name = strings.TrimPrefix(name, "pg_catalog.")
	switch name {
	case "real", "float4":
		return kindFloat4
	case "double precision", "float8", "float":
		return kindFloat8
	case "date":
		return kindDate
	case "timestamptz":
		return kindTimestamptz
	}
	if strings.HasPrefix(name, "timestamp") {
		// Drop a typmod: "timestamp(3) with time zone".
		if i := strings.IndexByte(name, '('); i >= 0 {
			if j := strings.IndexByte(name[i:], ')'); j >= 0 {
				name = name[:i] + name[i+j+1:]
			}
		}
		switch strings.TrimSpace(name) {
		case "timestamp", "timestamp without time zone":
			return kindTimestamp
		case "timestamp with time zone", "timestamptz":
			return kindTimestamptz
		}
	}
	return kindOther
}

// Canonical renders a typed value of the processor's row payload as
// PostgreSQL's text output for a column of the given kind (under the
// settings Compare uses): nil is NULL. It is an implementation independent
// from internal/decode so the model checks the decoder rather than echoing it.
func canonical(v any, kind valueKind) (*string, error) {
	var s string
	switch x := v.(type) {
	case nil:
		return nil, nil
	case bool:
		s = "f"
		if x {
			s = "t"
		}
	case string:
		s = x
	case json.Number:
		s = string(x)
	case int64:
		s = strconv.FormatInt(x, 10)
	case int:
		s = strconv.Itoa(x)
	case int32:
		s = strconv.FormatInt(int64(x), 10)
	case int16:
		s = strconv.FormatInt(int64(x), 10)
	case uint32:
		s = strconv.FormatUint(uint64(x), 10)
	case uint64:
		s = strconv.FormatUint(x, 10)
	case float64:
		if kind == kindFloat4 {
			s = FormatFloat(x, 32)
		} else {
			s = FormatFloat(x, 64)
		}
	case float32:
		s = FormatFloat(float64(x), 32)
	case []byte:
		s = `\x` + hex.EncodeToString(x)
	case time.Time:
		var err error
		if s, err = formatTime(x, kind); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("unexpected value type %T (%v)", v, v)
	}
	return &s, nil
}

func formatTime(t time.Time, kind valueKind) (string, error) {
	t = t.UTC()
	switch kind {
	case kindDate:
		if t.Hour() != 0 || t.Minute() != 0 || t.Second() != 0 || t.Nanosecond() != 0 {
			return "", fmt.Errorf("date value %s is not a UTC midnight", t.Format(time.RFC3339Nano))
		}
		return t.Format("2006-01-02"), nil
	case kindTimestamp:
		return t.Format("2006-01-02 15:04:05.999999"), nil
	case kindTimestamptz:
		return t.Format("2006-01-02 15:04:05.999999") + "+00", nil
	}
	return "", fmt.Errorf("time.Time value %s for a column that is not date, timestamp or timestamptz", t.Format(time.RFC3339Nano))
}

// FormatFloat renders f as PostgreSQL's float4out (bits 32) or float8out
// (bits 64) does with extra_float_digits > 0 (src/common/f2s.c, d2s.c):
// integers below 2^24 (2^53) print exactly; other values print the shortest
// decimal strictly inside the rounding interval (PostgreSQL builds Ryu
// without STRICTLY_SHORTEST, so a decimal on the interval's edge, which Go's
// shortest formatting accepts, is refused); fixed notation for decimal
// exponents -4 <= e < 6 (float4) or 15 (float8), else d.ddde+XX with at
// least two exponent digits.
func FormatFloat(f float64, bits int) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0:
		if math.Signbit(f) {
			return "-0"
		}
		return "0"
	}
	neg := f < 0
	digits, exp := shortestDigits(math.Abs(f), bits)
	fixedBelow := 15
	if bits == 32 {
		fixedBelow = 6
	}
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	n := len(digits)
	switch {
	case exp >= -4 && exp < fixedBelow && exp < 0:
		b.WriteString("0.")
		b.WriteString(strings.Repeat("0", -exp-1))
		b.WriteString(digits)
	case exp >= -4 && exp < fixedBelow && exp+1 >= n:
		b.WriteString(digits)
		b.WriteString(strings.Repeat("0", exp+1-n))
	case exp >= -4 && exp < fixedBelow:
		b.WriteString(digits[:exp+1])
		b.WriteByte('.')
		b.WriteString(digits[exp+1:])
	default:
		b.WriteByte(digits[0])
		if n > 1 {
			b.WriteByte('.')
			b.WriteString(digits[1:])
		}
		b.WriteByte('e')
		if exp < 0 {
			b.WriteByte('-')
			exp = -exp
		} else {
			b.WriteByte('+')
		}
		if exp < 10 {
			b.WriteByte('0')
		}
		b.WriteString(strconv.Itoa(exp))
	}
	return b.String()
}

// shortestDigits returns PostgreSQL's significant digits of positive finite
// f and the decimal exponent of the first one.
func shortestDigits(f float64, bits int) (string, int) {
	limit := float64(1 << 53)
	if bits == 32 {
		limit = 1 << 24
	}
	if f >= 1 && f < limit && f == math.Trunc(f) {
		// The small-integer path: exact digits, trailing zeros dropped.
		s := strconv.FormatFloat(f, 'f', 0, 64)
		return strings.TrimRight(s, "0"), len(s) - 1
	}
	var lo, hi float64
	if bits == 32 {
		f32 := float32(f)
		lo = float64(math.Nextafter32(f32, 0))
		hi = float64(math.Nextafter32(f32, float32(math.Inf(1))))
	} else {
		lo = math.Nextafter(f, 0)
		hi = math.Nextafter(f, math.Inf(1))
	}
	exact := new(big.Rat).SetFloat64(f)
	half := big.NewRat(1, 2)
	lower := new(big.Rat).Mul(new(big.Rat).Add(exact, new(big.Rat).SetFloat64(lo)), half)
	var upper *big.Rat
	if math.IsInf(hi, 0) || (bits == 32 && math.IsInf(float64(float32(hi)), 0)) {
		// Past the largest finite value: the interval is symmetric.
		upper = new(big.Rat).Sub(new(big.Rat).Mul(exact, big.NewRat(2, 1)), lower)
	} else {
		upper = new(big.Rat).Mul(new(big.Rat).Add(exact, new(big.Rat).SetFloat64(hi)), half)
	}
	maxDigits := 17
	if bits == 32 {
		maxDigits = 9
	}
	var sci string
	for n := 1; n <= maxDigits; n++ {
		sci = strconv.FormatFloat(f, 'e', n-1, bits)
		cand, ok := new(big.Rat).SetString(sci)
		if ok && cand.Cmp(lower) > 0 && cand.Cmp(upper) < 0 {
			break
		}
	}
	mant, expText, _ := strings.Cut(sci, "e")
	exp, _ := strconv.Atoi(expText)
	digits := strings.TrimRight(strings.Replace(mant, ".", "", 1), "0")
	if digits == "" {
		digits = "0"
	}
	return digits, exp
}
