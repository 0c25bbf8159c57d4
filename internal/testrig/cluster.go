package testrig

// This file owns the rig's ClickHouse cluster: one ZooKeeper and two
// clickhouse-server nodes on loopback, named ClusterName in remote_servers,
// laid out as one shard of two replicas or as two shards of one replica,
// started for one test (StartClickHouseCluster) or for a whole test package
// (StartClusterForMain).

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// ClusterName is the cluster's name in every node's remote_servers: the
// name in ON CLUSTER and in Distributed(...).
const ClusterName = "ws"

// ClusterLayout is how the cluster's two nodes share the data.
type ClusterLayout int

const (
	// TwoReplicas is one shard of two replicas: every node holds every row
	// of a Replicated*MergeTree table (macros shard 01, replicas r1 and r2).
	TwoReplicas ClusterLayout = iota + 1
	// TwoShards is two shards of one replica each: a Distributed table
	// splits rows between the nodes (macros shards 01 and 02, replicas r1
	// and r2).
	TwoShards
)

func (l ClusterLayout) String() string {
	switch l {
	case TwoReplicas:
		return "TwoReplicas"
	case TwoShards:
		return "TwoShards"
	}
	return "ClusterLayout(" + strconv.Itoa(int(l)) + ")"
}

// shards lists the node indexes of each shard, in remote_servers order.
func (l ClusterLayout) shards() ([][]int, error) {
	switch l {
	case TwoReplicas:
		return [][]int{{0, 1}}, nil
	case TwoShards:
		return [][]int{{0}, {1}}, nil
	}
	return nil, fmt.Errorf("unknown cluster layout %d", int(l))
}

// ClickHouseCluster is two clickhouse-server nodes and the ZooKeeper they
// share. Every node's remote_servers names both nodes, internal_replication
// is true in every shard (a replicated table replicates itself; Distributed
// writes one replica per shard), and DDL ON CLUSTER goes through
// ZooKeeper's /clickhouse/task_queue/ddl.
//
// Each node is a *ClickHouse: StopServer, StartServer (same ports, data
// kept), KillServer, FreezeServer, HTTPQuery and Query work on it as on a
// single server. ZK.Stop and ZK.Start take ZooKeeper away for a while.
type ClickHouseCluster struct {
	Name   string
	Layout ClusterLayout
	// Nodes are node A (Nodes[0]) and node B (Nodes[1]).
	Nodes []*ClickHouse
	ZK    *ZooKeeper

	shards [][]int
	dir    *serverDir // holds zk/, node1/, node2/
	// testFailed: a test given the cluster by ClusterFromMain failed, so
	// the directory is kept when TestMain stops it.
	testFailed atomic.Bool
}

// StartClickHouseCluster starts ZooKeeper and two clickhouse-server nodes
// configured as the cluster ClusterName in layout, and waits until each
// answers. Everything stops when the test ends; see the package doc for the
// temporary directory.
//
// Measured on two cores: under a second to start, about 210 MB resident
// for the three processes (ZooKeeper 56, each node 75; the nodes' caches
// fill lazily, ZooKeeper's heap is capped at 128 MB).
func StartClickHouseCluster(t testing.TB, layout ClusterLayout) *ClickHouseCluster {
	t.Helper()
	skipIfShort(t, "a ClickHouse cluster")
	bin := ClickHouseBin(t)
	java, classpath := ZooKeeperCommand(t)
	c, err := startCluster(bin, java, classpath, layout, t.Logf)
	if err != nil {
		t.Fatalf("starting the ClickHouse cluster: %v", err)
	}
	t.Cleanup(func() {
		for _, err := range c.stopAll() {
			t.Errorf("stopping the ClickHouse cluster: %v", err)
		}
		c.dir.finish(t.Failed(), t.Logf)
	})
	return c
}

// StartClusterForMain starts a cluster as StartClickHouseCluster does, for
// TestMain, so the tests of a package share one: call it before m.Run and
// the returned stop after it. Under -short it starts nothing and returns a
// nil cluster. A missing binary is an error too: hand the cluster and the
// error to each test through ClusterFromMain, which skips (fails under CI)
// or fails the test as the rig does.
//
// The directory is removed at stop unless a test ClusterFromMain gave the
// cluster to failed (then it is kept and the logs' tails printed, to
// stderr). Tests share the servers: each uses its own databases.
func StartClusterForMain(layout ClusterLayout) (*ClickHouseCluster, func(), error) {
	noop := func() {}
	if !flag.Parsed() {
		flag.Parse() // testing.Short reads the flags; m.Run does not parse twice
	}
	if testing.Short() {
		return nil, noop, nil
	}
	bin, err := findClickHouseBin()
	if err != nil {
		return nil, noop, notInstalledError{err}
	}
	java, classpath, err := findZooKeeper()
	if err != nil {
		return nil, noop, notInstalledError{err}
	}
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "testrig: "+format+"\n", args...) }
	c, err := startCluster(bin, java, classpath, layout, logf)
	if err != nil {
		return nil, noop, fmt.Errorf("starting the ClickHouse cluster: %w", err)
	}
	return c, func() {
		failed := c.testFailed.Load()
		for _, err := range c.stopAll() {
			logf("stopping the ClickHouse cluster: %v", err)
			failed = true
		}
		c.dir.finish(failed, logf)
	}, nil
}

// notInstalledError is a missing binary or package: ClusterFromMain skips
// on it (fails under CI) rather than failing.
type notInstalledError struct{ error }

func (e notInstalledError) Unwrap() error { return e.error }

// ClusterFromMain gives a test the cluster StartClusterForMain returned
// (with its error): under -short it skips, a missing binary skips (fails
// under CI), a failed start fails the test. A node or ZooKeeper the test
// stopped or froze is brought back when the test ends, for the next test.
func ClusterFromMain(t testing.TB, c *ClickHouseCluster, err error) *ClickHouseCluster {
	t.Helper()
	skipIfShort(t, "a ClickHouse cluster")
	var missing notInstalledError
	if errors.As(err, &missing) {
		skipOrFatal(t, err.Error())
	}
	if err != nil {
		t.Fatalf("the package's ClickHouse cluster: %v", err)
	}
	if c == nil {
		t.Fatal("no ClickHouse cluster: TestMain did not call StartClusterForMain")
	}
	t.Cleanup(func() {
		if err := c.restore(); err != nil {
			t.Errorf("restoring the ClickHouse cluster for the next test: %v", err)
		}
		if t.Failed() {
			c.testFailed.Store(true)
		}
	})
	return c
}

// startCluster makes the cluster's directory, picks every port, writes
// every config, then starts ZooKeeper and both nodes. On an error what
// started is stopped and the directory kept (its path is in the error).
func startCluster(bin, java, classpath string, layout ClusterLayout, logf func(string, ...any)) (*ClickHouseCluster, error) {
	shards, err := layout.shards()
	if err != nil {
		return nil, err
	}
	path, err := os.MkdirTemp("", "walshadow-cluster-")
	if err != nil {
		return nil, fmt.Errorf("creating temp dir: %w", err)
	}
	c := &ClickHouseCluster{Name: ClusterName, Layout: layout, shards: shards, dir: &serverDir{path: path}}
	if err := c.layOut(bin, java, classpath); err != nil {
		return nil, fmt.Errorf("%w (kept %s)", err, path)
	}
	for attempt := 0; ; attempt++ {
		err := c.start()
		if err == nil {
			return c, nil
		}
		for _, stopErr := range c.stopAll() {
			logf("stopping the ClickHouse cluster after a failed start: %v", stopErr)
		}
		if attempt == 0 && errors.Is(err, errAddrInUse) {
			logf("clickhouse cluster: %v; retrying on other ports", err)
			continue
		}
		return nil, fmt.Errorf("%w (kept %s)", err, path)
	}
}

// layOut makes the directories of ZooKeeper and the nodes.
func (c *ClickHouseCluster) layOut(bin, java, classpath string) error {
	zkDir := &serverDir{path: filepath.Join(c.dir.path, "zk")}
	if err := os.Mkdir(zkDir.path, 0o755); err != nil {
		return err
	}
	var err error
	if c.ZK, err = newZooKeeper(java, classpath, zkDir); err != nil {
		return err
	}
	c.dir.logs = append(c.dir.logs, zkDir.logs...)
	for i := 0; i < 2; i++ {
		ch := &ClickHouse{bin: bin, client: &http.Client{Timeout: 2 * time.Minute}, cluster: c, node: i,
			dir: &serverDir{path: filepath.Join(c.dir.path, "node"+strconv.Itoa(i+1))}}
		if err := os.Mkdir(ch.dir.path, 0o755); err != nil {
			return err
		}
		if err := ch.prepareDir(); err != nil {
			return err
		}
		// The server log alone: stdout.log stays empty unless the server
		// dies before it opens its log.
		c.dir.logs = append(c.dir.logs, ch.logPath)
		c.Nodes = append(c.Nodes, ch)
	}
	return nil
}

// start picks every port first (each node's remote_servers names both
// nodes' native ports, and the ZooKeeper port), writes the configs, then
// starts ZooKeeper and, once it answers, both nodes side by side.
func (c *ClickHouseCluster) start() error {
	ports, err := freePorts(1 + 3*len(c.Nodes))
	if err != nil {
		return err
	}
	if err := c.ZK.configure(ports[0]); err != nil {
		return err
	}
	for i, ch := range c.Nodes {
		ch.tcpPort, ch.httpPort, ch.interserverPort = ports[1+3*i], ports[2+3*i], ports[3+3*i]
	}
	for _, ch := range c.Nodes {
		if err := os.WriteFile(filepath.Join(ch.dir.path, "config.xml"), []byte(ch.configXML()), 0o644); err != nil {
			return err
		}
	}
	// ZooKeeper first: a node opens its session at start-up.
	if err := c.ZK.start(); err != nil {
		return err
	}
	errs := make([]error, len(c.Nodes))
	var wg sync.WaitGroup
	for i, ch := range c.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := ch.restartOnSamePorts(); err != nil {
				errs[i] = fmt.Errorf("node %d (native port %d): %w", i+1, ch.tcpPort, err)
				if strings.Contains(err.Error(), "Address already in use") {
					errs[i] = fmt.Errorf("%w: %w", errAddrInUse, errs[i])
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// stopAll stops both nodes, then ZooKeeper.
func (c *ClickHouseCluster) stopAll() []error {
	var errs []error
	for i, ch := range c.Nodes {
		if err := ch.stop(); err != nil {
			errs = append(errs, fmt.Errorf("node %d: %w", i+1, err))
		}
	}
	if err := c.ZK.stop(); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// restore brings back what a test took away: ZooKeeper if stopped, frozen
// nodes thawed, stopped nodes started on their ports.
func (c *ClickHouseCluster) restore() error {
	if c.ZK.cmd == nil {
		if err := c.ZK.start(); err != nil {
			return err
		}
	}
	for i, ch := range c.Nodes {
		if ch.cmd != nil {
			if err := ch.thaw(); err != nil {
				return fmt.Errorf("node %d: %w", i+1, err)
			}
			continue
		}
		if err := ch.restartOnSamePorts(); err != nil {
			return fmt.Errorf("node %d: %w", i+1, err)
		}
	}
	return nil
}

// DSN is a clickhouse-go DSN naming both nodes' native ports (node A first)
// with database as the default database.
func (c *ClickHouseCluster) DSN(database string) string {
	addrs := make([]string, len(c.Nodes))
	for i, ch := range c.Nodes {
		addrs[i] = ch.NativeAddr()
	}
	return "clickhouse://default:@" + strings.Join(addrs, ",") + "/" + database
}

// NodeDSN is the DSN of node i alone (0 is node A).
func (c *ClickHouseCluster) NodeDSN(i int, database string) string {
	return c.Nodes[i].DSN(database)
}

// Macros are node i's {shard} and {replica} macros.
func (c *ClickHouseCluster) Macros(i int) (shard, replica string) {
	for s, nodes := range c.shards {
		for _, n := range nodes {
			if n == i {
				return fmt.Sprintf("%02d", s+1), "r" + strconv.Itoa(i+1)
			}
		}
	}
	return "", ""
}

// clusterXML is the part of a cluster node's config.xml the single server
// lacks: the replication port, remote_servers, ZooKeeper, macros and the
// DDL queue. Empty for a server outside a cluster.
func (ch *ClickHouse) clusterXML() string {
	c := ch.cluster
	if c == nil {
		return ""
	}
	var b strings.Builder
	// interserver_http_host: replicas fetch parts from the address a node
	// advertises, its hostname by default.
	fmt.Fprintf(&b, `    <interserver_http_host>127.0.0.1</interserver_http_host>
    <interserver_http_port>%d</interserver_http_port>
    <remote_servers>
        <%s>
`, ch.interserverPort, c.Name)
	for _, nodes := range c.shards {
		b.WriteString("            <shard>\n                <internal_replication>true</internal_replication>\n")
		for _, n := range nodes {
			fmt.Fprintf(&b, "                <replica><host>127.0.0.1</host><port>%d</port></replica>\n", c.Nodes[n].tcpPort)
		}
		b.WriteString("            </shard>\n")
	}
	shard, replica := c.Macros(ch.node)
	fmt.Fprintf(&b, `        </%s>
    </remote_servers>
    <zookeeper>
        <node><host>127.0.0.1</host><port>%d</port></node>
    </zookeeper>
    <macros>
        <shard>%s</shard>
        <replica>%s</replica>
    </macros>
    <distributed_ddl>
        <path>/clickhouse/task_queue/ddl</path>
    </distributed_ddl>
`, c.Name, c.ZK.port, shard, replica)
	return b.String()
}

// freePorts is n distinct free loopback ports: all are held open until the
// last is picked, so the kernel cannot hand out one twice.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// finish removes the directory, or, when failed, keeps it and logs its path
// and the tails of its logs (what newServerDir's cleanup does for a test).
func (d *serverDir) finish(failed bool, logf func(string, ...any)) {
	if failed {
		logf("kept server dir %s", d.path)
		for _, log := range d.logs {
			logf("last %d lines of %s:\n%s", logTailLines, log, tailFile(log, logTailLines))
		}
		return
	}
	if err := os.RemoveAll(d.path); err != nil {
		logf("removing %s: %v", d.path, err)
	}
}
