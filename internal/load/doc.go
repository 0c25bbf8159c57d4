// Package load holds the building blocks of the initial load: copying the
// rows a table already holds into ClickHouse before its WAL changes are
// applied. The clickhouse_ddl output runs a load in the background per
// table (mode none, copy or base_backup), fills a staging table and
// publishes it atomically; this package gives it the durable ledger of
// those loads, the split of a heap into ctid ranges, a shared byte-rate
// limiter and progress accounting.
//
// # The ledger file
//
// LedgerFile in the state directory records every load that is not
// forgotten yet, so a restart resumes or cleans up instead of loading
// twice. It is a state file in internal/statefile's envelope (format
// "walshadow-loads", version 2, CRC-32C of the body), whose body is:
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
//	      "failed_at_lsn": "0/05A3F000"          optional: the change a failed table could not take
//	    }
//	  ]
//	}
//
// Entries are sorted by schema, table and oid. The file is rewritten whole
// and atomically on every change. Besides what the envelope refuses (a
// checksum mismatch, unknown fields, another format or version: see
// internal/statefile, which also tells a truncated file from a corrupt
// one), an invalid mode, phase, LSN or time and duplicate oids make the
// file corrupt (*statefile.Error).
//
// Version 1 held the same entries in a document of its own
// ({"format": "walshadow-loads", "version": 1, "entries": [...],
// "crc32c": N}, the CRC-32C of its compact encoding with crc32c 0); it is
// read once and rewritten in the envelope at the next change.
package load
