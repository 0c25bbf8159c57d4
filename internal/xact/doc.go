// Package xact is walshadow's reorder buffer: row-change WAL records arrive
// in WAL order tagged with their xid, are held per xid (top-level and
// subtransaction xids independently), and come out at the commit of their
// transaction tree merged by LSN, in bounded slices. Aborted work never
// comes out.
//
// # Memory and spill
//
// Raw record bytes are copied into per-xid arenas (chunks growing from 512 B
// to 1 MiB, recycled between transactions), so Add
// allocates nothing per record beyond amortized arena growth. When the
// in-memory bytes of all buffered records (open, prepared, and committed
// trees whose Drain has not started) exceed Config.MemoryBudget, the xid
// holding the most in-memory bytes is appended to its own spill file and
// its memory freed; later records of that xid accumulate in memory again
// and may spill again (appended to the same file). A Drain merges, per
// member xid, its spill file (read sequentially) followed by its in-memory
// tail, k-way by LSN. Once a Drain's first Next runs, its in-memory bytes
// are pinned until Close: memory stays within the budget plus the trees
// being drained (each was within the budget when it started).
//
// # Spill file format
//
// One file per spilled xid, named xid-<xid %010d>-<first LSN %016X>.spill in
// Config.SpillDir. All integers are little-endian:
//
//	file   := header frame*
//	header := magic "WSXS" | version u16 | xid u32 | reserved u16   (12 bytes)
//	frame  := length u32 | crc32c u32 (over the body) | body
//	body   := lsn u64 | next u64 | xid u32 | flags u8 | raw bytes
//
// length is the body's length (21 bytes of fixed fields plus the raw
// record); frames are in strictly increasing LSN order. Reading tells a
// file cut short (a header or frame ending early, or fewer frames than were
// written: "truncated spill file <path> at offset N") from damage (bad
// magic, version or xid, a CRC-32C mismatch, an impossible length, bytes
// past the last written frame: "corrupt spill file <path> at offset N").
// Both are errors: the Drain fails closed and the caller restarts the
// session, which re-reads WAL from the Floor. Spill files are scratch and
// never fsynced: New removes every *.spill file in SpillDir, so two Buffers
// must not share a SpillDir.
//
// # Concurrency
//
// Buffer methods are safe for concurrent use. A Drain belongs to one
// goroutine; it may run beside Buffer calls. After Reset or Close, an open
// Drain's Next fails and its Close only releases its file handles.
package xact
