package xact

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/walshadow/walshadow/internal/wal"
)

// FlagDeferCatalogDecode marks a record of a catalog-dirty transaction
// tree. The buffer does not interpret flags; they round-trip through spill.
const FlagDeferCatalogDecode uint8 = 1

// Defaults for zero Config fields.
const (
	DefaultMemoryBudget = 64 << 20
	DefaultSliceRecords = 1024
	DefaultSliceBytes   = 8 << 20
)

// Change is one buffered WAL record. Raw is the record's bytes (the Buffer
// copies it on Add; callers may reuse their slice).
type Change struct {
	LSN, Next wal.LSN
	XID       uint32 // the record's own xid (a subxact's xid for records in a subxact)
	Flags     uint8  // FlagDeferCatalogDecode; opaque to the buffer
	Raw       []byte
}

// Config sizes a Buffer.
type Config struct {
	// MemoryBudget is the bytes of buffered Raw held in memory across all
	// xids before the largest spills (committed trees whose Drain has not
	// started included; a started Drain's bytes are pinned and count
	// beside the budget). Default 64 MiB.
	MemoryBudget int64
	// SpillDir holds the spill files; New creates it and removes every
	// stale *.spill file in it. Required.
	SpillDir string
	// SliceRecords and SliceBytes bound one Drain.Next slice (defaults
	// 1024 records, 8 MiB); a slice always holds at least one record.
	SliceRecords int
	SliceBytes   int
}

// Stats is a snapshot of a Buffer's state.
type Stats struct {
	MemoryBytes   int64 // Raw bytes held in memory (open, prepared and draining)
	PinnedBytes   int64 // of MemoryBytes, those of started Drains (cannot spill)
	SpilledBytes  int64 // bytes of spill files on disk (headers and frames)
	SpillFiles    int   // spill files on disk
	OpenXIDs      int   // xids with buffered state, prepared ones included
	PreparedXIDs  int
	DrainingTrees int   // committed trees whose Drain is not closed yet
	Spills        int64 // spill events since New
}

// Buffer is the reorder buffer. See the package documentation.
type Buffer struct {
	mu       sync.Mutex
	cfg      Config
	txs      map[uint32]*txState
	drains   map[*Drain]struct{}
	pool     arenaPool
	aborting []*txState // Abort's scratch
	// drainPool recycles Drains' working memory.
	drainPool []*drainBufs

	memBytes int64
	// pinnedBytes are the in-memory bytes of started Drains: they cannot
	// spill, so the budget applies to memBytes-pinnedBytes (otherwise a
	// big tree being drained would make every Add spill a tiny xid).
	pinnedBytes  int64
	spilledBytes int64
	spillFiles   int
	spills       int64
	prepared     int

	// err is sticky: after a failed spill the buffer's state on disk is
	// uncertain, so it refuses work until Reset.
	err    error
	closed bool

	writer  *bufio.Writer
	scratch [frameHeaderSize + bodyFixedSize]byte
	hdr     []byte
}

var errClosed = errors.New("xact buffer is closed")

// New makes a Buffer, creating cfg.SpillDir and removing stale spill files.
func New(cfg Config) (*Buffer, error) {
	if cfg.SpillDir == "" {
		return nil, errors.New("xact buffer: SpillDir is required")
	}
	if cfg.MemoryBudget <= 0 {
		cfg.MemoryBudget = DefaultMemoryBudget
	}
	if cfg.SliceRecords <= 0 {
		cfg.SliceRecords = DefaultSliceRecords
	}
	if cfg.SliceBytes <= 0 {
		cfg.SliceBytes = DefaultSliceBytes
	}
	if err := os.MkdirAll(cfg.SpillDir, 0o700); err != nil {
		return nil, fmt.Errorf("creating spill dir %s: %w", cfg.SpillDir, err)
	}
	if err := removeSpillFiles(cfg.SpillDir); err != nil {
		return nil, err
	}
	b := &Buffer{
		cfg:    cfg,
		txs:    make(map[uint32]*txState),
		drains: make(map[*Drain]struct{}),
	}
	// Keep about a budget's worth of recycled chunks alive between
	// transactions: at least 4 MiB (a tiny budget still recycles), at
	// most 64 MiB.
	b.pool.maxFree = int(min(max(cfg.MemoryBudget, 4<<20), 64<<20))
	return b, nil
}

func (b *Buffer) usable() error {
	if b.closed {
		return errClosed
	}
	return b.err
}

// Add buffers c under c.XID (which must not be 0), copying c.Raw. Records
// of one xid must come in increasing LSN order. When memory passes the
// budget it spills; a spill failure is returned and sticks until Reset.
func (b *Buffer) Add(c Change) error {
	if c.XID == 0 {
		return fmt.Errorf("buffering the record at %s: xid 0 is not a transaction", c.LSN)
	}
	if len(c.Raw) > MaxRawLen {
		return fmt.Errorf("buffering the record at %s: %d bytes exceed the %d-byte limit", c.LSN, len(c.Raw), MaxRawLen)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.usable(); err != nil {
		return err
	}
	tx := b.txs[c.XID]
	if tx == nil {
		tx = b.pool.newTx(c.XID, c.LSN)
		b.txs[c.XID] = tx
	} else if tx.records == 0 {
		tx.firstLSN = c.LSN // a state made by Assign or Prepare
	} else if c.LSN <= tx.lastLSN {
		return fmt.Errorf("buffering the record at %s for xid %d: not after its previous record %s", c.LSN, c.XID, tx.lastLSN)
	}
	chunk, off := b.pool.appendRaw(tx, c.Raw)
	tx.entries = append(tx.entries, entry{lsn: c.LSN, next: c.Next, chunk: chunk, off: off, length: uint32(len(c.Raw)), flags: c.Flags})
	tx.lastLSN = c.LSN
	tx.records++
	tx.memBytes += int64(len(c.Raw))
	b.memBytes += int64(len(c.Raw))
	for b.memBytes-b.pinnedBytes > b.cfg.MemoryBudget {
		victim := b.largestInMemory()
		if victim == nil {
			break
		}
		if err := b.spill(victim); err != nil {
			b.err = err
			return err
		}
	}
	return nil
}

// largestInMemory picks the spill victim: the xid with the most in-memory
// bytes among open ones and those of committed trees whose Drain has not
// started (a queue of committed transactions must not escape the budget).
// A scan is fine: spills are rare next to Adds, and each frees the most
// memory there is to free.
func (b *Buffer) largestInMemory() *txState {
	var victim *txState
	consider := func(tx *txState) {
		if tx.memBytes > 0 && (victim == nil || tx.memBytes > victim.memBytes) {
			victim = tx
		}
	}
	for _, tx := range b.txs {
		consider(tx)
	}
	for d := range b.drains {
		if !d.started {
			for _, tx := range d.bufs.members {
				consider(tx)
			}
		}
	}
	return victim
}

// spill appends tx's in-memory records to its spill file and frees them.
func (b *Buffer) spill(tx *txState) error {
	fresh := tx.spillPath == ""
	path := tx.spillPath
	flags := os.O_WRONLY | os.O_APPEND
	if fresh {
		path = filepath.Join(b.cfg.SpillDir, spillFileName(tx.xid, tx.firstLSN))
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		return fmt.Errorf("opening spill file %s for xid %d: %w", path, tx.xid, err)
	}
	written, err := b.writeFrames(f, tx, fresh)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		if fresh {
			os.Remove(path)
		}
		return fmt.Errorf("spilling xid %d to %s: %w", tx.xid, path, err)
	}
	if fresh {
		tx.spillPath = path
		b.spillFiles++
	}
	tx.spillRecords += len(tx.entries)
	tx.spillSize += written
	b.spilledBytes += written
	b.spills++
	b.memBytes -= tx.memBytes
	b.pool.releaseMemory(tx)
	return nil
}

func (b *Buffer) writeFrames(f *os.File, tx *txState, header bool) (int64, error) {
	if b.writer == nil {
		b.writer = bufio.NewWriterSize(f, spillWriteBufSz)
	} else {
		b.writer.Reset(f)
	}
	w := b.writer
	var written int64
	if header {
		b.hdr = appendSpillHeader(b.hdr[:0], tx.xid)
		if _, err := w.Write(b.hdr); err != nil {
			return 0, err
		}
		written += spillHeaderSize
	}
	for i := range tx.entries {
		e := &tx.entries[i]
		n, err := writeFrame(w, &b.scratch, e.lsn, e.next, tx.xid, e.flags, tx.raw(e))
		if err != nil {
			return 0, err
		}
		written += int64(n)
	}
	if err := w.Flush(); err != nil {
		return 0, err
	}
	w.Reset(nil) // drop the file reference
	return written, nil
}

// stateFor returns xid's state, creating an empty one (no records) so that
// children and the prepared mark have somewhere to live.
func (b *Buffer) stateFor(xid uint32) *txState {
	tx := b.txs[xid]
	if tx == nil {
		tx = b.pool.newTx(xid, 0)
		b.txs[xid] = tx
	}
	return tx
}

// Assign records an XLOG_XACT_ASSIGNMENT: subxids belong to top. It is a
// hint; the commit or abort record's own list is authoritative, and the
// two are united.
func (b *Buffer) Assign(top uint32, subxids []uint32) {
	if top == 0 || len(subxids) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.usable() != nil {
		return
	}
	tx := b.stateFor(top)
	tx.children = append(tx.children, subxids...)
}

// Prepare marks top prepared (PREPARE TRANSACTION), with subxids as its
// members: the state stays until Commit or Abort of top (COMMIT PREPARED /
// ROLLBACK PREPARED).
func (b *Buffer) Prepare(top uint32, subxids []uint32) {
	if top == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.usable() != nil {
		return
	}
	tx := b.stateFor(top)
	tx.children = append(tx.children, subxids...)
	if !tx.prepared {
		tx.prepared = true
		b.prepared++
	}
}

// take removes xid's state from the map and appends it to members when it
// holds records; an empty state is released at once. Its children follow.
func (b *Buffer) take(xid uint32, members []*txState) []*txState {
	tx := b.txs[xid]
	if tx == nil {
		return members
	}
	delete(b.txs, xid)
	if tx.prepared {
		b.prepared--
	}
	children := tx.children
	tx.children = nil
	if tx.records > 0 {
		members = append(members, tx)
	} else {
		b.pool.release(tx)
	}
	for _, c := range children {
		members = b.take(c, members)
	}
	return members
}

// Commit ends top-level xid top, whose commit record lists subxids. It
// returns a Drain over the records of top, every listed subxid and every
// subxid announced for top by Assign or Prepare, merged by LSN. The state
// (memory, spill files) is released when the Drain is closed; until then
// it counts in Floor and Stats. Unknown xids contribute nothing: a commit
// of an xid with no records yields an empty Drain.
func (b *Buffer) Commit(top uint32, subxids []uint32) (*Drain, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.usable(); err != nil {
		return nil, fmt.Errorf("committing xid %d: %w", top, err)
	}
	bufs := b.getDrainBufs()
	bufs.members = b.take(top, bufs.members)
	for _, x := range subxids {
		bufs.members = b.take(x, bufs.members)
	}
	d := newDrain(b, bufs)
	if d.bufs != nil {
		b.drains[d] = struct{}{}
	} else {
		b.putDrainBufs(bufs)
	}
	return d, nil
}

// Abort discards xid, the listed subxids and the subxids announced for xid.
// It serves a top-level ABORT or ROLLBACK PREPARED and a subtransaction's
// own abort (ROLLBACK TO SAVEPOINT logs an abort whose xid is the subxid):
// only the named xids go.
func (b *Buffer) Abort(xid uint32, subxids []uint32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	members := b.take(xid, b.aborting[:0])
	for _, x := range subxids {
		members = b.take(x, members)
	}
	for _, tx := range members {
		b.discard(tx)
	}
	clear(members)
	b.aborting = members[:0]
}

// discard frees a state that left the map: its memory, its spill file.
func (b *Buffer) discard(tx *txState) {
	b.memBytes -= tx.memBytes
	if tx.spillPath != "" {
		// A failed remove leaves a stale file that New or Reset sweeps.
		os.Remove(tx.spillPath)
		b.spillFiles--
		b.spilledBytes -= tx.spillSize
	}
	b.pool.release(tx)
}

// Floor is the lowest first LSN of any buffered record's transaction (open,
// prepared, never ended, or committed with its Drain still open), or 0 when
// nothing is buffered: a resume point must not pass it.
func (b *Buffer) Floor() wal.LSN {
	b.mu.Lock()
	defer b.mu.Unlock()
	var floor wal.LSN
	lower := func(l wal.LSN) {
		if floor == 0 || l < floor {
			floor = l
		}
	}
	for _, tx := range b.txs {
		if tx.records > 0 {
			lower(tx.firstLSN)
		}
	}
	for d := range b.drains {
		lower(d.firstLSN)
	}
	return floor
}

// Stats reports the buffer's current state.
func (b *Buffer) Stats() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return Stats{
		MemoryBytes:   b.memBytes,
		PinnedBytes:   b.pinnedBytes,
		SpilledBytes:  b.spilledBytes,
		SpillFiles:    b.spillFiles,
		OpenXIDs:      len(b.txs),
		PreparedXIDs:  b.prepared,
		DrainingTrees: len(b.drains),
		Spills:        b.spills,
	}
}

// Reset drops everything buffered (a session restart re-reads WAL from the
// floor), open Drains included, and removes every spill file. It clears a
// sticky spill failure.
func (b *Buffer) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.resetLocked()
}

func (b *Buffer) resetLocked() error {
	for xid, tx := range b.txs {
		delete(b.txs, xid)
		b.pool.release(tx)
	}
	for d := range b.drains {
		// The Drain still reads its members' memory; it is not recycled.
		d.dead.Store(true)
		delete(b.drains, d)
	}
	b.memBytes, b.pinnedBytes, b.spilledBytes, b.spillFiles, b.prepared = 0, 0, 0, 0, 0
	b.err = nil
	// Recreate the dir too: a spill failure may have come from its removal.
	if err := os.MkdirAll(b.cfg.SpillDir, 0o700); err != nil {
		return fmt.Errorf("creating spill dir %s: %w", b.cfg.SpillDir, err)
	}
	return removeSpillFiles(b.cfg.SpillDir)
}

// Close drops everything like Reset; the Buffer cannot be used afterwards.
func (b *Buffer) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	err := b.resetLocked()
	b.closed = true
	return err
}

// closeDrain releases a closed Drain's members unless Reset already did
// (then the Drain's memory is left to the GC: nothing else references it).
func (b *Buffer) closeDrain(d *Drain, bufs *drainBufs) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d.bufs = nil // under the lock: Add reads unstarted Drains' members
	if _, ok := b.drains[d]; !ok {
		return
	}
	delete(b.drains, d)
	for _, tx := range bufs.members {
		if d.started {
			b.pinnedBytes -= tx.memBytes
		}
		b.discard(tx)
	}
	b.putDrainBufs(bufs)
}

// startDrain pins d's members in memory: from here on the Drain reads their
// entries and files without the lock, so they must not spill.
func (b *Buffer) startDrain(d *Drain) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.drains[d]; !ok {
		return errDrainReset
	}
	d.started = true
	for _, tx := range d.bufs.members {
		b.pinnedBytes += tx.memBytes
	}
	return nil
}

const (
	maxPooledDrainBufs = 8
	maxPooledSpillRaw  = 16 << 20
)

func (b *Buffer) getDrainBufs() *drainBufs {
	if n := len(b.drainPool); n > 0 {
		s := b.drainPool[n-1]
		b.drainPool = b.drainPool[:n-1]
		return s
	}
	return &drainBufs{}
}

func (b *Buffer) putDrainBufs(s *drainBufs) {
	if len(b.drainPool) >= maxPooledDrainBufs || cap(s.spillRaw) > maxPooledSpillRaw {
		return
	}
	s.clear()
	b.drainPool = append(b.drainPool, s)
}
