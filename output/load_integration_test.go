package output_test

import (
	"context"
	"fmt"
	"math/rand"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/load"
	"github.com/walshadow/walshadow/internal/testrig"
)

// TestInitialLoadMatchesSource: tables that hold rows before walshadow
// first starts are loaded (copy, then base_backup), while a writer keeps
// inserting, updating and deleting their rows; afterwards every table
// equals the source, TOASTed values and a keyless change log included, and
// no staging table is left.
func TestInitialLoadMatchesSource(t *testing.T) {
	for _, mode := range []load.Mode{load.ModeCopy, load.ModeBaseBackup} {
		t.Run(string(mode), func(t *testing.T) { testInitialLoad(t, mode) })
	}
}

func testInitialLoad(t *testing.T, mode load.Mode) {
	testInitialLoadOn(t, newRig(t), mode, nil)
}

// testInitialLoadOn is testInitialLoad writing through r; with a cluster
// the output replicates into it (no foreign table is planted: it would be
// on node A alone) and every node is compared.
func testInitialLoadOn(t *testing.T, r *rig, mode load.Mode, cluster *testrig.ClickHouseCluster) {
	r.src.Exec(t, `CREATE TABLE ld_keyed (id int PRIMARY KEY, v text, n numeric, tags text[], big text);
		INSERT INTO ld_keyed SELECT g, 'v' || g, g * 1.5, ARRAY['a' || g, 'b'], NULL FROM generate_series(1, 30000) g;
		UPDATE ld_keyed SET big = (SELECT string_agg(md5(random()::text || i::text), '') FROM generate_series(1, 200) i WHERE ld_keyed.id > 0) WHERE id % 1000 = 0;
		CREATE TABLE ld_log (a int, b text);
		ALTER TABLE ld_log REPLICA IDENTITY FULL;
		INSERT INTO ld_log SELECT g % 500, 'b' || (g % 7) FROM generate_series(1, 5000) g;
		DELETE FROM ld_keyed WHERE id % 97 = 0;
		CREATE TABLE ld_empty (id int PRIMARY KEY)`)
	// An aborted insert and an open transaction's rows are not loaded.
	r.src.Exec(t, `BEGIN; INSERT INTO ld_keyed VALUES (-1, 'aborted'); ROLLBACK`)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	writes := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		conn := r.src.Connect(t)
		rng := rand.New(rand.NewSource(1))
		for ctx.Err() == nil {
			id := 1 + rng.Intn(31000)
			var sql string
			switch rng.Intn(6) {
			case 5:
				// A TOASTed row, its big value unchanged: read back from the
				// load once it is published.
				sql = fmt.Sprintf("UPDATE ld_keyed SET v = v || '!' WHERE id = %d", 1000*(1+rng.Intn(30)))
			case 0:
				sql = fmt.Sprintf("INSERT INTO ld_keyed VALUES (%d, 'new', 1) ON CONFLICT (id) DO UPDATE SET v = 'upserted'", id)
			case 1:
				sql = fmt.Sprintf("UPDATE ld_keyed SET v = v || '+', n = n + 1 WHERE id = %d", id)
			case 2:
				sql = fmt.Sprintf("DELETE FROM ld_keyed WHERE id = %d", id)
			case 3:
				sql = fmt.Sprintf("INSERT INTO ld_log VALUES (%d, 'late')", id%500)
			default:
				sql = fmt.Sprintf("DELETE FROM ld_log WHERE ctid = (SELECT ctid FROM ld_log WHERE a = %d LIMIT 1)", id%500)
			}
			if _, err := conn.Exec(ctx, sql); err != nil && ctx.Err() == nil {
				t.Errorf("writer: %s: %v", sql, err)
				return
			}
			writes++
			time.Sleep(2 * time.Millisecond)
		}
	}()

	extra := ""
	if cluster == nil {
		// A table this output never published already holds one name.
		r.ch.HTTPQuery(t, "CREATE DATABASE IF NOT EXISTS walshadow_test")
		r.ch.HTTPQuery(t, "CREATE TABLE walshadow_test.`public.ld_empty` (id Int32) ENGINE = MergeTree ORDER BY id")
		r.ch.HTTPQuery(t, "INSERT INTO walshadow_test.`public.ld_empty` VALUES (42)")
	} else {
		extra = "\ncluster: " + cluster.Name
	}
	logs := &logLines{}
	run := r.startLogged(t, fmt.Sprintf("initial_load: { mode: %s, workers: 2, split_bytes: 262144 }", mode)+extra, logs)
	r.waitLoadsDone(t, run, logs, 3, 3*time.Minute)
	cancel()
	wg.Wait()
	t.Logf("%d writes during the load", writes)
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "held for the load") || strings.Contains(line, "published") {
			t.Log(line)
		}
	}
	r.src.Exec(t, "CREATE TABLE ld_marker (id int PRIMARY KEY); INSERT INTO ld_marker VALUES (1)")
	r.waitCH(t, run, liveCountSQL("public", "ld_marker"), "1", ddlWait)
	run.stop(t)
	if cluster != nil {
		r.compareNodes(t, cluster)
	} else {
		r.compareAll(t)
	}
	if t.Failed() {
		logs.logMatching(t, "initial load")
		t.Log(r.ch.HTTPQuery(t, "SELECT a, b, _lsn, _xid, _seq, _is_deleted FROM walshadow_test.`public.ld_log` FINAL WHERE b = 'late' ORDER BY a LIMIT 40 FORMAT TSV"))
		t.Log(r.src.QueryString(t, "SELECT string_agg(a::text || ' ' || xmin::text, ', ' ORDER BY a) FROM ld_log WHERE b = 'late'"))
	}
	r.assertNoLoadTables(t)
	if cluster != nil {
		return
	}
	// The table that held ld_empty's name before walshadow is kept aside.
	if got := r.ch.HTTPQuery(t, fmt.Sprintf("SELECT count() FROM walshadow_test.`public.ld_empty__wsreplaced_%d`", r.relOid(t, "ld_empty"))); got != "1" {
		t.Errorf("the table found under ld_empty's name: %s rows kept aside, want 1", got)
	}
	if !strings.Contains(logs.String(), "initial load of public.ld_keyed published") {
		t.Errorf("no publish log line for ld_keyed")
	}
}

// assertNoLoadTables: no staging, delta or stale table is left.
func (r *rig) assertNoLoadTables(t *testing.T) {
	t.Helper()
	if n := r.ch.HTTPQuery(t, "SELECT groupArray(name) FROM system.tables WHERE database = 'walshadow_test' AND (name LIKE '%__wsload_%' OR name LIKE '%__wsdelta_%' OR name LIKE '%__wsstale_%')"); n != "[]" {
		t.Errorf("load tables left on ClickHouse: %s", n)
	}
}

// waitLoadsDone waits until the ledger holds at least want loads (0: any
// number), all done: a table that failed, or changed in a way ClickHouse
// cannot follow, is reloaded in the background and only its published
// load is on ClickHouse. logs may be nil.
func (r *rig) waitLoadsDone(t testing.TB, run *running, logs *logLines, want int, timeout time.Duration) []load.Entry {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var entries []load.Entry
	for time.Now().Before(deadline) {
		l, err := load.ReadLedger(filepath.Join(r.stateDir, "clickhouse"))
		if err == nil {
			entries = l.All()
			done := 0
			for _, e := range entries {
				if e.Phase == load.PhaseDone {
					done++
				}
			}
			if done == len(entries) && len(entries) >= want {
				return entries
			}
		}
		select {
		case err := <-run.done:
			t.Fatalf("the stream stopped during the load: %v\n%s", err, tail(logs.String(), 4000))
		case <-time.After(300 * time.Millisecond):
		}
	}
	t.Fatalf("loads not done after %s: %+v\n%s", timeout, entries, tail(logs.String(), 6000))
	return nil
}

// TestInitialLoadThrottle: max_bytes_per_second bounds how fast a load
// reads the source (a floor on its duration, never a ceiling).
func TestInitialLoadThrottle(t *testing.T) {
	r := newRig(t)
	r.src.Exec(t, `CREATE TABLE ld_slow (id int PRIMARY KEY, pad text);
		INSERT INTO ld_slow SELECT g, repeat('x', 200) FROM generate_series(1, 20000) g`) // ~4.2 MB of COPY
	logs := &logLines{}
	run := r.startLogged(t, "initial_load: { mode: copy, max_bytes_per_second: 1048576 }", logs)
	entries := r.waitLoadsDone(t, run, logs, 1, 3*time.Minute)
	run.stop(t)
	for _, e := range entries {
		took := e.FinishedAt.Sub(e.StartedAt)
		t.Logf("%s.%s: %d rows, %d bytes in %s", e.Schema, e.Table, e.Rows, e.Bytes, took)
		if e.Bytes < 4<<20 {
			t.Fatalf("%s.%s: %d bytes read, want the whole table (> 4 MiB)", e.Schema, e.Table, e.Bytes)
		}
		if min := time.Duration(float64(e.Bytes-(1<<20)) / (1 << 20) * float64(time.Second)); took < min {
			t.Errorf("%s.%s: %d bytes in %s at 1 MiB/s: faster than the throttle allows (%s)", e.Schema, e.Table, e.Bytes, took, min)
		}
	}
	r.compareAll(t)
}
