package clickhouse

import (
	"context"
	"fmt"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// shardingKey reads the sharding expression of the Distributed table t
// on the node p reaches.
func (c *Conn) shardingKey(ctx context.Context, p driver.Conn, t Target) (string, error) {
	var engine string
	if err := p.QueryRow(ctx, "SELECT engine_full FROM system.tables WHERE database = "+QuoteString(t.Database)+" AND name = "+QuoteString(t.Table)).Scan(&engine); err != nil {
		c.noteFailure(p, err)
		return "", fmt.Errorf("reading the sharding key of %s on ClickHouse at %s: %w", QuoteQualified(t), c.hosts, err)
	}
	key, err := DistributedKey(engine)
	if err != nil {
		return "", fmt.Errorf("%s: %w", QuoteQualified(t), err)
	}
	return key, nil
}

// createLikeSharded copies table like as t on a sharded cluster: its
// local table under a new ZooKeeper path, and a Distributed table over
// that with like's sharding key.
func (c *Conn) createLikeSharded(ctx context.Context, p driver.Conn, t, like Target) error {
	var shown string
	if err := p.QueryRow(ctx, "SHOW CREATE TABLE "+QuoteQualified(LocalTarget(like))).Scan(&shown); err != nil {
		c.noteFailure(p, err)
		return fmt.Errorf("reading the definition of %s on ClickHouse at %s: %w", QuoteQualified(LocalTarget(like)), c.hosts, err)
	}
	local, err := CreateLikeReplicated(LocalTarget(t), LocalTarget(like), shown, ReplicaPath())
	if err != nil {
		return err
	}
	key, err := c.shardingKey(ctx, p, like)
	if err != nil {
		return err
	}
	return c.run(ctx, p, []string{local, CreateDistributed(c.topology.Cluster, t, key)})
}
