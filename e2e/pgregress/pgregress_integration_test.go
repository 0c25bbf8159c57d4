// Package pgregress_test runs PostgreSQL 15's own regression suite
// (parallel_schedule, through pg_regress --use-existing) against a source
// whose database regression walshadow follows into ClickHouse, then
// checks that the session never restarted after its first start and that
// every permanent ordinary table the suite left behind equals its
// ClickHouse table, value by value. The suite's own test failures do not
// matter: they are differences of this installation from the expected
// outputs, not of ClickHouse from the source.
//
// scripts/pgregress.sh prepares the suite once (apt-get source
// postgresql-15, regress.so built with PGXS, pg_regress from
// postgresql-server-dev-15).
//
//	go test -count=1 -v -timeout 30m ./e2e/pgregress/
package pgregress_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	// The none buffer and the other core components a full config names.
	_ "github.com/redpanda-data/benthos/v4/public/components/io"
	_ "github.com/redpanda-data/benthos/v4/public/components/pure"

	_ "github.com/walshadow/walshadow/input"
	_ "github.com/walshadow/walshadow/output"
	_ "github.com/walshadow/walshadow/processor"

	"github.com/jackc/pgx/v5"

	"github.com/walshadow/walshadow/e2e/internal/catchup"
	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/load"
	"github.com/walshadow/walshadow/internal/testrig"
)

func TestMain(m *testing.M) {
	// A child started by testrig.StartChild runs the pipeline and exits.
	testrig.RunChildIfRequested()
	os.Exit(m.Run())
}

const (
	// regressionDB is the database pg_regress runs the suite in and
	// walshadow follows.
	regressionDB = "regression"
	// chDatabase is the ClickHouse database the pipeline writes to.
	chDatabase = "walshadow_pgregress"
	slotName   = "walshadow_pgregress"
	// markerSchema holds the table the catch-up marker commits to, made
	// after the suite so it changes nothing the suite sees.
	markerSchema        = "walshadow_pgregress"
	markerSchemaLiteral = "'" + markerSchema + "'"
	markerTable         = markerSchema + ".marker"
)

// The test's time budget. It ends sooner when go test's -timeout would
// (less a margin for the cleanups: servers stopped, directories removed).
const (
	testBudget      = 30 * time.Minute
	cleanupMargin   = 90 * time.Second
	streamTimeout   = 4 * time.Minute  // bootstrap of the shadow, slot active
	catchUpTimeout  = 10 * time.Minute // the marker delivered after the suite
	loadsTimeout    = 5 * time.Minute  // reloads the suite's rewrites started
	minCompareSlack = 2 * time.Minute  // left for the comparisons at least
)

// Log lines of a walshadow run (input/failurelog.go, input/pg_physical_wal.go,
// internal/session/session.go): the session's start, and every line
// reporting a stop (each is followed by a restart) or a start that failed.
var (
	logSessionStarted = regexp.MustCompile(`session started`)
	logSessionStopped = regexp.MustCompile(`walshadow session stopped: |walshadow session still failing: |walshadow session could not start: |walshadow cannot start: `)
)

func TestRegressionSuite(t *testing.T) {
	testrig.SkipIfShort(t, "the regression suite starts PostgreSQL and ClickHouse and runs for minutes")
	if os.Getenv("WALSHADOW_PGREGRESS") == "0" {
		t.Skip("WALSHADOW_PGREGRESS=0: PostgreSQL's regression suite is not run")
	}
	testStart := time.Now()
	deadline := testStart.Add(testBudget)
	if d, ok := t.Deadline(); ok && d.Add(-cleanupMargin).Before(deadline) {
		deadline = d.Add(-cleanupMargin)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	within := func(d time.Duration) time.Duration { return min(d, time.Until(deadline)) }

	prepared := prepareSuite(t)

	workDir, err := os.MkdirTemp("", "walshadow-pgregress-")
	if err != nil {
		t.Fatal(err)
	}
	// The source's OS user reads the suite's copy and writes into the
	// output directory's results/.
	if err := os.Chmod(workDir, 0o755); err != nil {
		t.Fatal(err)
	}
	var child *testrig.Child
	t.Cleanup(func() {
		if child != nil {
			child.Kill()
		}
		if t.Failed() {
			t.Logf("kept the suite's copy, pg_regress's output (out/), the pipeline config and the run log in %s", workDir)
			if child != nil {
				t.Logf("last 60 lines of %s:\n%s", child.LogPath, child.LogTail(60))
			}
			return
		}
		os.RemoveAll(workDir)
	})
	s := prepared.copyForServer(t, workDir)
	outDir := makeOutputDir(t, filepath.Join(workDir, "out"))

	// The source as pg_regress's own temporary instance has it where it
	// matters: two-phase commit on (prepared_xacts), C locale, UTF8.
	src := testrig.StartPostgres(t, testrig.WithMaxPreparedTransactions(2),
		// The suite fails statements on purpose by the thousand.
		testrig.WithSetting("log_min_error_statement", "panic"))
	ch := testrig.StartClickHouse(t)
	stateDir := testrig.NewStateDir(t, src)
	bridgeDir := testrig.BuildPgext(t, src.BinDir())
	chDSN := "clickhouse://default:@" + ch.NativeAddr() + "/default"

	// The database first, made as pg_regress makes it without
	// --use-existing (create_database in pg_regress.c), so walshadow
	// follows it from its start.
	createRegressionDB(t, src)

	config := filepath.Join(workDir, "pipeline.yaml")
	writeConfig(t, config, src, stateDir, bridgeDir, chDSN)
	child = testrig.StartChild(t, workDir, config, 0)
	waitStreaming(t, src, child, stateDir, within(streamTimeout))
	t.Logf("walshadow streams from slot %s, following database %s (%v since the start)", slotName, regressionDB, time.Since(testStart).Round(time.Second))

	// The suite, while watching the run: a run that exits ends the test.
	suiteCtx, stopSuite := context.WithCancel(ctx)
	defer stopSuite()
	type result struct {
		run suiteRun
		err error
	}
	done := make(chan result, 1)
	go func() {
		run, err := runSuite(suiteCtx, s, "127.0.0.1", src.Port(), "postgres", src.BinDir(), outDir)
		done <- result{run, err}
	}()
	var suiteRes result
	select {
	case suiteRes = <-done:
	case <-child.Done():
		stopSuite()
		<-done
		t.Fatalf("walshadow exited (%v) while the suite ran:\n%s", child.Wait(), child.LogTail(80))
	}
	if suiteRes.err != nil {
		t.Fatal(suiteRes.err)
	}
	run := suiteRes.run
	suiteEnd := time.Now()
	failed := failedTests(run.logPath)
	t.Logf("the suite ran in %v: %s", run.duration.Round(100*time.Millisecond), run.summary)
	if len(failed) > 0 {
		t.Logf("the suite's own failures (they do not count; see %s): %s", filepath.Join(run.outDir, "regression.diffs"), strings.Join(failed, " "))
	}

	// Catch-up: a marker committed after the suite, delivered; then the
	// reloads the suite's rewrites (TRUNCATE, VACUUM FULL, CLUSTER, ALTER
	// TYPE) started, published.
	regressionDSN := src.DSNFor(regressionDB)
	execIn(t, regressionDSN, fmt.Sprintf("CREATE SCHEMA %s; CREATE TABLE %s (id int PRIMARY KEY, seq int NOT NULL, at timestamptz NOT NULL); INSERT INTO %s VALUES (1, 0, now())",
		markerSchema, markerTable, markerTable))
	target := catchup.CommitMarker(t, regressionDSN, "UPDATE "+markerTable+" SET seq = seq + 1, at = now() WHERE id = 1")
	catchup.WaitDelivered(t, child, stateDir, target, within(catchUpTimeout), fmt.Sprintf("catching up to the marker at %s after the suite", target))
	delivered := time.Since(suiteEnd)
	pending := waitLoads(child, stateDir, within(loadsTimeout))
	catchUp := time.Since(suiteEnd)
	if len(pending) > 0 {
		t.Logf("loads still pending %v after the suite (their tables compare as they are): %s", catchUp.Round(100*time.Millisecond), strings.Join(pending, ", "))
	}
	t.Logf("walshadow caught up %v after the suite ended (marker delivered after %v)", catchUp.Round(100*time.Millisecond), delivered.Round(100*time.Millisecond))

	// No restart after the first start.
	starts, stops := sessionStarts(child.Log())
	if child.Exited() {
		t.Errorf("walshadow exited (%v) by the end of the suite's catch-up", child.Wait())
	}

	// Every permanent ordinary table, value by value.
	if time.Until(deadline) < minCompareSlack {
		t.Logf("only %v of the budget left for the comparisons", time.Until(deadline).Round(time.Second))
	}
	results := compareAll(ctx, t, regressionDSN, chDSN, stateDir)
	equal := 0
	var unequal []tableResult
	for _, r := range results {
		if r.diff == "" {
			equal++
		} else {
			unequal = append(unequal, r)
		}
	}

	log := child.Log()
	var report strings.Builder
	fmt.Fprintf(&report, "%d of %d tables equal\n", equal, len(results))
	fmt.Fprintf(&report, "suite (pg_regress, parallel_schedule, postgresql-15 %s): %v, %s\n", prepared.version, run.duration.Round(100*time.Millisecond), run.summary)
	fmt.Fprintf(&report, "walshadow catch-up after the suite: %v (marker delivered after %v)\n", catchUp.Round(100*time.Millisecond), delivered.Round(100*time.Millisecond))
	fmt.Fprintf(&report, "session restarts after the first start: %d (%d session starts, %d stops or failed starts after the first)\n", max(len(starts)-1, 0), len(starts), len(stops))
	for _, r := range unequal {
		fmt.Fprintf(&report, "  %s: %s\n", r.table, r.diff)
		if line := firstErrorAbout(log, r.table); line != "" {
			fmt.Fprintf(&report, "      walshadow logged: %s\n", line)
		}
	}
	report.WriteString(reloadReport(stateDir, log))
	t.Log("\n" + report.String())

	if len(starts) != 1 || len(stops) > 0 {
		t.Errorf("the walshadow session restarted after its first start (%d starts):\n%s", len(starts), strings.Join(append(stops, starts[min(1, len(starts)):]...), "\n"))
	}
	if equal < len(results) {
		t.Errorf("%d of %d tables differ from their ClickHouse tables", len(results)-equal, len(results))
	}
	if len(results) == 0 {
		t.Errorf("the suite left no permanent ordinary table in %s to compare", regressionDB)
	}
	t.Logf("the whole test took %v", time.Since(testStart).Round(time.Second))
}

// createRegressionDB creates the database regression as pg_regress's
// create_database does (template0; the locale settings its expected
// outputs assume).
func createRegressionDB(t *testing.T, src *testrig.Postgres) {
	t.Helper()
	db := pgx.Identifier{regressionDB}.Sanitize()
	src.Exec(t, "CREATE DATABASE "+db+" TEMPLATE=template0")
	for _, set := range []string{"lc_messages TO 'C'", "lc_monetary TO 'C'", "lc_numeric TO 'C'", "lc_time TO 'C'",
		"bytea_output TO 'hex'", "timezone_abbreviations TO 'Default'"} {
		src.Exec(t, "ALTER DATABASE "+db+" SET "+set)
	}
}

// writeConfig writes the test pipeline (testrig.Pipeline, logfmt at info)
// with its session following the database regression: the session follows
// the database its source_dsn names.
func writeConfig(t *testing.T, path string, src *testrig.Postgres, stateDir, bridgeDir, chDSN string) {
	t.Helper()
	yaml := testrig.Pipeline{
		Source: src, StateDir: stateDir, Slot: slotName, ShadowPort: testrig.FreePort(t), BridgeDir: bridgeDir,
		LogLevel: "info", LogFormat: "logfmt",
		// The suite drops most of what it creates: drop it on ClickHouse
		// too, rather than keep some thousand dead tables merging.
		Output: testrig.ClickHouseOutput(chDSN, chDatabase, "drop_strategy: drop\n"),
	}.YAML()
	from, to := strconv.Quote(src.DSN()), strconv.Quote(src.DSNFor(regressionDB))
	if n := strings.Count(yaml, from); n != 1 {
		t.Fatalf("the test pipeline names the source DSN %s %d times, want once:\n%s", from, n, yaml)
	}
	yaml = strings.Replace(yaml, from, to, 1)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
}

// waitStreaming waits until the shadow is bootstrapped, the session has
// started and it streams from the slot.
func waitStreaming(t *testing.T, src *testrig.Postgres, c *testrig.Child, stateDir string, timeout time.Duration) {
	t.Helper()
	bootstrapped := filepath.Join(stateDir, "shadow", "walshadow.bootstrap_complete")
	deadline := time.Now().Add(timeout)
	for {
		if _, err := os.Stat(bootstrapped); err == nil && logSessionStarted.MatchString(c.Log()) &&
			src.QueryInt(t, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1 AND active", slotName) == 1 {
			return
		}
		if c.Exited() {
			t.Fatalf("walshadow exited before streaming (%v):\n%s", c.Wait(), c.LogTail(60))
		}
		if time.Now().After(deadline) {
			t.Fatalf("walshadow not streaming from slot %s after %v:\n%s", slotName, timeout, catchup.Stalled(c))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitLoads waits up to timeout until no load in the output's ledger is
// pending and returns those still pending then: a table whose load keeps
// failing is reported by its comparison, not by a timeout here.
func waitLoads(c *testrig.Child, stateDir string, timeout time.Duration) []string {
	deadline := time.Now().Add(timeout)
	for {
		var pending []string
		ledger, err := load.ReadLedger(filepath.Join(stateDir, "clickhouse"))
		if err != nil {
			pending = []string{"(the load ledger: " + err.Error() + ")"}
		} else {
			for _, e := range ledger.All() {
				if e.Phase != load.PhaseDone {
					p := fmt.Sprintf("%s.%s (%s, attempt %d", e.Schema, e.Table, e.Phase, e.Attempt)
					if e.LastError != "" {
						p += ", last error: " + e.LastError
					}
					pending = append(pending, p+")")
				}
			}
		}
		if len(pending) == 0 || c.Exited() || time.Now().After(deadline) {
			return pending
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// logRefill is the output's line for a table rebuilt empty at a rewrite
// and refilled from the WAL instead of a reload (output/refill.go).
var logRefill = regexp.MustCompile(` was rewritten at \S+ \(.*\): .* is rebuilt empty under the new shape`)

// reloadReport says what the suite's reloads cost the source: the
// reloads by reason as the load ledger counts them
// (walshadow_table_reloads_total), and the rewrites refilled from the WAL
// instead.
func reloadReport(stateDir, log string) string {
	ledger, err := load.ReadLedger(filepath.Join(stateDir, "clickhouse"))
	if err != nil {
		return fmt.Sprintf("reloads: reading the load ledger: %v\n", err)
	}
	counts := ledger.Reloads()
	reasons := make([]string, 0, len(counts))
	var total int64
	for r, n := range counts {
		reasons = append(reasons, r)
		total += n
	}
	sort.Slice(reasons, func(i, j int) bool {
		if counts[reasons[i]] != counts[reasons[j]] {
			return counts[reasons[i]] > counts[reasons[j]]
		}
		return reasons[i] < reasons[j]
	})
	var b strings.Builder
	fmt.Fprintf(&b, "table reloads (each a copy from the source): %d", total)
	for i, r := range reasons {
		sep := ", "
		if i == 0 {
			sep = " ("
		}
		fmt.Fprintf(&b, "%s%s %d", sep, r, counts[r])
	}
	if len(reasons) > 0 {
		b.WriteString(")")
	}
	fmt.Fprintf(&b, "\nrewrites refilled from the WAL instead of a reload: %d\n", len(logRefill.FindAllStringIndex(log, -1)))
	return b.String()
}

// sessionStarts returns the lines of a run's log that report a start of
// the session, and those after the first start that report a stop or a
// failed start (each is followed by a restart). A failed start before
// the first is no restart.
func sessionStarts(log string) (starts, stops []string) {
	for _, line := range strings.Split(log, "\n") {
		switch {
		case logSessionStarted.MatchString(line):
			starts = append(starts, line)
		case len(starts) > 0 && logSessionStopped.MatchString(line):
			stops = append(stops, line)
		}
	}
	return starts, stops
}

// execIn runs sql (several statements, no arguments) in the database of dsn.
func execIn(t *testing.T, dsn, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connecting to %s: %v", dsn, err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// firstErrorAbout is the first error line of a run's log that names the
// table, for the report of a table that differs.
func firstErrorAbout(log string, st sourceTable) string {
	names := []string{st.String(), pgx.Identifier{st.schema, st.name}.Sanitize()}
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, "level=error") {
			continue
		}
		for _, n := range names {
			if strings.Contains(line, n) {
				const max = 400
				if len(line) > max {
					line = line[:max] + "..."
				}
				return line
			}
		}
	}
	return ""
}

// compareAll compares every permanent ordinary table of the database
// with its ClickHouse table through the agreements in a copy of the
// output's baseline store (the run may be rewriting it), in name order.
func compareAll(ctx context.Context, t *testing.T, pgDSN, chDSN, stateDir string) []tableResult {
	t.Helper()
	store, err := clickhouse.ReadStore(filepath.Join(stateDir, "clickhouse"))
	if err != nil {
		t.Fatalf("opening a copy of the baseline store: %v", err)
	}
	ch, err := clickhouse.Open(ctx, clickhouse.ConnConfig{DSN: chDSN})
	if err != nil {
		t.Fatalf("connecting to ClickHouse: %v", err)
	}
	defer ch.Close()
	pg, err := pgx.Connect(ctx, pgDSN)
	if err != nil {
		t.Fatalf("connecting to the source: %v", err)
	}
	defer pg.Close(context.Background())
	tables, err := listTables(ctx, pg)
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	results := make([]tableResult, 0, len(tables))
	for _, st := range tables {
		if ctx.Err() != nil {
			results = append(results, tableResult{table: st, diff: "not compared: the test's budget ran out"})
			continue
		}
		results = append(results, tableResult{table: st, diff: compareTable(ctx, pg, ch, store, st)})
	}
	sort.SliceStable(results, func(i, j int) bool { return results[i].table.String() < results[j].table.String() })
	withChildren := 0
	for _, st := range tables {
		if st.children {
			withChildren++
		}
	}
	t.Logf("compared %d tables (%d with inheritance children, read FROM ONLY) in %v", len(tables), withChildren, time.Since(started).Round(100*time.Millisecond))
	return results
}
