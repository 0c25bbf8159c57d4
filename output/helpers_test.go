package output_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	// The none buffer and other core components a full config names.
	_ "github.com/redpanda-data/benthos/v4/public/components/pure"
	"github.com/redpanda-data/benthos/v4/public/service"

	_ "github.com/walshadow/walshadow/input"
	_ "github.com/walshadow/walshadow/output"
	_ "github.com/walshadow/walshadow/processor"

	"github.com/walshadow/walshadow/internal/chcompare"
	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/testrig"
)

// rig is one test's servers and state: a source, a ClickHouse, the bridge
// module and a walshadow state directory.
type rig struct {
	src        *testrig.Postgres
	ch         *testrig.ClickHouse
	bridgeDir  string
	stateDir   string
	slot       string
	shadowPort int
	// editPipeline, when set, rewrites the pipeline's YAML before it runs.
	editPipeline func(string) string
	// chDSN, when set, is the output's DSN instead of ch's (a cluster's
	// several hosts).
	chDSN string
}

func newRig(t testing.TB, opts ...testrig.PGOption) *rig {
	t.Helper()
	return newRigOn(t, testrig.StartClickHouse(t), opts...)
}

// newRigOn is newRig writing into ch (a cluster's node A).
func newRigOn(t testing.TB, ch *testrig.ClickHouse, opts ...testrig.PGOption) *rig {
	t.Helper()
	src := testrig.StartPostgres(t, opts...)
	return &rig{src: src, ch: ch, bridgeDir: testrig.BuildPgext(t, src.BinDir()),
		stateDir: testrig.NewStateDir(t, src), slot: "walshadow_ch", shadowPort: testrig.FreePort(t)}
}

// dsn is the ClickHouse DSN the output uses.
func (r *rig) dsn() string {
	if r.chDSN != "" {
		return r.chDSN
	}
	return r.ch.DSN("default")
}

// yaml is the reference pipeline with outputYAML (indented under
// clickhouse_ddl:) as the output's extra settings.
func (r *rig) yaml(outputYAML string) string {
	return testrig.Pipeline{
		Source: r.src, StateDir: r.stateDir, Slot: r.slot, ShadowPort: r.shadowPort, BridgeDir: r.bridgeDir,
		Output: testrig.ClickHouseOutput(r.dsn(), "walshadow_test", outputYAML),
	}.YAML()
}

// running is a started stream.
type running struct {
	stream *service.Stream
	done   chan error
}

// start builds and runs the pipeline and waits until it streams.
func (r *rig) start(t testing.TB, outputYAML string) *running {
	t.Helper()
	return r.startLogged(t, outputYAML, nil)
}

// startLogged is start with the stream's log lines also sent to logTo.
func (r *rig) startLogged(t testing.TB, outputYAML string, logTo *logLines) *running {
	t.Helper()
	b := service.NewStreamBuilder()
	if logTo != nil {
		b.SetLogger(slog.New(slog.NewTextHandler(logTo, &slog.HandlerOptions{Level: slog.LevelInfo})))
	}
	// The default schema knows no custom resources.
	b.SetSchema(service.GlobalEnvironment().FullConfigSchema("", ""))
	yaml := r.yaml(outputYAML)
	if r.editPipeline != nil {
		yaml = r.editPipeline(yaml)
	}
	if logTo != nil {
		// The logger is the builder's: drop the config's own.
		yaml = strings.Replace(yaml, "logger: { level: ${WALSHADOW_TEST_LOG_LEVEL:warn} }\n", "", 1)
	}
	if err := b.SetYAML(yaml); err != nil {
		t.Fatalf("pipeline config: %v\n%s", err, yaml)
	}
	stream, err := b.Build()
	if err != nil {
		t.Fatalf("building the stream: %v", err)
	}
	run := &running{stream: stream, done: make(chan error, 1)}
	go func() { run.done <- stream.Run(context.Background()) }()
	t.Cleanup(func() { run.stop(t) })
	testrig.WaitSlotActive(t, r.src, r.slot, run.done)
	return run
}

func (run *running) stop(t testing.TB) {
	if run.stream == nil {
		return
	}
	if err := run.stream.StopWithin(time.Minute); err != nil {
		t.Logf("stopping the stream: %v", err)
	}
	run.stream = nil
}

// chTable is the ClickHouse table a source table lands in by default.
func chTable(schema, table string) string {
	return clickhouse.QuoteQualified(clickhouse.DefaultTarget("walshadow_test", schema, table))
}

// waitCH polls a ClickHouse query until it returns want (trimmed).
func (r *rig) waitCH(t testing.TB, run *running, sql, want string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var got string
	for time.Now().Before(deadline) {
		out, err := r.ch.Query(context.Background(), sql)
		got = strings.TrimSpace(out)
		if err == nil && got == want {
			return
		}
		if run != nil {
			select {
			case err := <-run.done:
				t.Fatalf("the stream stopped while waiting for %q: %v", sql, err)
			default:
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: got %q, want %q after %s", sql, got, want, timeout)
}

// compareAll compares every table of the source's public schema with its
// ClickHouse table through the agreed mappings in the output's store (the
// stream must be stopped: the store is read from disk).
func (r *rig) compareAll(t *testing.T) {
	t.Helper()
	r.compareIn(t, "public")
}

// compareIn is compareAll over the tables of the given schemas.
func (r *rig) compareIn(t *testing.T, schemas ...string) {
	t.Helper()
	r.compareOn(t, r.dsn(), schemas...)
}

// compareOn is compareIn reading ClickHouse at dsn.
func (r *rig) compareOn(t *testing.T, dsn string, schemas ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	store, err := clickhouse.ReadStore(filepath.Join(r.stateDir, "clickhouse"))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := clickhouse.Open(ctx, clickhouse.ConnConfig{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	pg := r.src.Connect(t)
	rows, err := pg.Query(ctx, `SELECT c.oid, n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = ANY($1) AND c.relkind = 'r' ORDER BY n.nspname, c.relname`, schemas)
	if err != nil {
		t.Fatal(err)
	}
	type rel struct {
		oid          uint32
		schema, name string
	}
	var rels []rel
	for rows.Next() {
		var x rel
		if err := rows.Scan(&x.oid, &x.schema, &x.name); err != nil {
			t.Fatal(err)
		}
		rels = append(rels, x)
	}
	rows.Close()
	if len(rels) == 0 {
		t.Fatal("no source tables to compare")
	}
	for _, rl := range rels {
		name := fmt.Sprintf("%q.%q", rl.schema, rl.name)
		a := store.Get(rl.oid)
		if a == nil {
			t.Errorf("%s (oid %d) has no agreed ClickHouse table", name, rl.oid)
			continue
		}
		tbl, err := chcompare.AgreedTable(pgx.Identifier{rl.schema, rl.name}.Sanitize(), a)
		if err != nil {
			t.Fatal(err)
		}
		live := r.src.QueryInt(t, "SELECT count(*) FROM pg_attribute WHERE attrelid = $1 AND attnum > 0 AND NOT attisdropped", rl.oid)
		if int(live) != len(tbl.Columns) {
			t.Errorf("%s: %d source columns, %d replicated", name, live, len(tbl.Columns))
		}
		diffs, err := chcompare.Compare(ctx, pg, conn.Native(), tbl, 20)
		if err != nil {
			t.Errorf("comparing %s: %v", name, err)
			continue
		}
		for _, d := range diffs {
			t.Errorf("%s: %s", name, d)
		}
		t.Logf("%s: %d source rows compared, %d differences", name, r.src.QueryInt(t, fmt.Sprintf("SELECT count(*) FROM %s", tbl.Source)), len(diffs))
	}
}

// logLines collects log output for assertions.
type logLines struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logLines) String() string {
	if l == nil {
		return "" // a stream started without its log collected
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// logMatching logs (t.Log) the lines of the log that hold substr.
func (l *logLines) logMatching(t testing.TB, substr string) {
	t.Helper()
	for _, line := range strings.Split(l.String(), "\n") {
		if strings.Contains(line, substr) {
			t.Log(line)
		}
	}
}

// waitLog waits until the log holds substr.
func (l *logLines) waitLog(t *testing.T, substr string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(l.String(), substr) {
		if time.Now().After(deadline) {
			t.Fatalf("no log line with %q after %s; log tail:\n%s", substr, timeout, tail(l.String(), 3000))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
