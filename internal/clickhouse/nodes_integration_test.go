package clickhouse

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/testrig"
)

// TestReadNodesIntegration: on two replicas of one shard, ReadNodes reads
// each node's version, macros and replicas of the target database over a
// connection of its own; a stopped node and a frozen one get Err naming
// them within NodeTimeout while the other is still read; ZooKeeper away
// shows on every node as ZooKeeperErr; a wrong password is never printed.
func TestReadNodesIntegration(t *testing.T) {
	cluster := testrig.StartClickHouseCluster(t, testrig.TwoReplicas)
	b := cluster.Nodes[1]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg := ConnConfig{DSN: cluster.NodeDSN(0, "default"), Cluster: testrig.ClusterName}
	conn, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	topo := conn.Topology()
	target := Target{Database: "nodes", Table: "public.t"}
	create, err := CreateDatabase(target.Database)
	if err != nil {
		t.Fatal(err)
	}
	spec := ColumnSpec{Name: "id", Type: ColumnType{Type: "Int64", Repr: ReprInt}}
	table, err := CreateTable(conn.Dialect(), target, []ColumnSpec{spec}, []string{"id"}, TableOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{create, table} {
		if err := conn.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	if err := conn.Insert(ctx, target, []ColumnSpec{spec, {Name: ColLSN, Type: ColumnType{Type: "UInt64", Repr: ReprInt}}}, [][]any{{int64(1), uint64(10)}}); err != nil {
		t.Fatal(err)
	}

	facts := ReadNodes(ctx, cfg, topo, target.Database)
	if len(facts) != 2 {
		t.Fatalf("%d nodes read, want 2", len(facts))
	}
	for i, f := range facts {
		shard, replica := cluster.Macros(i)
		if f.Err != nil || f.ZooKeeperErr != nil {
			t.Fatalf("node %d: %v, ZooKeeper: %v", i+1, f.Err, f.ZooKeeperErr)
		}
		if f.Node.Addr() != cluster.Nodes[i].NativeAddr() || f.Version != "18.16.1" ||
			f.Macros["shard"] != shard || f.Macros["replica"] != replica || f.Tables != 1 || f.ReadOnly != 0 {
			t.Errorf("node %d: %+v; want %s, 18.16.1, macros %s/%s, 1 table", i+1, f, cluster.Nodes[i].NativeAddr(), shard, replica)
		}
		t.Logf("%s: queue %d, delay %s", f.Name(), f.ReplicationQueue, f.MaxDelay)
	}
	if err := JudgeNodes(facts); err != nil {
		t.Errorf("the rig's cluster judged unfit: %v", err)
	}
	if other := ReadNodes(ctx, cfg, topo, "no_such_db"); other[0].Err != nil || other[0].Tables != 0 || other[0].MaxDelay != 0 {
		t.Errorf("a database without tables: %+v", other[0])
	}

	// A node away, then a node hung: named, and only it.
	checkOneDown := func(what string) {
		t.Helper()
		started := time.Now()
		facts := ReadNodes(ctx, cfg, topo, target.Database)
		took := time.Since(started)
		if facts[0].Err != nil || facts[0].Version == "" {
			t.Errorf("%s: node A: %+v", what, facts[0])
		}
		if facts[1].Err == nil || !strings.Contains(facts[1].Err.Error(), "node "+b.NativeAddr()) {
			t.Errorf("%s: node B's error does not name it: %v", what, facts[1].Err)
		}
		if took > NodeTimeout+2*time.Second {
			t.Errorf("%s: ReadNodes took %s (NodeTimeout %s)", what, took, NodeTimeout)
		}
		t.Logf("%s, after %s: %v", what, took.Round(time.Millisecond), facts[1].Err)
	}
	b.StopServer(t)
	checkOneDown("node B stopped")
	b.StartServer(t)
	b.FreezeServer(t)
	checkOneDown("node B frozen")
	b.ThawServer(t)

	// A wrong password: refused, and not printed.
	const password = "hunter2-not-shown"
	bad := ConnConfig{DSN: strings.Replace(cfg.DSN, "default:@", "default:"+password+"@", 1)}
	for _, f := range ReadNodes(ctx, bad, topo, target.Database) {
		if f.Err == nil || strings.Contains(f.Err.Error(), password) || !strings.Contains(f.Err.Error(), `as user "default"`) {
			t.Errorf("wrong password: %v", f.Err)
		}
		t.Logf("wrong password: %v", f.Err)
	}

	// ZooKeeper away: every node says so, and still answers.
	cluster.ZK.Stop(t)
	for _, f := range ReadNodes(ctx, cfg, topo, target.Database) {
		if f.Err != nil || f.ZooKeeperErr == nil || !strings.Contains(f.ZooKeeperErr.Error(), f.Node.Addr()) {
			t.Errorf("ZooKeeper stopped: %s: %v, ZooKeeper: %v", f.Name(), f.Err, f.ZooKeeperErr)
		}
	}
}
