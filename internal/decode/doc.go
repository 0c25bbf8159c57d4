// Package decode turns heap tuples into column values and column values into
// PostgreSQL's text output. It is pure: bytes in, values out, no I/O.
//
// # Tuples
//
// A heap tuple as WAL logs it (wal.HeapTuple) is xl_heap_header plus the
// on-page tuple from offset 23 (SizeofHeapTupleHeader):
//
//	Data: | null bitmap (natts bits, LSB first; 1 = NOT null) | pad |
//	      | user data from t_hoff-23: attr 1 | attr 2 | ... |
//
// t_hoff is MAXALIGNed, so aligning offsets within the user data is the same
// as aligning them within the page. Each non-null attribute, in attnum order
// (dropped columns included: they keep their slot), is laid out as
//
//	attlen > 0   aligned to attalign, attlen bytes
//	attlen = -1  varlena: aligned to attalign only when the byte at the
//	             current offset is 0 (a pad byte; 1-byte headers are never 0)
//	attlen = -2  cstring: aligned to attalign, up to and including its NUL
//
// Attributes at or beyond the tuple's natts (t_infomask2 & 0x07FF) were added
// after the tuple was written: they read as the column's missing value or NULL.
//
// # Varlenas (little-endian)
//
//	first byte xxxxxxx1, != 0x01  1-byte header: length (b>>1) incl. header
//	first byte 0x01               external: tag byte, then for tag 18 (ONDISK)
//	                              varatt_external: rawsize i32 | extinfo u32 |
//	                              valueid u32 | toastrelid u32
//	uint32 ......00               4-byte header, plain: length (v>>2)
//	uint32 ......10               4-byte header, compressed inline: then
//	                              tcinfo u32 (raw size: low 30 bits; method:
//	                              top 2 bits, 0 pglz, 1 lz4), compressed bytes
//
// # Values
//
// Value turns a stored datum into the Go value of walshadow's row contract
// (bool, int64, float64, json.Number, time.Time, []byte or PostgreSQL's
// text as string); types outside the tree come back pending for the
// shadow's bridge. MissingValue does the same from attmissingval's text.
//
// # Rows
//
// A Tx decodes one committed transaction's heap records (INSERT,
// MULTI_INSERT, UPDATE, HOT_UPDATE, DELETE, TRUNCATE, CONFIRM) into
// RowChanges: it resolves each record's relation in the descriptor log (at
// the record, or at the commit for catalog-changing trees and relations born
// in the transaction, fenced by ambiguity intervals), reassembles TOAST
// values from the transaction's chunks, holds speculative inserts until
// their CONFIRM, applies the replica identity (a key-changing UPDATE is a
// DELETE of the old key, then the UPDATE) and copies everything out of the
// record into per-Tx slabs (arena.go), so a row costs almost no allocations.
//
// # Row identity
//
// Every insert, update and delete carries the tuple the record names
// (RowChange.TID: block and line pointer) and the relfilenode of the heap
// (RowChange.Filenode): the inserted tuple, the new version of an update
// (OldTID is the version it replaced: xl_heap_update's old_offnum, on block
// reference 1 when the update left the page, else on the new tuple's
// block), the deleted tuple, and for the delete half of a key-changing
// update the old version. A table without a usable replica identity
// (REPLICA IDENTITY NOTHING, or DEFAULT without a primary key) logs no old
// key: its deletes have no Fields and its updates no key-change pair, and
// the filenode and TIDs alone say which row changed. The filenode is the
// storage generation: TRUNCATE, VACUUM FULL, CLUSTER and table rewrites
// change it, so TIDs are only comparable within one.
//
// # Failures
//
// A failure that concerns one relation does not fail the transaction: the
// relation gets an OpFail row (its LSN, descriptor and Err, which names the
// LSN, the relation and the column at fault) and its later changes in the
// transaction are dropped, since they would apply to an unknown state,
// while the other relations' changes go on. These are: a record inside an
// ambiguity interval (no provable shape), a TOAST value whose chunks are
// missing (or, under ToastFail, an unchanged one), inconsistent, too large
// or do not inflate, a TOAST chunk that does not read (it fails the row
// that points into its TOAST relation), a datum or missing value that does
// not decode, and a DELETE without the old key its replica identity
// promises. A multi-insert fails whole. Tx.FailRelation lets a caller that
// fails a row after decoding (a value the shadow's bridge cannot render) do
// the same. What threatens every table is still an error from Add: a
// record that does not parse, a record with no tuple data or with a
// prefix/suffix shared with the old tuple (the source is not at wal_level
// logical), and a relation the descriptor log cannot answer for at the
// commit.
//
// # On every core
//
// Pool decodes a batch of committed transactions on GOMAXPROCS workers: a
// Segment is one transaction's records within the batch (a transaction
// spanning batches has one per batch, with the same Tx), the segments are
// shared out in contiguous runs, and each worker decodes its run in order
// into its own arena. Transactions share nothing they write (the catalog
// answers from immutable snapshots), so the rows read back segment by
// segment are exactly one worker's, in commit order.
//
// Damage in the input (lengths past the end, bad headers) is an error naming
// the column and offset; nothing panics on any input (fuzz targets cover
// Deform, ParseVarlena, Render, Value, MissingValue and Tx.Add).
package decode
