package output_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestKeylessByPhysicalIdentity: tables without a replica identity key
// (DEFAULT without a primary key, NOTHING, FULL) replicate exactly,
// UPDATE and DELETE included, identical duplicate rows included, keyed in
// ClickHouse by each row's physical identity: rows loaded at the start,
// HOT and non-HOT updates, an update leaving a TOASTed value unchanged,
// deletes of one of two identical rows, TRUNCATE, VACUUM FULL and CLUSTER
// (which move every tuple without row records: reloaded).
func TestKeylessByPhysicalIdentity(t *testing.T) {
	r := newRig(t)
	r.src.Exec(t, `CREATE TABLE kl_default (a int, b text);
		INSERT INTO kl_default SELECT g % 20, 'pre' FROM generate_series(1, 300) g;
		CREATE TABLE kl_nothing (a int, b text);
		ALTER TABLE kl_nothing REPLICA IDENTITY NOTHING;
		CREATE TABLE kl_full (a int, big text);
		ALTER TABLE kl_full REPLICA IDENTITY FULL;
		CREATE INDEX kl_full_a ON kl_full (a)`)
	logs := &logLines{}
	run := r.startLogged(t, "", logs)
	r.waitLoadsDone(t, run, logs, 3, 2*time.Minute)
	r.src.Exec(t, `INSERT INTO kl_nothing SELECT g % 10, 'x' FROM generate_series(1, 200) g;
		INSERT INTO kl_full SELECT g, repeat(md5(g::text), 400) FROM generate_series(1, 30) g;
		INSERT INTO kl_default VALUES (1, 'dup'), (1, 'dup'), (1, 'dup')`)
	r.src.Exec(t, `UPDATE kl_default SET b = 'upd' WHERE a = 3;
		DELETE FROM kl_default WHERE ctid = (SELECT min(ctid) FROM kl_default WHERE b = 'dup');
		UPDATE kl_nothing SET b = 'y' WHERE a < 4;
		DELETE FROM kl_nothing WHERE a = 9;
		UPDATE kl_full SET a = a + 1000 WHERE a <= 10`) // big unchanged: TOAST left out
	r.src.Exec(t, `BEGIN; UPDATE kl_full SET a = a + 1 WHERE a > 1000; DELETE FROM kl_full WHERE a = 1005; COMMIT`)
	r.src.Exec(t, `VACUUM FULL kl_nothing`)
	r.src.Exec(t, `UPDATE kl_nothing SET b = 'after vacuum' WHERE a = 5; INSERT INTO kl_nothing VALUES (77, 'after vacuum')`)
	r.src.Exec(t, `CLUSTER kl_full USING kl_full_a`)
	r.src.Exec(t, `DELETE FROM kl_full WHERE a = 20; UPDATE kl_full SET big = 'small' WHERE a = 21`)
	r.src.Exec(t, `TRUNCATE kl_default; INSERT INTO kl_default VALUES (5, 'after truncate'), (5, 'after truncate')`)
	r.src.Exec(t, `UPDATE kl_default SET b = 'last' WHERE ctid = (SELECT min(ctid) FROM kl_default)`)
	r.src.Exec(t, "CREATE TABLE kl_marker (id int PRIMARY KEY); INSERT INTO kl_marker VALUES (1)")
	r.waitCH(t, run, liveCountSQL("public", "kl_marker"), "1", ddlWait)
	r.waitLoadsDone(t, run, logs, 3, 2*time.Minute)
	run.stop(t)

	r.compareAll(t)
	r.assertNoLoadTables(t)
	if got := r.ch.HTTPQuery(t, "SELECT sorting_key FROM system.tables WHERE database = 'walshadow_test' AND name = 'public.kl_nothing'"); got != "_filenode, _block, _offset" {
		t.Errorf("kl_nothing is ordered by %q, want the physical identity", got)
	}
	for _, bad := range []string{"restarting the walshadow session", "was not delivered", "failed at"} {
		if strings.Contains(logs.String(), bad) {
			t.Errorf("%q in the log:\n%s", bad, tail(logs.String(), 3000))
		}
	}
	for _, tbl := range []string{"kl_nothing", "kl_full"} {
		if !strings.Contains(logs.String(), fmt.Sprintf("public.%s changed at", tbl)) {
			t.Errorf("%s was not reloaded after its rows moved", tbl)
		}
	}
}

// TestTableWithoutColumns: CREATE TABLE t () holds rows (INSERT DEFAULT
// VALUES) that only their count and physical identity tell apart; they
// replicate, deletes included, and so does a column added later.
func TestTableWithoutColumns(t *testing.T) {
	r := newRig(t)
	r.src.Exec(t, `CREATE TABLE nc_before (); INSERT INTO nc_before DEFAULT VALUES; INSERT INTO nc_before DEFAULT VALUES`)
	run := r.start(t, "")
	r.src.Exec(t, `CREATE TABLE nc (); INSERT INTO nc DEFAULT VALUES; INSERT INTO nc DEFAULT VALUES; INSERT INTO nc DEFAULT VALUES;
		DELETE FROM nc WHERE ctid = '(0,2)'; INSERT INTO nc_before DEFAULT VALUES`)
	r.waitCH(t, run, liveCountSQL("public", "nc"), "2", ddlWait)
	r.waitCH(t, run, liveCountSQL("public", "nc_before"), "3", ddlWait)
	r.src.Exec(t, `ALTER TABLE nc ADD COLUMN a int; INSERT INTO nc VALUES (7)`)
	r.waitCH(t, run, liveCountSQL("public", "nc"), "3", ddlWait)
	run.stop(t)
	r.compareAll(t)
}
