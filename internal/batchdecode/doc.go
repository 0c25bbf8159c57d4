// Package batchdecode owns the decoding of one session batch: the WAL
// records of committed transactions, in commit order, as the
// pg_physical_wal input hands them out, turned into row changes and the
// schema events placed before them. It knows nothing of Benthos: the
// walshadow_decode processor turns a Batch into messages.
//
// A batch is decoded in three steps:
//
//  1. the records are cut into one segment per transaction; a
//     transaction begins at its commit record, where a catalog boundary
//     riding it is captured first (which may wait for the shadow) and its
//     schema events are placed before the transaction's rows; a
//     transaction still open when the batch ends goes on in the next;
//  2. the segments decode on a decode.Pool, over every core, each worker
//     with its own arena;
//  3. the rows are read back in commit order, the values walshadow does
//     not decode itself are rendered by the shadow's bridge, and a row
//     the bridge cannot render fails its table from its record on, in its
//     transaction only (the table's later rows of that transaction are
//     dropped, there and in the batches still to come).
//
// The Decoder keeps the transaction in progress between batches, so
// batches must come in order, one at a time; Reset forgets it (a new run
// of the session re-reads it from its resume point).
package batchdecode
