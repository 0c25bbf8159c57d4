package main

import (
	"fmt"

	"github.com/redpanda-data/benthos/v4/public/service"
)

// checkMessageForm refuses, at start, a config whose walshadow_decode sends
// change batch messages (messages: batch) anywhere but straight into the
// clickhouse_ddl output: a processor after it would see one message per
// batch (a mapping masking a column would mask nothing, and the rows would
// reach ClickHouse as decoded), and another output could not read them.
func checkMessageForm(conf *service.ParsedConfig) error {
	root, err := conf.FieldAny()
	if err != nil {
		return nil // nothing to check (benthos reports what it cannot parse)
	}
	tree, _ := plain(root).(map[string]any)
	return messageFormError(tree)
}

// plain is v with the YAML nodes benthos keeps of components' configs
// decoded into maps and lists.
func plain(v any) any {
	switch t := v.(type) {
	case interface{ Decode(any) error }: // a *yaml.Node
		var out any
		if err := t.Decode(&out); err != nil {
			return nil
		}
		return plain(out)
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = plain(e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = plain(e)
		}
		return out
	}
	return v
}

// messageFormError is checkMessageForm over the config as a tree.
func messageFormError(root map[string]any) error {
	procs := listAt(root, "pipeline", "processors")
	output, _ := root["output"].(map[string]any)
	for i, p := range procs {
		if !batchDecode(p) {
			continue
		}
		switch {
		case i != len(procs)-1:
			return fmt.Errorf("pipeline.processors[%d]: walshadow_decode with messages: batch must be the last processor (the next one would see a whole batch as one message): set messages: row, or move the processors after it to before it", i)
		case output == nil || output["clickhouse_ddl"] == nil:
			return fmt.Errorf("pipeline.processors[%d]: walshadow_decode with messages: batch needs the clickhouse_ddl output right after it (no other output reads a change batch): set messages: row", i)
		case len(listAt(root, "output", "processors")) > 0:
			return fmt.Errorf("pipeline.processors[%d]: walshadow_decode with messages: batch sends to an output with processors of its own (they would see a whole batch as one message): set messages: row, or move them before walshadow_decode", i)
		}
	}
	for _, where := range [][]string{{"input", "processors"}, {"output", "processors"}} {
		for i, p := range listAt(root, where...) {
			if batchDecode(p) {
				return fmt.Errorf("%s.%s[%d]: walshadow_decode with messages: batch belongs last in pipeline.processors, before the clickhouse_ddl output", where[0], where[1], i)
			}
		}
	}
	return nil
}

// listAt is the list at path in tree (nil when there is none).
func listAt(tree map[string]any, path ...string) []any {
	var v any = tree
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	l, _ := v.([]any)
	return l
}

// batchDecode tells a walshadow_decode processor set to messages: batch.
func batchDecode(p any) bool {
	m, _ := p.(map[string]any)
	d, _ := m["walshadow_decode"].(map[string]any)
	return d != nil && d["messages"] == "batch"
}
