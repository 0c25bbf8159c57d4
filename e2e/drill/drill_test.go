// Package drill_test runs the whole pipeline (a real PostgreSQL source,
// the catalog-only shadow, ClickHouse) in child processes and breaks it:
// SIGKILLs at random moments and at exact points of the session (crash
// drill), and its servers stopped, killed and restarted under load (fault
// drill). After each quiet period every table must equal the source.
package drill_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
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
	"github.com/walshadow/walshadow/internal/chcompare"
	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/session"
	"github.com/walshadow/walshadow/internal/testrig"
	"github.com/walshadow/walshadow/internal/wal"
)

func TestMain(m *testing.M) {
	// Only a child run by testrig.StartChild has the kill point set.
	session.Hooks.AfterCapture = testrig.ChildKillHook("capture")
	session.Hooks.AfterSpill = testrig.ChildKillHook("spill")
	session.Hooks.AfterSpoolAppend = testrig.ChildKillHook("append")
	session.Hooks.AfterSpoolTrim = testrig.ChildKillHook("trim")
	session.Hooks.AfterSpoolRead = testrig.ChildKillHook("read")
	testrig.RunChildIfRequested()
	os.Exit(m.Run())
}

// Log lines of the session the drills look for.
const (
	logBaseBackupStarted = "BASE_BACKUP started"
	logBootstrapped      = "bootstrapped the catalog-only shadow"
)

// chDatabase is the ClickHouse database the pipeline writes to.
const chDatabase = "walshadow_drill"

// drill is one drill's servers, state directory and child runs.
type drill struct {
	*testrig.ChildRuns
	src       *testrig.Postgres
	ch        *testrig.ClickHouse
	stateDir  string
	slot      string
	markerSeq int
}

// newDrill starts the source (two-phase commit on, for the random load),
// ClickHouse, builds the bridge module and writes the pipeline config.
func newDrill(t *testing.T, outputYAML string, sessionYAML string) *drill {
	t.Helper()
	return newDrillOn(t, testrig.StartClickHouse(t), outputYAML, sessionYAML)
}

// newDrillOn is newDrill writing into ch, a server started by the caller
// (a cluster's node, outputYAML naming the cluster).
func newDrillOn(t *testing.T, ch *testrig.ClickHouse, outputYAML string, sessionYAML string) *drill {
	t.Helper()
	src := testrig.StartPostgres(t, testrig.WithMaxPreparedTransactions(10), testrig.WithSetting("log_min_error_statement", "panic"))
	d := &drill{src: src, ch: ch, stateDir: testrig.NewStateDir(t, src), slot: "walshadow_drill"}
	bridgeDir := testrig.BuildPgext(t, src.BinDir())
	d.ChildRuns = testrig.NewChildRuns(t, "walshadow-drill-", testrig.Pipeline{
		Source: src, StateDir: d.stateDir, Slot: d.slot, ShadowPort: testrig.FreePort(t), BridgeDir: bridgeDir,
		LogLevel: "info", LogFormat: "logfmt", Session: sessionYAML,
		Output: testrig.ClickHouseOutput(d.dsn(), chDatabase, outputYAML),
	}.YAML())
	return d
}

// dsn is the ClickHouse DSN of the pipeline.
func (d *drill) dsn() string { return "clickhouse://default:@" + d.ch.NativeAddr() + "/default" }

// start starts the next child run; extraEnv goes to its environment.
func (d *drill) start(t *testing.T, extraEnv ...string) *testrig.Child {
	t.Helper()
	return d.Start(t, extraEnv...)
}

// bootstrapMarker is the file the shadow's bootstrap writes last.
func (d *drill) bootstrapMarker() string {
	return filepath.Join(d.stateDir, "shadow", "walshadow.bootstrap_complete")
}

// waitStreaming waits until the shadow is bootstrapped and the child
// streams from the slot.
func (d *drill) waitStreaming(t *testing.T, c *testrig.Child, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if _, err := os.Stat(d.bootstrapMarker()); err == nil &&
			d.src.QueryInt(t, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1 AND active", d.slot) == 1 {
			return
		}
		if c.Exited() {
			t.Fatalf("run %d exited before streaming (%v):\n%s", c.Run, c.Wait(), c.LogTail(60))
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %d: not streaming from slot %s after %v:\n%s", c.Run, d.slot, timeout, c.LogTail(60))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// createDrillTables makes the drill's own tables: the marker a quiet
// period commits to find its end in the delivered position, and the table
// big transactions fill.
func (d *drill) createDrillTables(t *testing.T) {
	t.Helper()
	d.src.Exec(t, `CREATE TABLE public.drill_marker (id int PRIMARY KEY, seq int NOT NULL, at timestamptz NOT NULL);
		INSERT INTO public.drill_marker VALUES (1, 0, now());
		CREATE TABLE public.drill_big (id bigserial PRIMARY KEY, batch int NOT NULL, payload text NOT NULL)`)
}

// bigTransaction inserts about mb MiB of rows into drill_big in one
// transaction: past transaction_buffer_bytes it spills.
func bigTransaction(ctx context.Context, dsn string, batch, mb int) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("big transaction %d: connecting: %w", batch, err)
	}
	defer conn.Close(context.Background())
	// 256-byte payloads (incompressible hex, below the TOAST threshold).
	rows := mb << 20 / 256
	_, err = conn.Exec(ctx, `INSERT INTO public.drill_big (batch, payload)
		SELECT $1, md5(g::text) || md5((g+1)::text) || md5((g+2)::text) || md5((g+3)::text) ||
		           md5((g+4)::text) || md5((g+5)::text) || md5((g+6)::text) || md5((g+7)::text)
		FROM generate_series(1, $2::int) g`, batch, rows)
	if err != nil {
		return fmt.Errorf("big transaction %d (%d rows into public.drill_big): %w", batch, rows, err)
	}
	return nil
}

// pgbenchRun runs `pgbench -n -c clients -j 2 -T seconds` against the
// source and returns its output; a failure (e.g. the source restarting)
// is returned, not fatal.
func (d *drill) pgbenchRun(ctx context.Context, clients int, seconds int) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(d.src.BinDir(), "pgbench"), "-n", "-c", strconv.Itoa(clients), "-j", "2",
		"-T", strconv.Itoa(seconds), d.src.DSN())
	cmd.Env = testrig.CleanPGEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("pgbench -c %d -T %d: %w\n%s", clients, seconds, err, out)
	}
	return string(out), nil
}

// waitCaughtUp commits a marker on the (quiet) source and waits until the
// state directory's manifest records a delivered position at or past it:
// then every transaction before the marker is acknowledged by ClickHouse.
// It fails the test when c exits or timeout passes.
func (d *drill) waitCaughtUp(t *testing.T, c *testrig.Child, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	d.markerSeq++
	target := catchup.CommitMarker(t, d.src.DSN(), fmt.Sprintf("UPDATE public.drill_marker SET seq = %d, at = now() WHERE id = 1", d.markerSeq))
	d.waitDelivered(t, c, target, timeout, fmt.Sprintf("run %d: catching up to the marker at %s", c.Run, target))
	catchup.WaitLoads(t, c, d.stateDir, timeout)
	return time.Since(start)
}

// waitDelivered polls the manifest until its delivered position is at
// least lsn; it fails the test (saying what) when c exits or timeout passes.
func (d *drill) waitDelivered(t *testing.T, c *testrig.Child, lsn wal.LSN, timeout time.Duration, what string) {
	t.Helper()
	catchup.WaitDelivered(t, c, d.stateDir, lsn, timeout, what)
}

// sourceTable is one table of the source.
type sourceTable struct {
	oid          uint32
	schema, name string
}

// compareAll compares every table of the source's user schemas with its
// ClickHouse table by summary (count, sums, md5 of the canonical rows),
// through the agreements in a copy of the output's baseline store (the
// child may be rewriting it). Every difference is reported; it returns
// the number of tables compared and how many differ (each reported with
// t.Errorf).
func (d *drill) compareAll(t *testing.T, when string) (compared, differing int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	store := d.copyStore(t)
	conn, err := clickhouse.Open(ctx, clickhouse.ConnConfig{DSN: d.dsn()})
	if err != nil {
		t.Fatalf("%s: connecting to ClickHouse: %v", when, err)
	}
	defer conn.Close()
	pg, err := pgx.Connect(ctx, d.src.DSN())
	if err != nil {
		t.Fatalf("%s: connecting to the source: %v", when, err)
	}
	defer pg.Close(context.Background())
	rows, err := pg.Query(ctx, `SELECT c.oid, n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind = 'r' AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\_%'
		ORDER BY n.nspname, c.relname`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (sourceTable, error) {
		var x sourceTable
		err := r.Scan(&x.oid, &x.schema, &x.name)
		return x, err
	})
	if err != nil {
		t.Fatalf("%s: listing the source's tables: %v", when, err)
	}
	for _, st := range tables {
		if err := d.compareTable(ctx, pg, conn, store, st); err != nil {
			differing++
			t.Errorf("%s: %v", when, err)
		}
	}
	if differing > 0 {
		t.Errorf("%s: %d of %d tables differ from the source", when, differing, len(tables))
	}
	return len(tables), differing
}

func (d *drill) compareTable(ctx context.Context, pg *pgx.Conn, conn *clickhouse.Conn, store *clickhouse.Store, st sourceTable) error {
	return chcompare.CompareAgreed(ctx, pg, conn.Native(), store, st.schema, st.name, st.oid)
}

// copyStore opens a copy of the output's baseline store: OpenStore removes
// temp files, which would break a write the running child is making.
func (d *drill) copyStore(t *testing.T) *clickhouse.Store {
	t.Helper()
	store, err := clickhouse.ReadStore(filepath.Join(d.stateDir, "clickhouse"))
	if err != nil {
		t.Fatalf("opening a copy of the baseline store: %v", err)
	}
	return store
}

// loadErrors collects the errors of load goroutines.
type loadErrors struct {
	mu   sync.Mutex
	errs []error
}

func (l *loadErrors) add(err error) {
	if err == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, err)
}

func (l *loadErrors) err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return errors.Join(l.errs...)
}
