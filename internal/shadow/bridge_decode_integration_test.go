package shadow

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// decodeColumn is one column of the DECODE acceptance table with a SQL
// expression per row ("" = NULL). Row 3 is all NULL.
type decodeColumn struct {
	name, typ string
	vals      []string
}

var decodeColumns = []decodeColumn{
	{"b", "bool", []string{"true", "false", "", "true"}},
	{"ch", `"char"`, []string{`'r'`, `''`, "", `'é'`}},
	{"nm", "name", []string{`'relname'`, `repeat('n', 63)`, "", `''`}},
	{"i2", "int2", []string{"12", "-32768", "", "32767"}},
	{"i4", "int4", []string{"123456", "-2147483648", "", "2147483647"}},
	{"i8", "int8", []string{"1234567890123", "-9223372036854775808", "", "9223372036854775807"}},
	{"o", "oid", []string{"16384", "4294967295", "", "0"}},
	{"xi", "xid", []string{`'42'`, `'4294967295'`, "", `'3'`}},
	{"ci_", "cid", []string{`'7'`, `'4294967295'`, "", `'0'`}},
	{"f4", "float4", []string{"1.5", `'NaN'`, "", `'-0'`, `'Infinity'`, `'-Infinity'`}},
	{"f4x", "float4", []string{"3.4028235e38", "1.4e-45", "", "0.1", "-1.17549435e-38"}},
	{"f8", "float8", []string{"3.141592653589793", `'NaN'`, "", `'-0'`, `'Infinity'`, `'-Infinity'`}},
	{"f8x", "float8", []string{"1.7976931348623157e308", "5e-324", "", "0.1", "2.2250738585072014e-308", "1e-7"}},
	{"n", "numeric", []string{"12345.6789", `'NaN'`, "", `'-Infinity'`, `'Infinity'`,
		`(repeat('9', 1000) || '.' || repeat('1', 500))::numeric`}},
	{"nx", "numeric(10,3)", []string{"1.5", "-9999999.999", "", "0", "-0.0005"}},
	{"nt", "numeric", []string{`'-0.000000000000000000000000000001'`, `'1e-300'`, "", `'1e300'`}},
	{"m", "money", []string{"1234.56", "-92233720368547758.08", "", "92233720368547758.07", "0"}},
	{"tx", "text", []string{`'hello, world'`, `''`, "", `'ünïcödé ✓ 🎉'`, `E'tab\there\nnewline "q" \\ back'`}},
	{"vc", "varchar(20)", []string{`'varchar'`, `''`, "", `'x'`}},
	{"bp", "char(5)", []string{`'ab'`, `''`, "", `'abcde'`}},
	{"ba", "bytea", []string{`'\xdeadbeef'`, `'\x'`, "", `'\x00ff00'`, `decode(repeat('ab', 100), 'hex')`}},
	{"js", "json", []string{`'{"a": [1, 2.5, "x"],  "b" : null}'`, `'[]'`, "", `'"str"'`, `'  {"n": {"d": [true, false, null]}}  '`}},
	{"jb", "jsonb", []string{`'{"b": [1, 2, {"c": "d"}], "a": 1.5e3}'`, `'{}'`, "", `'[1, "two", null, true, 3.14159]'`,
		`'"unicode ✓"'`, `'null'`}},
	{"jp", "jsonpath", []string{`'$.a[*] ? (@ > 1)'`, `'strict $.x'`, "", `'$'`}},
	{"u", "uuid", []string{`'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'`, `'00000000-0000-0000-0000-000000000000'`, "",
		`'ffffffff-ffff-ffff-ffff-ffffffffffff'`}},
	{"d", "date", []string{`'2024-02-29'`, `'infinity'`, "", `'-infinity'`, `'4713-01-01 BC'`, `'5874897-12-31'`}},
	{"tm", "time", []string{`'13:45:30.123456'`, `'24:00:00'`, "", `'00:00:00'`}},
	{"ttz", "timetz", []string{`'13:45:30+05:30'`, `'00:00:00-15:59'`, "", `'23:59:59.999999+15:59'`}},
	{"ts", "timestamp", []string{`'2024-02-29 13:45:30.5'`, `'infinity'`, "", `'-infinity'`,
		`'294276-12-31 23:59:59.999999'`, `'4713-01-01 00:00:00 BC'`}},
	{"tstz", "timestamptz", []string{`'2024-02-29 13:45:30.5+02'`, `'-infinity'`, "", `'infinity'`,
		`'1999-12-31 23:59:59.999999-08'`, `'294276-12-31 23:59:59.999999+00'`}},
	{"iv", "interval", []string{`'1 year 2 mons 3 days 04:05:06.789'`, `'-178000000 years'`, "", `'0'`,
		`'178000000 years'`, `'-1 day +01:02:03'`}},
	{"ip", "inet", []string{`'192.168.1.5/24'`, `'::ffff:1.2.3.4'`, "", `'10.0.0.1'`, `'2001:db8::1/64'`}},
	{"cd", "cidr", []string{`'10.0.0.0/8'`, `'2001:db8::/32'`, "", `'0.0.0.0/0'`}},
	{"mac", "macaddr", []string{`'08:00:2b:01:02:03'`, `'ff:ff:ff:ff:ff:ff'`, "", `'00:00:00:00:00:00'`}},
	{"mac8", "macaddr8", []string{`'08:00:2b:01:02:03:04:05'`, `'ff:ff:ff:ff:ff:ff:ff:ff'`}},
	{"pt", "point", []string{`'(1.5,-2)'`, `'(1e300,-1e-300)'`, "", `'(0,0)'`}},
	{"ln", "line", []string{`'{1,-1,3}'`, `'{1,0,-5}'`}},
	{"ls", "lseg", []string{`'[(0,0),(1,1)]'`}},
	{"bx", "box", []string{`'(3,4),(1,2)'`, `'(0,0),(0,0)'`}},
	{"pa", "path", []string{`'[(0,0),(1,1),(2,0)]'`, `'((0,0),(1,1))'`}},
	{"pg", "polygon", []string{`'((0,0),(1,1),(1,0))'`}},
	{"cir", "circle", []string{`'<(1,2),3>'`}},
	{"bt", "bit(8)", []string{`B'10101010'`, `B'00000000'`, "", `B'11111111'`}},
	{"vb", "varbit", []string{`B'1101'`, `B''`, "", `repeat('10', 100)::varbit`}},
	{"tv", "tsvector", []string{`'a fat cat sat on a mat'`, `''`, "", `'weight:1A,2B,3C positions:4,5'`}},
	{"tq", "tsquery", []string{`'fat & (rat | cat)'`, `'!a <-> b'`, "", `'x:* & y:AB'`}},
	{"x", "xml", []string{`'<doc><a x="1">text</a></doc>'`, `'plain text'`, "", `'<r/>'`}},
	{"lsn", "pg_lsn", []string{`'16/B374D848'`, `'0/0'`, "", `'FFFFFFFF/FFFFFFFF'`}},
	{"tid_", "tid", []string{`'(3,7)'`, `'(4294967295,65535)'`, "", `'(0,0)'`}},
	{"ov", "oidvector", []string{`'1 2 3'`, `''`, "", `'4294967295'`}},
	{"i2v", "int2vector", []string{`'1 2'`, `''`, "", `'-32768 32767'`}},
	{"rgt", "regtype", []string{`'int4'`, `'timestamptz'`}},
	{"rgc", "regclass", []string{`'pg_class'`}},
	{"acl", "aclitem[]", []string{`'{postgres=arwdDxt/postgres,=r/postgres}'`}},
	{"a1", "int4[]", []string{`'{1,2,3}'`, `'{}'`, "", `'{NULL,-2147483648}'`, `'[0:2]={7,8,9}'`}},
	{"a2", "int4[]", []string{`'{{1,2},{3,4}}'`, `'{{NULL,1},{2,NULL}}'`, "", `'{{{1}},{{2}}}'`}},
	{"an", "text[]", []string{`'{a,NULL,"c d","e\"f",""}'`, `'{}'`, "", `'{"NULL"}'`}},
	{"af", "float8[]", []string{`'{1.5,NaN,-Infinity,-0}'`}},
	{"na", "numeric[]", []string{`'{1.5,NaN,Infinity}'`}},
	{"tsa", "timestamptz[]", []string{`'{"2024-01-01 00:00+00",infinity}'`}},
	{"en", "mood", []string{`'happy'`, `'sad'`, "", `'ok'`}},
	{"ea", "mood[]", []string{`'{sad,happy}'`}},
	{"di", "posint", []string{"7", "2147483647", "", "1"}},
	{"dt", "shorttext", []string{`'domain text'`, `''`, "", `'x'`}},
	{"co", "complex", []string{`'(1.5,-2.25,"a label")'`, `'(,,)'`, "", `'(NaN,Infinity,"quote""s")'`}},
	{"ca", "complex[]", []string{`'{"(1,2,x)","(3,4,)"}'`}},
	{"r4", "int4range", []string{`'[1,10)'`, `'empty'`, "", `'(,5]'`, `'[-2147483648,2147483647)'`}},
	{"rt", "tstzrange", []string{`'[2024-01-01 00:00+00,2024-06-01 00:00+00)'`, `'(,)'`, "", `'[-infinity,infinity]'`}},
	{"rn", "numrange", []string{`'(1.5,2.5]'`, `'empty'`, "", `'[0,1e30)'`}},
	{"rd", "daterange", []string{`'[2024-01-01,2024-02-01)'`, `'[2024-01-01,2024-01-01]'`, "", `'empty'`}},
	{"mr", "int4multirange", []string{`'{[1,3),[5,8)}'`, `'{}'`, "", `'{(,0),[10,)}'`}},
	{"mn", "nummultirange", []string{`'{[1.5,2.5]}'`}},
	{"snap", "pg_snapshot", []string{`'10:20:10,14,15'`, `'3:3:'`}},
}

// hstoreColumn joins decodeColumns when the server has the extension.
var hstoreColumn = decodeColumn{"hs", "hstore", []string{`'"a"=>"1", "b"=>NULL'`, `''`, "", `'"k ey"=>"va\"lue"'`}}

// pinnedSession are the settings the worker pins, for the comparison side.
const pinnedSession = `SET TimeZone = 'UTC'; SET DateStyle = 'ISO, MDY'; SET IntervalStyle = 'postgres';
SET extra_float_digits = 1; SET bytea_output = 'hex'; SET lc_monetary = 'C'; SET lc_numeric = 'C'; SET lc_time = 'C'`

// rawAttrsQuery returns each live tuple's ctid and on-disk attribute bytes.
const rawAttrsQuery = `
SELECT format('(%%s,%%s)', blk, lp),
       tuple_data_split('%[1]s'::regclass, t_data, t_infomask, t_infomask2, t_bits)
FROM generate_series(0, pg_relation_size('%[1]s') / current_setting('block_size')::int - 1) AS blk,
     LATERAL heap_page_items(get_raw_page('%[1]s', blk::int))
WHERE lp_flags = 1 AND t_data IS NOT NULL`

func rawAttrs(t *testing.T, conn *pgx.Conn, table string) map[string][][]byte {
	t.Helper()
	rows, err := conn.Query(context.Background(), fmt.Sprintf(rawAttrsQuery, table))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][][]byte{}
	for rows.Next() {
		var ctid string
		var attrs [][]byte
		if err := rows.Scan(&ctid, &attrs); err != nil {
			t.Fatal(err)
		}
		out[ctid] = attrs
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func typeOids(t *testing.T, conn *pgx.Conn, table string) []uint32 {
	t.Helper()
	rows, err := conn.Query(context.Background(),
		"SELECT atttypid FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 ORDER BY attnum", table)
	if err != nil {
		t.Fatal(err)
	}
	oids, err := pgx.CollectRows(rows, pgx.RowTo[uint32])
	if err != nil {
		t.Fatal(err)
	}
	return oids
}

// TestBridgeDecodeMatchesTypoutput renders every column of a table of ~70
// types through DECODE from the bytes pageinspect shows on disk, and
// compares with what the server's own output functions print (the simple
// protocol's text, i.e. psql's) under the pinned settings. The comparison
// uses typoutput rather than a ::text cast because a few casts differ from
// the output function (bool::text is 'true', inet::text keeps /32,
// char(n)::text trims).
func TestBridgeDecodeMatchesTypoutput(t *testing.T) {
	p, b, _ := startBridgePrimary(t)
	pid := bridgeWorkerPID(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	conn := p.Connect(t)
	if _, err := conn.Exec(ctx, pinnedSession); err != nil {
		t.Fatal(err)
	}
	cols := append([]decodeColumn{}, decodeColumns...)
	if p.QueryInt(t, "SELECT count(*) FROM pg_available_extensions WHERE name = 'hstore'") == 1 {
		cols = append(cols, hstoreColumn)
		p.Exec(t, "CREATE EXTENSION hstore")
	} else {
		t.Log("hstore is not available: its column is left out")
	}
	p.Exec(t, `CREATE EXTENSION pageinspect;
		CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
		CREATE DOMAIN posint AS int CHECK (VALUE > 0);
		CREATE DOMAIN shorttext AS text;
		CREATE TYPE complex AS (r float8, i float8, label text)`)
	var ddl strings.Builder
	ddl.WriteString("CREATE TABLE types (id int")
	nrows := 0
	for _, c := range cols {
		fmt.Fprintf(&ddl, ", %s %s", c.name, c.typ)
		nrows = max(nrows, len(c.vals))
	}
	ddl.WriteString(")")
	if _, err := conn.Exec(ctx, ddl.String()); err != nil {
		t.Fatal(err)
	}
	for r := 0; r < nrows; r++ {
		names, vals := []string{"id"}, []string{fmt.Sprint(r + 1)}
		for _, c := range cols {
			if r < len(c.vals) && c.vals[r] != "" {
				names, vals = append(names, c.name), append(vals, c.vals[r])
			}
		}
		sql := fmt.Sprintf("INSERT INTO types (%s) VALUES (%s)", strings.Join(names, ", "), strings.Join(vals, ", "))
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	t.Logf("%d columns, %d rows", len(cols)+1, nrows)

	oids := typeOids(t, conn, "types")
	raw := rawAttrs(t, conn, "types")
	want := rawRows(t, conn, "SELECT ctid, * FROM types")
	var items []DecodeItem
	var expect []string
	var where []string
	for _, row := range want {
		attrs, ok := raw[*row[0]]
		if !ok || len(attrs) != len(oids) {
			t.Fatalf("tuple %s: pageinspect shows %d attributes, want %d", *row[0], len(attrs), len(oids))
		}
		for i, a := range attrs {
			if (a == nil) != (row[i+1] == nil) {
				t.Fatalf("tuple %s column %d: NULL on disk %v, in SQL %v", *row[0], i+1, a == nil, row[i+1] == nil)
			}
			if a == nil {
				continue // NULLs are not sent
			}
			items = append(items, DecodeItem{TypeOid: oids[i], Data: a})
			expect = append(expect, *row[i+1])
			name := "id"
			if i > 0 {
				name = cols[i-1].name + " " + cols[i-1].typ
			}
			where = append(where, fmt.Sprintf("tuple %s column %s", *row[0], name))
		}
	}

	// Inline-compressed (pglz, lz4) values and an external TOAST pointer.
	if _, err := conn.Exec(ctx, `CREATE TABLE big (zp text COMPRESSION pglz, zl text COMPRESSION lz4, ext text, zj jsonb COMPRESSION lz4);
		ALTER TABLE big ALTER COLUMN ext SET STORAGE EXTERNAL;
		INSERT INTO big VALUES (repeat('pglz compresses this nicely ', 300), repeat('lz4 compresses this too ', 300),
			repeat('e', 5000), jsonb_build_object('k', repeat('jsonb lz4 ', 500)))`); err != nil {
		t.Fatal(err)
	}
	bigOids := typeOids(t, conn, "big")
	var bigRaw [][]byte
	for _, a := range rawAttrs(t, conn, "big") {
		bigRaw = a
	}
	bigWant := rawRows(t, conn, "SELECT * FROM big")[0]
	compressed := map[int]uint32{0: 0, 1: 1, 3: 1} // column -> method (0 pglz, 1 lz4)
	for col, method := range compressed {
		a := bigRaw[col]
		if len(a) < 8 || a[0]&0x03 != 0x02 || binary.LittleEndian.Uint32(a[4:8])>>30 != method {
			t.Fatalf("big column %d is not inline-compressed with method %d: %x", col+1, method, a[:min(len(a), 8)])
		}
		items = append(items, DecodeItem{TypeOid: bigOids[col], Data: a})
		expect = append(expect, *bigWant[col])
		where = append(where, fmt.Sprintf("big column %d (compression method %d)", col+1, method))
	}
	if ext := bigRaw[2]; len(ext) != 18 || ext[0] != 0x01 || ext[1] != 18 {
		t.Fatalf("big.ext is not an external TOAST pointer: %x", ext)
	}

	// Items that must fail alone, spread through the batch.
	moodOid := p.QueryInt(t, "SELECT 'mood'::regtype::oid::int8")
	corruptPGLZ := binary.LittleEndian.AppendUint32(nil, 20<<2|0x02)
	corruptPGLZ = binary.LittleEndian.AppendUint32(corruptPGLZ, 1000)
	corruptPGLZ = append(corruptPGLZ, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
	failing := []struct {
		item DecodeItem
		want string
	}{
		{DecodeItem{TypeOid: 25, Data: bigRaw[2]}, "external TOAST pointer"},
		{DecodeItem{TypeOid: uint32(moodOid), Data: []byte{0, 0, 0, 0}}, "invalid internal value for enum"},
		{DecodeItem{TypeOid: 0xfffffff0, Data: []byte{1, 2, 3, 4}}, "cache lookup failed for type"},
		{DecodeItem{TypeOid: 23, Data: []byte{1, 2, 3}}, "fixed-length type of 4 bytes got 3 bytes"},
		{DecodeItem{TypeOid: 25, Data: binary.LittleEndian.AppendUint32(nil, 100<<2)}, "varlena header says 100 bytes"},
		{DecodeItem{TypeOid: 25, Data: corruptPGLZ}, "compressed pglz data is corrupt"},
		{DecodeItem{TypeOid: 2275, Data: []byte("abc")}, "not one NUL-terminated string"},
		{DecodeItem{TypeOid: 869, Data: []byte{0x0f, 0x7f, 32, 1, 2, 3, 4}}, "could not format inet value"},
	}
	okItems := len(items)
	var batch []DecodeItem
	failAt := map[int]int{} // batch index -> failing index
	for i, it := range items {
		if f := i / 9; i%9 == 0 && f < len(failing) {
			failAt[len(batch)] = f
			batch = append(batch, failing[f].item)
		}
		batch = append(batch, it)
	}
	batch = append(batch, DecodeItem{TypeOid: 2275, Data: []byte("abc\x00")})

	start := time.Now()
	results, err := b.Decode(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	if len(results) != len(batch) {
		t.Fatalf("%d results for %d items", len(results), len(batch))
	}
	next, failed := 0, 0
	for i, r := range results[:len(results)-1] {
		if f, ok := failAt[i]; ok {
			failed++
			if r.Err == "" || !strings.Contains(r.Err, failing[f].want) {
				t.Errorf("failing item %d: %+v, want an error mentioning %q", f, r, failing[f].want)
			}
			continue
		}
		if r.Err != "" || r.Text != expect[next] {
			t.Errorf("%s: decoded %+v, the server prints %q", where[next], r, expect[next])
		}
		next++
	}
	if next != okItems || failed != len(failing) {
		t.Errorf("checked %d values and %d failures, want %d and %d", next, failed, okItems, len(failing))
	}
	if last := results[len(results)-1]; last != (DecodeResult{Text: "abc"}) {
		t.Errorf("cstring: %+v", last)
	}
	t.Logf("DECODE of %d items (%d failing on purpose) took %v", len(batch), len(failing), elapsed)

	// The worker survived and answers the next requests.
	if _, err := b.Hello(ctx); err != nil {
		t.Fatalf("HELLO after the batch: %v", err)
	}
	again, err := b.Decode(ctx, []DecodeItem{{TypeOid: 23, Data: []byte{0x2a, 0, 0, 0}}})
	if err != nil || len(again) != 1 || again[0].Text != "42" {
		t.Errorf("DECODE after the batch: %+v, %v", again, err)
	}
	// Throughput of a large batch of short texts (one subtransaction each).
	const n = 20000
	many := make([]DecodeItem, n)
	for i := range many {
		v := fmt.Sprintf("value %d", i)
		many[i] = DecodeItem{TypeOid: 25, Data: append([]byte{byte((len(v)+1)<<1 | 1)}, v...)}
	}
	start = time.Now()
	out, err := b.Decode(ctx, many)
	if err != nil || len(out) != n || out[n-1].Text != fmt.Sprintf("value %d", n-1) {
		t.Fatalf("large batch: %v", err)
	}
	t.Logf("DECODE of %d texts: %v (%.0f items/s)", n, time.Since(start), n/time.Since(start).Seconds())
	if s := b.Stats(); s.DecodeItemErrors != uint64(len(failing)) || s.Decode.Errors != 0 {
		t.Errorf("stats %+v", s)
	}
	if after := bridgeWorkerPID(t, p); after != pid {
		t.Errorf("the worker restarted during DECODE (pid %d, then %d)", pid, after)
	}
}
