package output

import (
	"context"

	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/load"
)

// chConn is what the output asks of ClickHouse: a *clickhouse.Conn, or in
// tests of the writer's batching and barriers, a fake that needs no
// server.
type chConn interface {
	load.Conn // what the initial loads use of it
	Database() string
	InsertBlockRetrying(ctx context.Context, t clickhouse.Target, b *clickhouse.Block, p clickhouse.RetryPolicy, onRetry func(attempt int, err error)) error
	// Boot and UnfinishedMutations tell a ClickHouse restart and what it
	// brought back (restart.go).
	Boot(ctx context.Context) (clickhouse.Boot, error)
	UnfinishedMutations(ctx context.Context, targets []clickhouse.Target) ([]clickhouse.Mutation, error)
	// RepairNodes re-creates on a cluster's nodes the tables some lack.
	RepairNodes(ctx context.Context, targets []clickhouse.Target) (repaired, skipped []string, err error)
	Close() error
}

var _ chConn = (*clickhouse.Conn)(nil)
