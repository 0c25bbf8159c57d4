package output_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/load"
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
	r.streamRandomWorkload(t, seed)

	// A table dropped on node B alone is back there after a restart,
	// with node A's rows, and no table was loaded from the source again.
	lost := chTable("public", "rl_marker")
	cluster.Nodes[1].HTTPQuery(t, "DROP TABLE "+lost)
	logs := &logLines{}
	run := r.startLogged(t, "drop_strategy: drop\ncluster: "+testrig.ClusterName+"\n", logs)
	deadline := time.Now().Add(time.Minute)
	for cluster.Nodes[1].HTTPQuery(t, "SELECT count() FROM system.tables WHERE database = 'walshadow_test' AND name = 'public.rl_marker'") != "1" {
		if time.Now().After(deadline) {
			t.Fatalf("%s not re-created on node B within a minute", lost)
		}
		time.Sleep(200 * time.Millisecond)
	}
	run.stop(t)
	logs.logMatching(t, "was missing")
	if strings.Contains(logs.String(), "initial load of") {
		t.Errorf("a table was loaded from the source again:\n%s", logs)
	}

	for i, node := range cluster.Nodes {
		syncReplicas(t, node, "walshadow_test")
		t.Logf("node %c:", 'A'+i)
		r.compareOn(t, node.DSN("default"), "public")
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

// streamRandomWorkload runs the randomized workload (seeded) into the
// cluster through r's output, waits until ClickHouse holds all of it and
// no load is pending, and stops the output.
func (r *rig) streamRandomWorkload(t *testing.T, seed int64) {
	t.Helper()
	run := r.start(t, "drop_strategy: drop\ncluster: "+testrig.ClusterName+"\n")
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
		// A replica whose ZooKeeper session expired (ZooKeeper restarted)
		// answers code 999 until it has a new one: wait for it.
		sql := "SYSTEM SYNC REPLICA " + clickhouse.QuoteQualified(clickhouse.Target{Database: database, Table: name})
		for {
			_, err := node.Query(ctx, sql)
			if err == nil {
				break
			}
			if !strings.Contains(err.Error(), "Code: 999") || ctx.Err() != nil {
				t.Fatalf("syncing %s: %v", name, err)
			}
			time.Sleep(time.Second)
		}
	}
}

// TestClusterReplicaFailover runs pgbench against the source while node A
// of a two-replica cluster, first in the output's DSN, is stopped for
// 30 s, and then node B, which the output moved to, is frozen (SIGSTOP)
// for 30 s: the output moves to node B and back to A without a session
// restart, and every table ends equal through both nodes.
func TestClusterReplicaFailover(t *testing.T) {
	cluster := testrig.StartClickHouseCluster(t, testrig.TwoReplicas)
	a, b := cluster.Nodes[0], cluster.Nodes[1]
	r := newRigOn(t, a)
	// A frozen node answers nothing: its reads time out after 10 s and
	// the connection moves on.
	r.chDSN = cluster.DSN("default") + "?read_timeout=10s&dial_timeout=3s"
	r.src.Exec(t, "CREATE TABLE before_pgbench (id int PRIMARY KEY, v text)")
	pgbenchInit(t, r.src)
	logs := &logLines{}
	run := r.startLogged(t, "cluster: "+testrig.ClusterName+"\n", logs)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bench := make(chan error, 1)
	go func() { bench <- pgbench(ctx, r.src, 4, 110) }()
	time.Sleep(15 * time.Second)
	t.Log("stopping node A for 30 s")
	a.StopServer(t)
	time.Sleep(30 * time.Second)
	a.StartServer(t)
	time.Sleep(15 * time.Second)
	t.Log("freezing node B for 30 s")
	b.FreezeServer(t)
	time.Sleep(30 * time.Second)
	b.ThawServer(t)
	if err := <-bench; err != nil {
		t.Fatal(err)
	}
	r.src.Exec(t, "INSERT INTO before_pgbench VALUES (1, 'done')")
	r.waitCH(t, run, "SELECT count() FROM "+chTable("public", "before_pgbench")+" FINAL WHERE _is_deleted = 0", "1", 3*time.Minute)
	r.waitLoadsDone(t, run, nil, 0, 3*time.Minute)
	run.stop(t)
	logs.logMatching(t, "level=WARN")
	logs.logMatching(t, "level=ERROR")
	if !strings.Contains(logs.String(), "writing to "+b.NativeAddr()) {
		t.Errorf("the output never moved to node B")
	}
	// A frozen node fails reads after read_timeout, but a write into its
	// full socket buffer just waits: the output moves back to A, or
	// waits out the freeze, depending on what it was doing.
	t.Logf("moved back to node A while B was frozen: %v", strings.Contains(logs.String(), "writing to "+a.NativeAddr()))
	r.compareNodes(t, cluster)
}

// pgbenchInit creates pgbench's tables at scale 1 on src.
func pgbenchInit(t *testing.T, src *testrig.Postgres) {
	t.Helper()
	cmd := exec.Command(filepath.Join(src.BinDir(), "pgbench"), "-i", "-q", "-s", "1", src.DSN())
	cmd.Env = testrig.CleanPGEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pgbench -i: %v\n%s", err, out)
	}
}

// pgbench runs pgbench's default script with clients for seconds.
func pgbench(ctx context.Context, src *testrig.Postgres, clients, seconds int) error {
	cmd := exec.CommandContext(ctx, filepath.Join(src.BinDir(), "pgbench"), "-n", "-c", strconv.Itoa(clients), "-j", "2",
		"-T", strconv.Itoa(seconds), src.DSN())
	cmd.Env = testrig.CleanPGEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pgbench -c %d -T %d: %w\n%s", clients, seconds, err, out)
	}
	return nil
}

// TestClusterTableFailure: a table failed on purpose (its ClickHouse
// column narrowed by hand) is reloaded while the others keep moving, on a
// cluster of two replicas; every table equal through both nodes.
func TestClusterTableFailure(t *testing.T) {
	cluster := testrig.StartClickHouseCluster(t, testrig.TwoReplicas)
	testTableFailureIsolated(t, newRigOn(t, cluster.Nodes[0]), cluster)
}

// TestClusterInitialLoad runs the initial load test, in both modes, into
// a cluster of two replicas of one shard: loads published under
// concurrent writes, TOAST read back, every table equal through both
// nodes, no load table left.
func TestClusterInitialLoad(t *testing.T) {
	cluster := testrig.StartClickHouseCluster(t, testrig.TwoReplicas)
	for _, mode := range []load.Mode{load.ModeCopy, load.ModeBaseBackup} {
		t.Run(string(mode), func(t *testing.T) {
			r := newRigOn(t, cluster.Nodes[0])
			testInitialLoadOn(t, r, mode, cluster)
			cluster.Nodes[0].HTTPQuery(t, "DROP DATABASE IF EXISTS walshadow_test ON CLUSTER "+testrig.ClusterName)
		})
	}
}

// TestClusterZooKeeperAway: ZooKeeper stopped for 20 s while rows stream
// into a two-replica cluster makes the Replicated tables read-only; the
// output waits and retries (no table is failed or loaded again) and every
// table ends equal through both nodes.
func TestClusterZooKeeperAway(t *testing.T) {
	cluster := testrig.StartClickHouseCluster(t, testrig.TwoReplicas)
	r := newRigOn(t, cluster.Nodes[0])
	r.src.Exec(t, "CREATE TABLE zk_rows (id int PRIMARY KEY, v text); CREATE TABLE zk_marker (id int PRIMARY KEY)")
	logs := &logLines{}
	run := r.startLogged(t, "cluster: "+testrig.ClusterName+"\n", logs)
	r.waitLoadsDone(t, run, logs, 2, 2*time.Minute)
	insert := func(from, to int) {
		for i := from; i < to; i++ {
			r.src.Exec(t, fmt.Sprintf("INSERT INTO zk_rows VALUES (%d, 'v%d'); UPDATE zk_rows SET v = v || '+' WHERE id = %d", i, i, i/2))
			time.Sleep(20 * time.Millisecond)
		}
	}
	insert(0, 100)
	cluster.ZK.Stop(t)
	insert(100, 600)
	cluster.ZK.Start(t)
	insert(600, 700)
	r.src.Exec(t, "INSERT INTO zk_marker VALUES (1)")
	r.waitCH(t, run, liveCountSQL("public", "zk_marker"), "1", 3*time.Minute)
	run.stop(t)
	logs.logMatching(t, "level=WARN")
	for _, bad := range []string{" failed at ", "initial load of public.zk_rows: copying", "restarting the walshadow session"} {
		if n := strings.Count(logs.String(), bad); bad == "initial load of public.zk_rows: copying" && n > 1 || bad != "initial load of public.zk_rows: copying" && n > 0 {
			t.Errorf("%q %d times in the log: ZooKeeper's absence must only delay the rows", bad, n)
		}
	}
	r.compareNodes(t, cluster)
}

// compareNodes compares every table of the public schema with the source
// through each node of cluster, once the node has fetched every part.
func (r *rig) compareNodes(t *testing.T, cluster *testrig.ClickHouseCluster) {
	t.Helper()
	for i, node := range cluster.Nodes {
		syncReplicas(t, node, "walshadow_test")
		t.Logf("node %c:", 'A'+i)
		r.compareOn(t, node.DSN("default"), "public")
	}
}
