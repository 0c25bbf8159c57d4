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
// twice:
//
//	{
//	  "format": "walshadow-loads",
//	  "version": 1,
//	  "entries": [
//	    {
//	      "oid": 16384,                          source relation
//	      "schema": "public",
//	      "table": "orders",
//	      "mode": "copy",                        none | copy | base_backup
//	      "phase": "loading",                    loading | publishing | done
//	      "coverage_lsn": "0/5A3F1C8",           S: loaded rows carry _lsn = S
//	      "database": "shop",                    ClickHouse target database
//	      "target": "orders",
//	      "staging": "orders__wsload_16384",     same database
//	      "old": "orders__wsreplaced_16384",     optional: where a table found under the target's name goes
//	      "staging_uuid": "5e0c…",               optional: Atomic databases, the staging uuid before EXCHANGE
//	      "stale_database": "shop",              optional, with "stale": a reload's superseded table,
//	      "stale": "orders",                     dropped once the load is published
//	      "snapshot": "1991:1995:1993",          optional: the load's snapshot (xmin:xmax:xip)
//	      "seen_by_lsn": "0/5A40000",            optional: every transaction the load holds committed before it
//	      "attempt": 1,
//	      "rows": 1234567,
//	      "bytes": 230000000,
//	      "started_at": "2026-11-30T14:02:03.5Z", RFC 3339 with nanoseconds, UTC; optional
//	      "finished_at": "2026-11-30T14:09:41Z",  optional
//	      "last_error": "…",                     optional
//	      "reason": "failed at 0/5A3F000: …",    optional: why a followed table is loaded again
//	      "failed_at_lsn": "0/5A3F000"           optional: the change a failed table could not take
//	    }
//	  ],
//	  "crc32c": 3735928559
//	}
//
// Entries are sorted by schema, table and oid. The file is rewritten whole
// and atomically (temporary file, fsync, rename, directory fsync) on every
// change. crc32c is CRC-32C (Castagnoli) of the compact JSON encoding of
// the document as decoded, with crc32c set to 0: a hand-edited or damaged
// file is refused rather than trusted. Unknown fields, another format or
// version, an invalid mode, phase, LSN or time, and duplicate oids are
// refused too.
//
// A refused file is reported as a *LedgerError that tells two cases apart:
//
//   - truncated: the file is empty (or only white space), or it is a JSON
//     object cut short — every byte is valid JSON so far but the input ends
//     before the top-level object closes. That is what a crash leaves on a
//     filesystem that does not order data before the rename.
//   - corrupt: anything else (invalid JSON, trailing data, a checksum
//     mismatch, an unknown field, a wrong version, invalid values).
package load
