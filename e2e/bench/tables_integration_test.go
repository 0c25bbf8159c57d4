package bench_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walshadow/walshadow/e2e/internal/catchup"
	"github.com/walshadow/walshadow/internal/chcompare"
	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/load"
	"github.com/walshadow/walshadow/internal/testrig"
)

// Many-tables tuning (bench:tables).
const (
	tablesRows       = 20  // rows of each table
	tablesPerCreate  = 250 // tables created per transaction before the start
	tablesCompared   = 200 // tables compared with chcompare at the end, drawn at random
	tablesAddColumn  = 10  // percent of the tables created while running that get ADD COLUMN
	tablesDropped    = 4   // percent of them dropped
	tablesLoadPolled = time.Second
)

// BenchmarkManyTables measures the first start on a database of many small
// tables (go tool task bench:tables): WALSHADOW_BENCH_TABLES tables
// (default 10,000) of 20 rows each exist before walshadow starts, and
// WALSHADOW_BENCH_NEW_TABLES more (default 2,000) are created while it
// loads, each with DML in its own transactions, 10% of them given a column
// (ADD COLUMN and an UPDATE filling it), 4% dropped. It reports the time
// from the start to the first and to the last of the first tables loaded
// (its ledger entry done), the converge time after the workload's last
// commit (every change delivered and no load pending), walshadow's peak
// RSS and CPU, and compares 200 tables drawn at random (and every table
// that got a column) with the source; each difference fails it.
func BenchmarkManyTables(b *testing.B) {
	testrig.SkipIfShort(b, "PostgreSQL and ClickHouse holding many tables")
	n := envInt(b, "WALSHADOW_BENCH_TABLES", 10000)
	more := envInt(b, "WALSHADOW_BENCH_NEW_TABLES", 2000)
	r := newBacklogRig(b)
	src := r.src
	src.Exec(b, `CREATE TABLE public.bench_marker (id int PRIMARY KEY, seq int NOT NULL); INSERT INTO public.bench_marker VALUES (1, 0)`)
	made := time.Now()
	for from := 0; from < n; from += tablesPerCreate {
		var sql strings.Builder
		for i := from; i < min(n, from+tablesPerCreate); i++ {
			fmt.Fprintf(&sql, "CREATE TABLE public.t%05d (id int PRIMARY KEY, v text NOT NULL, n bigint); INSERT INTO public.t%05d SELECT g, md5(g::text), g * %d FROM generate_series(1, %d) g;\n",
				i, i, i, tablesRows)
		}
		src.Exec(b, sql.String())
	}
	b.Logf("%d tables of %d rows created in %v", n, tablesRows, time.Since(made).Round(time.Millisecond))
	firstOids := map[uint32]bool{}
	rows, err := src.Connect(b).Query(context.Background(), `SELECT c.oid::int8 FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
		WHERE s.nspname = 'public' AND c.relkind = 'r' AND c.relname LIKE 't%'`)
	if err != nil {
		b.Fatal(err)
	}
	for rows.Next() {
		var oid int64
		if err := rows.Scan(&oid); err != nil {
			b.Fatal(err)
		}
		firstOids[uint32(oid)] = true
	}
	rows.Close()
	if len(firstOids) != n {
		b.Fatalf("%d tables on the source, want %d", len(firstOids), n)
	}

	env, profile := childProfile(b, "tables")
	b.ResetTimer()
	start := time.Now()
	c := r.start(b, env...)
	defer c.Kill()

	workload := make(chan workloadResult, 1)
	go func() { workload <- newTablesWorkload(src.DSN(), n, more) }()

	first, last := waitTablesLoaded(b, c, r.stateDir, firstOids, start, 30*time.Minute)
	b.Logf("first start: the first table loaded after %v, the last of %d after %v", first.Round(time.Millisecond), n, last.Round(time.Millisecond))
	w := <-workload
	if w.err != nil {
		b.Fatalf("the workload of new tables: %v", w.err)
	}
	b.Logf("workload: %d tables created while running (%d given a column, %d dropped), its last commit %v after the start",
		more, len(w.altered), len(w.dropped), w.lastCommit.Sub(start).Round(time.Millisecond))
	r.waitCaughtUp(b, c, 30*time.Minute)
	converged := time.Now()
	b.StopTimer()
	cpu, err := testrig.ReadProcCPU(c.Pid())
	if err != nil {
		b.Errorf("walshadow's CPU: %v", err)
	}
	peak, err := testrig.ReadPeakRSS(c.Pid())
	if err != nil {
		b.Errorf("walshadow's peak RSS: %v", err)
	}
	endChildProfile(b, c, profile)
	c.Kill()
	compared := r.compareTables(b, n, more, w.altered, w.dropped)
	b.Logf("converged %v after the workload's last commit; %d tables compared equal", converged.Sub(w.lastCommit).Round(time.Millisecond), compared)
	b.Logf("walshadow: %.1f s of CPU, peak RSS %d MiB", cpu.Own.Seconds(), peak>>20)
	b.ReportMetric(first.Seconds(), "s-first-loaded")
	b.ReportMetric(last.Seconds(), "s-last-loaded")
	b.ReportMetric(converged.Sub(w.lastCommit).Seconds(), "s-converge")
	b.ReportMetric(float64(peak>>20), "MiB-peak-RSS")
}

// workloadResult is what newTablesWorkload did.
type workloadResult struct {
	altered    []string // tables given a column
	dropped    []string // tables dropped (their ClickHouse tables retained once loaded: drop_strategy retain)
	lastCommit time.Time
	err        error
}

// newTablesWorkload creates more tables t<n>.. on dsn while walshadow
// loads: each created and filled in one transaction, then an UPDATE and a
// DELETE in their own; tablesAddColumn percent get a column and an UPDATE
// filling it, tablesDropped percent are dropped.
func newTablesWorkload(dsn string, n, more int) workloadResult {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return workloadResult{err: err}
	}
	defer conn.Close(context.Background())
	rng := rand.New(rand.NewPCG(uint64(n), uint64(more)))
	var res workloadResult
	for i := n; i < n+more; i++ {
		name := fmt.Sprintf("public.t%05d", i)
		steps := []string{
			fmt.Sprintf("CREATE TABLE %s (id int PRIMARY KEY, v text NOT NULL, n bigint); INSERT INTO %s SELECT g, md5(g::text), g FROM generate_series(1, %d) g", name, name, tablesRows),
			fmt.Sprintf("UPDATE %s SET n = n + 1, v = v || 'x' WHERE id %% 3 = 0", name),
			fmt.Sprintf("DELETE FROM %s WHERE id = 1", name),
		}
		switch p := rng.IntN(100); {
		case p < tablesAddColumn:
			steps = append(steps, fmt.Sprintf("ALTER TABLE %s ADD COLUMN extra numeric(12, 2)", name),
				fmt.Sprintf("UPDATE %s SET extra = id * 1.25 WHERE id %% 2 = 0", name))
			res.altered = append(res.altered, fmt.Sprintf("t%05d", i))
		case p < tablesAddColumn+tablesDropped:
			steps = append(steps, "DROP TABLE "+name)
			res.dropped = append(res.dropped, fmt.Sprintf("t%05d", i))
		}
		for _, s := range steps {
			if _, err := conn.Exec(ctx, s); err != nil {
				res.err = fmt.Errorf("%s: %w", s, err)
				return res
			}
		}
		res.lastCommit = time.Now()
	}
	return res
}

// waitTablesLoaded polls the load ledger until every relation of oids is
// loaded; it returns the time from start until the first and the last was
// seen done.
func waitTablesLoaded(b *testing.B, c *testrig.Child, stateDir string, oids map[uint32]bool, start time.Time, timeout time.Duration) (first, last time.Duration) {
	b.Helper()
	deadline := start.Add(timeout)
	lastLogged := time.Now()
	for {
		done := 0
		ledger, err := load.ReadLedger(filepath.Join(stateDir, "clickhouse"))
		if err == nil {
			for oid := range oids {
				if e, ok := ledger.Get(oid); ok && e.Phase == load.PhaseDone {
					done++
				}
			}
		}
		if done > 0 && first == 0 {
			first = time.Since(start)
		}
		if done == len(oids) {
			return first, time.Since(start)
		}
		if time.Since(lastLogged) > 30*time.Second {
			lastLogged = time.Now()
			b.Logf("%v after the start: %d of %d tables loaded", time.Since(start).Round(time.Second), done, len(oids))
		}
		if c.Exited() {
			b.Fatalf("run %d exited (%v) with %d of %d tables loaded:\n%s", c.Run, c.Wait(), done, len(oids), c.LogTail(80))
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d tables loaded after %v:\n%s", done, len(oids), timeout, catchup.Stalled(c))
		}
		time.Sleep(tablesLoadPolled)
	}
}

// compareTables checks that ClickHouse holds a table for every source table
// t* and no other but tables of dropped (retained when their load was
// published before the drop), compares tablesCompared of them drawn at
// random and every table in altered with chcompare, and returns how many
// compared equal.
func (r *backlogRig) compareTables(b *testing.B, n, more int, altered, dropped []string) int {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	store, err := clickhouse.ReadStore(filepath.Join(r.stateDir, "clickhouse"))
	if err != nil {
		b.Fatalf("opening a copy of the baseline store: %v", err)
	}
	ch, err := clickhouse.Open(ctx, clickhouse.ConnConfig{DSN: r.chDSN})
	if err != nil {
		b.Fatal(err)
	}
	defer ch.Close()
	pg, err := pgx.Connect(ctx, r.src.DSN())
	if err != nil {
		b.Fatal(err)
	}
	defer pg.Close(context.Background())
	source := map[string]uint32{}
	rows, err := pg.Query(ctx, `SELECT c.relname, c.oid::int8 FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
		WHERE s.nspname = 'public' AND c.relkind = 'r' AND c.relname LIKE 't%'`)
	if err != nil {
		b.Fatal(err)
	}
	for rows.Next() {
		var name string
		var oid int64
		if err := rows.Scan(&name, &oid); err != nil {
			b.Fatal(err)
		}
		source[name] = uint32(oid)
	}
	rows.Close()
	holds := map[string]bool{}
	held, err := ch.Native().Query(ctx, "SELECT name FROM system.tables WHERE database = ? AND name LIKE 'public.t%'", chDatabase)
	if err != nil {
		b.Fatal(err)
	}
	for held.Next() {
		var name string
		if err := held.Scan(&name); err != nil {
			b.Fatal(err)
		}
		holds[strings.TrimPrefix(name, "public.")] = true
	}
	held.Close()
	var missing, extra []string
	for name := range source {
		if !holds[name] {
			missing = append(missing, name)
		}
	}
	retained := 0
	for name := range holds {
		if _, ok := source[name]; ok {
			continue
		}
		if slices.Contains(dropped, name) {
			retained++
		} else {
			extra = append(extra, name)
		}
	}
	b.Logf("ClickHouse holds %d of the %d dropped tables (retained: their loads were published before the drop)", retained, len(dropped))
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 || len(extra) > 0 {
		b.Errorf("ClickHouse's tables differ from the source's %d: missing %d %v, extra %d %v", len(source), len(missing), head(missing, 10), len(extra), head(extra, 10))
	}
	names := append([]string(nil), altered...)
	rng := rand.New(rand.NewPCG(uint64(n), 7))
	for range tablesCompared {
		names = append(names, fmt.Sprintf("t%05d", rng.IntN(n+more)))
	}
	equal := 0
	for _, name := range names {
		oid, ok := source[name]
		if !ok {
			continue // dropped
		}
		if err := chcompare.CompareAgreed(ctx, pg, ch.Native(), store, "public", name, oid); err != nil {
			b.Errorf("%v", err)
			continue
		}
		equal++
	}
	return equal
}

// head is at most the first n of s.
func head(s []string, n int) []string { return s[:min(n, len(s))] }
