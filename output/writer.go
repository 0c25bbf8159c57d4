package output

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/shopspring/decimal"

	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/load"
	"github.com/walshadow/walshadow/internal/msg"
	"github.com/walshadow/walshadow/internal/wal"
)

// change is one row message's parsed metadata.
type change struct {
	op         string
	oid        uint32
	lsn        wal.LSN
	version    wal.LSN
	xid        uint32
	commitTime time.Time
	commitLSN  wal.LSN
	keyChanged bool
	omitted    []string // unchanged TOAST columns left out of the payload
	// recordIndex is the change's position among its WAL record's
	// changes; -1 when the metadata is absent.
	recordIndex int
	// meta is the whole of the change's metadata (event, error, physical
	// identity).
	meta *msg.Change
}

// changeOf reads a message's change metadata: the processor's typed value,
// or the strings of a message made otherwise.
func changeOf(m *service.Message) (change, error) {
	mc, err := msg.ChangeOf(m)
	if err != nil {
		return change{}, err
	}
	return changeFrom(mc)
}

// changeFrom is mc as the output reads it.
func changeFrom(mc *msg.Change) (change, error) {
	if mc.Rel == nil || mc.Tx == nil {
		return change{}, fmt.Errorf("%s change at %s without its relation or transaction metadata", mc.Op, mc.LSN)
	}
	return change{op: mc.Op, oid: mc.Rel.Oid, lsn: mc.LSN, version: mc.DescVersion, xid: mc.Tx.TopXID,
		commitTime: mc.Tx.CommitTime, commitLSN: mc.Tx.CommitLSN, keyChanged: mc.KeyChanged,
		omitted: mc.UnchangedToast, recordIndex: mc.RecordIndex, meta: mc}, nil
}

// WriteBatch applies one batch: rows into their tables' pending blocks,
// schema events and truncates behind a barrier, and every block inserted
// before it returns (only then is the batch acknowledged).
func (o *chOutput) WriteBatch(ctx context.Context, batch service.MessageBatch) error {
	pb := parseBatch(batch)
	defer pb.release()
	leave, err := o.awaitTurn(ctx, pb.turnEpoch, pb.turnSeq)
	if err != nil {
		return err
	}
	defer leave()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.conn == nil || !o.ready {
		return service.ErrNotConnected
	}
	epoch, stale := o.staleRun(pb.epochs)
	if stale {
		return fmt.Errorf("a batch of walshadow session run %d, which has stopped, is not written: the session streams it again from its resume point", epoch)
	}
	wait := time.Duration(0)
	for attempt := 1; ; attempt++ {
		o.deferred = o.deferred[:0]
		clear(o.failedInBatch)
		// (ClickHouse restarted since the last batch: nothing is written
		// while rows it brought back of a truncated table show.)
		err := o.guardRestart(ctx, false)
		if err == nil {
			err = o.writeBatch(ctx, pb.changes)
		}
		if err == nil && len(o.deferred) > 0 {
			o.loads.AddDeferred(o.deferred)
		}
		o.deferred = nil
		if err == nil {
			if attempt > 1 {
				o.log.Infof("ClickHouse is back: the batch that waited for it is written (attempt %d)", attempt)
			}
			return nil
		}
		// Nothing of this batch is acknowledged: drop what is pending and
		// rebuild table state from the durable agreements on the next try,
		// after reading ClickHouse's boot time again (it may have
		// restarted under the batch).
		o.tables = map[uint32]*tableState{}
		o.restart.suspect = true
		if !o.unavailable(ctx, err) || !o.sess.Live(epoch) {
			o.fenced = max(o.fenced, epoch)
			return err
		}
		// ClickHouse is away: the batch waits here and is written again
		// whole (every write is replay-safe), as long as it takes. The
		// session does not restart: the spool keeps the WAL meanwhile.
		wait = min(max(2*wait, unavailableFirst), unavailableMax)
		if wait < unavailableMax || attempt%10 == 0 {
			o.log.Warnf("ClickHouse is unavailable (attempt %d): the batch waits and is written again in %s (the session goes on spooling the source's WAL): %v", attempt, wait, err)
		}
		o.m.retries.Incr(1)
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			o.fenced = max(o.fenced, epoch)
			return fmt.Errorf("%w (while waiting for ClickHouse: %v)", ctx.Err(), err)
		case <-timer.C:
		}
	}
}

// maxOrderedInFlight bounds the batches benthos hands the output at once.
// Batches waiting for their turn hold memory (with threads: 1 and a slow
// ClickHouse the next ones queue here rather than upstream), so it is
// small. The batch every other waits for must be able to get in: one that
// would take the last slot while that batch is not inside fails instead
// (awaitTurn).
const maxOrderedInFlight = 16

// batchKey names a session batch.
type batchKey struct{ epoch, seq uint64 }

// awaitTurn waits until every session batch of run epoch before seq is
// acknowledged (seq 0, messages the processor did not number, does not
// wait). A run that stopped meanwhile is left to WriteBatch's stale check.
// The returned func ends the batch's stay in the output.
func (o *chOutput) awaitTurn(ctx context.Context, epoch, seq uint64) (func(), error) {
	if seq == 0 {
		return func() {}, nil
	}
	key := batchKey{epoch, seq}
	o.inMu.Lock()
	if o.inOutput == nil {
		o.inOutput = map[batchKey]bool{}
	}
	o.inOutput[key] = true
	full := len(o.inOutput) >= maxOrderedInFlight
	o.inMu.Unlock()
	leave := func() {
		o.inMu.Lock()
		delete(o.inOutput, key)
		o.inMu.Unlock()
	}
	// Ahead: an earlier batch is neither acknowledged nor inside (threads
	// handed this one over first). (An earlier batch just written is
	// outside until its acknowledgement lands: a moment.)
	ahead := func() (uint64, bool) {
		oldest, ok := o.sess.OldestUnacked(epoch)
		if !ok || oldest >= seq {
			return 0, false
		}
		o.inMu.Lock()
		defer o.inMu.Unlock()
		return oldest, !o.inOutput[batchKey{epoch, oldest}]
	}
	if oldest, out := ahead(); out {
		if o.reorderSeen.CompareAndSwap(false, true) {
			o.log.Infof("batch %d of session run %d reached the output before batch %d (pipeline threads > 1): each batch is written after every earlier one", seq, epoch, oldest)
		}
		for i := 0; full && out && i < 20; i++ {
			// The last slot: if the batch all wait for cannot get in,
			// waiting here would keep it out for good.
			time.Sleep(100 * time.Millisecond)
			oldest, out = ahead()
		}
		if full && out {
			leave()
			return nil, fmt.Errorf("batch %d of session run %d arrived %d or more batches ahead of batch %d (pipeline threads > 1 with one of them held up): it is not written, and the session streams it again from its resume point", seq, epoch, maxOrderedInFlight-1, oldest)
		}
	}
	if _, err := o.sess.AwaitEarlier(ctx, epoch, seq); err != nil {
		leave()
		return nil, err
	}
	return leave, nil
}

// While ClickHouse is unavailable a batch is written again after a wait
// from unavailableFirst doubling to unavailableMax.
const (
	unavailableFirst = time.Second
	unavailableMax   = 5 * time.Second
)

// unavailable tells a batch that failed because ClickHouse could not be
// reached (or did not answer within the insert budget) from one it refused.
func (o *chOutput) unavailable(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	return clickhouse.IsRetryable(err) || errors.Is(err, context.DeadlineExceeded)
}

// parsedChange is one change of a batch: its metadata as changeOf read
// it, and where its payload is (its own message, or a change batch
// message's).
type parsedChange struct {
	c   change
	err error
	// msgErr: a processor before the output flagged the message.
	msgErr error
	// m is the change's own message; nil for a change of a change batch
	// message, whose payload is payload.
	m       *service.Message
	payload map[string]any
}

// fields is the change's payload: its columns (a row), its shape (an
// event).
func (pc *parsedChange) fields() (map[string]any, error) {
	if pc.m == nil {
		return pc.payload, nil
	}
	v, err := pc.m.AsStructured()
	if err != nil {
		return nil, err
	}
	f, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("payload is %T, not an object of columns", v)
	}
	return f, nil
}

// parsedBatch is a batch's change metadata, read once per message before
// anything else looks at it.
type parsedBatch struct {
	changes []parsedChange
	// epochs are the distinct session runs among the messages (0: not
	// said), in order of appearance; turnEpoch/turnSeq the first session
	// batch among them (the newest run's lowest numbered; 0: none).
	epochs             []uint64
	turnEpoch, turnSeq uint64
}

var parsedPool = sync.Pool{New: func() any { return new(parsedBatch) }}

func parseBatch(batch service.MessageBatch) *parsedBatch {
	pb := parsedPool.Get().(*parsedBatch)
	if cap(pb.changes) < len(batch) {
		pb.changes = make([]parsedChange, 0, len(batch))
	}
	var last uint64
	note := func(pc parsedChange, m *service.Message) {
		pb.changes = append(pb.changes, pc)
		var n uint64
		if pc.err == nil {
			n = pc.c.meta.Epoch
			if seq := pc.c.meta.Seq; seq != 0 && (pb.turnSeq == 0 || n > pb.turnEpoch || n == pb.turnEpoch && seq < pb.turnSeq) {
				pb.turnEpoch, pb.turnSeq = n, seq
			}
		} else {
			n = messageEpoch(m) // writeBatch reports what it lacks
		}
		if n != last && n != 0 {
			last = n
			pb.epochs = append(pb.epochs, n)
		}
	}
	for _, m := range batch {
		merr := m.GetError()
		cs, ok, err := msg.ChangesOf(m)
		if ok && err == nil {
			if b, _ := m.AsBytes(); len(b) > 0 {
				// A processor after walshadow_decode wrote to it, meaning
				// to change rows it cannot see in this form.
				err = fmt.Errorf("change batch %d of run %d: a processor after walshadow_decode set its payload (%d bytes); processors placed after it need its messages: row", cs.Seq, cs.Epoch, len(b))
			}
		}
		switch {
		case err != nil:
			note(parsedChange{err: err, msgErr: merr, m: m}, m)
		case ok:
			pb.changes = slices.Grow(pb.changes, len(cs.Changes))
			for i := range cs.Changes {
				c, err := changeFrom(&cs.Changes[i])
				note(parsedChange{c: c, err: err, msgErr: merr, payload: cs.Payloads[i]}, m)
			}
		default:
			c, err := changeOf(m)
			note(parsedChange{c: c, err: err, msgErr: merr, m: m}, m)
		}
	}
	return pb
}

// release returns pb to the pool, holding no message.
func (pb *parsedBatch) release() {
	clear(pb.changes)
	*pb = parsedBatch{changes: pb.changes[:0], epochs: pb.epochs[:0]}
	parsedPool.Put(pb)
}

// staleRun is the newest of a batch's session runs, and whether any of
// them has stopped (benthos' batching policy may merge batches of two
// runs); o.mu held.
func (o *chOutput) staleRun(epochs []uint64) (newest uint64, stale bool) {
	for _, n := range epochs {
		newest = max(newest, n)
		if n <= o.fenced || !o.sess.Live(n) {
			stale = true
		}
	}
	return newest, stale
}

// messageEpoch is the session run a message was decoded in, from its
// strings (0: not said).
func messageEpoch(m *service.Message) uint64 {
	s, _ := m.MetaGet(msg.KeyEpoch)
	n, _ := strconv.ParseUint(s, 10, 64)
	return n
}

func (o *chOutput) writeBatch(ctx context.Context, parsed []parsedChange) error {
	var last time.Time
	var prev *parsedChange
	var prevChange change
	var lastCommit wal.LSN
	for i := range parsed {
		pc := &parsed[i]
		if err := pc.msgErr; err != nil {
			// An earlier processor failed on it: nothing of this batch may
			// count as written (the session restarts from its resume point).
			return fmt.Errorf("a message reached the output with a processing error: %w", err)
		}
		c, err := pc.c, pc.err
		if err != nil {
			return err
		}
		if c.commitLSN < o.writtenBefore {
			continue // applied before a restart (written.json)
		}
		lastCommit = c.commitLSN
		// An error of one table fails that table (contain); the batch goes
		// on unless it concerns every table.
		switch c.op {
		case msg.OperationSchema:
			if err := o.flushAll(ctx); err != nil {
				return err
			}
			if err := o.applyEvent(ctx, c); err != nil {
				if err := o.contain(ctx, c.oid, c.lsn, err); err != nil {
					return err
				}
			}
		case msg.OperationTruncate:
			if err := o.flushAll(ctx); err != nil {
				return err
			}
			if err := o.applyTruncate(ctx, c); err != nil {
				if err := o.contain(ctx, c.oid, c.lsn, err); err != nil {
					return err
				}
			}
			last = c.commitTime
		case msg.OperationInsert, msg.OperationUpdate, msg.OperationDelete:
			var pair *parsedChange
			if c.keyChanged && prev != nil && prevChange.op == msg.OperationDelete &&
				prevChange.oid == c.oid && prevChange.lsn == c.lsn {
				pair = prev
			}
			if err := o.addRow(ctx, pc, c, pair); err != nil {
				if err := o.contain(ctx, c.oid, c.lsn, err); err != nil {
					return err
				}
			}
			last = c.commitTime
		case msg.OperationFail:
			// The processor could not decode this relation's change.
			if err := o.applyFail(ctx, c); err != nil {
				return err
			}
		default:
			return fmt.Errorf("message at %s: unknown %s %q", c.lsn, msg.KeyOperation, c.op)
		}
		prev, prevChange = pc, c
	}
	if err := o.flushAll(ctx); err != nil {
		return err
	}
	// Every transaction committed before the last one seen here is now
	// whole on ClickHouse (the last may continue in the next batch).
	if lastCommit > o.writtenBefore {
		if err := saveWritten(o.s.stateDir, lastCommit); err != nil {
			return fmt.Errorf("recording the output's progress: %w", err)
		}
		o.writtenBefore = lastCommit
		o.loads.Prune(o.writtenBefore)
	}
	if !last.IsZero() {
		o.m.lag.Set(time.Since(last).Milliseconds())
	}
	return nil
}

// rowShape is a row's source shape: its descriptor version, resolved once.
type rowShape struct {
	desc    *desclog.Descriptor
	attnums map[string]int16 // live column name → attnum
	names   map[int16]string // the reverse
	inScope bool
}

// has reports whether the row's shape has a live column attnum.
func (s *rowShape) has(attnum int16) bool {
	_, ok := s.names[attnum]
	return ok
}

type shapeKey struct {
	oid     uint32
	version wal.LSN
}

// shapeOf returns the descriptor a row was decoded with. Descriptors in
// the log are immutable, so the memo only saves the lookup.
func (o *chOutput) shapeOf(oid uint32, version wal.LSN) (*rowShape, error) {
	k := shapeKey{oid, version}
	if o.lastShape != nil && o.lastShapeKey == k {
		return o.lastShape, nil // (a transaction's rows are mostly of one table)
	}
	if s := o.shapes[k]; s != nil {
		o.lastShapeKey, o.lastShape = k, s
		return s, nil
	}
	log := o.sess.DescLog()
	if log == nil {
		return nil, errors.New("the session's descriptor log is not open")
	}
	l := log.DescriptorByOidInDBAt(log.Identity().DbOid, oid, version)
	if l.Result != desclog.Present || l.Desc == nil {
		return nil, fmt.Errorf("relation %d has no shape at descriptor version %s in the descriptor log (%v)", oid, version, l.Result)
	}
	s := &rowShape{desc: l.Desc, attnums: make(map[string]int16, len(l.Desc.Columns)), names: make(map[int16]string, len(l.Desc.Columns)),
		inScope: o.scope.in(l.Desc.Namespace, l.Desc.Name) && replicable(l.Desc)}
	for _, c := range l.Desc.Columns {
		if !c.Dropped {
			s.attnums[c.Name] = c.Num
			s.names[c.Num] = c.Name
		}
	}
	if o.shapes == nil {
		o.shapes = map[shapeKey]*rowShape{}
	}
	o.shapes[k] = s
	return s, nil
}

// replicable: ordinary tables and partitions hold rows; partitioned
// parents, views, matviews and toast relations do not get a table, nor
// do temporary tables (their rows are not in the WAL; they are gone at
// the session's end).
func replicable(d *desclog.Descriptor) bool { return d.Kind == 'r' && d.Persistence != 't' }

// addRow converts one row change into its table's pending block. pair is
// the delete half of a key-changing update when pc is its update half.
func (o *chOutput) addRow(ctx context.Context, pc *parsedChange, c change, pair *parsedChange) error {
	shape, err := o.shapeOf(c.oid, c.version)
	if err != nil {
		return fmt.Errorf("%s at %s: %w", c.op, c.lsn, err)
	}
	if !shape.inScope || o.broken[c.oid] != "" || o.parkedNow(c.oid) || o.failedInBatch[c.oid] {
		// (A table that failed in this batch: its reload's snapshot,
		// taken after the batch's transactions committed, holds the rest.)
		return nil
	}
	if o.loads.Reflected(c.oid, c.commitLSN, c.xid) {
		return nil // in the table's initial load
	}
	ts, err := o.table(ctx, shape.desc, c.version)
	if err != nil {
		return err
	}
	if c.lsn < ts.agreed.ValidFrom && o.loads.Loading(c.oid) {
		// Older than the shape its load began under: committed before the
		// load's snapshot, so in the load.
		return nil
	}
	if c.lsn < ts.agreed.RefilledBefore && c.meta.Filenode != ts.agreed.RefilledFile {
		// A change the rewrite the table was rebuilt empty at reflects:
		// what it kept of the rows, it wrote into its new file.
		return nil
	}
	var id rowIdentity
	if ts.Layout == clickhouse.LayoutPhysical {
		if id, err = o.physicalIdentity(ts, c); err != nil {
			return err
		}
		if id.stale {
			o.m.superseded.Incr(1)
			return nil
		}
	}
	fields, err := pc.fields()
	if err != nil {
		return fmt.Errorf("%s of %s at %s: payload: %w", c.op, ts.label, c.lsn, err)
	}
	b := ts.pending()
	// The rows this change adds stand only when all went well: otherwise
	// they are dropped (a deferred row keeps only its marker).
	keep, err := o.fillRow(ctx, ts, shape, c, id, fields, pair)
	if keep >= 0 {
		b.Truncate(keep)
	}
	if err != nil || keep >= 0 {
		return err
	}
	if (b.Len() >= o.s.batchRows || b.Bytes() >= o.s.batchBytes) && !(c.op == msg.OperationDelete && c.keyChanged) {
		// (Never between the halves of a key-changing update: the update
		// takes its unchanged TOAST columns from the pending delete half.)
		return o.flush(ctx, ts)
	}
	return nil
}

// fillRow puts the change's row (after its marker, for an update of a
// physical table) into the table's block and ends it. keep is -1 when the
// row stands, else the pending rows to keep: the row, and its marker
// unless the row is deferred, are to be dropped.
func (o *chOutput) fillRow(ctx context.Context, ts *tableState, shape *rowShape, c change, id rowIdentity, fields map[string]any, pair *parsedChange) (keep int, err error) {
	b := ts.block
	mark := b.Len()
	if id.hasOld {
		// The tuple the update replaced is gone (its marker goes first,
		// while no row is open).
		if err := ts.addMarker(c, id.filenode, id.oldBlock, id.oldOff); err != nil {
			return mark, err
		}
	}
	// The columns the shape's rows had so far, looked up by name; then,
	// if the payload has others, every one of its columns.
	plan := ts.planOf(shape)
	found := 0
	for _, pc := range plan.known {
		v, ok := fields[pc.name]
		if !ok {
			continue
		}
		found++
		if pc.idx < 0 {
			continue
		}
		if err := b.Put(pc.idx, v); err != nil {
			return mark, fmt.Errorf("%s of %s at %s: column %s: %w", c.op, ts.label, c.lsn, ts.Cols[pc.idx].Name, err)
		}
	}
	if found < len(fields) {
		for name, v := range fields {
			if _, known := plan.index[name]; known {
				continue
			}
			idx, err := o.columnIndex(ts, shape, c, name)
			if err != nil {
				return mark, err
			}
			if idx < 0 {
				continue
			}
			if err := b.Put(idx, v); err != nil {
				return mark, fmt.Errorf("%s of %s at %s: column %s: %w", c.op, ts.label, c.lsn, ts.Cols[idx].Name, err)
			}
		}
	}
	isDelete := c.op == msg.OperationDelete
	if ts.Layout == clickhouse.LayoutPhysical {
		ts.putTID(id.filenode, id.block, id.off)
	}
	if isDelete {
		for _, i := range ts.KeyIdx {
			if !b.Filled(i) {
				return mark, fmt.Errorf("delete of %s at %s: the old row lacks sorting-key column %s (the key must be the replica identity or part of it)", ts.label, c.lsn, ts.Cols[i].Name)
			}
		}
		for i, mc := range ts.agreed.Columns {
			if b.Filled(i) {
				continue
			}
			if len(ts.KeyIdx) == 0 && !shape.has(mc.Attnum) {
				// A change log's delete is the whole deleted image: a column
				// added after the row's shape reads its missing value, as
				// the inserted image of the row does.
				v, err := o.absentValue(ts, shape, c, mc)
				if err != nil {
					return mark, err
				}
				b.PutConverted(i, v)
				continue
			}
			zero, err := clickhouse.ConvertValue(ts.Cols[i], clickhouse.Zero)
			if err != nil {
				return mark, fmt.Errorf("delete of %s at %s: column %s: %w", ts.label, c.lsn, ts.Cols[i].Name, err)
			}
			b.PutConverted(i, zero)
		}
	}
	var deferred *deferredToast
	if len(c.omitted) > 0 && !isDelete {
		var old []any
		if id.hasOld {
			// The update's earlier version is the tuple it replaced.
			old = make([]any, len(ts.Cols))
			ts.SetTID(old, id.filenode, id.oldBlock, id.oldOff)
		}
		if err := o.carryUnchanged(ctx, ts, shape, c, pair, old); err != nil {
			if errors.Is(err, errSuperseded) {
				o.m.superseded.Incr(1)
				return mark, nil // (its marker too is dropped)
			}
			var d *deferredToast // (on the heap only when it is one)
			if !errors.As(err, &d) {
				return mark, err
			}
			deferred = d
			for _, idx := range deferred.want {
				b.PutConverted(idx, nil) // filled at the load's publish
			}
		}
	}
	for i := range ts.agreed.Columns {
		if b.Filled(i) {
			continue
		}
		v, err := o.absentValue(ts, shape, c, ts.agreed.Columns[i])
		if err != nil {
			return mark, err
		}
		b.PutConverted(i, v)
	}
	ts.putVersion(c, isDelete)
	if ts.SeqIdx >= 0 {
		// (_lsn, _seq) names the image: a replay after a restart writes
		// the same pair, and the change-log row replaces itself.
		if c.recordIndex < 0 {
			return mark, fmt.Errorf("%s of %s at %s: metadata %s is missing (a table without a key needs it to tell the rows of one WAL record apart)", c.op, ts.label, c.lsn, msg.KeyRecordIndex)
		}
		clickhouse.PutValue(b, ts.SeqIdx, uint32(c.recordIndex))
	}
	if deferred != nil {
		o.deferred = append(o.deferred, load.DeferredRow{Oid: c.oid, Row: b.Row(b.Len()), Key: deferred.key, Want: deferred.want,
			LSN: c.lsn, Commit: c.commitLSN, XID: c.xid})
		return b.Len(), nil // the row waits; its marker, if any, is written
	}
	if err := ts.endRow(); err != nil {
		return mark, err
	}
	return -1, nil
}

// columnIndex maps a payload column (named as in the row's shape) to its
// index in the insert, or -1 when it is not replicated.
func (o *chOutput) columnIndex(ts *tableState, shape *rowShape, c change, name string) (int, error) {
	attnum, ok := shape.attnums[name]
	if !ok {
		return 0, fmt.Errorf("%s of %s at %s: column %q is not in the relation's shape at version %s", c.op, ts.label, c.lsn, name, c.version)
	}
	if idx, ok := ts.ByAttnum[attnum]; ok {
		ts.planOf(shape).learn(name, idx)
		return idx, nil
	}
	if _, known := ts.shape[attnum]; known {
		ts.planOf(shape).learn(name, -1)
		return -1, nil // excluded by configuration
	}
	if ts.agreed.ValidFrom > c.lsn {
		// The agreement is newer than this row (a replay after a restart):
		// the column was dropped since.
		return -1, nil
	}
	return 0, fmt.Errorf("%s of %s at %s: column %q (attnum %d) is not in the agreed shape (version %s): a schema change was not applied", c.op, ts.label, c.lsn, name, attnum, ts.agreed.ValidFrom)
}

// absentValue is the value of a mapped column the row does not carry: the
// row was written before the column existed (a replay older than the
// agreement), so PostgreSQL reads it as the column's missing value.
func (o *chOutput) absentValue(ts *tableState, shape *rowShape, c change, mc clickhouse.MappedColumn) (any, error) {
	if name, live := shape.names[mc.Attnum]; live {
		return nil, fmt.Errorf("%s of %s at %s: the payload has no value for column %q", c.op, ts.label, c.lsn, name)
	}
	src := ts.shape[mc.Attnum]
	var v any
	if src != nil && src.HasMissing && src.Missing != nil {
		v = *src.Missing
	}
	cv, err := clickhouse.ConvertValue(mc.Spec, v)
	if err != nil {
		return nil, fmt.Errorf("%s of %s at %s: column %s (added after the row was written): %w", c.op, ts.label, c.lsn, mc.Spec.Name, err)
	}
	return cv, nil
}

// flush inserts one table's pending rows.
func (o *chOutput) flush(ctx context.Context, ts *tableState) error {
	if ts.rowCount() == 0 {
		return nil
	}
	start := time.Now()
	budget := o.s.insertTimeout*time.Duration(o.s.retry.MaxAttempts) + o.s.retry.Max*time.Duration(o.s.retry.MaxAttempts)
	ictx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	err := o.conn.InsertBlockRetrying(ictx, ts.agreed.Target, ts.block, o.s.retry, func(attempt int, err error) {
		o.m.retries.Incr(1)
		o.log.Warnf("insert into %s failed (attempt %d), retrying: %v", ts.label, attempt, err)
	})
	if err != nil {
		return err
	}
	o.m.insertLatency.Timing(time.Since(start).Nanoseconds())
	o.m.inserts.Incr(1, ts.label)
	o.m.rows.Incr(int64(ts.block.Len()), ts.label)
	o.m.bytes.Incr(int64(ts.block.Bytes()), ts.label)
	ts.reset()
	return nil
}

// flushAll inserts every pending block, tables in parallel up to
// max_in_flight. A block ClickHouse refuses fails its table (contain),
// the others are in.
func (o *chOutput) flushAll(ctx context.Context) error {
	var pending []*tableState
	for _, ts := range o.tables {
		if ts.rowCount() > 0 {
			pending = append(pending, ts)
		}
	}
	if len(pending) == 0 {
		return nil
	}
	errs := make([]error, len(pending))
	if len(pending) == 1 || o.s.maxInFlight == 1 {
		for i, ts := range pending {
			errs[i] = o.flush(ctx, ts)
		}
	} else {
		sem := make(chan struct{}, o.s.maxInFlight)
		var wg sync.WaitGroup
		for i, ts := range pending {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				errs[i] = o.flush(ctx, ts)
			}()
		}
		wg.Wait()
	}
	var global []error
	for i, err := range errs {
		if err == nil {
			continue
		}
		if !tableLocal(err) {
			global = append(global, err)
			continue
		}
		ts := pending[i]
		// The block's first change: where the table stopped being written.
		if err := o.contain(ctx, ts.agreed.Oid, wal.LSN(ts.lsnAt(0)), fmt.Errorf("inserting into %s: %w", ts.label, err)); err != nil {
			global = append(global, err)
		}
	}
	return errors.Join(global...)
}

// equalValue compares two converted values of one column (pointers by
// what they point to, decimals numerically).
func equalValue(a, b any) bool {
	ra, rb := reflect.ValueOf(a), reflect.ValueOf(b)
	for ra.Kind() == reflect.Pointer && !ra.IsNil() {
		ra = ra.Elem()
	}
	for rb.Kind() == reflect.Pointer && !rb.IsNil() {
		rb = rb.Elem()
	}
	if !ra.IsValid() || !rb.IsValid() {
		return ra.IsValid() == rb.IsValid()
	}
	if da, ok := ra.Interface().(decimal.Decimal); ok {
		if db, ok := rb.Interface().(decimal.Decimal); ok {
			return da.Equal(db)
		}
	}
	return reflect.DeepEqual(ra.Interface(), rb.Interface())
}
