// Package wal decodes PostgreSQL physical WAL (15–18; 15 tested against a
// live server): pages, records, block references, full-page images and the
// typed bodies of the records walshadow acts on. It is pure: bytes in,
// structs out, no I/O except FileReader's reading of segment files.
//
// # The stream
//
// WAL is a byte stream addressed by LSN, cut into segments (16 MiB by
// default, 1 MiB–1 GiB) and 8 KiB pages. Every page starts with a header;
// the first page of a segment with the long form:
//
//	page:  +---------------------------------------------------------------+
//	       | XLogPageHeaderData (24 B)  [+ long fields (16 B) on seg start] |
//	       | magic u16 | info u16 | tli u32 | pageaddr u64 | rem_len u32 |  |
//	       +---------------------------------------------------------------+
//	       | tail of a record begun on an earlier page (rem_len bytes,      |
//	       |   when info has XLP_FIRST_IS_CONTRECORD)                       |
//	       | record | pad to 8 | record | pad | ... | head of a record ---->|
//	       +---------------------------------------------------------------+
//
// Records start MAXALIGNed (8). Only a record's 4-byte xl_tot_len is sure to
// be on its first page: the 24-byte header itself may straddle pages. After
// an XLOG_SWITCH record the rest of the segment is zeros, page headers
// included. A page flagged XLP_FIRST_IS_OVERWRITE_CONTRECORD abandons the
// partial record before it and starts with XLOG_OVERWRITE_CONTRECORD.
//
// # A record
//
//	+--------------------------------------------------------------+
//	| XLogRecord (24 B): tot_len u32 | xid u32 | prev u64 |        |
//	|                    info u8 | rmid u8 | pad | crc u32         |
//	+--------------------------------------------------------------+
//	| block headers (id 0..32, increasing): fork_flags u8 |        |
//	|   data_len u16 | [image header 5 B (+2 B hole length)] |     |
//	|   [RelFileNode 12 B unless SAME_REL] | block number u32      |
//	| [origin: 253 u16] [toplevel xid: 252 u32]                    |
//	| main data header: 255 u8 len | 254 u32 len                   |
//	+--------------------------------------------------------------+
//	| per block: image bytes, then data bytes | main data          |
//	+--------------------------------------------------------------+
//
// xl_crc is CRC-32C over bytes [24, tot_len) and then [0, 20); xl_prev is
// the LSN of the previous record. Both are verified for every record.
//
// # Errors
//
// Every error about the input is an *Error naming the LSN, with a kind that
// tells damage (KindCorrupt, KindCRC) from the ordinary end of what has been
// written (KindEndOfWAL: zeros where a record should start, or a recycled
// page) and from layouts this build does not handle (KindUnsupported).
// Nothing panics on any input: every decoder has a fuzz target.
//
// # Readers
//
// StreamReader takes chunks of any size, as they come off a replication
// connection, and returns records as soon as they are complete; FileReader
// feeds it segment files. Records alias reader memory until the next call;
// Record.Clone keeps one. DecodeBody turns a record into its typed body
// (HeapInsert, XactCommit, Checkpoint, ...).
package wal
