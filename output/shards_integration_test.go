package output_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/chcompare"
	"github.com/walshadow/walshadow/internal/load"
	"github.com/walshadow/walshadow/internal/testrig"
)

// TestClusterShardedRandomWorkload streams the randomized workload (DML,
// DDL, type changes, keyless tables, TRUNCATE, VACUUM FULL) into a cluster
// of two shards through node A, then compares every table read through
// the Distributed tables of node A and of node B, and checks per table
// that no key (ORDER BY identity) has rows on both shards.
func TestClusterShardedRandomWorkload(t *testing.T) {
	seed := testrig.TestSeed(t)
	cluster := testrig.StartClickHouseCluster(t, testrig.TwoShards)
	r := newRigOn(t, cluster.Nodes[0], testrig.WithMaxPreparedTransactions(10), testrig.WithSetting("log_min_error_statement", "panic"))
	r.streamRandomWorkload(t, seed)

	for i, node := range cluster.Nodes {
		t.Logf("node %c:", 'A'+i)
		r.compareOn(t, node.DSN("default"), "public")
		tables := node.HTTPQuery(t, "SELECT database, name, engine FROM system.tables WHERE database IN ('walshadow_test', 'walshadow_test_local') ORDER BY database, name")
		if tables == "" {
			t.Errorf("node %c holds no table", 'A'+i)
		}
		for _, line := range strings.Split(tables, "\n") {
			f := strings.Split(line, "\t")
			if want := map[string]string{"walshadow_test": "Distributed", "walshadow_test_local": "ReplicatedReplacingMergeTree"}[f[0]]; f[2] != want {
				t.Errorf("node %c: %s.%s is %s, not %s", 'A'+i, f[0], f[1], f[2], want)
			}
		}
	}
	checkNoKeyOnTwoShards(t, cluster)
}

// checkNoKeyOnTwoShards: for every Distributed table of walshadow_test,
// no value of its sharding key's columns has rows in the local tables of
// both shards, and both shards hold rows of some table.
func checkNoKeyOnTwoShards(t *testing.T, cluster *testrig.ClickHouseCluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	summary, err := chcompare.CheckShards(ctx, cluster.NodeDSN(0, "default"), cluster.Nodes[1].NativeAddr(), "walshadow_test")
	t.Log(summary)
	if err != nil {
		t.Error(err)
	}
}

// TestClusterShardedInitialLoad runs the initial load test, in both
// modes, into a cluster of two shards: loads published under concurrent
// writes, TOAST read back, every table equal through both nodes'
// Distributed tables, no load table left on either side.
func TestClusterShardedInitialLoad(t *testing.T) {
	cluster := testrig.StartClickHouseCluster(t, testrig.TwoShards)
	for _, mode := range []load.Mode{load.ModeCopy, load.ModeBaseBackup} {
		t.Run(string(mode), func(t *testing.T) {
			r := newRigOn(t, cluster.Nodes[0])
			testInitialLoadOn(t, r, mode, cluster)
			for i, node := range cluster.Nodes {
				if n := node.HTTPQuery(t, "SELECT groupArray(name) FROM system.tables WHERE database = 'walshadow_test_local' AND (name LIKE '%__wsload_%' OR name LIKE '%__wsdelta_%' OR name LIKE '%__wsstale_%')"); n != "[]" {
					t.Errorf("node %c: load tables left in walshadow_test_local: %s", 'A'+i, n)
				}
			}
			checkNoKeyOnTwoShards(t, cluster)
			for _, db := range []string{"walshadow_test", "walshadow_test_local"} {
				cluster.Nodes[0].HTTPQuery(t, "DROP DATABASE IF EXISTS "+db+" ON CLUSTER "+testrig.ClusterName)
			}
		})
	}
}

// TestClusterShardedTableFailure: a table failed on purpose is reloaded
// while the others keep moving, on a cluster of two shards; every table
// equal through both nodes.
func TestClusterShardedTableFailure(t *testing.T) {
	cluster := testrig.StartClickHouseCluster(t, testrig.TwoShards)
	testTableFailureIsolated(t, newRigOn(t, cluster.Nodes[0]), cluster)
	checkNoKeyOnTwoShards(t, cluster)
}
