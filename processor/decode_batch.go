package processor

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/walshadow/walshadow/internal/decode"
	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/msg"
	"github.com/walshadow/walshadow/internal/render"
	"github.com/walshadow/walshadow/internal/wal"
)

// txMeta is the committed transaction the rows being decoded belong to,
// with its metadata strings formatted once.
type txMeta struct {
	topXID     uint32
	commitLSN  wal.LSN
	commitNext wal.LSN
	commitTime time.Time

	// tx is every change's typed transaction; commitLSNText its boxed
	// commit LSN, a routing string of every row.
	tx            *msg.Tx
	commitLSNText any
}

// batchOut collects one input batch's output in order: schema events sit
// before the rows decoded after them.
type batchOut struct {
	epoch  uint64 // the session run the batch belongs to
	seq    uint64 // the batch's number in the run
	rows   []decode.RowChange
	rowTx  []*txMeta
	events []placedEvent
}

type placedEvent struct {
	before int // index into rows the event precedes
	msg    *service.Message
}

// txSegment is one transaction's part of a batch: its records, decoded
// by the pool, and the schema events that go out before its rows.
type txSegment struct {
	seg    decode.Segment
	meta   *txMeta
	events []*service.Message
}

// decodeBatch decodes one input batch in three steps: the records are cut
// into transactions (capturing each catalog boundary in order, which may
// wait for the shadow), the transactions decode on the pool's workers,
// and their rows are read back in commit order.
func (p *decodeProcessor) decodeBatch(ctx context.Context, batch service.MessageBatch, epoch, seq uint64) (service.MessageBatch, error) {
	if !p.preflown {
		p.preflown = true
		p.preflight()
	}
	segs, err := p.segments(ctx, batch, epoch, seq)
	if err != nil {
		return nil, err
	}
	work := make([]*decode.Segment, len(segs))
	for i, s := range segs {
		work[i] = &s.seg
	}
	p.pool.Decode(work)
	out := &batchOut{rows: p.rows[:0], rowTx: p.rowTx[:0], epoch: epoch, seq: seq}
	for _, s := range segs {
		for _, m := range s.events {
			out.events = append(out.events, placedEvent{before: len(out.rows), msg: m})
		}
		if err := s.seg.Err; err != nil {
			if s.seg.RecordErr {
				return nil, err
			}
			return nil, fmt.Errorf("transaction %d (commit %s): %w", s.meta.topXID, s.meta.commitLSN, err)
		}
		out.rows = append(out.rows, s.seg.Rows...)
		for range s.seg.Rows {
			out.rowTx = append(out.rowTx, s.meta)
		}
		if s.seg.Finish {
			p.m.observeTx(s.seg.Tx.Stats())
			p.m.transactions.Incr(1)
		}
	}
	if err := p.renderPending(ctx, out); err != nil {
		return nil, err
	}
	msgs := p.messages(out)
	clear(out.rows) // do not pin the rows' values until the next batch
	clear(out.rowTx)
	p.rows, p.rowTx = out.rows[:0], out.rowTx[:0]
	return msgs, nil
}

// segments cuts a batch into its transactions' segments, in order: a
// transaction begins at its commit record (its boundary captured then),
// and the one in progress when the batch ends goes on in the next.
func (p *decodeProcessor) segments(ctx context.Context, batch service.MessageBatch, epoch, seq uint64) ([]*txSegment, error) {
	var segs []*txSegment
	var cur *txSegment
	open := func() {
		meta := p.txMeta // a copy: the processor's changes with the next transaction
		cur = &txSegment{seg: decode.Segment{Tx: p.tx}, meta: &meta}
		segs = append(segs, cur)
	}
	for _, m := range batch {
		r, err := msg.RecordOf(m)
		if err != nil {
			return nil, err
		}
		if r.Tx == nil {
			return nil, fmt.Errorf("record at %s without its transaction's metadata: walshadow_decode reads the pg_physical_wal input's messages", r.LSN)
		}
		pos := position{lsn: r.LSN, next: r.Next, commitLSN: r.Tx.CommitLSN, commitNext: r.Tx.CommitNext}
		layout, err := p.layoutFor(r.PGMajor)
		if err != nil {
			return nil, err
		}
		if pos.lsn == pos.commitLSN {
			events, err := p.beginTx(ctx, m, r, pos, epoch, seq)
			if err != nil {
				return nil, err
			}
			open()
			cur.events = events
		} else {
			if p.tx == nil {
				return nil, fmt.Errorf("record at %s (commit %s) arrived without its commit record first", pos.lsn, pos.commitLSN)
			}
			if cur == nil {
				open() // the transaction the previous batch left open
			}
			raw, err := m.AsBytes()
			if err != nil {
				return nil, err
			}
			cur.seg.Records = append(cur.seg.Records, decode.SegmentRecord{Raw: raw, LSN: pos.lsn, Next: pos.next, Layout: layout, Deferred: r.Deferred})
		}
		if r.Last {
			cur.seg.Finish = true
			p.tx, cur = nil, nil
		}
	}
	return segs, nil
}

type position struct {
	lsn, next, commitLSN, commitNext wal.LSN
}

func (p *decodeProcessor) layoutFor(major int) (*wal.Layout, error) {
	if p.layout == nil || p.layoutFrom != major {
		var err error
		if p.layout, err = wal.LayoutForMajor(major); err != nil {
			return nil, err
		}
		p.layoutFrom = major
	}
	return p.layout, nil
}

// beginTx starts a transaction at its commit record: a catalog boundary is
// captured, and its schema events (returned) go out before the rows.
func (p *decodeProcessor) beginTx(ctx context.Context, m *service.Message, r *msg.Record, pos position, epoch, seq uint64) ([]*service.Message, error) {
	xid := r.Tx.TopXID
	if p.tx != nil {
		return nil, fmt.Errorf("transaction %d (commit %s) began before transaction %d (commit %s) ended",
			xid, pos.commitLSN, p.txMeta.topXID, p.txMeta.commitLSN)
	}
	p.txMeta = txMeta{topXID: xid, commitLSN: pos.commitLSN, commitNext: pos.commitNext, commitTime: r.Tx.CommitTime,
		tx: r.Tx, commitLSNText: pos.commitLSN.String()}
	var out []*service.Message
	if _, ok := m.MetaGetMut(msg.KeyBoundary); ok {
		start := time.Now()
		events, err := p.sess.BoundaryEvents(ctx, pos.next)
		if err != nil {
			return nil, fmt.Errorf("reading the catalog boundary at %s: %w", pos.next, err)
		}
		p.m.boundaryWait.Incr(time.Since(start).Nanoseconds())
		p.log.Debugf("catalog boundary at %s (transaction %d): %d schema events", pos.next, xid, len(events))
		for i := range events {
			// Tables only: TOAST relations, materialized views and relations
			// the log never held have no rows downstream.
			if d := events[i].Desc; d == nil || d.Kind != 'r' && d.Kind != 'p' {
				continue
			}
			out = append(out, p.eventMessage(&events[i], epoch, seq))
			p.warnIdentity(events[i].Desc)
		}
	}
	log := p.sess.DescLog()
	if log == nil {
		return nil, fmt.Errorf("transaction %d (commit %s): the session has no descriptor log", xid, pos.commitLSN)
	}
	// The session captures boundaries as the shadow reaches them, ahead of
	// this transaction's decoding: it reads the log as it stood at its own
	// commit, exactly what an in-order capture would have shown it.
	p.tx = decode.NewTx(log.AsOf(pos.commitNext), decode.Commit{TopXID: uint32(xid), LSN: pos.commitLSN, NextLSN: pos.commitNext,
		Time: r.Tx.CommitTime, DbOid: log.Identity().DbOid}, p.opts)
	return out, nil
}

// preflight reports, once, the tables without a usable replica identity:
// their UPDATEs and DELETEs are replicated by physical row identity.
func (p *decodeProcessor) preflight() {
	log := p.sess.DescLog()
	if log == nil {
		return
	}
	for _, d := range log.ActivePresent() {
		p.warnIdentity(d)
	}
}

// warnIdentity tells, at info level, that a table without a usable replica
// identity is replicated by physical row identity. Temporary and unlogged
// tables write no WAL: nothing is said about them.
func (p *decodeProcessor) warnIdentity(d *desclog.Descriptor) {
	note, ok := identityNote(d)
	if !ok {
		return
	}
	p.identityMu.Lock()
	defer p.identityMu.Unlock()
	if p.identityNoted[d.Oid] == note {
		return
	}
	if p.identityNoted == nil {
		p.identityNoted = map[uint32]string{}
	}
	p.identityNoted[d.Oid] = note
	p.log.Info(note)
}

// identityNote is warnIdentity's message for d, if it gets one.
func identityNote(d *desclog.Descriptor) (string, bool) {
	if d == nil || (d.Kind != 'r' && d.Kind != 'p') || hasIdentity(d) || d.Persistence == 't' || d.Persistence == 'u' {
		return "", false
	}
	return fmt.Sprintf("table %s.%s (oid %d) has no usable replica identity (REPLICA IDENTITY %s): its UPDATEs and DELETEs are replicated by physical row identity (%s and %s)",
		d.Namespace, d.Name, d.Oid, identityName(d.ReplIdent), MetaFilenode, MetaTID), true
}

func hasIdentity(d *desclog.Descriptor) bool {
	return d.ReplIdent == 'f' || len(d.KeyAttnums) > 0
}

func identityName(c byte) string {
	switch c {
	case 'd':
		return "DEFAULT without a primary key"
	case 'n':
		return "NOTHING"
	case 'f':
		return "FULL"
	case 'i':
		return "USING INDEX"
	}
	return string(c)
}

// renderPending asks the shadow's bridge for the text of every value
// walshadow does not decode itself. A value whose output function fails
// fails its table (failRows); the bridge failing as a whole is an error.
func (p *decodeProcessor) renderPending(ctx context.Context, out *batchOut) error {
	var failed []rowFailure
	n, err := render.PendingOrFail(ctx, p.sess.Bridge(), out.rows, func(row int, err error) {
		failed = append(failed, rowFailure{row, err})
	})
	p.m.bridgeValues.Incr(int64(n))
	if err != nil {
		return err
	}
	if len(failed) > 0 {
		p.failRows(out, failed)
	}
	return nil
}

// rowFailure is a decoded row that cannot be emitted.
type rowFailure struct {
	row int
	err error
}

// failRows turns decoded rows that cannot be emitted into their tables'
// failures, as the decoder does for what it finds itself: a failing row's
// record becomes one OpFail (the other changes of that record go too, e.g.
// the delete half of a key change), the table's later rows of the same
// transaction are dropped, and so are the ones the transaction has yet to
// decode, when it goes on past this batch. Schema events keep their place.
func (p *decodeProcessor) failRows(out *batchOut, failed []rowFailure) {
	type relTx struct {
		commit wal.LSN
		oid    uint32
	}
	keyOf := func(i int) relTx { return relTx{out.rowTx[i].commitLSN, out.rows[i].Desc.Oid} }
	slices.SortStableFunc(failed, func(a, b rowFailure) int { return a.row - b.row })
	// start: where each failed table's output ends, at its failing record.
	type failure struct {
		start int
		row   decode.RowChange
	}
	fails := map[relTx]*failure{}
	for _, f := range failed {
		k := keyOf(f.row)
		if fails[k] != nil {
			continue // the first failure of a table counts
		}
		start := f.row
		for start > 0 && keyOf(start-1) == k && out.rows[start-1].LSN == out.rows[f.row].LSN {
			start--
		}
		r := out.rows[f.row]
		fails[k] = &failure{start: start, row: decode.RowChange{Op: decode.OpFail, LSN: r.LSN, Desc: r.Desc, DescFrom: r.DescFrom,
			TID: r.TID, Filenode: r.Filenode, Err: f.err}}
		if p.tx != nil && p.txMeta.commitLSN == k.commit {
			p.tx.FailRelation(k.oid)
		}
	}
	newPos := make([]int, len(out.rows)+1)
	w := 0
	for i := range out.rows {
		newPos[i] = w
		if f := fails[keyOf(i)]; f != nil && i >= f.start {
			if i == f.start {
				out.rows[w], out.rowTx[w] = f.row, out.rowTx[i]
				w++
			}
			continue
		}
		out.rows[w], out.rowTx[w] = out.rows[i], out.rowTx[i]
		w++
	}
	newPos[len(out.rows)] = w
	clear(out.rows[w:]) // do not pin dropped rows' values
	out.rows, out.rowTx = out.rows[:w], out.rowTx[:w]
	for i := range out.events {
		out.events[i].before = newPos[out.events[i].before]
	}
}
