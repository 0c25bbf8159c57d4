package load

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/walshadow/walshadow/internal/clickhouse"
)

// Engine runs an output's initial loads (see the package doc).
type Engine struct {
	cfg     Config
	src     Source
	dst     Destination
	store   Agreements
	ledger  *Ledger
	limiter *Limiter
	sources *sourcePool // source connections between loads
	locked  *lockQueue  // the loads' work under the output's lock, in shared holds
	m       *loadMetrics
	log     *service.Logger

	tables  chan struct{} // tables loading at once
	streams chan struct{} // COPY streams at once

	ctx    context.Context // cancelled by Close
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
	// nfilters is len(filters), read without the lock: Reflected runs
	// for every streamed row, and after the loads there is no filter.
	nfilters atomic.Int32
	// deferred: updates held until their table's load is published
	// (deferred.go).
	deferred map[uint32][]DeferredRow
	// restartReason: per relation, the reload reason of the invalidation
	// that will start its running load over (InvalidateFor; none:
	// ReloadChangedDuringLoad).
	restartReason map[uint32]string
}

// loadRun is one table's load in progress.
type loadRun struct {
	oid     uint32
	cancel  context.CancelFunc
	dropped bool
	// relaunch: Launch was called while it ran (the entry is checked
	// when it ends: a load not done nor parked starts again).
	relaunch bool
}

// New makes the engine of the loads ledger records, loading from src into
// dst, whose agreed shapes store holds. No load runs until Resume or
// Launch (only the closing of idle source connections).
func New(cfg Config, src Source, dst Destination, store Agreements, ledger *Ledger, log *service.Logger, m *service.Metrics) *Engine {
	ctx, cancel := context.WithCancel(context.Background())
	l := &Engine{cfg: cfg, src: src, dst: dst, store: store, ledger: ledger, limiter: NewLimiter(cfg.MaxRate), m: newLoadMetrics(m), log: log,
		tables: make(chan struct{}, cfg.Workers), streams: make(chan struct{}, cfg.Workers),
		ctx: ctx, cancel: cancel, runs: map[uint32]*loadRun{}, gen: map[uint32]uint64{}, filters: map[uint32]pgSnapshot{},
		restartReason: map[uint32]string{}}
	// A load holds its coordinator and up to Workers COPY streams.
	l.sources = newSourcePool(2*max(cfg.Workers, 1), l.connectSource)
	l.locked = &lockQueue{hold: dst.WithLock, ctx: ctx}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		l.sources.run(ctx)
	}()
	return l
}

// Ledger is the loads' durable record.
func (l *Engine) Ledger() *Ledger { return l.ledger }

// Close stops every load (they resume from the ledger at the next start).
func (l *Engine) Close() {
	l.cancel()
	l.wg.Wait()
}

// DeltaTarget is where the changes of a relation whose load is not yet
// published go (false: none, its configured target).
func (l *Engine) DeltaTarget(oid uint32) (clickhouse.Target, bool) {
	if l == nil {
		return clickhouse.Target{}, false
	}
	e, ok := l.ledger.Get(oid)
	if !ok || e.Phase == PhaseDone {
		return clickhouse.Target{}, false
	}
	return clickhouse.Target{Database: e.Database, Table: DeltaName(e.Target, oid)}, true
}

// Resume finishes interrupted publishes and starts every load not done.
// It runs in Connect, under the output's lock, after reconciliation.
func (l *Engine) Resume(ctx context.Context) error {
	var backup []Entry
	for _, e := range l.ledger.All() {
		switch e.Phase {
		case PhaseDone:
			continue
		case PhasePublishing:
			if err := l.recoverPublish(ctx, e); err != nil {
				return fmt.Errorf("finishing the interrupted publish of %s.%s: %w", e.Schema, e.Table, err)
			}
			continue
		}
		a := l.store.Get(e.Oid)
		if a == nil || a.Dropped || l.InterruptedReload(a) {
			// Dropped before its load finished: nothing to publish. (Or a
			// reload interrupted before its agreement moved, of a relation
			// reconcileAll no longer follows: its table stays as agreed.)
			if err := l.Discard(ctx, e); err != nil {
				return err
			}
			continue
		}
		// (A relation out of scope had its load dropped by
		// leaveScopeAtStart, before this.)
		if e.Parked != nil {
			// Parked: the output decided before this that nothing which
			// could cure it changed (it un-parked the others).
			continue
		}
		if l.byBackup(e, a) {
			backup = append(backup, e)
			continue
		}
		l.Launch(e)
	}
	if len(backup) > 0 {
		l.startBackupPass(backup)
	}
	return nil
}

// byBackup: a base_backup load of a table with a key (a keyless one is
// copied: a fuzzy page walk cannot tell which of its rows the stream also
// carries).
func (l *Engine) byBackup(e Entry, a *clickhouse.Agreed) bool {
	return e.Mode == ModeBaseBackup && a != nil && clickhouse.LayoutOf(a.OrderBy) == clickhouse.LayoutKeyed
}

// Launch starts one table's load (a base backup pass of its own, or a
// copy).
func (l *Engine) Launch(e Entry) {
	l.mu.Lock()
	delete(l.restartReason, e.Oid)
	l.mu.Unlock()
	l.dst.SetState(describeLoad(e), true)
	if l.byBackup(e, l.store.Get(e.Oid)) {
		l.startBackupPass([]Entry{e})
		return
	}
	l.start(e.Oid, func(ctx context.Context) error { return l.loadCopy(ctx, e.Oid) })
}

// Running reports whether a load of oid has a goroutine (a cancelled one
// may still be discarding its staging table).
func (l *Engine) Running(oid uint32) bool {
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
func (l *Engine) start(oid uint32, attempt func(ctx context.Context) error) {
	l.mu.Lock()
	if run, running := l.runs[oid]; running {
		// Its goroutine goes on; if it is ending (parked a moment ago,
		// and un-parked since), it starts again.
		run.relaunch = true
		l.mu.Unlock()
		return
	}
	run := &loadRun{oid: oid}
	l.runs[oid] = run
	l.mu.Unlock()
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		l.runTable(run, attempt)
		l.mu.Lock()
		delete(l.runs, oid)
		again := run.relaunch && !run.dropped && l.ctx.Err() == nil
		l.mu.Unlock()
		if e, ok := l.ledger.Get(oid); again && ok && e.Phase == PhaseLoading && e.Parked == nil {
			l.start(oid, attempt)
		}
	}()
}

func (l *Engine) runTable(run *loadRun, attempt func(ctx context.Context) error) {
	backoff := 2 * time.Second
	for {
		if e, ok := l.ledger.Get(run.oid); ok && e.Parked != nil {
			return // parked (by the output, or below): un-parking launches it again
		}
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
			if finishing, ferr := l.finishPublishing(ctx, run.oid); finishing {
				err = ferr
			} else {
				err = attempt(ctx)
			}
			l.m.running.Decr(1)
		}
		invalidated := false
		if err != nil && l.ctx.Err() == nil && l.generation(run.oid) != gen {
			err = fmt.Errorf("%w: %w", errReload, err) // cancelled by invalidate
			invalidated = true
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
				if err := l.Discard(l.ctx, e); err != nil {
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
			if e.Parked != nil {
				return // parked while it ran
			}
			l.log.Infof("initial load of %s.%s: %v: loading it again", e.Schema, e.Table, err)
			if invalidated {
				l.mu.Lock()
				reason, ok := l.restartReason[run.oid]
				delete(l.restartReason, run.oid)
				l.mu.Unlock()
				if !ok {
					reason = ReloadChangedDuringLoad
				}
				l.CountReload(reason)
			}
			backoff = 2 * time.Second
			// The change may still be on its way from the stream.
			select {
			case <-time.After(time.Second):
			case <-l.ctx.Done():
				return
			}
			continue
		}
		if widened, werr := l.dst.Widen(l.ctx, run.oid, err); werr != nil {
			err = fmt.Errorf("%w; widening the column failed: %w", err, werr)
		} else if widened {
			l.mu.Lock()
			delete(l.restartReason, run.oid)
			l.mu.Unlock()
			l.CountReload(ReloadValueRefused)
			continue // its delta table is new, the load starts over
		}
		l.m.failures.Incr(1, describeLoad(e))
		if parked := l.noteFailure(run.oid, err); parked {
			return
		}
		l.log.Errorf("initial load of %s.%s failed (attempt %d), retrying in %s: %v", e.Schema, e.Table, e.Attempt, backoff, err)
		select {
		case <-time.After(backoff):
		case <-l.ctx.Done():
			return
		}
		backoff = min(2*backoff, 2*time.Minute)
	}
}

// finishPublishing finishes the publish of oid's load when an earlier
// attempt failed in its swap (ClickHouse went away in the middle of it):
// the agreement may have moved to the target already, so loading again
// would fail for good. It is finished from what ClickHouse holds, as
// Resume does after a restart. finishing: the load was publishing.
func (l *Engine) finishPublishing(ctx context.Context, oid uint32) (finishing bool, err error) {
	e, ok := l.ledger.Get(oid)
	if !ok || e.Phase != PhasePublishing {
		return false, nil
	}
	return true, l.locked.run(func() error { return l.recoverPublish(ctx, e) })
}

// noteFailure records that the load of oid failed with err: its last
// error, and for a failure of the table alone its streak of identical
// failures, which parks it once it is long enough (park.go). It reports
// whether the table is parked now.
func (l *Engine) noteFailure(oid uint32, err error) bool {
	parkable := !Transient(err) && l.dst.Local(err)
	var parking Parking
	if cur, ok := l.ledger.Get(oid); ok && parkable {
		parking = l.dst.ParkingFor(cur, err)
	}
	now := time.Now().UTC()
	parkedNow := false
	e, ok, uerr := l.ledger.Update(oid, func(e *Entry) bool {
		e.LastError = err.Error()
		if !parkable || e.Parked != nil {
			return true
		}
		e.Streak = e.Streak.Next(Failure{Signature: Signature(err)}, true)
		e.Streak.Attempt = e.Attempt
		if e.Streak.Parks() {
			p := parking
			p.Since, p.Reason, p.At, p.Count = now, err.Error(), e.FailedAt, e.Streak.Count
			e.Parked = &p
			parkedNow = true
		}
		return true
	})
	if uerr != nil {
		l.log.Errorf("initial load of %s: recording the failure: %v", describeLoad(e), uerr)
		return false
	}
	if !ok || e.Parked == nil {
		return false
	}
	if parkedNow {
		l.dst.Parked(e)
	}
	return true // (parked now, or by the output meanwhile)
}

// CountReload counts a reload of a followed table for reason (a
// ReloadReasons class; another counts as ReloadOther), in
// walshadow_table_reloads_total and durably in the ledger.
func (l *Engine) CountReload(reason string) {
	if l == nil {
		return
	}
	reason = knownReason(reason)
	l.m.reloads.Incr(1, reason)
	if err := l.ledger.CountReload(reason); err != nil {
		l.log.Warnf("%v", err)
	}
}

// errReload: the table changed during its load (schema change, TRUNCATE);
// the load starts over with a new snapshot.
var errReload = errors.New("the table changed during its load")

// Invalidate is called, under the output's lock, after a schema event or
// TRUNCATE of a relation was applied: a load of it in progress starts over.
func (l *Engine) Invalidate(oid uint32) { l.InvalidateFor(oid, "") }

// InvalidateFor is Invalidate for a reload reason (ReloadReasons): a load
// in progress that starts over counts as a reload for it ("": for
// ReloadChangedDuringLoad).
func (l *Engine) InvalidateFor(oid uint32, reason string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if reason != "" {
		l.restartReason[oid] = reason
	}
	l.gen[oid]++
	if run := l.runs[oid]; run != nil && run.cancel != nil {
		run.cancel()
	}
}

// Dropped is called, under the output's lock, when a relation is dropped:
// its load stops and its staging table goes.
func (l *Engine) Dropped(ctx context.Context, oid uint32) error {
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
	if e, ok := l.ledger.Get(oid); ok && e.Phase != PhaseDone {
		return l.Discard(ctx, e)
	}
	return nil
}

// generation is the relation's invalidation count.
func (l *Engine) generation(oid uint32) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.gen[oid]
}

// Discard drops a load's staging table and forgets it.
func (l *Engine) Discard(ctx context.Context, e Entry) error {
	l.takeDeferred(e.Oid)
	if e.Staging != "" {
		if err := l.dst.Conn().Exec(ctx, clickhouse.DropTable(clickhouse.Target{Database: e.Database, Table: e.Staging})); err != nil {
			return fmt.Errorf("dropping the staging table of %s.%s: %w", e.Schema, e.Table, err)
		}
	}
	return l.ledger.Delete(e.Oid)
}

// Loading reports whether oid has a load not yet done (its target table
// holds only streamed changes so far).
func (l *Engine) Loading(oid uint32) bool {
	if l == nil {
		return false
	}
	e, ok := l.ledger.Get(oid)
	return ok && e.Phase != PhaseDone
}

// prepareStaging (re)creates the staging table as a copy of the target's
// structure and records the attempt.
func (l *Engine) prepareStaging(ctx context.Context, e *Entry, a *clickhouse.Agreed) error {
	if want := (clickhouse.Target{Database: e.Database, Table: DeltaName(e.Target, e.Oid)}); a.Target != want {
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
	e.Loads++
	l.m.loads.Incr(1, describeLoad(*e))
	e.Phase = PhaseLoading
	e.Rows, e.Bytes = 0, 0
	e.StartedAt, e.FinishedAt = time.Now().UTC(), time.Time{}
	e.LastError = ""
	return l.ledger.putLoad(*e)
}

// makeStaging (re)creates e's staging table with the structure of its
// delta table a.Target, under the output's lock: a batch that fails or
// reshapes the table drops its delta table and agrees on a new one in one
// step, which the copy of its structure must not fall between.
func (l *Engine) makeStaging(ctx context.Context, e *Entry, a *clickhouse.Agreed) error {
	staging := clickhouse.Target{Database: e.Database, Table: e.Staging}
	return l.locked.run(func() error {
		if now := l.store.Get(e.Oid); now == nil || now.Dropped || now.ValidFrom != a.ValidFrom || now.Target != a.Target {
			return fmt.Errorf("%w: its agreement changed before the staging table was made", errReload)
		}
		conn := l.dst.Conn()
		if conn == nil {
			return fmt.Errorf("the output is not connected")
		}
		if err := conn.Exec(ctx, clickhouse.DropTable(staging)); err != nil {
			return fmt.Errorf("preparing the staging table %s: %w", clickhouse.QuoteQualified(staging), err)
		}
		if err := conn.CreateLike(ctx, staging, a.Target); err != nil {
			return fmt.Errorf("preparing the staging table %s: %w", clickhouse.QuoteQualified(staging), err)
		}
		return nil
	})
}

// InterruptedReload: a is a relation's agreement on a table other than
// the delta table of the load the ledger has in progress for it. The
// output's planReload records the load, then drops the agreement, then
// agrees on the delta table; a crash after the first step leaves this.
func (l *Engine) InterruptedReload(a *clickhouse.Agreed) bool {
	if a == nil || a.Dropped || a.Left {
		return false
	}
	e, ok := l.ledger.Get(a.Oid)
	if !ok || e.Phase != PhaseLoading {
		return false
	}
	delta, _ := l.DeltaTarget(a.Oid)
	return a.Target != delta
}
