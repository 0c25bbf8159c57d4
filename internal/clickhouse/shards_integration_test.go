package clickhouse

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/testrig"
)

// TestShardedTable: on two shards, a table created, written, altered,
// truncated and dropped through Conn: rows split between the shards'
// local tables, every version of a key on one shard (updated rows do not
// leave a copy on the other), FINAL through the Distributed table on
// either node is the table, the insert is on the shards when it returns,
// a column added reaches both tables on both nodes, TRUNCATE empties
// every shard.
func TestShardedTable(t *testing.T) {
	cluster := testrig.StartClickHouseCluster(t, testrig.TwoShards)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	conn, err := Open(ctx, ConnConfig{DSN: cluster.NodeDSN(0, "default"), Cluster: testrig.ClusterName})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if !conn.Topology().Sharded() {
		t.Fatalf("topology %s", conn.Topology())
	}
	// partitionIDs passes over a shard directory without walshadow's
	// tables by this answer, and fails on any other.
	if _, err := zkChildren(ctx, conn.Native(), "/clickhouse/tables/no-such-shard/walshadow"); !isNoNode(err) {
		t.Errorf("listing a missing ZooKeeper path: %v, want ZooKeeper's no node", err)
	}
	target := Target{Database: "sh", Table: "public.t"}
	local := QuoteQualified(LocalTarget(target))
	create, err := CreateDatabase(target.Database)
	if err != nil {
		t.Fatal(err)
	}
	id := ColumnSpec{Name: "id", Type: ColumnType{Type: "Int64", Repr: ReprInt}}
	v := ColumnSpec{Name: "v", Type: ColumnType{Type: "String", Repr: ReprString}}
	table, err := CreateTable(conn.Dialect(), target, []ColumnSpec{id, v}, []string{"id"}, TableOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{create, table} {
		if err := conn.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	for i, n := range cluster.Nodes {
		if got := n.HTTPQuery(t, "SELECT engine FROM system.tables WHERE database = 'sh_local'"); got != "ReplicatedReplacingMergeTree" {
			t.Errorf("node %d: local engine %q", i, got)
		}
		if got := n.HTTPQuery(t, "SELECT engine FROM system.tables WHERE database = 'sh'"); got != "Distributed" {
			t.Errorf("node %d: engine %q", i, got)
		}
	}
	cols := []ColumnSpec{id, v, {Name: ColLSN, Type: ColumnType{Type: "UInt64", Repr: ReprInt}}}
	const n = 200
	for version := uint64(1); version <= 3; version++ {
		rows := make([][]any, n)
		for i := range rows {
			rows[i] = []any{int64(i), strings.Repeat("x", int(version)), version*1000 + uint64(i)}
		}
		if err := conn.Insert(ctx, target, cols, rows); err != nil {
			t.Fatal(err)
		}
		// No wait: the insert returned once the shards had the rows.
		for i, node := range cluster.Nodes {
			if got := node.HTTPQuery(t, "SELECT count(), min(v), max(v) FROM "+QuoteQualified(target)+" FINAL"); got != "200\t"+strings.Repeat("x", int(version))+"\t"+strings.Repeat("x", int(version)) {
				t.Errorf("version %d, node %d through the Distributed table: %q", version, i, got)
			}
		}
	}
	a := cluster.Nodes[0].HTTPQuery(t, "SELECT count(), uniqExact(id) FROM "+local)
	b := cluster.Nodes[1].HTTPQuery(t, "SELECT count(), uniqExact(id) FROM "+local)
	t.Logf("local tables (rows, ids): shard 1 %s, shard 2 %s", a, b)
	if ids := cluster.Nodes[0].HTTPQuery(t, "SELECT count() FROM "+local+" WHERE id IN (SELECT id FROM remote('"+cluster.Nodes[1].NativeAddr()+"', sh_local, `public.t`))"); ids != "0" {
		t.Errorf("%s ids have rows on both shards", ids)
	}
	if strings.HasPrefix(a, "0\t") || strings.HasPrefix(b, "0\t") {
		t.Errorf("rows not split between the shards: %s / %s", a, b)
	}

	// A node that lost the Distributed table gets it back at the repair.
	cluster.Nodes[1].HTTPQuery(t, "DROP TABLE "+QuoteQualified(target))
	repaired, skipped, err := conn.RepairNodes(ctx, []Target{target})
	if err != nil || len(skipped) > 0 || len(repaired) != 1 {
		t.Errorf("repair: repaired %q, skipped %q, %v", repaired, skipped, err)
	}
	if got := cluster.Nodes[1].HTTPQuery(t, "SELECT count() FROM "+QuoteQualified(target)+" FINAL"); got != "200" {
		t.Errorf("node B after the repair: %s rows", got)
	}

	// A load's publish: a copy filled, then swapped in under the name.
	stage, retired := Target{Database: "sh", Table: "public.t__stage"}, Target{Database: "sh", Table: "public.t__old"}
	if err := conn.CreateLike(ctx, stage, target); err != nil {
		t.Fatal(err)
	}
	if err := conn.Insert(ctx, stage, cols, [][]any{{int64(7), "staged", uint64(1)}, {int64(8), "staged", uint64(1)}}); err != nil {
		t.Fatal(err)
	}
	if err := conn.Exec(ctx, SwapIn(target, stage, retired)); err != nil {
		t.Fatal(err)
	}
	for i, node := range cluster.Nodes {
		if got := node.HTTPQuery(t, "SELECT count(), min(v) FROM "+QuoteQualified(target)+" FINAL"); got != "2\tstaged" {
			t.Errorf("node %d after the swap: %q", i, got)
		}
		if got := node.HTTPQuery(t, "SELECT count() FROM "+QuoteQualified(retired)+" FINAL"); got != "200" {
			t.Errorf("node %d: the retired table holds %q rows", i, got)
		}
		if got := node.HTTPQuery(t, "SELECT count() FROM system.tables WHERE name = 'public.t__stage'"); got != "0" {
			t.Errorf("node %d: %s tables left under the staging name", i, got)
		}
	}
	if err := conn.Exec(ctx, DropTable(retired)); err != nil {
		t.Fatal(err)
	}

	add, _, err := AddColumn(conn.Dialect(), target, ColumnSpec{Name: "w", Type: ColumnType{Type: "Int32", Repr: ReprInt}})
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Exec(ctx, add); err != nil {
		t.Fatal(err)
	}
	for i, node := range cluster.Nodes {
		if got := node.HTTPQuery(t, "SELECT count() FROM system.columns WHERE name = 'w' AND database IN ('sh', 'sh_local')"); got != "2" {
			t.Errorf("node %d: column w in %s of the 2 tables", i, got)
		}
	}
	if err := conn.Exec(ctx, TruncateTable(target)); err != nil {
		t.Fatal(err)
	}
	for i, node := range cluster.Nodes {
		if got := node.HTTPQuery(t, "SELECT count() FROM "+local); got != "0" {
			t.Errorf("node %d: %s rows after TRUNCATE", i, got)
		}
	}
	testShardedCrashBetweenSteps(ctx, t, conn, cluster, target)

	// A shard away: the insert that touches it fails as the destination's
	// outage (retried), not as the table's fault, and works once it is back.
	cluster.Nodes[1].StopServer(t)
	batch := [][]any{{int64(1), "a", uint64(9001)}, {int64(2), "b", uint64(9002)}, {int64(3), "c", uint64(9003)}, {int64(4), "d", uint64(9004)}}
	err = conn.Insert(ctx, target, cols[:3], batch)
	if err == nil || !IsRetryable(err) {
		t.Errorf("insert with shard 2 away: %v (retryable %v); want a retryable failure", err, IsRetryable(err))
	} else {
		t.Logf("insert with shard 2 away: %v", err)
	}
	cluster.Nodes[1].StartServer(t)
	if err := conn.Insert(ctx, target, cols[:3], batch); err != nil {
		t.Errorf("insert once shard 2 is back: %v", err)
	}
	if err := conn.Exec(ctx, DropTable(target)); err != nil {
		t.Fatal(err)
	}
	for i, node := range cluster.Nodes {
		if got := node.HTTPQuery(t, "SELECT count() FROM system.tables WHERE database IN ('sh', 'sh_local')"); got != "0" {
			t.Errorf("node %d: %s tables after DROP", i, got)
		}
	}
}

// testShardedCrashBetweenSteps leaves target's Distributed tables as a
// crash between a statement's local and Distributed steps does (an ALTER
// and a publish's swap run on the local tables alone), and checks that
// the repair at start puts them back in step: the new column readable
// through the Distributed table, the swapped-in rows under the name, the
// staging name gone.
func testShardedCrashBetweenSteps(ctx context.Context, t *testing.T, conn *Conn, cluster *testrig.ClickHouseCluster, target Target) {
	t.Helper()
	local := func(sql string) {
		t.Helper()
		stmts, err := conn.topology.split(sql, func(t Target) (string, error) { return "rand()", nil })
		if err != nil {
			t.Fatal(err)
		}
		if err := conn.run(ctx, conn.pool(), stmts[:1]); err != nil {
			t.Fatalf("%s: %v", stmts[0], err)
		}
	}
	add, _, err := AddColumn(conn.Dialect(), target, ColumnSpec{Name: "late", Type: ColumnType{Type: "Int32", Repr: ReprInt}})
	if err != nil {
		t.Fatal(err)
	}
	local(add)
	stage, retired := Target{Database: "sh", Table: "public.t__stage"}, Target{Database: "sh", Table: "public.t__old"}
	if err := conn.CreateLike(ctx, stage, target); err != nil {
		t.Fatal(err)
	}
	cols := []ColumnSpec{{Name: "id", Type: ColumnType{Type: "Int64", Repr: ReprInt}}, {Name: ColLSN, Type: ColumnType{Type: "UInt64", Repr: ReprInt}}}
	if err := conn.Insert(ctx, stage, cols, [][]any{{int64(1), uint64(1)}, {int64(2), uint64(1)}, {int64(3), uint64(1)}}); err != nil {
		t.Fatal(err)
	}
	local(SwapIn(target, stage, retired))
	for _, n := range cluster.Nodes {
		if got := n.HTTPQuery(t, "SELECT count() FROM system.columns WHERE database = 'sh' AND table = 'public.t' AND name = 'late'"); got != "0" {
			t.Fatalf("the simulated crash left the Distributed table with the new column (%s)", got)
		}
	}
	repaired, skipped, err := conn.RepairNodes(ctx, []Target{target})
	t.Logf("repaired %q, skipped %q", repaired, skipped)
	if err != nil || len(skipped) > 0 || len(repaired) != 3 {
		t.Errorf("repair after the crash: repaired %q, skipped %q, %v; want the name made again, the staging name dropped, the retired name created", repaired, skipped, err)
	}
	for i, node := range cluster.Nodes {
		if got := node.HTTPQuery(t, "SELECT count(), sum(late) FROM "+QuoteQualified(target)+" FINAL"); got != "3\t0" {
			t.Errorf("node %d: the name after the repair holds %q", i, got)
		}
		if got := node.HTTPQuery(t, "SELECT name FROM system.tables WHERE database = 'sh' ORDER BY name"); got != "public.t\npublic.t__old" {
			t.Errorf("node %d: Distributed tables after the repair %q", i, got)
		}
	}
	if again, skipped, err := conn.RepairNodes(ctx, []Target{target}); len(again)+len(skipped) > 0 || err != nil {
		t.Errorf("a second repair: repaired %q, skipped %q, %v; want nothing to do", again, skipped, err)
	}
	if err := conn.Exec(ctx, DropTable(retired)); err != nil {
		t.Fatal(err)
	}
}
