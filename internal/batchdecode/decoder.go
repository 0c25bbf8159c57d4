package batchdecode

import (
	"context"
	"fmt"
	"time"

	"github.com/walshadow/walshadow/internal/decode"
	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/render"
	"github.com/walshadow/walshadow/internal/shadow"
	"github.com/walshadow/walshadow/internal/wal"
)

// Session is what decoding needs of the session: the descriptor log, the
// schema events of each catalog boundary (once captured), and the shadow's
// bridge for the values walshadow does not decode itself.
type Session interface {
	DescLog() *desclog.Log
	BoundaryEvents(ctx context.Context, nextLSN wal.LSN) ([]desclog.Event, error)
	Bridge() *shadow.Bridge
}

// Observer is told what decoding costs; every field may be nil.
type Observer struct {
	// BoundaryWait: the time spent waiting for a boundary's capture.
	BoundaryWait func(time.Duration)
	// Transaction: a transaction finished decoding, with its counters.
	Transaction func(decode.TxStats)
	// BridgeValues: values the bridge rendered.
	BridgeValues func(n int)
	// Debugf logs at debug level.
	Debugf func(format string, args ...any)
}

// Decoder decodes a session's batches in order (see the package doc).
type Decoder struct {
	sess Session
	opts decode.TxOptions
	pool *decode.Pool
	obs  Observer

	// The transaction in progress, carried from one batch to the next.
	tx     *decode.Tx
	txMeta Tx

	layout     *wal.Layout
	layoutFrom int

	// rows and rowTx: the last batch's arrays, given back by Recycle.
	rows  []decode.RowChange
	rowTx []*Tx
}

// New returns a decoder over sess; workers is the pool's size (0:
// GOMAXPROCS).
func New(sess Session, opts decode.TxOptions, workers int, obs Observer) *Decoder {
	if opts.Arena == nil {
		// A transaction decodes into its pool worker's arena; this one
		// only spares NewTx an arena of its own.
		opts.Arena = new(decode.Arena)
	}
	return &Decoder{sess: sess, opts: opts, pool: decode.NewPool(workers), obs: obs}
}

// Workers is the number of goroutines a batch decodes on.
func (d *Decoder) Workers() int { return d.pool.Workers() }

// Reset forgets the transaction in progress.
func (d *Decoder) Reset() {
	d.tx = nil
	d.txMeta = Tx{}
}

// Recycle gives b's arrays back for the next batch once nothing reads b:
// its rows are cleared, so as not to pin their values meanwhile.
func (d *Decoder) Recycle(b *Batch) {
	clear(b.Rows)
	clear(b.RowTx)
	d.rows, d.rowTx = b.Rows[:0], b.RowTx[:0]
	*b = Batch{}
}

// segment is one transaction's part of a batch: its records, decoded by
// the pool, and the schema events that go out before its rows.
type segment struct {
	seg    decode.Segment
	meta   *Tx
	events []desclog.Event
}

// Decode decodes one batch (see the package doc). An error leaves the
// decoder's transaction in progress undefined: Reset it before the next
// batch (the session restarts from its resume point anyway).
func (d *Decoder) Decode(ctx context.Context, recs []Record, epoch, seq uint64) (*Batch, error) {
	segs, err := d.segments(ctx, recs)
	if err != nil {
		return nil, err
	}
	work := make([]*decode.Segment, len(segs))
	for i, s := range segs {
		work[i] = &s.seg
	}
	d.pool.Decode(work)
	b := &Batch{Epoch: epoch, Seq: seq, Rows: d.rows[:0], RowTx: d.rowTx[:0]}
	d.rows, d.rowTx = nil, nil
	for _, s := range segs {
		for i := range s.events {
			b.Events = append(b.Events, Event{Before: len(b.Rows), Event: &s.events[i], Tx: s.meta})
		}
		if err := s.seg.Err; err != nil {
			if s.seg.RecordErr {
				return nil, err
			}
			return nil, fmt.Errorf("transaction %d (commit %s): %w", s.meta.TopXID, s.meta.CommitLSN, err)
		}
		b.Rows = append(b.Rows, s.seg.Rows...)
		for range s.seg.Rows {
			b.RowTx = append(b.RowTx, s.meta)
		}
		if s.seg.Finish && d.obs.Transaction != nil {
			d.obs.Transaction(s.seg.Tx.Stats())
		}
	}
	if err := d.renderPending(ctx, b); err != nil {
		return nil, err
	}
	return b, nil
}

// segments cuts a batch into its transactions' segments, in order: a
// transaction begins at its commit record (its boundary captured then),
// and the one in progress when the batch ends goes on in the next.
func (d *Decoder) segments(ctx context.Context, recs []Record) ([]*segment, error) {
	var segs []*segment
	var cur *segment
	open := func() {
		meta := d.txMeta // a copy: the decoder's changes with the next transaction
		cur = &segment{seg: decode.Segment{Tx: d.tx}, meta: &meta}
		segs = append(segs, cur)
	}
	for i := range recs {
		rec := &recs[i]
		r := rec.Meta
		if r.Tx == nil {
			return nil, fmt.Errorf("record at %s without its transaction's metadata: walshadow_decode reads the pg_physical_wal input's messages", r.LSN)
		}
		layout, err := d.layoutFor(r.PGMajor)
		if err != nil {
			return nil, err
		}
		if r.LSN == r.Tx.CommitLSN {
			events, err := d.beginTx(ctx, rec)
			if err != nil {
				return nil, err
			}
			open()
			cur.events = events
		} else {
			if d.tx == nil {
				return nil, fmt.Errorf("record at %s (commit %s) arrived without its commit record first", r.LSN, r.Tx.CommitLSN)
			}
			if cur == nil {
				open() // the transaction the previous batch left open
			}
			cur.seg.Records = append(cur.seg.Records, decode.SegmentRecord{Raw: rec.Raw, LSN: r.LSN, Next: r.Next, Layout: layout, Deferred: r.Deferred})
		}
		if r.Last {
			cur.seg.Finish = true
			d.tx, cur = nil, nil
		}
	}
	return segs, nil
}

func (d *Decoder) layoutFor(major int) (*wal.Layout, error) {
	if d.layout == nil || d.layoutFrom != major {
		var err error
		if d.layout, err = wal.LayoutForMajor(major); err != nil {
			return nil, err
		}
		d.layoutFrom = major
	}
	return d.layout, nil
}

// beginTx starts a transaction at its commit record: a catalog boundary is
// captured, and its schema events of tables (returned) go out before the
// rows.
func (d *Decoder) beginTx(ctx context.Context, rec *Record) ([]desclog.Event, error) {
	r := rec.Meta
	xid, commitLSN, commitNext := r.Tx.TopXID, r.Tx.CommitLSN, r.Tx.CommitNext
	if d.tx != nil {
		return nil, fmt.Errorf("transaction %d (commit %s) began before transaction %d (commit %s) ended",
			xid, commitLSN, d.txMeta.TopXID, d.txMeta.CommitLSN)
	}
	d.txMeta = Tx{TopXID: xid, CommitLSN: commitLSN, CommitNext: commitNext, CommitTime: r.Tx.CommitTime,
		Typed: r.Tx, CommitLSNText: commitLSN.String()}
	var out []desclog.Event
	if rec.Boundary {
		start := time.Now()
		events, err := d.sess.BoundaryEvents(ctx, commitNext)
		if err != nil {
			return nil, fmt.Errorf("reading the catalog boundary at %s: %w", commitNext, err)
		}
		if d.obs.BoundaryWait != nil {
			d.obs.BoundaryWait(time.Since(start))
		}
		if d.obs.Debugf != nil {
			d.obs.Debugf("catalog boundary at %s (transaction %d): %d schema events", commitNext, xid, len(events))
		}
		for i := range events {
			// Tables only: TOAST relations, materialized views and relations
			// the log never held have no rows downstream.
			if desc := events[i].Desc; desc == nil || desc.Kind != 'r' && desc.Kind != 'p' {
				continue
			}
			out = append(out, events[i])
		}
	}
	log := d.sess.DescLog()
	if log == nil {
		return nil, fmt.Errorf("transaction %d (commit %s): the session has no descriptor log", xid, commitLSN)
	}
	// The session captures boundaries as the shadow reaches them, ahead of
	// this transaction's decoding: it reads the log as it stood at its own
	// commit, exactly what an in-order capture would have shown it.
	d.tx = decode.NewTx(log.AsOf(commitNext), decode.Commit{TopXID: xid, LSN: commitLSN, NextLSN: commitNext,
		Time: r.Tx.CommitTime, DbOid: log.Identity().DbOid}, d.opts)
	return out, nil
}

// renderPending asks the shadow's bridge for the text of every value
// walshadow does not decode itself. A value whose output function fails
// fails its table (failRows); the bridge failing as a whole is an error.
func (d *Decoder) renderPending(ctx context.Context, b *Batch) error {
	var failed []rowFailure
	n, err := render.PendingOrFail(ctx, d.sess.Bridge(), b.Rows, func(row int, err error) {
		failed = append(failed, rowFailure{row, err})
	})
	if d.obs.BridgeValues != nil {
		d.obs.BridgeValues(n)
	}
	if err != nil {
		return err
	}
	if len(failed) > 0 {
		d.failRows(b, failed)
	}
	return nil
}
