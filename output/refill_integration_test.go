package output_test

import (
	"os"
	"os/user"
	"strconv"
	"strings"
	"testing"
	"time"
)

// postgresOwnedDir is a new directory the source's OS user owns (a
// tablespace location).
func postgresOwnedDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "walshadow-ts-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if u, err := user.Lookup("postgres"); err == nil && os.Geteuid() == 0 {
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestRewriteRefillsWithoutReload: an ALTER TABLE that rewrites a table
// writes every row into the table's new file as inserts of its
// transaction; the table is rebuilt empty at the event and refilled from
// them instead of being reloaded from the source: a table without a key
// (all its physical identities change), a key column retyped with USING
// (every key changes), a column retyped to text (ClickHouse's conversion
// is not PostgreSQL's), a change log; with changes of the same
// transaction before and after the rewrite. A file filled by copying
// pages (SET TABLESPACE away and back in the same transaction as a schema
// change) is no rewrite: that table is reloaded. Every table ends equal.
func TestRewriteRefillsWithoutReload(t *testing.T) {
	r := newRig(t)
	r.src.Exec(t, "CREATE TABLESPACE rw_space LOCATION '"+postgresOwnedDir(t)+"'")
	r.src.Exec(t, `CREATE TABLE rw_keyless (a int, t text);
		INSERT INTO rw_keyless SELECT g % 50, 'k' || g FROM generate_series(1, 300) g;
		CREATE TABLE rw_key (id int PRIMARY KEY, v text);
		INSERT INTO rw_key SELECT g, 'v' || g FROM generate_series(1, 300) g;
		CREATE TABLE rw_str (id int PRIMARY KEY, n int, big text);
		INSERT INTO rw_str SELECT g, g * 7, CASE WHEN g % 10 = 0 THEN (SELECT string_agg(md5(g::text || x::text), '') FROM generate_series(1, 80) x) END
			FROM generate_series(1, 300) g;
		CREATE TABLE rw_log (id int PRIMARY KEY, v int);
		INSERT INTO rw_log SELECT g, g FROM generate_series(1, 100) g;
		CREATE TABLE rw_copied (a int, t text);
		INSERT INTO rw_copied SELECT g, 'c' || g FROM generate_series(1, 200) g`)
	logs := &logLines{}
	run := r.startLogged(t, `tables: { "public.rw_log": { change_log: true } }`, logs)
	r.waitLoadsDone(t, run, logs, 5, 3*time.Minute)

	r.src.Exec(t, `BEGIN;
		INSERT INTO rw_keyless VALUES (1000, 'before the rewrite'); DELETE FROM rw_keyless WHERE a <= 3;
		UPDATE rw_keyless SET t = t || '!' WHERE a = 4;
		ALTER TABLE rw_keyless ALTER COLUMN a TYPE bigint USING a * 10;
		UPDATE rw_keyless SET t = 'after the rewrite' WHERE a = 10000;
		INSERT INTO rw_keyless VALUES (7, 'after');
		COMMIT`)
	r.src.Exec(t, `BEGIN;
		INSERT INTO rw_key VALUES (1000, 'before'); DELETE FROM rw_key WHERE id <= 5; UPDATE rw_key SET v = 'upd' WHERE id = 6;
		ALTER TABLE rw_key ALTER COLUMN id TYPE bigint USING id + 1000000;
		UPDATE rw_key SET v = 'after' WHERE id = 1000006; INSERT INTO rw_key VALUES (6, 'new six');
		COMMIT`)
	r.src.Exec(t, `BEGIN; UPDATE rw_str SET n = -n WHERE id <= 10;
		ALTER TABLE rw_str ALTER COLUMN n TYPE text USING 'n=' || n;
		UPDATE rw_str SET n = n || '+' WHERE id BETWEEN 20 AND 30;
		COMMIT`)
	r.src.Exec(t, `ALTER TABLE rw_log ALTER COLUMN v TYPE text USING (v * 2)::text; UPDATE rw_log SET v = 'x' WHERE id = 1`)
	r.src.Exec(t, `BEGIN; ALTER TABLE rw_copied ADD COLUMN extra int;
		ALTER TABLE rw_copied SET TABLESPACE rw_space; ALTER TABLE rw_copied SET TABLESPACE pg_default;
		COMMIT`)
	// Changes after: the refilled tables follow on.
	r.src.Exec(t, `UPDATE rw_keyless SET t = 'later' WHERE a = 20; DELETE FROM rw_keyless WHERE a = 30;
		UPDATE rw_key SET v = 'later' WHERE id = 1000100; DELETE FROM rw_key WHERE id = 1000101;
		UPDATE rw_str SET big = NULL WHERE id = 40; UPDATE rw_str SET n = 'z' WHERE id = 50;
		UPDATE rw_copied SET extra = a WHERE a <= 20;
		CREATE TABLE rw_marker (id int PRIMARY KEY); INSERT INTO rw_marker VALUES (1)`)
	r.waitCH(t, run, liveCountSQL("public", "rw_marker"), "1", 2*time.Minute)
	entries := r.waitLoadsDone(t, run, logs, 5, 2*time.Minute)
	run.stop(t)

	r.compareAll(t)
	out := logs.String()
	for _, table := range []string{"rw_keyless", "rw_key", "rw_str", "rw_log"} {
		if !strings.Contains(out, "public."+table+" was rewritten at ") {
			t.Errorf("public.%s: no refill logged\n%s", table, tail(out, 3000))
		}
	}
	if strings.Contains(out, "public.rw_copied was rewritten at ") {
		t.Errorf("public.rw_copied, whose file was filled by copying pages, was refilled from a rewrite that wrote no rows")
	}
	reloaded := map[string]bool{}
	for _, e := range entries {
		if e.Reason != "" {
			reloaded[e.Table] = true
		}
	}
	for _, table := range []string{"rw_keyless", "rw_key", "rw_str", "rw_log"} {
		if reloaded[table] {
			t.Errorf("public.%s was reloaded from the source; its rewrite should have refilled it", table)
		}
	}
	if !reloaded["rw_copied"] {
		t.Errorf("public.rw_copied was not reloaded: a file filled by copying pages holds no rows in the WAL")
	}
	r.assertNoLoadTables(t)
	if n := r.ch.HTTPQuery(t, "SELECT count() FROM system.tables WHERE database = 'walshadow_test' AND (name LIKE '%__wsrefill_%' OR name LIKE '%__wsretired_%')"); n != "0" {
		t.Errorf("%s refill side tables left on ClickHouse", n)
	}
}
