package bench_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/testrig"
)

// Commit-to-visible tuning (bench:latency).
const (
	latencyClients  = 4                     // inserting clients
	latencyPoll     = 25 * time.Millisecond // how often ClickHouse is read
	latencyTPCBRate = 200                   // pgbench -R beside the inserts
	// The interleaved shape: one transaction inserting latencyLongRows
	// rows over latencyLongSpan, then committing.
	latencyLongRows = 300
	latencyLongSpan = 30 * time.Second
)

// BenchmarkCommitToVisible measures how long a committed row takes to be
// readable in ClickHouse with walshadow following a live source (go tool
// task bench:latency), in two shapes:
//
//   - steady: WALSHADOW_BENCH_RATE rows/s (default 1,000) over 4 clients,
//     one row per transaction, for WALSHADOW_BENCH_SECONDS (default 30),
//     beside pgbench's TPC-B mix at 200 tps; a row's latency is the first
//     poll of ClickHouse (every 25 ms) that sees it minus the row's
//     clock_timestamp() on the source (the same machine's clock);
//   - interleaved: one transaction inserting 300 rows over 30 s while
//     the steady load runs, then COMMIT; its latency is the first poll
//     that sees all 300 rows minus the moment COMMIT returned.
//
// It reports p50, p90, p99 and max of the steady rows, the rows never
// seen (a minute after the load ends), and the interleaved latency.
func BenchmarkCommitToVisible(b *testing.B) {
	testrig.SkipIfShort(b, "PostgreSQL and ClickHouse to follow a live load")
	rate := envInt(b, "WALSHADOW_BENCH_RATE", 1000)
	seconds := envInt(b, "WALSHADOW_BENCH_SECONDS", 30)
	r := newBacklogRig(b)
	src := r.src
	src.PGBench(b, 1, testrig.PGBenchOptions{})
	src.Exec(b, `CREATE TABLE public.bench_marker (id int PRIMARY KEY, seq int NOT NULL);
		INSERT INTO public.bench_marker VALUES (1, 0);
		CREATE TABLE public.lat_rows (id bigint PRIMARY KEY, at timestamptz NOT NULL);
		CREATE TABLE public.lat_long (id bigint PRIMARY KEY, at timestamptz NOT NULL)`)
	oids := map[string]uint32{}
	for _, name := range []string{"bench_marker", "lat_rows", "lat_long", "pgbench_accounts"} {
		oids[name] = uint32(src.QueryInt(b, "SELECT oid::int8 FROM pg_class WHERE oid = to_regclass($1)", "public."+name))
	}
	c := r.start(b)
	defer c.Kill()
	r.waitLoaded(b, c, oids, 5*time.Minute)
	r.waitCaughtUp(b, c, 5*time.Minute)

	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(seconds)*time.Second+5*time.Minute)
	defer cancel()
	conn, err := clickhouse.Open(ctx, clickhouse.ConnConfig{DSN: r.chDSN})
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	rows := clickhouse.QuoteQualified(clickhouse.Target{Database: chDatabase, Table: "public.lat_rows"})
	long := clickhouse.QuoteQualified(clickhouse.Target{Database: chDatabase, Table: "public.lat_long"})

	from := strings.TrimSpace(r.ch.HTTPQuery(b, "SELECT toString(now())"))
	b.ResetTimer()
	load := time.Duration(seconds) * time.Second
	var wg sync.WaitGroup
	errs := make(chan error, latencyClients+2)
	for client := range latencyClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- steadyInserts(ctx, src.DSN(), client, rate/latencyClients, load)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		cmd := exec.CommandContext(ctx, filepath.Join(src.BinDir(), "pgbench"), "-n", "-c", "2", "-j", "2",
			"-R", strconv.Itoa(latencyTPCBRate), "-T", strconv.Itoa(seconds), src.DSN())
		cmd.Env = testrig.CleanPGEnv()
		if out, err := cmd.CombinedOutput(); err != nil {
			errs <- fmt.Errorf("pgbench -R %d: %w\n%s", latencyTPCBRate, err, out)
		}
	}()
	committed := make(chan time.Time, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		at, err := longTransaction(ctx, src.DSN())
		if err != nil {
			errs <- err
			return
		}
		committed <- at
	}()

	// The poller: every 25 ms, the ids ClickHouse holds above the lowest
	// one not seen yet.
	seen := map[int64]time.Time{}
	var low int64 = -1 // every id <= low is seen
	var longSeen time.Time
	var longCommit time.Time
	stopAt := time.Now().Add(load + time.Minute)
	total := int64(rate / latencyClients * latencyClients * seconds)
	ticker := time.NewTicker(latencyPoll)
	defer ticker.Stop()
	polls := 0
	for time.Now().Before(stopAt) && (low+1 < total || longSeen.IsZero()) {
		<-ticker.C
		polls++
		got, err := conn.Native().Query(ctx, fmt.Sprintf("SELECT id FROM %s WHERE id > %d", rows, low))
		if err != nil {
			b.Fatalf("polling ClickHouse: %v", err)
		}
		// Seen when the answer is back: the row became visible at some
		// moment before, after the last poll's read.
		now := time.Now()
		for got.Next() {
			var id int64
			if err := got.Scan(&id); err != nil {
				b.Fatal(err)
			}
			if _, ok := seen[id]; !ok {
				seen[id] = now
			}
		}
		got.Close()
		for {
			if _, ok := seen[low+1]; !ok {
				break
			}
			low++
		}
		if longCommit.IsZero() {
			select {
			case longCommit = <-committed:
			default:
			}
		}
		if !longCommit.IsZero() && longSeen.IsZero() {
			var n uint64
			if err := conn.Native().QueryRow(ctx, "SELECT count() FROM "+long).Scan(&n); err != nil {
				b.Fatal(err)
			}
			if n == latencyLongRows {
				longSeen = now
			}
		}
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	var loadErrs []error
	for err := range errs {
		if err != nil {
			loadErrs = append(loadErrs, err)
		}
	}
	if err := errors.Join(loadErrs...); err != nil {
		b.Fatalf("load: %v", err)
	}

	// Each row's commit moment on the source's clock.
	pg, err := pgx.Connect(ctx, src.DSN())
	if err != nil {
		b.Fatal(err)
	}
	defer pg.Close(context.Background())
	at, err := pg.Query(ctx, "SELECT id, extract(epoch FROM at)::float8 FROM public.lat_rows")
	if err != nil {
		b.Fatal(err)
	}
	var lat []time.Duration
	inserted, unseen := 0, 0
	for at.Next() {
		var id int64
		var epoch float64
		if err := at.Scan(&id, &epoch); err != nil {
			b.Fatal(err)
		}
		inserted++
		when, ok := seen[id]
		if !ok {
			unseen++
			continue
		}
		sec, frac := math.Modf(epoch)
		lat = append(lat, when.Sub(time.Unix(int64(sec), int64(frac*1e9))))
	}
	at.Close()
	if len(lat) == 0 {
		b.Fatalf("no row of %d seen in ClickHouse", inserted)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	b.ReportMetric(float64(pct(0.50).Milliseconds()), "p50-ms")
	b.ReportMetric(float64(pct(0.90).Milliseconds()), "p90-ms")
	b.ReportMetric(float64(pct(0.99).Milliseconds()), "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Milliseconds()), "max-ms")
	b.ReportMetric(float64(unseen), "rows-unseen")
	interleaved := "never seen whole"
	if !longSeen.IsZero() {
		d := longSeen.Sub(longCommit)
		b.ReportMetric(float64(d.Milliseconds()), "interleaved-ms")
		interleaved = d.Round(time.Millisecond).String()
	}
	b.Logf(`commit-to-visible, %d rows/s over %d clients (one row a transaction) for %ds beside pgbench -R %d, ClickHouse polled every %v (%d polls):
  steady rows: %d inserted, %d seen; p50 %v, p90 %v, p99 %v, max %v; %d never seen
  interleaved: one transaction of %d rows over %v, all of them visible %s after COMMIT returned
  ClickHouse part log over the run: %s`,
		rate, latencyClients, seconds, latencyTPCBRate, latencyPoll, polls,
		inserted, len(lat), pct(0.50).Round(time.Millisecond), pct(0.90).Round(time.Millisecond), pct(0.99).Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond), unseen,
		latencyLongRows, latencyLongSpan, interleaved, r.partLog(b, from))
	if unseen > 0 {
		b.Errorf("%d of %d rows never reached ClickHouse", unseen, inserted)
	}
}

// steadyInserts inserts perSecond rows a second into lat_rows for span,
// one row per transaction, ids client, client+4, ...; a late tick is
// made up at once, so the rate holds on average.
func steadyInserts(ctx context.Context, dsn string, client, perSecond int, span time.Duration) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("client %d: %w", client, err)
	}
	defer conn.Close(context.Background())
	start := time.Now()
	n := perSecond * int(span/time.Second)
	for i := range n {
		due := start.Add(time.Duration(i) * time.Second / time.Duration(perSecond))
		if wait := time.Until(due); wait > 0 {
			time.Sleep(wait)
		}
		id := int64(i*latencyClients + client)
		if _, err := conn.Exec(ctx, "INSERT INTO public.lat_rows VALUES ($1, clock_timestamp())", id); err != nil {
			return fmt.Errorf("client %d, row %d: %w", client, id, err)
		}
	}
	return nil
}

// longTransaction inserts latencyLongRows rows into lat_long over
// latencyLongSpan in one transaction and returns when its COMMIT returned.
func longTransaction(ctx context.Context, dsn string) (time.Time, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return time.Time{}, fmt.Errorf("long transaction: %w", err)
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctx)
	if err != nil {
		return time.Time{}, err
	}
	for i := range latencyLongRows {
		if _, err := tx.Exec(ctx, "INSERT INTO public.lat_long VALUES ($1, clock_timestamp())", i); err != nil {
			return time.Time{}, fmt.Errorf("long transaction, row %d: %w", i, err)
		}
		time.Sleep(latencyLongSpan / latencyLongRows)
	}
	if err := tx.Commit(ctx); err != nil {
		return time.Time{}, fmt.Errorf("long transaction: COMMIT: %w", err)
	}
	return time.Now(), nil
}
