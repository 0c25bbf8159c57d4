package processor

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/walshadow/walshadow/input"
	"github.com/walshadow/walshadow/internal/decode"
	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/shadow"
	"github.com/walshadow/walshadow/internal/wal"
)

// txMeta is the committed transaction the rows being decoded belong to,
// with its metadata strings formatted once.
type txMeta struct {
	topXID     uint32
	commitLSN  wal.LSN
	commitNext wal.LSN
	commitTime time.Time

	// Boxed once: every row of the transaction carries them as metadata.
	xidText, commitLSNText, commitTimeText any
}

// batchOut collects one input batch's output in order: schema events sit
// before the rows decoded after them.
type batchOut struct {
	rows   []decode.RowChange
	rowTx  []*txMeta
	events []placedEvent
}

type placedEvent struct {
	before int // index into rows the event precedes
	msg    *service.Message
}

func (p *decodeProcessor) decodeBatch(ctx context.Context, batch service.MessageBatch) (service.MessageBatch, error) {
	if !p.preflown {
		p.preflown = true
		p.preflight()
	}
	out := &batchOut{rows: p.rows[:0]}
	var rec wal.Record
	for _, m := range batch {
		pos, err := readPosition(m)
		if err != nil {
			return nil, err
		}
		layout, err := p.layoutFor(m)
		if err != nil {
			return nil, err
		}
		if pos.lsn == pos.commitLSN {
			if err := p.beginTx(ctx, m, pos, out); err != nil {
				return nil, err
			}
		} else {
			if p.tx == nil {
				return nil, fmt.Errorf("record at %s (commit %s) arrived without its commit record first", pos.lsn, pos.commitLSN)
			}
			raw, err := m.AsBytes()
			if err != nil {
				return nil, err
			}
			if err := wal.DecodeRecord(raw, pos.lsn, layout, &rec); err != nil {
				return nil, fmt.Errorf("decoding the record at %s: %w", pos.lsn, err)
			}
			rec.Next = pos.next
			_, deferred := m.MetaGet(input.MetaDeferred)
			n := len(out.rows)
			out.rows, err = p.tx.Add(out.rows, &rec, deferred)
			if err != nil {
				return nil, fmt.Errorf("transaction %d (commit %s): %w", p.txMeta.topXID, p.txMeta.commitLSN, err)
			}
			out.tagRows(n, &p.txMeta)
		}
		if _, last := m.MetaGet(input.MetaTxLast); last {
			n := len(out.rows)
			var err error
			out.rows, err = p.tx.Finish(out.rows)
			if err != nil {
				return nil, fmt.Errorf("transaction %d (commit %s): %w", p.txMeta.topXID, p.txMeta.commitLSN, err)
			}
			out.tagRows(n, &p.txMeta)
			p.m.observeTx(p.tx.Stats())
			p.m.transactions.Incr(1)
			p.tx = nil
		}
	}
	p.rows = out.rows[:0]
	if err := p.renderPending(ctx, out.rows); err != nil {
		return nil, err
	}
	return p.messages(out), nil
}

// tagRows attributes rows appended from index n to tx (copied: the
// processor's txMeta changes with the next transaction).
func (o *batchOut) tagRows(n int, tx *txMeta) {
	if n == len(o.rows) {
		return
	}
	cp := *tx
	for range o.rows[n:] {
		o.rowTx = append(o.rowTx, &cp)
	}
}

type position struct {
	lsn, next, commitLSN, commitNext wal.LSN
}

func readPosition(m *service.Message) (position, error) {
	var pos position
	for _, f := range []struct {
		key string
		dst *wal.LSN
	}{
		{input.MetaLSN, &pos.lsn}, {input.MetaNextLSN, &pos.next},
		{input.MetaCommitLSN, &pos.commitLSN}, {input.MetaCommitNext, &pos.commitNext},
	} {
		v, ok := m.MetaGet(f.key)
		if !ok {
			return pos, fmt.Errorf("message without %s metadata: walshadow_decode reads the pg_physical_wal input's messages", f.key)
		}
		lsn, err := wal.ParseLSN(v)
		if err != nil {
			return pos, fmt.Errorf("metadata %s: %w", f.key, err)
		}
		*f.dst = lsn
	}
	return pos, nil
}

func (p *decodeProcessor) layoutFor(m *service.Message) (*wal.Layout, error) {
	v, _ := m.MetaGet(input.MetaPGMajor)
	major, err := strconv.Atoi(v)
	if err != nil {
		return nil, fmt.Errorf("metadata %s %q: %w", input.MetaPGMajor, v, err)
	}
	if p.layout == nil || p.layoutFrom != major {
		if p.layout, err = wal.LayoutForMajor(major); err != nil {
			return nil, err
		}
		p.layoutFrom = major
	}
	return p.layout, nil
}

// beginTx starts a transaction at its commit record: a catalog boundary is
// captured (its schema events go out first), then rows decode.
func (p *decodeProcessor) beginTx(ctx context.Context, m *service.Message, pos position, out *batchOut) error {
	xidText, _ := m.MetaGet(input.MetaTxTopXID)
	xid, err := strconv.ParseUint(xidText, 10, 32)
	if err != nil {
		return fmt.Errorf("metadata %s %q: %w", input.MetaTxTopXID, xidText, err)
	}
	if p.tx != nil {
		return fmt.Errorf("transaction %d (commit %s) began before transaction %d (commit %s) ended",
			xid, pos.commitLSN, p.txMeta.topXID, p.txMeta.commitLSN)
	}
	timeText, _ := m.MetaGet(input.MetaCommitTime)
	ct, err := time.Parse(time.RFC3339Nano, timeText)
	if err != nil {
		return fmt.Errorf("metadata %s %q: %w", input.MetaCommitTime, timeText, err)
	}
	p.txMeta = txMeta{topXID: uint32(xid), commitLSN: pos.commitLSN, commitNext: pos.commitNext, commitTime: ct,
		xidText: xidText, commitLSNText: pos.commitLSN.String(), commitTimeText: timeText}
	if _, ok := m.MetaGetMut(input.MetaBoundary); ok {
		start := time.Now()
		events, err := p.sess.BoundaryEvents(ctx, pos.next)
		if err != nil {
			return fmt.Errorf("reading the catalog boundary at %s: %w", pos.next, err)
		}
		p.m.boundaryWait.Incr(time.Since(start).Nanoseconds())
		p.log.Debugf("catalog boundary at %s (transaction %d): %d schema events", pos.next, xid, len(events))
		for i := range events {
			// Tables only: TOAST relations, materialized views and relations
			// the log never held have no rows downstream.
			if d := events[i].Desc; d == nil || d.Kind != 'r' && d.Kind != 'p' {
				continue
			}
			out.events = append(out.events, placedEvent{before: len(out.rows), msg: p.eventMessage(&events[i])})
			p.warnIdentity(events[i].Desc)
		}
	}
	log := p.sess.DescLog()
	if log == nil {
		return fmt.Errorf("transaction %d (commit %s): the session has no descriptor log", xid, pos.commitLSN)
	}
	// The session captures boundaries as the shadow reaches them, ahead of
	// this transaction's decoding: it reads the log as it stood at its own
	// commit, exactly what an in-order capture would have shown it.
	p.tx = decode.NewTx(log.AsOf(pos.commitNext), decode.Commit{TopXID: uint32(xid), LSN: pos.commitLSN, NextLSN: pos.commitNext,
		Time: ct, DbOid: log.Identity().DbOid}, p.opts)
	return nil
}

// preflight reports, once, the tables whose UPDATE and DELETE cannot be
// applied downstream: no replica identity to name the old row by.
func (p *decodeProcessor) preflight() {
	log := p.sess.DescLog()
	if log == nil {
		return
	}
	for _, d := range log.ActivePresent() {
		p.warnIdentity(d)
	}
}

func (p *decodeProcessor) warnIdentity(d *desclog.Descriptor) {
	if d == nil || (d.Kind != 'r' && d.Kind != 'p') || hasIdentity(d) {
		return
	}
	p.log.Warnf("table %s.%s (oid %d) has no usable replica identity (REPLICA IDENTITY %s): its UPDATEs and DELETEs will stop replication; add a primary key or set REPLICA IDENTITY FULL or USING INDEX",
		d.Namespace, d.Name, d.Oid, identityName(d.ReplIdent))
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
// walshadow does not decode itself.
func (p *decodeProcessor) renderPending(ctx context.Context, rows []decode.RowChange) error {
	n, err := RenderPending(ctx, p.sess.Bridge(), rows)
	p.m.bridgeValues.Incr(int64(n))
	return err
}

// RenderPending renders, through the shadow's bridge, every value of rows
// walshadow does not decode itself (Field.Pending): one round trip per
// chunk of values, not per value. It returns how many it rendered.
func RenderPending(ctx context.Context, bridge *shadow.Bridge, rows []decode.RowChange) (int, error) {
	const maxItems, maxBytes = 4096, 16 << 20
	type ref struct{ row, field int }
	var items []shadow.DecodeItem
	var refs []ref
	size, rendered := 0, 0
	flush := func() error {
		if len(items) == 0 {
			return nil
		}
		r0 := refs[0]
		if bridge == nil {
			return fmt.Errorf("%s: %w", describeField(&rows[r0.row], r0.field), errNoBridge)
		}
		texts, err := bridge.Decode(ctx, items)
		if err != nil {
			return fmt.Errorf("rendering %d values through the shadow's bridge (first: %s): %w", len(items), describeField(&rows[r0.row], r0.field), err)
		}
		for i, r := range refs {
			if texts[i].Err != "" {
				return fmt.Errorf("%s: the type's output function failed: %s", describeField(&rows[r.row], r.field), texts[i].Err)
			}
			f := &rows[r.row].Fields[r.field]
			f.Value, f.Pending = texts[i].Text, false
		}
		rendered += len(items)
		items, refs, size = items[:0], refs[:0], 0
		return nil
	}
	for i := range rows {
		for j := range rows[i].Fields {
			f := &rows[i].Fields[j]
			if !f.Pending || f.Null || f.Omitted {
				continue
			}
			items = append(items, shadow.DecodeItem{TypeOid: f.Col.TypeOid, Data: f.Raw})
			refs = append(refs, ref{i, j})
			size += len(f.Raw)
			if len(items) >= maxItems || size >= maxBytes {
				if err := flush(); err != nil {
					return rendered, err
				}
			}
		}
	}
	return rendered, flush()
}

func describeField(r *decode.RowChange, i int) string {
	f := &r.Fields[i]
	return fmt.Sprintf("column %q (type %s) of %s.%s at %s", f.Col.Name, f.Col.TypeName, r.Desc.Namespace, r.Desc.Name, r.LSN)
}
