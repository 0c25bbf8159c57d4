// Package desclog is the durable descriptor log: the append-only history of
// every user relation's shape, captured at catalog boundaries inside the
// publication hold, and the decode side's only catalog oracle. A record at
// LSN L decodes with DescriptorAt(rfn, L); no SQL, no locks, no cache.
//
// # Model
//
// A Batch is what one catalog boundary captured, keyed CapturedAt (the
// boundary's next_lsn); a boundary that changed nothing still appends a
// zero-entry stub so replay can tell "captured, nothing changed" from
// "never captured". A batch holds Entries and Ambiguity intervals:
//
//   - Present{Descriptor, ValidFrom}: the shape from ValidFrom on. ValidFrom
//     is biased early (the new filenode's SMGR_CREATE, else the oid's first
//     pg_class touch, else the transaction tree's first catalog touch) because
//     a descriptor reads older tuples of a compatible shape; CompatibleReader
//     is the proof.
//   - Retired: the relation's filenode rotated away (rewrite, TRUNCATE, SET
//     TABLESPACE); closes the old rfn's chain.
//   - Dropped: tombstone for a relation absent from a capture that covered it.
//   - Ambiguity [From, Through): no single descriptor provably reads the rows
//     written inside; readers fail closed. Keyed by rfn, by oid, or (the
//     conservative fallback) by the whole database.
//
// Entries form per-key version chains, keyed by the full RelFileNode
// (tablespace resolved, as WAL names it) and by oid (the log is bound to one
// database). Readers load an immutable index snapshot through an
// atomic.Pointer; the writer publishes a new one only after the batch is
// durable, so every answer a reader gets is already on disk.
//
// # Files
//
// Two files under the log's directory: desc_log.ckpt, rewritten atomically
// (tmp, fsync, rename, directory fsync) by Seed and Compact, and
// desc_log.tail, to which Append adds one frame per boundary and fdatasyncs
// it before the batch is published. Both start with the same header; all
// integers are little-endian.
//
//	header (40 bytes)
//	+----------+---------+------+-----+----------+-----------+----------+--------+----------+--------+
//	| magic    | version | kind | pad | pg major | system id | timeline | db oid | seg size | crc32c |
//	| "WSDESCLG"| u16 = 1 | u8   | u8  | u32      | u64       | u32      | u32    | u32      | u32    |
//	+----------+---------+------+-----+----------+-----------+----------+--------+----------+--------+
//	  kind: 1 ckpt, 2 tail; crc32c (Castagnoli) covers the 36 bytes before it.
//	  A header naming another source (any identity field differs from the
//	  caller's) is a fatal ErrIdentityMismatch naming both values.
//
//	frame
//	+------------+---------------+---------------------------+
//	| len u32    | crc32c u32    | body (len bytes)          |
//	+------------+---------------+---------------------------+
//	  crc32c covers the body; 1 <= len <= MaxFrameBody.
//
//	desc_log.ckpt = header(kind 1) META-frame BATCH-frame*
//	desc_log.tail = header(kind 2) BATCH-frame*
//
//	body = [u8 body version = 1][u8 type][payload]
//	  type 1 META : covered_through u64 | floor u64 | through u64
//	  type 2 BATCH: captured_at u64 | drain_xid u32 | uvarint n | entry*n
//	                | uvarint m | ambiguity*m
//	  entry       : u8 kind | u8 source | valid_from u64 | (Present) descriptor
//	                                                     | (else) oid u32 | rfn
//	  descriptor  : oid u32 | db u32 | rfn | nsoid u32 | str nsname | str relname
//	                | u8 relkind | u8 persistence | u8 replident | toast u32
//	                | identity index u32 | uvarint k | i16*k key attnums
//	                | uvarint c | column*c
//	  column      : num i16 | str name | typid u32 | typmod i32 | str typename
//	                | u8 typtype | base u32 | elem u32 | attlen i16 | u8 align
//	                | u8 storage | u8 flags | (flags&16) str missing
//	                  flags: 1 notnull, 2 dropped, 4 byval, 8 hasmissing,
//	                         16 missing value is non-NULL
//	  ambiguity   : u8 scope | u8 reason | rfn | db u32 | oid u32 | from u64
//	                | through u64
//	  rfn         : spc u32 | db u32 | relnumber u32
//	  str         : uvarint len | bytes
//
// META.through is the CapturedAt of the last batch the checkpoint contains:
// tail frames at or below it are leftovers of a compaction interrupted
// between the checkpoint rename and the tail reset, and are skipped.
// META.covered_through is the seed's horizon; META.floor the GC floor the
// checkpoint was compacted at. Boundaries at or below either are baked in.
//
// # Damage
//
// The checkpoint is written atomically, so any damage to it is ErrCorrupt.
// In the tail only the last append can be torn: a final frame that is short,
// or whose crc fails with nothing after it, or trailing zeros, is cut off
// and the truncation fdatasynced before the log opens. A crc failure with
// data after it, an impossible length, or a body that does not decode is
// ErrCorrupt naming the file and offset: fdatasynced batches were lost and
// only a re-bootstrap (deleting both files) can rebuild coverage. A length
// flipped to point past the end of the file reads as a torn write; the
// replay check (PlanBoundary refusing a missing batch the shadow has
// already replayed past) is the second line of defence.
package desclog
