package decode

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/desclog"
)

// valueText prints a Value result the way PostgreSQL prints the datum.
func valueText(t testing.TB, col *desclog.Column, v any) string {
	switch x := v.(type) {
	case nil:
		return "\x00NULL"
	case bool:
		if x {
			return "t"
		}
		return "f"
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		bits := 64
		if valueOid(col) == OidFloat4 {
			bits = 32
		}
		return string(appendFloat(nil, x, bits))
	case json.Number:
		return string(x)
	case string:
		return x
	case []byte:
		return string(appendVarlenaTextMust(t, x))
	case time.Time:
		if x.Location() != time.UTC {
			t.Errorf("column %s: time %v not in UTC", col.Name, x)
		}
		switch valueOid(col) {
		case OidDate:
			if x.Hour() != 0 || x.Minute() != 0 || x.Second() != 0 || x.Nanosecond() != 0 {
				t.Errorf("column %s: date %v is not midnight", col.Name, x)
			}
			return x.Format("2006-01-02")
		case OidTimestamp:
			return x.Format("2006-01-02 15:04:05.999999")
		case OidTimestamptz:
			return x.Format("2006-01-02 15:04:05.999999") + "+00"
		}
	}
	t.Errorf("column %s (%s): unexpected Go value %T %v", col.Name, col.TypeName, v, v)
	return ""
}

func appendVarlenaTextMust(t testing.TB, b []byte) []byte {
	out, err := appendVarlenaText(nil, OidBytea, b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
func le64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

// short makes a 1-byte-header varlena.
func short(p string) []byte { return append([]byte{byte((len(p)+1)<<1 | 1)}, p...) }

// plain makes a 4-byte-header varlena.
func plain(p []byte) []byte { return append(le32(uint32(len(p)+4)<<2), p...) }

func TestValueTable(t *testing.T) {
	col := func(oid uint32, l int16) *desclog.Column {
		return &desclog.Column{Name: "c", TypeOid: oid, Len: l, TypeKind: 'b'}
	}
	ts := func(s string) time.Time {
		v, err := time.Parse("2006-01-02 15:04:05.999999", s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	pgTS := func(s string) []byte { // microseconds since 2000
		return le64(uint64(ts(s).UnixMicro() - pgEpochUnixMicros))
	}
	domain := &desclog.Column{Name: "d", TypeOid: 99999, BaseTypeOid: OidInt4, TypeKind: 'd', Len: 4}
	for _, c := range []struct {
		name    string
		col     *desclog.Column
		raw     []byte
		want    any
		pending bool
	}{
		{"bool", col(OidBool, 1), []byte{1}, true, false},
		{"int2", col(OidInt2, 2), []byte{0xff, 0xff}, int64(-1), false},
		{"int4", col(OidInt4, 4), le32(math.MaxUint32), int64(-1), false},
		{"int8", col(OidInt8, 8), le64(1 << 40), int64(1 << 40), false},
		{"oid", col(OidOid, 4), le32(math.MaxUint32), int64(math.MaxUint32), false},
		{"float4", col(OidFloat4, 4), le32(math.Float32bits(1.5)), 1.5, false},
		{"float8 NaN", col(OidFloat8, 8), le64(math.Float64bits(math.NaN())), "NaN", false},
		{"float8 -inf", col(OidFloat8, 8), le64(math.Float64bits(math.Inf(-1))), "-Infinity", false},
		{"numeric", col(OidNumeric, -1), short(string([]byte{0x00, 0x82, 3, 0, 0x8C, 0x05})), json.Number("3.1420"), false},
		{"numeric NaN", col(OidNumeric, -1), short(string([]byte{0x00, 0xC0})), "NaN", false},
		{"date", col(OidDate, 4), le32(math.MaxUint32), time.Date(1999, 12, 31, 0, 0, 0, 0, time.UTC), false},
		{"date infinity", col(OidDate, 4), le32(math.MaxInt32), "infinity", false},
		{"date BC", col(OidDate, 4), le32(uint32(int32(date2j(0, 1, 1) - postgresEpochJDate))), "0001-01-01 BC", false},
		{"date 10000", col(OidDate, 4), le32(uint32(int32(date2j(10000, 1, 1) - postgresEpochJDate))), "10000-01-01", false},
		{"timestamp", col(OidTimestamp, 8), pgTS("2024-01-02 03:04:05.123456"), ts("2024-01-02 03:04:05.123456"), false},
		{"timestamptz", col(OidTimestamptz, 8), pgTS("1970-01-01 00:00:00"), ts("1970-01-01 00:00:00"), false},
		{"timestamptz -inf", col(OidTimestamptz, 8), le64(1 << 63), "-infinity", false},
		{"timestamp 10000", col(OidTimestamp, 8), le64(uint64(int64(date2j(10000, 3, 22)-postgresEpochJDate) * usecsPerDay)), "10000-03-22 00:00:00", false},
		{"bytea", col(OidBytea, -1), short("\x00\xff"), []byte{0, 0xff}, false},
		{"text plain", col(OidText, -1), plain([]byte("hello")), "hello", false},
		{"uuid", col(OidUUID, 16), make([]byte, 16), "00000000-0000-0000-0000-000000000000", false},
		{"domain over int4", domain, le32(7), int64(7), false},
		{"jsonb", col(3802, -1), short("x"), nil, true},
		{"enum", &desclog.Column{TypeOid: 70000, TypeKind: 'e', Len: 4}, le32(1), nil, true},
	} {
		got, pending, err := Value(c.col, c.raw)
		if err != nil || pending != c.pending || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %#v pending=%v err=%v, want %#v pending=%v", c.name, got, pending, err, c.want, c.pending)
		}
		// The arena path gives the same values.
		var a arena
		got2, pending2, err2 := value(&a, c.col, c.raw)
		if err2 != nil || pending2 != pending || !reflect.DeepEqual(got2, got) {
			t.Errorf("%s: arena path %#v %v %v", c.name, got2, pending2, err2)
		}
	}
	for _, bad := range []struct {
		col *desclog.Column
		raw []byte
	}{
		{col(OidInt4, 4), []byte{1, 2}},
		{col(OidText, -1), append([]byte{0x01, 18}, make([]byte, 16)...)}, // external
		{col(OidBytea, -1), []byte{0x02, 0, 0, 0}},                        // compressed header
	} {
		if _, _, err := Value(bad.col, bad.raw); err == nil {
			t.Errorf("Value(%d, %x): no error", bad.col.TypeOid, bad.raw)
		}
	}
}

func TestMissingValue(t *testing.T) {
	miss := func(oid uint32, text string) *desclog.Column {
		return &desclog.Column{Name: "m", TypeOid: oid, TypeKind: 'b', HasMissing: true, Missing: &text}
	}
	ts := func(s string) time.Time {
		v, err := time.Parse("2006-01-02 15:04:05.999999 -07:00", s)
		if err != nil {
			t.Fatal(err)
		}
		return v.UTC()
	}
	for _, c := range []struct {
		col     *desclog.Column
		want    any
		pending bool
	}{
		{miss(OidBool, "t"), true, false},
		{miss(OidBool, "false"), false, false},
		{miss(OidInt2, "-32768"), int64(-32768), false},
		{miss(OidInt8, "9223372036854775807"), int64(math.MaxInt64), false},
		{miss(OidOid, "4294967295"), int64(math.MaxUint32), false},
		{miss(OidFloat8, "1e+300"), 1e300, false},
		{miss(OidFloat4, "-Infinity"), "-Infinity", false},
		{miss(OidFloat8, "NaN"), "NaN", false},
		{miss(OidNumeric, "-12.500"), json.Number("-12.500"), false},
		{miss(OidNumeric, "Infinity"), "Infinity", false},
		{miss(OidText, "dflt"), "dflt", false},
		{miss(OidBytea, `\x00ff`), []byte{0, 0xff}, false},
		{miss(OidDate, "2020-02-02"), time.Date(2020, 2, 2, 0, 0, 0, 0, time.UTC), false},
		{miss(OidDate, "infinity"), "infinity", false},
		{miss(OidDate, "0044-03-15 BC"), "0044-03-15 BC", false},
		{miss(OidDate, "10000-01-01"), "10000-01-01", false},
		{miss(OidTimestamp, "2024-05-06 07:08:09.5"), ts("2024-05-06 07:08:09.5 +00:00"), false},
		{miss(OidTimestamptz, "2024-05-06 07:08:09.5+02"), ts("2024-05-06 05:08:09.5 +00:00"), false},
		{miss(OidTimestamptz, "2024-05-06 07:08:09-03:30"), ts("2024-05-06 10:38:09 +00:00"), false},
		{miss(OidTimestamptz, "0001-01-01 00:00:00+00 BC"), "0001-01-01 00:00:00+00 BC", false},
		{miss(OidTimestamptz, "Mon May 06 07:08:09 2024 PST"), "Mon May 06 07:08:09 2024 PST", true},
		{miss(OidInterval, "1 day"), "1 day", true},
		{miss(3802, `{"a": 1}`), `{"a": 1}`, true},
		{&desclog.Column{Name: "n", TypeOid: OidInt4, HasMissing: true}, nil, false},
	} {
		got, pending, err := MissingValue(c.col)
		if err != nil || pending != c.pending || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%d %v: got %#v pending=%v err=%v, want %#v pending=%v", c.col.TypeOid, c.col.Missing, got, pending, err, c.want, c.pending)
		}
	}
	for _, bad := range []*desclog.Column{miss(OidBool, "maybe"), miss(OidInt2, "40000"), miss(OidNumeric, "1e5")} {
		if _, _, err := MissingValue(bad); err == nil {
			t.Errorf("%d %q: no error", bad.TypeOid, *bad.Missing)
		}
	}
}

// TestDateRoundTrip checks date2j against j2date over PostgreSQL's range.
func TestDateRoundTrip(t *testing.T) {
	for jd := 0; jd < 2_147_000_000; jd += 9973 {
		y, m, d := j2date(jd)
		if got := date2j(y, m, d); got != jd {
			t.Fatalf("j2date(%d) = %d-%d-%d, date2j gives %d", jd, y, m, d, got)
		}
	}
}

var fuzzOids = []uint32{OidBool, OidBytea, OidChar, OidName, OidInt8, OidInt2, OidInt4, OidText, OidOid, OidJSON, OidCidr,
	OidFloat4, OidFloat8, OidMoney, OidMacaddr, OidInet, OidBpchar, OidVarchar, OidDate, OidTime, OidTimestamp,
	OidTimestamptz, OidInterval, OidTimetz, OidNumeric, OidUUID, 3802}

// FuzzValue: no panic on any datum, and the arena path agrees with Value.
func FuzzValue(f *testing.F) {
	f.Add(uint8(4), le64(1))
	f.Add(uint8(24), short(string([]byte{0x00, 0x82, 3, 0, 0x8C, 0x05})))
	f.Add(uint8(20), le64(1<<62))
	f.Fuzz(func(t *testing.T, which uint8, raw []byte) {
		oid := fuzzOids[int(which)%len(fuzzOids)]
		col := &desclog.Column{Name: "f", TypeOid: oid, Len: -1, TypeKind: 'b'}
		v, pending, err := Value(col, raw)
		var a arena
		v2, pending2, err2 := value(&a, col, raw)
		if (err == nil) != (err2 == nil) || pending != pending2 || (err == nil && !reflect.DeepEqual(v, v2)) {
			t.Fatalf("type %d %x: %#v %v %v vs %#v %v %v", oid, raw, v, pending, err, v2, pending2, err2)
		}
	})
}

// FuzzMissingValue: no panic on any attmissingval text.
func FuzzMissingValue(f *testing.F) {
	f.Add(uint8(18), "2024-05-06 07:08:09.5+02")
	f.Add(uint8(24), "-12.500")
	f.Add(uint8(1), `\x00ff`)
	f.Fuzz(func(t *testing.T, which uint8, text string) {
		col := &desclog.Column{Name: "f", TypeOid: fuzzOids[int(which)%len(fuzzOids)], TypeKind: 'b', HasMissing: true, Missing: &text}
		v, pending, err := MissingValue(col)
		if pending && v != text {
			t.Fatalf("pending missing value %#v is not the text %q", v, text)
		}
		_ = err
	})
}
