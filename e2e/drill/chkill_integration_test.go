package drill_test

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/testrig"
)

// ClickHouse kill drill tuning: about a minute and a half on two cores.
const (
	chKillCycles   = 5
	chKillOps      = 600 // random workload operations per cycle: 3-5 s
	chKillMaxDelay = 4 * time.Second
	chKillCatchUp  = 3 * time.Minute
	chKillTruncRow = 100 // rows per transaction into drill_trunc, ten transactions a cycle
)

// TestClickHouseKillDrill SIGKILLs ClickHouse (a crash, an OOM kill) and
// starts it again, once a cycle, while the randomized workload (DDL,
// TRUNCATE, keyless tables, 2PC, ...) runs and readers keep ClickHouse's
// tables busy: at a random moment in even cycles, right after a TRUNCATE
// of a table under a reader was applied in odd ones (ClickHouse 18.16
// leaves the parts its merges replaced on disk, and loads them again at
// start once the TRUNCATE removed the part that covered them). The same walshadow run must ride it out (log that ClickHouse
// restarted, wait, retry) and, once it caught up, every table must equal
// the source. WALSHADOW_DRILL_CYCLES sets the number of kills.
func TestClickHouseKillDrill(t *testing.T) {
	testrig.SkipIfShort(t, "the ClickHouse kill drill runs for minutes")
	seed := testrig.TestSeed(t)
	rng := rand.New(rand.NewSource(seed))
	cycles := chKillCycles
	if v := os.Getenv("WALSHADOW_DRILL_CYCLES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("WALSHADOW_DRILL_CYCLES=%q: want a positive number", v)
		}
		cycles = n
	}
	started := time.Now()
	d := newDrill(t, "drop_strategy: drop\n", "")
	t.Cleanup(func() { d.src.Exec(t, "ALTER DATABASE postgres RESET search_path") })
	c := d.start(t)
	d.waitStreaming(t, c, 3*time.Minute)
	d.createDrillTables(t)
	d.src.Exec(t, "CREATE TABLE public.drill_trunc (id int8 PRIMARY KEY, cycle int NOT NULL, v text NOT NULL)")
	d.waitCaughtUp(t, c, chKillCatchUp)
	t.Logf("streaming (%v)", time.Since(started).Round(time.Second))

	readers := d.startCHReaders()
	defer readers.stop()

	for cycle := 1; cycle <= cycles; cycle++ {
		cycleStart := time.Now()
		// drill_trunc: ten transactions, each its own insert and part on
		// ClickHouse, which merges them (a TRUNCATE leaves the parts a
		// merge replaced on disk for eight minutes).
		for i := 0; i < 10; i++ {
			lo := (cycle*10+i)*chKillTruncRow + 1
			d.src.Exec(t, fmt.Sprintf("INSERT INTO public.drill_trunc SELECT g, %d, md5(g::text) FROM generate_series(%d, %d) g", cycle, lo, lo+chKillTruncRow-1))
			d.waitCHCount(t, c, "drill_trunc", fmt.Sprintf("countIf(id >= %d)", lo), chKillTruncRow)
		}
		schema := fmt.Sprintf("drill_ck_%d", cycle)
		d.src.Exec(t, fmt.Sprintf("CREATE SCHEMA %s; ALTER DATABASE postgres SET search_path TO %s, public", schema, schema))
		opt := testrig.RandomLoadOptions{Seed: seed*1000 + int64(cycle), Tables: 11, Ops: chKillOps, Clients: 2,
			DDL: true, TwoPhase: true, NoFarFutureTimestamps: true, Keyless: true, TypeChanges: true, TempTables: true}
		d.src.CreateRandomSchema(t, opt)

		afterTruncate := cycle%2 == 1
		delay := time.Duration(200+rng.Intn(int(chKillMaxDelay/time.Millisecond))) * time.Millisecond
		down := time.Duration(rng.Intn(1000)) * time.Millisecond
		killed := make(chan string, 1)
		go func() {
			what := fmt.Sprintf("%v into the load", delay)
			defer func() { killed <- what }()
			time.Sleep(delay)
			if afterTruncate {
				took, err := d.truncateApplied(cycle)
				if err != nil {
					what = fmt.Sprintf("%s, TRUNCATE not seen applied (%v)", what, err)
				} else {
					parts, _ := filepath.Glob(filepath.Join(d.ch.Dir(), "data", "data", chDatabase, "public%2Edrill_trunc", "all_*"))
					what = fmt.Sprintf("%s, right after a TRUNCATE of drill_trunc under a reader (applied in %v, %d part directories on disk)",
						what, took.Round(time.Millisecond), len(parts))
				}
			}
			d.ch.KillServer(t)
			time.Sleep(down)
			d.ch.StartServer(t)
			what += fmt.Sprintf(", down %v", down)
			if afterTruncate {
				// What the restarted server shows before it applied the
				// truncate's mutation to the parts it loaded again.
				if out, err := d.ch.Query(context.Background(), "SELECT count() FROM "+clickhouse.QuoteQualified(clickhouse.DefaultTarget(chDatabase, "public", "drill_trunc"))); err == nil {
					what += fmt.Sprintf(" (drill_trunc held %s rows at the restart, 3 after the TRUNCATE)", out)
				}
			}
		}()
		stats := d.src.RunRandomLoad(t, opt)
		what := <-killed
		if c.Exited() {
			t.Fatalf("cycle %d: the pipeline exited (%v) instead of waiting for ClickHouse:\n%s", cycle, c.Wait(), c.LogTail(80))
		}
		lag := d.waitCaughtUp(t, c, chKillCatchUp)
		n, differing := d.compareAll(t, fmt.Sprintf("cycle %d (ClickHouse killed %s, seed %d)", cycle, what, seed))
		if differing > 0 {
			t.FailNow()
		}
		t.Logf("cycle %d: ClickHouse killed %s; random load %v; caught up in %v; %d tables equal; cycle took %v",
			cycle, what, stats, lag.Round(time.Millisecond), n, time.Since(cycleStart).Round(time.Millisecond))
	}
	if c.Exited() {
		t.Fatalf("the pipeline exited (%v):\n%s", c.Wait(), c.LogTail(80))
	}
	log := c.Log()
	restarts := strings.Count(log, "ClickHouse restarted (up since")
	if restarts != cycles {
		t.Errorf("the run logged %d ClickHouse restarts for %d kills", restarts, cycles)
	}
	var waits []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "truncate mutation") {
			waits = append(waits, l)
		}
	}
	t.Logf("%d kills survived by one run (%d), %d reads by the readers; %d log lines about truncate mutations%s; took %v",
		cycles, c.Run, readers.reads(), len(waits), firstLines(waits, 4), time.Since(started).Round(time.Second))
}

// waitCHCount waits until ClickHouse's public.<table> has want rows
// counted by expr (an aggregate).
func (d *drill) waitCHCount(t *testing.T, c *testrig.Child, table, expr string, want int) {
	t.Helper()
	sql := "SELECT " + expr + " FROM " + clickhouse.QuoteQualified(clickhouse.DefaultTarget(chDatabase, "public", table)) + " FINAL WHERE _is_deleted = 0"
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := d.ch.Query(context.Background(), sql)
		if err == nil && out == strconv.Itoa(want) {
			return
		}
		if c.Exited() {
			t.Fatalf("the pipeline exited (%v):\n%s", c.Wait(), c.LogTail(60))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %q (%v) after a minute, want %d", sql, out, err, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func firstLines(lines []string, n int) string {
	if len(lines) == 0 {
		return ""
	}
	return ", e.g.:\n" + strings.Join(lines[:min(n, len(lines))], "\n")
}

// truncateApplied truncates drill_trunc (three rows after it in the same
// transaction) and waits until ClickHouse holds just those three rows:
// the TRUNCATE is applied there.
func (d *drill) truncateApplied(cycle int) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, d.src.DSN())
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	base := -10 * cycle
	if _, err := conn.Exec(ctx, fmt.Sprintf(`BEGIN; TRUNCATE public.drill_trunc;
INSERT INTO public.drill_trunc VALUES (%d, %d, 'after'), (%d, %d, 'after'), (%d, %d, 'after'); COMMIT`,
		base-1, cycle, base-2, cycle, base-3, cycle)); err != nil {
		return 0, err
	}
	committed := time.Now()
	table := clickhouse.QuoteQualified(clickhouse.DefaultTarget(chDatabase, "public", "drill_trunc"))
	for {
		if out, err := d.ch.Query(ctx, "SELECT count() FROM "+table); err == nil && out == "3" {
			return time.Since(committed), nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// chReaders are queries on ClickHouse's tables, one after the other, as a
// dashboard's: one on drill_trunc, one on a table picked at random.
type chReaders struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	n      int
}

func (d *drill) startCHReaders() *chReaders {
	ctx, cancel := context.WithCancel(context.Background())
	r := &chReaders{cancel: cancel}
	trunc := clickhouse.QuoteQualified(clickhouse.DefaultTarget(chDatabase, "public", "drill_trunc"))
	read := func(pick func() string, sleep int) {
		defer r.wg.Done()
		for ctx.Err() == nil {
			table := pick()
			if table != "" {
				if _, err := d.ch.Query(ctx, fmt.Sprintf("SELECT count(), sleep(%d) FROM %s", sleep, table)); err == nil {
					r.mu.Lock()
					r.n++
					r.mu.Unlock()
					continue
				}
			}
			select { // (ClickHouse is away, or the table just went)
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	rng := rand.New(rand.NewSource(1))
	random := func() string {
		out, err := d.ch.Query(ctx, "SELECT name FROM system.tables WHERE database = "+clickhouse.QuoteString(chDatabase))
		if err != nil || out == "" {
			return ""
		}
		names := strings.Split(out, "\n")
		return clickhouse.QuoteQualified(clickhouse.Target{Database: chDatabase, Table: names[rng.Intn(len(names))]})
	}
	r.wg.Add(2)
	go read(func() string { return trunc }, 3)
	go read(random, 1)
	return r
}

func (r *chReaders) stop() {
	r.cancel()
	r.wg.Wait()
}

func (r *chReaders) reads() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}
