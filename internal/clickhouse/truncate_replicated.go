package clickhouse

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// A TRUNCATE of a Replicated table ON CLUSTER deadlocks on 18.16
// (measured on the test rig: the second of 25 TRUNCATE ... ON CLUSTER of a
// two-replica table never finished). Each node's DDL worker runs the
// TRUNCATE holding the table's alter lock; a replica that is not the
// table's leader forwards it to the leader, and the leader's TRUNCATE
// waits for every replica to apply the drop, which the forwarding replica
// cannot do while its own TRUNCATE holds the lock. Issued on one node it
// deadlocks the same way whenever that node is not the leader.
//
// ALTER TABLE ... DROP PARTITION takes no alter lock, and the leader
// waits only for itself (replication_alter_partitions_sync = 1); the drop
// reaches the other replicas through the table's replication log, in
// order with the inserts around it: rows inserted before it have lower
// block numbers and are dropped on every replica, rows after it are not.
// So on a cluster a TRUNCATE of a Replicated table runs as one ALTER
// dropping every partition the table has ever had: the ones its
// block_numbers node in ZooKeeper lists, which is what TRUNCATE itself
// drops (25 of 25 such drops ON CLUSTER finished on the rig, each in
// under 1.2 s, and an identical block inserted after one is not taken
// for a duplicate). On one shard it runs on the node in use, as every
// ALTER does there (Distribute): ON CLUSTER, one such drop never
// finished on the node in use in a randomized workload (seed 953296).

// truncateTarget reads the table of a TRUNCATE TABLE [IF EXISTS] this
// package rendered, or reports that sql is not one.
func truncateTarget(sql string) (Target, bool) {
	s := scanner{sql: sql}
	if !s.keywords("TRUNCATE", "TABLE") {
		return Target{}, false
	}
	s.keywords("IF", "EXISTS")
	start := s.pos
	if !s.qualified() || !s.end() {
		return Target{}, false
	}
	t, err := parseQualified(strings.TrimSpace(sql[start:s.pos]))
	return t, err == nil
}

// DropPartitions renders the ALTER that drops the given partitions (by
// ID) of t.
func DropPartitions(t Target, ids []string) string {
	drops := make([]string, len(ids))
	for i, id := range ids {
		drops[i] = "DROP PARTITION ID " + QuoteString(id)
	}
	return "ALTER TABLE " + QuoteQualified(t) + " " + strings.Join(drops, ", ")
}

// truncateReplicated empties t on every node of the cluster as a
// TRUNCATE would, without the TRUNCATE's deadlock. A table the node in
// use does not hold is left alone, as TRUNCATE TABLE IF EXISTS does.
func (c *Conn) truncateReplicated(ctx context.Context, p driver.Conn, t Target) error {
	ids, held, err := c.partitionIDs(ctx, p, t)
	if err != nil {
		c.noteFailure(p, err)
		return fmt.Errorf("reading the partitions of %s on ClickHouse at %s: %w", QuoteQualified(t), c.hosts, err)
	}
	if !held || len(ids) == 0 {
		return nil
	}
	// On one shard on the node in use (Distribute leaves an ALTER
	// there): the drop reaches the other replicas through the
	// replication log. On shards ON CLUSTER, every shard's table.
	return c.run(ctx, p, []string{DropPartitions(t, ids)})
}

// partitionIDs lists the partitions a Replicated table has ever had, from
// its ZooKeeper block_numbers node (on a sharded cluster, every shard's
// table's); held is false when the node p reaches has no such Replicated
// table.
func (c *Conn) partitionIDs(ctx context.Context, p driver.Conn, t Target) (ids []string, held bool, err error) {
	var path string
	row := p.QueryRow(ctx, "SELECT zookeeper_path FROM system.replicas WHERE database = "+QuoteString(t.Database)+" AND table = "+QuoteString(t.Table))
	if err := row.Scan(&path); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, false, nil
		}
		return nil, false, err
	}
	paths := []string{path}
	if m := walshadowPath.FindStringSubmatch(path); m != nil && c.topology.Sharded() {
		// The shards' tables share the random part of the path under
		// their own {shard} values.
		shards, err := zkChildren(ctx, p, "/clickhouse/tables")
		if err != nil {
			return nil, true, err
		}
		paths = paths[:0]
		for _, shard := range shards {
			under, err := zkChildren(ctx, p, "/clickhouse/tables/"+shard+"/walshadow")
			if err != nil {
				if isNoNode(err) {
					continue // not a shard of walshadow's tables
				}
				// Passing over a shard that holds the table would leave
				// its rows.
				return nil, true, err
			}
			for _, name := range under {
				if name == m[1] {
					paths = append(paths, "/clickhouse/tables/"+shard+"/walshadow/"+name)
				}
			}
		}
	}
	seen := map[string]bool{}
	for _, path := range paths {
		names, err := zkChildren(ctx, p, path+"/block_numbers")
		if err != nil {
			return nil, true, err
		}
		for _, id := range names {
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	sort.Strings(ids)
	return ids, true, nil
}

// zkChildren lists the children of a ZooKeeper node through
// system.zookeeper.
func zkChildren(ctx context.Context, p driver.Conn, path string) ([]string, error) {
	rows, err := p.Query(ctx, "SELECT name FROM system.zookeeper WHERE path = "+QuoteString(path))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	return names, rows.Err()
}

// isNoNode reports whether err is ZooKeeper's answer for a path that does
// not exist, as system.zookeeper passes it on.
func isNoNode(err error) bool { return err != nil && strings.Contains(err.Error(), "No node") }
