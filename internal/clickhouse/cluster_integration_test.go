package clickhouse

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/testrig"
)

// TestClusterDDLWaitsForEveryNode: with node B stopped, a statement ON
// CLUSTER issued through node A does not return once A has run it; the
// node it waits on is named; it returns when B is back and has run it,
// and B then holds the table, Replicated, with A's rows.
func TestClusterDDLWaitsForEveryNode(t *testing.T) {
	defer func(w time.Duration) { ddlServerWait = w }(ddlServerWait)
	ddlServerWait = 2 * time.Second
	cluster := testrig.StartClickHouseCluster(t, testrig.TwoReplicas)
	a, b := cluster.Nodes[0], cluster.Nodes[1]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	var mu sync.Mutex
	var waits [][]string
	conn, err := Open(ctx, ConnConfig{DSN: cluster.NodeDSN(0, "default"), Cluster: testrig.ClusterName,
		OnClusterWait: func(stmt string, missing []string, waited time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			t.Logf("waiting %s on %v: %s", waited, missing, stmt)
			waits = append(waits, missing)
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if topo := conn.Topology(); len(topo.Nodes) != 2 || topo.Shards() != 1 || !conn.Dialect().Replicated {
		t.Fatalf("topology %s, replicated %v", topo, conn.Dialect().Replicated)
	}
	if _, err := Open(ctx, ConnConfig{DSN: cluster.NodeDSN(0, "default"), Cluster: "nope"}); err == nil || !strings.Contains(err.Error(), "cluster `nope` is not in the server's system.clusters (its clusters: ") ||
		!strings.Contains(err.Error(), "`"+testrig.ClusterName+"`") {
		t.Errorf("unknown cluster: %v", err)
	}

	target := Target{Database: "cl", Table: "public.t"}
	create, err := CreateDatabase(target.Database)
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Exec(ctx, create); err != nil {
		t.Fatal(err)
	}
	spec := ColumnSpec{Name: "id", Type: ColumnType{Type: "Int64", Repr: ReprInt}}
	truncateRounds(ctx, t, conn, cluster, spec)
	b.StopServer(t)
	table, err := CreateTable(conn.Dialect(), target, []ColumnSpec{spec}, []string{"id"}, TableOptions{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	started := time.Now()
	go func() { done <- conn.Exec(ctx, table) }()
	select {
	case err := <-done:
		t.Fatalf("CREATE returned with node B down after %s: %v", time.Since(started), err)
	case <-time.After(8 * time.Second):
	}
	mu.Lock()
	named := len(waits) > 0 && len(waits[len(waits)-1]) == 1 && waits[len(waits)-1][0] == b.NativeAddr()
	mu.Unlock()
	if !named {
		t.Errorf("node B (%s) not named while waited on: %v", b.NativeAddr(), waits)
	}
	if got := a.HTTPQuery(t, "SELECT engine FROM system.tables WHERE database = 'cl'"); got != "ReplicatedReplacingMergeTree" {
		t.Errorf("node A: %q", got)
	}
	if err := conn.Insert(ctx, target, []ColumnSpec{spec, {Name: ColLSN, Type: ColumnType{Type: "UInt64", Repr: ReprInt}}}, [][]any{{int64(1), uint64(10)}, {int64(2), uint64(11)}}); err != nil {
		t.Fatal(err)
	}
	b.StartServer(t)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("CREATE after node B returned: %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("CREATE did not return within 2 minutes of node B's return")
	}
	t.Logf("CREATE returned %s after it was issued", time.Since(started).Round(time.Second))
	b.HTTPQuery(t, "SYSTEM SYNC REPLICA cl.`public.t`")
	if got := b.HTTPQuery(t, "SELECT count() FROM cl.`public.t` FINAL"); got != "2" {
		t.Errorf("node B holds %s rows, want 2", got)
	}

	// A node that lost the table (dropped there alone) gets it back from
	// the same CREATE, under the path the other node's copy has: it
	// fetches A's rows.
	b.HTTPQuery(t, "DROP TABLE cl.`public.t`")
	again, err := CreateTable(conn.Dialect(), target, []ColumnSpec{spec}, []string{"id"}, TableOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Exec(ctx, again); err != nil {
		t.Fatal(err)
	}
	pathA := a.HTTPQuery(t, "SELECT zookeeper_path FROM system.replicas WHERE database = 'cl'")
	if pathB := b.HTTPQuery(t, "SELECT zookeeper_path FROM system.replicas WHERE database = 'cl'"); pathB != pathA {
		t.Errorf("node B re-created the table under %q, node A holds it under %q", pathB, pathA)
	}
	b.HTTPQuery(t, "SYSTEM SYNC REPLICA cl.`public.t`")
	if got := b.HTTPQuery(t, "SELECT count() FROM cl.`public.t` FINAL"); got != "2" {
		t.Errorf("node B holds %s rows after re-creating the table, want 2", got)
	}
	for _, sql := range []string{DropTable(target), "DROP TABLE IF EXISTS `cl`.`x`"} {
		if err := conn.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	if got := b.HTTPQuery(t, "SELECT count() FROM system.tables WHERE database = 'cl'"); got != "0" {
		t.Errorf("node B still holds %s tables after DROP ON CLUSTER", got)
	}
}

// truncateRounds: a TRUNCATE of a Replicated table, issued through the
// cluster connection ten times between inserts, finishes every time and
// leaves both nodes empty, for a table of one partition and one of
// three; a block identical to one inserted before the TRUNCATE is not
// dropped as a duplicate afterwards. (TRUNCATE ... ON CLUSTER itself
// deadlocked by the second round: truncate_replicated.go.)
func truncateRounds(ctx context.Context, t *testing.T, conn *Conn, cluster *testrig.ClickHouseCluster, spec ColumnSpec) {
	t.Helper()
	cols := []ColumnSpec{spec, {Name: ColLSN, Type: ColumnType{Type: "UInt64", Repr: ReprInt}}}
	rows := [][]any{{int64(1), uint64(10)}, {int64(2), uint64(11)}, {int64(3), uint64(12)}}
	for _, opts := range []TableOptions{{}, {PartitionBy: "id % 3"}} {
		target := Target{Database: "cl", Table: "public.trunc" + strings.ReplaceAll(opts.PartitionBy, " ", "")}
		create, err := CreateTable(conn.Dialect(), target, []ColumnSpec{spec}, []string{"id"}, opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := conn.Exec(ctx, create); err != nil {
			t.Fatal(err)
		}
		count := "SELECT count() FROM " + QuoteQualified(target)
		for round := 0; round < 10; round++ {
			if err := conn.Insert(ctx, target, cols, rows); err != nil {
				t.Fatal(err)
			}
			if got := cluster.Nodes[0].HTTPQuery(t, count); got != "3" {
				t.Fatalf("%s round %d: node A holds %s rows before the TRUNCATE, want 3", target.Table, round, got)
			}
			roundCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
			started := time.Now()
			err := conn.Exec(roundCtx, TruncateTable(target))
			cancel()
			if err != nil {
				t.Fatalf("%s round %d: TRUNCATE after %s: %v", target.Table, round, time.Since(started).Round(time.Millisecond), err)
			}
			for i, n := range cluster.Nodes {
				n.HTTPQuery(t, "SYSTEM SYNC REPLICA "+QuoteQualified(target))
				if got := n.HTTPQuery(t, count); got != "0" {
					t.Errorf("%s round %d: node %d holds %s rows after the TRUNCATE", target.Table, round, i, got)
				}
			}
		}
		if err := conn.Exec(ctx, DropTable(target)); err != nil {
			t.Fatal(err)
		}
	}
}
