package chcompare

import (
	"context"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	chgo "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/shopspring/decimal"

	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/testrig"
)

const itemsDDL = `CREATE TABLE public."rl items" (
	id int8 PRIMARY KEY,
	name text,
	flag bool,
	price numeric(10,2),
	ratio float8,
	small real,
	uid uuid,
	born date,
	seen timestamptz,
	at timestamp,
	data bytea,
	addr inet,
	tags text[] NOT NULL,
	nums int4[] NOT NULL
)`

const itemsSource = `"public"."rl items"`

// sourceColumns reads the table's columns as the descriptor log records
// them.
func sourceColumns(t *testing.T, conn *pgx.Conn, table string) []desclog.Column {
	t.Helper()
	rows, err := conn.Query(context.Background(), `
SELECT a.attnum, a.attname::text, a.atttypid::int8, a.atttypmod, format_type(a.atttypid, a.atttypmod),
       ty.typtype::text, ty.typbasetype::int8, ty.typelem::int8, a.attnotnull, ty.typlen
FROM pg_attribute a JOIN pg_type ty ON ty.oid = a.atttypid
WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum`, table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var cols []desclog.Column
	for rows.Next() {
		var c desclog.Column
		var typeOid, baseOid, elemOid int64
		var kind string
		if err := rows.Scan(&c.Num, &c.Name, &typeOid, &c.TypMod, &c.TypeName, &kind, &baseOid, &elemOid, &c.NotNull, &c.Len); err != nil {
			t.Fatal(err)
		}
		c.TypeOid, c.BaseTypeOid, c.ElemTypeOid, c.TypeKind = uint32(typeOid), uint32(baseOid), uint32(elemOid), kind[0]
		cols = append(cols, c)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return cols
}

func ref[T any](v T) *T { return &v }

func micros(ts string) int64 {
	tm, err := time.Parse("2006-01-02 15:04:05.999999Z07", ts)
	if err != nil {
		panic(err)
	}
	return tm.UnixMicro()
}

// rig is a source table and its ClickHouse replica on real servers.
type rig struct {
	t     *testing.T
	pg    *testrig.Postgres
	conn  *pgx.Conn
	ch    driver.Conn
	table Table
	d     clickhouse.Dialect
}

func newRig(t *testing.T) *rig {
	pg := testrig.StartPostgres(t)
	srv := testrig.StartClickHouse(t)
	d, err := clickhouse.ParseDialect(srv.HTTPQuery(t, "SELECT version()"))
	if err != nil {
		t.Fatal(err)
	}
	if d != clickhouse.Legacy1816 {
		t.Fatalf("the test pins Legacy1816; the server is %+v", d)
	}
	ch, err := chgo.Open(&chgo.Options{Addr: []string{srv.NativeAddr()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.Close() })
	r := &rig{t: t, pg: pg, conn: pg.Connect(t), ch: ch, d: d}

	pg.Exec(t, itemsDDL)
	target := clickhouse.DefaultTarget("walshadow test", "public", "rl items")
	r.table = Table{Source: itemsSource, Target: target, Key: []string{"id"}}
	var specs []clickhouse.ColumnSpec
	for _, c := range sourceColumns(t, r.conn, itemsSource) {
		spec, err := clickhouse.ColumnSpecFor(d, itemsSource, c, c.Name == "id")
		if err != nil {
			t.Fatal(err)
		}
		specs = append(specs, spec)
		r.table.Columns = append(r.table.Columns, Column{Source: c, Spec: spec})
	}
	r.exec(clickhouse.CreateDatabase(target.Database))
	r.exec(clickhouse.CreateTable(d, target, specs, []string{"id"}, clickhouse.TableOptions{}))
	return r
}

func (r *rig) exec(sql string, err error) {
	r.t.Helper()
	if err != nil {
		r.t.Fatal(err)
	}
	if err := r.ch.Exec(context.Background(), sql); err != nil {
		r.t.Fatalf("%s: %v", sql, err)
	}
}

// insert writes rows in their stored form (the table's columns in order)
// with the given _lsn and _is_deleted.
func (r *rig) insert(lsn uint64, deleted bool, rows ...[]any) {
	r.t.Helper()
	var names []string
	for _, c := range r.table.Columns {
		names = append(names, clickhouse.QuoteIdent(c.Spec.Name))
	}
	for _, c := range clickhouse.SyntheticColumns(r.d) {
		names = append(names, clickhouse.QuoteIdent(c.Name))
	}
	ctx := context.Background()
	batch, err := r.ch.PrepareBatch(ctx, "INSERT INTO "+clickhouse.QuoteQualified(r.table.Target)+" ("+strings.Join(names, ", ")+")")
	if err != nil {
		r.t.Fatal(err)
	}
	var isDeleted uint8
	if deleted {
		isDeleted = 1
	}
	for _, row := range rows {
		// _lsn, _xid, _commit_ts_us, _is_deleted
		vals := append(append([]any(nil), row...), lsn, uint32(700), uint64(1_700_000_000_000_000), isDeleted)
		if err := batch.Append(vals...); err != nil {
			r.t.Fatal(err)
		}
	}
	if err := batch.Send(); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) compare(maxDiffs int) []string {
	r.t.Helper()
	diffs, err := Compare(context.Background(), r.conn, r.ch, r.table, maxDiffs)
	if err != nil {
		r.t.Fatal(err)
	}
	return diffs
}

func assertDiffs(t *testing.T, got []string, want ...string) {
	t.Helper()
	if !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
		t.Fatalf("differences:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Stored forms of the rows the source gets below (Legacy1816: bool UInt8,
// date Int32 days, timestamps Int64 µs, bytea raw bytes, inet its text).
func storedRows() [][]any {
	return [][]any{
		{int64(1), ref("plain"), ref(uint8(1)), ref(decimal.RequireFromString("1.5")), ref(0.1), ref(float32(0.1)),
			ref(uuid.MustParse("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11")), ref(int32(19782)),
			ref(micros("2024-01-02 03:04:05.123456Z")), ref(micros("2024-01-02 03:04:05Z")), ref("\x00\xff"), ref("10.0.0.1"),
			[]*string{ref("a b"), nil, ref(""), ref("plain"), ref(`q"\`)}, []*int32{ref(int32(1)), nil, ref(int32(-3))}},
		{int64(2), nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, []*string{}, []*int32{}},
		{int64(10), ref(`it's "quoted"`), ref(uint8(0)), ref(decimal.RequireFromString("-99999999.99")), ref(math.NaN()), ref(float32(math.Copysign(0, -1))),
			nil, ref(int32(-735160)), ref(int64(math.MaxInt64)), ref(micros("0001-01-01 00:00:00Z") - 1), ref(""), ref("::1"),
			[]*string{ref("NULL")}, []*int32{nil}},
	}
}

const sourceRows = `INSERT INTO public."rl items" VALUES
	(1, 'plain', true, 1.5, 0.1, 0.1, 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', '2024-02-29',
	 '2024-01-02 03:04:05.123456+00', '2024-01-02 03:04:05', '\x00ff', '10.0.0.1',
	 ARRAY['a b', NULL, '', 'plain', 'q"\'], ARRAY[1, NULL, -3]),
	(2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, '{}', '{}'),
	(10, 'it''s "quoted"', false, -99999999.99, 'NaN', '-0', NULL, '0044-03-15 BC',
	 'infinity', '0001-12-31 23:59:59.999999 BC', '', '::1', ARRAY['NULL'], ARRAY[NULL]::int4[])`

func TestCompareRefusesUnknownKey(t *testing.T) {
	table := Table{Source: itemsSource, Target: clickhouse.Target{Database: "db", Table: "t"},
		Columns: []Column{{Source: desclog.Column{Name: "id"}, Spec: clickhouse.ColumnSpec{Name: "id"}}}, Key: []string{"nope"}}
	_, err := Compare(context.Background(), nil, nil, table, 10)
	if err == nil || !strings.Contains(err.Error(), `key column "nope"`) {
		t.Fatalf("Compare with an unknown key column: %v", err)
	}
}

// TestDiffRowsMultiset covers duplicate rows under whole-row matching and
// NULL keys, without servers.
func TestDiffRowsMultiset(t *testing.T) {
	table := Table{Source: "s", Columns: []Column{
		{Source: desclog.Column{Name: "a"}, Spec: clickhouse.ColumnSpec{Name: "a"}},
		{Source: desclog.Column{Name: "b"}, Spec: clickhouse.ColumnSpec{Name: "ch_b"}},
	}}
	mk := func(a, b *string) row { return row{a, b} }
	src := []row{mk(ref("1"), ref("x")), mk(ref("1"), ref("x")), mk(ref("2"), nil), mk(nil, ref("y"))}
	rep := []row{mk(ref("1"), ref("x")), mk(ref("2"), nil), mk(ref("2"), ref("")), mk(nil, ref("y"))}
	got := diffRows(table, []int{0, 1}, src, rep, 0)
	assertDiffs(t, got,
		`s: row (a="1", b="x"): missing from ClickHouse`,
		`s: row (a="2", b=""): only in ClickHouse`,
	)

	// Keyed by a: the value difference names both column names.
	src = []row{mk(ref("10"), ref("x")), mk(ref("9"), nil)}
	rep = []row{mk(ref("10"), ref("y")), mk(ref("9"), ref("NULL"))}
	got = diffRows(table, []int{0}, src, rep, 0)
	assertDiffs(t, got,
		`s: row (a="9"): column "b" (ClickHouse "ch_b"): PostgreSQL NULL, ClickHouse "NULL"`,
		`s: row (a="10"): column "b" (ClickHouse "ch_b"): PostgreSQL "x", ClickHouse "y"`,
	)
}

// TestRowsWithoutColumns: a table without columns compares by its number
// of (empty) rows.
func TestRowsWithoutColumns(t *testing.T) {
	if d := diffRows(Table{Source: "s"}, nil, make([]row, 3), make([]row, 3), 10); len(d) != 0 {
		t.Errorf("3 empty rows against 3: %v", d)
	}
	if d := diffRows(Table{Source: "s"}, nil, make([]row, 3), make([]row, 2), 10); len(d) != 1 {
		t.Errorf("3 empty rows against 2: %v, want one row missing", d)
	}
}
