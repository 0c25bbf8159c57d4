package session

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/walshadow/walshadow/internal/filter"
	"github.com/walshadow/walshadow/internal/wal"
)

// Decision is what the pump needs to know about one record: whether the
// shadow gets a same-length XLOG_NOOP instead of it, whether the processor
// gets it, and whether it is a catalog boundary that must hold publication.
type Decision struct {
	Noop               bool
	ToDecoder          bool
	DeferCatalogDecode bool
	Boundary           *Boundary
}

// Boundary is a catalog-changing commit: nothing past NextLSN reaches the
// shadow, the archive or the processor until the shadow has replayed
// exactly through NextLSN and the boundary is released.
type Boundary struct {
	NextLSN           wal.LSN  `json:"next_lsn"`
	DrainXID          uint32   `json:"drain_xid"`
	AffectedOids      []uint32 `json:"affected_oids"`
	FirstCatalogTouch wal.LSN  `json:"first_catalog_touch"`
	CaptureAll        bool     `json:"capture_all"`
}

// Decider classifies records (the filter).
type Decider interface {
	Decide(rec *wal.Record) (Decision, error)
	// NoopRecord returns the same-length XLOG_NOOP that replaces rec for
	// the shadow, contiguous (page headers not included).
	NoopRecord(dst []byte, rec *wal.Record) ([]byte, error)
}

// ShadowFeed is the walsender side: it publishes filtered wire bytes to the
// shadow's walreceiver and reports how far the shadow has applied them.
type ShadowFeed interface {
	// Publish hands over wire bytes, which the feed may keep: the pump
	// never changes them, and reuses their memory only below MemoryFloor.
	Publish(start wal.LSN, wire []byte)
	WaitApply(ctx context.Context, lsn wal.LSN) error
	// MemoryFloor is the lowest LSN whose published bytes the feed may
	// still read from the memory Publish was given.
	MemoryFloor() wal.LSN
}

// SegmentSink receives filtered segments once every record ending inside
// them is decided (the archive the shadow's restore_command reads).
type SegmentSink interface {
	WriteSegment(start wal.LSN, data []byte) error
}

// Item is one record for the processor: a private copy of the original
// (unfiltered) record and its decision.
type Item struct {
	Record   *wal.Record
	Decision Decision
	// Tx is the committed transaction the item belongs to (output batches
	// only: Session.Next emits whole transactions in commit order); Last
	// flags its last item.
	Tx   *TxInfo
	Last bool
}

// Batch is a run of records. The pump's batches are in WAL order, a
// boundary (when present) being the last item's. The session's output
// batches (Session.Next) hold committed transactions in commit order, each
// the commit record first and then its changes; a boundary, when present, is
// the commit item's. Release must be called once the processor has captured
// what the boundary needs (the hold ends then).
type Batch struct {
	Items    []Item
	First    wal.LSN // LSN of the first item
	Through  wal.LSN // every record before this LSN has been decided
	Boundary *Boundary

	// Seq numbers the session's output batches from 1 within a run (Epoch);
	// both are 0 on pump batches.
	Seq, Epoch uint64

	release     chan struct{}
	captured    chan struct{} // pump batches with a boundary: closed once captured
	holdRelease func()        // output batches: releases the pump batch's hold
	releaseOnce sync.Once
	txFloor     wal.LSN // lowest FirstLSN of the transactions with items here
	delivers    wal.LSN // commit LSN of the last transaction completed here
	acked       bool
	size        int // record bytes of an output batch
}

// Release ends a boundary's hold. It is safe to call more than once, from
// any goroutine, and on batches without a boundary.
func (b *Batch) Release() {
	if b.release != nil || b.holdRelease != nil {
		b.releaseOnce.Do(func() {
			if b.release != nil {
				close(b.release)
			}
			if b.holdRelease != nil {
				b.holdRelease()
			}
		})
	}
}

// PumpConfig tunes the record loop.
type PumpConfig struct {
	SegmentSize uint32
	// MaxBatchRecords seals a batch at this many records (default 1024).
	MaxBatchRecords int
	// MaxBatchAge seals a batch this long after its first record (default
	// 200 ms): under a steady load the WAL never pauses for the idle
	// hand-over, and a batch would wait to fill.
	MaxBatchAge time.Duration
	// HoldTimeout bounds each boundary hold once its batch is handed over:
	// the shadow must apply the boundary, the capture run and the batch be
	// released within it. Handing the batch to a slow processor does not
	// count.
	HoldTimeout time.Duration
	// Capture, when set, runs inside each hold once the shadow has applied
	// the boundary exactly: the session captures the changed shapes into the
	// descriptor log there, whatever the processor is doing.
	Capture func(ctx context.Context, b *Batch) error
	// StartPrefix, when the start segment opens with the continuation of a
	// record begun in the previous segment, is the filtered copy of the
	// segment's bytes before its first record (page headers included), from
	// the shadow's pg_wal or the archive. The pump cannot decode that
	// continuation, so without it the source's raw bytes would overwrite the
	// shadow's filtered ones and tear the record (its first part a NOOP, its
	// second the original).
	StartPrefix []byte
	// KeepStartContinuation: the bytes fed before the first record are
	// already the shadow's own (filterShadowWAL rewrites the shadow's pg_wal
	// in place), so they stay as fed and StartPrefix is not needed. Those
	// bytes were either published filtered by an earlier run or precede
	// anything the shadow replays (the bootstrap's first segment).
	KeepStartContinuation bool
	// SelfRelease makes the pump release a boundary itself once the shadow
	// has applied it (and Capture has run); otherwise Release must be called
	// (tests acting as the processor).
	SelfRelease bool
}

// Pump is the record loop of a session: WAL bytes in; filtered wire bytes to
// the shadow and the archive; original records out in batches, a boundary
// always ending its batch and holding publication until released.
type Pump struct {
	cfg PumpConfig
	// batchBorn: when the open batch got its first record (MaxBatchAge).
	batchBorn time.Time
	reader    *wal.StreamReader
	wire      *wireBuffer
	decider   Decider
	shadow    ShadowFeed
	sink      SegmentSink
	out       chan<- *Batch

	start     wal.LSN // where the pump began (a segment start)
	decided   wal.LSN // every record before this LSN is decided
	published wal.LSN // wire bytes before this LSN went to the shadow
	batch     *Batch
	// records holds the batches' record copies: a batch lives until the
	// session's reorderer has consumed it, which copies what it keeps.
	records wal.Slab
	noopBuf []byte
	stats   PumpStats

	// snap is what other goroutines read (Stats, Decided, NextByte): the
	// pump runs on its own, reading the spool, while the session's receive
	// loop reports positions. Refreshed after each Feed and before the pump
	// blocks; a stale value is lower, never ahead.
	snapMu sync.Mutex
	snap   pumpSnap
}

type pumpSnap struct {
	stats         PumpStats
	decided, next wal.LSN
}

// publishSnap refreshes what Stats, Decided and NextByte return.
func (p *Pump) publishSnap() {
	p.snapMu.Lock()
	p.snap = pumpSnap{stats: p.stats, decided: p.decided, next: p.wire.End()}
	p.snapMu.Unlock()
}

// PumpStats are the pump's counters, read by the session's metrics.
type PumpStats struct {
	Records, NoopRecords, DecoderRecords int64
	Holds                                int64
	HoldTime                             time.Duration
	Received                             wal.LSN
}

// NewPump starts a pump whose first byte is at start (a segment boundary).
func NewPump(start wal.LSN, cfg PumpConfig, d Decider, shadow ShadowFeed, sink SegmentSink, out chan<- *Batch) (*Pump, error) {
	if cfg.MaxBatchRecords <= 0 {
		cfg.MaxBatchRecords = 1024
	}
	if cfg.HoldTimeout <= 0 {
		cfg.HoldTimeout = 30 * time.Second
	}
	if cfg.MaxBatchAge <= 0 {
		cfg.MaxBatchAge = 200 * time.Millisecond
	}
	r, err := wal.NewStreamReader(start, wal.StreamOptions{SegmentSize: cfg.SegmentSize})
	if err != nil {
		return nil, err
	}
	w, err := newWireBuffer(start, cfg.SegmentSize)
	if err != nil {
		return nil, err
	}
	w.floor = shadow.MemoryFloor
	pp := &Pump{cfg: cfg, reader: r, wire: w, decider: d, shadow: shadow, sink: sink, out: out,
		start: start, decided: start, published: start}
	pp.publishSnap()
	return pp, nil
}

// Stats returns a copy of the counters (any goroutine).
func (p *Pump) Stats() PumpStats {
	p.snapMu.Lock()
	defer p.snapMu.Unlock()
	return p.snap.stats
}

// NextByte is the LSN the next chunk fed must start at (any goroutine).
func (p *Pump) NextByte() wal.LSN {
	p.snapMu.Lock()
	defer p.snapMu.Unlock()
	return p.snap.next
}

// Decided is the LSN through which every record has been classified (any
// goroutine).
func (p *Pump) Decided() wal.LSN {
	p.snapMu.Lock()
	defer p.snapMu.Unlock()
	return p.snap.decided
}

// errSourceWAL wraps a failure to read the fed bytes as WAL.
var errSourceWAL = errors.New("reading source WAL")

// ErrHoldTimeout is wrapped by the error a hold that outlives HoldTimeout returns.
var ErrHoldTimeout = errors.New("catalog boundary hold timed out")

// Feed takes the next bytes of the stream and runs every record they
// complete through the loop. It returns only after any boundary among them
// has been applied by the shadow and released.
func (p *Pump) Feed(ctx context.Context, chunk []byte) error {
	p.wire.Append(chunk)
	p.reader.Push(chunk)
	return p.fed(ctx)
}

// Buffer is room for up to max bytes at NextByte, never past its segment's
// end: a caller reading WAL from a file reads it straight into the pump's
// own buffer, then calls FeedBuffered (Feed copies).
func (p *Pump) Buffer(max int) []byte { return p.wire.Tail(max) }

// FeedBuffered is Feed for the first n bytes written into the slice Buffer
// returned.
func (p *Pump) FeedBuffered(ctx context.Context, n int) error {
	chunk := p.wire.Tail(n)[:n]
	p.wire.Commit(n)
	// The reader reads the wire buffer in place: a record's bytes change
	// (NOOP) only once it is decided, and it is copied before that.
	p.reader.PushShared(chunk)
	return p.fed(ctx)
}

// fed runs the records that the bytes just pushed complete.
func (p *Pump) fed(ctx context.Context) error {
	p.stats.Received = p.wire.End()
	for {
		rec, err := p.reader.Next()
		if err == wal.ErrNeedMore {
			break
		}
		if err != nil {
			return fmt.Errorf("%w: %w", errSourceWAL, err)
		}
		if err := p.record(ctx, rec); err != nil {
			return err
		}
	}
	if err := p.publish(); err != nil {
		p.publishSnap()
		return err
	}
	// Once per chunk, not per record: a backlog fills its batches long
	// before they age.
	if p.batch != nil && time.Since(p.batchBorn) >= p.cfg.MaxBatchAge {
		// flush publishes the snapshot.
		return p.flush(ctx)
	}
	p.publishSnap()
	return nil
}

func (p *Pump) record(ctx context.Context, rec *wal.Record) error {
	if p.stats.Records == 0 && rec.LSN > p.start {
		if err := p.repairStart(rec.LSN); err != nil {
			return err
		}
	}
	d, err := p.decider.Decide(rec)
	if err != nil {
		return fmt.Errorf("filtering the record at %s: %w", rec.LSN, err)
	}
	p.stats.Records++
	// Copied before the NOOP rewrite below: rec may alias the wire bytes.
	var kept *wal.Record
	if d.ToDecoder || d.Boundary != nil {
		kept = p.records.Clone(rec)
	}
	if d.Noop {
		p.noopBuf, err = p.decider.NoopRecord(p.noopBuf[:0], rec)
		if err != nil {
			return fmt.Errorf("rewriting the record at %s as XLOG_NOOP: %w", rec.LSN, err)
		}
		if err := p.scatter(rec.LSN, p.noopBuf); err != nil {
			return err
		}
		p.stats.NoopRecords++
	}
	p.decided = rec.Next
	if d.ToDecoder || d.Boundary != nil {
		if p.batch == nil {
			p.batch = &Batch{First: rec.LSN, Items: make([]Item, 0, min(p.cfg.MaxBatchRecords, 4096))}
			p.batchBorn = time.Now()
		}
		p.batch.Items = append(p.batch.Items, Item{Record: kept, Decision: d})
		p.stats.DecoderRecords++
	}
	if d.Boundary != nil {
		return p.hold(ctx, d.Boundary)
	}
	if p.batch != nil && len(p.batch.Items) >= p.cfg.MaxBatchRecords {
		return p.flush(ctx)
	}
	return nil
}

// repairStart puts the filtered bytes before the first record back over the
// source's raw ones (see PumpConfig.StartPrefix).
func (p *Pump) repairStart(first wal.LSN) error {
	n := int(first - p.start)
	hdr := wal.LongPageHeaderLen
	if n <= hdr || p.cfg.KeepStartContinuation {
		return nil // no continuation (the segment starts with a record), or nothing to repair
	}
	if pre := p.cfg.StartPrefix; len(pre) >= 16 && wal.LSN(binary.LittleEndian.Uint64(pre[8:])) != p.start {
		return fmt.Errorf("the filtered copy of the segment at %s names page address %s: not that segment", p.start, wal.LSN(binary.LittleEndian.Uint64(pre[8:])))
	}
	if len(p.cfg.StartPrefix) < n {
		return fmt.Errorf("the WAL at %s opens with %d bytes continuing a record begun in the previous segment, and no filtered copy of them was found (shadow pg_wal or archive): restarting here would tear that record for the shadow", p.start, n-hdr)
	}
	// Page headers are the same in both copies; the record bytes are the
	// filtered ones.
	return p.wire.WriteAt(p.start, p.cfg.StartPrefix[:n])
}

// scatter writes a contiguous record image over the record's bytes in the
// wire buffer, skipping the page headers it crosses.
func (p *Pump) scatter(lsn wal.LSN, rec []byte) error {
	var werr error
	err := filter.Scatter(rec, lsn, p.cfg.SegmentSize, func(at wal.LSN, b []byte) {
		if werr == nil {
			werr = p.wire.WriteAt(at, b)
		}
	})
	if err != nil {
		return err
	}
	return werr
}

// publish archives complete decided segments, then sends decided wire
// bytes to the shadow.
//
// The archive comes first: once the shadow holds a byte past a segment, a
// restartpoint of it (at the latest the one of its shutdown) may remove
// that segment from its pg_wal, and a restart whose floor is in it then
// needs the archive's copy (the filtered bytes of a record continuing into
// the next segment among them). Archived after the publish, a failed write
// could leave the segment nowhere.
func (p *Pump) publish() error {
	err := p.wire.Seal(p.decided, func(start wal.LSN, data []byte) error {
		if err := p.sink.WriteSegment(start, data); err != nil {
			return fmt.Errorf("archiving the filtered segment at %s: %w", start, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	through := min(p.decided, p.wire.End())
	if through > p.published {
		err := p.wire.Range(p.published, through, func(start wal.LSN, b []byte) error {
			p.shadow.Publish(start, b)
			return nil
		})
		if err != nil {
			return err
		}
		p.published = through
	}
	p.wire.Release(p.published)
	return nil
}

// flush hands the current batch to the input.
func (p *Pump) flush(ctx context.Context) error {
	if p.batch == nil {
		return nil
	}
	b := p.batch
	p.batch = nil
	b.Through = p.decided
	p.publishSnap()
	select {
	case p.out <- b:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// flushTail hands every held segment, complete or not, to fn (used when a
// finite input ends: the bootstrap WAL's last segment is never complete).
func (p *Pump) flushTail(fn func(start wal.LSN, data []byte) error) error {
	for _, seg := range p.wire.segs {
		if err := fn(seg.start, seg.data); err != nil {
			return err
		}
	}
	return nil
}

// FlushIdle hands over a partial batch; the session calls it when no bytes
// arrive for a while, so records do not wait for a full batch.
func (p *Pump) FlushIdle(ctx context.Context) error { return p.flush(ctx) }

// hold publishes through the boundary, ends the batch with it, and waits
// until the shadow has applied exactly through the boundary and the batch
// is released.
func (p *Pump) hold(ctx context.Context, b *Boundary) error {
	start := time.Now()
	if err := p.publish(); err != nil {
		return err
	}
	release := make(chan struct{})
	batch := p.batch
	batch.Boundary = b
	batch.release = release
	batch.captured = make(chan struct{})
	// Handing the batch over waits for the processor as long as it takes:
	// the pump reads the spool, so nothing upstream waits with it. The
	// timeout bounds what the shadow does.
	if err := p.flush(ctx); err != nil {
		return p.holdError(ctx, b, "handing the boundary batch to the processor", err)
	}
	hctx, cancel := context.WithTimeout(ctx, p.cfg.HoldTimeout)
	defer cancel()
	if err := p.shadow.WaitApply(hctx, b.NextLSN); err != nil {
		return p.holdError(ctx, b, "waiting for the shadow to apply the boundary", err)
	}
	if p.cfg.Capture != nil {
		if err := p.cfg.Capture(hctx, batch); err != nil {
			return p.holdError(ctx, b, "capturing the boundary's shapes", err)
		}
	}
	close(batch.captured)
	if p.cfg.SelfRelease {
		batch.Release()
	}
	select {
	case <-release:
	case <-hctx.Done():
		return p.holdError(ctx, b, "waiting for the boundary to be released", hctx.Err())
	}
	p.stats.Holds++
	p.stats.HoldTime += time.Since(start)
	return nil
}

func (p *Pump) holdError(ctx context.Context, b *Boundary, what string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		err = ErrHoldTimeout
	}
	return fmt.Errorf("catalog boundary at %s (xid %d): %s: %w (hold timeout %s)", b.NextLSN, b.DrainXID, what, err, p.cfg.HoldTimeout)
}
