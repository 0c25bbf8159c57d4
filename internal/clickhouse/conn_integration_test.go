package clickhouse

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/testrig"
)

// convertValues is ConvertValue of each value for its column.
func convertValues(t testing.TB, specs []ColumnSpec, values ...any) []any {
	t.Helper()
	out := make([]any, len(values))
	for i, v := range values {
		var err error
		if out[i], err = ConvertValue(specs[i], v); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func openTestConn(t *testing.T, ch *testrig.ClickHouse) *Conn {
	t.Helper()
	c, err := Open(context.Background(), ConnConfig{DSN: "clickhouse://" + ch.NativeAddr() + "/default", DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func arrayOf(elem ColumnType) ColumnType {
	return ColumnType{Type: "Array(Nullable(" + elem.Type + "))", Repr: ReprArray, Elem: &elem}
}

var (
	typString     = ColumnType{Type: "String", Repr: ReprString}
	typBytes      = ColumnType{Type: "String", Repr: ReprBytes}
	typBoolUInt8  = ColumnType{Type: "UInt8", Repr: ReprBool}
	typInt16      = ColumnType{Type: "Int16", Repr: ReprInt}
	typInt32      = ColumnType{Type: "Int32", Repr: ReprInt}
	typInt64      = ColumnType{Type: "Int64", Repr: ReprInt}
	typOid        = ColumnType{Type: "UInt32", Repr: ReprUInt32}
	typFloat32    = ColumnType{Type: "Float32", Repr: ReprFloat}
	typFloat64    = ColumnType{Type: "Float64", Repr: ReprFloat}
	typDec10      = ColumnType{Type: "Decimal(10, 2)", Repr: ReprDecimal, Precision: 10, Scale: 2}
	typDec38      = ColumnType{Type: "Decimal(38, 10)", Repr: ReprDecimal, Precision: 38, Scale: 10}
	typUUID       = ColumnType{Type: "UUID", Repr: ReprUUID}
	typDate       = ColumnType{Type: "Date", Repr: ReprDate}
	typUnixDays   = ColumnType{Type: "Int32", Repr: ReprUnixDays}
	typUnixMicros = ColumnType{Type: "Int64", Repr: ReprUnixMicros}
)

// roundTripCase is one column type with three input values and what
// ClickHouse prints for each (FORMAT TSV); the third row is NULL in the
// Nullable column and Zero in the plain one.
type roundTripCase struct {
	typ      ColumnType
	inputs   [2]any
	want     [2]string
	wantZero string
}

func roundTripCases() []roundTripCase {
	day := func(s string) time.Time { d, _ := time.Parse(time.DateOnly, s); return d }
	return []roundTripCase{
		{typString, [2]any{"it's \\ é", json.Number("12.50")}, [2]string{`it\'s \\ é`, "12.50"}, ""},
		{typBytes, [2]any{[]byte{0, 0xff, '\''}, "raw"}, [2]string{`\0` + "\xff" + `\'`, "raw"}, ""},
		{typBoolUInt8, [2]any{true, "f"}, [2]string{"1", "0"}, "0"},
		{typInt16, [2]any{int64(math.MinInt16), json.Number("32767")}, [2]string{"-32768", "32767"}, "0"},
		{typInt32, [2]any{int64(math.MinInt32), "2147483647"}, [2]string{"-2147483648", "2147483647"}, "0"},
		{typInt64, [2]any{int64(math.MinInt64), json.Number("9223372036854775807")}, [2]string{"-9223372036854775808", "9223372036854775807"}, "0"},
		{typOid, [2]any{int64(4294967295), uint32(0)}, [2]string{"4294967295", "0"}, "0"},
		{typFloat32, [2]any{float64(float32(3.1415927)), "NaN"}, [2]string{"3.1415927", "nan"}, "0"},
		{typFloat64, [2]any{"-Infinity", 1.5e300}, [2]string{"-inf", "1.5e300"}, "0"},
		{typDec10, [2]any{json.Number("-99999999.99"), "0.5"}, [2]string{"-99999999.99", "0.50"}, "0.00"},
		{typDec38, [2]any{json.Number("9999999999999999999999999999.9999999999"), json.Number("-0.0000000001")},
			[2]string{"9999999999999999999999999999.9999999999", "-0.0000000001"}, "0.0000000000"},
		{typUUID, [2]any{"A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11", "00000000-0000-0000-0000-000000000001"},
			[2]string{"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "00000000-0000-0000-0000-000000000001"}, "00000000-0000-0000-0000-000000000000"},
		// 18.16 prints day 0 (1970-01-01) of a Date as 0000-00-00.
		{typDate, [2]any{day("1970-01-01"), "2105-12-31"}, [2]string{"0000-00-00", "2105-12-31"}, "0000-00-00"},
		{typDate, [2]any{day("2020-02-29"), "1970-01-02"}, [2]string{"2020-02-29", "1970-01-02"}, "0000-00-00"},
		{typUnixDays, [2]any{"infinity", "0044-03-15 BC"}, [2]string{"2147483647", "-735160"}, "0"},
		{typUnixMicros, [2]any{"-infinity", time.Date(2024, 1, 2, 3, 4, 5, 123456000, time.UTC)},
			[2]string{"-9223372036854775808", "1704164645123456"}, "0"},
		{arrayOf(typInt32), [2]any{"{1,NULL,-3}", "{}"}, [2]string{"[1,NULL,-3]", "[]"}, "[]"},
		{arrayOf(typString), [2]any{`{"a b","c\"d",NULL,"NULL","x,y",'q'}`, `{""}`}, [2]string{`['a b','c"d',NULL,'NULL','x,y','\'q\'']`, "['']"}, "[]"},
		{arrayOf(typDec10), [2]any{"{1.5,NULL,-0.01}", `{"99999999.99"}`}, [2]string{"[1.50,NULL,-0.01]", "[99999999.99]"}, "[]"},
		{arrayOf(typUnixMicros), [2]any{`{"1970-01-01 00:00:00.000001+00",infinity,NULL}`, "{}"}, [2]string{"[1,9223372036854775807,NULL]", "[]"}, "[]"},
		{arrayOf(typUUID), [2]any{"{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11,NULL}", "{}"}, [2]string{"['a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',NULL]", "[]"}, "[]"},
		{arrayOf(typUnixDays), [2]any{"{1970-01-02,-infinity,NULL}", "{}"}, [2]string{"[1,-2147483648,NULL]", "[]"}, "[]"},
		{arrayOf(typBoolUInt8), [2]any{"{t,f,NULL}", "{}"}, [2]string{"[1,0,NULL]", "[]"}, "[]"},
		{arrayOf(typFloat64), [2]any{"{NaN,-Infinity,1.5}", "{}"}, [2]string{"[nan,-inf,1.5]", "[]"}, "[]"},
		{arrayOf(typDate), [2]any{"{2020-02-29,NULL}", "{}"}, [2]string{"['2020-02-29',NULL]", "[]"}, "[]"},
		{arrayOf(typBytes), [2]any{`{"\\x00ff",NULL}`, "{}"}, [2]string{`['\0` + "\xff" + `',NULL]`, "[]"}, "[]"},
	}
}

// TestConnRoundTrip inserts converted values of every Repr into the real
// server, Nullable and not, and reads back what ClickHouse stored.
func TestConnRoundTrip(t *testing.T) {
	ch := testrig.StartClickHouse(t)
	c := openTestConn(t, ch)
	ctx := context.Background()
	if c.Dialect() != Legacy1816 || c.Database() != "default" {
		t.Fatalf("dialect %+v database %q", c.Dialect(), c.Database())
	}
	cases := roundTripCases()
	target := Target{Database: "default", Table: "round`trip"}
	cols := []ColumnSpec{{Name: "k", Type: typInt64}}
	for i, tc := range cases {
		cols = append(cols, ColumnSpec{Name: fmt.Sprintf("c%d", i), Type: tc.typ})
		if tc.typ.Repr != ReprArray {
			cols = append(cols, ColumnSpec{Name: fmt.Sprintf("n%d", i), Type: tc.typ, Nullable: true})
		}
	}
	sql, err := CreateTable(c.Dialect(), target, cols, []string{"k"}, TableOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(ctx, sql); err != nil {
		t.Fatal(err)
	}
	insertCols := append(append([]ColumnSpec(nil), cols...), SyntheticColumns(c.Dialect())...)
	// The same rows again, in one block filled with the decoded values
	// (Block.Put), into a second table of the same shape.
	viaPut := Target{Database: "default", Table: "round`trip_put"}
	if err := c.Exec(ctx, "CREATE TABLE "+QuoteQualified(viaPut)+" AS "+QuoteQualified(target)); err != nil {
		t.Fatal(err)
	}
	block := NewBlock(insertCols)
	for row := 0; row < 3; row++ {
		values := []any{int64(row)}
		for _, tc := range cases {
			for _, nullable := range []bool{false, true} {
				if nullable && tc.typ.Repr == ReprArray {
					continue
				}
				in := Zero
				if row < 2 {
					in = tc.inputs[row]
				} else if nullable {
					in = nil
				}
				values = append(values, in)
			}
		}
		values = append(values, uint64(row+1), uint32(7), time.Unix(1700000000, 0).UTC(), uint8(0))
		converted := make([]any, len(values))
		for i, v := range values {
			if converted[i], err = ConvertValue(insertCols[i], v); err != nil {
				t.Fatalf("row %d: %v", row, err)
			}
			if err := block.Put(i, v); err != nil {
				t.Fatalf("row %d: Put: %v", row, err)
			}
		}
		if err := block.EndRow(); err != nil {
			t.Fatal(err)
		}
		if err := c.Insert(ctx, target, insertCols, [][]any{converted}); err != nil {
			t.Fatalf("row %d: %v", row, err)
		}
	}
	if err := c.InsertBlock(ctx, viaPut, block); err != nil {
		t.Fatal(err)
	}
	all := func(tbl Target) string {
		return ch.HTTPQuery(t, "SELECT * FROM "+QuoteQualified(tbl)+" ORDER BY k FORMAT TSV")
	}
	if a, b := all(target), all(viaPut); a != b {
		t.Errorf("rows inserted one by one from ConvertValue:\n%s\nrows of one block filled by Put:\n%s", a, b)
	}
	for i, tc := range cases {
		for _, nullable := range []bool{false, true} {
			if nullable && tc.typ.Repr == ReprArray {
				continue
			}
			name := fmt.Sprintf("c%d", i)
			wantZero := tc.wantZero
			if nullable {
				name, wantZero = fmt.Sprintf("n%d", i), `\N`
			}
			got := ch.HTTPQuery(t, "SELECT "+QuoteIdent(name)+" FROM "+QuoteQualified(target)+" ORDER BY k FORMAT TSV")
			want := []string{tc.want[0], tc.want[1], wantZero}
			if strings.Join(want, "\n") != got {
				t.Errorf("%s %s: read back\n%q\nwant\n%q", name, tc.typ.Type, got, strings.Join(want, "\n"))
			}
		}
	}
}

// TestConnTableAndLookup covers Table on absent and present tables and
// LookupLatest on a ReplacingMergeTree(_lsn) with a composite key: FINAL
// picks the highest _lsn, absent keys are nil and the looked-up values
// insert back unchanged.
func TestConnTableAndLookup(t *testing.T) {
	ch := testrig.StartClickHouse(t)
	c := openTestConn(t, ch)
	ctx := context.Background()
	d := c.Dialect()
	target := Target{Database: "default", Table: "public.look'up"}

	absent, err := c.Table(ctx, target)
	if err != nil || absent.Exists || len(absent.Columns) != 0 {
		t.Fatalf("absent table: %+v, %v", absent, err)
	}

	key := []ColumnSpec{
		{Name: "k_int", Type: typInt64},
		{Name: "k str", Type: typString},
		{Name: "k_uuid", Type: typUUID},
		{Name: "k_date", Type: typDate},
		{Name: "k_dec", Type: typDec10},
		{Name: "k_days", Type: typUnixDays},
	}
	data := []ColumnSpec{
		{Name: "v_text", Type: typString, Nullable: true},
		{Name: "v_dec38", Type: typDec38, Nullable: true},
		{Name: "v_uuid", Type: typUUID, Nullable: true},
		{Name: "v_date", Type: typDate, Nullable: true},
		{Name: "v_days", Type: typUnixDays},
		{Name: "v_us", Type: typUnixMicros, Nullable: true},
		{Name: "v_f32", Type: typFloat32, Nullable: true},
		{Name: "v_bool", Type: typBoolUInt8, Nullable: true},
		{Name: "v_ints", Type: arrayOf(typInt32)},
		{Name: "v_uuids", Type: arrayOf(typUUID)},
		{Name: "v_dates", Type: arrayOf(typDate)},
		{Name: "v_decs", Type: arrayOf(typDec10)},
	}
	cols := append(append([]ColumnSpec(nil), key...), data...)
	sql, err := CreateTable(d, target, cols, []string{"k_int", "k str", "k_uuid", "k_date", "k_dec", "k_days"}, TableOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(ctx, sql); err != nil {
		t.Fatal(err)
	}
	present, err := c.Table(ctx, target)
	if err != nil || !present.Exists {
		t.Fatalf("present table: %+v, %v", present, err)
	}
	var gotCols, wantCols []string
	for _, col := range present.Columns {
		gotCols = append(gotCols, col.Name+" "+col.Type)
	}
	all := append(append([]ColumnSpec(nil), cols...), SyntheticColumns(d)...)
	for _, col := range all {
		wantCols = append(wantCols, col.Name+" "+col.TypeSQL())
	}
	if strings.Join(gotCols, ", ") != strings.Join(wantCols, ", ") {
		t.Errorf("columns\n%v\nwant\n%v", gotCols, wantCols)
	}

	convert := func(specs []ColumnSpec, values ...any) []any { return convertValues(t, specs, values...) }
	keyA := convert(key, int64(1), "a'b", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "2020-02-29", json.Number("1.50"), "0044-03-15 BC")
	keyB := convert(key, int64(1), "a'b", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "2020-02-29", json.Number("1.50"), "infinity")
	keyAbsent := convert(key, int64(2), "a'b", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "2020-02-29", json.Number("1.50"), "infinity")
	version := func(lsn uint64, text string) []any {
		v := convert(data, text, json.Number("-12345.0000000001"), "00000000-0000-0000-0000-00000000000f", "2105-12-31", "-infinity",
			"294000-01-01 00:00:00+00", "NaN", true, "{1,NULL}", "{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11,NULL}", "{2020-01-01,NULL}", "{0.01,NULL}")
		return append(v, convert(SyntheticColumns(d), lsn, int64(9), time.Unix(1700000000, 0), int64(0))...)
	}
	nulls := append(convert(data, nil, nil, nil, nil, "2000-01-01", nil, nil, nil, "{}", "{}", "{}", "{}"),
		convert(SyntheticColumns(d), uint64(5), int64(9), time.Unix(1700000000, 0), int64(0))...)
	rows := [][]any{
		append(append([]any(nil), keyA...), version(10, "newest")...),
		append(append([]any(nil), keyA...), version(3, "older")...),
		append(append([]any(nil), keyB...), nulls...),
	}
	if err := c.Insert(ctx, target, all, rows[:1]); err != nil {
		t.Fatal(err)
	}
	// A second part, so FINAL has versions to collapse.
	if err := c.Insert(ctx, target, all, rows[1:]); err != nil {
		t.Fatal(err)
	}
	want := append(append([]ColumnSpec(nil), data...), SyntheticColumns(d)[0])
	got, err := c.LookupLatest(ctx, target, key, [][]any{keyAbsent, keyA, keyB, keyA}, want)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || got[0] != nil || got[1] == nil || got[2] == nil {
		t.Fatalf("LookupLatest: %v", got)
	}
	if got[1][0] != "newest" || got[1][len(data)] != uint64(10) || got[3][0] != "newest" {
		t.Errorf("key A: %v, want the _lsn 10 version", got[1])
	}
	if got[2][0] != nil || got[2][4] != int32(10957) {
		t.Errorf("key B: %v", got[2])
	}

	// The looked-up values insert back: a copy of the table reads the same.
	copyTarget := Target{Database: "default", Table: "copy"}
	sql, err = CreateTable(d, copyTarget, cols, []string{"k_int", "k str", "k_uuid", "k_date", "k_dec", "k_days"}, TableOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(ctx, sql); err != nil {
		t.Fatal(err)
	}
	copyCols := append(append([]ColumnSpec(nil), key...), want...)
	var copied [][]any
	for i, k := range [][]any{keyA, keyB} {
		copied = append(copied, append(append([]any(nil), k...), got[i+1]...))
	}
	if err := c.Insert(ctx, copyTarget, copyCols, copied); err != nil {
		t.Fatal(err)
	}
	selectAll := func(tg Target) string {
		return ch.HTTPQuery(t, "SELECT "+columnList(copyCols)+" FROM "+QuoteQualified(tg)+" FINAL ORDER BY k_days FORMAT TSV")
	}
	if a, b := selectAll(target), selectAll(copyTarget); a != b || !strings.Contains(a, "newest") {
		t.Errorf("copy differs:\n%s\nwant\n%s", b, a)
	}

	// Chunking: more keys than one query takes.
	many := make([][]any, 2*lookupChunk+1)
	for i := range many {
		many[i] = keyAbsent
	}
	many[lookupChunk+3] = keyB
	got, err = c.LookupLatest(ctx, target, key, many, want[:1])
	if err != nil {
		t.Fatal(err)
	}
	for i, row := range got {
		if (row != nil) != (i == lookupChunk+3) {
			t.Fatalf("chunked lookup: key %d got %v", i, row)
		}
	}
}

// TestConnDefaultUnixDays: the DEFAULT rendered for a legacy date column
// stores the days the output would write.
func TestConnDefaultUnixDays(t *testing.T) {
	ch := testrig.StartClickHouse(t)
	c := openTestConn(t, ch)
	ctx := context.Background()
	target := Target{Database: "default", Table: "defaults"}
	sql, err := CreateTable(c.Dialect(), target, []ColumnSpec{{Name: "id", Type: typInt64}}, []string{"id"}, TableOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(ctx, sql); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, missing string }{{"born", "2020-01-02"}, {"never", "infinity"}, {"ever", "-infinity"}, {"bc", "4714-11-24 BC"}} {
		lit, err := DefaultLiteral(c.Dialect(), typUnixDays, tc.missing)
		if err != nil {
			t.Fatal(err)
		}
		sql, _, err := AddColumn(c.Dialect(), target, ColumnSpec{Name: tc.name, Type: typUnixDays, Nullable: true, Default: lit})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	// Arrays: a default's elements, NULLs and the empty array keep their
	// type; a Nullable array's NULL flag defaults to 0 beside a default.
	for _, tc := range []struct{ name, missing string }{{"nums", "{1,NULL,3}"}, {"none", "{}"}, {"words", `{"a,b",NULL}`}} {
		elem := typInt64
		if tc.name == "words" {
			elem = ColumnType{Type: "String", Repr: ReprString}
		}
		typ := ColumnType{Type: "Array(Nullable(" + elem.Type + "))", Repr: ReprArray, Elem: &elem}
		lit, err := DefaultLiteral(c.Dialect(), typ, tc.missing)
		if err != nil {
			t.Fatal(err)
		}
		spec := ColumnSpec{Name: tc.name, Type: typ, Nullable: true, Default: lit}
		for _, p := range Physical([]ColumnSpec{spec}) {
			sql, _, err := AddColumn(c.Dialect(), target, p)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Exec(ctx, sql); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := c.Insert(ctx, target, []ColumnSpec{{Name: "id", Type: typInt64}}, [][]any{{int64(1)}}); err != nil {
		t.Fatal(err)
	}
	got := ch.HTTPQuery(t, "SELECT born, never, ever, bc, toTypeName(born) FROM "+QuoteQualified(target)+" FORMAT TSV")
	if want := "18263\t2147483647\t-2147483648\t-2440588\tNullable(Int32)"; got != want {
		t.Errorf("defaults read back as %q, want %q", got, want)
	}
	got = ch.HTTPQuery(t, "SELECT nums, nums__is_null, none, none__is_null, words, toTypeName(none) FROM "+QuoteQualified(target)+" FORMAT TSV")
	if want := "[1,NULL,3]\t0\t[]\t0\t['a,b',NULL]\tArray(Nullable(Int64))"; got != want {
		t.Errorf("array defaults read back as %q, want %q", got, want)
	}
}

// TestConnErrors: a wrong port fails within the dial timeout naming the
// host; a syntax error is not retryable; a stopped server is, and
// InsertRetrying gives up after the policy's attempts.
func TestConnErrors(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	_, err := Open(ctx, ConnConfig{DSN: "clickhouse://walshadow:s3cret@127.0.0.1:1/db", DialTimeout: 2 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("wrong port: %v", err)
	}
	if elapsed := time.Since(start); elapsed > 10*time.Second {
		t.Errorf("wrong port took %s", elapsed)
	}
	if !IsRetryable(err) {
		t.Errorf("connection refused is not retryable: %v", err)
	}
	if _, err := Open(ctx, ConnConfig{DSN: "clickhouse://127.0.0.1:1", Compression: "snappy"}); err == nil || !strings.Contains(err.Error(), "snappy") {
		t.Errorf("bad compression: %v", err)
	}

	ch := testrig.StartClickHouse(t)
	for _, compression := range []string{"zstd", "none"} {
		c, err := Open(ctx, ConnConfig{DSN: "clickhouse://" + ch.NativeAddr(), Compression: compression})
		if err != nil {
			t.Fatalf("compression %s: %v", compression, err)
		}
		if err := c.Exec(ctx, "SELECT 1"); err != nil {
			t.Errorf("compression %s: %v", compression, err)
		}
		c.Close()
	}
	c := openTestConn(t, ch)
	err = c.Exec(ctx, "SELEC 1")
	if err == nil || IsRetryable(err) {
		t.Errorf("syntax error: %v, retryable %v", err, IsRetryable(err))
	}
	if err := c.Exec(ctx, "SELECT * FROM default.nope"); err == nil || IsRetryable(err) {
		t.Errorf("unknown table: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := c.Exec(cancelled, "SELECT 1"); err == nil || IsRetryable(err) {
		t.Errorf("cancelled context: %v", err)
	}
	target := Target{Database: "default", Table: "t"}
	cols := []ColumnSpec{{Name: "id", Type: typInt64}}
	if err := c.Exec(ctx, "CREATE TABLE default.t (id Int64) ENGINE = MergeTree ORDER BY id"); err != nil {
		t.Fatal(err)
	}
	if err := c.Insert(ctx, Target{Database: "default", Table: "absent"}, cols, [][]any{{int64(1)}}); err == nil || IsRetryable(err) {
		t.Errorf("insert into an absent table: %v", err)
	}

	ch.Stop(t)
	err = c.Exec(ctx, "SELECT 1")
	if err == nil || !IsRetryable(err) {
		t.Errorf("stopped server: %v, retryable %v", err, IsRetryable(err))
	}
	var retries []int
	err = c.InsertRetrying(ctx, target, cols, [][]any{{int64(1)}}, RetryPolicy{MaxAttempts: 3, Initial: time.Millisecond, Max: 2 * time.Millisecond},
		func(attempt int, err error) { retries = append(retries, attempt) })
	if err == nil || !strings.Contains(err.Error(), "after 3 attempts") || fmt.Sprint(retries) != "[1 2]" {
		t.Errorf("InsertRetrying: %v, retries %v", err, retries)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	err = c.InsertRetrying(short, target, cols, [][]any{{int64(1)}}, RetryPolicy{MaxAttempts: 100, Initial: time.Second}, nil)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("InsertRetrying past the deadline: %v", err)
	}
}
