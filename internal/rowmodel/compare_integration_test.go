package rowmodel

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/walshadow/walshadow/internal/testrig"
	"github.com/walshadow/walshadow/internal/wal"
)

// typedColumns are the columns whose canonical text the model computes
// itself (everything else arrives as PostgreSQL's text already).
const typedTableSQL = `
CREATE TABLE typed (id int8 PRIMARY KEY, f4 float4, f8 float8, d date, ts timestamp, tstz timestamptz,
                    n numeric, b bool, by bytea, t text);
CREATE TABLE typed_full (a int4, t text);
ALTER TABLE typed_full REPLICA IDENTITY FULL;
`

func insertTypedRows(t *testing.T, conn *pgx.Conn, rows int) {
	t.Helper()
	ctx := context.Background()
	r := rand.New(rand.NewSource(7))
	specials4 := []string{"NaN", "Infinity", "-Infinity", "-0", "0", "0.1", "1e20", "1.5e-07", "123456789", "1e-45", "3.4028235e+38", "1234567", "123456"}
	specials8 := []string{"NaN", "Infinity", "-Infinity", "-0", "0", "0.1", "1e20", "1.5e-07", "123456789", "5e-324", "1e15", "1e14", "123456789012345", "0.0001", "1e-05"}
	dates := []string{"infinity", "-infinity", "4713-01-01 BC", "0001-01-01", "9999-12-31", "10000-01-01", "2024-02-29"}
	stamps := []string{"infinity", "-infinity", "0001-01-01 00:00:00", "9999-12-31 23:59:59.999999", "10000-01-01 00:00:00", "0001-12-31 23:00:00 BC", "2024-02-29 12:34:56.5"}
	for i := 0; i < rows; i++ {
		f4 := strconv.FormatFloat(float64(math.Float32frombits(r.Uint32())), 'g', -1, 32)
		f8 := strconv.FormatFloat(math.Float64frombits(r.Uint64()), 'g', -1, 64)
		if i < len(specials4) {
			f4 = specials4[i]
		} else if strings.Contains(f4, "NaN") || strings.Contains(f4, "Inf") {
			f4 = "1"
		}
		if i < len(specials8) {
			f8 = specials8[i]
		} else if strings.Contains(f8, "NaN") || strings.Contains(f8, "Inf") {
			f8 = "2"
		}
		d := dates[i%len(dates)]
		ts := stamps[i%len(stamps)]
		if i >= len(stamps) {
			ts = time.Unix(r.Int63n(8e9)-2e9, int64(r.Intn(1e6))*1000).UTC().Format("2006-01-02 15:04:05.999999")
		}
		_, err := conn.Exec(ctx, `INSERT INTO typed VALUES ($1, $2::text::float4, $3::text::float8, $4::text::date, $5::text::timestamp,
			$5::text::timestamptz, $6::text::numeric, $7, $8, $9)`,
			i, f4, f8, d, ts, pick(r, "NaN", "-Infinity", "0.000", "-12345678901234567890.123456789"), i%2 == 0, []byte{byte(i), 0, 0xff}, fmt.Sprintf("row %d 'q' \\", i))
		if err != nil {
			t.Fatalf("row %d (f4 %s, f8 %s): %v", i, f4, f8, err)
		}
	}
	if _, err := conn.Exec(ctx, "INSERT INTO typed_full VALUES (1, 'x'), (1, 'x'), (2, NULL)"); err != nil {
		t.Fatal(err)
	}
}

func pick(r *rand.Rand, xs ...string) string { return xs[r.Intn(len(xs))] }

// typedValue converts what pgx scanned into the processor's contract types.
func floatValue(f float64) any {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return f
}

func timeValue(t time.Time, finite bool, text string) any {
	if !finite || t.Year() < 1 || t.Year() > 9999 {
		return text
	}
	return t.UTC()
}

// modelFromSource builds model messages for the typed tables the way the
// processor's contract says, from pgx's typed reads of the source.
func modelFromSource(t *testing.T, conn *pgx.Conn) *Model {
	t.Helper()
	ctx := context.Background()
	m := New()
	for _, table := range []string{"typed", "typed_full"} {
		var oid uint32
		if err := conn.QueryRow(ctx, "SELECT $1::regclass::oid", table).Scan(&oid); err != nil {
			t.Fatal(err)
		}
		rows, err := conn.Query(ctx, `SELECT a.attnum, a.attname, format_type(a.atttypid, a.atttypmod), a.atttypid,
			COALESCE(a.attnum = ANY(i.indkey), false)
			FROM pg_attribute a LEFT JOIN pg_index i ON i.indrelid = a.attrelid AND i.indisprimary
			WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`, oid)
		if err != nil {
			t.Fatal(err)
		}
		var cols []any
		var key []string
		for rows.Next() {
			var num int16
			var name, typ string
			var typOid uint32
			var isKey bool
			if err := rows.Scan(&num, &name, &typ, &typOid, &isKey); err != nil {
				t.Fatal(err)
			}
			cols = append(cols, map[string]any{"num": int64(num), "name": name, "type": typ, "type_oid": int64(typOid), "key": isKey})
			if isKey {
				key = append(key, name)
			}
		}
		rows.Close()
		meta := func(op string, lsn wal.LSN) map[string]string {
			return map[string]string{MetaOperation: op, MetaRelationOid: strconv.Itoa(int(oid)), MetaSchema: "public", MetaTable: table,
				MetaLSN: lsn.String(), MetaDescriptorVersion: "0/10", MetaKey: strings.Join(key, ",")}
		}
		ev := Message{Meta: meta(OpSchema, 0x10), Payload: map[string]any{"columns": cols}}
		ev.Meta[MetaEvent] = EventAdded
		if err := m.Apply(ev); err != nil {
			t.Fatal(err)
		}
		var payloads []map[string]any
		if table == "typed_full" {
			rows, err := conn.Query(ctx, "SELECT a, t FROM typed_full")
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var a int32
				var txt *string
				if err := rows.Scan(&a, &txt); err != nil {
					t.Fatal(err)
				}
				p := map[string]any{"a": int64(a), "t": nil}
				if txt != nil {
					p["t"] = *txt
				}
				payloads = append(payloads, p)
			}
			rows.Close()
		} else {
			rows, err := conn.Query(ctx, `SELECT id, f4, f8, d, d::text, ts, ts::text, tstz, tstz::text, n::text, b, by, t FROM typed`)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var id int64
				var f4 float32
				var f8 float64
				var d pgtype.Date
				var ts pgtype.Timestamp
				var tstz pgtype.Timestamptz
				var dText, tsText, tstzText, n, txt string
				var b bool
				var by []byte
				if err := rows.Scan(&id, &f4, &f8, &d, &dText, &ts, &tsText, &tstz, &tstzText, &n, &b, &by, &txt); err != nil {
					t.Fatal(err)
				}
				num := any(json.Number(n))
				if n == "NaN" || strings.HasSuffix(n, "Infinity") {
					num = n
				}
				payloads = append(payloads, map[string]any{
					"id": id, "f4": floatValue(float64(f4)), "f8": floatValue(f8),
					"d":    timeValue(d.Time, d.InfinityModifier == pgtype.Finite, dText),
					"ts":   timeValue(ts.Time, ts.InfinityModifier == pgtype.Finite, tsText),
					"tstz": timeValue(tstz.Time, tstz.InfinityModifier == pgtype.Finite, tstzText),
					"n":    num, "b": b, "by": by, "t": txt,
				})
			}
			rows.Close()
		}
		for i, p := range payloads {
			if err := m.Apply(Message{Meta: meta(OpInsert, wal.LSN(0x100+i)), Payload: p}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return m
}

// TestCanonicalMatchesServer checks the model's own rendering of typed
// values (floats, dates, timestamps, numeric, bytea, bool) against the
// server's text output, through Compare.
func TestCanonicalMatchesServer(t *testing.T) {
	src := testrig.StartPostgres(t)
	src.Exec(t, typedTableSQL)
	conn := src.Connect(t)
	insertTypedRows(t, conn, 2000)
	// pgx's typed reads need a UTC session for timestamptz text to match.
	if _, err := conn.Exec(context.Background(), "SET TimeZone = 'UTC'; SET extra_float_digits = 1; SET DateStyle = 'ISO, MDY'"); err != nil {
		t.Fatal(err)
	}
	m := modelFromSource(t, conn)
	if err := m.Compare(context.Background(), conn); err != nil {
		t.Fatal(err)
	}

	// Differences are reported with the table, key, column and both values.
	src.Exec(t, "UPDATE typed SET t = 'changed' WHERE id = 3; DELETE FROM typed WHERE id = 4; INSERT INTO typed (id) VALUES (100000); DELETE FROM typed_full WHERE a = 2; CREATE TABLE extra (x int)")
	err := m.Compare(context.Background(), conn)
	if err == nil {
		t.Fatal("Compare found no difference")
	}
	for _, want := range []string{
		`public.typed: row (id="3") differs: t: source "changed", model "row 3 'q' \\"`,
		`public.typed: row (id="4") is in the model (x1) but not in the source`,
		`public.typed: row (id="100000") is in the source (x1) but not in the model`,
		`public.typed_full: 2 rows in the source, 3 in the model`,
		`table public.extra`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Compare's report lacks %q:\n%v", want, err)
		}
	}
}
