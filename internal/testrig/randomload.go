package testrig

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// RandomLoadOptions describe the randomized workload of the decode
// acceptance tests.
type RandomLoadOptions struct {
	// Seed makes the workload reproducible as far as the interleaving of
	// concurrent clients allows: every client draws from its own generator.
	Seed int64
	// Tables is the number of tables (at least the 11 built-in ones, which
	// cover every type; more are plain extra tables).
	Tables int
	// Ops is the number of operations (statements or transactions) over all
	// clients.
	Ops int
	// Clients is the number of concurrent connections (default 3).
	Clients int
	// DDL adds concurrent ADD COLUMN (with and without a constant DEFAULT),
	// RENAME COLUMN, DROP COLUMN, CREATE TABLE (+ inserts in the same
	// transaction) and DROP TABLE.
	DDL bool
	// TwoPhase adds PREPARE TRANSACTION + COMMIT/ROLLBACK PREPARED; the
	// server needs WithMaxPreparedTransactions.
	TwoPhase bool
	// NoFarFutureTimestamps replaces PostgreSQL's largest timestamp
	// (294276-12-31) with 294246-01-01: the last years of PostgreSQL's range
	// lie past Int64 microseconds since 1970, which the ClickHouse output
	// refuses on servers without DateTime64.
	NoFarFutureTimestamps bool
	// Keyless adds the tables without a replica identity key (rl_nokey:
	// REPLICA IDENTITY DEFAULT without a primary key, with a TOASTed
	// column; rl_nothing: REPLICA IDENTITY NOTHING) next to rl_full
	// (FULL), and the operations that matter to tables a reader can only
	// address by physical identity: identical duplicate rows, TRUNCATE,
	// VACUUM FULL and CLUSTER (every keyless table has an index on seq).
	Keyless bool
	// TypeChanges adds ALTER COLUMN ... TYPE: changes ClickHouse follows
	// exactly (int4 → int8, varchar(n) → text, numeric(10,2) →
	// numeric(14,4), float4 → float8, ...) and changes it cannot (USING
	// expressions, narrowing), which reload the table.
	TypeChanges bool
	// TempTables adds CREATE TEMP TABLE churn: temporary tables created,
	// written, and dropped (or dropped at commit).
	TempTables bool
}

// RandomLoadStats counts what RunRandomLoad did.
type RandomLoadStats struct {
	// Ops counts attempted operations by kind; Skipped counts the ones that
	// failed with an expected error (deadlock, concurrent DDL), by SQLSTATE.
	Ops     map[string]int
	Skipped map[string]int
	// Committed, RolledBack: transactions by outcome (autocommit statements
	// count as committed).
	Committed, RolledBack int
	// TypeChanges counts committed ALTER COLUMN ... TYPE statements.
	TypeChanges int
	Duration    time.Duration
}

func (o RandomLoadOptions) clients() int {
	if o.Clients <= 0 {
		return 3
	}
	return o.Clients
}

// keyKind is how a table's rows are addressed by a row id (rid).
type keyKind int

const (
	keyID       keyKind = iota // id integer PRIMARY KEY
	keyFull                    // no key, REPLICA IDENTITY FULL; rows found by seq
	keyIdentity                // REPLICA IDENTITY USING INDEX on (code, region)
	keyPair                    // PRIMARY KEY (tenant, item)
	keyNone                    // no key, REPLICA IDENTITY DEFAULT; rows found by seq
	keyNothing                 // no key, REPLICA IDENTITY NOTHING; rows found by seq
)

// keyless: the table has no replica identity key (its rows are addressed
// by seq, which is not unique: duplicates are identical rows).
func (k keyKind) keyless() bool { return k == keyFull || k == keyNone || k == keyNothing }

type rlColumn struct {
	name, sqlType string
	gen           valueGen
	big           bool // may hold TOASTed values
	added         bool // added by the workload's DDL (may be dropped)
}

type rlTable struct {
	name    string
	key     keyKind
	cols    []*rlColumn // non-key columns
	created bool        // created by the workload's DDL (may be dropped)
}

func (t *rlTable) clone() *rlTable {
	c := *t
	c.cols = make([]*rlColumn, len(t.cols))
	for i, col := range t.cols {
		cc := *col
		c.cols[i] = &cc
	}
	return &c
}

func (t *rlTable) hasBig() bool {
	for _, c := range t.cols {
		if c.big {
			return true
		}
	}
	return false
}

// keyColumns and keyValues address row rid.
func (t *rlTable) keyColumns() []string {
	switch t.key {
	case keyFull, keyNone, keyNothing:
		return []string{"seq"}
	case keyIdentity:
		return []string{"code", "region"}
	case keyPair:
		return []string{"tenant", "item"}
	}
	return []string{"id"}
}

func (t *rlTable) keyValues(rid int64) []string {
	switch t.key {
	case keyFull, keyNone, keyNothing:
		return []string{strconv.FormatInt(rid, 10) + "::bigint"}
	case keyIdentity:
		return []string{"'c" + strconv.FormatInt(rid, 10) + "'", strconv.FormatInt(rid%7, 10)}
	case keyPair:
		return []string{strconv.FormatInt(rid%5, 10), "'" + uuidFor(rid) + "'::uuid"}
	}
	return []string{strconv.FormatInt(rid, 10)}
}

func (t *rlTable) where(rid int64) string {
	cols, vals := t.keyColumns(), t.keyValues(rid)
	parts := make([]string, len(cols))
	for i := range cols {
		parts[i] = pgx.Identifier{cols[i]}.Sanitize() + " = " + vals[i]
	}
	return strings.Join(parts, " AND ")
}

func col(name, sqlType string, gen valueGen) *rlColumn {
	return &rlColumn{name: name, sqlType: sqlType, gen: gen}
}

func bigCol(name, sqlType string, gen valueGen) *rlColumn {
	return &rlColumn{name: name, sqlType: sqlType, gen: gen, big: true}
}

// baseTables are the built-in tables: together they cover every type the
// processor's contract names.
func baseTables() []*rlTable {
	g := notNull
	return []*rlTable{
		{name: "rl_scalars", key: keyID, cols: []*rlColumn{
			col("b", "bool", nullable(g(func(r *rand.Rand) string { return pick(r, "t", "f") }))),
			col("c", `"char"`, nullable(g(func(r *rand.Rand) string { return string(rune(pick(r, 'a', 'Z', '0', '!', '~', ' ', '\\'))) }))),
			col("n", "name", nullable(g(func(r *rand.Rand) string { return randText(r, 30) }))),
			col("i2", "int2", nullable(g(func(r *rand.Rand) string { return strconv.Itoa(r.Intn(65536) - 32768) }))),
			col("i4", "int4", nullable(g(func(r *rand.Rand) string { return strconv.FormatInt(int64(int32(r.Uint32())), 10) }))),
			col("i8", "int8", nullable(g(func(r *rand.Rand) string {
				return pick(r, strconv.FormatInt(int64(r.Uint64()), 10), "-9223372036854775808", "9223372036854775807", "0")
			}))),
			col("o", "oid", nullable(g(func(r *rand.Rand) string { return strconv.FormatUint(uint64(r.Uint32()), 10) }))),
			col("f4", "float4", nullable(g(func(r *rand.Rand) string { return randFloat(r, 32) }))),
			col("f8", "float8", nullable(g(func(r *rand.Rand) string { return randFloat(r, 64) }))),
		}},
		{name: "rl_numeric", key: keyID, cols: []*rlColumn{
			col("n", "numeric", nullable(g(randNumeric))),
			col("n102", "numeric(10,2)", nullable(g(randNumeric10x2))),
			col("huge", "numeric", nullable(g(func(r *rand.Rand) string { return digits(r, 1000) }))),
		}},
		{name: "rl_text", key: keyID, cols: []*rlColumn{
			col("t", "text", nullable(g(func(r *rand.Rand) string { return randText(r, 60) }))),
			col("vc", "varchar(40)", nullable(g(func(r *rand.Rand) string { return randText(r, 40) }))),
			col("bp", "char(8)", nullable(g(func(r *rand.Rand) string { return randText(r, 8) }))),
			col("by", "bytea", nullable(g(bigBytea))),
			bigCol("doc", "text", nullable(g(bigText))),
		}},
		{name: "rl_json", key: keyID, cols: []*rlColumn{
			col("j", "json", nullable(g(func(r *rand.Rand) string { return randJSON(r, 0) }))),
			col("jb", "jsonb", nullable(g(func(r *rand.Rand) string { return randJSON(r, 0) }))),
			col("u", "uuid", nullable(g(randUUID))),
			col("ai", "int4[]", nullable(g(randIntArray))),
			col("at", "text[]", nullable(g(randTextArray))),
		}},
		{name: "rl_time", key: keyID, cols: []*rlColumn{
			col("d", "date", nullable(g(randDate))),
			col("tm", "time", nullable(g(randTime))),
			col("tmtz", "timetz", nullable(g(func(r *rand.Rand) string { return randTime(r) + randOffset(r) }))),
			col("ts", "timestamp", nullable(g(func(r *rand.Rand) string { return randTimestamp(r, false) }))),
			col("tstz", "timestamptz", nullable(g(func(r *rand.Rand) string { return randTimestamp(r, true) }))),
			col("iv", "interval", nullable(g(randInterval))),
		}},
		{name: "rl_net", key: keyID, cols: []*rlColumn{
			col("ip", "inet", nullable(g(randInet))),
			col("net", "cidr", nullable(g(randCidr))),
			col("mac", "macaddr", nullable(g(randMac))),
			col("m", "money", nullable(g(randMoney))),
		}},
		{name: "rl_exotic", key: keyID, cols: []*rlColumn{
			col("mood", "rl_mood", nullable(g(func(r *rand.Rand) string { return pick(r, "sad", "ok", "happy") }))),
			col("r4", "int4range", nullable(g(randInt4Range))),
			col("rtz", "tstzrange", nullable(g(randTstzRange))),
			col("dt", "rl_dtext", nullable(g(func(r *rand.Rand) string { return randText(r, 30) }))),
			col("di", "rl_dint", nullable(g(func(r *rand.Rand) string { return strconv.Itoa(1 + r.Intn(100000)) }))),
			col("tsv", "tsvector", nullable(g(randTSVector))),
			col("comp", "rl_pair", nullable(g(randPair))),
		}},
		{name: "rl_full", key: keyFull, cols: []*rlColumn{
			col("label", "text", nullable(g(func(r *rand.Rand) string { return randText(r, 30) }))),
			col("amount", "numeric", nullable(g(randNumeric))),
			col("at", "timestamptz", nullable(g(func(r *rand.Rand) string { return randTimestamp(r, true) }))),
		}},
		{name: "rl_ident", key: keyIdentity, cols: []*rlColumn{
			col("val", "text", nullable(g(func(r *rand.Rand) string { return randText(r, 30) }))),
			bigCol("payload", "text", nullable(g(bigText))),
		}},
		{name: "rl_pair_pk", key: keyPair, cols: []*rlColumn{
			col("qty", "int4", nullable(g(func(r *rand.Rand) string { return strconv.Itoa(r.Intn(1000)) }))),
			col("note", "text", nullable(g(func(r *rand.Rand) string { return randText(r, 30) }))),
			bigCol("big", "text", nullable(g(bigText))),
		}},
		{name: "rl_docs", key: keyID, cols: []*rlColumn{
			col("title", "varchar(100)", nullable(g(func(r *rand.Rand) string { return randText(r, 100) }))),
			bigCol("body", "text", nullable(g(bigText))),
			bigCol("blob", "bytea", nullable(g(bigBytea))),
			col("meta", "jsonb", nullable(g(func(r *rand.Rand) string { return randJSON(r, 0) }))),
		}},
	}
}

// keylessTables are the tables Keyless adds.
func keylessTables() []*rlTable {
	g := notNull
	return []*rlTable{
		{name: "rl_nokey", key: keyNone, cols: []*rlColumn{
			col("label", "text", nullable(g(func(r *rand.Rand) string { return randText(r, 30) }))),
			col("qty", "int4", nullable(g(func(r *rand.Rand) string { return strconv.Itoa(r.Intn(1000)) }))),
			bigCol("body", "text", nullable(g(bigText))),
		}},
		{name: "rl_nothing", key: keyNothing, cols: []*rlColumn{
			col("label", "varchar(40)", nullable(g(func(r *rand.Rand) string { return randText(r, 40) }))),
			col("amount", "numeric(10,2)", nullable(g(randNumeric10x2))),
			col("f", "float4", nullable(g(func(r *rand.Rand) string { return randFloat(r, 32) }))),
		}},
	}
}

func extraTable(name string) *rlTable {
	return &rlTable{name: name, key: keyID, cols: []*rlColumn{
		col("v", "text", nullable(notNull(func(r *rand.Rand) string { return randText(r, 40) }))),
		col("n", "numeric", nullable(notNull(randNumeric))),
		col("at", "timestamptz", nullable(notNull(func(r *rand.Rand) string { return randTimestamp(r, true) }))),
	}}
}

const randomTypesSQL = `
CREATE TYPE rl_mood AS ENUM ('sad', 'ok', 'happy');
CREATE DOMAIN rl_dtext AS text CHECK (length(VALUE) < 1000);
CREATE DOMAIN rl_dint AS int CHECK (VALUE > 0);
CREATE TYPE rl_pair AS (x int, y text);
`

func (t *rlTable) createSQL() string {
	var defs []string
	switch t.key {
	case keyID:
		defs = append(defs, "id int8 PRIMARY KEY")
	case keyFull, keyNone, keyNothing:
		defs = append(defs, "seq int8")
	case keyIdentity:
		defs = append(defs, "code text NOT NULL", "region int4 NOT NULL")
	case keyPair:
		defs = append(defs, "tenant int4", "item uuid")
	}
	for _, c := range t.cols {
		defs = append(defs, pgx.Identifier{c.name}.Sanitize()+" "+c.sqlType)
	}
	if t.key == keyPair {
		defs = append(defs, "PRIMARY KEY (tenant, item)")
	}
	s := fmt.Sprintf("CREATE TABLE %s (%s);", t.name, strings.Join(defs, ", "))
	if t.key.keyless() {
		// Not unique: CLUSTER needs an index, and rows are found by seq.
		s += fmt.Sprintf(" CREATE INDEX %s_seq ON %s (seq);", t.name, t.name)
	}
	switch t.key {
	case keyFull:
		s += fmt.Sprintf(" ALTER TABLE %s REPLICA IDENTITY FULL;", t.name)
	case keyNothing:
		s += fmt.Sprintf(" ALTER TABLE %s REPLICA IDENTITY NOTHING;", t.name)
	case keyIdentity:
		s += fmt.Sprintf(" CREATE UNIQUE INDEX %s_key ON %s (code, region); ALTER TABLE %s REPLICA IDENTITY USING INDEX %s_key;", t.name, t.name, t.name, t.name)
	}
	return s
}

func (o RandomLoadOptions) tables() []*rlTable {
	ts := baseTables()
	if o.Keyless {
		ts = append(ts, keylessTables()...)
	}
	for i := len(ts); i < o.Tables; i++ {
		ts = append(ts, extraTable(fmt.Sprintf("rl_extra_%d", i)))
	}
	return ts
}

// CreateRandomSchema creates the workload's types and tables in the public
// schema of the postgres database and returns the tables' schema-qualified
// names. Run it after the pipeline under test started, so every table's
// creation is in the stream it reads.
func (p *Postgres) CreateRandomSchema(t testing.TB, opt RandomLoadOptions) []string {
	t.Helper()
	sql := randomTypesSQL
	var names []string
	for _, tb := range opt.tables() {
		sql += tb.createSQL() + "\n"
		names = append(names, "public."+tb.name)
	}
	p.Exec(t, sql)
	return names
}

// rlSchema is the workload's view of the tables, shared by the clients and
// changed by DDL once it committed.
type rlSchema struct {
	mu      sync.Mutex
	tables  []*rlTable
	renames int
}

func (s *rlSchema) snapshot() []*rlTable {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*rlTable, len(s.tables))
	for i, t := range s.tables {
		out[i] = t.clone()
	}
	return out
}

// RunRandomLoad runs opt.Ops random operations over opt.Clients concurrent
// connections against the tables CreateRandomSchema made. Deadlocks and
// statements broken by a concurrent DDL are skipped (counted in Skipped);
// any other error fails the test.
func (p *Postgres) RunRandomLoad(t testing.TB, opt RandomLoadOptions) RandomLoadStats {
	t.Helper()
	start := time.Now()
	n := opt.clients()
	schema := &rlSchema{tables: opt.tables()}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	clients := make([]*rlClient, n)
	for i := range clients {
		conn, err := pgx.Connect(ctx, p.DSN())
		if err != nil {
			t.Fatalf("connecting client %d: %v", i, err)
		}
		defer conn.Close(context.Background())
		clients[i] = &rlClient{
			id: i, clients: n, conn: conn, opt: opt, schema: schema,
			r:       rand.New(rand.NewSource(opt.Seed*7919 + int64(i))),
			nextRid: map[string]int64{},
			stats:   RandomLoadStats{Ops: map[string]int{}, Skipped: map[string]int{}},
		}
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, c := range clients {
		ops := opt.Ops / n
		if i < opt.Ops%n {
			ops++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.run(ctx, ops)
		}()
	}
	wg.Wait()
	total := RandomLoadStats{Ops: map[string]int{}, Skipped: map[string]int{}}
	for _, c := range clients {
		for k, v := range c.stats.Ops {
			total.Ops[k] += v
		}
		for k, v := range c.stats.Skipped {
			total.Skipped[k] += v
		}
		total.Committed += c.stats.Committed
		total.RolledBack += c.stats.RolledBack
		total.TypeChanges += c.stats.TypeChanges
	}
	total.Duration = time.Since(start)
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("random load (seed %d): %v", opt.Seed, err)
	}
	return total
}

// String summarises the stats in one line, kinds sorted.
func (s RandomLoadStats) String() string {
	format := func(m map[string]int) string {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = fmt.Sprintf("%s=%d", k, m[k])
		}
		return strings.Join(parts, " ")
	}
	return fmt.Sprintf("ops[%s] skipped[%s] committed=%d rolled_back=%d in %v",
		format(s.Ops), format(s.Skipped), s.Committed, s.RolledBack, s.Duration.Round(time.Millisecond))
}

// skippable reports the SQLSTATE of an error the workload expects from
// concurrency: deadlocks and serialization failures, statements naming a
// column or table a concurrent DDL renamed or dropped, lock timeouts, and
// key collisions between clients.
func skippable(err error) (string, bool) {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return "", false
	}
	switch pe.Code {
	case "40001", "40P01", // serialization failure, deadlock
		"42703", "42P01", "42701", "42P07", // undefined/duplicate column or table
		"23505",          // unique violation between clients
		"55P03", "55006", // lock timeout, object in use
		"25P02": // in failed transaction
		return pe.Code, true
	}
	return "", false
}
