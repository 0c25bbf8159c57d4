package pgfloat

import (
	"math"
	"strconv"
	"testing"
)

func TestFormatGolden(t *testing.T) {
	// Expected texts are PostgreSQL 15's with extra_float_digits = 1
	// (internal/rowmodel's TestCanonicalMatchesServer checks many more against a live server).
	for _, tc := range []struct {
		f    float64
		bits int
		want string
	}{
		{0, 64, "0"},
		{math.Copysign(0, -1), 64, "-0"},
		{math.NaN(), 64, "NaN"},
		{math.Inf(1), 32, "Infinity"},
		{math.Inf(-1), 64, "-Infinity"},
		{1, 64, "1"},
		{-1.5, 64, "-1.5"},
		{0.1, 64, "0.1"},
		{float64(float32(0.1)), 32, "0.1"},
		{float64(float32(0.1)), 64, "0.10000000149011612"},
		{1e20, 64, "1e+20"},
		{1e20, 32, "1e+20"},
		{1.5e-7, 64, "1.5e-07"},
		{0.0001, 64, "0.0001"},
		{0.00001, 64, "1e-05"},
		{123456789, 64, "123456789"},
		{123456789, 32, "1.2345679e+08"},
		{123456, 32, "123456"},
		{1234567, 32, "1.234567e+06"},
		{1e14, 64, "100000000000000"},
		{1e15, 64, "1e+15"},
		{123456789012345, 64, "123456789012345"},
		{1.7976931348623157e308, 64, "1.7976931348623157e+308"},
		{5e-324, 64, "5e-324"},
		{float64(math.SmallestNonzeroFloat32), 32, "1e-45"},
		{3.4028234663852886e38, 32, "3.4028235e+38"},
	} {
		if got := Format(tc.f, tc.bits); got != tc.want {
			t.Errorf("Format(%v, %d) = %q, want %q", tc.f, tc.bits, got, tc.want)
		}
	}
}

func FuzzFormat(f *testing.F) {
	for _, x := range []float64{0, 1, 0.1, 1e20, 1.5e-7, 123456789, math.MaxFloat64, 5e-324} {
		f.Add(math.Float64bits(x), false)
		f.Add(math.Float64bits(x), true)
	}
	f.Fuzz(func(t *testing.T, bits uint64, single bool) {
		x := math.Float64frombits(bits)
		size := 64
		if single {
			x = float64(float32(x))
			size = 32
		}
		s := Format(x, size)
		if math.IsNaN(x) {
			if s != "NaN" {
				t.Fatalf("NaN -> %q", s)
			}
			return
		}
		var back float64
		switch s {
		case "Infinity":
			back = math.Inf(1)
		case "-Infinity":
			back = math.Inf(-1)
		default:
			var err error
			back, err = strconv.ParseFloat(s, size)
			if err != nil {
				t.Fatalf("Format(%v) = %q: %v", x, s, err)
			}
		}
		if back != x || math.Signbit(back) != math.Signbit(x) {
			t.Fatalf("Format(%v, %d) = %q reads back as %v", x, size, s, back)
		}
	})
}
