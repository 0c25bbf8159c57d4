package chcompare

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/walshadow/walshadow/internal/clickhouse"
)

// ShardSplit is how one Distributed table's rows lie on two shards.
type ShardSplit struct {
	Table string // the Distributed table's name
	Key   string // its sharding key expression
	// RowsA and RowsB are the rows of each shard's local table; Both the
	// rows of shard A whose sharding-key columns shard B holds too.
	RowsA, RowsB, Both uint64
}

func (s ShardSplit) String() string {
	return fmt.Sprintf("%s: sharded by %s; rows on shard 1 %d, on shard 2 %d; rows whose key is on both: %d", s.Table, s.Key, s.RowsA, s.RowsB, s.Both)
}

// ShardSplits reads, for every Distributed table of database, how its
// rows lie on the shard of a (a connection to a node of the first shard)
// and the shard whose node answers at bAddr (its native address, read
// through remote()). A row's every version must be on one shard: Both is
// zero for every table of a correct sharded replica.
func ShardSplits(ctx context.Context, a driver.Conn, bAddr, database string) ([]ShardSplit, error) {
	rows, err := a.Query(ctx, "SELECT name, engine_full FROM system.tables WHERE database = "+clickhouse.QuoteString(database)+" AND engine = 'Distributed' ORDER BY name")
	if err != nil {
		return nil, fmt.Errorf("listing the Distributed tables of %s: %w", database, err)
	}
	var splits []ShardSplit
	for rows.Next() {
		var s ShardSplit
		var engine string
		if err := rows.Scan(&s.Table, &engine); err != nil {
			rows.Close()
			return nil, err
		}
		if s.Key, err = clickhouse.DistributedKey(engine); err != nil {
			rows.Close()
			return nil, fmt.Errorf("%s: %w", s.Table, err)
		}
		splits = append(splits, s)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	localDB := database + clickhouse.LocalSuffix
	for i := range splits {
		s := &splits[i]
		cols := strings.TrimSuffix(strings.TrimPrefix(s.Key, "sipHash64("), ")")
		local := clickhouse.QuoteQualified(clickhouse.Target{Database: localDB, Table: s.Table})
		remote := fmt.Sprintf("remote(%s, %s, %s)", clickhouse.QuoteString(bAddr), clickhouse.QuoteString(localDB), clickhouse.QuoteString(s.Table))
		for _, q := range []struct {
			sql string
			to  *uint64
		}{
			{"SELECT count() FROM " + local, &s.RowsA},
			{"SELECT count() FROM " + remote, &s.RowsB},
			{fmt.Sprintf("SELECT count() FROM %s WHERE (%s) IN (SELECT %s FROM %s)", local, cols, cols, remote), &s.Both},
		} {
			if err := a.QueryRow(ctx, q.sql).Scan(q.to); err != nil {
				return nil, fmt.Errorf("%s: %s: %w", s.Table, q.sql, err)
			}
		}
	}
	return splits, nil
}

// CheckShards reads ShardSplits through node A (its DSN) and node B (its
// native address): summary is a line per table and a count; err names
// every table with a key on both shards, or says no table has rows on
// both (the sharding was not exercised).
func CheckShards(ctx context.Context, aDSN, bAddr, database string) (summary string, err error) {
	conn, err := clickhouse.Open(ctx, clickhouse.ConnConfig{DSN: aDSN})
	if err != nil {
		return "", err
	}
	defer conn.Close()
	splits, err := ShardSplits(ctx, conn.Native(), bAddr, database)
	if err != nil {
		return "", err
	}
	var lines []string
	var errs []error
	split := 0
	for _, s := range splits {
		lines = append(lines, s.String())
		if s.Both != 0 {
			errs = append(errs, fmt.Errorf("%s: %d rows of shard 1 have a key that shard 2 holds too", s.Table, s.Both))
		}
		if s.RowsA != 0 && s.RowsB != 0 {
			split++
		}
	}
	if split == 0 {
		errs = append(errs, fmt.Errorf("no table of %d has rows on both shards", len(splits)))
	}
	lines = append(lines, fmt.Sprintf("%d of %d Distributed tables have rows on both shards", split, len(splits)))
	return strings.Join(lines, "\n"), errors.Join(errs...)
}
