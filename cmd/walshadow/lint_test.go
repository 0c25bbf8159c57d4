package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"gopkg.in/yaml.v3"

	"github.com/walshadow/walshadow/internal/msg"
	"github.com/walshadow/walshadow/processor"
)

// lint runs `walshadow lint` in-process on yaml and returns its exit code.
func lint(t *testing.T, yaml string, env ...string) int {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(env); i += 2 {
		t.Setenv(env[i], env[i+1])
	}
	code, err := lintPaths(path)
	if err != nil {
		t.Fatal(err)
	}
	return code
}

// lintPaths runs `walshadow lint args...` in-process: its exit code and
// the error it ends with.
func lintPaths(args ...string) (int, error) {
	opts := append(cliOptions(), service.CLIOptSetArgs(append([]string{"walshadow", "lint"}, args...)...))
	return service.RunCLIToCode(context.Background(), opts...)
}

const sessionYAML = `
walshadow:
  - label: main
    source_dsn: ${PG_SOURCE_DSN}
    state_dir: ${WALSHADOW_STATE_DIR:./var/walshadow}
input:
  pg_physical_wal:
    session: main
output:
  drop: {}
`

func TestLintSessionConfig(t *testing.T) {
	if code := lint(t, sessionYAML, "PG_SOURCE_DSN", "postgres://u@localhost/app"); code != 0 {
		t.Fatalf("valid config: exit %d", code)
	}
	os.Unsetenv("PG_SOURCE_DSN")
	if code := lint(t, sessionYAML); code == 0 {
		t.Fatal("missing PG_SOURCE_DSN passed lint")
	}
	noStateDir := `
walshadow:
  - label: main
    source_dsn: postgres://u@localhost/app
input:
  pg_physical_wal:
    session: main
output:
  drop: {}
`
	if code := lint(t, noStateDir); code == 0 {
		t.Fatal("missing state_dir passed lint")
	}
	emptyDSN := `
walshadow:
  - label: main
    source_dsn: ""
    state_dir: /tmp/x
input:
  pg_physical_wal:
    session: main
output:
  drop: {}
`
	if code := lint(t, emptyDSN); code == 0 {
		t.Fatal("empty source_dsn passed lint")
	}
	typo := `
walshadow:
  - label: main
    source_dsn: postgres://u@localhost/app
    state_dir: /tmp/x
    hold_timout: 5s
input:
  pg_physical_wal:
    session: main
output:
  drop: {}
`
	if code := lint(t, typo); code == 0 {
		t.Fatal("misspelt field passed lint")
	}
}

// exampleEnv holds a placeholder for every environment variable an example
// pipeline requires (referenced without a default).
var exampleEnv = map[string]string{
	"PG_SOURCE_DSN":  "postgres://walshadow@localhost/app",
	"CLICKHOUSE_DSN": "clickhouse://default:@localhost:9000/default",
}

// requiredEnv matches ${NAME} without a default (benthos' ${NAME:default}
// has one; ${! ...} is an interpolation function, not a variable).
var requiredEnv = regexp.MustCompile(`\$\{([0-9A-Za-z_.]+)\}`)

// TestExamplePipelinesLint lints every pipeline shipped under
// resources/pipelines, whatever its name, with the variables it requires set.
func TestExamplePipelinesLint(t *testing.T) {
	var files []string
	for _, pattern := range []string{"*.yaml", "*.yml"} {
		m, err := filepath.Glob(filepath.Join(examplesDir, pattern))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) == 0 {
		t.Fatalf("no example pipelines found in %s", examplesDir)
	}
	for _, want := range []string{"pg_to_clickhouse.yaml", "pg_to_clickhouse_schema_log.yaml", "pg_to_clickhouse_masked.yaml", "pg_to_clickhouse_pinned.yaml"} {
		if !slices.Contains(files, filepath.Join(examplesDir, want)) {
			t.Errorf("example %s is missing from %s", want, examplesDir)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(exampleEnv)) {
		t.Setenv(name, exampleEnv[name])
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range requiredEnv.FindAllStringSubmatch(string(b), -1) {
				if _, ok := exampleEnv[m[1]]; !ok {
					t.Errorf("requires ${%s}, which exampleEnv does not set: give it a default or add it there", m[1])
				}
			}
			opts := append(cliOptions(), service.CLIOptSetArgs("walshadow", "lint", f))
			if code, err := service.RunCLIToCode(context.Background(), opts...); err != nil || code != 0 {
				t.Errorf("lint exit %d (%v)", code, err)
			}
		})
	}
}

const examplesDir = "../../resources/pipelines"

// exampleConfig parses an example pipeline as plain YAML (no variables
// interpolated: the parts tests take from it need none).
func exampleConfig(t *testing.T, name string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(examplesDir, name))
	if err != nil {
		t.Fatal(err)
	}
	var conf map[string]any
	if err := yaml.Unmarshal(b, &conf); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return conf
}

// path walks nested YAML maps and lists: a string steps into a map, an int
// into a list.
func path(t *testing.T, v any, steps ...any) any {
	t.Helper()
	for i, s := range steps {
		switch k := s.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("at %v: %T is not a map", steps[:i+1], v)
			}
			if v, ok = m[k]; !ok {
				t.Fatalf("at %v: no key %q", steps[:i+1], k)
			}
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				t.Fatalf("at %v: %T has no element %d", steps[:i+1], v, k)
			}
			v = l[k]
		}
	}
	return v
}

// runProcessors runs the processor configs (YAML nodes of an example) on
// msgs in a real benthos stream and returns the messages that come out.
func runProcessors(t *testing.T, procs []any, msgs ...*service.Message) []*service.Message {
	t.Helper()
	sb := service.NewStreamBuilder()
	if err := sb.SetLoggerYAML("level: none"); err != nil {
		t.Fatal(err)
	}
	produce, err := sb.AddBatchProducerFunc()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		b, err := yaml.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := sb.AddProcessorYAML(string(b)); err != nil {
			t.Fatalf("processor %s: %v", b, err)
		}
	}
	var mu sync.Mutex
	var out []*service.Message
	if err := sb.AddBatchConsumerFunc(func(_ context.Context, b service.MessageBatch) error {
		mu.Lock()
		defer mu.Unlock()
		out = append(out, b...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	stream, err := sb.Build()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- stream.Run(ctx) }()
	if err := produce(ctx, msgs); err != nil {
		t.Fatalf("producing: %v", err)
	}
	if err := stream.Stop(ctx); err != nil {
		t.Fatalf("stopping the stream: %v", err)
	}
	<-done
	mu.Lock()
	defer mu.Unlock()
	return out
}

// decodedMessage builds a message as walshadow_decode does: a structured
// payload and its metadata.
func decodedMessage(payload map[string]any, meta map[string]string) *service.Message {
	m := service.NewMessage(nil)
	m.SetStructuredMut(payload)
	for k, v := range meta {
		m.MetaSetMut(k, v)
	}
	// The typed change as walshadow_decode sets it beside the strings.
	c, err := msg.ChangeFromStrings(func(k string) (string, bool) { v, ok := meta[k]; return v, ok })
	if err != nil {
		panic(err)
	}
	m.MetaSetMut(msg.KeyChange, c)
	return m
}

func rowMeta(op, schema, table, lsn string) map[string]string {
	return map[string]string{
		processor.MetaOperation: op, processor.MetaSchema: schema, processor.MetaTable: table,
		processor.MetaRelationOid: "16384", processor.MetaLSN: lsn, processor.MetaCommitLSN: "0/3000B10",
		processor.MetaXID: "741", processor.MetaCommitTime: "2026-11-30T14:02:03.5Z",
		processor.MetaDescVersion: "0/3000000", processor.MetaKey: "id",
	}
}

func schemaMeta(event, lsn string) map[string]string {
	m := rowMeta(processor.OperationSchema, "public", "users", lsn)
	m[processor.MetaEvent] = event
	m[processor.MetaDescVersion] = lsn
	delete(m, processor.MetaKey)
	return m
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestExampleMaskedMapping runs pg_to_clickhouse_masked.yaml's processors
// after walshadow_decode on messages shaped like the decoder's.
func TestExampleMaskedMapping(t *testing.T) {
	conf := exampleConfig(t, "pg_to_clickhouse_masked.yaml")
	procs := path(t, conf, "pipeline", "processors").([]any)
	if _, ok := path(t, procs, 0).(map[string]any)["walshadow_decode"]; !ok {
		t.Fatalf("the first processor is not walshadow_decode: %v", procs[0])
	}
	// The output must not expect the column the mapping removes.
	excluded := path(t, conf, "output", "clickhouse_ddl", "tables", "public.users", "exclude_columns").([]any)
	if !slices.Contains(excluded, any("password_hash")) {
		t.Errorf("clickhouse_ddl does not exclude public.users.password_hash, which the mapping removes: %v", excluded)
	}

	schemaPayload := map[string]any{
		"format": 1, "event": "changed", "schema": "public", "table": "users",
		// Not a real shape key: a mapping that ran on the event would show.
		"email":         "shape@example.com",
		"password_hash": "kept",
		"columns":       []any{map[string]any{"name": "email", "type": "text"}},
	}
	in := []*service.Message{
		decodedMessage(map[string]any{"id": int64(1), "email": "Ann@example.com", "password_hash": "$2b$x", "name": "Ann"},
			rowMeta(processor.OperationInsert, "public", "users", "0/3000A28")),
		// A delete carries the key only: no email is made up.
		decodedMessage(map[string]any{"id": int64(1)}, rowMeta(processor.OperationDelete, "public", "users", "0/3000A30")),
		decodedMessage(map[string]any{"id": int64(2), "email": nil, "password_hash": nil},
			rowMeta(processor.OperationUpdate, "public", "users", "0/3000A38")),
		// Another table with the same column names is untouched.
		decodedMessage(map[string]any{"id": int64(3), "email": "bob@example.com", "password_hash": "h"},
			rowMeta(processor.OperationInsert, "public", "customers", "0/3000A40")),
		decodedMessage(schemaPayload, schemaMeta("changed", "0/3000A48")),
	}
	out := runProcessors(t, procs[1:], in...)
	if len(out) != len(in) {
		t.Fatalf("%d messages out of %d in", len(out), len(in))
	}
	want := []map[string]any{
		{"id": int64(1), "email": sha256Hex("Ann@example.com"), "name": "Ann"},
		{"id": int64(1)},
		{"id": int64(2), "email": nil},
		{"id": int64(3), "email": "bob@example.com", "password_hash": "h"},
		schemaPayload,
	}
	for i, m := range out {
		got, err := m.AsStructured()
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if err := m.GetError(); err != nil {
			t.Errorf("message %d is flagged with an error: %v", i, err)
		}
		if !reflect.DeepEqual(got, any(want[i])) {
			t.Errorf("message %d:\n got %v\nwant %v", i, got, want[i])
		}
		// Metadata is what the output keys on: it must survive the mapping.
		for _, k := range []string{processor.MetaOperation, processor.MetaSchema, processor.MetaTable, processor.MetaLSN, processor.MetaCommitLSN} {
			gv, _ := m.MetaGet(k)
			wv, _ := in[i].MetaGet(k)
			if gv != wv {
				t.Errorf("message %d: metadata %s = %q, want %q", i, k, gv, wv)
			}
		}
		gc, _ := m.MetaGetMut(msg.KeyChange)
		wc, _ := in[i].MetaGetMut(msg.KeyChange)
		if gc == nil || gc != wc {
			t.Errorf("message %d: the typed %s did not survive the mapping: %v, want %v", i, msg.KeyChange, gc, wc)
		}
	}
}

// TestExampleSchemaLogRouting: in pg_to_clickhouse_schema_log.yaml the file
// output gets schema events and truncates only, while clickhouse_ddl gets
// every message.
func TestExampleSchemaLogRouting(t *testing.T) {
	conf := exampleConfig(t, "pg_to_clickhouse_schema_log.yaml")
	if p := path(t, conf, "output", "broker", "pattern"); p != "fan_out" {
		t.Fatalf("broker pattern %v, want fan_out", p)
	}
	ch := path(t, conf, "output", "broker", "outputs", 0).(map[string]any)
	if _, ok := ch["clickhouse_ddl"]; !ok {
		t.Fatalf("the first broker output is not clickhouse_ddl: %v", ch)
	}
	if _, ok := ch["processors"]; ok {
		t.Fatal("the clickhouse_ddl branch has processors: it must receive every message, schema events included")
	}
	if _, ok := path(t, conf, "pipeline").(map[string]any)["processors"].([]any); !ok {
		t.Fatal("no pipeline processors")
	}
	if n := len(path(t, conf, "pipeline", "processors").([]any)); n != 1 {
		t.Fatalf("%d pipeline processors: anything after walshadow_decode would filter the ClickHouse branch too", n)
	}
	fileBranch := path(t, conf, "output", "broker", "outputs", 1).(map[string]any)
	path(t, fileBranch, "file", "path")
	procs := path(t, fileBranch, "processors").([]any)

	shape := map[string]any{"format": 1, "event": "added", "schema": "public", "table": "users",
		"columns": []any{map[string]any{"name": "id", "type": "int4"}}}
	truncateMeta := rowMeta(processor.OperationTruncate, "public", "users", "0/3000A50")
	truncateMeta[processor.MetaEvent] = processor.EventTruncate
	droppedMeta := map[string]string{
		processor.MetaOperation: processor.OperationSchema, processor.MetaEvent: "dropped",
		processor.MetaRelationOid: "16390", processor.MetaLSN: "0/3000A58", processor.MetaCommitLSN: "0/3000A60",
	}
	in := []*service.Message{
		decodedMessage(map[string]any{"id": int64(1)}, rowMeta(processor.OperationInsert, "public", "users", "0/3000A28")),
		decodedMessage(shape, schemaMeta("added", "0/3000A30")),
		decodedMessage(map[string]any{"id": int64(1)}, rowMeta(processor.OperationUpdate, "public", "users", "0/3000A38")),
		decodedMessage(map[string]any{"id": int64(1)}, rowMeta(processor.OperationDelete, "public", "users", "0/3000A40")),
		decodedMessage(map[string]any{}, truncateMeta),
		decodedMessage(map[string]any{"format": 1, "event": "dropped", "relation_oid": int64(16390)}, droppedMeta),
	}
	out := runProcessors(t, procs, in...)
	if len(out) != 3 {
		var ops []string
		for _, m := range out {
			op, _ := m.MetaGet(processor.MetaOperation)
			ops = append(ops, op)
		}
		t.Fatalf("the file got %d messages (%v), want the schema event, the truncate and the drop", len(out), ops)
	}
	type line struct {
		Op, Event, Schema, Table, LSN string
		RelationOid                   string         `json:"relation_oid"`
		Shape                         map[string]any `json:"shape"`
	}
	var got []line
	for i, m := range out {
		if err := m.GetError(); err != nil {
			t.Errorf("file message %d is flagged with an error: %v", i, err)
		}
		b, err := m.AsBytes()
		if err != nil {
			t.Fatal(err)
		}
		var l line
		if err := json.Unmarshal(b, &l); err != nil {
			t.Fatalf("file line %d is not JSON: %v: %s", i, err, b)
		}
		got = append(got, l)
	}
	if g := got[0]; g.Op != "schema" || g.Event != "added" || g.Schema != "public" || g.Table != "users" || g.LSN != "0/3000A30" || g.Shape["table"] != "users" {
		t.Errorf("schema event line: %+v", g)
	}
	if g := got[1]; g.Op != "truncate" || g.Event != "truncate" || g.Table != "users" || g.Shape != nil {
		t.Errorf("truncate line: %+v", g)
	}
	if g := got[2]; g.Op != "schema" || g.Event != "dropped" || g.RelationOid != "16390" || g.Table != "" {
		t.Errorf("dropped line: %+v", g)
	}
}

// TestExamplePinnedTables: pg_to_clickhouse_pinned.yaml shows each
// per-table setting it is there to show.
func TestExamplePinnedTables(t *testing.T) {
	conf := exampleConfig(t, "pg_to_clickhouse_pinned.yaml")
	tables := path(t, conf, "output", "clickhouse_ddl", "tables").(map[string]any)
	seen := map[string]bool{}
	for _, tc := range tables {
		for k := range tc.(map[string]any) {
			seen[k] = true
		}
	}
	for _, f := range []string{"columns", "exclude_columns", "column_types", "column_names", "order_by", "drop_strategy", "database", "table", "settings"} {
		if !seen[f] {
			t.Errorf("no table sets %s", f)
		}
	}
}

// TestLintClickHouseOutput: the output's required DSN and its enums are
// checked by lint, before anything connects.
func TestLintClickHouseOutput(t *testing.T) {
	base := `
walshadow:
  - label: main
    source_dsn: postgres://u@localhost/app
    state_dir: ./var/walshadow
input:
  pg_physical_wal:
    session: main
pipeline:
  processors:
    - walshadow_decode: { session: main }
output:
  clickhouse_ddl:
    session: main
`
	if code := lint(t, base+"    dsn: clickhouse://default:@localhost:9000/default\n"); code != 0 {
		t.Fatalf("valid config: exit %d", code)
	}
	if code := lint(t, base); code == 0 {
		t.Fatal("a clickhouse_ddl output without dsn passed lint")
	}
	if code := lint(t, base+"    dsn: clickhouse://localhost:9000\n    drop_strategy: explode\n"); code == 0 {
		t.Fatal("an unknown drop_strategy passed lint")
	}
	if code := lint(t, base+"    dsn: clickhouse://localhost:9000\n    tables:\n      public.t: { drop_strategy: sometimes }\n"); code == 0 {
		t.Fatal("an unknown per-table drop_strategy passed lint")
	}
}
