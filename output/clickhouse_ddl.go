// Package output registers the clickhouse_ddl Benthos output: it applies
// walshadow_decode's row changes and schema events to ClickHouse
// ReplacingMergeTree tables, so that for every replicated table
// SELECT ... FINAL WHERE _is_deleted = 0 equals the source table.
//
// Rows: each message becomes a row of its table's pending block, every
// value converted by the column's type map (internal/clickhouse); a delete
// writes its key with _is_deleted = 1; an update whose unchanged TOASTed
// columns were left out takes them from the newest earlier row of that key
// (pending here, else read back from ClickHouse), never a guess. A block is
// inserted when it reaches batch_rows or batch_bytes, and every block at the
// end of WriteBatch: the batch is acknowledged only once all its rows are
// durable on ClickHouse. Batches are written one at a time (the session's
// order), tables of one batch in parallel up to max_in_flight.
//
// Schema events and TRUNCATE are barriers: every pending row is inserted
// first, then the DDL runs. A TRUNCATE is TRUNCATE TABLE plus a mutation
// deleting the rows older than it, so that a ClickHouse restart cannot
// bring them back, and after a restart nothing is written until that
// mutation is done (restart.go; DROP and RENAME need nothing of the kind:
// "Restarts" in internal/clickhouse's documentation).
//
// What DDL runs is decided by clickhouse.Reconcile from the table's
// configuration, its durable agreed shape (state_dir/baseline.json) and
// what ClickHouse holds — never from an in-memory cache — so a restart, a
// table dropped on ClickHouse or a column dropped there all converge to
// the same tables.
package output

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/walshadow/walshadow/config"
	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/load"
	"github.com/walshadow/walshadow/internal/preflight"
	"github.com/walshadow/walshadow/internal/session"
	"github.com/walshadow/walshadow/internal/shadow"
	"github.com/walshadow/walshadow/internal/statefile"
	"github.com/walshadow/walshadow/internal/wal"
)

// Field names of the clickhouse_ddl output (the exported ones are read by
// `walshadow preflight`).
const (
	FieldDSN           = "dsn"
	FieldDatabase      = "database"
	FieldTLS           = "tls"
	FieldCompression   = "compression"
	FieldCluster       = "cluster"
	FieldInclude       = "include"
	FieldExclude       = "exclude"
	FieldTables        = "tables"
	fieldDropStrategy  = "drop_strategy"
	fieldMaxInFlight   = "max_in_flight"
	fieldBatchRows     = "batch_rows"
	fieldBatchBytes    = "batch_bytes"
	fieldRetry         = "retry"
	fieldRetryAttempts = "max_attempts"
	fieldRetryInitial  = "initial_interval"
	fieldRetryMax      = "max_interval"
	fieldInsertTimeout = "insert_timeout"
	fieldStateDir      = "state_dir"
	fieldBatching      = "batching"

	// Per-table fields under `tables`.
	fieldTDatabase    = "database"
	fieldTTable       = "table"
	fieldTColumns     = "columns"
	fieldTExclude     = "exclude_columns"
	fieldTNames       = "column_names"
	fieldTTypes       = "column_types"
	fieldTOrderBy     = "order_by"
	fieldTPartitionBy = "partition_by"
	fieldTSettings    = "settings"
	fieldTDrop        = "drop_strategy"
	fieldTChangeLog   = "change_log"
)

// Spec is the clickhouse_ddl output's config spec.
func Spec() *service.ConfigSpec { return outputSpec() }

func outputSpec() *service.ConfigSpec {
	return service.NewConfigSpec().
		Beta().
		Categories("Services").
		Summary("Applies a walshadow session's row changes and schema events to ClickHouse ReplacingMergeTree tables: rows in batched native inserts, CREATE/ALTER/TRUNCATE/DROP behind a barrier, coherent across restarts.").
		Description(`
Place it after `+"`walshadow_decode`"+`. Each replicated source table
`+"`schema.table`"+` lands in `+"`database`"+` as the table `+"`schema.table`"+` (a dot or
percent sign inside either part is escaped as %2E / %25, so names never
collide across schemas); `+"`tables`"+` overrides the target, columns and
engine per table. Every table has the source's columns (types per the map in
the README) plus `+"`_lsn UInt64`"+` (the change's own WAL position, the
ReplacingMergeTree version), `+"`_xid UInt32`"+`, the commit time
(`+"`_commit_ts DateTime64(6, 'UTC')`"+`, or `+"`_commit_ts_us UInt64`"+` microseconds
on servers without DateTime64) and `+"`_is_deleted UInt8`"+`, ordered by the
replica identity key. Read a table as the source has it with
`+"`SELECT ... FROM t FINAL WHERE _is_deleted = 0`"+`.

A table without a replica identity key (no primary key, REPLICA IDENTITY
NOTHING, or FULL) is keyed by each row's physical identity, which every
heap record in the WAL names: `+"`_filenode UInt32, _block UInt32, _offset UInt16`"+`
(the heap's relfilenode and the tuple's TID), the ORDER BY; an update
deletes the version it replaced and writes the new one, so
`+"`SELECT ... FINAL WHERE _is_deleted = 0`"+` is the table, identical duplicate rows
included. VACUUM FULL, CLUSTER and table rewrites move every tuple without
row records: the table is reloaded. `+"`tables.<name>.change_log: true`"+` asks for a
change log instead (every row image, ordered by `+"`(_lsn, _seq)`"+`; the table is the
inserted images minus the deleted ones:
`+"`SELECT cols FROM t FINAL GROUP BY cols HAVING sum(if(_is_deleted = 1, -1, 1)) > 0`"+`),
as tables without a key got before; `+"`order_by`"+` naming columns that do identify
its rows makes it a mirror. A primary key added later rebuilds the table
under the key; a key dropped reloads it.

Schema changes: ADD COLUMN (with the default rows written before it read),
RENAME COLUMN (kept under the old ClickHouse name on servers without RENAME
COLUMN, such as 18.16), DROP COLUMN, TRUNCATE; a dropped table is retained
(default), retained with a warning, or dropped, per `+"`drop_strategy`"+`. A column
type change ClickHouse converts exactly (integer and float widenings,
wider numeric, DROP NOT NULL) is a MODIFY COLUMN; one whose ClickHouse type
and values are unchanged (varchar(n) to text) changes nothing; any other
reloads the table under its new shape.

A table that cannot take a change (ClickHouse refuses its rows, a value
cannot be converted, the processor could not decode it) never stops the
others: per `+"`on_error`"+` it is failed and reloaded (default) or the output stops.
A failure that comes back the same way after a reload parks the table: it
is neither loaded nor written until its shape, its configuration or the
ClickHouse server changes, or `+"`walshadow reload <config.yaml> <schema.table>`"+`
asks for it.

The agreed shape of every table is kept in `+"`state_dir`"+`; on start every
table in scope is reconciled with ClickHouse, re-creating tables and columns
dropped there.`).
		Fields(
			service.NewStringField(config.FieldSession).
				Description("Label of the `walshadow` resource whose changes this output applies (its descriptor log gives the tables' shapes).").
				Example("main"),
			service.NewStringField(FieldDSN).
				Description("ClickHouse native-protocol DSN; several hosts are tried in turn. Query parameters of clickhouse-go apply (`secure`, `skip_verify`, `dial_timeout`, `compress`).").
				Example("clickhouse://default:@127.0.0.1:9000/analytics").
				Example("clickhouse://writer:${CH_PASSWORD}@ch1:9440,ch2:9440/analytics?secure=true").
				LintRule(`root = if this.or("") == "" { ["dsn must name the ClickHouse server"] }`).
				Secret(),
			service.NewStringField(FieldDatabase).
				Description("Target database of tables without their own; empty means the DSN's database, else `default`. Created if missing.").
				Default(""),
			service.NewStringField(FieldCluster).
				Description("A cluster of the server's `remote_servers` (`system.clusters`) to replicate into: every statement runs `ON CLUSTER` and tables are `ReplicatedReplacingMergeTree`. One shard: every node holds every row. Several shards (of one replica each): each table's rows in a local table of the database `<database>_local` on every shard, under its name a `Distributed` table sharded by a hash of the row's identity. Empty: the one server the DSN names. See docs/clusters.md.").
				Example("ws").
				Default(""),
			service.NewTLSToggledField(FieldTLS),
			service.NewStringEnumField(FieldCompression, "lz4", "zstd", "none").
				Description("Compression of the native protocol's data blocks.").
				Default("lz4").Advanced(),
			service.NewStringListField(FieldInclude).
				Description("Tables to replicate, as `schema.table` patterns (`*` and `?` wildcards). Tables named under `tables` are always included.").
				Default([]any{"*.*"}),
			service.NewStringListField(FieldExclude).
				Description("Tables never replicated, as `schema.table` patterns; exclusion wins over `include`.").
				Default([]any{}),
			service.NewObjectMapField(FieldTables,
				service.NewStringField(fieldTDatabase).Description("Target database.").Optional(),
				service.NewStringField(fieldTTable).Description("Target table name.").Optional(),
				service.NewStringListField(fieldTColumns).Description("A pinned subset: only these source columns when the table is first replicated; columns the source adds later are added.").Optional(),
				service.NewStringListField(fieldTExclude).Description("Source columns never replicated.").Optional(),
				service.NewStringMapField(fieldTNames).Description("Source column name → ClickHouse column name.").Optional(),
				service.NewStringMapField(fieldTTypes).Description("Source column name → ClickHouse type replacing the mapped one (e.g. `String`, `Nullable(Decimal(20, 4))`).").Optional(),
				service.NewStringListField(fieldTOrderBy).Description("ClickHouse columns of the sorting key instead of the replica identity key; they must identify a row and be NOT NULL.").Optional(),
				service.NewStringField(fieldTPartitionBy).Description("PARTITION BY expression, verbatim.").Optional(),
				service.NewStringMapField(fieldTSettings).Description("Table SETTINGS.").Optional(),
				service.NewStringEnumField(fieldTDrop, string(clickhouse.DropRetain), string(clickhouse.DropWarn), string(clickhouse.DropDrop)).Description("What a DROP TABLE on the source does to this table.").Optional(),
				service.NewStringEnumField(fieldTInitialLoad, string(load.ModeCopy), string(load.ModeBaseBackup), string(load.ModeNone)).Description("This table's initial load mode, over `initial_load`.").Optional(),
				service.NewBoolField(fieldTChangeLog).Description("A table without a replica identity key becomes a change log (every row image, ordered by `(_lsn, _seq)`) when first replicated, instead of a table keyed by each row's physical identity.").Optional(),
				service.NewStringEnumField(fieldTOnError, string(OnErrorReload), string(OnErrorStop)).Description("What this table does when it cannot take a change, over `on_error`.").Optional(),
			).Description("Per-table settings, keyed by the source table's `schema.table`.").
				Default(map[string]any{}),
			service.NewStringEnumField(fieldDropStrategy, string(clickhouse.DropRetain), string(clickhouse.DropWarn), string(clickhouse.DropDrop)).
				Description("What a DROP TABLE on the source does on ClickHouse: `retain` keeps the table, `warn` keeps it and logs a warning, `drop` drops it.").
				Default(string(clickhouse.DropRetain)),
			service.NewIntField(fieldMaxInFlight).
				Description("Inserts of different tables run in parallel up to this many; one table's rows and its schema events are never reordered.").
				Default(4),
			service.NewIntField(fieldBatchRows).
				Description("A table's pending rows are inserted once they reach this many.").
				Default(65536).Advanced(),
			service.NewIntField(fieldBatchBytes).
				Description("A table's pending rows are inserted once their values reach this many bytes.").
				Default(16<<20).Advanced(),
			service.NewObjectField(fieldRetry,
				service.NewIntField(fieldRetryAttempts).Default(5),
				service.NewDurationField(fieldRetryInitial).Default("250ms"),
				service.NewDurationField(fieldRetryMax).Default("10s"),
			).Description("Retries of an insert that failed for a transient reason (connection lost, timeout, too many parts); other errors stop at once. Past the attempts the batch fails and is redelivered from the session's durable state.").Advanced(),
			service.NewDurationField(fieldInsertTimeout).
				Description("Timeout of one insert.").
				Default("30s").Advanced(),
			service.NewStringField(fieldStateDir).
				Description("Where the agreed table shapes are kept; empty means `clickhouse` under the session's state_dir.").
				Default("").Advanced(),
			initialLoadField(),
			onErrorField(),
			service.NewBatchPolicyField(fieldBatching),
		)
}

func init() {
	err := service.RegisterBatchOutput("clickhouse_ddl", outputSpec(),
		func(conf *service.ParsedConfig, mgr *service.Resources) (service.BatchOutput, service.BatchPolicy, int, error) {
			o, pol, err := newOutputFromConfig(conf, mgr)
			// Batches are written one at a time (o.mu), each after every
			// earlier batch of its session run is acknowledged
			// (awaitTurn): pipeline threads may hand them over in any
			// order, and a batch waiting for its turn must not keep the one
			// it waits for from being written, so benthos may call
			// WriteBatch for up to maxOrderedInFlight batches at once.
			// Parallelism is across tables inside a batch.
			return o, pol, maxOrderedInFlight, err
		})
	if err != nil {
		panic(err)
	}
}

// settings are the parsed output config.
type settings struct {
	sessionLabel  string
	conn          clickhouse.ConnConfig
	database      string
	drop          clickhouse.DropStrategy
	maxInFlight   int
	batchRows     int
	batchBytes    int
	retry         clickhouse.RetryPolicy
	insertTimeout time.Duration
	stateDir      statefile.OutputDir
	load          loadSettings
	tableLoad     map[string]load.Mode // tables.<name>.initial_load
	onError       OnError
	tableOnError  map[string]OnError // tables.<name>.on_error
}

func newOutputFromConfig(conf *service.ParsedConfig, mgr *service.Resources) (*chOutput, service.BatchPolicy, error) {
	var s settings
	var err error
	var pol service.BatchPolicy
	str := func(name string) string {
		if err == nil {
			var v string
			v, err = conf.FieldString(name)
			return v
		}
		return ""
	}
	num := func(path ...string) int {
		if err == nil {
			var v int
			v, err = conf.FieldInt(path...)
			return v
		}
		return 0
	}
	dur := func(path ...string) time.Duration {
		if err == nil {
			var v time.Duration
			v, err = conf.FieldDuration(path...)
			return v
		}
		return 0
	}
	s.sessionLabel = str(config.FieldSession)
	s.conn.DSN = str(FieldDSN)
	s.database = str(FieldDatabase)
	s.conn.Compression = str(FieldCompression)
	s.conn.Cluster = str(FieldCluster)
	s.drop = clickhouse.DropStrategy(str(fieldDropStrategy))
	s.maxInFlight = num(fieldMaxInFlight)
	s.batchRows = num(fieldBatchRows)
	s.batchBytes = num(fieldBatchBytes)
	s.retry.MaxAttempts = num(fieldRetry, fieldRetryAttempts)
	s.retry.Initial = dur(fieldRetry, fieldRetryInitial)
	s.retry.Max = dur(fieldRetry, fieldRetryMax)
	s.insertTimeout = dur(fieldInsertTimeout)
	s.stateDir = statefile.OutputDir(str(fieldStateDir))
	s.onError = OnError(str(fieldOnError))
	if err != nil {
		return nil, pol, err
	}
	if s.conn.DSN == "" {
		return nil, pol, errors.New("dsn must name the ClickHouse server")
	}
	if s.maxInFlight < 1 || s.batchRows < 1 || s.batchBytes < 1 || s.retry.MaxAttempts < 1 {
		return nil, pol, fmt.Errorf("%s, %s, %s and %s.%s must be at least 1", fieldMaxInFlight, fieldBatchRows, fieldBatchBytes, fieldRetry, fieldRetryAttempts)
	}
	if tlsConf, enabled, terr := conf.FieldTLSToggled(FieldTLS); terr != nil {
		return nil, pol, terr
	} else if enabled {
		s.conn.TLS = tlsConf
	}
	include, err := conf.FieldStringList(FieldInclude)
	if err != nil {
		return nil, pol, err
	}
	exclude, err := conf.FieldStringList(FieldExclude)
	if err != nil {
		return nil, pol, err
	}
	tables, err := parseTables(conf)
	if err != nil {
		return nil, pol, err
	}
	if s.load, err = parseLoadSettings(conf); err != nil {
		return nil, pol, err
	}
	if s.tableLoad, err = parseTableLoadModes(conf); err != nil {
		return nil, pol, err
	}
	if s.tableOnError, err = parseTableOnError(conf); err != nil {
		return nil, pol, err
	}
	sc, err := newScope(include, exclude, tables)
	if err != nil {
		return nil, pol, err
	}
	if pol, err = conf.FieldBatchPolicy(fieldBatching); err != nil {
		return nil, pol, err
	}
	var sess *session.Session
	err = mgr.AccessCustomResource(context.Background(), config.ResourceType, s.sessionLabel, func(v any) {
		sess, _ = v.(*session.Session)
	})
	if err != nil || sess == nil {
		return nil, pol, fmt.Errorf("%s: no %s resource labelled %q: %v", config.FieldSession, config.ResourceType, s.sessionLabel, err)
	}
	if s.stateDir == "" {
		s.stateDir = statefile.StateDir(sess.StateDir()).Output()
	}
	return newOutput(s, sc, sess, mgr), pol, nil
}

// parseTableLoadModes reads tables.<name>.initial_load.
func parseTableLoadModes(conf *service.ParsedConfig) (map[string]load.Mode, error) {
	vals, err := tableStrings(conf, fieldTInitialLoad)
	if err != nil {
		return nil, err
	}
	out := make(map[string]load.Mode, len(vals))
	for name, v := range vals {
		if out[name], err = load.ParseMode(v); err != nil {
			return nil, fmt.Errorf("%s.%s.%s: %w", FieldTables, name, fieldTInitialLoad, err)
		}
	}
	return out, nil
}

// parseTableOnError reads tables.<name>.on_error (the spec's enum checks
// the values).
func parseTableOnError(conf *service.ParsedConfig) (map[string]OnError, error) {
	vals, err := tableStrings(conf, fieldTOnError)
	if err != nil {
		return nil, err
	}
	out := make(map[string]OnError, len(vals))
	for name, v := range vals {
		out[name] = OnError(v)
	}
	return out, nil
}

// tableStrings reads the string field of every table under tables that
// sets it.
func tableStrings(conf *service.ParsedConfig, field string) (map[string]string, error) {
	objs, err := conf.FieldObjectMap(FieldTables)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for name, o := range objs {
		if !o.Contains(field) {
			continue
		}
		if out[name], err = o.FieldString(field); err != nil {
			return nil, fmt.Errorf("%s.%s: %w", FieldTables, name, err)
		}
	}
	return out, nil
}

func parseTables(conf *service.ParsedConfig) (map[string]clickhouse.TableConfig, error) {
	objs, err := conf.FieldObjectMap(FieldTables)
	if err != nil {
		return nil, err
	}
	out := make(map[string]clickhouse.TableConfig, len(objs))
	for name, o := range objs {
		var tc clickhouse.TableConfig
		get := func(f string, dst *string) {
			if err == nil && o.Contains(f) {
				*dst, err = o.FieldString(f)
			}
		}
		getList := func(f string, dst *[]string) {
			if err == nil && o.Contains(f) {
				*dst, err = o.FieldStringList(f)
			}
		}
		getMap := func(f string, dst *map[string]string) {
			if err == nil && o.Contains(f) {
				*dst, err = o.FieldStringMap(f)
			}
		}
		var drop string
		var settingsMap map[string]string
		get(fieldTDatabase, &tc.Database)
		get(fieldTTable, &tc.Table)
		getList(fieldTColumns, &tc.IncludeColumns)
		getList(fieldTExclude, &tc.ExcludeColumns)
		getMap(fieldTNames, &tc.ColumnNames)
		getMap(fieldTTypes, &tc.Types)
		getList(fieldTOrderBy, &tc.OrderBy)
		get(fieldTPartitionBy, &tc.PartitionBy)
		getMap(fieldTSettings, &settingsMap)
		get(fieldTDrop, &drop)
		if err == nil && o.Contains(fieldTChangeLog) {
			tc.ChangeLog, err = o.FieldBool(fieldTChangeLog)
		}
		if err != nil {
			return nil, fmt.Errorf("%s.%s: %w", FieldTables, name, err)
		}
		tc.DropStrategy = clickhouse.DropStrategy(drop)
		for _, k := range slices.Sorted(maps.Keys(settingsMap)) {
			tc.Settings = append(tc.Settings, clickhouse.Setting{Name: k, Value: settingsMap[k]})
		}
		out[name] = tc
	}
	return out, nil
}

// chOutput is the clickhouse_ddl output.
type chOutput struct {
	s     settings
	scope *scope
	sess  sessionView
	log   *service.Logger
	m     *outputMetrics
	// states are the tables' states (walshadow_table_state).
	states *tableStates

	mu     sync.Mutex // one WriteBatch at a time; guards everything below
	conn   chConn
	store  *clickhouse.Store
	tables map[uint32]*tableState // by relation oid, for relations in the store
	shapes map[shapeKey]*rowShape // descriptor versions already looked up
	// lastShape is the shape shapeOf returned last.
	lastShapeKey shapeKey
	lastShape    *rowShape
	// writtenBefore: transactions committed below it are applied
	// (written.json); replays of them are skipped.
	writtenBefore wal.LSN
	ready         bool // start-up reconciliation done
	// fenced: batches of session runs up to it are refused, a batch of
	// that run having failed here (later ones would otherwise be written
	// ahead of it and recorded in written.json past what is applied).
	fenced uint64
	// broken: relations no table can be agreed on (markBroken), by oid,
	// with the reason; their changes are not written.
	broken map[uint32]string
	// parked: relations whose failure recurred identically (park.go), by
	// oid, with the reason; their changes are not written.
	parked map[uint32]string
	// server is the ClickHouse server's run (version, boot time), read at
	// Connect (and while a table is parked, every minute).
	server atomic.Pointer[serverIdentity]
	// stopSweep ends the goroutine looking for reload requests.
	stopSweep context.CancelFunc
	sweepDone chan struct{}
	// widened: per relation, the columns a value of which their mapped
	// type could not hold, mapped to String from the next agreement on
	// (widen.go).
	widened map[uint32]map[string]string
	// failedInBatch: relations that failed in the batch being written;
	// their later rows in it are not written (their reload holds them).
	failedInBatch map[uint32]bool
	// restart is what the output knows of ClickHouse's boot (restart.go).
	restart restartGuard
	// loads runs the initial loads (nil until connected).
	loads *load.Engine
	// deferred are the current batch's updates waiting for their table's
	// load (handed to loads once the batch is written).
	deferred []load.DeferredRow
	// reorderSeen: a batch arrived before an earlier one (logged once).
	reorderSeen atomic.Bool
	// inOutput are the session batches (epoch, seq) inside WriteBatch.
	inMu     sync.Mutex
	inOutput map[batchKey]bool
	mgr      *service.Resources
}

// sessionView is what the output needs of the session: the descriptor log
// (relation shapes by version) and where to keep its own state.
type sessionView interface {
	DescLog() *desclog.Log
	StateDir() string
	// SourceDSN is where initial loads read from.
	SourceDSN() string
	// Bridge renders the values of types walshadow does not decode (nil
	// when no bridge is configured).
	Bridge() *shadow.Bridge
	// Live tells whether batches of session run epoch still count.
	Live(epoch uint64) bool
	// AwaitEarlier waits until every batch of run epoch before seq is
	// acknowledged or the run stopped; waited: it was not so at once.
	AwaitEarlier(ctx context.Context, epoch, seq uint64) (waited bool, err error)
	// OldestUnacked is the first batch of run epoch not acknowledged yet.
	OldestUnacked(epoch uint64) (seq uint64, ok bool)
}

func newOutput(s settings, sc *scope, sess sessionView, mgr *service.Resources) *chOutput {
	return &chOutput{s: s, scope: sc, sess: sess, log: mgr.Logger(), m: newOutputMetrics(mgr.Metrics()),
		states: newTableStates(mgr.Metrics()), tables: map[uint32]*tableState{}, mgr: mgr}
}

// Connect opens ClickHouse and the baseline store, then reconciles every
// table in scope once the session has its descriptor log.
func (o *chOutput) Connect(ctx context.Context) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.conn == nil {
		// Everything the output needs of ClickHouse, reported at once:
		// reachable, its version's capabilities, the database, write access.
		rep := preflight.ClickHouse(ctx, o.s.conn, o.s.database)
		for _, f := range rep {
			switch f.Severity {
			case preflight.Info:
				o.log.Infof("preflight %s: %s", f.Check, f.Detail)
			case preflight.Warning:
				o.log.Warnf("preflight %s: %s (%s)", f.Check, f.Detail, f.Remedy)
			}
		}
		if err := rep.Err(); err != nil {
			return err
		}
		cfg := o.s.conn
		cfg.OnClusterWait = func(stmt string, missing []string, waited time.Duration) {
			o.log.Warnf("ClickHouse cluster %s: %s waits on node(s) %s for %s; counted applied only once every node has run it",
				clickhouse.QuoteIdent(cfg.Cluster), stmt, strings.Join(missing, ", "), waited)
		}
		cfg.OnFailover = func(from, to string, err error) {
			o.log.Warnf("ClickHouse %s failed (%v): writing to %s now; the first read there waits until it holds every part %s took", from, err, to, from)
		}
		conn, err := clickhouse.Open(ctx, cfg)
		if err != nil {
			return fmt.Errorf("connecting to ClickHouse: %w", err)
		}
		o.conn = conn
		o.log.Infof("ClickHouse %s: rendering for its dialect; tables on %s", conn.Dialect().Version, conn.Topology())
		o.noteServer(ctx)
	}
	if o.store == nil {
		st, err := clickhouse.OpenStore(string(o.s.stateDir))
		if err != nil {
			return fmt.Errorf("opening the agreed table shapes: %w", err)
		}
		o.store = st
		w, _, err := ReadWritten(o.s.stateDir)
		if err != nil {
			return fmt.Errorf("opening the output's progress: %w", err)
		}
		o.writtenBefore = w
	}
	if !o.ready {
		if o.loads == nil {
			ledger, err := load.OpenLedger(string(o.s.stateDir))
			if err != nil {
				return fmt.Errorf("opening the initial load ledger: %w", err)
			}
			o.loads = o.newLoadEngine(ledger)
			if err := o.loads.RestoreFilters(o.writtenBefore); err != nil {
				return err
			}
		}
		// Before anything reads a table: ClickHouse may have restarted
		// while the output was down.
		if err := o.guardRestart(ctx, true); err != nil {
			return err
		}
		if err := o.repairNodes(ctx); err != nil {
			return err
		}
		if err := o.reconcileStart(ctx); err != nil {
			return err
		}
		if err := o.restoreParked(ctx); err != nil {
			return err
		}
		if err := o.loads.Resume(ctx); err != nil {
			return err
		}
		o.ready = true
		if err := o.takeRequests(ctx); err != nil {
			o.log.Warnf("reload requests: %v", err)
		}
		if o.stopSweep == nil {
			sctx, cancel := context.WithCancel(context.Background())
			o.stopSweep, o.sweepDone = cancel, make(chan struct{})
			go func() {
				defer close(o.sweepDone)
				o.sweep(sctx)
			}()
		}
	}
	return nil
}

// Close releases the connection.
func (o *chOutput) Close(ctx context.Context) error {
	o.mu.Lock()
	loads := o.loads
	o.loads = nil
	o.ready = false
	stop, done := o.stopSweep, o.sweepDone
	o.stopSweep, o.sweepDone = nil, nil
	o.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
	if loads != nil {
		// Before taking the lock: a load may be waiting for it to publish.
		loads.Close()
		if err := loads.Ledger().Close(); err != nil {
			o.log.Warnf("closing the initial load ledger: %v", err)
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.conn != nil {
		err := o.conn.Close()
		o.conn = nil
		o.ready = false
		return err
	}
	return nil
}

// repairNodes gives every node of a cluster the tables some node holds
// and another lacks (clickhouse.Conn.RepairNodes), before the reconcile,
// which reads one node.
func (o *chOutput) repairNodes(ctx context.Context) error {
	var targets []clickhouse.Target
	for _, a := range o.store.All() {
		targets = append(targets, a.Target)
	}
	repaired, skipped, err := o.conn.RepairNodes(ctx, targets)
	for _, r := range repaired {
		o.log.Warnf("ClickHouse cluster: %s", r)
	}
	for _, s := range skipped {
		o.log.Warnf("ClickHouse cluster: %s; tried again at the next start", s)
	}
	if err != nil {
		return fmt.Errorf("repairing the cluster's nodes: %w", err)
	}
	return nil
}
