package load_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walshadow/walshadow/e2e/internal/catchup"
	"github.com/walshadow/walshadow/internal/chcompare"
	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/load"
	"github.com/walshadow/walshadow/internal/testrig"
)

// binaryEnv names the walshadow binary a child process execs (see
// TestMain): testrig.StartChild re-runs the test binary, which becomes the
// real `walshadow run`.
const binaryEnv = "WALSHADOW_LOAD_BINARY"

// watchEnv set makes the child `walshadow run -w`: it reloads its config
// when the file changes.
const watchEnv = "WALSHADOW_LOAD_WATCH"

// execWalshadow replaces this process with `walshadow run config`, so the
// child testrig.StartChild watches and kills is the real binary.
func execWalshadow(config string) {
	bin := os.Getenv(binaryEnv)
	if bin == "" {
		fmt.Fprintf(os.Stderr, "%s is set but %s is not: the test starts children with the binary to run\n", testrig.ChildConfigEnv, binaryEnv)
		os.Exit(2)
	}
	args := []string{bin, "run", config}
	if os.Getenv(watchEnv) != "" {
		args = []string{bin, "run", "-w", config}
	}
	err := syscall.Exec(bin, args, os.Environ())
	fmt.Fprintf(os.Stderr, "exec %s run %s: %v\n", bin, config, err)
	os.Exit(2)
}

// markerTable is committed to by waitCaughtUp: its commit's position in
// the manifest's delivered LSN says every earlier transaction is in
// ClickHouse. Every pipeline's scope includes it.
const markerTable = "public.load_marker"

// loadScale is pgbench's scale for TestInitialLoad: WALSHADOW_LOAD_SCALE,
// default 10 (the 2 GB database is about 135).
func loadScale(t *testing.T) int {
	t.Helper()
	v := os.Getenv("WALSHADOW_LOAD_SCALE")
	if v == "" {
		return 10
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("WALSHADOW_LOAD_SCALE=%q: want a positive pgbench scale", v)
	}
	return n
}

// rig is one source and one ClickHouse with the binaries a pipeline needs.
type rig struct {
	src       *testrig.Postgres
	ch        *testrig.ClickHouse
	bin       string
	bridgeDir string
}

func newRig(t *testing.T) *rig {
	t.Helper()
	testrig.SkipIfShort(t, "the whole pipeline for the initial load (minutes)")
	src := testrig.StartPostgres(t, testrig.WithSetting("log_min_error_statement", "panic"))
	r := &rig{src: src, ch: testrig.StartClickHouse(t), bridgeDir: testrig.BuildPgext(t, src.BinDir())}
	r.bin = testrig.BuildWalshadow(t)
	src.Exec(t, `CREATE TABLE public.load_marker (id int PRIMARY KEY, seq int NOT NULL, at timestamptz NOT NULL);
		INSERT INTO public.load_marker VALUES (1, 0, now())`)
	return r
}

func (r *rig) dsn() string { return "clickhouse://default:@" + r.ch.NativeAddr() + "/default" }

// sourceTable is one table of the source.
type sourceTable struct {
	oid          uint32
	schema, name string
}

func (s sourceTable) String() string { return s.schema + "." + s.name }

// tablesMatching lists the source's tables whose schema.table matches one
// of patterns (the output's include semantics: path.Match).
func (r *rig) tablesMatching(t *testing.T, patterns ...string) []sourceTable {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := r.src.Connect(t)
	rows, err := conn.Query(ctx, `SELECT c.oid, n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind = 'r' AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\_%'
		ORDER BY n.nspname, c.relname`)
	if err != nil {
		t.Fatalf("listing the source's tables: %v", err)
	}
	all, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (sourceTable, error) {
		var x sourceTable
		err := row.Scan(&x.oid, &x.schema, &x.name)
		return x, err
	})
	if err != nil {
		t.Fatalf("listing the source's tables: %v", err)
	}
	var out []sourceTable
	for _, st := range all {
		for _, p := range patterns {
			if ok, _ := path.Match(p, st.String()); ok {
				out = append(out, st)
				break
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no source table matches %q", patterns)
	}
	return out
}

// pipeline is one walshadow pipeline: its state directory, slot,
// ClickHouse database, config and runs.
type pipeline struct {
	r          *rig
	name       string
	stateDir   string
	workDir    string // pipeline.yaml and the run logs
	config     string
	slot       string
	database   string
	shadowPort int
	runs       []*testrig.Child
}

// newPipeline makes a fresh state directory, slot name and ClickHouse
// database for name and writes its config with the clickhouse_ddl output's
// extra fields outputYAML.
func (r *rig) newPipeline(t *testing.T, name, outputYAML string) *pipeline {
	t.Helper()
	workDir, err := os.MkdirTemp("", "walshadow-load-")
	if err != nil {
		t.Fatal(err)
	}
	p := &pipeline{r: r, name: name, stateDir: testrig.NewStateDir(t, r.src), workDir: workDir,
		config: filepath.Join(workDir, "pipeline.yaml"), slot: "walshadow_load_" + name,
		database: "walshadow_load_" + name, shadowPort: testrig.FreePort(t)}
	t.Cleanup(func() {
		for _, c := range p.runs {
			c.Kill()
		}
		if t.Failed() {
			t.Logf("%s: kept the pipeline config and the run logs in %s", name, workDir)
			if n := len(p.runs); n > 0 {
				last := p.runs[n-1]
				t.Logf("%s: last 60 lines of %s:\n%s", name, last.LogPath, last.LogTail(60))
			}
			return
		}
		os.RemoveAll(workDir)
	})
	p.configure(t, outputYAML)
	return p
}

// configure (re)writes the pipeline's config and lints it with the real
// binary, so a field the output does not know fails here, by name.
func (p *pipeline) configure(t *testing.T, outputYAML string) {
	t.Helper()
	yaml := testrig.Pipeline{
		Source: p.r.src, StateDir: p.stateDir, Slot: p.slot, ShadowPort: p.shadowPort, BridgeDir: p.r.bridgeDir,
		LogLevel: "info", LogFormat: "logfmt",
		Output: testrig.ClickHouseOutput(p.r.dsn(), p.database, outputYAML),
	}.YAML()
	if err := os.WriteFile(p.config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(p.r.bin, "lint", p.config).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: walshadow lint %s: %v\n%s\nconfig:\n%s", p.name, p.config, err, out, yaml)
	}
}

// start starts the next run of the real binary.
func (p *pipeline) start(t *testing.T, extraEnv ...string) *testrig.Child {
	t.Helper()
	c := testrig.StartChild(t, p.workDir, p.config, len(p.runs), append([]string{binaryEnv + "=" + p.r.bin}, extraEnv...)...)
	p.runs = append(p.runs, c)
	return c
}

// stop ends a run with SIGTERM and waits for its clean exit.
func (p *pipeline) stop(t *testing.T, c *testrig.Child) {
	t.Helper()
	if err := syscall.Kill(c.Pid(), syscall.SIGTERM); err != nil {
		t.Fatalf("%s: SIGTERM to run %d: %v", p.name, c.Run, err)
	}
	select {
	case <-c.Done():
		if err := c.Wait(); err != nil {
			t.Errorf("%s: run %d exited with %v after SIGTERM:\n%s", p.name, c.Run, err, c.LogTail(40))
		}
	case <-time.After(time.Minute):
		t.Fatalf("%s: run %d still running a minute after SIGTERM:\n%s", p.name, c.Run, c.LogTail(40))
	}
}

// retire kills the pipeline's runs, stops its shadow and drops its slot,
// so it holds neither WAL nor CPU while the next pipeline runs.
func (p *pipeline) retire(t *testing.T) {
	t.Helper()
	for _, c := range p.runs {
		c.Kill()
	}
	testrig.StopShadow(p.r.src, filepath.Join(p.stateDir, "shadow"))
	deadline := time.Now().Add(time.Minute)
	for p.r.src.QueryInt(t, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1 AND active", p.slot) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s: slot %s still active a minute after its run was killed", p.name, p.slot)
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.r.src.Exec(t, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", p.slot)
}

// allLogs is every run's output, for log lines a killed run may have
// written.
func (p *pipeline) allLogs() string {
	var b strings.Builder
	for _, c := range p.runs {
		b.WriteString(c.Log())
	}
	return b.String()
}

// ledger reads the output's load ledger (state_dir/clickhouse/loads.json);
// it is rewritten atomically, so reading it while a run writes is safe.
func (p *pipeline) ledger(t *testing.T) map[uint32]load.Entry {
	t.Helper()
	l, err := load.ReadLedger(filepath.Join(p.stateDir, "clickhouse"))
	if err != nil {
		t.Fatalf("%s: %v", p.name, err)
	}
	byOid := map[uint32]load.Entry{}
	for _, e := range l.All() {
		byOid[e.Oid] = e
	}
	return byOid
}

// describeLedger is the entries of tables, one per line, for failures.
func describeLedger(entries map[uint32]load.Entry, tables []sourceTable) string {
	var lines []string
	for _, st := range tables {
		e, ok := entries[st.oid]
		if !ok {
			lines = append(lines, fmt.Sprintf("  %s (oid %d): no entry", st, st.oid))
			continue
		}
		lines = append(lines, fmt.Sprintf("  %s (oid %d): mode %s, phase %s, attempt %d, rows %d, bytes %d, coverage %s, last error %q",
			st, st.oid, e.Mode, e.Phase, e.Attempt, e.Rows, e.Bytes, e.Coverage, e.LastError))
	}
	return strings.Join(lines, "\n")
}

// waitLedger polls the ledger every 20 ms until cond holds for it and
// returns it; it fails the test (saying what) when c exits or timeout
// passes.
func (p *pipeline) waitLedger(t *testing.T, c *testrig.Child, tables []sourceTable, timeout time.Duration, what string,
	cond func(map[uint32]load.Entry) bool) map[uint32]load.Entry {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		entries := p.ledger(t)
		if cond(entries) {
			return entries
		}
		if c.Exited() {
			t.Fatalf("%s: %s: run %d exited (%v); ledger:\n%s\nlog:\n%s", p.name, what, c.Run, c.Wait(), describeLedger(entries, tables), c.LogTail(60))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s: not within %v; ledger:\n%s\nlog:\n%s", p.name, what, timeout, describeLedger(entries, tables), c.LogTail(60))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitLoaded waits until every table's ledger entry is done and checks
// the entries: the mode, a coverage LSN, times in order.
func (p *pipeline) waitLoaded(t *testing.T, c *testrig.Child, tables []sourceTable, mode load.Mode, timeout time.Duration) map[uint32]load.Entry {
	t.Helper()
	entries := p.waitLedger(t, c, tables, timeout, "waiting until every table in scope is loaded", func(entries map[uint32]load.Entry) bool {
		for _, st := range tables {
			if e, ok := entries[st.oid]; !ok || e.Phase != load.PhaseDone {
				return false
			}
		}
		return true
	})
	for _, st := range tables {
		e := entries[st.oid]
		if e.Schema != st.schema || e.Table != st.name {
			t.Errorf("%s: the ledger entry of oid %d names %s.%s, the source table is %s", p.name, st.oid, e.Schema, e.Table, st)
		}
		if e.Mode != mode {
			t.Errorf("%s: %s was loaded in mode %s, configured %s", p.name, st, e.Mode, mode)
		}
		if e.Coverage == 0 {
			t.Errorf("%s: %s is done without a coverage LSN", p.name, st)
		}
		if e.StartedAt.IsZero() || e.FinishedAt.Before(e.StartedAt) {
			t.Errorf("%s: %s is done with started_at %v, finished_at %v", p.name, st, e.StartedAt, e.FinishedAt)
		}
	}
	return entries
}

// stagingRows counts the rows a load has written to its staging table so
// far (the ledger's rows may be set only when it publishes); 0 when the
// table is not there (yet).
func (p *pipeline) stagingRows(e load.Entry) int64 {
	if e.Staging == "" {
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := p.r.ch.Query(ctx, "SELECT count() FROM "+clickhouse.QuoteQualified(clickhouse.Target{Database: e.Database, Table: e.Staging}))
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	return n
}

// checkPublishedLogs checks that some run logged the end of each table's
// load.
func (p *pipeline) checkPublishedLogs(t *testing.T, tables []sourceTable) {
	t.Helper()
	logs := p.allLogs()
	for _, st := range tables {
		if line := fmt.Sprintf("initial load of %s published", st); !strings.Contains(logs, line) {
			t.Errorf("%s: no run logged %q", p.name, line)
		}
	}
}

// waitCaughtUp commits to the marker and waits until the manifest's
// delivered position is at or past that commit: then every transaction
// before it is acknowledged by ClickHouse.
func (p *pipeline) waitCaughtUp(t *testing.T, c *testrig.Child, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	target := catchup.CommitMarker(t, p.r.src.DSN(), "UPDATE public.load_marker SET seq = seq + 1, at = now() WHERE id = 1")
	catchup.WaitDelivered(t, c, p.stateDir, target, timeout, fmt.Sprintf("%s: catching up to %s", p.name, target))
	return time.Since(start)
}

// compare compares each table with its ClickHouse table by summary
// (count, exact sums, md5 of the canonical rows), through the agreements
// in a copy of the output's baseline store (the run may be rewriting it).
// Every difference is reported with t.Errorf; it returns how many differ.
func (p *pipeline) compare(t *testing.T, tables []sourceTable) (differing int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	store := p.copyStore(t)
	conn, err := clickhouse.Open(ctx, clickhouse.ConnConfig{DSN: p.r.dsn()})
	if err != nil {
		t.Fatalf("%s: connecting to ClickHouse: %v", p.name, err)
	}
	defer conn.Close()
	pg, err := pgx.Connect(ctx, p.r.src.DSN())
	if err != nil {
		t.Fatalf("%s: connecting to the source: %v", p.name, err)
	}
	defer pg.Close(context.Background())
	for _, st := range tables {
		if err := compareTable(ctx, pg, conn, store, st); err != nil {
			differing++
			t.Errorf("%s: %v", p.name, err)
		}
	}
	return differing
}

func compareTable(ctx context.Context, pg *pgx.Conn, conn *clickhouse.Conn, store *clickhouse.Store, st sourceTable) error {
	return chcompare.CompareAgreed(ctx, pg, conn.Native(), store, st.schema, st.name, st.oid)
}

// copyStore opens a copy of the output's baseline store: OpenStore removes
// temp files, which would break a write the running child is making.
func (p *pipeline) copyStore(t *testing.T) *clickhouse.Store {
	t.Helper()
	store, err := clickhouse.ReadStore(filepath.Join(p.stateDir, "clickhouse"))
	if err != nil {
		t.Fatalf("%s: opening a copy of the baseline store: %v", p.name, err)
	}
	return store
}

// Markers in the names of the tables a load writes before publishing:
// <table>__wsload_<oid> (staging) and <table>__wsdelta_<oid> (the changes
// streamed until the load is published).
var loadTableMarkers = []string{"__wsload", "__wsdelta"}

// leftoverLoadTables lists the ClickHouse tables of the pipeline's
// database whose names hold a load's staging or old-table marker.
func (p *pipeline) leftoverLoadTables(t *testing.T) []string {
	t.Helper()
	var conds []string
	for _, m := range loadTableMarkers {
		conds = append(conds, "position(name, "+clickhouse.QuoteString(m)+") > 0")
	}
	out := p.r.ch.HTTPQuery(t, fmt.Sprintf("SELECT name FROM system.tables WHERE database = %s AND (%s) ORDER BY name",
		clickhouse.QuoteString(p.database), strings.Join(conds, " OR ")))
	return strings.Fields(out)
}

// pgbenchLoad is pgbench running in the background until stop.
type pgbenchLoad struct {
	cancel context.CancelFunc
	done   chan struct{}
	out    []byte
	err    error
}

// startPGBench runs `pgbench -n -c clients -j clients -T 3600` (tpcb-like:
// every transaction updates the three big tables and inserts into
// pgbench_history) until stop.
func (r *rig) startPGBench(t *testing.T, clients int) *pgbenchLoad {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, filepath.Join(r.src.BinDir(), "pgbench"), "-n", "-c", strconv.Itoa(clients),
		"-j", strconv.Itoa(clients), "-T", "3600", r.src.DSN())
	cmd.Env = testrig.CleanPGEnv()
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGINT) }
	cmd.WaitDelay = 30 * time.Second
	b := &pgbenchLoad{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(b.done)
		b.out, b.err = cmd.CombinedOutput()
	}()
	t.Cleanup(func() { cancel(); <-b.done })
	return b
}

// running fails the test if pgbench ended by itself.
func (b *pgbenchLoad) running(t *testing.T) {
	t.Helper()
	select {
	case <-b.done:
		t.Fatalf("pgbench ended by itself (%v):\n%s", b.err, b.out)
	default:
	}
}

// stop interrupts pgbench and waits for it.
func (b *pgbenchLoad) stop(t *testing.T) {
	t.Helper()
	b.running(t)
	b.cancel()
	<-b.done
}

// historyRows counts pgbench_history: one row per pgbench transaction.
func (r *rig) historyRows(t *testing.T) int64 {
	t.Helper()
	return r.src.QueryInt(t, "SELECT count(*) FROM public.pgbench_history")
}

// loadStats sums a load over tables: rows and bytes from the ledger, wall
// time from the earliest start to the latest finish.
type loadStats struct {
	mode        load.Mode
	rows, bytes int64
	wall        time.Duration
	sourceCPU   float64 // from the pipeline's start to the load's end
	loadCPU     float64 // the load's own backends (COPY connections, BASE_BACKUP walsender)
	tableBytes  int64   // the loaded tables' size on the source (pg_table_size)
}

func summarizeLoad(mode load.Mode, entries map[uint32]load.Entry, tables []sourceTable) loadStats {
	s := loadStats{mode: mode}
	var first, last time.Time
	for _, st := range tables {
		e := entries[st.oid]
		s.rows += e.Rows
		s.bytes += e.Bytes
		if first.IsZero() || e.StartedAt.Before(first) {
			first = e.StartedAt
		}
		if e.FinishedAt.After(last) {
			last = e.FinishedAt
		}
	}
	s.wall = last.Sub(first)
	return s
}

// reportTable renders results as the table.
func reportTable(results []loadStats) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-12s %12s %10s %9s %12s %9s %13s %13s\n", "mode", "rows", "MB", "seconds", "rows/s", "MB/s", "load_cpu_s", "source_cpu_s")
	for _, s := range results {
		secs := s.wall.Seconds()
		mb := float64(s.tableBytes) / 1e6
		rate := func(x float64) float64 {
			if secs <= 0 {
				return 0
			}
			return x / secs
		}
		fmt.Fprintf(&b, "%-12s %12d %10.1f %9.2f %12.0f %9.1f %13.2f %13.2f\n", s.mode, s.rows, mb, secs, rate(float64(s.rows)), rate(mb), s.loadCPU, s.sourceCPU)
	}
	return b.String()
}

// sortedNames is the tables' names, for messages.
func sortedNames(tables []sourceTable) []string {
	names := make([]string, len(tables))
	for i, st := range tables {
		names[i] = st.String()
	}
	sort.Strings(names)
	return names
}
