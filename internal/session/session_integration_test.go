package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/walshadow/walshadow/config"
	"github.com/walshadow/walshadow/internal/testrig"
	"github.com/walshadow/walshadow/internal/wal"
)

// envScale overrides the pgbench scale of the acceptance run (default 35:
// about 520 MB of data).
const envScale = "WALSHADOW_ACCEPTANCE_SCALE"

// stateDir makes a state directory the shadow's OS user can traverse.
func stateDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "walshadow-session-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			os.RemoveAll(dir)
		} else {
			t.Logf("state dir kept: %s", dir)
		}
	})
	return dir
}

func sessionConfig(t *testing.T, src *testrig.Postgres, dir string) config.Session {
	return config.Session{
		SourceDSN:       src.DSN(),
		StateDir:        dir,
		SlotName:        "walshadow_test",
		CreateSlot:      true,
		ShadowBinDir:    src.BinDir(),
		ShadowOSUser:    testrig.ServerOSUser(),
		ShadowPort:      testrig.FreePort(t),
		HoldTimeout:     30 * time.Second,
		StatusInterval:  time.Second,
		MaxBatchRecords: 1024,
		RetentionBytes:  256 << 20,
		SlowThreshold:   64 << 20,
	}
}

// consumer acts as the processor: it takes every batch, and at each
// boundary reads the shadow's replay position while the hold is on, before
// releasing it.
type consumer struct {
	s          *Session
	mu         sync.Mutex
	boundaries []observedBoundary
	records    int
	errs       []error
	done       chan struct{}
}

type observedBoundary struct {
	b        Boundary
	replayed wal.LSN
}

func consume(t *testing.T, s *Session) *consumer {
	c := &consumer{s: s, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for {
			b, err := s.Next(context.Background())
			if err != nil {
				if !errors.Is(err, ErrClosed) {
					c.mu.Lock()
					c.errs = append(c.errs, err)
					c.mu.Unlock()
				}
				return
			}
			if b.Boundary != nil {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				replayed, err := s.Shadow().WaitForReplay(ctx, b.Boundary.NextLSN)
				cancel()
				if err == nil {
					// The processor side of the hold: capture into the
					// descriptor log, then release.
					cctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					_, err = s.CaptureAndRelease(cctx, b.Boundary.NextLSN)
					cancel()
				}
				c.mu.Lock()
				if err != nil {
					c.errs = append(c.errs, fmt.Errorf("boundary at %s: %w", b.Boundary.NextLSN, err))
				}
				c.boundaries = append(c.boundaries, observedBoundary{*b.Boundary, replayed})
				c.mu.Unlock()
			}
			c.mu.Lock()
			c.records += len(b.Items)
			c.mu.Unlock()
			s.Ack(b)
		}
	}()
	return c
}

// waitCaughtUp waits until the shadow has replayed through the source's
// current WAL position.
func waitCaughtUp(t *testing.T, s *Session, src *testrig.Postgres, timeout time.Duration) wal.LSN {
	t.Helper()
	target := src.CurrentLSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		got, err := s.Shadow().ReplayLSN(ctx)
		if err == nil && got >= target {
			return got
		}
		select {
		case <-ctx.Done():
			st, pub, apply := s.Stats()
			t.Fatalf("shadow replay %s (err %v) did not reach the source's %s; published %s, walsender apply %s, pump %+v",
				got, err, target, pub, apply, st)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// catalogRows renders the rows of pg_class, pg_attribute and pg_type that
// describe every user table, as text, for comparing source and shadow.
const catalogRowsQuery = `
SELECT string_agg(line, E'\n' ORDER BY line) FROM (
  SELECT format('class %s %s %s %s %s %s %s %s %s', c.oid, c.relname, c.relnamespace, c.reltype, c.relfilenode,
                c.relnatts, c.relkind, c.relreplident, c.reltoastrelid) AS line
  FROM pg_class c WHERE c.oid >= 16384 AND c.relkind IN ('r','p','t','i','S')
  UNION ALL
  SELECT format('attr %s %s %s %s %s %s %s %s %s %s', a.attrelid, a.attnum, a.attname, a.atttypid, a.atttypmod,
                a.attlen, a.attnotnull, a.attisdropped, a.atthasmissing, a.attmissingval)
  FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid WHERE c.oid >= 16384 AND c.relkind IN ('r','p','t')
  UNION ALL
  SELECT format('type %s %s %s %s %s', t.oid, t.typname, t.typrelid, t.typlen, t.typtype)
  FROM pg_type t WHERE t.oid >= 16384
) x`

func shadowCatalogRows(t *testing.T, s *Session) string {
	t.Helper()
	rows, err := s.Shadow().QueryStrings(context.Background(), "postgres", catalogRowsQuery)
	if err != nil || len(rows) != 1 || len(rows[0]) != 1 {
		t.Fatalf("reading the shadow's catalogs: %v (%d rows)", err, len(rows))
	}
	return rows[0][0]
}

// ddlWorkload runs alongside pgbench: every kind of catalog change issue 3
// names, on tables of its own.
const ddlWorkload = `
CREATE TABLE accept_a (id int PRIMARY KEY, v text);
INSERT INTO accept_a SELECT g, md5(g::text) FROM generate_series(1, 5000) g;
CREATE INDEX accept_a_v ON accept_a (v);
ALTER TABLE accept_a ADD COLUMN n numeric DEFAULT 1.5;
ALTER TABLE accept_a RENAME COLUMN v TO label;
ALTER TABLE accept_a DROP COLUMN n;
VACUUM FULL accept_a;
VACUUM FULL pg_class;
VACUUM FULL pg_depend;
TRUNCATE accept_a;
INSERT INTO accept_a VALUES (1, 'after truncate');
BEGIN;
CREATE TABLE accept_b (id int PRIMARY KEY);
SAVEPOINT s1;
ALTER TABLE accept_b ADD COLUMN gone int;
ROLLBACK TO SAVEPOINT s1;
ALTER TABLE accept_b ADD COLUMN kept text;
COMMIT;
BEGIN;
CREATE TABLE accept_c (id int);
PREPARE TRANSACTION 'accept_2pc';
COMMIT PREPARED 'accept_2pc';
CREATE TABLE accept_dropped (id int);
DROP TABLE accept_dropped;
`

func TestSessionShadowFollowsSource(t *testing.T) {
	scale := 35
	if v := os.Getenv(envScale); v != "" {
		scale, _ = strconv.Atoi(v)
	}
	src := testrig.StartPostgres(t, testrig.WithMaxPreparedTransactions(5))
	t.Logf("loading pgbench at scale %d", scale)
	src.PGBench(t, scale, testrig.PGBenchOptions{})
	srcSize := src.QueryInt(t, "SELECT sum(pg_database_size(oid)) FROM pg_database")

	dir := stateDir(t)
	cfg := sessionConfig(t, src, dir)
	s := New(cfg, nil, nil)
	s.SelfRelease = false // the consumer releases holds, as the processor will
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	t0 := time.Now()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	t.Logf("bootstrap and start took %s", time.Since(t0).Round(time.Millisecond))
	c := consume(t, s)

	// pgbench and the DDL script concurrently.
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		src.PGBench(t, scale, testrig.PGBenchOptions{NoInit: true, Duration: 20 * time.Second, Clients: 2, Jobs: 2})
	}()
	go func() {
		defer wg.Done()
		src.RunSQLScript(t, ddlWorkload)
		src.RunSQLScript(t, testrig.DDLScript)
	}()
	// Shadow apply lag while pgbench runs.
	var lagMax, lagSum, lagN int64
	for stop := time.After(18 * time.Second); ; {
		select {
		case <-stop:
		case <-time.After(time.Second):
			_, pub, apply := s.Stats()
			if lag := int64(pub) - int64(apply); apply > 0 {
				lagMax, lagSum, lagN = max(lagMax, lag), lagSum+lag, lagN+1
			}
			continue
		}
		break
	}
	wg.Wait()
	replayed := waitCaughtUp(t, s, src, 2*time.Minute)
	if lagN > 0 {
		t.Logf("shadow apply lag during pgbench: mean %d bytes, max %d bytes", lagSum/lagN, lagMax)
	}

	// Catalog rows of every user table are equal.
	want := src.QueryString(t, catalogRowsQuery)
	got := shadowCatalogRows(t, s)
	if got != want {
		t.Fatalf("shadow catalogs differ from the source's at %s:\n%s", replayed, diffLines(want, got))
	}
	if !strings.Contains(got, " accept_b ") || !strings.Contains(got, " kept ") || strings.Contains(got, " gone ") {
		t.Fatalf("the DDL workload's tables are not on the shadow as expected")
	}

	// Size: catalogs only.
	shadowSize, err := s.Shadow().DataDirSize()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("shadow data dir %d bytes (without pg_wal), source databases %d bytes: %.2f%%", shadowSize, srcSize, 100*float64(shadowSize)/float64(srcSize))
	if srcSize >= 500<<20 && float64(shadowSize) >= 0.05*float64(srcSize) {
		t.Fatalf("shadow is %.1f%% of the source", 100*float64(shadowSize)/float64(srcSize))
	}

	// Boundaries: the shadow was parked exactly at each one.
	c.mu.Lock()
	boundaries := append([]observedBoundary(nil), c.boundaries...)
	errs := append([]error(nil), c.errs...)
	c.mu.Unlock()
	if len(errs) > 0 {
		t.Fatalf("consumer: %v", errs)
	}
	if len(boundaries) < 15 {
		t.Fatalf("only %d boundaries for a DDL-heavy workload", len(boundaries))
	}
	for _, ob := range boundaries {
		if ob.replayed != ob.b.NextLSN {
			t.Errorf("boundary xid %d: shadow replayed %s during the hold, want exactly %s", ob.b.DrainXID, ob.replayed, ob.b.NextLSN)
		}
	}
	st, _, _ := s.Stats()
	t.Logf("%d records, %d NOOP'd for the shadow, %d to the decoder, %d holds (%s total)",
		st.Records, st.NoopRecords, st.DecoderRecords, st.Holds, st.HoldTime.Round(time.Millisecond))

	t.Run("AlterThenInserts", func(t *testing.T) {
		conn := src.Connect(t)
		defer conn.Close(context.Background())
		var xid uint32
		tx, err := conn.Begin(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		tx.Exec(context.Background(), "ALTER TABLE accept_a ADD COLUMN extra int")
		if err := tx.QueryRow(context.Background(), "SELECT txid_current()").Scan(&xid); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(context.Background()); err != nil {
			t.Fatal(err)
		}
		src.Exec(t, "INSERT INTO accept_a SELECT g, 'x', g FROM generate_series(100, 2000) g")
		waitCaughtUp(t, s, src, time.Minute)
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, ob := range c.boundaries {
			if ob.b.DrainXID == xid {
				if ob.replayed != ob.b.NextLSN {
					t.Fatalf("ALTER's boundary: replayed %s during the hold, want %s", ob.replayed, ob.b.NextLSN)
				}
				return
			}
		}
		t.Fatalf("no boundary for the ALTER TABLE's xid %d", xid)
	})

	t.Run("ShadowKilled", func(t *testing.T) {
		pid, ok := s.Shadow().Running()
		if !ok {
			t.Fatal("shadow not running")
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		src.PGBench(t, scale, testrig.PGBenchOptions{NoInit: true, Transactions: 300})
		src.Exec(t, "ALTER TABLE accept_a ADD COLUMN after_kill int")
		waitCaughtUp(t, s, src, 2*time.Minute)
		if s.Shadow().Restarts() == 0 {
			t.Fatal("the shadow caught up but no restart was counted")
		}
	})

	t.Run("SessionRestart", func(t *testing.T) {
		marker := filepath.Join(dir, "shadow", "walshadow.bootstrap_complete")
		before, err := os.Stat(marker)
		if err != nil {
			t.Fatal(err)
		}
		s.Close(context.Background())
		<-c.done
		prog, err := ReadManifest(dir)
		if err != nil || prog == nil {
			t.Fatalf("no progress saved: %v", err)
		}
		// The slot never holds less than a restart needs: its restart_lsn
		// (the flush position reported) is at most the stored floor.
		slotRestart := src.QueryLSN(t, "SELECT restart_lsn FROM pg_replication_slots WHERE slot_name = 'walshadow_test'")
		if slotRestart == 0 || slotRestart > prog.Floor || prog.Restart > prog.Floor || prog.Floor > prog.Received {
			t.Fatalf("slot restart_lsn %s, manifest floor %s restart %s received %s", slotRestart, prog.Floor, prog.Restart, prog.Received)
		}
		if prog.Delivered == 0 || prog.ShadowReplay == 0 || prog.FilteredDurable == 0 || prog.SystemID == 0 {
			t.Fatalf("manifest missing positions: %+v", prog)
		}
		src.PGBench(t, scale, testrig.PGBenchOptions{NoInit: true, Transactions: 300})
		src.Exec(t, "ALTER TABLE accept_a ADD COLUMN after_restart int")

		s2 := New(cfg, nil, nil)
		if err := s2.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer s2.Close(context.Background())
		consume(t, s2)
		if s2.startLSN != prog.Restart {
			t.Fatalf("restarted at %s, stored resume point %s", s2.startLSN, prog.Restart)
		}
		after, _ := os.Stat(marker)
		if !after.ModTime().Equal(before.ModTime()) {
			t.Fatal("the shadow was bootstrapped again")
		}
		waitCaughtUp(t, s2, src, 2*time.Minute)
		if got, want := shadowCatalogRows(t, s2), src.QueryString(t, catalogRowsQuery); got != want {
			t.Fatalf("after restart, shadow catalogs differ:\n%s", diffLines(want, got))
		}
	})
}

// diffLines lists lines present on one side only.
func diffLines(want, got string) string {
	w := map[string]bool{}
	for _, l := range strings.Split(want, "\n") {
		w[l] = true
	}
	g := map[string]bool{}
	var b strings.Builder
	for _, l := range strings.Split(got, "\n") {
		g[l] = true
		if !w[l] {
			fmt.Fprintf(&b, "+ %s\n", l)
		}
	}
	for _, l := range strings.Split(want, "\n") {
		if !g[l] {
			fmt.Fprintf(&b, "- %s\n", l)
		}
	}
	return b.String()
}
