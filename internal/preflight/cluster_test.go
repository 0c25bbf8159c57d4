package preflight

import (
	"errors"
	"strings"
	"testing"

	"github.com/walshadow/walshadow/internal/clickhouse"
)

// TestClusterFindings: each node is one line (Info with its version and
// macros; a Warning naming a node that does not answer or cannot reach
// ZooKeeper); mixed dialects and bad macros are one Error line each; DDL
// checks run only when every node answered.
func TestClusterFindings(t *testing.T) {
	node := func(port uint16, replica uint32, version, shardMacro, replicaMacro string) clickhouse.NodeFacts {
		return clickhouse.NodeFacts{Node: clickhouse.Node{Host: "ch", Port: port, Shard: 1, Replica: replica}, Version: version,
			Macros: map[string]string{"shard": shardMacro, "replica": replicaMacro}}
	}
	a := node(9000, 1, "18.16.1", "01", "r1")
	b := node(9001, 2, "18.16.1", "01", "r2")
	down := b
	down.Err = errors.New("connecting to node ch:9001: connection refused")
	noZK := b
	noZK.ZooKeeperErr = errors.New("node ch:9001 cannot read ZooKeeper: code: 999, message: All connection tries failed\nPoco::Exception. Code: 1000\n (Connection loss)")
	type line struct {
		check  string
		sev    Severity
		detail string // a substring
	}
	for _, tc := range []struct {
		name  string
		facts []clickhouse.NodeFacts
		want  []line
		ddlOK bool
	}{
		{"every node fit", []clickhouse.NodeFacts{a, b}, []line{
			{"clickhouse_node", Info, "ch:9000 (shard 1, replica 1): ClickHouse 18.16.1, macros replica=r1, shard=01"},
			{"clickhouse_node", Info, "ch:9001 (shard 1, replica 2): ClickHouse 18.16.1, macros replica=r2, shard=01"},
		}, true},
		{"a node down", []clickhouse.NodeFacts{a, down}, []line{
			{"clickhouse_node", Info, "ch:9000"},
			{"clickhouse_node", Warning, "ch:9001 (shard 1, replica 2) does not answer: connecting to node ch:9001: connection refused"},
		}, false},
		{"a node without ZooKeeper", []clickhouse.NodeFacts{a, noZK}, []line{
			{"clickhouse_node", Info, "ch:9000"},
			{"clickhouse_node", Warning, "ch:9001 (shard 1, replica 2): ClickHouse 18.16.1, macros replica=r2, shard=01; node ch:9001 cannot read ZooKeeper: code: 999, message: All connection tries failed …"},
		}, true},
		{"mixed dialects", []clickhouse.NodeFacts{a, node(9001, 2, "23.8.2.7", "01", "r2")}, []line{
			{"clickhouse_node", Info, "ch:9000"},
			{"clickhouse_node", Info, "ch:9001"},
			{"clickhouse_cluster_dialect", Error, "(ch:9000 18.16.1, ch:9001 23.8.2)"},
		}, true},
		{"a replica macro missing", []clickhouse.NodeFacts{a, node(9001, 2, "18.16.1", "01", "")}, []line{
			{"clickhouse_node", Info, "ch:9000"},
			{"clickhouse_node", Info, "ch:9001"},
			{"clickhouse_cluster_macros", Error, "node ch:9001 has no {replica} macro"},
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ddlOK := clusterFindings(tc.facts)
			if ddlOK != tc.ddlOK {
				t.Errorf("ddlOK = %v, want %v", ddlOK, tc.ddlOK)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%d findings, want %d:\n%s", len(got), len(tc.want), got)
			}
			for i, w := range tc.want {
				f := got[i]
				if f.Check != w.check || f.Severity != w.sev || !strings.Contains(f.Detail, w.detail) || strings.Contains(f.Detail, "\n") {
					t.Errorf("finding %d = %+v, want %s %s with %q on one line", i, f, w.sev, w.check, w.detail)
				}
				if f.Severity != Info && f.Remedy == "" {
					t.Errorf("finding %d has no remedy: %+v", i, f)
				}
			}
		})
	}
}
