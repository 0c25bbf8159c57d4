package copybin

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/shadow"
	"github.com/walshadow/walshadow/internal/testrig"
)

// typesSchema is one column per interesting type. The composite has a
// user-defined cast to text that prints something else than its output
// function, which SelectExprs must not use.
const typesSchema = `
CREATE EXTENSION pageinspect;
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE DOMAIN posint AS int CHECK (VALUE > 0);
CREATE DOMAIN shorttext AS text;
CREATE DOMAIN money2 AS numeric(12,2);
CREATE DOMAIN posint2 AS posint;
CREATE TYPE complex AS (r float8, i float8, label text);
CREATE FUNCTION complex_text(complex) RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT 'not the output function' $$;
CREATE CAST (complex AS text) WITH FUNCTION complex_text(complex);
CREATE TABLE types (
  id int, dropme int, b bool, c "char", n name, i2 int2, i4 int4, i8 int8, o oid,
  f4 float4, f8 float8, num numeric, num2 numeric(12,3), tx text, long text, vc varchar(20), bp char(5),
  by bytea, j json, jb jsonb, u uuid, d date, tm time, ttz timetz, ts timestamp, tstz timestamptz,
  iv interval, ip inet, cd cidr, mac macaddr, m money, ai int[], at text[], mo mood, dpi posint,
  dt shorttext, dm money2, dd posint2, co complex, "Odd ""name""" int, r int4range);
ALTER TABLE types DROP COLUMN dropme;
INSERT INTO types VALUES
 (1, true, 'a', 'hello', 1, 2, 3, 4, 1.5, 0.1, 3.14159, 1.5, 'text', 'short', 'vc', 'ab',
  '\x00ff10', '{"a": [1, 2]}', '{"b": 1, "a": [true, null]}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '2024-02-29',
  '12:34:56.789', '01:02:03+05:30', '2024-01-02 03:04:05.123456', '2024-01-02 03:04:05+02',
  '1 year 2 mons 3 days 04:05:06.5', '192.168.1.1', '10.0.0.0/8', '08:00:2b:01:02:03', 1234.56,
  '{1,NULL,3}', '{"a b","",NULL}', 'happy', 7, 'domain text', 1.5, 3, '(1.5,-2.25,"a label")', -1, '[1,10)'),
 (2, false, '\351'::"char", '', -32768, -2147483648, -9223372036854775808, 4294967295,
  'NaN', '-Infinity', 'NaN', -0.001, '', '', '', '', '\x', 'null', '[]',
  '00000000-0000-0000-0000-000000000000', '-infinity', '24:00:00', '00:00:00-12', '-infinity', 'infinity',
  '-1 year -2 mons +3 days -04:05:06', '::1', '2001:db8::/32', 'ff:ff:ff:ff:ff:ff', -92233720368547758.08,
  '{}', '{}', 'sad', 1, '', -0.01, 1, '(,,)', 0, 'empty'),
 (4, true, 'z', repeat('n', 63), 32767, 2147483647, 9223372036854775807, 0,
  'Infinity', '1e300', 'Infinity', 99999999.999, repeat('long ', 2000), repeat(md5('x'), 100), NULL, 'abcde',
  decode(repeat('00ab', 3000), 'hex'), ('{"k": "' || repeat('v', 3000) || '"}')::json, '{"k": [1, 2.50, "x"]}', NULL,
  '4713-01-01 BC', '00:00:00.000001', '23:59:59.999999+14', '0044-03-15 12:00:00 BC', '294276-12-31 23:59:59.999999+00',
  '-178000000 years -3 days 838:00:00', '::ffff:1.2.3.4', '::/0', '00:00:00:00:00:00', 0,
  '{{1,2},{3,4}}', '{"quote\"d","back\\slash"}', 'ok', 2147483647, 'x', 9999999999.99, 2, '(NaN,Infinity,"quote""s")', 0, '(,5]'),
 (5, false, NULL, 'x', 0, 0, 0, 1, '-0', 5e-324, '-Infinity', 0, NULL, NULL, NULL, 'a',
  NULL, NULL, NULL, NULL, '10000-01-01', NULL, '00:00:00+00', '10000-01-01 00:00:00', '10000-06-01 12:00:00+00',
  '0', 'fe80::1:0:0:0:1', '192.168.0.0/16', NULL, -0.01, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
INSERT INTO types (id) VALUES (3);
INSERT INTO types (id, f4, f8, num, d, ts, tstz, iv, ip) VALUES
 (6, 3.4028235e38, 123456789012345.6, 1234567890123456789012345678901234567890.0000000000000000000001,
  '0001-01-01', '0001-01-01 00:00:00 BC', '-infinity', '-1 mons +1 day', '0.0.0.0/0'),
 (7, 1.0000001e-5, 0.0001, 0.00001, '1999-12-31', '1999-12-31 23:59:59.5', '1970-01-01 00:00:00+00', '1 day -00:00:01', '::ffff:0:0'),
 (8, NULL, NULL, -1e-20, '5874897-12-31', '2000-01-01 00:00:00', '2000-01-01 00:00:00.000001+00', '-00:00:00.000001', '2001:db8:0:0:1:0:0:1');
`

// typesTable starts PostgreSQL, creates and fills the types table and
// returns a connection with SessionSettings applied and the table's
// columns.
func typesTable(t *testing.T) (*pgx.Conn, []*desclog.Column) {
	t.Helper()
	pg := testrig.StartPostgres(t)
	pg.RunSQLScript(t, typesSchema)
	conn := pg.Connect(t)
	ctx := context.Background()
	for _, s := range SessionSettings {
		if _, err := conn.Exec(ctx, "SELECT pg_catalog.set_config($1, $2, false)", s.Name, s.Value); err != nil {
			t.Fatalf("setting %s: %v", s.Name, err)
		}
	}
	var oid uint32
	if err := conn.QueryRow(ctx, `SELECT 'public.types'::regclass::oid`).Scan(&oid); err != nil {
		t.Fatal(err)
	}
	descs, err := shadow.ReadDescriptors(ctx, conn, []uint32{oid})
	if err != nil || len(descs) != 1 {
		t.Fatalf("descriptors of types: %v %v", descs, err)
	}
	var cols []*desclog.Column
	for i := range descs[0].Columns {
		cols = append(cols, &descs[0].Columns[i])
	}
	return conn, cols
}

// copyBinary runs the loader's COPY for cols (plus extra expressions in
// front) and returns the stream.
func copyBinary(t *testing.T, conn *pgx.Conn, extra []string, cols []*desclog.Column) []byte {
	t.Helper()
	exprs := append(append([]string{}, extra...), SelectExprs(cols)...)
	sql := fmt.Sprintf(`COPY (SELECT %s FROM ONLY "public"."types" ORDER BY ctid) TO STDOUT (FORMAT binary)`, strings.Join(exprs, ", "))
	var buf bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := conn.PgConn().CopyTo(ctx, &buf, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return buf.Bytes()
}
