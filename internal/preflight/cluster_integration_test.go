package preflight

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/testrig"
)

// TestClickHouseClusterPreflight: on two replicas of one shard, preflight
// reports ZooKeeper and each node with its version and macros, and
// creates, writes and drops its scratch table ON CLUSTER; with node B
// stopped it warns naming B and skips the checks that would wait for it,
// within seconds; with ZooKeeper stopped it fails naming the remedy.
func TestClickHouseClusterPreflight(t *testing.T) {
	cluster := testrig.StartClickHouseCluster(t, testrig.TwoReplicas)
	a, b := cluster.Nodes[0], cluster.Nodes[1]
	cfg := clickhouse.ConnConfig{DSN: cluster.NodeDSN(0, "default"), Cluster: testrig.ClusterName}
	run := func(what string) (Report, time.Duration) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		started := time.Now()
		r := ClickHouse(ctx, cfg, "pf")
		took := time.Since(started)
		t.Logf("%s, %s:\n%s", what, took.Round(time.Millisecond), r)
		return r, took
	}

	r, _ := run("every node up")
	if r.Err() != nil || r.Count(Warning) != 0 {
		t.Errorf("a fit cluster: %v", r.Err())
	}
	want(t, r, "clickhouse_zookeeper", Info, "ZooKeeper answers")
	for i, n := range cluster.Nodes {
		shard, replica := cluster.Macros(i)
		want(t, r, "clickhouse_node", Info, n.NativeAddr(), "ClickHouse 18.16.1", "replica="+replica, "shard="+shard)
	}
	want(t, r, "clickhouse_write", Info, "created, wrote and dropped a scratch table")
	for _, n := range cluster.Nodes {
		if got := n.HTTPQuery(t, "SELECT count() FROM system.tables WHERE database = 'pf'"); got != "0" {
			t.Errorf("%s keeps %s scratch tables", n.NativeAddr(), got)
		}
	}

	b.StopServer(t)
	r, took := run("node B stopped")
	if r.Err() != nil {
		t.Errorf("node B stopped is not an error: %v", r.Err())
	}
	want(t, r, "clickhouse_node", Warning, b.NativeAddr(), "does not answer")
	want(t, r, "clickhouse_node", Info, a.NativeAddr())
	want(t, r, "clickhouse_write", Warning, "skipped clickhouse_database and clickhouse_write")
	if took > 2*clickhouse.NodeTimeout {
		t.Errorf("preflight took %s with node B stopped", took)
	}
	b.StartServer(t)

	cluster.ZK.Stop(t)
	r, took = run("ZooKeeper stopped")
	want(t, r, "clickhouse_zookeeper", Error, "ZooKeeper does not answer the server the DSN reaches")
	if f := r.Find("clickhouse_zookeeper"); len(f) != 1 || !strings.Contains(f[0].Remedy, "<zookeeper>") {
		t.Errorf("no remedy naming <zookeeper>: %+v", f)
	}
	for _, n := range cluster.Nodes {
		want(t, r, "clickhouse_node", Warning, n.NativeAddr(), "cannot read ZooKeeper")
	}
	want(t, r, "clickhouse_write", Warning, "skipped clickhouse_database and clickhouse_write: their statements ON CLUSTER need ZooKeeper")
	for _, f := range r {
		if strings.Contains(f.Detail, "\n") {
			t.Errorf("a finding of more than one line: %q", f.Detail)
		}
	}
	if took > time.Minute {
		t.Errorf("preflight took %s with ZooKeeper stopped", took)
	}
}
