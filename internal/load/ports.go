package load

import (
	"context"

	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/shadow"
)

// Source is what the engine reads from the source cluster's side.
type Source interface {
	// SourceDSN is where loads connect to (COPY, BASE_BACKUP).
	SourceDSN() string
	// DescLog is the session's descriptor log (nil until it is open): a
	// base backup pass decodes pages with the relations' captured shapes.
	DescLog() *desclog.Log
	// Bridge renders the values of types walshadow does not decode (nil
	// when no bridge is configured).
	Bridge() *shadow.Bridge
}

// Conn is the ClickHouse operations the engine uses (the output's
// connection: *clickhouse.Conn satisfies it).
type Conn interface {
	Dialect() clickhouse.Dialect
	Exec(ctx context.Context, sql string) error
	CreateLike(ctx context.Context, t, like clickhouse.Target) error
	Table(ctx context.Context, t clickhouse.Target) (clickhouse.CHTable, error)
	TableExists(ctx context.Context, t clickhouse.Target) (bool, error)
	TableUUID(ctx context.Context, t clickhouse.Target) (string, error)
	DatabaseEngine(ctx context.Context, database string) (string, error)
	Insert(ctx context.Context, t clickhouse.Target, cols []clickhouse.ColumnSpec, rows [][]any) error
	InsertRetrying(ctx context.Context, t clickhouse.Target, cols []clickhouse.ColumnSpec, rows [][]any, p clickhouse.RetryPolicy, onRetry func(attempt int, err error)) error
	LookupLatest(ctx context.Context, t clickhouse.Target, key []clickhouse.ColumnSpec, keys [][]any, want []clickhouse.ColumnSpec) ([][]any, error)
	LookupVersions(ctx context.Context, t clickhouse.Target, key []clickhouse.ColumnSpec, keys [][]any, want []clickhouse.ColumnSpec) ([][][]any, error)
}

// Agreements are the agreed table shapes (*clickhouse.Store satisfies
// it): a load reads its relation's, and publishing moves it to the
// table's configured name.
type Agreements interface {
	Get(oid uint32) *clickhouse.Agreed
	OnTarget(t clickhouse.Target) []*clickhouse.Agreed
	Put(a *clickhouse.Agreed) error
}

// Destination is the output the engine loads into.
type Destination interface {
	// Conn is ClickHouse (nil while the output is not connected).
	Conn() Conn
	// WithLock runs fn between two of the output's batches (under its
	// lock): a staging table is made and a load published there. Before
	// fn, the output makes sure ClickHouse holds no rows a restart of it
	// brought back (a truncated table's), which the publish would copy.
	WithLock(ctx context.Context, fn func() error) error
	// Forget drops what the output derived from oid's agreement (called
	// with its lock held, when publishing moves the agreement).
	Forget(oid uint32)
	// SetState reports a table's state (schema.table of the source):
	// loading, or following once its load is published.
	SetState(table string, loading bool)
	// InsertRetried counts a retried insert.
	InsertRetried()
	// Widen is called when a load of oid failed with cause: true if the
	// output widened a column to hold the value and reset the relation
	// (its load starts over, into a new delta table).
	Widen(ctx context.Context, oid uint32, cause error) (bool, error)
	// Local reports whether err, a load's failure, concerns only its
	// table (false: every table's, or ClickHouse away): only such a
	// failure, recurring identically, parks the table (park.go).
	Local(err error) bool
	// ParkingFor is what parking the table of e, whose load failed
	// identically with cause, records: the conditions that could cure it
	// as they stand now (Under) and the remedy (Since, Reason, At and
	// Count are the engine's).
	ParkingFor(e Entry, cause error) Parking
	// Parked is told that the load of e is parked (called without the
	// engine's lock): the table is not written until it is un-parked.
	Parked(e Entry)
}

// Config is how the engine runs.
type Config struct {
	Workers    int   // tables loaded at once, and COPY streams at once
	SplitBytes int64 // copy tables larger than this as ctid ranges of about this size
	MaxRate    int64 // bytes per second read from the source by all loads (0: no limit)
	BatchRows  int   // a staging insert's rows...
	BatchBytes int   // ...and bytes, at most
	Retry      clickhouse.RetryPolicy
	SpillDir   string // where a base backup pass spills pages
}
