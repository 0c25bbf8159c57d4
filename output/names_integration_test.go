package output_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walshadow/walshadow/internal/clickhouse"
)

// Hostile names: what PostgreSQL accepts as an identifier, built to break
// out of a quoted identifier, to confuse a client that parses SQL, to
// collide after escaping or with walshadow's own columns, or to exceed
// ClickHouse's file names.
var (
	hnKey       = "k`ey (pk)"
	hnBreakout  = "c`)` String, x"
	hnInjection = "new`col; DROP TABLE canary.keep; --"
	hnBacktick  = "to`"
	hnTab       = "tab\tcol"
	hnNewline   = "nl\ncol"
	hnReserved  = "select"
	hnUnicode   = "é名字"
	hnLong      = strings.Repeat("名", 21) // 63 bytes, 189 once escaped
	hnToast     = "big`toast"
	hnTable1    = "back`tick (t); DROP DATABASE canary; --"
	hnSchema2   = `we.ird sch"ema`
	hnTable2    = "spaced table.name"
	hnLongNS    = strings.Repeat("ß", 31) + "x"  // 63 bytes
	hnLongTable = strings.Repeat("ü", 31) + "yz" // 64 bytes: truncated to 63 by PostgreSQL
	hnRenamed   = "re`named (x)"
)

func pgIdent(parts ...string) string { return pgx.Identifier(parts).Sanitize() }

// TestHostileNames: tables and columns under every kind of name
// PostgreSQL accepts replicate under their own names where ClickHouse can
// hold them (any byte, escaped), and under a documented mapping where it
// cannot (walshadow's synthetic columns, a NULL flag's name, an array's
// dot, a name too long for ClickHouse's files): loaded, streamed, through
// ADD/RENAME COLUMN and RENAME TABLE, unchanged TOAST read back by a
// hostile key, a table named like another's rekey side table while that
// one is rekeyed. Every table ends equal, no table fails or is loaded
// twice, the session never stops, and a canary database on ClickHouse
// is untouched.
func TestHostileNames(t *testing.T) {
	r := newRig(t)
	r.ch.HTTPQuery(t, "CREATE DATABASE canary")
	r.ch.HTTPQuery(t, "CREATE TABLE canary.keep (x UInt8) ENGINE = MergeTree ORDER BY x")
	r.ch.HTTPQuery(t, "INSERT INTO canary.keep VALUES (42)")

	t1 := pgIdent("public", hnTable1)
	t2 := pgIdent(hnSchema2, hnTable2)
	big := func(seed string) string {
		// Over 2 kB and incompressible: stored out of line (TOAST).
		return fmt.Sprintf("(SELECT string_agg(md5(%s || g::text), '') FROM generate_series(1, 100) g)", seed)
	}
	r.src.Exec(t, fmt.Sprintf(`CREATE TABLE %[1]s (%[2]s int PRIMARY KEY, %[3]s text, %[4]s text, %[5]s int, %[6]s text,
			%[7]s text, %[8]s text, %[9]s text, %[10]s int, %[11]s text);
		INSERT INTO %[1]s SELECT g, 'b' || g, 'i' || g, g, 't' || g, 'n' || g, 's' || g, 'u' || g, g, %[12]s
			FROM generate_series(1, 50) g`,
		t1, pgIdent(hnKey), pgIdent(hnBreakout), pgIdent(hnInjection), pgIdent(hnBacktick), pgIdent(hnTab),
		pgIdent(hnNewline), pgIdent(hnReserved), pgIdent(hnUnicode), pgIdent(hnLong), pgIdent(hnToast), big("g::text")))
	// Keyless: keyed by physical identity, whose synthetic columns
	// (_filenode, _block, _offset) are also source columns here.
	r.src.Exec(t, fmt.Sprintf(`CREATE SCHEMA %[1]s;
		CREATE TABLE %[2]s (_lsn int, _xid text, _is_deleted bool, _filenode int, _block int, _offset int, _commit_ts_us bigint,
			_seq int, x int[], x__is_null text, "n.a" int[], "n.b" int[]);
		INSERT INTO %[2]s SELECT g, 'x' || g, g %% 2 = 0, g, g, g, g, g,
			CASE WHEN g %% 3 = 0 THEN NULL WHEN g %% 3 = 1 THEN '{}' ELSE ARRAY[g, NULL] END, 'f' || g,
			ARRAY[g, g + 1, g + 2], ARRAY[g] FROM generate_series(1, 30) g`, pgIdent(hnSchema2), t2))
	// Two schema.table pairs that would collide if the dot were not escaped.
	r.src.Exec(t, `CREATE SCHEMA "a.b"; CREATE SCHEMA a;
		CREATE TABLE "a.b".c (id int PRIMARY KEY, v text); CREATE TABLE a."b.c" (id int PRIMARY KEY, v text);
		INSERT INTO "a.b".c VALUES (1, 'a.b / c'); INSERT INTO a."b.c" VALUES (1, 'a / b.c')`)
	r.src.Exec(t, fmt.Sprintf(`CREATE SCHEMA %[1]s; CREATE TABLE %[1]s.%[2]s (id int PRIMARY KEY, v text);
		INSERT INTO %[1]s.%[2]s SELECT g, 'long ' || g FROM generate_series(1, 10) g`, pgIdent(hnLongNS), pgIdent(hnLongTable)))
	r.src.Exec(t, `CREATE TABLE public.ren (id int PRIMARY KEY, v text, w int[]);
		INSERT INTO public.ren VALUES (1, 'one', '{1}');
		CREATE TABLE public.cfg (id int PRIMARY KEY, _xid text); INSERT INTO public.cfg VALUES (1, 'configured');
		CREATE TABLE public.hn_orders (id int NOT NULL, v text); INSERT INTO public.hn_orders SELECT g, 'o' || g FROM generate_series(1, 20) g;
		CREATE TABLE public."hn_orders__rekey" (id int PRIMARY KEY, v text); INSERT INTO public."hn_orders__rekey" VALUES (1, 'not a side table')`)

	logs := &logLines{}
	run := r.startLogged(t, `tables: { "public.cfg": { column_names: { "_xid": "user_xid" } } }`, logs)
	r.waitLoadsDone(t, run, logs, 9, 3*time.Minute)

	// Streamed changes: updates that leave the TOAST column unchanged
	// (read back by the hostile key), a key change, deletes, inserts.
	r.src.Exec(t, fmt.Sprintf(`UPDATE %[1]s SET %[2]s = 'updated' WHERE %[3]s <= 20;
		UPDATE %[1]s SET %[3]s = %[3]s + 1000 WHERE %[3]s = 21;
		DELETE FROM %[1]s WHERE %[3]s BETWEEN 30 AND 35;
		INSERT INTO %[1]s SELECT g, 'b', 'i', g, 't', 'n', 's', 'u', g, %[4]s FROM generate_series(100, 120) g;
		UPDATE %[1]s SET %[5]s = %[5]s || ' again' WHERE %[3]s BETWEEN 100 AND 105`,
		t1, pgIdent(hnBreakout), pgIdent(hnKey), big("'s' || g"), pgIdent(hnTab)))
	r.src.Exec(t, fmt.Sprintf(`UPDATE %[1]s SET _xid = 'upd', "n.a" = ARRAY[1], "n.b" = ARRAY[1, 2, 3, 4] WHERE _lsn <= 10;
		UPDATE %[1]s SET x = NULL WHERE _lsn BETWEEN 11 AND 14; UPDATE %[1]s SET x = '{}' WHERE _lsn = 15;
		DELETE FROM %[1]s WHERE _lsn > 25;
		INSERT INTO %[1]s (_lsn, x, "n.a", "n.b") VALUES (100, ARRAY[7, 8, 9], '{}', ARRAY[1, 2])`, t2))
	r.src.Exec(t, `INSERT INTO "a.b".c VALUES (2, 'streamed'); INSERT INTO a."b.c" VALUES (2, 'streamed');
		UPDATE public.cfg SET _xid = 'streamed'`)
	r.src.Exec(t, fmt.Sprintf(`UPDATE %[1]s.%[2]s SET v = 'updated' WHERE id <= 5`, pgIdent(hnLongNS), pgIdent(hnLongTable)))

	// DDL: columns added under hostile names (one colliding with the
	// mapped name of _lsn, one a dotted array added after its siblings),
	// renames onto walshadow's names and a dotted array name, a table
	// renamed to a hostile name.
	r.src.Exec(t, fmt.Sprintf(`ALTER TABLE %[1]s ADD COLUMN %[2]s text DEFAULT 'late`+"`"+`default';
		ALTER TABLE %[3]s ADD COLUMN _lsn__pg int; ALTER TABLE %[3]s ADD COLUMN "n.c" int[] DEFAULT '{5,6,7}';
		ALTER TABLE public.ren RENAME COLUMN v TO _lsn; ALTER TABLE public.ren RENAME COLUMN w TO "w.x";
		ALTER TABLE public.ren RENAME TO %[4]s;
		ALTER TABLE public.hn_orders ADD PRIMARY KEY (id)`,
		t1, pgIdent("late`col (added)"), t2, pgIdent(hnRenamed)))
	r.src.Exec(t, fmt.Sprintf(`UPDATE %[1]s SET %[2]s = 'after ddl' WHERE %[3]s = 1;
		INSERT INTO %[4]s (_lsn, _lsn__pg, "n.a", "n.b", "n.c") VALUES (200, 2, ARRAY[1], ARRAY[1, 2], ARRAY[3]);
		UPDATE %[4]s SET _lsn__pg = 1 WHERE _lsn = 1;
		INSERT INTO %[5]s VALUES (2, 'two', '{2, 2}'); UPDATE %[5]s SET _lsn = 'one!' WHERE id = 1;
		CREATE TABLE public.marker (id int PRIMARY KEY); INSERT INTO public.marker VALUES (1)`,
		t1, pgIdent("late`col (added)"), pgIdent(hnKey), t2, pgIdent("public", hnRenamed)))
	r.waitCH(t, run, liveCountSQL("public", "marker"), "1", 2*time.Minute)
	run.stop(t)

	r.compareIn(t, "public", hnSchema2, "a.b", "a", hnLongNS)
	out := logs.String()
	for _, bad := range []string{" failed at ", "failed (attempt", "cannot be replicated", "restarting the walshadow session", "was not delivered"} {
		if strings.Contains(out, bad) {
			t.Errorf("%q in the log: a table failed, a load was retried or the session stopped\n%s", bad, tail(out, 4000))
		}
	}
	entries := r.waitLoadsDone(t, run, logs, 9, time.Minute)
	for _, e := range entries {
		if e.Attempt > 1 || e.FailedAt != 0 || e.Reason != "" {
			t.Errorf("%s.%s: loaded at attempt %d (failed at %s, reason %q): want one load", e.Schema, e.Table, e.Attempt, e.FailedAt, e.Reason)
		}
	}
	if got := r.ch.HTTPQuery(t, "SELECT groupArray(x) FROM canary.keep"); got != "[42]" {
		t.Errorf("the canary table holds %s, want [42]", got)
	}

	// The names as ClickHouse holds them: the source's own where it can,
	// the documented mapping where it cannot.
	target := func(schema, table string) string {
		tt := clickhouse.DefaultTarget("walshadow_test", schema, table)
		return "database = " + clickhouse.QuoteString(tt.Database) + " AND table = " + clickhouse.QuoteString(tt.Table)
	}
	for _, want := range []string{hnKey, hnBreakout, hnInjection, hnBacktick, hnTab, hnNewline, hnReserved, hnUnicode, hnLong, hnToast, "late`col (added)"} {
		if got := r.ch.HTTPQuery(t, "SELECT count() FROM system.columns WHERE "+target("public", hnTable1)+" AND name = "+clickhouse.QuoteString(want)); got != "1" {
			t.Errorf("ClickHouse column %q of %s: %s found, want 1", want, t1, got)
		}
	}
	columns := func(schema, table string) string {
		return r.ch.HTTPQuery(t, "SELECT groupArray(name) FROM system.columns WHERE "+target(schema, table)+" FORMAT TSV")
	}
	// Walshadow's names taken by source columns land with __pg; x's NULL
	// flag takes x__is_null, so the source's x__is_null lands apart; the
	// dotted arrays are not one Nested structure; _lsn__pg added later
	// finds its name taken by _lsn's.
	wantT2 := "['_lsn__pg','_xid__pg','_is_deleted__pg','_filenode__pg','_block__pg','_offset__pg','_commit_ts_us__pg','_seq__pg'," +
		"'x','x__is_null','x__is_null__pg','n%2Ea','n%2Ea__is_null','n%2Eb','n%2Eb__is_null'," +
		"'_lsn','_xid','_commit_ts_us','_is_deleted','_filenode','_block','_offset','_lsn__pg__pg','n%2Ec','n%2Ec__is_null']"
	if got := columns(hnSchema2, hnTable2); got != wantT2 {
		t.Errorf("%s's ClickHouse columns:\n got %s\nwant %s", t2, got, wantT2)
	}
	if got := columns("public", hnRenamed); !strings.Contains(got, "'v'") || !strings.Contains(got, "'w'") {
		t.Errorf("renamed onto _lsn and w.x: ClickHouse keeps v and w (18.16 has no RENAME COLUMN), got %s", got)
	}
	if got := columns("public", "cfg"); !strings.Contains(got, "'user_xid'") {
		t.Errorf("column_names maps _xid to user_xid: got %s", got)
	}
}
