// Package load_test is the acceptance test of the initial load: the real
// walshadow binary starts against a source that already holds rows
// (pgbench and the type-coverage tables) while pgbench keeps writing, loads
// every table in scope (copy: COPY from the source; base_backup: a page
// walk over a BASE_BACKUP), follows the WAL, and every table must equal the
// source. It also kills a run mid-load and mid-publish, and adds a table
// to the scope of a pipeline that already ran.
package load_test

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walshadow/walshadow/internal/load"
	"github.com/walshadow/walshadow/internal/testrig"
)

func TestMain(m *testing.M) {
	if config := os.Getenv(testrig.ChildConfigEnv); config != "" {
		execWalshadow(config)
	}
	code := m.Run()
	testrig.RemoveWalshadowBuild()
	os.Exit(code)
}

// Time limits, generous at scale 10 on two shared cores; the load's grow
// with the scale.
const catchUpTimeout = 3 * time.Minute

func loadTimeout(scale int) time.Duration { return 3*time.Minute + time.Duration(scale)*15*time.Second }

// pgbenchCounts are the tables whose row count tpcb-like pgbench never
// changes (it updates them and inserts into pgbench_history only).
func pgbenchCounts(scale int) map[string]int64 {
	return map[string]int64{
		"public.pgbench_accounts": int64(scale) * 100000,
		"public.pgbench_tellers":  int64(scale) * 10,
		"public.pgbench_branches": int64(scale),
	}
}

// checkLoadedRows checks that each table's ledger rows equal want (the
// table's rows, unchanged since the load's snapshot).
func checkLoadedRows(t *testing.T, p *pipeline, mode load.Mode, entries map[uint32]load.Entry, tables []sourceTable, want map[string]int64) {
	t.Helper()
	for _, st := range tables {
		n, ok := want[st.String()]
		if !ok {
			continue
		}
		if mode == load.ModeBaseBackup && strings.HasPrefix(st.name, "pgbench_") {
			// A page walk is fuzzy: a row pgbench updates during the backup
			// may be on no page copied at the right moment; the stream,
			// which carries that update, completes it (compared below).
			continue
		}
		if e := entries[st.oid]; e.Rows != n {
			t.Errorf("%s: the ledger says %d rows of %s were loaded; it holds %d (and did at the snapshot)", p.name, e.Rows, st, n)
		}
	}
}

// constantCounts is the row count of every table but pgbench_history,
// which the running pgbench appends to.
func (r *rig) constantCounts(t *testing.T, tables []sourceTable) map[string]int64 {
	t.Helper()
	counts := map[string]int64{}
	for _, st := range tables {
		if st.String() == "public.pgbench_history" {
			continue
		}
		counts[st.String()] = r.src.QueryInt(t, "SELECT count(*) FROM "+pgx.Identifier{st.schema, st.name}.Sanitize())
	}
	return counts
}

// TestInitialLoad loads the same source in copy and base_backup modes,
// side by side (a fresh state directory, slot and ClickHouse database
// each), while pgbench runs; it compares every table after the catch-up and
// logs the table of load rates and source CPU (written to
// $WALSHADOW_LOAD_REPORT too when set).
func TestInitialLoad(t *testing.T) {
	r := newRig(t)
	scale := loadScale(t)
	began := time.Now()
	r.src.PGBench(t, scale, testrig.PGBenchOptions{})
	opt := testrig.RandomLoadOptions{Seed: testrig.TestSeed(t), Tables: 11, Ops: 600, Clients: 2, NoFarFutureTimestamps: true}
	r.src.CreateRandomSchema(t, opt)
	stats := r.src.RunRandomLoad(t, opt)
	r.src.Exec(t, "ANALYZE")
	tables := r.tablesMatching(t, "*.*")
	t.Logf("source: pgbench scale %d and %d type-coverage tables (%v), %d tables, %s, in %v",
		scale, opt.Tables, stats, len(tables), r.src.QueryString(t, "SELECT pg_size_pretty(pg_database_size('postgres'))"),
		time.Since(began).Round(time.Second))
	counts := r.constantCounts(t, tables)
	for name, n := range pgbenchCounts(scale) {
		if counts[name] != n {
			t.Fatalf("%s holds %d rows after pgbench -i -s %d, want %d", name, counts[name], scale, n)
		}
	}

	var results []loadStats
	for _, mode := range []load.Mode{load.ModeCopy, load.ModeBaseBackup} {
		results = append(results, loadMode(t, r, mode, tables, counts, scale))
		if t.Failed() {
			break
		}
	}
	report := reportTable(results)
	t.Logf("initial load at pgbench scale %d, pgbench -c 2 running; MB is the loaded tables' size on the source, load_cpu_s the CPU of the load's own source backends, source_cpu_s the whole source's (pgbench and the shadow's bootstrap included):\n%s", scale, report)
	if path := os.Getenv("WALSHADOW_LOAD_REPORT"); path != "" {
		text := fmt.Sprintf("# walshadow initial load, pgbench scale %d, pgbench -c 2 running\n# MB: the loaded tables' pg_table_size; load_cpu_s: the load's own source backends; source_cpu_s: the whole source\n%s", scale, report)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Errorf("writing the report to WALSHADOW_LOAD_REPORT=%s: %v", path, err)
		}
	}
}

// loadMode runs one mode's pipeline from a fresh state to a compared
// catch-up and returns what the load took.
func loadMode(t *testing.T, r *rig, mode load.Mode, tables []sourceTable, counts map[string]int64, scale int) loadStats {
	t.Helper()
	p := r.newPipeline(t, string(mode), fmt.Sprintf("initial_load: { mode: %s }", mode))
	bench := r.startPGBench(t, 2)
	time.Sleep(2 * time.Second)
	bench.running(t)
	cpuBefore := r.src.CPUSeconds(t)
	historyBefore := r.historyRows(t)

	var tableBytes int64
	for _, st := range tables {
		tableBytes += r.src.QueryInt(t, "SELECT pg_table_size($1::oid)", st.oid)
	}
	loadCPU := r.src.SampleBackendCPU(t, "walshadow initial load")
	c := p.start(t)
	entries := p.waitLoaded(t, c, tables, mode, loadTimeout(scale))
	s := summarizeLoad(mode, entries, tables)
	s.sourceCPU = r.src.CPUSeconds(t) - cpuBefore
	s.loadCPU, s.tableBytes = loadCPU(), tableBytes
	t.Logf("%s: %d tables loaded: %d rows, %d bytes in %v", mode, len(tables), s.rows, s.bytes, s.wall.Round(time.Millisecond))

	// Changes keep coming after the load, then stop.
	time.Sleep(10 * time.Second)
	bench.stop(t)
	if after := r.historyRows(t); after == historyBefore {
		t.Errorf("%s: pgbench committed nothing while the pipeline loaded (pgbench_history still %d rows)", mode, after)
	} else {
		t.Logf("%s: pgbench committed %d transactions during the load and the 10 s after it", mode, after-historyBefore)
	}
	lag := p.waitCaughtUp(t, c, catchUpTimeout)
	t.Logf("%s: caught up %v after pgbench stopped", mode, lag.Round(time.Millisecond))

	checkLoadedRows(t, p, mode, entries, tables, counts)
	compareStart := time.Now()
	if differing := p.compare(t, tables); differing > 0 {
		t.Errorf("%s: %d of %d tables differ from the source", mode, differing, len(tables))
	} else {
		t.Logf("%s: %d tables equal the source (compared in %v)", mode, len(tables), time.Since(compareStart).Round(time.Millisecond))
	}
	if left := p.leftoverLoadTables(t); len(left) > 0 {
		t.Errorf("%s: staging or old tables remain in ClickHouse database %s: %s", mode, p.database, strings.Join(left, ", "))
	}
	p.checkPublishedLogs(t, tables)
	if c.Exited() {
		t.Errorf("%s: run %d exited (%v):\n%s", mode, c.Run, c.Wait(), c.LogTail(40))
	}
	p.retire(t)
	return s
}

// TestInitialLoadKill SIGKILLs a copy-mode load twice: while
// pgbench_accounts (split into ctid ranges, two workers) is loading with
// rows already in its staging table, then while a table is publishing (or,
// when no poll catches that, right after a load finished). The third run
// loads what is left; every table equals the source and no staging or old
// table remains.
func TestInitialLoadKill(t *testing.T) {
	r := newRig(t)
	// pgbench_accounts about 50 MB: several ranges of splitBytes.
	const scale, splitBytes = 4, 8 << 20
	r.src.PGBench(t, scale, testrig.PGBenchOptions{})
	if size := r.src.QueryInt(t, "SELECT pg_relation_size('public.pgbench_accounts')"); size < 3*splitBytes {
		t.Fatalf("pgbench_accounts is %d bytes: fewer than 3 ranges of %d", size, splitBytes)
	}
	tables := r.tablesMatching(t, "*.*")
	counts := r.constantCounts(t, tables)
	var accounts sourceTable
	for _, st := range tables {
		if st.String() == "public.pgbench_accounts" {
			accounts = st
		}
	}
	p := r.newPipeline(t, "kill", fmt.Sprintf("initial_load: { mode: copy, workers: 2, split_bytes: %d }", splitBytes))
	bench := r.startPGBench(t, 2)

	// 1. Killed mid-load.
	c := p.start(t)
	var staged int64
	entries := p.waitLedger(t, c, tables, loadTimeout(scale), "waiting for public.pgbench_accounts to load with rows > 0",
		func(es map[uint32]load.Entry) bool {
			e, ok := es[accounts.oid]
			if !ok || e.Phase != load.PhaseLoading {
				return ok && e.Phase != load.PhaseLoading
			}
			staged = p.stagingRows(e)
			return e.Rows > 0 || staged > 0
		})
	c.Kill()
	if e := entries[accounts.oid]; e.Phase != load.PhaseLoading {
		t.Fatalf("public.pgbench_accounts went to %s before a poll saw it loading with rows (in the ledger or its staging table): nothing to kill mid-load", e.Phase)
	}
	atKill := p.ledger(t)
	e := atKill[accounts.oid]
	t.Logf("run 0 killed while public.pgbench_accounts was loading (attempt %d, ledger %d rows, %d bytes, %d rows in %s); ledger at the kill:\n%s",
		e.Attempt, e.Rows, e.Bytes, staged, e.Staging, describeLedger(atKill, tables))
	if e.Phase == load.PhaseDone {
		t.Errorf("public.pgbench_accounts is done in the ledger right after a kill mid-load")
	}
	t.Logf("ClickHouse tables of the load after the kill: %q", p.leftoverLoadTables(t))

	// 2. Killed while publishing, else right after a load finished.
	doneBefore := map[uint32]bool{}
	for oid, e := range atKill {
		doneBefore[oid] = e.Phase == load.PhaseDone
	}
	c = p.start(t)
	var victim sourceTable
	var phase load.Phase
	p.waitLedger(t, c, tables, loadTimeout(scale), "waiting for a load to publish or finish", func(es map[uint32]load.Entry) bool {
		for _, st := range tables {
			e, ok := es[st.oid]
			if ok && (e.Phase == load.PhasePublishing || e.Phase == load.PhaseDone && !doneBefore[st.oid]) {
				victim, phase = st, e.Phase
				return true
			}
		}
		return false
	})
	c.Kill()
	if phase == load.PhasePublishing {
		t.Logf("run 1 killed while %s was publishing; ledger:\n%s", victim, describeLedger(p.ledger(t), tables))
	} else {
		t.Logf("run 1 killed right after the load of %s finished (no poll saw it publishing); ledger:\n%s", victim, describeLedger(p.ledger(t), tables))
	}

	// 3. The rest.
	c = p.start(t)
	entries = p.waitLoaded(t, c, tables, load.ModeCopy, loadTimeout(scale))
	time.Sleep(2 * time.Second)
	bench.stop(t)
	p.waitCaughtUp(t, c, catchUpTimeout)
	checkLoadedRows(t, p, load.ModeCopy, entries, tables, counts)
	if differing := p.compare(t, tables); differing > 0 {
		t.Errorf("%d of %d tables differ from the source after two kills", differing, len(tables))
	}
	if left := p.leftoverLoadTables(t); len(left) > 0 {
		t.Errorf("staging or old tables remain in ClickHouse database %s: %s", p.database, strings.Join(left, ", "))
	}
	p.checkPublishedLogs(t, tables)
	t.Logf("final ledger:\n%s", describeLedger(entries, tables))
}

// TestInitialLoadNewTable: a pipeline replicating public.pgbench_* runs
// and stops while public.late_t (50k rows) exists out of its scope;
// public.late_* is added to the scope and public.late_u (20k rows) created
// while it is stopped. At the restart late_t is loaded (its rows are in no
// WAL the pipeline reads), the tables loaded before are not loaded again,
// and late_t, late_u and the rows written to late_t while it loads are in
// ClickHouse.
func TestInitialLoadNewTable(t *testing.T) {
	r := newRig(t)
	const scale = 1
	r.src.PGBench(t, scale, testrig.PGBenchOptions{})
	r.src.Exec(t, `CREATE TABLE public.late_t (id bigint PRIMARY KEY, v text NOT NULL, n numeric, at timestamptz NOT NULL DEFAULT clock_timestamp());
		INSERT INTO public.late_t (id, v, n) SELECT g, md5(g::text), g / 7.0 FROM generate_series(1, 50000) g;
		CREATE TABLE public.other_t (id int PRIMARY KEY);
		INSERT INTO public.other_t SELECT generate_series(1, 100)`)
	late := r.tablesMatching(t, "public.late_t")[0]
	other := r.tablesMatching(t, "public.other_t")[0]
	scope := []string{"public.pgbench_*", markerTable}
	first := r.tablesMatching(t, scope...)
	p := r.newPipeline(t, "newtable", scopeYAML(scope))
	c := p.start(t)
	loaded := p.waitLoaded(t, c, first, load.ModeCopy, loadTimeout(scale))
	p.waitCaughtUp(t, c, catchUpTimeout)
	p.stop(t, c)
	for _, st := range []sourceTable{late, other} {
		if e, ok := p.ledger(t)[st.oid]; ok {
			t.Errorf("%s is out of scope but the first run loads it: %s, %d rows", st, e.Phase, e.Rows)
		}
	}

	r.src.Exec(t, `CREATE TABLE public.late_u (id int PRIMARY KEY, v text);
		INSERT INTO public.late_u SELECT g, 'u ' || g FROM generate_series(1, 20000) g`)
	scope = append(scope, "public.late_*")
	p.configure(t, scopeYAML(scope))
	all := r.tablesMatching(t, scope...)

	w := startLateWriter(t, r, 50000)
	c = p.start(t)
	entries := p.waitLoaded(t, c, []sourceTable{late}, load.ModeCopy, loadTimeout(scale))
	time.Sleep(2 * time.Second) // changes after the load too
	inserted, updated := w.stop(t)
	p.waitCaughtUp(t, c, catchUpTimeout)

	e := entries[late.oid]
	during := r.src.QueryInt(t, "SELECT count(*) FROM public.late_t WHERE id > 50000 AND at BETWEEN $1 AND $2", e.StartedAt, e.FinishedAt)
	t.Logf("public.late_t: loaded %d rows in %v; %d rows inserted (%d while it loaded) and %d updates around the restart",
		e.Rows, e.FinishedAt.Sub(e.StartedAt).Round(time.Millisecond), inserted, during, updated)
	if inserted == 0 || updated == 0 {
		t.Errorf("the writer inserted %d and updated %d rows of public.late_t around the restart: no changes to follow", inserted, updated)
	}
	if n := r.src.QueryInt(t, "SELECT count(*) FROM public.late_t"); n != 50000+inserted {
		t.Errorf("public.late_t holds %d rows, want 50000 + %d inserted", n, inserted)
	}
	now := p.ledger(t)
	for _, st := range first {
		if was, is := loaded[st.oid], now[st.oid]; !is.StartedAt.Equal(was.StartedAt) || is.Phase != load.PhaseDone {
			t.Errorf("%s, loaded by the first run (started %v), was loaded again by the restart: now %s, started %v", st, was.StartedAt, is.Phase, is.StartedAt)
		}
	}
	if e, ok := now[other.oid]; ok {
		t.Errorf("public.other_t is out of scope but has a load: %s, %d rows", e.Phase, e.Rows)
	}
	lateU := r.tablesMatching(t, "public.late_u")[0]
	if _, ok := now[lateU.oid]; ok {
		e := p.waitLoaded(t, c, []sourceTable{lateU}, load.ModeCopy, loadTimeout(scale))[lateU.oid]
		t.Logf("public.late_u (created while the pipeline was stopped) was loaded too: %d rows", e.Rows)
	} else {
		t.Logf("public.late_u (created while the pipeline was stopped) came from the WAL alone")
	}
	if differing := p.compare(t, all); differing > 0 {
		t.Errorf("%d of %d tables differ from the source", differing, len(all))
	}
	if left := p.leftoverLoadTables(t); len(left) > 0 {
		t.Errorf("staging or old tables remain in ClickHouse database %s: %s", p.database, strings.Join(left, ", "))
	}
	p.checkPublishedLogs(t, []sourceTable{late})
}

// TestInitialLoadConfigReload: a table added to the include list of a
// running `walshadow run -w` (which reloads its config when the file
// changes) is loaded by the same process, and its changes follow.
func TestInitialLoadConfigReload(t *testing.T) {
	r := newRig(t)
	r.src.PGBench(t, 1, testrig.PGBenchOptions{})
	r.src.Exec(t, `CREATE TABLE public.late_t (id bigint PRIMARY KEY, v text NOT NULL, n numeric, at timestamptz NOT NULL DEFAULT clock_timestamp());
		INSERT INTO public.late_t (id, v, n) SELECT g, md5(g::text), g / 7.0 FROM generate_series(1, 30000) g`)
	late := r.tablesMatching(t, "public.late_t")[0]
	scope := []string{"public.pgbench_*", markerTable}
	first := r.tablesMatching(t, scope...)
	p := r.newPipeline(t, "reload", scopeYAML(scope))
	c := p.start(t, watchEnv+"=1")
	p.waitLoaded(t, c, first, load.ModeCopy, loadTimeout(1))
	p.waitCaughtUp(t, c, catchUpTimeout)
	if _, ok := p.ledger(t)[late.oid]; ok {
		t.Fatalf("%s is out of scope but loaded", late)
	}

	w := startLateWriter(t, r, 30000)
	scope = append(scope, "public.late_*")
	p.configure(t, scopeYAML(scope)) // the running process sees the file change
	p.waitLoaded(t, c, []sourceTable{late}, load.ModeCopy, loadTimeout(1))
	time.Sleep(2 * time.Second)
	inserted, updated := w.stop(t)
	p.waitCaughtUp(t, c, catchUpTimeout)
	if c.Exited() {
		t.Fatalf("the process exited on the reload (%v):\n%s", c.Wait(), c.LogTail(40))
	}
	if !strings.Contains(c.Log(), "Main config updated") {
		t.Errorf("the process never reloaded its config:\n%s", c.LogTail(40))
	}
	if inserted == 0 || updated == 0 {
		t.Errorf("the writer inserted %d and updated %d rows around the reload: no changes to follow", inserted, updated)
	}
	all := r.tablesMatching(t, scope...)
	if differing := p.compare(t, all); differing > 0 {
		t.Errorf("%d of %d tables differ from the source after the reload", differing, len(all))
	}
	if len(p.runs) != 1 {
		t.Errorf("%d runs: the reload was a restart", len(p.runs))
	}
}

// scopeYAML is the output's include list and a copy-mode initial load.
func scopeYAML(patterns []string) string {
	quoted := make([]string, len(patterns))
	for i, p := range patterns {
		quoted[i] = fmt.Sprintf("%q", p)
	}
	return fmt.Sprintf("include: [%s]\ninitial_load: { mode: copy }\n", strings.Join(quoted, ", "))
}

// lateWriter inserts new rows into public.late_t and updates loaded ones,
// a small transaction every 20 ms, until stop. It stops between
// statements, so its counts are exactly what committed.
type lateWriter struct {
	done              chan struct{}
	wg                sync.WaitGroup
	inserted, updated int64
	err               error
}

func startLateWriter(t *testing.T, r *rig, loadedRows int64) *lateWriter {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	conn, err := pgx.Connect(ctx, r.src.DSN())
	if err != nil {
		cancel()
		t.Fatalf("connecting the late_t writer: %v", err)
	}
	w := &lateWriter{done: make(chan struct{})}
	rng := rand.New(rand.NewSource(1))
	next := loadedRows + 1
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer cancel()
		defer conn.Close(context.Background())
		for {
			if _, err := conn.Exec(ctx, `INSERT INTO public.late_t (id, v, n) SELECT g, 'late ' || g, g / 3.0 FROM generate_series($1::bigint, $2::bigint) g`, next, next+49); err != nil {
				w.err = fmt.Errorf("inserting ids %d to %d into public.late_t: %w", next, next+49, err)
				return
			}
			next += 50
			w.inserted += 50
			id := 1 + rng.Int63n(loadedRows)
			if _, err := conn.Exec(ctx, "UPDATE public.late_t SET v = v || '+', n = n + 1 WHERE id = $1", id); err != nil {
				w.err = fmt.Errorf("updating id %d of public.late_t: %w", id, err)
				return
			}
			w.updated++
			select {
			case <-w.done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(w.halt)
	return w
}

func (w *lateWriter) halt() {
	select {
	case <-w.done:
	default:
		close(w.done)
	}
	w.wg.Wait()
}

// stop ends the writer and returns how many rows it inserted and updated.
func (w *lateWriter) stop(t *testing.T) (inserted, updated int64) {
	t.Helper()
	w.halt()
	if w.err != nil {
		t.Fatal(w.err)
	}
	return w.inserted, w.updated
}
