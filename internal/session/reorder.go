package session

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/walshadow/walshadow/internal/msg"
	"github.com/walshadow/walshadow/internal/wal"
	"github.com/walshadow/walshadow/internal/xact"
)

// TxInfo describes the committed transaction an item belongs to. Items of
// one transaction share one TxInfo.
type TxInfo struct {
	// Tx is what every record of it carries as metadata (the input hands
	// out a pointer to it): its top xid, commit record, commit time and
	// first buffered change (the commit's LSN when it changed no row; the
	// resume floor stays at or below it until the transaction is
	// delivered).
	msg.Tx
	Changes int
	// Boundary is set when the commit is a catalog boundary; captured is
	// closed once the session has captured it (the hold's release).
	Boundary *Boundary
	captured <-chan struct{}
}

// reorderer turns the pump's WAL-ordered batches into committed
// transactions: row-change records are buffered per xid (spilling past the
// memory budget) and come out at their commit, the commit record first,
// then every change of the tree merged by LSN, the last item flagged.
// Aborted work never comes out. It runs on the input's goroutine (Next).
type reorderer struct {
	buf *xact.Buffer
	db  uint32 // the followed database: other databases' rows are skipped
	max int    // items per output batch
	// maxBytes bounds an output batch's record bytes: one multi-insert
	// record holds dozens of rows, so items alone do not bound what the
	// processor turns a batch into.
	maxBytes int
	skip     wal.LSN

	// ready are committed transactions not yet emitted, in commit order.
	ready []*readyTx
	// cur is the transaction being emitted.
	cur *readyTx
	// consumed: every record before it has been taken from the pump.
	consumed wal.LSN

	stats reorderStats

	commit  wal.XactCommit
	abort   wal.XactAbort
	prepare wal.XactPrepare
	assign  wal.XactAssignment
	xids    []uint32
}

type readyTx struct {
	info    *TxInfo
	commit  Item
	release func() // the boundary hold of the commit's pump batch, or nil
	bound   *Boundary
	drain   *xact.Drain
	started bool // the commit item went out
	// rest is the part of the last drained slice that did not fit the
	// batch (it aliases the drain's buffer, valid until its next Next).
	rest    []xact.Change
	emitted int // changes emitted so far
}

type reorderStats struct {
	OtherDB, Skipped, Committed, Aborted int64
}

// defaultBatchBytes is the record bytes an output batch stops at (about
// 4,000 pgbench-sized rows once decoded).
const defaultBatchBytes = 512 << 10

func newReorderer(buf *xact.Buffer, db uint32, maxItems int, start, skipThrough wal.LSN) *reorderer {
	if maxItems <= 0 {
		maxItems = 1024
	}
	return &reorderer{buf: buf, db: db, max: maxItems, maxBytes: defaultBatchBytes, consumed: start, skip: skipThrough}
}

// idle reports that nothing is ready to go out without more pump input.
func (r *reorderer) idle() bool { return r.cur == nil && len(r.ready) == 0 }

// consume takes one pump batch: changes into the buffer, transaction ends
// into ready transactions.
func (r *reorderer) consume(b *Batch) error {
	for i := range b.Items {
		it := &b.Items[i]
		rec := it.Record
		var err error
		switch rec.Header.RmID {
		case wal.RmgrXact:
			var bound *Boundary
			var release func()
			if i == len(b.Items)-1 && b.Boundary != nil {
				bound, release = b.Boundary, b.Release
			}
			err = r.xactRecord(*it, bound, release, b.captured)
		case wal.RmgrHeap, wal.RmgrHeap2:
			err = r.change(it)
		}
		if err != nil {
			return err
		}
	}
	if b.Through > r.consumed {
		r.consumed = b.Through
	}
	return nil
}

// change buffers a row-change record of the followed database.
func (r *reorderer) change(it *Item) error {
	rec := it.Record
	if rec.Header.XID == 0 || !isRowChange(rec) {
		return nil
	}
	if db, ok := recordDB(rec); ok && db != r.db {
		r.stats.OtherDB++
		return nil
	}
	var flags uint8
	if it.Decision.DeferCatalogDecode {
		flags |= xact.FlagDeferCatalogDecode
	}
	return r.buf.Add(xact.Change{LSN: rec.LSN, Next: rec.Next, XID: rec.Header.XID, Flags: flags, Raw: rec.Raw})
}

// isRowChange tells the records the decoder turns into rows.
func isRowChange(rec *wal.Record) bool {
	switch rec.Header.RmID {
	case wal.RmgrHeap:
		switch rec.Header.Info & wal.XLogHeapOpMask {
		case wal.XLogHeapInsert, wal.XLogHeapDelete, wal.XLogHeapUpdate, wal.XLogHeapHotUpdate,
			wal.XLogHeapTruncate, wal.XLogHeapConfirm:
			return true
		}
	case wal.RmgrHeap2:
		return rec.Header.Info&wal.XLogHeapOpMask == wal.XLogHeap2MultiInsert
	}
	return false
}

// recordDB is the database a row change names: block 0's, or TRUNCATE's dbId.
func recordDB(rec *wal.Record) (uint32, bool) {
	if b := rec.Block(0); b != nil {
		return b.Rel.DbOid, true
	}
	if rec.Header.RmID == wal.RmgrHeap && rec.Header.Info&wal.XLogHeapOpMask == wal.XLogHeapTruncate && len(rec.MainData) >= 4 {
		return uint32(rec.MainData[0]) | uint32(rec.MainData[1])<<8 | uint32(rec.MainData[2])<<16 | uint32(rec.MainData[3])<<24, true
	}
	return 0, false
}

func (r *reorderer) xactRecord(it Item, bound *Boundary, release func(), captured <-chan struct{}) error {
	if bound == nil {
		captured = nil
	}
	rec := it.Record
	switch rec.RmgrInfo() & wal.XLogXactOpMask {
	case wal.XLogXactCommit, wal.XLogXactCommitPrepared:
		if err := r.commit.Decode(rec); err != nil {
			return fmt.Errorf("decoding the commit at %s: %w", rec.LSN, err)
		}
		top := rec.Header.XID
		if r.commit.IsPrepared() {
			top = r.commit.TwoPhaseXID
		}
		r.xids = r.commit.Subxacts.AppendTo(r.xids[:0])
		drain, err := r.buf.Commit(top, r.xids)
		if err != nil {
			return fmt.Errorf("committing xid %d at %s: %w", top, rec.LSN, err)
		}
		info := &TxInfo{Tx: msg.Tx{TopXID: top, CommitLSN: rec.LSN, CommitNext: rec.Next,
			CommitTime: pgTime(r.commit.XactTime), FirstLSN: drain.FirstLSN()}, Changes: drain.Len(), Boundary: bound, captured: captured}
		if info.FirstLSN == 0 {
			info.FirstLSN = rec.LSN
		}
		if rec.LSN <= r.skip {
			// Delivered before a restart: the boundary (if any) was
			// captured before its rows went out, so the hold can end.
			r.stats.Skipped++
			drain.Close()
			if release != nil {
				release()
			}
			return nil
		}
		r.stats.Committed++
		// The commit waits in ready, maybe long after the rest of its
		// batch: a copy of its own, not its batch's shared chunk.
		it.Record = rec.Clone()
		it.Tx = info
		r.ready = append(r.ready, &readyTx{info: info, commit: it, release: release, bound: bound, drain: drain})
		return nil
	case wal.XLogXactAbort, wal.XLogXactAbortPrepared:
		if err := r.abort.Decode(rec); err != nil {
			return fmt.Errorf("decoding the abort at %s: %w", rec.LSN, err)
		}
		xid := rec.Header.XID
		if r.abort.IsPrepared() {
			xid = r.abort.TwoPhaseXID
		}
		r.xids = r.abort.Subxacts.AppendTo(r.xids[:0])
		r.buf.Abort(xid, r.xids)
		r.stats.Aborted++
	case wal.XLogXactPrepare:
		if err := r.prepare.Decode(rec); err != nil {
			return fmt.Errorf("decoding the prepare at %s: %w", rec.LSN, err)
		}
		r.xids = r.prepare.Subxacts.AppendTo(r.xids[:0])
		r.buf.Prepare(r.prepare.XID, r.xids)
	case wal.XLogXactAssignment:
		if err := r.assign.Decode(rec); err != nil {
			return fmt.Errorf("decoding the assignment at %s: %w", rec.LSN, err)
		}
		r.xids = r.assign.Subxacts.AppendTo(r.xids[:0])
		r.buf.Assign(r.assign.XTop, r.xids)
	}
	if release != nil {
		// A boundary that is not a commit (the filter only makes commits
		// boundaries, but an abort must never leave a hold on).
		release()
	}
	return nil
}

// pgTime converts a TimestampTz (µs since 2000-01-01 UTC).
func pgTime(us int64) time.Time {
	return time.Unix(946684800, 0).UTC().Add(time.Duration(us) * time.Microsecond)
}

// fill appends ready items to out (up to the batch limit), returning
// whether it stopped because the batch is full or a boundary went in.
func (r *reorderer) fill(out *Batch) error {
	for len(out.Items) < r.max && out.size < r.maxBytes {
		if r.cur == nil {
			if len(r.ready) == 0 {
				return nil
			}
			if r.ready[0].bound != nil && out.Boundary != nil {
				return nil // one hold per output batch
			}
			r.cur = r.ready[0]
			r.ready = r.ready[1:]
		}
		tx := r.cur
		if !tx.started {
			tx.started = true
			out.add(tx.commit, tx.info)
			if tx.bound != nil {
				out.Boundary = tx.bound
				out.holdRelease = tx.release
			}
			if tx.info.Changes == 0 {
				out.finish(tx.info)
				tx.drain.Close()
				r.cur = nil
			}
			continue
		}
		changes := tx.rest
		var err error
		if len(changes) == 0 {
			changes, err = tx.drain.Next()
		}
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("draining xid %d (commit %s): %d changes out of %d", tx.info.TopXID, tx.info.CommitLSN, tx.emitted, tx.info.Changes)
		}
		if err != nil {
			return fmt.Errorf("draining xid %d (commit %s): %w", tx.info.TopXID, tx.info.CommitLSN, err)
		}
		room, bytes := 0, out.size
		for room < len(changes) && room < r.max-len(out.Items) && (room == 0 || bytes+len(changes[room].Raw) <= r.maxBytes) {
			bytes += len(changes[room].Raw)
			room++
		}
		tx.rest = nil
		if len(changes) > room {
			changes, tx.rest = changes[:room], changes[room:]
		}
		if err := out.addChanges(changes, tx.info, tx.commit.Record.Layout); err != nil {
			return err
		}
		// The last change closes the transaction in the same batch: its
		// last item carries the flag.
		if tx.emitted += len(changes); tx.emitted == tx.info.Changes && len(tx.rest) == 0 {
			out.finish(tx.info)
			if err := tx.drain.Close(); err != nil {
				return err
			}
			r.cur = nil
		}
	}
	return nil
}

// floor is the lowest LSN the reorderer still needs re-read after a
// restart: open transactions' first changes, committed ones not yet
// emitted, and everything not consumed from the pump yet.
func (r *reorderer) floor() wal.LSN {
	f := r.consumed
	if bf := r.buf.Floor(); bf != 0 && bf < f {
		f = bf
	}
	if r.cur != nil && r.cur.info.FirstLSN < f {
		f = r.cur.info.FirstLSN
	}
	for _, tx := range r.ready {
		f = min(f, tx.info.FirstLSN)
	}
	return f
}

// reset drops everything (the session restarts from its floor).
func (r *reorderer) reset() {
	if r.cur != nil {
		r.cur.drain.Close()
	}
	for _, tx := range r.ready {
		tx.drain.Close()
		if tx.release != nil {
			tx.release()
		}
	}
	r.cur, r.ready = nil, nil
	r.buf.Reset()
}

// add appends one item of tx.
func (b *Batch) add(it Item, tx *TxInfo) {
	if len(b.Items) == 0 {
		b.First = it.Record.LSN
	}
	it.Tx = tx
	if it.Record.LSN == tx.CommitLSN {
		b.size += len(it.Record.Raw) // changes count theirs in addChanges
	}
	b.Items = append(b.Items, it)
	if b.txFloor == 0 || tx.FirstLSN < b.txFloor {
		b.txFloor = tx.FirstLSN
	}
}

// finish flags the transaction's last item.
func (b *Batch) finish(tx *TxInfo) {
	b.Items[len(b.Items)-1].Last = true
	b.delivers = tx.CommitLSN
}

// addChanges appends a drained slice: one arena for the bytes, one for the
// records, since the slice aliases the drain's buffer.
func (b *Batch) addChanges(changes []xact.Change, tx *TxInfo, layout *wal.Layout) error {
	n := 0
	for _, c := range changes {
		n += len(c.Raw)
	}
	b.size += n
	arena := make([]byte, 0, n)
	recs := make([]wal.Record, len(changes))
	// The records' block references share one array too (a row change
	// names one block, an update two): each record decodes into the rest
	// of it and is capped at its own, so no later append reaches the next
	// record's (one that outgrows the array gets its own).
	blocks := make([]wal.BlockRef, 0, len(changes)+len(changes)/4)
	for i, c := range changes {
		raw := arena[len(arena) : len(arena)+len(c.Raw)]
		arena = append(arena, c.Raw...)
		rest := blocks[len(blocks):cap(blocks)]
		recs[i].Blocks = rest[:0]
		if err := wal.DecodeRecord(raw, c.LSN, layout, &recs[i]); err != nil {
			return fmt.Errorf("re-reading the buffered record at %s (xid %d): %w", c.LSN, tx.TopXID, err)
		}
		if nb := len(recs[i].Blocks); nb > 0 && nb <= len(rest) && &recs[i].Blocks[0] == &rest[0] {
			blocks = blocks[:len(blocks)+nb] // (decoded in place)
		}
		recs[i].Blocks = recs[i].Blocks[:len(recs[i].Blocks):len(recs[i].Blocks)]
		recs[i].Next = c.Next
		b.add(Item{Record: &recs[i], Decision: Decision{ToDecoder: true, DeferCatalogDecode: c.Flags&xact.FlagDeferCatalogDecode != 0}}, tx)
	}
	return nil
}
