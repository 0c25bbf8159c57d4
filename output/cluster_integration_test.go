package output_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/testrig"
)

// TestClusterReplicatedRandomWorkload streams the randomized workload
// (DML, DDL, type changes, keyless tables, TRUNCATE, VACUUM FULL) into a
// cluster of two replicas of one shard through node A, then compares
// every table read through node A and through node B, and checks that
// no table on either node has a non-Replicated engine.
func TestClusterReplicatedRandomWorkload(t *testing.T) {
	seed := testrig.TestSeed(t)
	cluster := testrig.StartClickHouseCluster(t, testrig.TwoReplicas)
	r := newRigOn(t, cluster.Nodes[0], testrig.WithMaxPreparedTransactions(10), testrig.WithSetting("log_min_error_statement", "panic"))
	run := r.start(t, `
drop_strategy: drop
cluster: `+testrig.ClusterName+`
`)
	opt := testrig.RandomLoadOptions{Seed: seed, Tables: 10, Ops: 900, Clients: 3, DDL: true, TwoPhase: true, NoFarFutureTimestamps: true,
		Keyless: true, TypeChanges: true}
	r.src.CreateRandomSchema(t, opt)
	t.Logf("workload: %v", r.src.RunRandomLoad(t, opt))

	token := fmt.Sprintf("done-%d", seed)
	r.src.Exec(t, "CREATE TABLE rl_marker (id int PRIMARY KEY, token text); INSERT INTO rl_marker VALUES (1, '"+token+"')")
	marker := fmt.Sprintf("SELECT count() FROM %s FINAL WHERE _is_deleted = 0 AND token = '%s'", chTable("public", "rl_marker"), token)
	r.waitCH(t, run, marker, "1", 3*time.Minute)
	r.waitLoadsDone(t, run, nil, 0, 3*time.Minute)
	run.stop(t)

	for i, node := range cluster.Nodes {
		syncReplicas(t, node, "walshadow_test")
		t.Logf("node %c:", 'A'+i)
		r.compareOn(t, nodeDSN(node), "public")
		tables := node.HTTPQuery(t, "SELECT name, engine FROM system.tables WHERE database = 'walshadow_test' ORDER BY name")
		if tables == "" {
			t.Errorf("node %c holds no table", 'A'+i)
		}
		for _, line := range strings.Split(tables, "\n") {
			if name, engine, _ := strings.Cut(line, "\t"); !strings.HasPrefix(engine, "Replicated") {
				t.Errorf("node %c: %s is %s, not Replicated", 'A'+i, name, engine)
			}
		}
	}
	a, b := cluster.Nodes[0].HTTPQuery(t, "SELECT name FROM system.tables WHERE database = 'walshadow_test' ORDER BY name"),
		cluster.Nodes[1].HTTPQuery(t, "SELECT name FROM system.tables WHERE database = 'walshadow_test' ORDER BY name")
	if a != b {
		t.Errorf("the nodes hold different tables:\nA: %s\nB: %s", a, b)
	}
}

// syncReplicas waits until node has fetched every part its replicated
// tables in database are due (SYSTEM SYNC REPLICA).
func syncReplicas(t *testing.T, node *testrig.ClickHouse, database string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	names := node.HTTPQuery(t, "SELECT name FROM system.tables WHERE database = "+clickhouse.QuoteString(database)+" AND engine LIKE 'Replicated%'")
	for _, name := range strings.Split(names, "\n") {
		if name == "" {
			continue
		}
		if _, err := node.Query(ctx, "SYSTEM SYNC REPLICA "+clickhouse.QuoteQualified(clickhouse.Target{Database: database, Table: name})); err != nil {
			t.Fatalf("syncing %s: %v", name, err)
		}
	}
}
