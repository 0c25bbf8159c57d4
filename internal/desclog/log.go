package desclog

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/walshadow/walshadow/internal/fsutil"
	"github.com/walshadow/walshadow/internal/wal"
)

// Log is one database's descriptor log. Lookups are wait-free (they read
// the published snapshot); Seed, Append and Compact serialise on a writer
// mutex. After an I/O failure while writing the log refuses further writes:
// what reached the disk is unknown until a reopen repairs it.
type Log struct {
	dir string
	id  Identity

	snap atomic.Pointer[index]

	mu       sync.Mutex // the writer
	tail     *os.File
	tailSize int64
	failed   error

	stats stats
}

// Open loads the log under dir (created if missing) for the given source
// identity. A log without a checkpoint is empty and must be Seeded. A torn
// final tail frame is truncated durably; any other damage is ErrCorrupt, a
// log of another source ErrIdentityMismatch.
func Open(dir string, id Identity) (*Log, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("descriptor log: %w", err)
	}
	l := &Log{dir: dir, id: id}
	ix, err := l.load()
	if err != nil {
		return nil, err
	}
	tail, err := os.OpenFile(l.path(TailFile), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nil, fmt.Errorf("descriptor log: opening the tail: %w", err)
	}
	st, err := tail.Stat()
	if err != nil {
		tail.Close()
		return nil, fmt.Errorf("descriptor log: %w", err)
	}
	l.tail, l.tailSize = tail, st.Size()
	l.publish(ix)
	return l, nil
}

func (l *Log) path(name string) string { return filepath.Join(l.dir, name) }

// load reads the checkpoint and the tail and builds the index.
func (l *Log) load() (*index, error) {
	for _, name := range []string{CheckpointFile, TailFile} {
		// Leftovers of an interrupted atomic write: the rename never happened.
		if err := os.Remove(l.path(name + ".tmp")); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("descriptor log: %w", err)
		}
	}
	var (
		m       meta
		seeded  bool
		batches []*Batch
	)
	ckptPath := l.path(CheckpointFile)
	data, err := os.ReadFile(ckptPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("descriptor log: %w", err)
	default:
		seeded = true
		if m, batches, err = l.readCheckpoint(ckptPath, data); err != nil {
			return nil, err
		}
	}
	tailBatches, err := l.readTail(seeded, m.Through)
	if err != nil {
		return nil, err
	}
	ix, err := buildIndex(l.id.DbOid, m, seeded, batches, tailBatches)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, l.dir, err)
	}
	return ix, nil
}

func (l *Log) readCheckpoint(path string, data []byte) (meta, []*Batch, error) {
	if err := checkHeader(path, data, l.id, kindCkpt); err != nil {
		return meta{}, nil, err
	}
	frames, _, err := scanFrames(path, data, true)
	if err != nil {
		return meta{}, nil, err
	}
	if len(frames) == 0 {
		return meta{}, nil, fmt.Errorf("%w: %s: no meta frame", ErrCorrupt, path)
	}
	m, err := decodeMeta(frames[0].body)
	if err != nil {
		return meta{}, nil, fmt.Errorf("%w: %s at offset %d: %v", ErrCorrupt, path, frames[0].off, err)
	}
	batches := make([]*Batch, 0, len(frames)-1)
	for _, f := range frames[1:] {
		b, err := decodeBatch(f.body)
		if err != nil {
			return meta{}, nil, fmt.Errorf("%w: %s at offset %d: %v", ErrCorrupt, path, f.off, err)
		}
		batches = append(batches, b)
	}
	if n := len(batches); n > 0 && batches[n-1].CapturedAt > m.Through {
		return meta{}, nil, fmt.Errorf("%w: %s: meta says through %s, last batch is at %s", ErrCorrupt, path, m.Through, batches[n-1].CapturedAt)
	}
	return m, batches, nil
}

// readTail reads the tail, repairing a torn end, and returns the batches
// after the checkpoint's. A missing tail is created empty.
func (l *Log) readTail(seeded bool, through wal.LSN) ([]*Batch, error) {
	path := l.path(TailFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		// Seed writes the checkpoint first, so a crash can leave it alone.
		if err := fsutil.WriteFileAtomic(path, encodeHeader(l.id, kindTail), 0o600, nil); err != nil {
			return nil, fmt.Errorf("descriptor log: creating the tail: %w", err)
		}
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("descriptor log: %w", err)
	}
	if err := checkHeader(path, data, l.id, kindTail); err != nil {
		return nil, err
	}
	frames, tornAt, err := scanFrames(path, data, false)
	if err != nil {
		return nil, err
	}
	if tornAt >= 0 {
		if err := truncateDurably(path, tornAt); err != nil {
			return nil, fmt.Errorf("descriptor log: truncating the torn end of %s at offset %d: %w", path, tornAt, err)
		}
		l.stats.tornRepairs.Add(1)
	}
	if len(frames) > 0 && !seeded {
		return nil, fmt.Errorf("%w: %s holds %d batches but %s is missing", ErrCorrupt, path, len(frames), CheckpointFile)
	}
	var out []*Batch
	last := through
	for _, f := range frames {
		b, err := decodeBatch(f.body)
		if err != nil {
			return nil, fmt.Errorf("%w: %s at offset %d: %v", ErrCorrupt, path, f.off, err)
		}
		if b.CapturedAt <= through {
			continue // already in the checkpoint: a compaction stopped before resetting the tail
		}
		if b.CapturedAt <= last {
			return nil, fmt.Errorf("%w: %s at offset %d: batch at %s does not follow %s", ErrCorrupt, path, f.off, b.CapturedAt, last)
		}
		last = b.CapturedAt
		out = append(out, b)
	}
	return out, nil
}

func (l *Log) publish(ix *index) {
	l.snap.Store(ix)
	l.stats.batches.Store(int64(len(ix.batches)))
	l.stats.entries.Store(int64(ix.entries))
	l.stats.superseded.Store(int64(ix.superseded))
	l.stats.tailBytes.Store(l.tailSize)
}

// Close releases the tail file. Lookups keep working on the last snapshot.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tail == nil {
		return nil
	}
	err := l.tail.Close()
	l.tail = nil
	if l.failed == nil {
		l.failed = errors.New("descriptor log closed")
	}
	return err
}

// Dir is the directory holding the log's files.
func (l *Log) Dir() string { return l.dir }

// Identity is the source identity the log is bound to.
func (l *Log) Identity() Identity { return l.id }

// Seeded reports whether the log has a checkpoint (seed) yet.
func (l *Log) Seeded() bool { return l.snap.Load().seeded }

// CoveredThrough is the seed's coverage horizon.
func (l *Log) CoveredThrough() wal.LSN { return l.snap.Load().coveredThrough }

// Horizon is the LSN at or below which boundaries are baked into the
// checkpoint (the seed horizon or the GC floor, whichever is later).
func (l *Log) Horizon() wal.LSN { return l.snap.Load().horizon() }

// LastCapturedAt is the CapturedAt of the newest batch (0 when none).
func (l *Log) LastCapturedAt() wal.LSN { return l.snap.Load().lastCapturedAt() }

// Seed writes the first checkpoint of an empty log: one batch at
// coveredThrough with every given relation of a captured kind (r, p, m, t;
// oid >= 16384) Present from validFrom (the aligned start of the WAL
// re-read). Lookups at or below the horizon for relations outside the seed
// answer NotCovered.
func (l *Log) Seed(coveredThrough, validFrom wal.LSN, descs []Descriptor) (*Batch, error) {
	if coveredThrough == 0 || validFrom > coveredThrough {
		return nil, fmt.Errorf("descriptor log seed: horizon %s with entries valid from %s", coveredThrough, validFrom)
	}
	b := &Batch{CapturedAt: coveredThrough}
	for i := range descs {
		d := &descs[i]
		if d.Oid < firstNormalObjectID || !capturedKind(d.Kind) {
			continue
		}
		if err := validateDescriptor(d, l.id.DbOid); err != nil {
			return nil, fmt.Errorf("descriptor log seed: %w", err)
		}
		b.Entries = append(b.Entries, Entry{Kind: EntryPresent, Source: SourceSeed, Oid: d.Oid, Rfn: d.Rfn, ValidFrom: validFrom, Desc: cloneDescriptor(d)})
	}
	slices.SortFunc(b.Entries, func(x, y Entry) int { return cmpUint32(x.Oid, y.Oid) })
	for i := 1; i < len(b.Entries); i++ {
		if b.Entries[i].Oid == b.Entries[i-1].Oid {
			return nil, fmt.Errorf("descriptor log seed: relation %d listed twice", b.Entries[i].Oid)
		}
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writable(); err != nil {
		return nil, err
	}
	if cur := l.snap.Load(); cur.seeded {
		return nil, fmt.Errorf("descriptor log already seeded (horizon %s)", cur.coveredThrough)
	}
	m := meta{CoveredThrough: coveredThrough, Through: coveredThrough}
	ix, err := buildIndex(l.id.DbOid, m, true, []*Batch{b}, nil)
	if err != nil {
		return nil, fmt.Errorf("descriptor log seed: %w", err)
	}
	if err := l.writeCheckpoint(m, []*Batch{b}); err != nil {
		return nil, err
	}
	l.publish(ix)
	l.stats.seeded.Add(uint64(len(b.Entries)))
	return b, nil
}

// writeCheckpoint replaces the checkpoint and resets the tail to empty,
// each atomically. The checkpoint goes first: its meta says which tail
// batches it already holds, so a crash between the two is harmless.
func (l *Log) writeCheckpoint(m meta, batches []*Batch) error {
	buf := encodeHeader(l.id, kindCkpt)
	buf = appendFrame(buf, encodeMeta(m))
	var body []byte
	for _, b := range batches {
		body = appendBatch(body[:0], b)
		if len(body) > MaxFrameBody {
			return fmt.Errorf("descriptor log: batch at %s encodes to %d bytes, over the %d-byte frame cap", b.CapturedAt, len(body), MaxFrameBody)
		}
		buf = appendFrame(buf, body)
	}
	if err := fsutil.WriteFileAtomic(l.path(CheckpointFile), buf, 0o600, nil); err != nil {
		l.failed = fmt.Errorf("descriptor log: writing %s: %w", CheckpointFile, err)
		return l.failed
	}
	if l.tail != nil {
		l.tail.Close()
		l.tail = nil
	}
	tailPath := l.path(TailFile)
	if err := fsutil.WriteFileAtomic(tailPath, encodeHeader(l.id, kindTail), 0o600, nil); err != nil {
		l.failed = fmt.Errorf("descriptor log: resetting %s: %w", TailFile, err)
		return l.failed
	}
	tail, err := os.OpenFile(tailPath, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		l.failed = fmt.Errorf("descriptor log: reopening %s: %w", TailFile, err)
		return l.failed
	}
	l.tail, l.tailSize = tail, headerLen
	return nil
}

func (l *Log) writable() error {
	if l.failed != nil {
		return l.failed
	}
	if l.tail == nil {
		return errors.New("descriptor log closed")
	}
	return nil
}

// Append makes a batch durable (one tail frame, fdatasynced) and then
// publishes it to readers. The batch must follow the last one
// (CapturedAt strictly greater), lie above the horizon, and keep every
// chain ordered; the log owns it afterwards.
func (l *Log) Append(b *Batch) error {
	start := time.Now()
	body := appendBatch(nil, b)
	if len(body) > MaxFrameBody {
		return fmt.Errorf("descriptor log: batch at %s encodes to %d bytes, over the %d-byte frame cap", b.CapturedAt, len(body), MaxFrameBody)
	}
	frame := appendFrame(make([]byte, 0, frameHeader+len(body)), body)

	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	cur := l.snap.Load()
	if !cur.seeded {
		return fmt.Errorf("descriptor log: append at %s before the log was seeded", b.CapturedAt)
	}
	if h := cur.horizon(); b.CapturedAt <= h {
		return fmt.Errorf("descriptor log: batch at %s is at or below the horizon %s", b.CapturedAt, h)
	}
	bd := cur.builder()
	if err := bd.apply(b); err != nil {
		return fmt.Errorf("descriptor log: %w", err)
	}
	if _, err := l.tail.Write(frame); err != nil {
		l.failed = fmt.Errorf("descriptor log: writing the batch at %s to %s: %w", b.CapturedAt, TailFile, err)
		return l.failed
	}
	if err := fdatasync(l.tail); err != nil {
		l.failed = fmt.Errorf("descriptor log: syncing the batch at %s to %s: %w", b.CapturedAt, TailFile, err)
		return l.failed
	}
	l.tailSize += int64(len(frame))
	l.publish(bd.ix)
	l.stats.appends.Add(1)
	l.stats.appendNanos.Add(uint64(time.Since(start)))
	return nil
}

// DescriptorAt answers what shape the relation stored in rfn had at lsn:
// Ambiguous when lsn lies in an interval fencing the rfn (or the whole
// database), else the rfn chain's entry in force at lsn, NotCovered when
// there is none, and ForeignDb for another database's filenode (shared
// catalogs, database 0, pass the check and find nothing).
func (l *Log) DescriptorAt(rfn wal.RelFileNode, lsn wal.LSN) Lookup {
	return l.DescriptorAtAsOf(rfn, lsn, allCaptures)
}

// DescriptorAtAsOf is DescriptorAt as the log stood once every boundary
// captured at or before horizon was applied: later captures (and the
// intervals they fenced) are not seen. A transaction decoded with horizon =
// its commit's next LSN sees exactly what an in-order capture would have
// shown it, however far capture has run ahead.
func (l *Log) DescriptorAtAsOf(rfn wal.RelFileNode, lsn, horizon wal.LSN) Lookup {
	r := l.snap.Load().descriptorAt(rfn, lsn, horizon)
	l.stats.lookups[r.Result].Add(1)
	return r
}

// DescriptorByOidInDBAt is the oid-keyed lookup for callers that name a
// relation by (database, oid), such as TRUNCATE apply. Another database
// than the log's answers ForeignDb before any chain is read.
func (l *Log) DescriptorByOidInDBAt(db, oid uint32, lsn wal.LSN) Lookup {
	return l.DescriptorByOidInDBAtAsOf(db, oid, lsn, allCaptures)
}

// DescriptorByOidInDBAtAsOf is DescriptorByOidInDBAt limited to captures at
// or before horizon (see DescriptorAtAsOf).
func (l *Log) DescriptorByOidInDBAtAsOf(db, oid uint32, lsn, horizon wal.LSN) Lookup {
	var r Lookup
	if ix := l.snap.Load(); db != ix.db {
		r = Lookup{Result: ForeignDb}
	} else {
		r = ix.descriptorByOidAt(oid, lsn, horizon)
	}
	l.stats.lookups[r.Result].Add(1)
	return r
}

// PresentBefore returns the relation's last Present shape valid from before
// lsn, looking through tombstones: the historical predecessor of a dropped
// or changed relation.
func (l *Log) PresentBefore(oid uint32, lsn wal.LSN) (*Descriptor, wal.LSN, bool) {
	c, _ := l.snap.Load().byOid.get(oidHash(oid), oid)
	ce, ok := c.presentBefore(lsn)
	return ce.desc, ce.validFrom, ok
}

// PresentBeforeRfn is PresentBefore on the rfn chain: the last shape stored
// in a filenode before lsn, for callers whose filenode the same commit
// retired.
func (l *Log) PresentBeforeRfn(rfn wal.RelFileNode, lsn wal.LSN) (*Descriptor, wal.LSN, bool) {
	c, _ := l.snap.Load().byRfn.get(rfnHash(rfn), rfn)
	ce, ok := c.presentBefore(lsn)
	return ce.desc, ce.validFrom, ok
}

// AmbiguitiesIntersecting lists the intervals fencing rfn, oid or the whole
// database that overlap [from, to), in that order (nil when none). Stash
// resolution asks past every interval, so it checks the fence this way.
func (l *Log) AmbiguitiesIntersecting(rfn wal.RelFileNode, oid uint32, from, to wal.LSN) []Ambiguity {
	return l.snap.Load().ambiguitiesIntersecting(rfn, oid, from, to, allCaptures)
}

// AmbiguitiesIntersectingAsOf is AmbiguitiesIntersecting limited to the
// intervals captured at or before horizon.
func (l *Log) AmbiguitiesIntersectingAsOf(rfn wal.RelFileNode, oid uint32, from, to, horizon wal.LSN) []Ambiguity {
	return l.snap.Load().ambiguitiesIntersecting(rfn, oid, from, to, horizon)
}

// AsOf is the log's lookups as of horizon: a decode.Catalog for a
// transaction committed at horizon (its commit's next LSN).
func (l *Log) AsOf(horizon wal.LSN) AsOfView { return AsOfView{l: l, horizon: horizon} }

// AsOfView answers lookups as the log stood at a capture horizon.
type AsOfView struct {
	l       *Log
	horizon wal.LSN
}

func (v AsOfView) DescriptorAt(rfn wal.RelFileNode, lsn wal.LSN) Lookup {
	return v.l.DescriptorAtAsOf(rfn, lsn, v.horizon)
}

func (v AsOfView) DescriptorByOidInDBAt(db, oid uint32, lsn wal.LSN) Lookup {
	return v.l.DescriptorByOidInDBAtAsOf(db, oid, lsn, v.horizon)
}

func (v AsOfView) AmbiguitiesIntersecting(rfn wal.RelFileNode, oid uint32, from, to wal.LSN) []Ambiguity {
	return v.l.AmbiguitiesIntersectingAsOf(rfn, oid, from, to, v.horizon)
}

// BatchAt returns the stored batch captured at a boundary's next_lsn.
// The batch is shared: do not modify it.
func (l *Log) BatchAt(nextLSN wal.LSN) (*Batch, bool) { return l.snap.Load().batchAt(nextLSN) }

// ActivePresent lists, in oid order, the current shape of every relation
// whose latest entry is Present (toast relations excluded): the set a boot
// re-announces with idempotent Added events.
func (l *Log) ActivePresent() []*Descriptor {
	ix := l.snap.Load()
	var out []*Descriptor
	for _, oid := range ix.presentOids() {
		if h, _ := ix.oidHead(oid); h.desc.Kind != 't' {
			out = append(out, h.desc)
		}
	}
	return out
}

func cmpUint32(a, b uint32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
