package clickhouse

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
)

func TestConvertValue(t *testing.T) {
	day := func(s string) time.Time { d, _ := time.Parse(time.DateOnly, s); return d }
	dec := func(s string) decimal.Decimal { return decimal.RequireFromString(s) }
	p := func(v any) any { // pointer to a copy of v
		rv := reflect.New(reflect.TypeOf(v))
		rv.Elem().Set(reflect.ValueOf(v))
		return rv.Interface()
	}
	typBool := ColumnType{Type: "Bool", Repr: ReprBool}
	typDate32 := ColumnType{Type: "Date32", Repr: ReprDate}
	typDT64 := ColumnType{Type: "DateTime64(6, 'UTC')", Repr: ReprDateTime64}
	typUInt64us := ColumnType{Type: "UInt64", Repr: ReprUnixMicros}
	for _, tc := range []struct {
		typ  ColumnType
		in   any
		want any // nil with refusal set wants an error containing it
		// refusal is a substring of the wanted error.
		refusal string
	}{
		{typString, "x", "x", ""},
		{typString, []byte("raw"), "raw", ""},
		{typString, json.Number("1.50"), "1.50", ""},
		{typString, int64(-7), "-7", ""},
		{typString, uint32(7), "7", ""},
		{typString, 1e20, "1e+20", ""},
		{typString, math.Inf(-1), "-Infinity", ""},
		{typString, float32(0.1), "0.1", ""},
		{typString, true, "true", ""},
		{typString, day("2020-01-01"), nil, "no single PostgreSQL text form"},
		{typBytes, []byte{0, 1}, "\x00\x01", ""},
		{typBytes, "as is", "as is", ""},
		{typBytes, int64(1), nil, "not bytes"},
		{typBoolUInt8, true, uint8(1), ""},
		{typBoolUInt8, "f", uint8(0), ""},
		{typBoolUInt8, "true", uint8(1), ""},
		{typBool, "t", true, ""},
		{typBool, false, false, ""},
		{typBool, "yes", nil, "not a boolean"},
		{typBool, int64(1), nil, "not a boolean"},
		{typInt16, int64(-32768), int16(-32768), ""},
		{typInt16, int64(32768), nil, "out of Int16's range"},
		{typInt16, json.Number("12"), int16(12), ""},
		{typInt32, int(5), int32(5), ""},
		{typInt32, "-2147483649", nil, "out of Int32's range"},
		{typInt32, 3.0, int32(3), ""},
		{typInt32, 3.5, nil, "not an integral number"},
		{typInt32, "1e3", nil, "not an integer"},
		{typInt32, true, nil, "not an integer"},
		{typInt64, json.Number("-9223372036854775808"), int64(math.MinInt64), ""},
		{typInt64, json.Number("9223372036854775808"), nil, "out of Int64's range"},
		{typInt64, uint64(math.MaxUint64), nil, "out of Int64's range"},
		{typInt64, "NaN", nil, "not an integer"},
		{typInt64, math.NaN(), nil, "not an integral number"},
		{ColumnType{Type: "UInt64", Repr: ReprInt}, uint64(math.MaxUint64), uint64(math.MaxUint64), ""},
		{ColumnType{Type: "UInt64", Repr: ReprInt}, int64(-1), nil, "out of UInt64's range"},
		{ColumnType{Type: "UInt8", Repr: ReprInt}, int64(1), uint8(1), ""},
		{ColumnType{Type: "UInt8", Repr: ReprInt}, int64(256), nil, "out of UInt8's range"},
		{typOid, int64(4294967295), uint32(4294967295), ""},
		{typOid, int64(4294967296), nil, "out of UInt32's range"},
		{typOid, int64(-1), nil, "out of UInt32's range"},
		{typOid, uint32(9), uint32(9), ""},
		{typFloat32, 0.5, float32(0.5), ""},
		{typFloat32, "3.1415927", float32(3.1415927), ""},
		{typFloat32, "-Infinity", float32(math.Inf(-1)), ""},
		{typFloat32, 1e300, nil, "out of Float32's range"},
		{typFloat32, int32(16777217), nil, "no exact Float32 form"},
		{typFloat64, "Infinity", math.Inf(1), ""},
		{typFloat64, json.Number("1.5e300"), 1.5e300, ""},
		{typFloat64, float32(0.5), 0.5, ""},
		{typFloat64, int64(1 << 53), float64(1 << 53), ""},
		{typFloat64, int64(1<<53 + 1), nil, "no exact Float64 form"},
		{typFloat64, "inf", nil, "not a 64-bit float"},
		{typFloat64, "1e999", nil, "not a 64-bit float"},
		{typDec10, json.Number("-12345678.90"), dec("-12345678.9"), ""},
		{typDec10, "0.5", dec("0.5"), ""},
		{typDec10, int64(12345678), dec("12345678"), ""},
		{typDec10, int64(123456789), nil, "9 integer digits exceed"},
		{typDec10, json.Number("0.001"), nil, "3 fraction digits exceed the scale 2"},
		{typDec10, json.Number("0.100000"), dec("0.1"), ""},
		{typDec10, "NaN", nil, "NaN and ±Infinity"},
		{typDec10, "-Infinity", nil, "NaN and ±Infinity"},
		{typDec10, "1e5", nil, "not a plain decimal"},
		{typDec10, "1.", nil, "not a plain decimal"},
		{typDec10, 0.25, dec("0.25"), ""},
		{typDec10, math.NaN(), nil, "NaN and ±Infinity"},
		{typDec38, json.Number("1234567890123456789012345678.0123456789"), dec("1234567890123456789012345678.0123456789"), ""},
		{typDec38, json.Number("12345678901234567890123456789.0"), nil, "29 integer digits exceed"},
		{typUUID, "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", ""},
		{typUUID, "a0eebc999c0b4ef8bb6d6bb9bd380a11", nil, "canonical form"},
		{typUUID, []byte("x"), nil, "not a uuid"},
		{typDate, day("2105-12-31"), day("2105-12-31"), ""},
		{typDate, "1970-01-01", day("1970-01-01"), ""},
		{typDate, "1969-12-31", nil, "outside Date's range 1970-01-01..2105-12-31"},
		{typDate, day("2106-01-01"), nil, "outside Date's range"},
		{typDate, time.Date(2020, 1, 1, 1, 0, 0, 0, time.UTC), nil, "no time of day"},
		{typDate32, "1900-01-01", day("1900-01-01"), ""},
		{typDate32, "2299-12-31", day("2299-12-31"), ""},
		{typDate32, "1899-12-31", nil, "outside Date32's range 1900-01-01..2299-12-31"},
		{typDate32, "infinity", nil, "outside Date32's range"},
		{typDate32, "0044-03-15 BC", nil, "outside Date32's range"},
		{typDate32, "2020-02-30", nil, "not a calendar date"},
		{typUnixDays, day("2020-01-02"), int32(18263), ""},
		{typUnixDays, day("0001-01-01"), int32(-719162), ""},
		{typUnixDays, time.Date(2020, 1, 2, 0, 0, 0, 0, time.FixedZone("x", 3600)), int32(18263), ""},
		{typUnixDays, "1969-12-31", int32(-1), ""},
		{typUnixDays, "infinity", int32(math.MaxInt32), ""},
		{typUnixDays, "-infinity", int32(math.MinInt32), ""},
		{typUnixDays, "0001-12-31 BC", int32(-719163), ""},
		{typUnixDays, "4714-11-24 BC", int32(-2440588), ""},
		{typUnixDays, "5874897-12-31", int32(2145042905), ""},
		{typUnixDays, "10000-01-01", int32(2932897), ""},
		{typUnixDays, "0000-01-01", nil, "no year 0"},
		{typUnixDays, "2020-1-1", nil, "not a date in ISO form"},
		{typUnixDays, int64(5), nil, "not a date"},
		{typDT64, time.Date(2024, 1, 2, 3, 4, 5, 123456000, time.FixedZone("x", 7200)), time.Date(2024, 1, 2, 1, 4, 5, 123456000, time.UTC), ""},
		{typDT64, "2024-01-02 03:04:05.5+00", time.Date(2024, 1, 2, 3, 4, 5, 500000000, time.UTC), ""},
		{typDT64, "1900-01-01 00:00:00", time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC), ""},
		{typDT64, "2299-12-31 23:59:59.999999+00", time.Date(2299, 12, 31, 23, 59, 59, 999999000, time.UTC), ""},
		{typDT64, "1899-12-31 23:59:59.999999", nil, "outside DateTime64's range"},
		{typDT64, "2300-01-01 00:00:00+00", nil, "outside DateTime64's range"},
		{typDT64, "infinity", nil, "outside DateTime64's range"},
		{typDT64, time.Date(2024, 1, 2, 3, 4, 5, 1, time.UTC), nil, "sub-microsecond"},
		{typUnixMicros, time.Date(2024, 1, 2, 3, 4, 5, 123456000, time.UTC), int64(1704164645123456), ""},
		{typUnixMicros, "1969-12-31 23:59:59.999999+00", int64(-1), ""},
		{typUnixMicros, "1970-01-01 05:30:00+05:30", int64(0), ""},
		{typUnixMicros, "1970-01-01 00:00:00-00:00:01", int64(1_000_000), ""},
		{typUnixMicros, "infinity", int64(math.MaxInt64), ""},
		{typUnixMicros, "-infinity", int64(math.MinInt64), ""},
		{typUnixMicros, "0044-03-15 12:00:00+00 BC", int64(-735160*86400_000_000 + 12*3600_000_000), ""},
		{typUnixMicros, "0044-03-15 12:00:00 BC", int64(-735160*86400_000_000 + 12*3600_000_000), ""},
		{typUnixMicros, "10000-01-01 00:00:00+00", int64(2932897 * 86400_000_000), ""},
		{typUnixMicros, "294247-01-10 04:00:54.775806+00", int64(math.MaxInt64 - 1), ""},
		{typUnixMicros, "294247-01-10 04:00:54.775807+00", nil, "outside the int64 microsecond range"},
		{typUnixMicros, "294276-12-31 23:59:59.999999+00", nil, "outside the int64 microsecond range"},
		{typUnixMicros, "2024-01-02 24:00:01", nil, "out of range"},
		{typUnixMicros, "2024-01-02", nil, "no time of day"},
		{typUnixMicros, "2024-01-02 03:04:05.1234567", nil, "HH:MM:SS[.ffffff]"},
		{typUInt64us, time.Unix(1, 0), uint64(1_000_000), ""},
		{typUInt64us, time.Unix(-1, 0), nil, "finite instants from 1970"},
		{typUInt64us, "infinity", nil, "finite instants from 1970"},
		{arrayOf(typInt32), "{1,NULL, 3 }", []*int32{p(int32(1)).(*int32), nil, p(int32(3)).(*int32)}, ""},
		{arrayOf(typInt16), "{}", []*int16{}, ""},
		{arrayOf(typInt64), "{1,x}", nil, `element 2: value "x" does not fit Int64: not an integer`},
		{arrayOf(typInt32), "{{1,2},{3,4}}", nil, "multi-dimensional"},
		{arrayOf(typInt32), "[0:1]={1,2}", nil, "explicit bounds"},
		{arrayOf(typInt32), []int32{1}, nil, "not an array's text"},
		{arrayOf(typString), `{"a\"b",NULL,"NULL",null}`, []*string{p(`a"b`).(*string), nil, p("NULL").(*string), nil}, ""},
		{arrayOf(typFloat32), "{NaN,Infinity,-1.5}", nil, ""}, // NaN compared below
		{arrayOf(typDec10), "{1.5,NaN}", nil, "element 2"},
		{arrayOf(typDec10), "{1.5,NULL}", []*decimal.Decimal{p(dec("1.5")).(*decimal.Decimal), nil}, ""},
		{arrayOf(typBool), "{t,f}", []*bool{p(true).(*bool), p(false).(*bool)}, ""},
		{arrayOf(typBoolUInt8), "{t,NULL}", []*uint8{p(uint8(1)).(*uint8), nil}, ""},
		{arrayOf(typOid), "{4294967295}", []*uint32{p(uint32(4294967295)).(*uint32)}, ""},
		{arrayOf(typUUID), "{A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11}", []*string{p("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11").(*string)}, ""},
		{arrayOf(typDate), "{2020-01-01,1969-01-01}", nil, "outside Date's range"},
		{arrayOf(typDate32), "{2020-01-01}", []*time.Time{p(day("2020-01-01")).(*time.Time)}, ""},
		{arrayOf(typUnixDays), "{infinity,1970-01-02}", []*int32{p(int32(math.MaxInt32)).(*int32), p(int32(1)).(*int32)}, ""},
		{arrayOf(typUnixMicros), `{"1970-01-01 00:00:00.000001+00"}`, []*int64{p(int64(1)).(*int64)}, ""},
		{arrayOf(typDT64), `{"2020-01-01 00:00:00+00"}`, []*time.Time{p(day("2020-01-01")).(*time.Time)}, ""},
		{arrayOf(typBytes), `{"\\x00ff",NULL}`, []*string{p("\x00\xff").(*string), nil}, ""},
		{arrayOf(typBytes), `{"\\x00ff",abc}`, nil, "element 2"},
	} {
		name := fmt.Sprintf("%s/%#v", tc.typ.Type, tc.in)
		got, err := ConvertValue(ColumnSpec{Name: "c", Type: tc.typ}, tc.in)
		switch {
		case tc.refusal != "":
			if err == nil || !strings.Contains(err.Error(), tc.refusal) || !strings.Contains(err.Error(), "does not fit "+tc.typ.Type) {
				t.Errorf("%s: %#v, %v; want an error containing %q", name, got, err, tc.refusal)
			}
		case err != nil:
			t.Errorf("%s: %v", name, err)
		case tc.want != nil && !equalConverted(got, tc.want):
			t.Errorf("%s = %#v (%T), want %#v (%T)", name, got, got, tc.want, tc.want)
		}
	}
}

// equalConverted is reflect.DeepEqual except that decimals compare by
// value (1.50 and 1.5 are the same Decimal(10, 2)).
func equalConverted(a, b any) bool {
	da, aok := a.(decimal.Decimal)
	db, bok := b.(decimal.Decimal)
	if aok && bok {
		return da.Equal(db)
	}
	as, aok := a.([]*decimal.Decimal)
	bs, bok := b.([]*decimal.Decimal)
	if aok && bok {
		if len(as) != len(bs) {
			return false
		}
		for i := range as {
			if (as[i] == nil) != (bs[i] == nil) || as[i] != nil && !as[i].Equal(*bs[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

func TestConvertValueNullAndZero(t *testing.T) {
	for _, typ := range []ColumnType{typString, typBytes, typBoolUInt8, {Type: "Bool", Repr: ReprBool}, typInt16, typInt32, typInt64,
		typOid, typFloat32, typFloat64, typDec10, typUUID, typDate, {Type: "Date32", Repr: ReprDate}, typUnixDays,
		{Type: "DateTime64(6, 'UTC')", Repr: ReprDateTime64}, typUnixMicros, {Type: "UInt64", Repr: ReprUnixMicros}, arrayOf(typInt32), arrayOf(typDec10)} {
		nullable := ColumnSpec{Name: "n", Type: typ, Nullable: true}
		plain := ColumnSpec{Name: "p", Type: typ}
		for _, in := range []any{nil, Zero} {
			if got, err := ConvertValue(nullable, in); got != nil || err != nil {
				t.Errorf("%s %v: %#v, %v; want NULL", nullable.TypeSQL(), in, got, err)
			}
		}
		if _, err := ConvertValue(plain, nil); err == nil || !strings.Contains(err.Error(), `column "p": value NULL does not fit `+typ.Type) {
			t.Errorf("NULL in %s: %v", typ.Type, err)
		}
		zero, err := ConvertValue(plain, Zero)
		if err != nil {
			t.Fatalf("Zero in %s: %v", typ.Type, err)
		}
		// The zero value is of the type the column's conversions return.
		sample := map[Repr]any{ReprString: "x", ReprBytes: "x", ReprBool: "t", ReprInt: "1", ReprUInt32: "1", ReprFloat: "1",
			ReprDecimal: "1", ReprUUID: "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", ReprDate: "2000-01-01", ReprUnixDays: "2000-01-01",
			ReprDateTime64: "2000-01-01 00:00:00", ReprUnixMicros: "2000-01-01 00:00:00", ReprArray: "{1}"}[typ.Repr]
		converted, err := ConvertValue(plain, sample)
		if err != nil {
			t.Fatalf("%s %v: %v", typ.Type, sample, err)
		}
		if reflect.TypeOf(zero) != reflect.TypeOf(converted) {
			t.Errorf("Zero in %s is a %T, values are %T", typ.Type, zero, converted)
		}
	}
}

func TestConvertValueFloatArrayAndPreview(t *testing.T) {
	got, err := ConvertValue(ColumnSpec{Type: arrayOf(typFloat32)}, "{NaN,Infinity,-1.5,NULL}")
	if err != nil {
		t.Fatal(err)
	}
	fs := got.([]*float32)
	if len(fs) != 4 || !math.IsNaN(float64(*fs[0])) || !math.IsInf(float64(*fs[1]), 1) || *fs[2] != -1.5 || fs[3] != nil {
		t.Errorf("float array: %v", got)
	}
	long := strings.Repeat("é", 1000)
	_, err = ConvertValue(ColumnSpec{Name: "c", Type: typInt32}, long)
	if err == nil {
		t.Fatal("accepted")
	}
	msg := err.Error()
	preview := msg[strings.Index(msg, "value ")+len("value ") : strings.Index(msg, " does not fit")]
	if len(preview) > maxPreviewBytes || !strings.HasPrefix(preview, `"éé`) || !utf8Valid(preview) {
		t.Errorf("preview %q (%d bytes)", preview, len(preview))
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }
