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
// So on a cluster a TRUNCATE of a Replicated table runs as one ALTER ...
// ON CLUSTER dropping every partition the table has ever had: the ones
// its block_numbers node in ZooKeeper lists, which is what TRUNCATE
// itself drops (25 of 25 such drops finished on the rig, each in under
// 1.2 s, and an identical block inserted after one is not taken for a
// duplicate).

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
	drop := DropPartitions(t, ids)
	if !c.topology.Sharded() {
		// One shard: on the node in use only. ON CLUSTER, every replica
		// would run the drop, and a replica that is not the leader
		// forwards it: two drops on the leader at once stalled 18.16 in
		// the randomized workload (the node in use never finished its DDL
		// task). One drop is enough: it reaches the other replicas
		// through the replication log.
		if err := p.Exec(ctx, drop); err != nil {
			c.noteFailure(p, err)
			return fmt.Errorf("executing %s on ClickHouse at %s: %w", previewSQL(drop), c.hosts, err)
		}
		return nil
	}
	// Several shards: every shard's table drops its partitions. (On the
	// test rig each shard has one replica, which leads.)
	if drop, err = c.topology.Distribute(drop); err != nil {
		return err
	}
	if err := c.execOnCluster(ctx, p, drop); err != nil {
		c.noteFailure(p, err)
		return fmt.Errorf("executing %s on cluster %s: %w", previewSQL(drop), QuoteIdent(c.topology.Cluster), err)
	}
	return nil
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
				continue // not a shard of walshadow's tables
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
