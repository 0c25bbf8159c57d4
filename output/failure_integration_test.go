package output_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/load"
	"github.com/walshadow/walshadow/internal/testrig"
)

// TestTableFailureIsolated: a table whose ClickHouse table cannot take a
// change (a column type set there by hand that cannot hold the value) is
// failed, reloaded and ends equal to the source, while another table
// keeps following without waiting; the session never stops.
func TestTableFailureIsolated(t *testing.T) {
	testTableFailureIsolated(t, newRig(t), nil)
}

// testTableFailureIsolated is TestTableFailureIsolated writing through r,
// into cluster when it is not nil (every node compared).
func testTableFailureIsolated(t *testing.T, r *rig, cluster *testrig.ClickHouseCluster) {
	r.src.Exec(t, `CREATE TABLE fl_bad (id int PRIMARY KEY, v int, t text);
		INSERT INTO fl_bad SELECT g, g, 'r' || g FROM generate_series(1, 500) g;
		CREATE TABLE fl_good (id int PRIMARY KEY, v int)`)
	logs := &logLines{}
	extra := ""
	if cluster != nil {
		extra = "cluster: " + cluster.Name
	}
	run := r.startLogged(t, extra, logs)
	r.waitLoadsDone(t, run, logs, 2, 2*time.Minute)
	badOid := r.relOid(t, "fl_bad")
	r.waitCH(t, run, liveCountSQL("public", "fl_bad"), "500", ddlWait)

	// By hand on ClickHouse: v can no longer hold the source's integers.
	r.ch.HTTPQuery(t, fmt.Sprintf("ALTER TABLE %s MODIFY COLUMN v Nullable(Int8)", chTable("public", "fl_bad")))
	r.src.Exec(t, `INSERT INTO fl_bad VALUES (1000, 100000, 'too wide'); UPDATE fl_bad SET t = 'after' WHERE id <= 50`)

	// fl_good keeps moving while fl_bad fails and reloads: each of its
	// rows reaches ClickHouse in turn.
	var worst time.Duration
	for i := 1; i <= 30; i++ {
		start := time.Now()
		r.src.Exec(t, fmt.Sprintf("INSERT INTO fl_good VALUES (%d, %d)", i, i))
		r.waitCH(t, run, fmt.Sprintf("SELECT count() FROM %s FINAL WHERE _is_deleted = 0 AND id = %d", chTable("public", "fl_good"), i), "1", ddlWait)
		worst = max(worst, time.Since(start))
		if i == 10 {
			r.src.Exec(t, `DELETE FROM fl_bad WHERE id BETWEEN 100 AND 120; INSERT INTO fl_bad VALUES (1001, 7, 'during')`)
		}
	}
	t.Logf("fl_good: the slowest of 30 single-row commits reached ClickHouse in %s while fl_bad failed and reloaded", worst)

	logs.waitLog(t, "public.fl_bad failed at ", ddlWait)
	logs.waitLog(t, "public.fl_bad is repaired", 2*time.Minute)
	r.src.Exec(t, `UPDATE fl_bad SET t = 'after repair' WHERE id = 1001`)
	r.waitCH(t, run, fmt.Sprintf("SELECT t FROM %s FINAL WHERE _is_deleted = 0 AND id = 1001", chTable("public", "fl_bad")), "after repair", ddlWait)
	run.stop(t)

	if cluster != nil {
		r.compareNodes(t, cluster)
	} else {
		r.compareAll(t)
	}
	r.assertNoLoadTables(t)
	e := r.ledgerEntry(t, badOid)
	if e.Phase != load.PhaseDone || e.FailedAt == 0 || !strings.Contains(e.Reason, "fl_bad") {
		t.Errorf("fl_bad's ledger entry after its repair: phase %s, failed at %s, reason %q; want done with the failure recorded", e.Phase, e.FailedAt, e.Reason)
	}
	if n := strings.Count(logs.String(), "public.fl_bad failed at "); n != 1 {
		t.Errorf("the failure is logged %d times, want once", n)
	}
	for _, stop := range []string{"restarting the walshadow session", "was not delivered"} {
		if strings.Contains(logs.String(), stop) {
			t.Errorf("the session stopped (%q in the log): one table's failure must not stop it", stop)
		}
	}
	if got := r.ch.HTTPQuery(t, fmt.Sprintf("SELECT type FROM system.columns WHERE database = 'walshadow_test' AND table = 'public.fl_bad' AND name = 'v'")); got != "Nullable(Int32)" {
		t.Errorf("fl_bad.v is %s on ClickHouse after the reload, want the mapping's Nullable(Int32)", got)
	}
}

// TestTableFailureStop: with on_error stop the output stops at the change
// instead (the whole session retries from its resume point), and writes
// nothing of it.
func TestTableFailureStop(t *testing.T) {
	r := newRig(t)
	r.src.Exec(t, `CREATE TABLE fs_bad (id int PRIMARY KEY, v int)`)
	logs := &logLines{}
	run := r.startLogged(t, `tables: { "public.fs_bad": { on_error: stop } }`, logs)
	r.src.Exec(t, `INSERT INTO fs_bad VALUES (1, 1)`)
	r.waitCH(t, run, liveCountSQL("public", "fs_bad"), "1", ddlWait)
	r.ch.HTTPQuery(t, fmt.Sprintf("ALTER TABLE %s MODIFY COLUMN v Nullable(Int8)", chTable("public", "fs_bad")))
	r.src.Exec(t, `INSERT INTO fs_bad VALUES (2, 100000)`)
	logs.waitLog(t, "on_error is stop", ddlWait)
	run.stop(t)
	if got := r.ch.HTTPQuery(t, liveCountSQL("public", "fs_bad")); got != "1" {
		t.Errorf("fs_bad holds %s rows after the refused change, want 1", got)
	}
	if strings.Contains(logs.String(), "fs_bad is repaired") {
		t.Errorf("a table with on_error stop was reloaded")
	}
}

// TestBrokenTableKeepsItsTable: a table no ClickHouse table can be agreed
// on any more (a column added under a name the configuration maps onto
// another column's) stops being written, but its ClickHouse table stays
// its own: the DROP of it applies the drop_strategy, and a new table of
// the same name, created in the DROP's transaction, replicates.
func TestBrokenTableKeepsItsTable(t *testing.T) {
	r := newRig(t)
	logs := &logLines{}
	run := r.startLogged(t, "drop_strategy: drop\ntables: { \"public.bk\": { column_names: { later: v } } }\n", logs)
	r.src.Exec(t, `CREATE TABLE bk (id int PRIMARY KEY, v int); INSERT INTO bk VALUES (1, 1)`)
	r.waitCH(t, run, liveCountSQL("public", "bk"), "1", ddlWait)
	r.src.Exec(t, "ALTER TABLE bk ADD COLUMN later int; INSERT INTO bk VALUES (2, 2, 2)")
	logs.waitLog(t, "public.bk cannot be replicated", ddlWait)
	// In one transaction: the new table is valid from its creation, the
	// drop from the commit; the descriptor log puts the drop first.
	r.src.Exec(t, `DROP TABLE bk; CREATE TABLE bk (a text, b int); INSERT INTO bk VALUES ('x', 1), ('x', 1), ('y', 2)`)
	r.waitCH(t, run, liveCountSQL("public", "bk"), "3", ddlWait)
	run.stop(t)
	r.compareAll(t)
}

// TestReloadInterruptedBeforeAgreement: a reload records its load in the
// ledger, then lets go of the table's agreement, then agrees on the
// load's delta table. A crash after the first step (the crash drill found
// it) left the load retrying forever ("agreed on the table, not on its
// load's delta table"). The next start finishes the step: the table is
// reloaded and ends equal to the source, rows moved meanwhile included.
func TestReloadInterruptedBeforeAgreement(t *testing.T) {
	r := newRig(t)
	run := r.start(t, "drop_strategy: drop\n")
	r.src.Exec(t, `CREATE TABLE ri (a int, b text); INSERT INTO ri SELECT g, 'v' || g FROM generate_series(1, 50) g`)
	r.waitCH(t, run, liveCountSQL("public", "ri"), "50", ddlWait)
	run.stop(t)

	interruptReload(t, r, "ri")
	// Meanwhile every row moves, some change, some go.
	r.src.Exec(t, `UPDATE ri SET b = b || 'x' WHERE a % 2 = 0`)
	r.src.Exec(t, `VACUUM FULL ri`)
	r.src.Exec(t, `DELETE FROM ri WHERE a > 45`)

	logs := &logLines{}
	run = r.startLogged(t, "drop_strategy: drop\n", logs)
	r.waitLoadsDone(t, run, logs, 1, 2*time.Minute)
	r.waitCH(t, run, liveCountSQL("public", "ri"), "45", ddlWait)
	if strings.Contains(logs.String(), "not on its load's delta table") {
		t.Errorf("the interrupted reload was retried against the old agreement:\n%s", tail(logs.String(), 3000))
	}
	run.stop(t)
	r.compareAll(t)
}

// TestReloadOverLeftoverDeltaTable: a load's delta table is named after its
// relation, so an earlier load that a crash, a discard or a table leaving
// the scope abandoned leaves a table under the name the next load's delta
// table takes, in whatever shape it had then. The kill test found one with
// a column of the type before an ALTER: the new load's first agreement
// reconciled against it, refused the table ("ClickHouse column has another
// type") and every later change of it failed the same way. The new load
// drops it and starts its delta table empty: the table is reloaded and ends
// equal to the source.
func TestReloadOverLeftoverDeltaTable(t *testing.T) {
	r := newRig(t)
	run := r.start(t, "drop_strategy: drop\n")
	r.src.Exec(t, `CREATE TABLE rd (a int PRIMARY KEY, b text); INSERT INTO rd SELECT g, 'v' || g FROM generate_series(1, 50) g`)
	r.waitCH(t, run, liveCountSQL("public", "rd"), "50", ddlWait)
	run.stop(t)

	// A reload interrupted before its agreement moved (as in
	// TestReloadInterruptedBeforeAgreement), over an abandoned delta table
	// whose column b has another type and which holds a row the source
	// never had.
	a, oid := interruptReload(t, r, "rd")
	tbl := a.Target.Table
	delta := clickhouse.Target{Database: a.Target.Database, Table: load.DeltaName(tbl, oid)}
	r.ch.HTTPQuery(t, fmt.Sprintf("CREATE TABLE %s AS %s", clickhouse.QuoteQualified(delta), clickhouse.QuoteQualified(a.Target)))
	r.ch.HTTPQuery(t, fmt.Sprintf("ALTER TABLE %s MODIFY COLUMN b Nullable(Int64)", clickhouse.QuoteQualified(delta)))
	r.ch.HTTPQuery(t, fmt.Sprintf("INSERT INTO %s (a, b, _lsn) VALUES (999, 7, 1)", clickhouse.QuoteQualified(delta)))
	r.src.Exec(t, `UPDATE rd SET b = b || 'x' WHERE a % 2 = 0; DELETE FROM rd WHERE a > 45`)

	logs := &logLines{}
	run = r.startLogged(t, "drop_strategy: drop\n", logs)
	r.waitLoadsDone(t, run, logs, 1, 2*time.Minute)
	r.waitCH(t, run, liveCountSQL("public", "rd"), "45", ddlWait)
	r.src.Exec(t, `INSERT INTO rd VALUES (100, 'after')`)
	r.waitCH(t, run, liveCountSQL("public", "rd"), "46", ddlWait)
	if s := logs.String(); strings.Contains(s, "cannot be replicated") || strings.Contains(s, "has another type") {
		t.Errorf("the leftover delta table refused the table:\n%s", tail(s, 3000))
	}
	run.stop(t)
	r.compareAll(t)
}

// interruptReload writes what planReload has written when a crash comes
// after its first step: the load of public.<table> recorded in the ledger,
// the table's agreement (returned, with the relation's oid) not yet let go.
func interruptReload(t *testing.T, r *rig, table string) (*clickhouse.Agreed, uint32) {
	t.Helper()
	oid := uint32(r.src.QueryInt(t, "SELECT 'public."+table+"'::regclass::oid::int8"))
	dir := filepath.Join(r.stateDir, "clickhouse")
	st, err := clickhouse.OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	a := st.Get(oid)
	if a == nil {
		t.Fatalf("public.%s has no agreement", table)
	}
	ledger, err := load.OpenLedger(dir)
	if err != nil {
		t.Fatal(err)
	}
	tbl := a.Target.Table
	if err := ledger.Put(load.Entry{Oid: oid, Schema: "public", Table: table, Mode: load.ModeCopy, Phase: load.PhaseLoading,
		Database: a.Target.Database, Target: tbl, Staging: load.StagingName(tbl, oid), Old: load.StaleName(tbl, oid),
		StaleDatabase: a.Target.Database, Stale: tbl, Reason: "changed at 0/0: the test's interrupted reload"}); err != nil {
		t.Fatal(err)
	}
	return a, oid
}
