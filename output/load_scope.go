package output

import (
	"context"
	"fmt"

	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/load"
	"github.com/walshadow/walshadow/internal/wal"
)

// A relation's ClickHouse table follows the source only while the output
// follows the relation: in scope (include/exclude, a name under tables), a
// table, and logged (an UNLOGGED table's changes are not in the WAL). Every
// way of not following it leaves a gap of changes the table never saw, so:
//
//   - a followed relation that leaves the scope (a configuration change at
//     a start or reload, a rename out of the include patterns) has its
//     agreement marked Left: its table keeps its rows, stops following, and
//     a load in progress is abandoned;
//   - a relation that starts being followed while its rows are not in
//     ClickHouse is loaded like a table seen at the first start: one back
//     in scope after Left, one renamed into scope that was never followed
//     (a table filled under another name, then renamed into place). The
//     reload publishes a fresh table; this output's stale one is dropped
//     once it is (load.Entry.Stale). One made LOGGED again is refilled
//     from SET LOGGED's rewrite instead (refill.go), the load being the
//     fallback.
//
// With initial_load mode none such a table is not loaded: it resumes
// following from the change, with a warning naming what it misses.

// loadMode is how a relation never (or no longer) followed is loaded: the
// configured mode, none for an UNLOGGED table (a load would be a snapshot
// that never moves: its changes are not in the WAL).
func (o *chOutput) loadMode(d *desclog.Descriptor) load.Mode {
	mode := o.s.load.modeFor(o.s.tableLoad[qualified(d.Namespace, d.Name)], d.Namespace, d.Name)
	if mode == "" {
		mode = load.ModeNone
	}
	if d.Persistence == 'u' && mode != load.ModeNone {
		o.log.Warnf("%s.%s is UNLOGGED: not loaded (its changes are not in the WAL, so its table would never follow the source)", d.Namespace, d.Name)
		mode = load.ModeNone
	}
	return mode
}

// planLoad records a load of d, whose ClickHouse table does not hold its
// rows, before its agreement is (re)made: prev is this output's earlier
// agreement on it (nil: never followed), which the load supersedes. It
// returns the planned load (false: none); why says what happened to the
// relation, for the log.
func (o *chOutput) planLoad(d *desclog.Descriptor, prev *clickhouse.Agreed, why string) (load.Entry, bool, error) {
	e, ok, err := o.planLoadMode(d, prev, o.loadMode(d), why, 0)
	if ok && err == nil && prev != nil && why != "" {
		o.loads.CountReload(whyClass(why)) // a table followed before, loaded again
	}
	return e, ok, err
}

// planLoadMode is planLoad in mode; failedAt is the change a failed
// table could not take (0: it did not fail).
func (o *chOutput) planLoadMode(d *desclog.Descriptor, prev *clickhouse.Agreed, mode load.Mode, why string, failedAt wal.LSN) (load.Entry, bool, error) {
	if mode == load.ModeNone {
		if prev != nil && prev.Left {
			a := prev.Clone()
			a.Left = false
			if err := o.store.Put(a); err != nil {
				return load.Entry{}, false, err
			}
		}
		if why != "" {
			o.log.Warnf("%s.%s %s: with initial_load mode none it is not loaded: %s misses the changes made while it was not followed",
				d.Namespace, d.Name, why, clickhouse.QuoteQualified(o.targetOf(d.Namespace, d.Name)))
		}
		return load.Entry{}, false, nil
	}
	if e, ok := o.loads.Ledger().Get(d.Oid); ok && e.Phase != load.PhaseDone && prev == nil {
		return e, true, nil // planned before a crash: it goes on
	}
	target := o.targetOf(d.Namespace, d.Name)
	e := load.Entry{Oid: d.Oid, Schema: d.Namespace, Table: d.Name, Mode: mode, Phase: load.PhaseLoading,
		Database: target.Database, Target: target.Table,
		Staging: load.StagingName(target.Table, d.Oid), Old: load.ReplacedName(target.Table, d.Oid), Reason: why, FailedAt: failedAt}
	if old, ok := o.loads.Ledger().Get(d.Oid); ok {
		e.Loads = old.Loads // what it cost the source so far
	}
	if prev != nil {
		e.StaleDatabase, e.Stale = prev.Target.Database, prev.Target.Table
		if prev.Target == target {
			// Moved aside at the publish, then dropped: a name of its own,
			// apart from where a foreign table found by the first load went.
			e.Old = load.StaleName(target.Table, d.Oid)
		}
	}
	// The ledger first: a crash before the agreement is gone still
	// reloads (the agreement is Left, or gone, at the next start).
	if err := o.loads.Ledger().Put(e); err != nil {
		return load.Entry{}, false, fmt.Errorf("recording the initial load of %s.%s: %w", d.Namespace, d.Name, err)
	}
	if prev != nil {
		if err := o.store.Delete(d.Oid); err != nil {
			return load.Entry{}, false, err
		}
		delete(o.tables, d.Oid)
	}
	if why != "" && failedAt == 0 {
		o.log.Infof("%s.%s %s: loading it (%s) into %s", d.Namespace, d.Name, why, mode, clickhouse.QuoteQualified(target))
	}
	return e, true, nil
}

// leaveScope stops following a relation: its agreement is marked Left
// (its table stays as it is), or, if its load was not yet published, the
// load and its delta table are dropped and the relation forgotten, so that
// it is loaded afresh if it returns.
func (o *chOutput) leaveScope(ctx context.Context, oid uint32, why string) error {
	a := o.store.Get(oid)
	if a == nil || a.Dropped || a.Left {
		return nil
	}
	delete(o.tables, oid)
	if delta, loading := o.loads.DeltaTarget(oid); loading {
		o.log.Infof("%s.%s %s: its initial load and delta table are dropped", a.Schema, a.Table, why)
		if err := o.loads.Dropped(ctx, oid); err != nil {
			return err
		}
		if a.Target == delta {
			if err := o.execAll(ctx, []string{clickhouse.DropTable(delta)}); err != nil {
				return err
			}
		}
		return o.store.Delete(oid)
	}
	next := a.Clone()
	next.Left = true
	if err := o.store.Put(next); err != nil {
		return err
	}
	o.states.set(qualified(a.Schema, a.Table), stateLeft)
	o.log.Warnf("%s.%s %s: %s keeps its rows but no longer follows the source (it is loaded again if the table returns)",
		a.Schema, a.Table, why, clickhouse.QuoteQualified(a.Target))
	return nil
}

// leaveScopeAtStart marks every followed relation the configuration no
// longer covers (or that is no longer a table) as Left, before the
// relations in scope are reconciled.
func (o *chOutput) leaveScopeAtStart(ctx context.Context, log *desclog.Log, at wal.LSN) error {
	for _, a := range o.store.All() {
		if a.Dropped || a.Left || (a.DbOid != 0 && a.DbOid != log.Identity().DbOid) {
			continue
		}
		l := log.DescriptorByOidInDBAt(log.Identity().DbOid, a.Oid, at)
		if l.Result != desclog.Present || l.Desc == nil {
			continue // dropped since: its event comes
		}
		if o.scope.in(l.Desc.Namespace, l.Desc.Name) && replicable(l.Desc) {
			continue
		}
		if err := o.leaveScope(ctx, a.Oid, fmt.Sprintf("(now %s.%s) is not in the configured scope", l.Desc.Namespace, l.Desc.Name)); err != nil {
			return fmt.Errorf("%s.%s left the scope: %w", a.Schema, a.Table, err)
		}
	}
	return nil
}

// shapeBefore is a relation's shape before lsn (nil when the log has no
// earlier one).
func shapeBefore(log *desclog.Log, oid uint32, lsn wal.LSN) *desclog.Descriptor {
	if lsn == 0 {
		return nil
	}
	l := log.DescriptorByOidInDBAt(log.Identity().DbOid, oid, lsn-1)
	if l.Result != desclog.Present {
		return nil
	}
	return l.Desc
}

// madeLoggedWhy is followEvent's answer for a table made LOGGED: SET
// LOGGED rewrites it, and the rewrite's rows are in the WAL
// (refillFromRewrite), but no change of its UNLOGGED time is.
const madeLoggedWhy = "was made LOGGED (its rows from while it was UNLOGGED are not in the WAL)"

// rewrittenWhy is followEvent's answer for a table without a key that its
// ALTER TABLE rewrote (refillFromRewrite takes it where the WAL holds the
// rewrite's rows).
const rewrittenWhy = "was rewritten by its ALTER TABLE (a table without a key holds its rows once only through a reload)"

// followEvent decides, for a schema event of a relation in scope, whether
// the relation starts being followed without ClickHouse holding its rows;
// it returns why (empty: it was followed all along).
func (o *chOutput) followEvent(log *desclog.Log, event string, d *desclog.Descriptor, prev *clickhouse.Agreed, lsn wal.LSN) string {
	switch {
	case prev == nil:
		if event == desclog.EventChanged.String() {
			return "entered the scope (it was not followed before)"
		}
		return ""
	case prev.Dropped:
		return ""
	case o.loads.Loading(d.Oid):
		// Its load in progress starts over (invalidate) with a snapshot
		// that sees every row.
		return ""
	case prev.Left:
		return "returned to the scope"
	}
	before := shapeBefore(log, d.Oid, lsn)
	wasUnlogged := before != nil && before.Persistence == 'u'
	switch {
	case wasUnlogged && d.Persistence != 'u':
		return madeLoggedWhy
	case before != nil && before.Rfn != d.Rfn && clickhouse.LayoutOf(prev.OrderBy) != clickhouse.LayoutKeyed && event == desclog.EventChanged.String() && prev.ValidFrom < lsn:
		// ALTER TABLE rewrote it (a type change, a volatile default): the
		// WAL carries the rewrite as an insert of every row, which a table
		// without a key would hold twice.
		return rewrittenWhy
	case !wasUnlogged && d.Persistence == 'u':
		o.log.Warnf("%s.%s was made UNLOGGED at %s: its changes are no longer in the WAL, so %s stops following it until it is made LOGGED again (whose rewrite refills it)",
			d.Namespace, d.Name, lsn, clickhouse.QuoteQualified(prev.Target))
	}
	return ""
}
