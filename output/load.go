package output

// The initial load: tables in scope that this output has never written
// (no agreement yet when it starts) are filled with the rows the source
// already holds, in the background, while changes keep streaming.
//
// Handoff. A load picks its coverage position S and a snapshot P such that
// every transaction P does not see has all its changes after S, and they
// are all streamed to this output: it reads L0 = pg_current_wal_lsn(),
// assigns itself an xid N0 and commits, waits until no transaction with an
// xid at or below N0 is running, then takes P (copy) or starts the
// BASE_BACKUP (base_backup). A transaction P does not see got its xid after
// N0, so its first record is after L0; S = L0 - 1 (WAL records start on
// 8-byte boundaries, so no change carries S itself). Loaded rows carry
// _lsn = S, so every change not in the load outranks them; a change that
// is in the load and also streamed carries its own version, never newer
// than what the load holds for that row, or the newest change of the row
// when it is newer. Tables without a key are change logs (no versions):
// there only the changes of transactions P does not see are kept, by xid.
//
// Tables. Until its load is published a relation's changes go to its
// delta table <table>__wsdelta_<oid> (its agreement targets it), and the
// load's rows to the staging table <table>__wsload_<oid>, created AS the
// delta table: the configured name only ever holds a whole table.
// Publishing runs between two batches (the output's lock): the changes
// streamed into the delta table since S are copied into the staging table,
// which takes the configured name in one RENAME; the agreement follows and
// the delta table is dropped. A table found under the name that this output
// did not publish is kept aside as <table>__wsreplaced_<oid> (EXCHANGE
// TABLES on an Atomic database, else one RENAME of both). A schema change,
// TRUNCATE or replica identity change of the table during its load reloads
// it with a new snapshot; a DROP cancels it and drops the delta table.
//
// Ledger. state_dir/loads.json (internal/load) records each load: a crash
// while loading reloads the table (the staging table is dropped first); a
// crash while publishing finishes the publish from what ClickHouse holds.
// A table is published whole or not at all.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/load"
	"github.com/walshadow/walshadow/internal/wal"
)

// loader runs the output's initial loads.
type loader struct {
	o       *chOutput
	ls      loadSettings
	ledger  *load.Ledger
	limiter *load.Limiter
	m       *loadMetrics
	log     *service.Logger

	tables  chan struct{} // tables loading at once
	streams chan struct{} // COPY streams at once

	ctx    context.Context // cancelled by close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	runs map[uint32]*loadRun
	// gen counts invalidations per relation: a load publishes only if no
	// schema change, TRUNCATE or DROP of its table happened since it began.
	gen map[uint32]uint64
	// filters: per relation, the snapshot of its load once taken: the
	// streamed changes of transactions it saw are in the load.
	filters map[uint32]pgSnapshot
	// nfilters is len(filters), read without the lock: reflected runs
	// for every streamed row, and after the loads there is no filter.
	nfilters atomic.Int32
	// deferred: updates held until their table's load is published
	// (load_deferred.go).
	deferred map[uint32][]deferredRow
}

// loadRun is one table's load in progress.
type loadRun struct {
	oid     uint32
	cancel  context.CancelFunc
	dropped bool
}

func newLoader(o *chOutput, ls loadSettings, ledger *load.Ledger, m *service.Metrics) *loader {
	ctx, cancel := context.WithCancel(context.Background())
	return &loader{o: o, ls: ls, ledger: ledger, limiter: load.NewLimiter(ls.maxRate), m: newLoadMetrics(m), log: o.log,
		tables: make(chan struct{}, ls.workers), streams: make(chan struct{}, ls.workers),
		ctx: ctx, cancel: cancel, runs: map[uint32]*loadRun{}, gen: map[uint32]uint64{}, filters: map[uint32]pgSnapshot{}}
}

// restoreFilters reads the snapshots of the ledger's loads whose
// transactions may still be streamed (a restart replays from the session's
// resume point, never below writtenBefore).
func (l *loader) restoreFilters(writtenBefore wal.LSN) error {
	for _, e := range l.ledger.All() {
		if e.Snapshot == "" || e.SeenBy <= writtenBefore {
			continue
		}
		snap, err := parsePGSnapshot(e.Snapshot)
		if err != nil {
			return fmt.Errorf("%s: the load of %s.%s: %w", load.LedgerFile, e.Schema, e.Table, err)
		}
		snap.seenBy = e.SeenBy
		l.setFilter(e.Oid, snap)
	}
	return nil
}

// setFilter records the snapshot a load of oid took.
func (l *loader) setFilter(oid uint32, snap pgSnapshot) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.filters[oid] = snap
	l.nfilters.Store(int32(len(l.filters)))
}

// dropFilterLocked forgets oid's snapshot (l.mu held), keeping nfilters
// equal to len(filters).
func (l *loader) dropFilterLocked(oid uint32) {
	delete(l.filters, oid)
	l.nfilters.Store(int32(len(l.filters)))
}

// reflected reports whether the streamed transaction xid, committed at
// commit, is in the load of oid: committed before the load's snapshot was
// taken and seen by it. Its changes are then skipped (its rows are loaded;
// replaying its TRUNCATE would remove rows the load holds).
func (l *loader) reflected(oid uint32, commit wal.LSN, xid uint32) bool {
	if l == nil || l.nfilters.Load() == 0 {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	snap, ok := l.filters[oid]
	return ok && commit < snap.seenBy && snap.sees(xid)
}

// prune forgets the snapshots whose transactions are all written.
func (l *loader) prune(writtenBefore wal.LSN) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for oid, snap := range l.filters {
		if snap.seenBy <= writtenBefore {
			l.dropFilterLocked(oid)
		}
	}
}

// close stops every load (they resume from the ledger at the next start).
func (l *loader) close() {
	l.cancel()
	l.wg.Wait()
}

// deltaTarget is where the changes of a relation whose load is not yet
// published go (false: none, its configured target).
func (l *loader) deltaTarget(oid uint32) (clickhouse.Target, bool) {
	if l == nil {
		return clickhouse.Target{}, false
	}
	e, ok := l.ledger.Get(oid)
	if !ok || e.Phase == load.PhaseDone {
		return clickhouse.Target{}, false
	}
	return clickhouse.Target{Database: e.Database, Table: deltaName(e.Target, oid)}, true
}

// resume finishes interrupted publishes and starts every load not done.
// It runs in Connect, under the output's lock, after reconciliation.
func (l *loader) resume(ctx context.Context) error {
	var backup []load.Entry
	for _, e := range l.ledger.All() {
		switch e.Phase {
		case load.PhaseDone:
			continue
		case load.PhasePublishing:
			if err := l.recoverPublish(ctx, e); err != nil {
				return fmt.Errorf("finishing the interrupted publish of %s.%s: %w", e.Schema, e.Table, err)
			}
			continue
		}
		a := l.o.store.Get(e.Oid)
		if a == nil || a.Dropped || l.o.interruptedReload(a) {
			// Dropped before its load finished: nothing to publish. (Or a
			// reload interrupted before its agreement moved, of a relation
			// reconcileAll no longer follows: its table stays as agreed.)
			if err := l.discard(ctx, e); err != nil {
				return err
			}
			continue
		}
		// (A relation out of scope had its load dropped by
		// leaveScopeAtStart, before this.)
		if l.byBackup(e, a) {
			backup = append(backup, e)
			continue
		}
		l.launch(e)
	}
	if len(backup) > 0 {
		l.startBackupPass(backup)
	}
	return nil
}

// byBackup: a base_backup load of a table with a key (a keyless one is
// copied: a fuzzy page walk cannot tell which of its rows the stream also
// carries).
func (l *loader) byBackup(e load.Entry, a *clickhouse.Agreed) bool {
	return e.Mode == load.ModeBaseBackup && a != nil && clickhouse.LayoutOf(a.OrderBy) == clickhouse.LayoutKeyed
}

// launch starts one table's load (a base backup pass of its own, or a
// copy).
func (l *loader) launch(e load.Entry) {
	l.o.states.set(describeLoad(e), stateLoading)
	if l.byBackup(e, l.o.store.Get(e.Oid)) {
		l.startBackupPass([]load.Entry{e})
		return
	}
	l.start(e.Oid, func(ctx context.Context) error { return l.loadCopy(ctx, e.Oid) })
}

// running reports whether a load of oid has a goroutine (a cancelled one
// may still be discarding its staging table).
func (l *loader) running(oid uint32) bool {
	if l == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.runs[oid]
	return ok
}

// start runs one table's load until it is published, retrying failures
// with a backoff; an invalidation restarts it from scratch.
func (l *loader) start(oid uint32, attempt func(ctx context.Context) error) {
	l.mu.Lock()
	if _, running := l.runs[oid]; running {
		l.mu.Unlock()
		return
	}
	run := &loadRun{oid: oid}
	l.runs[oid] = run
	l.mu.Unlock()
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer func() {
			l.mu.Lock()
			delete(l.runs, oid)
			l.mu.Unlock()
		}()
		l.runTable(run, attempt)
	}()
}

func (l *loader) runTable(run *loadRun, attempt func(ctx context.Context) error) {
	backoff := 2 * time.Second
	for {
		select {
		case l.tables <- struct{}{}:
		case <-l.ctx.Done():
			return
		}
		ctx, cancel := context.WithCancel(l.ctx)
		l.mu.Lock()
		run.cancel = cancel
		dropped := run.dropped
		l.mu.Unlock()
		var err error
		gen := l.generation(run.oid)
		if !dropped {
			l.m.running.Incr(1)
			err = attempt(ctx)
			l.m.running.Decr(1)
		}
		if err != nil && l.ctx.Err() == nil && l.generation(run.oid) != gen {
			err = fmt.Errorf("%w: %w", errReload, err) // cancelled by invalidate
		}
		cancel()
		<-l.tables
		if l.ctx.Err() != nil {
			return
		}
		l.mu.Lock()
		dropped = run.dropped
		l.mu.Unlock()
		if dropped {
			if e, ok := l.ledger.Get(run.oid); ok {
				if err := l.discard(l.ctx, e); err != nil {
					l.log.Errorf("initial load of %s.%s: %v", e.Schema, e.Table, err)
				}
			}
			return
		}
		if err == nil {
			return
		}
		e, _ := l.ledger.Get(run.oid)
		if errors.Is(err, errReload) {
			l.log.Infof("initial load of %s.%s: %v: loading it again", e.Schema, e.Table, err)
			backoff = 2 * time.Second
			// The change may still be on its way from the stream.
			select {
			case <-time.After(time.Second):
			case <-l.ctx.Done():
				return
			}
			continue
		}
		if widened, werr := l.o.widenLoad(l.ctx, run.oid, err); werr != nil {
			err = fmt.Errorf("%w; widening the column failed: %w", err, werr)
		} else if widened {
			continue // its delta table is new, the load starts over
		}
		l.m.failures.Incr(1, qualified(e.Schema, e.Table))
		l.log.Errorf("initial load of %s.%s failed (attempt %d), retrying in %s: %v", e.Schema, e.Table, e.Attempt, backoff, err)
		e.LastError = err.Error()
		if perr := l.ledger.Put(e); perr != nil {
			l.log.Errorf("initial load of %s.%s: recording the failure: %v", e.Schema, e.Table, perr)
		}
		select {
		case <-time.After(backoff):
		case <-l.ctx.Done():
			return
		}
		backoff = min(2*backoff, 2*time.Minute)
	}
}

// errReload: the table changed during its load (schema change, TRUNCATE);
// the load starts over with a new snapshot.
var errReload = errors.New("the table changed during its load")

// invalidate is called, under the output's lock, after a schema event or
// TRUNCATE of a relation was applied: a load of it in progress starts over.
func (l *loader) invalidate(oid uint32) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gen[oid]++
	if run := l.runs[oid]; run != nil && run.cancel != nil {
		run.cancel()
	}
}

// dropped is called, under the output's lock, when a relation is dropped:
// its load stops and its staging table goes.
func (l *loader) dropped(ctx context.Context, oid uint32) error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	l.gen[oid]++
	run := l.runs[oid]
	if run != nil {
		run.dropped = true
		if run.cancel != nil {
			run.cancel()
		}
	}
	l.mu.Unlock()
	if run != nil {
		return nil // its goroutine discards the load
	}
	if e, ok := l.ledger.Get(oid); ok && e.Phase != load.PhaseDone {
		return l.discard(ctx, e)
	}
	return nil
}

// generation is the relation's invalidation count.
func (l *loader) generation(oid uint32) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.gen[oid]
}

// discard drops a load's staging table and forgets it.
func (l *loader) discard(ctx context.Context, e load.Entry) error {
	l.takeDeferred(e.Oid)
	if e.Staging != "" {
		if err := l.o.conn.Exec(ctx, clickhouse.DropTable(clickhouse.Target{Database: e.Database, Table: e.Staging})); err != nil {
			return fmt.Errorf("dropping the staging table of %s.%s: %w", e.Schema, e.Table, err)
		}
	}
	return l.ledger.Delete(e.Oid)
}

// loading reports whether oid has a load not yet done (its target table
// holds only streamed changes so far).
func (l *loader) loading(oid uint32) bool {
	if l == nil {
		return false
	}
	e, ok := l.ledger.Get(oid)
	return ok && e.Phase != load.PhaseDone
}

// The load's side tables of target: the staging table the load fills, the
// delta table the stream writes until the load is published, the name a
// table found under the target's name at publish is moved to, and the
// name a reload moves this output's own stale table to before dropping it.
func stagingName(target string, oid uint32) string {
	return fmt.Sprintf("%s%s%d", target, loadStagingMarker, oid)
}

func deltaName(target string, oid uint32) string {
	return fmt.Sprintf("%s%s%d", target, loadDeltaMarker, oid)
}

func staleName(target string, oid uint32) string {
	return fmt.Sprintf("%s%s%d", target, loadStaleMarker, oid)
}

func replacedName(target string, oid uint32) string {
	return fmt.Sprintf("%s%s%d", target, loadReplacedMarker, oid)
}

// prepareStaging (re)creates the staging table as a copy of the target's
// structure and records the attempt.
func (l *loader) prepareStaging(ctx context.Context, e *load.Entry, a *clickhouse.Agreed) error {
	if want := (clickhouse.Target{Database: e.Database, Table: deltaName(e.Target, e.Oid)}); a.Target != want {
		return fmt.Errorf("%s.%s is agreed on %s, not on its load's delta table %s", e.Schema, e.Table,
			clickhouse.QuoteQualified(a.Target), clickhouse.QuoteQualified(want))
	}
	if err := l.makeStaging(ctx, e, a); err != nil {
		return err
	}
	l.mu.Lock()
	l.dropFilterLocked(e.Oid) // a new attempt takes a new snapshot
	l.mu.Unlock()
	e.Snapshot, e.SeenBy = "", 0
	e.Attempt++
	e.Phase = load.PhaseLoading
	e.Rows, e.Bytes = 0, 0
	e.StartedAt, e.FinishedAt = time.Now().UTC(), time.Time{}
	e.LastError = ""
	return l.ledger.Put(*e)
}

// makeStaging (re)creates e's staging table with the structure of its
// delta table a.Target, under the output's lock: a batch that fails or
// reshapes the table drops its delta table and agrees on a new one in one
// step, which the copy of its structure must not fall between.
func (l *loader) makeStaging(ctx context.Context, e *load.Entry, a *clickhouse.Agreed) error {
	staging := clickhouse.Target{Database: e.Database, Table: e.Staging}
	stmts := []string{
		clickhouse.DropTable(staging),
		fmt.Sprintf("CREATE TABLE %s AS %s", clickhouse.QuoteQualified(staging), clickhouse.QuoteQualified(a.Target)),
	}
	l.o.mu.Lock()
	defer l.o.mu.Unlock()
	if now := l.o.store.Get(e.Oid); now == nil || now.Dropped || now.ValidFrom != a.ValidFrom || now.Target != a.Target {
		return fmt.Errorf("%w: its agreement changed before the staging table was made", errReload)
	}
	if l.o.conn == nil {
		return fmt.Errorf("the output is not connected")
	}
	for _, s := range stmts {
		if err := l.o.conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("preparing the staging table %s: %w", clickhouse.QuoteQualified(staging), err)
		}
	}
	return nil
}

// progressLogger logs a load's progress every few seconds until stop, and
// records it in the ledger through persist (nil: not recorded).
func (l *loader) progressLogger(name string, p *load.Progress, persist func()) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(loadProgressInterval * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				s := p.Snapshot(now)
				l.log.Infof("initial load of %s: %s", name, s)
				l.m.observe(name, s)
				if persist != nil {
					persist()
				}
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// loadedRowMeta fills a loaded row's synthetic columns: _lsn = S, _xid 0
// and commit time 0 (the row's last writer is not known), not deleted,
// and for a change log a sequence number unique within the load.
func loadedRowMeta(ts *tableState, row []any, s wal.LSN, seq uint32) {
	// (A physical table's row identity is the loaded tuple's: set by the
	// caller.)
	row[ts.lsnIdx] = uint64(s)
	row[ts.xidIdx] = uint32(0)
	if ts.cols[ts.tsIdx].Name == clickhouse.ColCommitTS {
		row[ts.tsIdx] = time.Unix(0, 0).UTC()
	} else {
		row[ts.tsIdx] = uint64(0)
	}
	row[ts.delIdx] = uint8(0)
	if ts.seqIdx >= 0 {
		row[ts.seqIdx] = seq
	}
}

// stagingInserter batches one table's loaded rows into the staging table.
// One block is inserted while the next one fills: reading the source and
// ClickHouse's insert overlap.
type stagingInserter struct {
	l        *loader
	ts       *tableState
	target   clickhouse.Target
	rows     [][]any
	bytes    int
	inflight chan error // the block being inserted, nil when none
}

func (si *stagingInserter) add(ctx context.Context, row []any, size int) error {
	si.rows = append(si.rows, row)
	si.bytes += size
	if len(si.rows) >= si.l.o.s.batchRows || si.bytes >= si.l.o.s.batchBytes {
		return si.send(ctx)
	}
	return nil
}

// send starts inserting the pending block once the previous one is in.
func (si *stagingInserter) send(ctx context.Context) error {
	if len(si.rows) == 0 {
		return nil
	}
	if err := si.wait(); err != nil {
		return err
	}
	rows := si.rows
	si.rows, si.bytes = make([][]any, 0, len(rows)), 0
	done := make(chan error, 1)
	si.inflight = done
	go func() { done <- si.insert(ctx, rows) }()
	return nil
}

// wait waits for the block being inserted.
func (si *stagingInserter) wait() error {
	if si.inflight == nil {
		return nil
	}
	err := <-si.inflight
	si.inflight = nil
	return err
}

// flush inserts every pending row and waits until all are in.
func (si *stagingInserter) flush(ctx context.Context) error {
	if err := si.send(ctx); err != nil {
		return err
	}
	return si.wait()
}

// abandon waits for an insert in flight (its context is ending).
func (si *stagingInserter) abandon() { _ = si.wait() }

func (si *stagingInserter) insert(ctx context.Context, rows [][]any) error {
	o := si.l.o
	err := o.conn.InsertRetrying(ctx, si.target, si.ts.cols, rows, o.s.retry, func(attempt int, err error) {
		o.m.retries.Incr(1)
		si.l.log.Warnf("insert into %s failed (attempt %d), retrying: %v", clickhouse.QuoteQualified(si.target), attempt, err)
	})
	if err != nil {
		return fmt.Errorf("inserting loaded rows into %s: %w", clickhouse.QuoteQualified(si.target), err)
	}
	return nil
}

// describeLoad names a load in logs.
func describeLoad(e load.Entry) string {
	return qualified(e.Schema, e.Table)
}
