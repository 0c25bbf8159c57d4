// Package load is the initial-load engine: tables in scope that an output
// has never written (no agreement yet when it starts) are filled with the
// rows the source already holds, in the background while their WAL
// changes keep streaming, then handed off to the stream at an exact
// position. The
// clickhouse_ddl output (package output) keeps the Benthos glue: its
// config, which tables load in which mode, and thin adapters through
// which the Engine reaches the source (Source: its DSN, the session's
// descriptor log, the shadow's bridge) and the output (Destination:
// ClickHouse through Conn, the output's lock between two batches, table
// states, the widening of a column; Agreements: the agreed table shapes).
// The Engine runs one load per table in the background (mode copy:
// COPY in an exported snapshot, large tables as ctid ranges in parallel;
// mode base_backup: a page walk over one BASE_BACKUP for the tables loaded
// together, internal/load/pagewalk), fills a staging table and publishes
// it atomically. The rest of the package are its building blocks: the
// durable ledger of the loads, the split of a heap into ctid ranges, a
// shared byte-rate limiter and progress accounting.
//
// # Handoff
//
// A load picks its coverage position S and a snapshot P such that
// every transaction P does not see has all its changes after S, and they
// are all streamed to this output: it reads L0 = pg_current_wal_lsn(),
// assigns itself an xid N0 and commits, waits until no transaction with an
// xid at or below N0 is running, then takes P (copy) or starts the
// BASE_BACKUP (base_backup). A transaction P does not see got its xid after
// N0, so its first record is after L0; S = L0 - 1 (WAL records start on
// 8-byte boundaries, so no change carries S itself). Loaded rows carry
// _lsn = S, so every change not in the load outranks them; a change that
// is in the load and also streamed carries its own version, never newer
// than what the load holds for that row, or the newest change of the row
// when it is newer. Tables without a key are change logs (no versions):
// there only the changes of transactions P does not see are kept, by xid.
//
// # Tables
//
// Until its load is published a relation's changes go to its
// delta table <table>__wsdelta_<oid> (its agreement targets it), and the
// load's rows to the staging table <table>__wsload_<oid>, created AS the
// delta table: the configured name only ever holds a whole table.
// Publishing runs between two batches (the output's lock): the changes
// streamed into the delta table since S are copied into the staging table,
// which takes the configured name in one RENAME; the agreement follows and
// the delta table is dropped. A table found under the name that this output
// did not publish is kept aside as <table>__wsreplaced_<oid> (EXCHANGE
// TABLES on an Atomic database, else one RENAME of both). A schema change,
// TRUNCATE or replica identity change of the table during its load reloads
// it with a new snapshot; a DROP cancels it and drops the delta table.
//
// # The ledger file
//
// LedgerFile in the state directory records every load that is not
// forgotten yet, so a restart resumes or cleans up instead of loading
// twice: a crash while loading reloads the table (the staging table is
// dropped first); a crash while publishing finishes the publish from what
// ClickHouse holds. A table is published whole or not at all. It is a
// journaled state file (internal/statefile, "Journaled files"): a
// snapshot in the envelope (format "walshadow-loads", version 4, CRC-32C
// of the body), whose body is:
//
//	"body": {
//	  "entries": [
//	    {
//	      "oid": 16384,                          source relation
//	      "schema": "public",
//	      "table": "orders",
//	      "mode": "copy",                        none | copy | base_backup
//	      "phase": "loading",                    loading | publishing | done
//	      "coverage_lsn": "0/05A3F1C8",          S: loaded rows carry _lsn = S
//	      "database": "shop",                    ClickHouse target database
//	      "target": "orders",
//	      "staging": "orders__wsload_16384",     same database
//	      "old": "orders__wsreplaced_16384",     optional: where a table found under the target's name goes
//	      "staging_uuid": "5e0c…",               optional: Atomic databases, the staging uuid before EXCHANGE
//	      "stale_database": "shop",              optional, with "stale": a reload's superseded table,
//	      "stale": "orders",                     dropped once the load is published
//	      "snapshot": "1991:1995:1993",          optional: the load's snapshot (xmin:xmax:xip)
//	      "seen_by_lsn": "0/05A40000",           optional: every transaction the load holds committed before it
//	      "attempt": 1,
//	      "rows": 1234567,
//	      "bytes": 230000000,
//	      "started_at": "2026-11-30T14:02:03.5Z", RFC 3339 with nanoseconds, UTC; optional
//	      "finished_at": "2026-11-30T14:09:41Z",  optional
//	      "last_error": "…",                     optional
//	      "reason": "failed at 0/5A3F000: …",    optional: why a followed table is loaded again
//	      "failed_at_lsn": "0/05A3F000",         optional: the change a failed table could not take
//	      "loads": 3,                            optional: load attempts of the table in all (each a copy)
//	      "streak": {                            optional: the identical failures behind its latest (park.go)
//	        "signature": "… value # does not fit Int8",  the error, its volatile parts blanked
//	        "at_lsn": "0/05A3F000",              optional: the change (none: the table's load)
//	        "count": 2,
//	        "attempt": 2                         optional: the load attempt of the last one
//	      },
//	      "parked": {                            optional: the table is parked (park.go)
//	        "since": "2026-12-01T09:30:00Z",
//	        "reason": "…",                       the failure, as logged
//	        "at_lsn": "0/05A3F000",              optional
//	        "count": 2,
//	        "remedy": "…",
//	        "shape_lsn": "0/05A30000",           the conditions it was parked under: its agreed shape,
//	        "config": "0123456789abcdef",        a digest of its configuration,
//	        "server_version": "18.16.1.0",       and the ClickHouse server's run
//	        "server_boot": "2026-11-30T08:00:00Z"
//	      }
//	    }
//	  ],
//	  "reloads": {"value_refused": 2}           optional: reloads of followed tables by reason (ReloadReasons)
//	}
//
// and a journal beside it (loads.json.journal) of the changes since, one
// JSON document per record:
//
//	{"put": {<an entry, as above>}}          the entry of its oid, whole
//	{"delete": 16384}                        the entry of that oid forgotten
//	{"reloads": {"value_refused": 3}}        the reload counts, whole
//
// so that a change costs one record, not the whole file: a first start
// loading 10,000 tables changes the ledger about 40,000 times. Entries
// are sorted by schema, table and oid. Besides what the envelope refuses
// (a checksum mismatch, unknown fields, another format or version: see
// internal/statefile, which also tells a truncated file from a corrupt
// one), an invalid mode, phase, LSN or time and duplicate oids make the
// file corrupt (*statefile.Error); so does a record that is not exactly
// one of the three or holds such an entry.
//
// Version 3 was the same body, the file rewritten whole on every change
// with no journal; version 2 was that without loads, streak, parked and
// reloads. Both are read as they are and rewritten as version 4 at the
// next change (a walshadow that reads version 3 at most refuses version 4
// rather than miss the journal's changes).
// Version 1 held the same entries in a document of its own
// ({"format": "walshadow-loads", "version": 1, "entries": [...],
// "crc32c": N}, the CRC-32C of its compact encoding with crc32c 0); it is
// read once and rewritten in the envelope at the next change.
package load
