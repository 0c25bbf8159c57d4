package output_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/load"
)

// TestLoadOnScopeChange: a table whose ClickHouse table stopped following
// it, or never did, is loaded when it starts being followed, and ends up
// equal to the source — never a silent gap:
//   - renamed out of the include patterns and back while running (its
//     changes in between reach ClickHouse through the reload);
//   - filled under an excluded name, then renamed into place;
//   - UNLOGGED at the first start, then made LOGGED (SET LOGGED rewrites
//     it: refilled from the rewrite's rows, no load);
//   - (renamed within the scope: no load; its table is renamed along);
//   - excluded by the configuration for one run, changed meanwhile, then
//     included again at the next start.
func TestLoadOnScopeChange(t *testing.T) {
	r := newRig(t)
	r.src.Exec(t, `CREATE TABLE sc_back (id int PRIMARY KEY, v text);
		INSERT INTO sc_back SELECT g, 'v' || g FROM generate_series(1, 2000) g;
		CREATE TABLE sc_fill_tmp (id int PRIMARY KEY, v text);
		INSERT INTO sc_fill_tmp SELECT g, 'f' || g FROM generate_series(1, 3000) g;
		CREATE UNLOGGED TABLE sc_unlogged (id int PRIMARY KEY, v text);
		INSERT INTO sc_unlogged SELECT g, 'u' || g FROM generate_series(1, 500) g`)
	const cfg = `initial_load: { mode: copy }
exclude: [ "public.*_tmp" ]`
	logs := &logLines{}
	run := r.startLogged(t, cfg, logs)
	r.waitLoadsDone(t, run, logs, 1, 2*time.Minute)
	backOid := r.relOid(t, "sc_back")

	// Out of scope by a rename: changes made meanwhile are not streamed.
	r.src.Exec(t, `ALTER TABLE sc_back RENAME TO sc_back_tmp`)
	logs.waitLog(t, "keeps its rows but no longer follows the source", ddlWait)
	r.src.Exec(t, `UPDATE sc_back_tmp SET v = 'while out' WHERE id % 3 = 0;
		DELETE FROM sc_back_tmp WHERE id % 7 = 0;
		INSERT INTO sc_back_tmp SELECT g, 'new' FROM generate_series(3001, 3100) g`)
	// Back in scope: reloaded.
	r.src.Exec(t, `ALTER TABLE sc_back_tmp RENAME TO sc_back;
		UPDATE sc_back SET v = 'after return' WHERE id % 5 = 0`)
	// Filled under an excluded name, renamed into place.
	r.src.Exec(t, `ALTER TABLE sc_fill_tmp RENAME TO sc_fill;
		INSERT INTO sc_fill VALUES (5000, 'after rename');
		DELETE FROM sc_fill WHERE id <= 10`)
	// UNLOGGED rows are not in the WAL, but SET LOGGED rewrites every
	// row into a logged file: the table is refilled from it.
	r.src.Exec(t, `ALTER TABLE sc_unlogged SET LOGGED;
		UPDATE sc_unlogged SET v = 'logged' WHERE id <= 20`)
	logs.waitLog(t, "sc_back returned to the scope", ddlWait)
	logs.waitLog(t, "sc_fill entered the scope", ddlWait)
	logs.waitLog(t, "sc_unlogged was rewritten at", ddlWait)
	r.waitLoadsDone(t, run, logs, 2, 2*time.Minute)
	// A rename within the scope loads nothing.
	r.src.Exec(t, `ALTER TABLE sc_fill RENAME TO sc_fill_renamed;
		INSERT INTO sc_fill_renamed VALUES (5001, 'after second rename')`)
	r.src.Exec(t, "CREATE TABLE sc_marker (id int PRIMARY KEY); INSERT INTO sc_marker VALUES (1)")
	r.waitCH(t, run, liveCountSQL("public", "sc_marker"), "1", ddlWait)
	run.stop(t)
	r.compareAll(t)
	r.assertNoLoadTables(t)
	if strings.Contains(logs.String(), "sc_fill_renamed entered") || strings.Contains(logs.String(), "sc_fill_renamed returned") {
		t.Errorf("a rename within the scope reloaded the table")
	}
	// Its ClickHouse table follows the name (as at any shape change).
	if got := r.ch.HTTPQuery(t, fmt.Sprintf("SELECT count() FROM %s FINAL WHERE id = 5001 AND _is_deleted = 0", chTable("public", "sc_fill_renamed"))); got != "1" {
		t.Errorf("the row inserted after a rename within the scope: %s in %s, want 1", got, chTable("public", "sc_fill_renamed"))
	}
	e := r.ledgerEntry(t, backOid)
	if e.Stale != chTableName("public", "sc_back") {
		t.Errorf("sc_back's reload superseded %q, want its own table", e.Stale)
	}

	// Excluded by the configuration for one run, changed meanwhile.
	logs2 := &logLines{}
	run = r.startLogged(t, `initial_load: { mode: copy }
exclude: [ "public.*_tmp", "public.sc_back" ]`, logs2)
	logs2.waitLog(t, "sc_back (now public.sc_back) is not in the configured scope", ddlWait)
	r.src.Exec(t, `UPDATE sc_back SET v = 'while excluded' WHERE id % 4 = 0;
		DELETE FROM sc_back WHERE id % 11 = 0;
		INSERT INTO sc_marker VALUES (2)`)
	r.waitCH(t, run, liveCountSQL("public", "sc_marker"), "2", ddlWait)
	run.stop(t)
	if got := r.ch.HTTPQuery(t, fmt.Sprintf("SELECT count() FROM %s FINAL WHERE v = 'while excluded' AND _is_deleted = 0", chTable("public", "sc_back"))); got != "0" {
		t.Errorf("%s rows of an excluded table's changes reached ClickHouse", got)
	}
	logs3 := &logLines{}
	run = r.startLogged(t, cfg, logs3)
	logs3.waitLog(t, "sc_back returned to the configured scope", ddlWait)
	r.waitLoadsDone(t, run, logs3, 2, 2*time.Minute)
	r.src.Exec(t, "INSERT INTO sc_marker VALUES (3)")
	r.waitCH(t, run, liveCountSQL("public", "sc_marker"), "3", ddlWait)
	run.stop(t)
	r.compareAll(t)
	r.assertNoLoadTables(t)
	if !strings.Contains(logs3.String(), "the earlier table of it that had stopped following the source") {
		t.Errorf("no log line for the stale table's drop:\n%s", tail(logs3.String(), 3000))
	}
}

// ledgerEntry is oid's entry in the stopped output's load ledger.
func (r *rig) ledgerEntry(t *testing.T, oid uint32) load.Entry {
	t.Helper()
	l, err := load.ReadLedger(filepath.Join(r.stateDir, "clickhouse"))
	if err != nil {
		t.Fatal(err)
	}
	e, ok := l.Get(oid)
	if !ok {
		t.Fatalf("no load of oid %d in the ledger", oid)
	}
	return e
}

// TestScopeReturnWithoutLoad: with initial_load mode none a table back in
// scope is not loaded; it follows again from its return, and the log says
// what its ClickHouse table misses.
func TestScopeReturnWithoutLoad(t *testing.T) {
	r := newRig(t)
	r.src.Exec(t, `CREATE TABLE sn_t (id int PRIMARY KEY, v text)`)
	const cfg = `initial_load: { mode: none }
exclude: [ "public.*_tmp" ]`
	logs := &logLines{}
	run := r.startLogged(t, cfg, logs)
	for _, sql := range []string{ // one transaction each
		`INSERT INTO sn_t SELECT g, 'v' FROM generate_series(1, 10) g`,
		`ALTER TABLE sn_t RENAME TO sn_t_tmp`,
		`INSERT INTO sn_t_tmp VALUES (11, 'missed')`,
		`ALTER TABLE sn_t_tmp RENAME TO sn_t`,
		`INSERT INTO sn_t VALUES (12, 'after')`,
	} {
		r.src.Exec(t, sql)
	}
	logs.waitLog(t, "sn_t returned to the scope", ddlWait)
	r.waitCH(t, run, liveCountSQL("public", "sn_t"), "11", ddlWait)
	run.stop(t)
	if !strings.Contains(logs.String(), "misses the changes made while it was not followed") {
		t.Errorf("no warning naming the missed changes:\n%s", tail(logs.String(), 3000))
	}
	if got := r.ch.HTTPQuery(t, fmt.Sprintf("SELECT count() FROM %s FINAL WHERE id = 11", chTable("public", "sn_t"))); got != "0" {
		t.Errorf("the row inserted while out of scope reached ClickHouse without a load: %s", got)
	}
	if a := r.agreement(t, r.relOid(t, "sn_t")); a.Left {
		t.Errorf("the agreement of a table followed again is still Left")
	}
}

// agreement is oid's agreement in the stopped output's store.
func (r *rig) agreement(t *testing.T, oid uint32) *clickhouse.Agreed {
	t.Helper()
	list, err := clickhouse.ReadAgreed(filepath.Join(r.stateDir, "clickhouse"))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range list {
		if a.Oid == oid {
			return a
		}
	}
	t.Fatalf("no agreement on oid %d", oid)
	return nil
}
