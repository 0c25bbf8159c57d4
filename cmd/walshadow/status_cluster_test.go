package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/walshadow/walshadow/internal/clickhouse"
)

// TestClusterTargets: the clickhouse_ddl outputs of the status's session
// that name a cluster (${ENV} interpolated, an unset variable empty) are
// the NODES to read, in output and in output_resources; an output of
// another session or without a cluster is not.
func TestClusterTargets(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.yaml")
	conf := `
walshadow:
  - label: main
    source_dsn: ${PG_SOURCE_DSN_UNSET_HERE}
    state_dir: /nonexistent
input:
  pg_physical_wal: { session: main }
output:
  broker:
    outputs:
      - clickhouse_ddl:
          session: main
          dsn: clickhouse://u:pw@ch-a:9000/app
          database: ${WS_TEST_CH_DATABASE:walshadow}
          cluster: ${WS_TEST_CH_CLUSTER:}
      - clickhouse_ddl:
          session: other
          dsn: clickhouse://u@ch-b:9000/app
          cluster: far
      - clickhouse_ddl:
          session: main
          dsn: clickhouse://u@ch-c:9000/app
output_resources:
  - label: spare
    clickhouse_ddl:
      session: main
      dsn: clickhouse://u@ch-d:9000/app
      cluster: spare_cluster
`
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := clusterTargets(path, "main")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].conn.Cluster != "spare_cluster" || got[0].conn.DSN != "clickhouse://u@ch-d:9000/app" {
		t.Errorf("without WS_TEST_CH_CLUSTER: %+v, want the output resource's cluster alone", got)
	}
	t.Setenv("WS_TEST_CH_CLUSTER", "ws")
	got, err = clusterTargets(path, "main")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].conn.Cluster != "ws" || got[0].database != "walshadow" || got[0].conn.DSN != "clickhouse://u:pw@ch-a:9000/app" {
		t.Errorf("with WS_TEST_CH_CLUSTER=ws: %+v", got)
	}
	if got, err := clusterTargets(path, "other"); err != nil || len(got) != 1 || got[0].conn.Cluster != "far" {
		t.Errorf("session other: %+v, %v", got, err)
	}
	if _, err := clusterTargets(filepath.Join(t.TempDir(), "none.yaml"), "main"); err == nil {
		t.Error("a missing config is no error")
	}
}

// TestWriteNodes: NODES lists every node with its shard, replica, macros,
// version, queue, delay and state; a node down says DOWN with the first
// line of its error; ZooKeeper lost and read-only tables are said; a
// server not reached is one line; control characters stay escaped in
// their cell.
func TestWriteNodes(t *testing.T) {
	node := func(port uint16, replica uint32) clickhouse.Node {
		return clickhouse.Node{Host: "127.0.0.1", Port: port, Shard: 1, Replica: replica}
	}
	r := &statusReport{clusters: []clusterStatus{
		{cluster: "ws", database: "walshadow", nodes: []clickhouse.NodeFacts{
			{Node: node(9000, 1), Version: "18.16.1", Macros: map[string]string{"shard": "01", "replica": "r1"}, Tables: 12, ReplicationQueue: 0},
			{Node: node(9001, 2), Version: "18.16.1", Macros: map[string]string{"shard": "01", "replica": "r2"}, Tables: 12,
				ReplicationQueue: 37, MaxDelay: 95 * time.Second, ReadOnly: 2,
				ZooKeeperErr: fmt.Errorf("node 127.0.0.1:9001 cannot read ZooKeeper: %w", errors.New("code: 999, message: All connection tries failed\nPoco::Exception"))},
			{Node: node(9002, 3), Err: errors.New("connecting to node 127.0.0.1:9002 as user \"u\": dial tcp: connection\trefused\nmore")},
		}},
		{cluster: "other", err: errors.New(`connecting to ClickHouse at ch:9000 as user "u": dial tcp: i/o timeout`)},
	}}
	var b bytes.Buffer
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	r.writeNodes(w)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		`NODES\s+cluster ` + "`ws`" + `, database ` + "`walshadow`" + `: 3 node\(s\); QUEUE .*`,
		`NODE\s+SHARD\s+REPLICA\s+MACROS\s+VERSION\s+QUEUE\s+DELAY\s+STATE`,
		`127\.0\.0\.1:9000\s+1\s+1\s+shard=01 replica=r1\s+18\.16\.1\s+0\s+0 s\s+up, 12 table\(s\)`,
		`127\.0\.0\.1:9001\s+1\s+2\s+shard=01 replica=r2\s+18\.16\.1\s+37\s+1 min 35 s\s+up, 12 table\(s\), 2 read-only \(no ZooKeeper session\); ZooKeeper: code: 999, message: All connection tries failed …`,
		`127\.0\.0\.1:9002\s+1\s+3\s+-\s+-\s+-\s+-\s+DOWN: connecting to node 127\.0\.0\.1:9002 as user \\"u\\": dial tcp: connection\\trefused …`,
		`NODES\s+cluster ` + "`other`" + `: ClickHouse not reached: connecting to ClickHouse at ch:9000 as user "u": dial tcp: i/o timeout`,
	} {
		if !regexp.MustCompile("(?m)^" + want + "$").MatchString(out) {
			t.Errorf("output lacks %s:\n%s", want, out)
		}
	}
	if strings.Count(out, "\n") != 8 {
		t.Errorf("%d lines, want 8 (a blank line and a head per cluster, a header and 3 nodes):\n%s", strings.Count(out, "\n"), out)
	}

	r = &statusReport{clustersErr: errors.New("parsing p.yaml: bad\nindent")}
	b.Reset()
	r.writeNodes(&b)
	if got := b.String(); got != "\nNODES\t? the clickhouse_ddl outputs: parsing p.yaml: bad …\n" {
		t.Errorf("an unreadable config: %q", got)
	}
}
