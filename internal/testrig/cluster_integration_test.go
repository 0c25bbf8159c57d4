package testrig

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	chgo "github.com/ClickHouse/clickhouse-go/v2"
)

// TestClickHouseClusterTwoReplicas: DDL ON CLUSTER reaches both nodes, a
// row inserted on node A is read on node B, and a DDL issued while node B
// is down times out on A and is executed by B when it returns.
func TestClickHouseClusterTwoReplicas(t *testing.T) {
	started := time.Now()
	c := StartClickHouseCluster(t, TwoReplicas)
	t.Logf("cluster started in %v; %s", time.Since(started).Round(time.Millisecond), c.rss())
	a, b := c.Nodes[0], c.Nodes[1]
	checkMacros(t, c)

	a.HTTPQuery(t, "CREATE DATABASE d ON CLUSTER ws")
	a.HTTPQuery(t, "CREATE TABLE d.t ON CLUSTER ws (id UInt64, s String, v UInt64) ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/d/t', '{replica}', v) ORDER BY id")
	a.HTTPQuery(t, "INSERT INTO d.t VALUES (1, 'a', 1), (2, 'b', 1)")
	a.HTTPQuery(t, "INSERT INTO d.t VALUES (1, 'a2', 2)")
	waitQuery(t, b, "SELECT id, s FROM d.t FINAL ORDER BY id FORMAT TSV", "1\ta2\n2\tb", 20*time.Second)
	t.Logf("replicated; %s", c.rss())

	checkDDLQueuedWhileDown(t, c, "ALTER TABLE d.t ON CLUSTER ws ADD COLUMN x UInt8 DEFAULT 7", "ALTER TABLE d.t ON CLUSTER ws ADD COLUMN y UInt8 DEFAULT 8",
		"SELECT count() FROM system.columns WHERE database = 'd' AND table = 't' AND name IN ('x', 'y')")
	// B caught up with the replicated rows too, and replicates again.
	a.HTTPQuery(t, "INSERT INTO d.t (id, s, v) VALUES (3, 'c', 1)")
	waitQuery(t, b, "SELECT id, s, x, y FROM d.t FINAL ORDER BY id FORMAT TSV", "1\ta2\t7\t8\n2\tb\t7\t8\n3\tc\t7\t8", 20*time.Second)

	// A frozen replica catches up once thawed.
	b.FreezeServer(t)
	a.HTTPQuery(t, "INSERT INTO d.t (id, s, v) VALUES (4, 'd', 1)")
	b.ThawServer(t)
	waitQuery(t, b, "SELECT count() FROM d.t FINAL", "4", 20*time.Second)

	// ZooKeeper away and back on its port with its data: the replicated
	// table is writable again and replicates.
	c.ZK.Stop(t)
	if _, err := a.Query(context.Background(), "INSERT INTO d.t (id, s, v) VALUES (5, 'e', 1)"); err == nil {
		t.Error("an insert into a replicated table succeeded without ZooKeeper")
	} else {
		t.Logf("insert without ZooKeeper: %v", err)
	}
	c.ZK.Start(t)
	began := time.Now()
	waitQuery(t, a, "INSERT INTO d.t (id, s, v) VALUES (5, 'e', 1)", "", 60*time.Second)
	t.Logf("A writable %v after ZooKeeper returned", time.Since(began).Round(time.Millisecond))
	waitQuery(t, b, "SELECT count() FROM d.t FINAL", "5", 60*time.Second)
}

// TestClickHouseClusterTwoShards: a Distributed table over the two shards
// splits rows between the nodes' local tables by cityHash64(id).
func TestClickHouseClusterTwoShards(t *testing.T) {
	started := time.Now()
	c := StartClickHouseCluster(t, TwoShards)
	t.Logf("cluster started in %v; %s", time.Since(started).Round(time.Millisecond), c.rss())
	a, b := c.Nodes[0], c.Nodes[1]
	checkMacros(t, c)

	a.HTTPQuery(t, "CREATE DATABASE d ON CLUSTER ws")
	a.HTTPQuery(t, "CREATE TABLE d.t_local ON CLUSTER ws (id UInt64, s String, v UInt64) ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/d/t', '{replica}', v) ORDER BY id")
	a.HTTPQuery(t, "CREATE TABLE d.t ON CLUSTER ws AS d.t_local ENGINE = Distributed(ws, d, t_local, cityHash64(id))")
	// insert_distributed_sync: the insert returns once both shards have
	// their rows (by default they are queued on A and sent later).
	ctx := context.Background()
	if _, err := a.QueryWithSettings(ctx, "INSERT INTO d.t SELECT number, toString(number), 1 FROM system.numbers LIMIT 100", map[string]string{"insert_distributed_sync": "1"}); err != nil {
		t.Fatal(err)
	}
	onA, onB := queryInt(t, a, "SELECT count() FROM d.t_local"), queryInt(t, b, "SELECT count() FROM d.t_local")
	if onA+onB != 100 || onA == 0 || onB == 0 {
		t.Errorf("local rows: %d on A, %d on B; want 100 split between both", onA, onB)
	}
	// Each node agrees on which shard a key belongs to.
	if got := b.HTTPQuery(t, "SELECT count() FROM d.t_local WHERE cityHash64(id) % 2 = 0"); got != "0" {
		t.Errorf("B holds %s rows the hash sends to shard 1", got)
	}
	for _, n := range c.Nodes {
		if got := n.HTTPQuery(t, "SELECT count(), sum(id) FROM d.t FORMAT TSV"); got != "100\t4950" {
			t.Errorf("through the Distributed table: count, sum = %q, want 100, 4950", got)
		}
	}
	t.Logf("%d rows on A, %d on B; %s", onA, onB, c.rss())

	checkDDLQueuedWhileDown(t, c, "CREATE TABLE d.u ON CLUSTER ws (id UInt64) ENGINE = MergeTree ORDER BY id", "CREATE TABLE d.w ON CLUSTER ws (id UInt64) ENGINE = MergeTree ORDER BY id",
		"SELECT count() FROM system.tables WHERE database = 'd' AND name IN ('u', 'w')")
}

// checkMacros: each node knows its own shard and replica, and the cluster
// as the layout says.
//
// system.clusters' is_local is 1 for both nodes on either node: 18.16
// compares the host alone there, and every node is on 127.0.0.1. ON
// CLUSTER and Distributed compare the port too (B does not execute A's DDL
// tasks, each node sends the other shard's rows away), so it is not tested.
func checkMacros(t *testing.T, c *ClickHouseCluster) {
	t.Helper()
	want := map[ClusterLayout]string{
		TwoReplicas: fmt.Sprintf("1\t1\t%d\n1\t2\t%d", c.Nodes[0].tcpPort, c.Nodes[1].tcpPort),
		TwoShards:   fmt.Sprintf("1\t1\t%d\n2\t1\t%d", c.Nodes[0].tcpPort, c.Nodes[1].tcpPort),
	}[c.Layout]
	for i, n := range c.Nodes {
		shard, replica := c.Macros(i)
		if got, want := n.HTTPQuery(t, "SELECT macro, substitution FROM system.macros WHERE macro IN ('shard', 'replica') ORDER BY macro FORMAT TSV"), "replica\t"+replica+"\nshard\t"+shard; got != want {
			t.Errorf("node %d macros = %q, want %q", i+1, got, want)
		}
		if got := n.HTTPQuery(t, "SELECT shard_num, replica_num, port FROM system.clusters WHERE cluster = 'ws' ORDER BY shard_num, replica_num FORMAT TSV"); got != want {
			t.Errorf("node %d: cluster ws is %q, want %q", i+1, got, want)
		}
	}
}

// checkDDLQueuedWhileDown stops node B, runs two ON CLUSTER statements on
// node A with distributed_ddl_task_timeout = 5, nativeDDL over the native
// protocol (as walshadow talks to ClickHouse) and httpDDL over HTTP, and
// expects each to fail by timing out within 10 s; then starts B and waits
// for check on B to return 2: B executes both queued statements when it
// comes back.
//
// What 18.16 answers (Code 159, TIMEOUT_EXCEEDED; the path is the task's
// znode under distributed_ddl's path, the hosts are counted, not named):
//
//	native (clickhouse-go): code: 159, message: Watching task /clickhouse/task_queue/ddl/query-0000000002 is executing longer than distributed_ddl_task_timeout (=5) seconds. There are 1 unfinished hosts (0 of them are currently active), they are going to execute the query in background
//	HTTP 500: Code: 159, e.displayText() = DB::Exception: Watching task /clickhouse/task_queue/ddl/query-0000000003 is executing longer than distributed_ddl_task_timeout (=5) seconds. There are 1 unfinished hosts (0 of them are currently active), they are going to execute the query in background, e.what() = DB::Exception
func checkDDLQueuedWhileDown(t *testing.T, c *ClickHouseCluster, nativeDDL, httpDDL, check string) {
	t.Helper()
	a, b := c.Nodes[0], c.Nodes[1]
	b.StopServer(t)
	ctx := context.Background()

	conn, err := chgo.Open(&chgo.Options{Addr: []string{a.NativeAddr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	settings := chgo.Settings{"distributed_ddl_task_timeout": int64SettingFor1816(5)}
	if got := queryNative(t, chgo.Context(ctx, chgo.WithSettings(settings)), conn, "SELECT value FROM system.settings WHERE name = 'distributed_ddl_task_timeout'"); got != "5" {
		t.Fatalf("the server reads distributed_ddl_task_timeout as %s, want 5", got)
	}
	deadline, cancel := context.WithTimeout(ctx, 30*time.Second) // a negative timeout waits for ever
	defer cancel()
	began := time.Now()
	err = conn.Exec(chgo.Context(deadline, chgo.WithSettings(settings)), nativeDDL)
	took := time.Since(began)
	t.Logf("native, after %v: %v", took.Round(time.Millisecond), err)
	if err == nil || !strings.Contains(err.Error(), "distributed_ddl_task_timeout") || took > 10*time.Second {
		t.Errorf("ON CLUSTER with node B down: err %v after %v; want a timeout within 10 s", err, took)
	}

	began = time.Now()
	out, err := a.QueryWithSettings(deadline, httpDDL, map[string]string{"distributed_ddl_task_timeout": "5"})
	took = time.Since(began)
	t.Logf("HTTP, after %v: %q, %v", took.Round(time.Millisecond), out, err)
	if err == nil || !strings.Contains(err.Error(), "distributed_ddl_task_timeout") || took > 10*time.Second {
		t.Errorf("ON CLUSTER over HTTP with node B down: %q, err %v after %v; want a timeout within 10 s", out, err, took)
	}

	b.StartServer(t)
	waitQuery(t, b, check, "2", 20*time.Second)
}

// int64SettingFor1816 is what clickhouse-go must send for a signed integer
// setting to reach 18.16 as v. Before revision 54429 settings travel as
// typed binary: clickhouse-go writes every integer as an unsigned varint,
// the server reads an Int64 setting as a zigzag varint, so 5 arrives as -3
// (and a negative distributed_ddl_task_timeout waits for ever). Sending
// zigzag(v) = 2v (v >= 0) makes it arrive as v.
func int64SettingFor1816(v int) int { return 2 * v }

func queryNative(t *testing.T, ctx context.Context, conn chgo.Conn, sql string) string {
	t.Helper()
	var s string
	if err := conn.QueryRow(ctx, sql).Scan(&s); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return s
}

// waitQuery polls sql on n until it returns want.
func waitQuery(t *testing.T, n *ClickHouse, sql, want string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got, err := n.Query(context.Background(), sql)
		if err == nil && got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: got %q (%v) after %v, want %q", sql, got, err, timeout, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func queryInt(t *testing.T, n *ClickHouse, sql string) int {
	t.Helper()
	v, err := strconv.Atoi(n.HTTPQuery(t, sql))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// rss is the resident memory of the cluster's three processes.
func (c *ClickHouseCluster) rss() string {
	var parts []string
	var total int
	add := func(name string, pid int) {
		kb := vmRSSKiB(pid)
		total += kb
		parts = append(parts, fmt.Sprintf("%s %d MiB", name, kb/1024))
	}
	add("zookeeper", c.ZK.cmd.Process.Pid)
	for i, n := range c.Nodes {
		if n.cmd != nil {
			add("node "+strconv.Itoa(i+1), n.cmd.Process.Pid)
		}
	}
	return fmt.Sprintf("RSS %s (%d MiB in all)", strings.Join(parts, ", "), total/1024)
}

func vmRSSKiB(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return kb
		}
	}
	return 0
}

// TestZooKeeperStopStart: Stop and Start keep the port.
func TestZooKeeperStopStart(t *testing.T) {
	z := StartZooKeeper(t)
	addr := z.Addr()
	if err := z.ruok(); err != nil {
		t.Fatal(err)
	}
	z.Stop(t)
	if err := z.ruok(); err == nil {
		t.Fatal("the stopped ZooKeeper answers ruok")
	}
	z.Start(t)
	if z.Addr() != addr {
		t.Errorf("address moved: %s → %s", addr, z.Addr())
	}
}

// TestStartClusterForMain: the TestMain cluster serves tests through
// ClusterFromMain, which brings back what a test stopped or froze.
func TestStartClusterForMain(t *testing.T) {
	SkipIfShort(t, "a ClickHouse cluster")
	c, stop, err := StartClusterForMain(TwoReplicas)
	defer stop()
	t.Run("takes nodes away", func(t *testing.T) {
		c := ClusterFromMain(t, c, err)
		c.Nodes[0].HTTPQuery(t, "CREATE DATABASE shared ON CLUSTER ws")
		c.Nodes[0].FreezeServer(t)
		c.Nodes[1].StopServer(t)
		c.ZK.Stop(t)
	})
	t.Run("finds them back", func(t *testing.T) {
		c := ClusterFromMain(t, c, err)
		for i, n := range c.Nodes {
			if got := n.HTTPQuery(t, "SELECT count() FROM system.databases WHERE name = 'shared'"); got != "1" {
				t.Errorf("node %d has %s databases shared", i+1, got)
			}
		}
		if err := c.ZK.ruok(); err != nil {
			t.Error(err)
		}
	})
}
