// Package pgfloat is PostgreSQL's float4/float8 text output, as
// src/common/f2s.c and d2s.c produce it with extra_float_digits > 0.
package pgfloat

import (
	"math"
	"math/big"
	"strconv"
	"strings"
)

// Format renders f as PostgreSQL's float4out (bits 32) or float8out
// (bits 64) does with extra_float_digits > 0 (src/common/f2s.c, d2s.c):
// integers below 2^24 (2^53) print exactly; other values print the shortest
// decimal strictly inside the rounding interval (PostgreSQL builds Ryu
// without STRICTLY_SHORTEST, so a decimal on the interval's edge, which Go's
// shortest formatting accepts, is refused); fixed notation for decimal
// exponents -4 <= e < 6 (float4) or 15 (float8), else d.ddde+XX with at
// least two exponent digits.
func Format(f float64, bits int) string {
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
