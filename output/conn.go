package output

import (
	"context"

	"github.com/walshadow/walshadow/internal/clickhouse"
)

// chConn is what the output asks of ClickHouse: a *clickhouse.Conn, or in
// tests of the writer's batching and barriers, a fake that needs no
// server.
type chConn interface {
	Dialect() clickhouse.Dialect
	Database() string
	Exec(ctx context.Context, sql string) error
	Table(ctx context.Context, t clickhouse.Target) (clickhouse.CHTable, error)
	TableUUID(ctx context.Context, t clickhouse.Target) (string, error)
	DatabaseEngine(ctx context.Context, database string) (string, error)
	Insert(ctx context.Context, t clickhouse.Target, cols []clickhouse.ColumnSpec, rows [][]any) error
	InsertRetrying(ctx context.Context, t clickhouse.Target, cols []clickhouse.ColumnSpec, rows [][]any, p clickhouse.RetryPolicy, onRetry func(attempt int, err error)) error
	InsertBlockRetrying(ctx context.Context, t clickhouse.Target, b *clickhouse.Block, p clickhouse.RetryPolicy, onRetry func(attempt int, err error)) error
	LookupLatest(ctx context.Context, t clickhouse.Target, key []clickhouse.ColumnSpec, keys [][]any, want []clickhouse.ColumnSpec) ([][]any, error)
	Close() error
}

var _ chConn = (*clickhouse.Conn)(nil)
