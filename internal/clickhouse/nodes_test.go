package clickhouse

import (
	"errors"
	"strings"
	"testing"
)

// TestJudgeNodes: mixed dialects are refused in one line naming every
// node's version; a node without {shard} or {replica}, replicas of one
// shard that differ in {shard} or share {replica} are refused naming the
// node; a node that did not answer is judged by nobody.
func TestJudgeNodes(t *testing.T) {
	node := func(port uint16, shard, replica uint32, version string, macros map[string]string) NodeFacts {
		return NodeFacts{Node: Node{Host: "10.0.0.1", Port: port, Shard: shard, Replica: replica}, Version: version, Macros: macros}
	}
	m := func(shard, replica string) map[string]string {
		out := map[string]string{"other": "x"}
		if shard != "" {
			out["shard"] = shard
		}
		if replica != "" {
			out["replica"] = replica
		}
		return out
	}
	down := node(9002, 1, 3, "", nil)
	down.Err = errors.New("connection refused")
	for _, tc := range []struct {
		name  string
		facts []NodeFacts
		want  []string // substrings of the one-line error; none: fit
	}{
		{"one node", []NodeFacts{node(9000, 1, 1, "18.16.1", m("01", "r1"))}, nil},
		{"two replicas of one release", []NodeFacts{
			node(9000, 1, 1, "18.16.1", m("01", "r1")), node(9001, 1, 2, "18.16.1", m("01", "r2"))}, nil},
		{"patch releases of one dialect", []NodeFacts{
			node(9000, 1, 1, "23.8.2.7", m("01", "r1")), node(9001, 1, 2, "23.8.16.40", m("01", "r2"))}, nil},
		{"a node down is not judged", []NodeFacts{
			node(9000, 1, 1, "18.16.1", m("01", "r1")), down}, nil},
		{"mixed dialects", []NodeFacts{
			node(9000, 1, 1, "18.16.1", m("01", "r1")), node(9001, 1, 2, "23.8.2.7", m("01", "r2"))},
			[]string{"differ in what they take (10.0.0.1:9000 18.16.1, 10.0.0.1:9001 23.8.2)", "once, for every node"}},
		{"a version that does not parse", []NodeFacts{
			node(9000, 1, 1, "18.16.1", m("01", "r1")), node(9001, 1, 2, "banana", m("01", "r2"))},
			[]string{"node 10.0.0.1:9001: parsing ClickHouse version \"banana\""}},
		{"no replica macro", []NodeFacts{
			node(9000, 1, 1, "18.16.1", m("01", "r1")), node(9001, 1, 2, "18.16.1", m("01", ""))},
			[]string{"node 10.0.0.1:9001 has no {replica} macro"}},
		{"no macros at all", []NodeFacts{node(9000, 1, 1, "18.16.1", nil)},
			[]string{"node 10.0.0.1:9000 has no {shard} or {replica} macro"}},
		{"replicas of one shard differ in {shard}", []NodeFacts{
			node(9000, 1, 1, "18.16.1", m("01", "r1")), node(9001, 1, 2, "18.16.1", m("02", "r2"))},
			[]string{`the replicas of shard 1 differ in {shard} ("01" on 10.0.0.1:9000; "02" on 10.0.0.1:9001)`}},
		{"replicas of one shard share {replica}", []NodeFacts{
			node(9000, 1, 1, "18.16.1", m("01", "r1")), node(9001, 1, 2, "18.16.1", m("01", "r1"))},
			[]string{`nodes 10.0.0.1:9000 and 10.0.0.1:9001 share {replica} "r1" in shard 1`}},
		{"two shards may share a replica name", []NodeFacts{
			node(9000, 1, 1, "18.16.1", m("01", "r1")), node(9001, 2, 1, "18.16.1", m("02", "r1"))}, nil},
		{"dialect and macros both", []NodeFacts{
			node(9000, 1, 1, "18.16.1", m("01", "r1")), node(9001, 1, 2, "24.3.1.2672", m("", "r2"))},
			[]string{"10.0.0.1:9001 24.3.1", "node 10.0.0.1:9001 has no {shard} macro"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := JudgeNodes(tc.facts)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("unfit: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("fit, want an error with %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			// Each check is one line.
			for _, check := range []error{CheckDialects(tc.facts), CheckMacros(tc.facts)} {
				if check != nil && strings.Contains(check.Error(), "\n") {
					t.Errorf("more than one line: %q", check)
				}
			}
		})
	}
}

func TestNodeFactsName(t *testing.T) {
	f := NodeFacts{Node: Node{Host: "ch-2", Port: 9000, Shard: 1, Replica: 2}}
	if got, want := f.Name(), "ch-2:9000 (shard 1, replica 2)"; got != want {
		t.Errorf("Name() = %q, want %q", got, want)
	}
}

func TestErrorLine(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{errors.New("connection refused"), "connection refused"},
		{errors.New("code: 999, message: All connection tries failed. Addresses: zk:2181\nPoco::Exception. Code: 1000\n (Connection loss)"),
			"code: 999, message: All connection tries failed. Addresses: zk:2181 …"},
	} {
		if got := ErrorLine(tc.err); got != tc.want {
			t.Errorf("ErrorLine(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
