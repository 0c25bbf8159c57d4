package output

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/load"
	"github.com/walshadow/walshadow/internal/wal"
)

// defaultDatabase is the target database of tables without their own.
func (o *chOutput) defaultDatabase() string {
	if o.s.database != "" {
		return o.s.database
	}
	return o.conn.Database()
}

// targetOf is where a relation without an agreement would land.
func (o *chOutput) targetOf(schema, table string) clickhouse.Target {
	cfg := o.scope.config(schema, table)
	t := clickhouse.DefaultTarget(o.defaultDatabase(), schema, table)
	if cfg.Database != "" {
		t.Database = cfg.Database
	}
	if cfg.Table != "" {
		t.Table = cfg.Table
	}
	return t
}

// table returns the state of a relation, agreeing on it first when the
// store has no agreement yet (its first sight: a table that existed before
// walshadow started, or one whose Added event was before the resume point).
func (o *chOutput) table(ctx context.Context, d *desclog.Descriptor, version wal.LSN) (*tableState, error) {
	if ts := o.tables[d.Oid]; ts != nil {
		return ts, nil
	}
	if a := o.store.Get(d.Oid); a != nil {
		ts := newTableState(o.conn.Dialect(), a)
		o.tables[d.Oid] = ts
		return ts, nil
	}
	if err := o.agree(ctx, d, version, "first sight"); err != nil {
		return nil, err
	}
	if !o.loads.Loading(d.Oid) {
		o.states.set(qualified(d.Namespace, d.Name), stateFollowing)
	} else if e, _ := o.loads.Ledger().Get(d.Oid); e.Parked == nil && !o.loads.Running(d.Oid) {
		// A load planned whose agreement could not be made then (a reload
		// interrupted by ClickHouse going away: the batch is retried, and
		// its rows agree on the delta table here) starts now; nothing
		// else would start it before a restart.
		o.log.Infof("%s.%s: starting its initial load, planned before its delta table could be made", d.Namespace, d.Name)
		o.states.set(qualified(d.Namespace, d.Name), stateLoading)
		o.loads.Launch(e)
	}
	ts := o.tables[d.Oid]
	if ts == nil {
		return nil, fmt.Errorf("relation %s.%s (oid %d): no agreement after reconciling", d.Namespace, d.Name, d.Oid)
	}
	return ts, nil
}

// agree runs the reconciliation of one relation with shape d: the decision
// is clickhouse.Reconcile's, from the configuration, the durable agreement
// and what ClickHouse holds now; the new agreement is stored only after its
// statements succeeded.
func (o *chOutput) agree(ctx context.Context, d *desclog.Descriptor, version wal.LSN, why string) error {
	prev := o.store.Get(d.Oid)
	if prev != nil && version < prev.ValidFrom {
		// Never move an agreement back to an older shape (a replayed event,
		// a lookup behind the agreement): heal ClickHouse against the
		// agreed shape itself.
		d, version = agreedDescriptor(prev, d), prev.ValidFrom
	}
	target := o.targetOf(d.Namespace, d.Name)
	cfg := o.withWidened(d.Oid, o.scope.config(d.Namespace, d.Name))
	if prev != nil {
		target = prev.Target
	} else if err := o.evictRetained(ctx, d, target); err != nil {
		return err
	}
	if delta, ok := o.loads.DeltaTarget(d.Oid); ok && (prev == nil || prev.Target == delta) {
		// Until its load is published the relation's changes go to its
		// delta table: the configured name only ever holds a whole table.
		cfg.Database, cfg.Table = delta.Database, delta.Table
		target = delta
	}
	ch, err := o.conn.Table(ctx, target)
	if err != nil {
		return fmt.Errorf("reading %s from ClickHouse: %w", clickhouse.QuoteQualified(target), err)
	}
	if ch, err = o.dropLeftoverDelta(ctx, d, prev, target, ch); err != nil {
		return err
	}
	plan, err := clickhouse.Reconcile(o.conn.Dialect(), o.defaultDatabase(), cfg, prev, ch, d)
	if err != nil {
		o.m.ddlRefused.Incr(1, "reconcile")
		return fmt.Errorf("reconciling %s.%s (%s): %w", d.Namespace, d.Name, why, err)
	}
	if len(plan.Refused) > 0 {
		o.m.ddlRefused.Incr(int64(len(plan.Refused)), "type_change")
		return fmt.Errorf("reconciling %s.%s (%s): %w", d.Namespace, d.Name, why, errors.Join(plan.Refused...))
	}
	if len(plan.Reload) > 0 {
		// No statement follows the change exactly: the table is reloaded
		// under its new shape (failTable), nothing of this plan runs.
		return &reloadNeeded{cause: fmt.Errorf("%s.%s (%s): %w", d.Namespace, d.Name, why, errors.Join(plan.Reload...))}
	}
	if err := o.execAll(ctx, plan.Statements); err != nil {
		return fmt.Errorf("reconciling %s.%s (%s): %w", d.Namespace, d.Name, why, err)
	}
	for _, n := range plan.Notes {
		o.log.Infof("%s.%s: %s", d.Namespace, d.Name, n)
	}
	if plan.Agreed == nil {
		return fmt.Errorf("reconciling %s.%s: no agreement", d.Namespace, d.Name)
	}
	// The agreement is on the shape valid from version: rows and events
	// older than it are already reflected in it (a replay).
	if version > plan.Agreed.ValidFrom {
		plan.Agreed.ValidFrom = version
	}
	if err := o.store.Put(plan.Agreed); err != nil {
		return fmt.Errorf("recording the agreed shape of %s.%s: %w", d.Namespace, d.Name, err)
	}
	o.tables[d.Oid] = newTableState(o.conn.Dialect(), plan.Agreed)
	return nil
}

// dropLeftoverDelta: a first agreement (prev nil) on a load's delta table
// starts it empty. A table already under that name (the name is the
// relation's own, by oid) is an earlier load's that a crash or a discard
// left behind, under whatever shape it had then: reconciling against it
// refused the table for good ("ClickHouse column has another type"). Its
// rows all committed before the new load's snapshot, which the publish
// would discard anyway, so it is dropped.
func (o *chOutput) dropLeftoverDelta(ctx context.Context, d *desclog.Descriptor, prev *clickhouse.Agreed, target clickhouse.Target, ch clickhouse.CHTable) (clickhouse.CHTable, error) {
	if prev != nil || !ch.Exists {
		return ch, nil
	}
	if delta, ok := o.loads.DeltaTarget(d.Oid); !ok || delta != target {
		return ch, nil
	}
	if err := o.execAll(ctx, []string{clickhouse.DropTable(target)}); err != nil {
		return ch, fmt.Errorf("%s.%s: dropping an earlier load's delta table %s: %w", d.Namespace, d.Name, clickhouse.QuoteQualified(target), err)
	}
	o.log.Infof("%s.%s: dropped %s, an earlier load's delta table, before its new load", d.Namespace, d.Name, clickhouse.QuoteQualified(target))
	return clickhouse.CHTable{}, nil
}

// evictRetained: a retained table of a relation dropped on the source, or
// one no longer followed (Left), is moved aside when a new relation claims
// its name, so the new table never shows the old one's rows. Two followed
// relations on one target are refused.
func (o *chOutput) evictRetained(ctx context.Context, d *desclog.Descriptor, target clickhouse.Target) error {
	for _, a := range o.store.OnTarget(target) {
		if a.Oid == d.Oid {
			continue
		}
		if !a.Dropped && !a.Left {
			return fmt.Errorf("%s.%s (oid %d) and %s.%s (oid %d) would both be written to %s: set a target table for one of them under %s",
				d.Namespace, d.Name, d.Oid, a.Schema, a.Table, a.Oid, clickhouse.QuoteQualified(target), FieldTables)
		}
		what, suffix := "dropped", "__dropped_"
		if !a.Dropped {
			what, suffix = "no longer followed", "__left_"
		}
		aside := clickhouse.Target{Database: target.Database, Table: fmt.Sprintf("%s%s%d", target.Table, suffix, a.Oid)}
		sql := fmt.Sprintf("RENAME TABLE %s TO %s", clickhouse.QuoteQualified(target), clickhouse.QuoteQualified(aside))
		if ch, err := o.conn.Table(ctx, target); err != nil {
			return err
		} else if ch.Exists {
			if err := o.execAll(ctx, []string{sql}); err != nil {
				return fmt.Errorf("moving the retained table of %s %s.%s aside: %w", what, a.Schema, a.Table, err)
			}
			o.log.Infof("%s: retained table of %s %s.%s (oid %d) renamed to %s for the new relation", clickhouse.QuoteQualified(target), what, a.Schema, a.Table, a.Oid, clickhouse.QuoteQualified(aside))
		}
		a.Target = aside
		if err := o.store.Put(a); err != nil {
			return err
		}
	}
	return nil
}

func (o *chOutput) execAll(ctx context.Context, stmts []string) error {
	for _, s := range stmts {
		if strings.HasPrefix(s, "INSERT INTO ") {
			// Rows copied out of a table (a rekey's INSERT ... SELECT):
			// never while a ClickHouse restart's leftovers show in it.
			if err := o.guardRestart(ctx, true); err != nil {
				return err
			}
		}
		if err := o.conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", clickhouse.StatementHead(s), err)
		}
		o.m.ddlApplied.Incr(1, ddlKind(s))
		o.log.Debugf("ClickHouse DDL: %s", s)
	}
	return nil
}

// ddlKind labels a statement for the DDL counter.
func ddlKind(s string) string {
	for _, k := range []string{"CREATE DATABASE", "CREATE TABLE", "ADD COLUMN", "RENAME COLUMN", "DROP COLUMN", "TRUNCATE", "DELETE WHERE", "DROP TABLE", "RENAME TABLE"} {
		if strings.Contains(s, k) {
			return strings.ToLower(strings.ReplaceAll(k, " ", "_"))
		}
	}
	return "other"
}

// applyEvent applies a schema event after every earlier row is durable.
func (o *chOutput) applyEvent(ctx context.Context, c change) error {
	event := c.meta.Event
	log := o.sess.DescLog()
	if log == nil {
		return errors.New("the session's descriptor log is not open")
	}
	switch event {
	case desclog.EventAdded.String(), desclog.EventChanged.String():
		l := log.DescriptorByOidInDBAt(log.Identity().DbOid, c.oid, c.lsn)
		if l.Result != desclog.Present || l.Desc == nil {
			return fmt.Errorf("schema event %s of relation %d at %s: no shape in the descriptor log (%v)", event, c.oid, c.lsn, l.Result)
		}
		d := l.Desc
		prev := o.store.Get(d.Oid)
		delete(o.broken, d.Oid) // a new shape: it may be agreed on now
		if !o.scope.in(d.Namespace, d.Name) || !replicable(d) {
			if event == desclog.EventChanged.String() {
				return o.leaveScope(ctx, d.Oid, fmt.Sprintf("became %s.%s at %s, out of scope", d.Namespace, d.Name, c.lsn))
			}
			return nil
		}
		// Whether it starts being followed is decided before the replay
		// check: at a start the agreements are on the newest shapes, so
		// the events between the resume point and those shapes replay,
		// and a table that came back (or was made LOGGED) among them still
		// needs its load.
		why := o.followEvent(log, event, d, prev, c.lsn)
		if why == "" && prev != nil && prev.ValidFrom >= c.lsn {
			return nil // the agreement already includes this change (a replay)
		}
		if done, err := o.refillFromRewrite(ctx, d, prev, c, why); done || err != nil {
			return err
		}
		var planned load.Entry
		loadNow := false
		if why != "" {
			if o.loads.Running(d.Oid) {
				// An abandoned load of it is still stopping: its goroutine
				// would discard the new one's ledger entry.
				return fmt.Errorf("%s.%s %s at %s while its earlier initial load is still stopping: retrying", d.Namespace, d.Name, why, c.lsn)
			}
			var err error
			if planned, loadNow, err = o.planLoad(d, prev, why+" at "+c.lsn.String()); err != nil {
				return err
			}
		}
		if err := o.agree(ctx, d, c.lsn, event+" at "+c.lsn.String()); err != nil {
			return err
		}
		o.loads.Invalidate(d.Oid)
		if loadNow {
			o.loads.Launch(planned)
		}
		return o.unparkOnShape(ctx, d.Oid, c.lsn)
	case desclog.EventDropped.String():
		delta, loading := o.loads.DeltaTarget(c.oid)
		entry, _ := o.loads.Ledger().Get(c.oid)
		if err := o.loads.Dropped(ctx, c.oid); err != nil {
			return err
		}
		prev := o.store.Get(c.oid)
		if prev == nil || prev.Dropped {
			return nil
		}
		loading = loading && prev.Target == delta
		cfg := o.scope.config(prev.Schema, prev.Table)
		strategy := cfg.DropStrategy
		if strategy == "" {
			strategy = o.s.drop
		}
		if loading && entry.Stale != "" {
			// Dropped while a reload was replacing its table: the table it
			// had is what the drop strategy keeps or drops.
			stale := prev.Clone()
			stale.Target = clickhouse.Target{Database: entry.StaleDatabase, Table: entry.Stale}
			stmts, next, _ := clickhouse.PlanDrop(strategy, stale)
			if err := o.execAll(ctx, stmts); err != nil {
				return fmt.Errorf("dropped %s.%s at %s: %w", prev.Schema, prev.Table, c.lsn, err)
			}
			if err := o.execAll(ctx, []string{clickhouse.DropTable(delta)}); err != nil {
				return fmt.Errorf("dropped %s.%s at %s: %w", prev.Schema, prev.Table, c.lsn, err)
			}
			delete(o.tables, c.oid)
			o.states.set(qualified(prev.Schema, prev.Table), stateDropped)
			if next == nil {
				return o.store.Delete(c.oid)
			}
			return o.store.Put(next)
		}
		if loading {
			// Its delta table holds only the changes since its load began:
			// nothing was published to retain.
			strategy = clickhouse.DropDrop
		}
		stmts, next, note := clickhouse.PlanDrop(strategy, prev)
		if err := o.execAll(ctx, stmts); err != nil {
			return fmt.Errorf("dropped %s.%s at %s: %w", prev.Schema, prev.Table, c.lsn, err)
		}
		if note != "" {
			if strategy == clickhouse.DropWarn {
				o.log.Warnf("%s.%s: %s", prev.Schema, prev.Table, note)
			} else {
				o.log.Infof("%s.%s: %s", prev.Schema, prev.Table, note)
			}
		}
		delete(o.tables, c.oid)
		o.states.set(qualified(prev.Schema, prev.Table), stateDropped)
		if next == nil {
			return o.store.Delete(c.oid)
		}
		return o.store.Put(next)
	}
	return nil // other events (none today) carry nothing for ClickHouse
}

// applyTruncate empties a table after every earlier row is durable.
func (o *chOutput) applyTruncate(ctx context.Context, c change) error {
	shape, err := o.shapeOf(c.oid, c.version)
	if err != nil {
		return fmt.Errorf("truncate at %s: %w", c.lsn, err)
	}
	if !shape.inScope || o.broken[c.oid] != "" {
		return nil
	}
	if o.loads.Reflected(c.oid, c.commitLSN, c.xid) {
		// Before the table's load: it holds what the TRUNCATE left.
		o.log.Infof("TRUNCATE of %s.%s at %s is in its initial load: not applied again", shape.desc.Namespace, shape.desc.Name, c.lsn)
		return nil
	}
	ts, err := o.table(ctx, shape.desc, c.version)
	if err != nil {
		return err
	}
	// TRUNCATE TABLE and ALTER TABLE ... DELETE WHERE _lsn < the
	// TRUNCATE's position (internal/clickhouse/truncate.go: a restart of
	// ClickHouse can bring back parts a TRUNCATE left on disk; the
	// mutation removes them again). Either failing fails the change: a
	// lost connection fails the batch, which is written again whole (rows
	// before the TRUNCATE, both statements, rows after); ClickHouse
	// refusing one fails the table, which is reloaded.
	if err := o.execAll(ctx, clickhouse.PlanTruncate(ts.agreed, uint64(c.lsn))); err != nil {
		return err
	}
	if physical(ts.agreed) {
		// Empty: its next rows are of the new heap generation.
		next := ts.agreed.Clone()
		next.Filenode, next.FilenodeFrom = 0, c.lsn
		if err := o.store.Put(next); err != nil {
			return globalf("recording the truncate of %s: %w", ts.label, err)
		}
		ts.agreed = next
	}
	// A load in progress holds rows the TRUNCATE removed: it starts over.
	o.loads.Invalidate(c.oid)
	return nil
}

// reconcileStart is reconcileAll with the agreements recorded on disk once
// at its end, not once each (a first start over 10,000 tables makes
// 10,000); nothing reads them from disk before the start ends. A crash
// before that (a kill as well: until then they are in memory only) loses
// every agreement the start made, as if it had come right after each
// one's statements and before its record, which is a point every
// agreement already survives: the next start reconciles each relation
// again from its older agreement and what ClickHouse holds (a table a
// lost first agreement made is an earlier load's delta table to it, and
// dropped: dropLeftoverDelta). The loads' records stay synced one by one,
// before each agreement, so that no agreement on a delta table is ever on
// disk without its load.
func (o *chOutput) reconcileStart(ctx context.Context) error {
	o.store.DeferSync()
	err := o.reconcileAll(ctx)
	if serr := o.store.Sync(); serr != nil {
		return errors.Join(err, globalf("recording the start's agreed shapes: %w", serr))
	}
	return err
}

// reconcileAll agrees on every relation in scope at start: tables missing
// on ClickHouse are created (and columns dropped there re-added), tables
// never seen get their first agreement. Changes made on the source while
// walshadow was down arrive as schema events from the stream.
func (o *chOutput) reconcileAll(ctx context.Context) error {
	log, err := o.waitDescLog(ctx)
	if err != nil {
		return err
	}
	at := max(log.LastCapturedAt(), log.CoveredThrough())
	if err := o.leaveScopeAtStart(ctx, log, at); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, d := range log.ActivePresent() {
		if !replicable(d) || !o.scope.in(d.Namespace, d.Name) {
			continue
		}
		seen[qualified(d.Namespace, d.Name)] = true
		prev := o.store.Get(d.Oid)
		if o.loads.InterruptedReload(prev) {
			// A reload planned before a crash recorded its load but had
			// not yet let go of the table's agreement: that step now (the
			// load's entry names the old table, dropped at its publish).
			// Its delta table is then agreed at the newest shape, as the
			// load's copy reads it.
			if err := o.store.Delete(d.Oid); err != nil {
				return globalf("%w", err)
			}
			delete(o.tables, d.Oid)
			prev = nil
		}
		l := log.DescriptorByOidInDBAt(log.Identity().DbOid, d.Oid, o.startShapeAt(prev, at))
		if l.Result != desclog.Present || l.Desc == nil {
			l = log.DescriptorByOidInDBAt(log.Identity().DbOid, d.Oid, at)
		}
		if l.Result != desclog.Present || l.Desc == nil {
			continue // dropped or changed since the list was taken: its events come
		}
		if prev == nil || prev.Left {
			// Never written by this output, or no longer followed: its
			// rows are loaded (recorded before the agreement, so a crash
			// in between still loads it).
			why := ""
			if prev != nil {
				why = "returned to the configured scope"
			}
			if _, _, err := o.planLoad(l.Desc, prev, why); err != nil {
				return err
			}
		}
		if err := o.agree(ctx, l.Desc, l.ValidFrom, "start"); err != nil {
			if !tableLocal(err) {
				return err
			}
			// This table cannot be agreed on (a name ClickHouse cannot
			// take, a configuration that does not fit it): the others
			// start anyway.
			o.markBroken(d, err)
			continue
		}
		if o.loads.Loading(d.Oid) {
			o.states.set(qualified(d.Namespace, d.Name), stateLoading)
		} else {
			o.states.set(qualified(d.Namespace, d.Name), stateFollowing)
		}
	}
	var missing []string
	for name := range o.scope.tables {
		if !seen[name] {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	for _, name := range missing {
		o.log.Warnf("%s.%s is configured but is not a table of the source (yet)", FieldTables, name)
	}
	return nil
}

// startShapeAt is the position whose shape a start agrees on for a
// relation with agreement prev: the newest captured (at) for one this
// output never wrote (or no longer follows: it is loaded afresh); for the
// others the shape of the rows ClickHouse holds: at the output's written
// position, or the agreement's own version when that is newer. The stream
// replays every schema event after the written position, each applied at
// its own shape: agreed at a newer shape here, a column added with a
// DEFAULT and materialised by a later rewrite (no missing value any more)
// was added without it, and the rows before it read NULL.
func (o *chOutput) startShapeAt(prev *clickhouse.Agreed, at wal.LSN) wal.LSN {
	if prev == nil || prev.Left || prev.Dropped {
		return at
	}
	return min(at, max(o.writtenBefore, prev.ValidFrom))
}

// waitDescLog waits for the session (started by the input) to open its
// descriptor log.
func (o *chOutput) waitDescLog(ctx context.Context) (*desclog.Log, error) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if log := o.sess.DescLog(); log != nil && log.Seeded() {
			return log, nil
		}
		if time.Now().After(deadline) {
			return nil, errors.New("the walshadow session has not opened its descriptor log yet (is the pg_physical_wal input of the same session running?)")
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// agreedDescriptor is the relation's agreed shape as a descriptor (the
// relation's other facts from d).
func agreedDescriptor(a *clickhouse.Agreed, d *desclog.Descriptor) *desclog.Descriptor {
	cp := *d
	cp.Namespace, cp.Name = a.Schema, a.Table
	cp.Columns = append([]desclog.Column(nil), a.Shape...)
	cp.KeyAttnums = append([]int16(nil), a.KeyAttnums...)
	return &cp
}
