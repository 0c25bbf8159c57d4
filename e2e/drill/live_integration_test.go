package drill_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walshadow/walshadow/internal/testrig"
)

// liveSeconds is how long pgbench runs flat out in TestLiveUnderDDL
// (WALSHADOW_LIVE_SECONDS overrides it).
const liveSeconds = 60

// TestLiveUnderDDL follows pgbench running flat out (4 clients) while a
// side session changes the catalog every 2 s (ADD COLUMN on a side table,
// CREATE TEMP TABLE with rows): the session must never restart, and once
// pgbench stops every table must equal the source. How long after the
// stop ClickHouse is complete is logged (the figure), not asserted.
func TestLiveUnderDDL(t *testing.T) {
	testrig.SkipIfShort(t, "pgbench runs for a minute")
	seconds := liveSeconds
	if v := os.Getenv("WALSHADOW_LIVE_SECONDS"); v != "" {
		if _, err := fmt.Sscanf(v, "%d", &seconds); err != nil || seconds < 1 {
			t.Fatalf("WALSHADOW_LIVE_SECONDS=%q: want a positive number", v)
		}
	}
	d := newDrill(t, "", "")
	c := d.start(t)
	d.waitStreaming(t, c, 3*time.Minute)
	d.createDrillTables(t)
	d.src.Exec(t, `CREATE TABLE public.live_side (id int PRIMARY KEY, v text); INSERT INTO public.live_side VALUES (1, 'a')`)
	d.src.PGBench(t, 1, testrig.PGBenchOptions{})
	d.waitCaughtUp(t, c, 3*time.Minute)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	var ddls int
	var ddlErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		conn, err := pgx.Connect(ctx, d.src.DSN())
		if err != nil {
			ddlErr = err
			return
		}
		defer conn.Close(context.Background())
		for i := 0; ctx.Err() == nil; i++ {
			var stmt string
			if i%2 == 0 {
				stmt = fmt.Sprintf("ALTER TABLE public.live_side ADD COLUMN c%d int DEFAULT %d; UPDATE public.live_side SET v = v || 'x'", i, i)
			} else {
				stmt = fmt.Sprintf("CREATE TEMP TABLE live_tmp_%d (a int); INSERT INTO live_tmp_%d SELECT generate_series(1, 100)", i, i)
			}
			if _, err := conn.Exec(ctx, stmt); err != nil {
				if ctx.Err() == nil {
					ddlErr = fmt.Errorf("%s: %w", stmt, err)
				}
				return
			}
			ddls++
			select {
			case <-ctx.Done():
			case <-time.After(2 * time.Second):
			}
		}
	}()
	out, err := d.pgbenchRun(context.Background(), 4, seconds)
	cancel()
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if ddlErr != nil {
		t.Fatalf("the side session's DDL: %v", ddlErr)
	}
	lag := d.waitCaughtUp(t, c, 5*time.Minute)
	n, differing := d.compareAll(t, "after pgbench")
	starts := strings.Count(c.Log(), "session started")
	tps := ""
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "tps") || strings.HasPrefix(l, "number of transactions actually processed") {
			tps += strings.TrimSpace(l) + "; "
		}
	}
	t.Logf("pgbench -c 4 for %d s (%s) with %d catalog changes: ClickHouse complete %v after pgbench stopped; %d of %d tables equal; %d session start(s)",
		seconds, strings.TrimSuffix(tps, "; "), ddls, lag.Round(time.Millisecond), n-differing, n, starts)
	if starts != 1 {
		t.Errorf("the session started %d times in one run", starts)
	}
}
