// Package msg owns the message contract between walshadow's three Benthos
// plugins: the metadata keys, the operation and event values, and the typed
// encoding of one message's metadata.
//
// Two messages cross the plugins:
//
//	pg_physical_wal ──Records──▶ walshadow_decode ──Change──▶ clickhouse_ddl
//	(a session batch)            (one row change or schema event)
//
// The input sends a session batch as one message (Records, under
// KeyRecords, with an empty payload), or with `messages: record` one
// message per WAL record (Record, its bytes as the payload); EachRecord
// reads either.
//
// Each carries its metadata twice over, for two readers:
//
//   - typed, under one key (KeyRecords, KeyRecord, KeyChange): a *Records,
//     *Record or *Change the next plugin reads with one map lookup and no
//     parsing. This is what the plugins read; the typed value is never
//     mutated once set.
//   - as strings under the documented keys (KeyLSN, KeyTable, ...), for
//     Bloblang mappings, logs and other outputs (a record batch: its
//     position only). A row change always has
//     the routing keys (operation, schema, table, LSN, commit LSN);
//     every other key only when the processor's `metadata: all` asks (a
//     Benthos message's metadata is a map: each key costs a hash insert
//     per row, and past eight keys the map grows a table).
//
// A message without the typed value (built by hand, or by a mapping that
// deleted it) is read from its strings: RecordFromStrings and
// ChangeFromStrings parse what AppendStrings renders, and the two
// round-trip (fuzzed).
package msg
