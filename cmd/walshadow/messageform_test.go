package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestMessageFormError: change batch messages go straight from the last
// processor to clickhouse_ddl, or the config is refused, naming the
// processor and the remedy.
func TestMessageFormError(t *testing.T) {
	for _, c := range []struct {
		name, yaml, want string
	}{
		{"row form anywhere", `
pipeline:
  processors:
    - walshadow_decode: {session: main}
    - mapping: root = this
output:
  stdout: {}`, ""},
		{"batch into clickhouse_ddl", `
pipeline:
  processors:
    - walshadow_decode: {session: main, messages: batch}
output:
  clickhouse_ddl: {session: main}`, ""},
		{"a mapping after it", `
pipeline:
  processors:
    - walshadow_decode: {session: main, messages: batch}
    - mapping: root = this
output:
  clickhouse_ddl: {session: main}`, "pipeline.processors[0]: walshadow_decode with messages: batch must be the last processor"},
		{"another output", `
pipeline:
  processors:
    - walshadow_decode: {session: main, messages: batch}
output:
  file: {path: out.jsonl}`, "needs the clickhouse_ddl output"},
		{"output processors", `
pipeline:
  processors:
    - walshadow_decode: {session: main, messages: batch}
output:
  clickhouse_ddl: {session: main}
  processors:
    - mapping: root = this`, "an output with processors of its own"},
		{"in the input's processors", `
input:
  pg_physical_wal: {session: main}
  processors:
    - walshadow_decode: {session: main, messages: batch}
output:
  clickhouse_ddl: {session: main}`, "input.processors[0]"},
	} {
		var tree map[string]any
		if err := yaml.Unmarshal([]byte(c.yaml), &tree); err != nil {
			t.Fatal(err)
		}
		err := messageFormError(tree)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
}

// TestLintChecksMessageForm: `walshadow lint` refuses what `run` refuses
// (a change batch not straight into clickhouse_ddl), naming the file and
// the processor, reads ${VAR:default} as lint does, and passes the
// reference pipeline.
func TestLintChecksMessageForm(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	conf := `
walshadow:
  - label: main
    source_dsn: postgres://u@localhost/app
    state_dir: ./var/walshadow
input:
  pg_physical_wal: {session: main}
pipeline:
  processors:
    - walshadow_decode: {session: main, messages: "${WS_TEST_MESSAGES:batch}"}
    - mapping: root = this
output:
  clickhouse_ddl: {session: main, dsn: "clickhouse://localhost:9000/default"}
`
	if err := os.WriteFile(bad, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	code, err := lintPaths(bad)
	if code == 0 || err == nil || !strings.Contains(err.Error(), bad+": pipeline.processors[0]: walshadow_decode with messages: batch must be the last processor") {
		t.Fatalf("lint of a batch form before a mapping: exit %d, %v", code, err)
	}
	if code, err := lintPaths(dir + "/..."); code == 0 || err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("lint of the directory: exit %d, %v", code, err)
	}
	t.Setenv("WS_TEST_MESSAGES", "row")
	if code, err := lintPaths(bad); code != 0 || err != nil {
		t.Fatalf("lint with messages: row: exit %d, %v", code, err)
	}
	t.Setenv("PG_SOURCE_DSN", "postgres://u@localhost/app")
	t.Setenv("CLICKHOUSE_DSN", "clickhouse://localhost:9000/default")
	if code, err := lintPaths("../../resources/pipelines/pg_to_clickhouse.yaml"); code != 0 || err != nil {
		t.Fatalf("lint of the reference pipeline: exit %d, %v", code, err)
	}
}
