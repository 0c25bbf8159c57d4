package preflight

// This file owns the checks of a ClickHouse cluster (clickhouse_ddl's
// cluster): ZooKeeper answers the server walshadow writes to, and every
// node of system.clusters, read over a connection of its own, answers
// with its version and macros, the nodes share one dialect and their
// macros place a Replicated table.

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/walshadow/walshadow/internal/clickhouse"
)

// checkCluster reports the cluster's nodes and what ZooKeeper and the
// nodes' versions and macros allow. skip, when not "", is why the checks
// that run statements ON CLUSTER (database, write) would not tell
// anything: one would wait for a node that is away, or fail for want of
// ZooKeeper with an error that is not theirs.
func (fs *findings) checkCluster(ctx context.Context, conn *clickhouse.Conn, cfg clickhouse.ConnConfig, database string) (skip string) {
	zkCtx, cancel := context.WithTimeout(ctx, clickhouse.NodeTimeout)
	var roots uint64
	zkErr := conn.Native().QueryRow(zkCtx, clickhouse.ZooKeeperProbe).Scan(&roots)
	cancel()
	if zkErr != nil {
		fs.fail("clickhouse_zookeeper", fmt.Sprintf("ZooKeeper does not answer the server the DSN reaches (%s failed): %s", clickhouse.ZooKeeperProbe, clickhouse.ErrorLine(zkErr)),
			"without ZooKeeper Replicated tables are read-only and no statement ON CLUSTER can be queued: check the server's <zookeeper> section (hosts, ports) and that ZooKeeper (or ClickHouse Keeper) runs and is reachable from the server's host")
		skip = "their statements ON CLUSTER need ZooKeeper (see clickhouse_zookeeper)"
	} else {
		fs.info("clickhouse_zookeeper", "ZooKeeper answers the server the DSN reaches")
	}
	facts := clickhouse.ReadNodes(ctx, cfg, conn.Topology(), database)
	nodes, ddlOK := clusterFindings(facts)
	fs.r = append(fs.r, nodes...)
	if !ddlOK && skip == "" {
		skip = "their statements ON CLUSTER would wait for the node(s) that do not answer"
	}
	return skip
}

// clusterFindings judges the facts of the nodes: a line per node (Info,
// or a Warning for a node that does not answer or cannot reach ZooKeeper:
// rows still flow through the DSN's node, but DDL waits for it), then one
// Error line for mixed dialects and one for macros that cannot place a
// Replicated table. ddlOK: every node answered.
func clusterFindings(facts []clickhouse.NodeFacts) (Report, bool) {
	var fs findings
	ddlOK := true
	for _, f := range facts {
		switch {
		case f.Err != nil:
			ddlOK = false
			fs.warn("clickhouse_node", fmt.Sprintf("%s does not answer: %s", f.Name(), clickhouse.ErrorLine(f.Err)),
				"rows still go to the DSN's node and reach this one by replication once it is back, but every statement ON CLUSTER (new tables, schema changes) waits until it has run it: start it, or let walshadow's host reach it at the host and port remote_servers names")
		case f.ZooKeeperErr != nil:
			fs.warn("clickhouse_node", fmt.Sprintf("%s: %s; %s", f.Name(), describeNode(f), clickhouse.ErrorLine(f.ZooKeeperErr)),
				"its Replicated tables are read-only and it runs no statement ON CLUSTER until it reaches ZooKeeper again: check its <zookeeper> section and the way to ZooKeeper from its host")
		default:
			fs.info("clickhouse_node", f.Name()+": "+describeNode(f))
		}
	}
	if err := clickhouse.CheckDialects(facts); err != nil {
		fs.fail("clickhouse_cluster_dialect", err.Error(), "run one ClickHouse release (or releases of one dialect) on every node")
	}
	if err := clickhouse.CheckMacros(facts); err != nil {
		fs.fail("clickhouse_cluster_macros", err.Error(),
			"give every node <macros> with <shard> (the same on every replica of a shard) and <replica> (its own), then restart it")
	}
	return fs.r, ddlOK
}

// describeNode is a node's version and macros.
func describeNode(f clickhouse.NodeFacts) string {
	names := make([]string, 0, len(f.Macros))
	for name := range f.Macros {
		names = append(names, name)
	}
	sort.Strings(names)
	macros := make([]string, len(names))
	for i, name := range names {
		macros[i] = name + "=" + f.Macros[name]
	}
	list := "none"
	if len(macros) > 0 {
		list = strings.Join(macros, ", ")
	}
	return fmt.Sprintf("ClickHouse %s, macros %s", f.Version, list)
}
