package main

import (
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
