package clickhouse

import (
	"context"
	"crypto/tls"
	sqldriver "database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	clickhousego "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/shopspring/decimal"
)

// ConnConfig says how to reach ClickHouse over the native protocol.
type ConnConfig struct {
	// DSN is clickhouse-go's: clickhouse://user:pass@host1:9000,host2:9000/db?secure=true&skip_verify=true&compress=lz4
	DSN string
	// TLS, when set, wins over the DSN's secure flag.
	TLS *tls.Config
	// Compression is "", "lz4", "zstd" or "none"; "" keeps the DSN's
	// choice, lz4 when the DSN has none.
	Compression string
	// DialTimeout and ReadTimeout: 0 keeps the DSN's value, else 10 s and
	// 5 min.
	DialTimeout, ReadTimeout time.Duration
	// MaxOpenConns: 0 keeps clickhouse-go's default.
	MaxOpenConns int
	// Cluster names the cluster (remote_servers) the tables live on; ""
	// for one server (Topology).
	Cluster string
	// OnClusterWait, when set, hears of a statement ON CLUSTER waiting on
	// nodes that have not run it.
	OnClusterWait ClusterWait
	// OnFailover, when set, hears of the connection moving to another
	// host of the DSN (a cluster's only: failover.go).
	OnFailover Failover
}

const (
	defaultDialTimeout = 10 * time.Second
	defaultReadTimeout = 5 * time.Minute
	// lookupChunk bounds the key tuples of one lookup query.
	lookupChunk = 1000
)

// Conn is an open connection pool to one ClickHouse server (or a list of
// replicas tried in order), with the server's dialect.
type Conn struct {
	dialect  Dialect
	topology Topology
	onWait   ClusterWait
	database string
	hosts    string

	// On a cluster whose DSN lists several hosts the pool is pinned to
	// one of them, addrs[current] (failover.go); else addrs is empty and
	// the driver spreads over the DSN's hosts.
	mu         sync.RWMutex
	native     driver.Conn
	addrs      []string
	current    int
	opts       *clickhousego.Options
	unsynced   bool // moved since the last read barrier
	syncMu     sync.Mutex
	onFailover Failover
}

// Open connects, pings and reads SELECT version() for the dialect. Errors
// name the hosts and the user, never the password.
func Open(ctx context.Context, cfg ConnConfig) (*Conn, error) {
	opts, err := clickhousego.ParseDSN(cfg.DSN)
	if err != nil {
		// ParseDSN redacts the password from URL errors.
		return nil, fmt.Errorf("parsing the ClickHouse DSN: %w", err)
	}
	if cfg.TLS != nil {
		opts.TLS = cfg.TLS
	}
	switch cfg.Compression {
	case "":
		if opts.Compression == nil {
			opts.Compression = &clickhousego.Compression{Method: clickhousego.CompressionLZ4}
		}
	case "lz4":
		opts.Compression = &clickhousego.Compression{Method: clickhousego.CompressionLZ4}
	case "zstd":
		opts.Compression = &clickhousego.Compression{Method: clickhousego.CompressionZSTD}
	case "none":
		opts.Compression = &clickhousego.Compression{Method: clickhousego.CompressionNone}
	default:
		return nil, fmt.Errorf("ClickHouse compression %q is not lz4, zstd or none", cfg.Compression)
	}
	switch {
	case cfg.DialTimeout > 0:
		opts.DialTimeout = cfg.DialTimeout
	case opts.DialTimeout == 0:
		opts.DialTimeout = defaultDialTimeout
	}
	switch {
	case cfg.ReadTimeout > 0:
		opts.ReadTimeout = cfg.ReadTimeout
	case opts.ReadTimeout == 0:
		opts.ReadTimeout = defaultReadTimeout
	}
	if cfg.MaxOpenConns > 0 {
		opts.MaxOpenConns = cfg.MaxOpenConns
	}
	c := &Conn{database: opts.Auth.Database, hosts: strings.Join(opts.Addr, ","), onWait: cfg.OnClusterWait, onFailover: cfg.OnFailover}
	if c.database == "" {
		c.database = "default"
	}
	who := fmt.Sprintf("ClickHouse at %s", c.hosts)
	if opts.Auth.Username != "" {
		who += " as user " + strconv.Quote(opts.Auth.Username)
	}
	var native driver.Conn
	if cfg.Cluster != "" {
		// An insert into a Distributed table (several shards) returns
		// only once every shard it touched has its rows, not when they
		// are queued on the node that took them; without Distributed
		// tables the setting changes nothing. (A read-back through one may
		// still reach another replica of a shard than the insert did: the
		// driver cannot send 18.16 a string setting such as
		// load_balancing = 'in_order'.)
		if opts.Settings == nil {
			opts.Settings = clickhousego.Settings{}
		}
		opts.Settings["insert_distributed_sync"] = 1
		c.opts = opts
	}
	if cfg.Cluster != "" && len(opts.Addr) > 1 {
		c.addrs = opts.Addr
	}
	if native, err = c.openPool(ctx, opts); err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", who, err)
	}
	var version string
	if err := native.QueryRow(ctx, "SELECT version()").Scan(&version); err != nil {
		native.Close()
		return nil, fmt.Errorf("reading the version of %s: %w", who, err)
	}
	c.dialect, err = ParseDialect(version)
	if err != nil {
		native.Close()
		return nil, fmt.Errorf("%s: %w", who, err)
	}
	if cfg.Cluster != "" {
		if c.topology, err = readTopology(ctx, native, cfg.Cluster); err != nil {
			native.Close()
			return nil, fmt.Errorf("%s: %w", who, err)
		}
		c.dialect.Replicated = true
	}
	c.native = native
	return c, nil
}

// openPool opens the pool: pinned to one host when failing over between
// several (c.addrs), else over the DSN's hosts.
func (c *Conn) openPool(ctx context.Context, opts *clickhousego.Options) (driver.Conn, error) {
	if len(c.addrs) > 0 {
		return c.openPinned(ctx, opts)
	}
	native, err := clickhousego.Open(opts)
	if err != nil {
		return nil, err
	}
	if err := native.Ping(ctx); err != nil {
		native.Close()
		return nil, err
	}
	return native, nil
}

// readTopology reads cluster's nodes from system.clusters.
func readTopology(ctx context.Context, native driver.Conn, cluster string) (Topology, error) {
	rows, err := native.Query(ctx, "SELECT cluster, host_name, port, shard_num, replica_num FROM system.clusters")
	if err != nil {
		return Topology{}, fmt.Errorf("reading system.clusters: %w", err)
	}
	defer rows.Close()
	var nodes []Node
	known := map[string]bool{}
	for rows.Next() {
		var name string
		var n Node
		if err := rows.Scan(&name, &n.Host, &n.Port, &n.Shard, &n.Replica); err != nil {
			return Topology{}, fmt.Errorf("reading system.clusters: %w", err)
		}
		known[name] = true
		if name == cluster {
			nodes = append(nodes, n)
		}
	}
	if err := rows.Err(); err != nil {
		return Topology{}, fmt.Errorf("reading system.clusters: %w", err)
	}
	names := make([]string, 0, len(known))
	for k := range known {
		names = append(names, k)
	}
	return NewTopology(cluster, nodes, names)
}

// Topology is the destination's, from system.clusters at Open.
func (c *Conn) Topology() Topology { return c.topology }

// Dialect is the server's, from SELECT version() at Open.
func (c *Conn) Dialect() Dialect { return c.dialect }

// Database is the DSN's database, "default" when it names none.
func (c *Conn) Database() string { return c.database }

// Native is the clickhouse-go connection (tests, comparisons).
func (c *Conn) Native() driver.Conn { return c.pool() }

// Close closes every connection of the pool.
func (c *Conn) Close() error { return c.pool().Close() }

// Exec runs one statement rendered for one server: on a cluster as
// Topology.Statements has it run, each statement ON CLUSTER counted
// applied once every node has run it (execOnCluster), a TRUNCATE of
// Replicated tables as partition drops (truncateReplicated).
func (c *Conn) Exec(ctx context.Context, sql string) error {
	p := c.pool()
	if t, ok := truncateTarget(sql); ok && c.topology.Cluster != "" {
		if c.topology.Sharded() {
			t = LocalTarget(t)
		}
		return c.truncateReplicated(ctx, p, t)
	}
	stmts, err := c.topology.split(sql, func(t Target) (string, error) { return c.shardingKey(ctx, p, t) })
	if err != nil {
		return fmt.Errorf("on ClickHouse at %s: %w", c.hosts, err)
	}
	return c.run(ctx, p, stmts)
}

// run runs statements rendered for one server, in order, each as
// Distribute has it run: on the node in use, or ON CLUSTER (a CREATE
// TABLE joining the table's existing replicas: joinExisting) and waited
// on until every node has run it.
func (c *Conn) run(ctx context.Context, p driver.Conn, stmts []string) error {
	for _, sql := range stmts {
		distributed, err := c.topology.Distribute(sql)
		if err != nil {
			return fmt.Errorf("on ClickHouse at %s: %w", c.hosts, err)
		}
		if distributed == sql {
			if strings.HasPrefix(sql, "INSERT") {
				// INSERT ... SELECT reads back what was written.
				if err := c.readBarrier(ctx); err != nil {
					return err
				}
				p = c.pool()
			}
			if err := p.Exec(ctx, sql); err != nil {
				c.noteFailure(p, err)
				return fmt.Errorf("executing %s on ClickHouse at %s: %w", previewSQL(sql), c.hosts, err)
			}
			continue
		}
		if c.dialect.Replicated && strings.HasPrefix(distributed, "CREATE TABLE") {
			if distributed, err = c.joinExisting(ctx, distributed); err != nil {
				return fmt.Errorf("on cluster %s: %w", QuoteIdent(c.topology.Cluster), err)
			}
		}
		if err := c.execOnCluster(ctx, p, distributed); err != nil {
			c.noteFailure(p, err)
			return fmt.Errorf("executing %s on cluster %s: %w", previewSQL(distributed), QuoteIdent(c.topology.Cluster), err)
		}
	}
	return nil
}

// StatementHead is a statement's first line ("... " marking the rest), to
// name it in an error without the whole of a multi-line CREATE TABLE.
func StatementHead(sql string) string {
	if first, _, more := strings.Cut(sql, "\n"); more {
		return first + " ..."
	}
	return sql
}

func previewSQL(sql string) string {
	const limit = 200
	if len(sql) <= limit {
		return sql
	}
	return truncateUTF8(sql, limit) + "…"
}

// Table reads what ClickHouse holds for t: whether it exists and its
// columns in definition order.
func (c *Conn) Table(ctx context.Context, t Target) (CHTable, error) {
	for attempt := 1; ; attempt++ {
		table, err := c.table(ctx, t)
		if err == nil || attempt == catalogRaceAttempts || !catalogRace(err, t) {
			return table, err
		}
		select {
		case <-time.After(time.Duration(attempt) * 20 * time.Millisecond):
		case <-ctx.Done():
			return table, err
		}
	}
}

// catalogRaceAttempts bounds Table's retries of a catalog race.
const catalogRaceAttempts = 5

// catalogRace reports an error of reading system.tables or system.columns
// that concerns another table: 18.16 walks every table of the database
// and fails with UNKNOWN_TABLE (60) when one is dropped meanwhile. Asked
// again, it answers.
func catalogRace(err error, t Target) bool {
	var exception *clickhousego.Exception
	return errors.As(err, &exception) && exception.Code == 60 &&
		!strings.Contains(exception.Message, QuoteIdent(t.Table)+" doesn't exist") &&
		!strings.Contains(exception.Message, "."+t.Table+" doesn't exist")
}

// TableExists reports whether t exists (Table reads its columns too).
func (c *Conn) TableExists(ctx context.Context, t Target) (bool, error) {
	p := c.pool()
	ok, err := tableExists(ctx, p, t)
	if err != nil {
		c.noteFailure(p, err)
	}
	return ok, err
}

// tableExists asks whether t exists with EXISTS TABLE, which looks the one
// name up: a query of system.tables by name reads a row for every table
// of the database first (18.16), 30 ms with 5,000 tables, and an output
// asks it of every table it agrees on.
func tableExists(ctx context.Context, p driver.Conn, t Target) (bool, error) {
	var n uint8
	if err := p.QueryRow(ctx, "EXISTS TABLE "+QuoteQualified(t)).Scan(&n); err != nil {
		return false, fmt.Errorf("looking up %s: %w", QuoteQualified(t), err)
	}
	return n == 1, nil
}

func (c *Conn) table(ctx context.Context, t Target) (CHTable, error) {
	p := c.pool()
	ok, err := tableExists(ctx, p, t)
	if err != nil {
		c.noteFailure(p, err)
		return CHTable{}, err
	}
	if !ok {
		return CHTable{}, nil
	}
	// system.columns lists a table's columns in definition order (18.16
	// has no position column to sort by).
	rows, err := p.Query(ctx, "SELECT name, type FROM system.columns WHERE database = "+QuoteString(t.Database)+
		" AND table = "+QuoteString(t.Table))
	if err != nil {
		return CHTable{}, fmt.Errorf("reading the columns of %s: %w", QuoteQualified(t), err)
	}
	defer rows.Close()
	table := CHTable{Exists: true}
	for rows.Next() {
		var col CHColumn
		if err := rows.Scan(&col.Name, &col.Type); err != nil {
			return CHTable{}, fmt.Errorf("reading the columns of %s: %w", QuoteQualified(t), err)
		}
		table.Columns = append(table.Columns, col)
	}
	if err := rows.Err(); err != nil {
		return CHTable{}, fmt.Errorf("reading the columns of %s: %w", QuoteQualified(t), err)
	}
	return table, nil
}

func columnList(cols []ColumnSpec) string {
	quoted := make([]string, len(cols))
	for i, c := range cols {
		quoted[i] = QuoteIdent(c.Name)
	}
	return strings.Join(quoted, ", ")
}

// Insert writes rows (values as ConvertValue or LookupLatest return them,
// in the order of cols: one per ColumnSpec, a Nullable array's NULL flag
// derived from its value) with one INSERT; no rows is a no-op.
func (c *Conn) Insert(ctx context.Context, t Target, cols []ColumnSpec, rows [][]any) error {
	if len(rows) == 0 {
		return nil
	}
	b, err := BlockOf(cols, rows)
	if err != nil {
		return fmt.Errorf("inserting into %s: %w", QuoteQualified(t), err)
	}
	return c.InsertBlock(ctx, t, b)
}

// BlockOf is rows (values as ConvertValue returns them) as a Block.
func BlockOf(cols []ColumnSpec, rows [][]any) (*Block, error) {
	b := NewBlock(cols)
	for i, row := range rows {
		if len(row) != len(cols) {
			return nil, fmt.Errorf("row %d has %d values for %d columns", i, len(row), len(cols))
		}
		for j, v := range row {
			b.PutConverted(j, v)
		}
		b.rows++
	}
	return b, nil
}

// InsertBlock inserts the block's ended rows in one INSERT: a column at a
// time when every column holds one Go type, else row by row.
func (c *Conn) InsertBlock(ctx context.Context, t Target, b *Block) error {
	if b.Len() == 0 {
		return nil
	}
	cols := Physical(b.Columns())
	if len(cols) == 0 {
		return fmt.Errorf("inserting into %s: no columns", QuoteQualified(t))
	}
	p := c.pool()
	batch, err := c.prepareInsert(ctx, p, t, cols)
	if err != nil {
		c.noteFailure(p, err)
		return err
	}
	defer batch.Close()
	if block, ok := b.typedColumns(); ok {
		for i, col := range block {
			if err := batch.Column(i).Append(col); err != nil {
				// A slice the column does not take: the rows go again, one
				// by one, in a batch of their own.
				batch.Abort()
				return c.insertRows(ctx, p, t, b)
			}
		}
	} else if err := appendRows(batch, t, b); err != nil {
		return err
	}
	if err := batch.Send(); err != nil {
		c.noteFailure(p, err)
		return fmt.Errorf("inserting %d rows into %s: %w", b.Len(), QuoteQualified(t), err)
	}
	return nil
}

// prepareInsert starts a native INSERT of cols (physical columns) into
// t. clickhouse-go parses the statement before sending it: a regular
// expression takes the table name up to the first '(' and the column
// list between the outer parentheses, strips backticks without reading
// their escapes, and sorts the block the server describes by the names it
// read (a column named "c`)` String, x" broke both). So every identifier
// goes opaque (no byte outside [A-Za-z0-9_] unescaped: quoteIdentOpaque)
// and no space precedes the column list, which the driver's column
// regular expression needs: it reads no list and keeps the server's
// order, which is the statement's. The block's columns are then checked,
// by name and type and in order, against cols: whatever the driver did,
// a value is never appended to another column.
func (c *Conn) prepareInsert(ctx context.Context, p driver.Conn, t Target, cols []ColumnSpec) (driver.Batch, error) {
	var sql strings.Builder
	sql.WriteString("INSERT INTO " + quoteIdentOpaque(t.Database) + "." + quoteIdentOpaque(t.Table) + "(")
	for i, col := range cols {
		if i > 0 {
			sql.WriteByte(',')
		}
		sql.WriteString(quoteIdentOpaque(col.Name))
	}
	sql.WriteByte(')')
	batch, err := p.PrepareBatch(ctx, sql.String())
	if err != nil {
		return nil, fmt.Errorf("inserting into %s: %w", QuoteQualified(t), err)
	}
	got := batch.Columns()
	if len(got) != len(cols) {
		batch.Abort()
		return nil, fmt.Errorf("inserting into %s: ClickHouse describes %d columns for the %d named", QuoteQualified(t), len(got), len(cols))
	}
	for i, col := range got {
		if col.Name() != cols[i].Name {
			batch.Abort()
			return nil, fmt.Errorf("inserting into %s: column %d of the insert is %s on ClickHouse, not %s", QuoteQualified(t), i+1, QuoteIdent(col.Name()), QuoteIdent(cols[i].Name))
		}
		// clickhouse-go converts a value to a column of another type by Go
		// conversion (an int32 into Int8 wraps): a column whose type on
		// the server is not the agreed one is refused before a value is
		// appended.
		if normalizeType(string(col.Type())) != normalizeType(cols[i].TypeSQL()) {
			batch.Abort()
			return nil, fmt.Errorf("inserting into %s: column %s is %s on ClickHouse, the agreed type is %s: %w",
				QuoteQualified(t), QuoteIdent(cols[i].Name), col.Type(), cols[i].TypeSQL(), ErrTypeMismatch)
		}
	}
	return batch, nil
}

// insertRows is InsertBlock with every row appended on its own (the path
// for blocks that cannot go a column at a time).
func (c *Conn) insertRows(ctx context.Context, p driver.Conn, t Target, b *Block) error {
	batch, err := c.prepareInsert(ctx, p, t, Physical(b.Columns()))
	if err != nil {
		c.noteFailure(p, err)
		return err
	}
	defer batch.Close()
	if err := appendRows(batch, t, b); err != nil {
		return err
	}
	if err := batch.Send(); err != nil {
		c.noteFailure(p, err)
		return fmt.Errorf("inserting %d rows into %s: %w", b.Len(), QuoteQualified(t), err)
	}
	return nil
}

// appendRows appends the block's rows one by one (aborting the batch on a
// refusal).
func appendRows(batch driver.Batch, t Target, b *Block) error {
	for i := range b.Len() {
		row, err := b.physicalRow(i)
		if err == nil {
			err = batch.Append(row...)
		}
		if err != nil {
			batch.Abort()
			return fmt.Errorf("inserting into %s: row %d: %w", QuoteQualified(t), i, err)
		}
	}
	return nil
}

// TableUUID is a table's uuid (Atomic databases; zeros on others).
func (c *Conn) TableUUID(ctx context.Context, t Target) (string, error) {
	var uuid string
	err := c.pool().QueryRow(ctx, "SELECT toString(uuid) FROM system.tables WHERE database = "+QuoteString(t.Database)+
		" AND name = "+QuoteString(t.Table)).Scan(&uuid)
	if err != nil {
		return "", fmt.Errorf("reading the uuid of %s: %w", QuoteQualified(t), err)
	}
	return uuid, nil
}

// DatabaseEngine is a database's engine (Atomic, Ordinary, ...).
func (c *Conn) DatabaseEngine(ctx context.Context, database string) (string, error) {
	var engine string
	err := c.pool().QueryRow(ctx, "SELECT engine FROM system.databases WHERE name = "+QuoteString(database)).Scan(&engine)
	if err != nil {
		return "", fmt.Errorf("reading the engine of database %s: %w", QuoteIdent(database), err)
	}
	return engine, nil
}

// LookupLatest reads, for each key tuple (values as ConvertValue returns
// them for the key columns), the values of want in the newest version of
// the row (SELECT ... FINAL), nil for a key without a row. The values are
// of the types ConvertValue returns, so Insert takes them back for the same
// columns. Deleted rows (_is_deleted = 1) are versions too: ask for
// _is_deleted in want to tell them apart.
func (c *Conn) LookupLatest(ctx context.Context, t Target, key []ColumnSpec, keys [][]any, want []ColumnSpec) ([][]any, error) {
	out := make([][]any, len(keys))
	if err := c.lookup(ctx, t, true, key, keys, want, func(pos int, got []any) { out[pos] = got }); err != nil {
		return nil, err
	}
	return out, nil
}

// normalizeScanned turns what clickhouse-go scans into the types
// ConvertValue returns: Nullable pointers become the value or nil, UUIDs
// (scanned as github.com/google/uuid's [16]byte) their text.
func normalizeScanned(v any) (any, error) {
	rv := reflect.ValueOf(v)
	switch {
	case rv.Kind() == reflect.Pointer:
		if rv.IsNil() {
			return nil, nil
		}
		return normalizeScanned(rv.Elem().Interface())
	case isUUIDArray(rv.Type()):
		return uuidString(rv), nil
	case rv.Kind() == reflect.Slice && rv.Type().Elem().Kind() == reflect.Pointer && isUUIDArray(rv.Type().Elem().Elem()):
		out := make([]*string, rv.Len())
		for i := range out {
			if e := rv.Index(i); !e.IsNil() {
				s := uuidString(e.Elem())
				out[i] = &s
			}
		}
		return out, nil
	}
	switch v := v.(type) {
	case time.Time:
		return v.UTC(), nil
	case []*time.Time:
		for i, ts := range v {
			if ts != nil {
				utc := ts.UTC()
				v[i] = &utc
			}
		}
		return v, nil
	}
	return v, nil
}

func isUUIDArray(t reflect.Type) bool {
	return t.Kind() == reflect.Array && t.Len() == 16 && t.Elem().Kind() == reflect.Uint8
}

func uuidString(rv reflect.Value) string {
	var b [16]byte
	reflect.Copy(reflect.ValueOf(b[:]), rv)
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// keyIdentity is a map key for a key tuple, equal for a requested tuple
// and the same tuple scanned back.
func keyIdentity(values []any) string {
	var b strings.Builder
	for _, v := range values {
		switch v := v.(type) {
		case time.Time:
			b.WriteString(strconv.FormatInt(v.UnixMicro(), 10))
		case decimal.Decimal:
			b.WriteString(v.String())
		case string:
			b.WriteString(strconv.Quote(v))
		default:
			fmt.Fprintf(&b, "%v", v)
		}
		b.WriteByte(0)
	}
	return b.String()
}

// valueLiteral renders a converted value as a constant expression of the
// column's type for a WHERE ... IN list.
func valueLiteral(spec ColumnSpec, v any) (string, error) {
	typ := spec.Type.Type
	cast := func(s string) string { return "CAST(" + QuoteString(s) + " AS " + typ + ")" }
	switch v := v.(type) {
	case nil:
		return "NULL", nil
	case string:
		if spec.Type.Repr == ReprUUID {
			return cast(v), nil
		}
		return QuoteString(v), nil
	case bool:
		return strconv.FormatBool(v), nil
	case int8, int16, int32, int64, uint8, uint16, uint32, uint64:
		return cast(fmt.Sprint(v)), nil
	case float32:
		return cast(strconv.FormatFloat(float64(v), 'g', -1, 32)), nil
	case float64:
		return cast(strconv.FormatFloat(v, 'g', -1, 64)), nil
	case decimal.Decimal:
		return cast(v.String()), nil
	case time.Time:
		if spec.Type.Repr == ReprDate {
			return cast(v.UTC().Format(time.DateOnly)), nil
		}
		return cast(v.UTC().Format("2006-01-02 15:04:05.000000")), nil
	}
	return "", fmt.Errorf("column %q: a %T key value has no literal form", spec.Name, v)
}

// RetryPolicy bounds InsertRetrying: MaxAttempts tries, the wait doubling
// from Initial to at most Max. Zero fields take the defaults 5, 250 ms and
// 10 s.
type RetryPolicy struct {
	MaxAttempts  int
	Initial, Max time.Duration
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = 5
	}
	if p.Initial <= 0 {
		p.Initial = 250 * time.Millisecond
	}
	if p.Max <= 0 {
		p.Max = 10 * time.Second
	}
	return p
}

// transientServerCodes are ClickHouse exception codes a retry can cure.
var transientServerCodes = map[int32]bool{
	159: true, // TIMEOUT_EXCEEDED
	202: true, // TOO_MANY_SIMULTANEOUS_QUERIES
	203: true, // NO_FREE_CONNECTION
	209: true, // SOCKET_TIMEOUT
	210: true, // NETWORK_ERROR
	279: true, // ALL_CONNECTION_TRIES_FAILED: a shard a Distributed insert writes to is away
	242: true, // TABLE_IS_READ_ONLY
	252: true, // TOO_MANY_PARTS
	319: true, // UNKNOWN_STATUS_OF_INSERT
	425: true, // SYSTEM_ERROR
	// A Replicated table's ZooKeeper away: the first insert after its
	// session expired, and DDL ON CLUSTER, fail with these; it is the
	// destination's outage, not the table's fault.
	225: true, // NO_ZOOKEEPER
	999: true, // KEEPER_EXCEPTION
}

// IsRetryable reports whether err is transient: network failures (refused,
// reset, broken pipe, EOF, timeouts), a pool that could not get a
// connection in time, and server exceptions with transient codes. Syntax
// errors, unknown tables or columns, type mismatches, refused values and
// context cancellation are not.
func IsRetryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var exception *clickhousego.Exception
	if errors.As(err, &exception) {
		return transientServerCodes[exception.Code]
	}
	var conversion *conversionError
	if errors.As(err, &conversion) {
		return false
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH) ||
		errors.Is(err, clickhousego.ErrAcquireConnTimeout) || errors.Is(err, sqldriver.ErrBadConn) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return true
	}
	var opErr *net.OpError
	return errors.As(err, &opErr)
}

// InsertRetrying is Insert retried while IsRetryable, with exponential
// backoff, honouring ctx. onRetry (may be nil) hears of each failed
// attempt before the wait. A retried INSERT whose first attempt did reach
// the server writes its rows twice: harmless for ReplacingMergeTree tables
// (same key and _lsn), a duplicate in a MergeTree change log.
func (c *Conn) InsertRetrying(ctx context.Context, t Target, cols []ColumnSpec, rows [][]any, p RetryPolicy, onRetry func(attempt int, err error)) error {
	if len(rows) == 0 {
		return nil
	}
	b, err := BlockOf(cols, rows)
	if err != nil {
		return fmt.Errorf("inserting into %s: %w", QuoteQualified(t), err)
	}
	return c.InsertBlockRetrying(ctx, t, b, p, onRetry)
}

// InsertBlockRetrying is InsertBlock retried as InsertRetrying retries
// Insert.
func (c *Conn) InsertBlockRetrying(ctx context.Context, t Target, b *Block, p RetryPolicy, onRetry func(attempt int, err error)) error {
	p = p.withDefaults()
	wait := p.Initial
	for attempt := 1; ; attempt++ {
		err := c.InsertBlock(ctx, t, b)
		switch {
		case err == nil:
			return nil
		case !IsRetryable(err):
			return err
		case attempt >= p.MaxAttempts:
			return fmt.Errorf("inserting into %s after %d attempts: %w", QuoteQualified(t), attempt, err)
		}
		if onRetry != nil {
			onRetry(attempt, err)
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("inserting into %s: gave up after %d attempts: %w (last error: %v)", QuoteQualified(t), attempt, ctx.Err(), err)
		case <-timer.C:
		}
		wait = min(2*wait, p.Max)
	}
}

// CreateLike creates t with like's structure and engine: CREATE TABLE t
// AS like on one server; on a cluster with like's engine under a new
// ZooKeeper path (CreateLikeReplicated), read from SHOW CREATE TABLE.
func (c *Conn) CreateLike(ctx context.Context, t, like Target) error {
	if c.topology.Sharded() {
		return c.createLikeSharded(ctx, c.pool(), t, like)
	}
	sql := "CREATE TABLE " + QuoteQualified(t) + " AS " + QuoteQualified(like)
	if c.dialect.Replicated {
		var shown string
		if err := c.pool().QueryRow(ctx, "SHOW CREATE TABLE "+QuoteQualified(like)).Scan(&shown); err != nil {
			return fmt.Errorf("reading the definition of %s on ClickHouse at %s: %w", QuoteQualified(like), c.hosts, err)
		}
		var err error
		if sql, err = CreateLikeReplicated(t, like, shown, ReplicaPath()); err != nil {
			return err
		}
	}
	return c.Exec(ctx, sql)
}
