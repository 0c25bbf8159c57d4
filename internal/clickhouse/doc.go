// Package clickhouse renders what the ClickHouse output sends to the
// server: per-version dialects, identifier and literal quoting, the type
// map from PostgreSQL columns and DDL (pure: strings in, strings out); it
// converts decoded values to what clickhouse-go inserts (ConvertValue) and
// holds the native-protocol connection (Conn: Open, Insert, LookupLatest,
// LookupVersions, Table, InsertRetrying) and the rows of an insert as
// typed columns (Block, InsertBlock: each value stored as its column's Go
// type, sent a column at a time).
//
// # Dialects
//
// ParseDialect(SELECT version()) gives the capability flags the renderers
// consult. Legacy1816 (Debian's 18.16.1, the server tests run against) has
// none of them: no IF [NOT] EXISTS on columns, no RENAME COLUMN, no
// DateTime64, Bool or Date32, no is_deleted engine argument, Decimal up to
// precision 38. Modern (23.8) has all.
//
// # Naming
//
// A relation schema.table of the source lands in the configured database as
// table DefaultTableName(schema, table) = "<schema>.<table>", with '%' and
// '.' inside either part escaped as %25 and %2E: injective over (schema,
// table) pairs and readable for ordinary names (`db`.`public.orders`).
// Column names are the source's. Every identifier is backtick-quoted with
// backtick and backslash escaped and control characters written \xHH
// (QuoteIdent); an INSERT, which clickhouse-go parses before the server
// does, writes every byte outside [A-Za-z0-9_] as \xHH and checks the
// columns the server describes against the ones it named (conn.go,
// prepareInsert). ClickHouse holds any non-empty byte string as a name
// (control characters and bytes that are not UTF-8 included), so a
// PostgreSQL name lands as itself, except where ClickHouse would read it
// as something else or cannot store it: walshadow's own column names, a
// NULL flag's name, an array's dot (Nested) and names too long for the
// server's file names get the deterministic mapping naming.go describes,
// recorded in the agreement. A configured name (database, table,
// column_names) is checked instead: one ClickHouse cannot store, or that
// collides, is an error naming the setting.
//
// # Type map
//
// Column types (T is the element mapping; every column is Nullable(...)
// unless NOT NULL or part of the sorting key):
//
//	PostgreSQL                         18.16 (Legacy1816)       >= 23.2 (Modern)
//	bool                               UInt8 (0/1)              Bool
//	int2 / int4 / int8                 Int16 / Int32 / Int64    same
//	oid                                UInt32                   UInt32
//	float4 / float8                    Float32 / Float64        same
//	numeric(p,s), 1<=p<=38, 0<=s<=p    Decimal(p, s)            Decimal(p, s)
//	numeric(p,s), 38<p<=76             String                   Decimal(p, s)
//	numeric, s<0 or s>p, unconstrained String                   String
//	uuid                               UUID                     UUID
//	bytea                              String (raw bytes)       String (raw bytes)
//	date                               Int32 (days since 1970)  Date32
//	timestamp, timestamptz             Int64 (µs since epoch)   DateTime64(6, 'UTC')
//	text, varchar, bpchar, name,       String                   String
//	"char", json, jsonb, time, timetz,
//	interval, inet, cidr, macaddr, money
//	T[]                                Array(Nullable(T))       Array(Nullable(T))
//	T[] nullable                       Array(Nullable(T)) and   same
//	                                   <name>__is_null UInt8
//	enum                               String                   LowCardinality(String)
//	domain over B                      mapping of B (numeric: unconstrained)
//	range, multirange, composite,
//	extension and unknown types        String (PostgreSQL text output)
//
// Why each choice, where it is not the obvious one:
//
//   - bool is UInt8 where the server has no Bool (before 21.12).
//   - date and timestamp are Int32 days and Int64 µs on servers without
//     Date32/DateTime64: Date and DateTime would lose every value before
//     1970 and the microseconds (see below); on newer servers the native
//     types are used, and values outside their range fail closed.
//   - numeric(p,s) is Decimal only within the server's precision limit and
//     for 0 <= s <= p: anything else would round; unconstrained numeric has
//     no scale, so String (its exact text).
//   - Arrays are Array(Nullable(T)) (PostgreSQL elements can be NULL).
//     ClickHouse has no Nullable(Array), so a nullable array column gets a
//     NULL flag column beside it, <name>__is_null UInt8: 1 for a NULL array
//     (the array column holds []), 0 otherwise, so '{}' and NULL stay
//     apart (a query filters on the flag: WHERE tags__is_null = 0). Its
//     DEFAULT is 1 for a column added without a default (the rows before
//     it are NULL), 0 with one. Tables created before this mapping keep
//     such columns as String until they are reloaded. Multi-dimensional arrays and lower bounds other than 1
//     do not fit Array(T) and fail closed (the column is then widened to
//     String by the reload that repairs the table).
//   - enum is a string, not a ClickHouse Enum: labels are added and
//     renamed with ALTER TYPE, which no Enum could follow without an ALTER
//     per label. Few distinct values make it LowCardinality(String) where
//     the server has LowCardinality generally (20.1 here; 18.16 has it only
//     behind an experimental setting).
//   - inet and cidr stay String: an IPv4/IPv6 column would drop a host's
//     netmask (10.0.0.1/8), and a column holding both families would need
//     two; text keeps every value exact.
//   - json and jsonb stay String: ClickHouse's JSON types are experimental
//     on most servers in use and keep neither json's text nor jsonb's
//     normalized form.
//
// Values a mapped type cannot hold fail closed at insert (ConvertValue
// checks and refuses, never wraps or rounds): numeric NaN/±Infinity and
// digits beyond the precision or scale in Decimal; dates and timestamps
// outside Date32/DateTime64's 1900-01-01..2299-12-31 (the range of >= 22.8;
// a Date column an override asks for holds 1970-01-01..2105-12-31);
// ±infinity and BC values in Date32 and DateTime64; Int64 µs past
// 294247-01-10; multi-dimensional arrays and arrays with a lower bound
// other than 1. ConvertValue's refusal is a ValueError naming the column:
// the output fails that table and reloads it with the column mapped to
// String (PostgreSQL's text form, which holds every value), unless the
// configuration gives the column a type.
//
// Dates on servers without Date32 are Int32 days since 1970-01-01: every
// PostgreSQL date (4714-11-24 BC .. 5874897-12-31) fits, and -infinity and
// infinity are math.MinInt32 and math.MaxInt32, the values PostgreSQL
// itself stores for them. Date would hold only 1970..2105.
//
// Timestamps on servers without DateTime64 are Int64 microseconds since
// 1970-01-01 00:00:00 UTC (timestamp is read as UTC): lossless to the
// microsecond, ordered and arithmetic, unlike DateTime (seconds) or String.
// BC and years past 9999 are included; -infinity and infinity are
// math.MinInt64 and math.MaxInt64 (PostgreSQL's own sentinels too).
//
// # Type changes
//
// A source column's ALTER COLUMN ... TYPE (or DROP NOT NULL) is classified
// by ClassifyTypeChange. Keep: ClickHouse's column already holds every
// value exactly as the output writes it under the new type. Modify:
// ALTER TABLE ... MODIFY COLUMN, ClickHouse's conversion of every value
// the old column can hold being exactly what the output writes for the new
// type (a DEFAULT is carried, converted the same way). Reload: anything
// else, and anything not known for certain: Reconcile records it in
// Plan.Reload and the table is reloaded under its new shape. Never DROP
// and ADD. The same on both dialects except where the type map differs
// (marked L for Legacy1816, M for Modern):
//
//	PostgreSQL change                         ClickHouse                     action
//	int2 → int4, int2 → int8, int4 → int8     Int16/Int32 → Int32/Int64      modify
//	oid → int8                                UInt32 → Int64                 modify
//	int8 → int4, int4 → int2, ... (narrowing) Int64 → Int32, ...             reload
//	int4 → oid                                Int32 → UInt32                 reload
//	real → double precision                   Float32 → Float64              modify
//	double precision → real                   Float64 → Float32              reload
//	int2 → real; int2, int4 → double          Int16 → Float32; → Float64     modify
//	int4, int8 → real; int8 → double          (PostgreSQL rounds)            reload
//	numeric(p,s) → numeric(p',s'),            Decimal(p,s) → Decimal(p',s')  modify
//	  s' >= s and p'-s' >= p-s
//	numeric(p,s) → smaller scale or fewer     Decimal → Decimal              reload
//	  integer digits
//	numeric(p,s) → numeric (unconstrained)    Decimal → String               reload
//	numeric → numeric(p,s)                    String → Decimal               reload
//	numeric(p,s) → numeric(p',s'), p' > 38,   L: Decimal → String            L: reload
//	  s' >= s, p'-s' >= p-s                   M: Decimal → Decimal           M: modify
//	numeric(p,s), p > 38 → numeric(p',s),     L: String, text unchanged      L: keep
//	  p'-s >= p-s, or → numeric               M: Decimal → Decimal / String  M: modify / reload
//	numeric(p,s), p > 38 → numeric(p',s'>s)   L: String, gains zeros         L: reload
//	int2/int4/int8 → numeric(p,s),            Int → Decimal                  modify
//	  p-s >= 5/10/19 digits
//	int → numeric(p,s) with fewer digits,     Int → Decimal / String         reload
//	  int → numeric (unconstrained)
//	numeric, float → int; float → numeric     (PostgreSQL rounds)            reload
//	varchar(n) → varchar(m >= n), → varchar,  String → String                keep
//	  → text; text → varchar (unlimited)
//	text → varchar(n), varchar(n) →           String → String                reload
//	  varchar(m < n)  (trailing spaces past the limit are cut)
//	char(n) → anything, anything → char(n)    (padding changes)              reload
//	json → text, jsonb → text/json,           String → String                keep
//	  text → json, enum → text
//	json → jsonb, text → jsonb (normalized)   String → String                reload
//	int, uuid, bytea, interval, time, inet,   → String                       reload
//	  ... → text  (ClickHouse's or the session's text, not the output's)
//	text → int and other String → typed       String → ...                   reload
//	bool → int                                UInt8 / Bool → Int32           reload
//	timestamp ↔ timestamptz                   L: Int64 = Int64, M: same      reload
//	  (converted in the session's time zone)
//	timestamp(p) → timestamp(p' >= p) or      unchanged                      keep
//	  timestamp (also time, timetz, timestamptz)
//	timestamp → timestamp(p < 6)  (rounds)    unchanged                      reload
//	date → timestamp                          L: Int32 → Int64, M: Date32 →  reload
//	                                            DateTime64
//	domain over B ↔ B, B → domain over B      unchanged                      keep
//	  (B without a typmod)
//	X → domain over a typmod-bearing type     (typmod unknown)               reload
//	DROP NOT NULL                             X → Nullable(X)                modify
//	DROP NOT NULL with a change above         X → Nullable(Y)                as above
//	SET NOT NULL                              Nullable(X) stays              keep
//	T[] → U[] of another ClickHouse type      Array → Array                  reload
//	T[] → U[] keeping each element's text     Array unchanged                keep
//	  (varchar(n)[] → text[])
//	DROP NOT NULL of T[]                      Array kept, NULL flag added    modify
//	enum → text (M)                           LowCardinality(String) →       modify
//	                                            String
//	any change of a sorting key column        (ClickHouse cannot modify it)  reload
//	  or of a column partition_by mentions
//	a type override that keeps the ClickHouse type: keep if every decoded
//	  value is unchanged (int4 → int8 overridden to String), else reload
//
// PostgreSQL's ALTER COLUMN ... TYPE ... USING expr leaves the catalog as
// a plain cast does: the classification assumes the values were cast, not
// transformed. A USING expression always rewrites the table, and the
// rewrite's inserts carry the transformed values: a keyed table takes
// them by key after a MODIFY, any other is refilled from them ("Reloads"
// below).
//
// # Values
//
// ConvertValue takes what walshadow_decode puts in a row payload (nil,
// bool, int64, float64 or "NaN"/"Infinity"/"-Infinity", json.Number,
// []byte, time.Time in UTC, and PostgreSQL's text output for the rest:
// arrays, uuids, out-of-range dates and timestamps) plus what a Benthos
// mapping may leave (other integer widths, float32, numbers and booleans
// as strings) and returns the Go type clickhouse-go appends for the
// column: int16/int32/int64, uint8/uint32/uint64, float32/float64,
// decimal.Decimal, string (UUIDs too), bool, time.Time, and []*T for
// Array(Nullable(T)). Nullable columns take nil or the plain value. Zero
// fills a tombstone: NULL where Nullable, the type's zero value otherwise.
//
// A Nullable array's value is nil or its []*T like any Nullable column's;
// Physical lists the ClickHouse columns a ColumnSpec list becomes (the
// NULL flag after its array), and the insert (Block), the lookups and
// Logical write and read the pair as that one value.
//
// # Tables
//
// CreateTable adds _lsn UInt64, _xid UInt32, the commit time and
// _is_deleted UInt8. The commit time is _commit_ts DateTime64(6, 'UTC') on
// servers with DateTime64 and _commit_ts_us UInt64 (µs since the epoch) on
// others. Tables with a key are ReplacingMergeTree(_lsn, _is_deleted)
// (ReplacingMergeTree(_lsn) before 23.2) ordered by the key. Tables of a
// relation without a replica identity key (no primary key, REPLICA
// IDENTITY NOTHING or FULL) are LayoutPhysical: the same engine ordered by
// _filenode UInt32, _block UInt32, _offset UInt16 — each row's heap
// generation and TID, which every heap record in the WAL names — so an
// UPDATE or DELETE names the row it changes and FINAL WHERE _is_deleted =
// 0 is the table, identical duplicate rows included. A relation's change
// log (LayoutChangeLog: every row image, ReplacingMergeTree(_lsn) ordered
// by (_lsn, _seq)) is what tables without a key got before, kept for them
// and made for TableConfig.ChangeLog.
//
// What changes of a keyless relation become:
//
//	PostgreSQL                          ClickHouse (LayoutPhysical)
//	INSERT, COPY                        row at (filenode, block, offset)
//	UPDATE (HOT or not)                 delete marker at the old TID, row at the new
//	DELETE                              delete marker at the TID
//	TRUNCATE                            TRUNCATE TABLE; the next rows adopt the new filenode
//	VACUUM FULL, CLUSTER                every TID moved without row records: reload
//	ALTER TABLE rewrite (type change,   rebuilt empty at the event and refilled
//	  volatile default)                   from the rewrite's inserts (no reload)
//	primary key added                   rebuilt under the key (rows copied)
//	primary key dropped                 reload (ClickHouse cannot know the TIDs)
//
// # Reloads
//
// A reload copies a table from the source again: exact, and the one
// repair that costs the primary. What walshadow does instead wherever
// ClickHouse or the WAL already holds what the table needs, and why each
// remaining reason needs the source:
//
//   - A type change: a MODIFY COLUMN where ClickHouse converts every
//     value exactly (the table above); otherwise, when PostgreSQL
//     rewrote the table (every type change that is not binary coercible
//     does, USING or not), the rewrite's transaction holds every row as
//     an insert into the new file: the table is rebuilt empty under the
//     new shape and refilled from those rows (output/refill.go; the event
//     says so with msg.KeyRewritten), key columns and text conversions
//     included. A change that keeps the file (binary coercible) and
//     still changes what ClickHouse holds — a composite type's
//     attributes (PostgreSQL reads the stored values with the type's new
//     attributes, writing nothing), a domain or an array's element
//     type whose rendering changes — leaves the new values nowhere but
//     in the source: reload.
//   - A table without a key rewritten by ALTER TABLE: refilled the same
//     way. Rewritten by VACUUM FULL or CLUSTER (no shape change): the new
//     heap is in the WAL only as page images, which hold dead and
//     recently dead tuple versions too; telling them apart needs the
//     commit status of every xmin and xmax (as a base_backup load does
//     with pg_xact): reload.
//   - A replica identity key dropped: the table's rows are keyed by their
//     physical identity (TID) from then on, which ClickHouse never held
//     for a keyed table and the WAL names only for rows changed after:
//     reload.
//   - A value its column's ClickHouse type cannot hold (numeric NaN in a
//     Decimal, a timestamp past Int64 microseconds, a multi-dimensional
//     array or one with explicit bounds): the column becomes String,
//     PostgreSQL's text of every value. ClickHouse's own text of the
//     values it stored is not PostgreSQL's (a Decimal's scale, an array's
//     brackets and quoting, microseconds as an integer), so only the
//     source's output functions give it: reload.
//   - A table made LOGGED: SET LOGGED rewrites it into a logged file, so
//     it is refilled from that rewrite like a type change.
//   - A value the bridge cannot render (a type dropped before its row was
//     decoded), a change the decoder cannot prove a shape for, a table
//     that returns to the scope (its changes while out of it were never
//     decoded): reload.
//
// # Restarts
//
// A statement the output counts as done must stay done when ClickHouse
// is killed (a crash, an OOM kill) and started again. Measured on
// 18.16.1 with a query reading the table, the server SIGKILLed right
// after the statement returned (TestRestartAfterTruncateDropRename):
//
//   - TRUNCATE TABLE waits for the readers and takes every part out of
//     the table, but leaves on disk the parts its merges replaced in the
//     last old_parts_lifetime (8 minutes), reader or not; a restart
//     before they are gone loads them again (no part covers them any
//     more) and the table holds rows from before the TRUNCATE. A TRUNCATE
//     is therefore followed by DeleteBefore's mutation, which the server
//     keeps on disk and applies to those parts when it loads them
//     (truncate.go: why it deletes exactly those rows, and how the output
//     waits for it after a restart).
//   - DROP TABLE waits for the readers, then removes the table's metadata
//     file (metadata/<db>/<table>.sql) before its data: a table without
//     its metadata file is not loaded at start, whatever data directory a
//     crash left behind. Nothing comes back.
//   - RENAME TABLE (the rekey's swap, a load's publish on an Ordinary
//     database: 18.16 has no other kind) waits for the readers, renames
//     the table's data directory (one rename(2)), writes its metadata file
//     under the new name and removes the old one. Once it has returned a
//     process crash cannot undo it: the table is found under its new name
//     with its own parts, and nothing is left under the old one. (18.16
//     does not do those three steps atomically: a crash inside the
//     statement, a window of well under a millisecond, can leave an empty
//     table under the old name and the rows under the new one, or under
//     no name if the new metadata file was not written yet. That statement
//     was not acknowledged, but nothing the output runs next repairs the
//     second case.)
//   - EXCHANGE TABLES (an Atomic database, from 20.x; not testable on
//     18.16) swaps the two tables' metadata files in one
//     renameat2(RENAME_EXCHANGE); the data stays in directories named by
//     the tables' UUIDs, which the metadata names: either both are swapped
//     or neither. DROP TABLE there moves the metadata file aside
//     (metadata_dropped) before the data goes, so a restart does not load
//     the table again either.
//
// Inserts are durable once acknowledged against a process crash (the
// parts are written before the INSERT returns; a power loss without
// fsync_after_insert is beyond what the output can see).
//
// # Clusters
//
// A Topology (topology.go) says where the tables live: one server, or a
// cluster of the server's remote_servers (ConnConfig.Cluster), read from
// system.clusters at Open. Only clusters of one shard are taken so far:
// every node holds every row. No caller spells ON CLUSTER: Conn.Exec
// passes every statement through Topology.Distribute, which puts ON
// CLUSTER where each DDL form this package renders takes it and refuses
// a DDL form it does not know (a statement run on one node only would
// leave the others behind silently). INSERT and SELECT run on one node:
// replication carries the rows to the others.
//
// Tables are ReplicatedReplacingMergeTree (Dialect.Replicated) with the
// version argument and ORDER BY a single server gets, under ZooKeeper
// path /clickhouse/tables/{shard}/walshadow/<random>: random rather than
// built from the table's name because RENAME keeps a table's path (a
// table created later under the old name would share a live table's
// path) and a node that missed a DROP would offer the dropped table's
// parts to a new one of the same name. A load's staging table copies its
// delta table's engine under a path of its own (CreateLikeReplicated).
//
// A statement ON CLUSTER is applied only when every node has run it
// (ddlwait.go): the server's wait is handed back after
// distributed_ddl_task_timeout and the task is then read in ZooKeeper,
// the missing nodes named, never issued twice. With several hosts in the
// DSN the connection is pinned to one and moves on a network failure;
// the first read after a move waits until the new node holds every part
// (failover.go).
package clickhouse
