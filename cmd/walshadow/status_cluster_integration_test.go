package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/session"
	"github.com/walshadow/walshadow/internal/testrig"
)

// TestStatusClusterNodesIntegration: `status <config>` with an output on
// two replicas lists both nodes up with their macros, version and
// tables; ZooKeeper stopped shows on each node, with its table
// read-only; node B stopped is DOWN naming it; both stopped is ClickHouse
// not reached; status exits 0 each time, within its timeout, and never
// prints the DSN's password.
func TestStatusClusterNodesIntegration(t *testing.T) {
	cluster := testrig.StartClickHouseCluster(t, testrig.TwoReplicas)
	a, b := cluster.Nodes[0], cluster.Nodes[1]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := clickhouse.Open(ctx, clickhouse.ConnConfig{DSN: cluster.NodeDSN(0, "default"), Cluster: testrig.ClusterName})
	if err != nil {
		t.Fatal(err)
	}
	target := clickhouse.Target{Database: "st", Table: "public.t"}
	create, err := clickhouse.CreateDatabase(target.Database)
	if err != nil {
		t.Fatal(err)
	}
	table, err := clickhouse.CreateTable(conn.Dialect(), target, []clickhouse.ColumnSpec{{Name: "id", Type: clickhouse.ColumnType{Type: "Int64", Repr: clickhouse.ReprInt}}}, []string{"id"}, clickhouse.TableOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{create, table} {
		if err := conn.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	conn.Close()
	// The rig's default user has no password; one given in the DSN must
	// not be printed even in an authentication error.
	a.HTTPQuery(t, "SELECT 1")

	stateDir := t.TempDir()
	if err := session.WriteManifest(stateDir, testManifest(t)); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(t.TempDir(), "p.yaml")
	writeConfig := func(dsn string) {
		conf := fmt.Sprintf(`
walshadow:
  - label: main
    source_dsn: ""
    state_dir: %s
input:
  pg_physical_wal: { session: main }
output:
  clickhouse_ddl:
    session: main
    dsn: %s
    database: st
    cluster: %s
`, stateDir, dsn, testrig.ClusterName)
		if err := os.WriteFile(config, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	status := func(what string) string {
		t.Helper()
		started := time.Now()
		out, msg, code := runStatusCLI(t, config)
		if code != 0 {
			t.Fatalf("%s: exit %d (%s):\n%s", what, code, msg, out)
		}
		if took := time.Since(started); took > statusSourceTimeout {
			t.Errorf("%s: status took %s", what, took)
		}
		t.Logf("%s:\n%s", what, out)
		return out
	}
	line := func(out, format string, args ...any) {
		t.Helper()
		if re := regexp.MustCompile("(?m)^" + fmt.Sprintf(format, args...) + "$"); !re.MatchString(out) {
			t.Errorf("output lacks %s", re)
		}
	}
	addr := func(i int) string { return regexp.QuoteMeta(cluster.Nodes[i].NativeAddr()) }

	writeConfig(cluster.NodeDSN(0, "st"))
	out := status("both nodes up")
	line(out, "NODES\\s+cluster `ws`, database `st`: 2 node\\(s\\); .*")
	line(out, `%s\s+1\s+1\s+shard=01 replica=r1\s+18\.16\.1\s+0\s+0 s\s+up, 1 table\(s\)`, addr(0))
	line(out, `%s\s+1\s+2\s+shard=01 replica=r2\s+18\.16\.1\s+0\s+0 s\s+up, 1 table\(s\)`, addr(1))

	// ZooKeeper away: each node says so, and its table turns read-only
	// once its session expires.
	cluster.ZK.Stop(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		out = status("ZooKeeper stopped")
		if strings.Count(out, "1 read-only (no ZooKeeper session); ZooKeeper: code: 999") == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(2 * time.Second)
	}
	for i := range cluster.Nodes {
		line(out, `%s\s+.*\s+up, 1 table\(s\), 1 read-only \(no ZooKeeper session\); ZooKeeper: code: 999, message: All connection tries failed .*`, addr(i))
	}
	cluster.ZK.Start(t)

	b.StopServer(t)
	out = status("node B stopped")
	// Its table may still be read-only: 18.16 takes up to ~10 s after
	// ZooKeeper returns to take it back.
	line(out, `%s\s+1\s+1\s+shard=01 replica=r1\s+18\.16\.1\s+\d+\s+\d+ s\s+up, 1 table\(s\).*`, addr(0))
	line(out, `%s\s+1\s+2\s+-\s+-\s+-\s+-\s+DOWN: connecting to node %s as user "default": .*connection refused`, addr(1), addr(1))

	a.StopServer(t)
	const password = "hunter2-not-shown"
	writeConfig(strings.Replace(cluster.NodeDSN(0, "st"), "default:@", "default:"+password+"@", 1))
	out = status("both nodes stopped")
	line(out, "NODES\\s+cluster `ws`, database `st`: ClickHouse not reached: connecting to ClickHouse at %s as user \"default\": .*", addr(0))
	if strings.Contains(out, password) {
		t.Errorf("the password is printed")
	}
	if !strings.Contains(out, "received → delivered") {
		t.Errorf("the state directory's report is missing when ClickHouse is unreachable")
	}
}
