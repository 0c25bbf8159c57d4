package output

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/desclog"
)

// A rewrite refills a table from the WAL instead of a reload. When an
// ALTER TABLE rewrites a table (a type change PostgreSQL cannot apply in
// place, a volatile default, SET ACCESS METHOD), its transaction inserts
// every row the table holds at its commit into the table's new file, and
// the processor marks the changed event Rewritten (msg.KeyRewritten: the
// file changed and no page of it was copied whole). Schema events go out
// before their transaction's rows, so the table can be emptied at the
// event and take those inserts as its whole content: the old rows, their
// old physical identities and their old values (whatever USING did to
// them) no longer matter. Where the new shape needs no more than
// ClickHouse's own statements (a keyed table whose columns ClickHouse
// converts exactly) the table keeps its rows and the inserts supersede
// them by key, as before; otherwise the table is rebuilt empty under the
// new shape (and always after SET LOGGED: what ClickHouse holds of an
// UNLOGGED table is stale) — a new table beside it, swapped in by one RENAME, the old
// one dropped — instead of being reloaded from the source. A table
// without a key (keyed by physical identity, which a rewrite changes for
// every row) and a change log (which would log every row again) are
// always rebuilt empty.

// Side-table markers of a refill (within the 23 bytes ident.go leaves
// after a table's name).
const (
	refillMarker  = "__wsrefill_"
	retiredMarker = "__wsretired_"
)

// refillFromRewrite applies a Rewritten changed event of relation d,
// followed under agreement prev. It reports false when the event is
// not one it takes (the caller goes on as for any event).
func (o *chOutput) refillFromRewrite(ctx context.Context, d *desclog.Descriptor, prev *clickhouse.Agreed, c change, why string) (bool, error) {
	if !c.meta.Rewritten || prev == nil || prev.Dropped || prev.Left || o.loads.Loading(d.Oid) || o.loads.Running(d.Oid) {
		return false, nil
	}
	if o.loads.Reflected(d.Oid, c.commitLSN, c.xid) {
		// The table's published load saw the rewrite: it holds the rows
		// the rewrite wrote, which the stream skips as the load's. (An
		// empty rebuild would lose them.)
		return false, nil
	}
	keyed := clickhouse.LayoutOf(prev.OrderBy) == clickhouse.LayoutKeyed
	switch {
	case why == madeLoggedWhy:
		// SET LOGGED rewrites the table: its rows are all in the WAL now,
		// though none of its UNLOGGED time was.
		return true, o.rebuildEmpty(ctx, d, prev, c, "made LOGGED")
	case keyed && why != "":
		return false, nil // followed again for another reason: its load
	case !keyed && why != rewrittenWhy:
		return false, nil
	case keyed:
		err := o.agree(ctx, d, c.lsn, "changed at "+c.lsn.String())
		var rn *reloadNeeded
		if !errors.As(err, &rn) {
			return true, err
		}
		return true, o.rebuildEmpty(ctx, d, prev, c, rn.cause.Error())
	}
	return true, o.rebuildEmpty(ctx, d, prev, c, "its rows' physical identities all changed")
}

// rebuildEmpty replaces relation d's ClickHouse table with an empty one
// under its new shape (a first agreement, as a reload would make), which
// the rewrite's inserts that follow the event fill. Every step can run
// again after a crash: the event replays until the new agreement is
// stored.
func (o *chOutput) rebuildEmpty(ctx context.Context, d *desclog.Descriptor, prev *clickhouse.Agreed, c change, why string) error {
	name := qualified(d.Namespace, d.Name)
	target := prev.Target
	oid := strconv.FormatUint(uint64(d.Oid), 10)
	fresh := clickhouse.Target{Database: target.Database, Table: target.Table + refillMarker + oid}
	retired := clickhouse.Target{Database: target.Database, Table: target.Table + retiredMarker + oid}
	cfg := o.withWidened(d.Oid, o.scope.config(d.Namespace, d.Name))
	cfg.Database, cfg.Table = fresh.Database, fresh.Table
	plan, err := clickhouse.Reconcile(o.conn.Dialect(), o.defaultDatabase(), cfg, nil, clickhouse.CHTable{}, d)
	if err == nil && len(plan.Reload)+len(plan.Refused) > 0 {
		err = errors.Join(append(plan.Reload, plan.Refused...)...)
	}
	if err != nil {
		// Not even a fresh table takes the new shape: the reload says why.
		return &reloadNeeded{cause: fmt.Errorf("%s was rewritten at %s and cannot be rebuilt under its new shape: %w", name, c.lsn, err)}
	}
	stmts := []string{clickhouse.DropTable(fresh), clickhouse.DropTable(retired)}
	stmts = append(stmts, plan.Statements...)
	for _, t := range []clickhouse.Target{fresh, retired} {
		if err := t.Validate(name); err != nil {
			return &reloadNeeded{cause: fmt.Errorf("%s was rewritten at %s: %w", name, c.lsn, err)}
		}
	}
	stmts = append(stmts, clickhouse.SwapIn(target, fresh, retired), clickhouse.DropTable(retired))
	if err := o.execAll(ctx, stmts); err != nil {
		return fmt.Errorf("%s was rewritten at %s: rebuilding %s empty under the new shape: %w", name, c.lsn, clickhouse.QuoteQualified(target), err)
	}
	next := plan.Agreed
	next.Target, next.ValidFrom = target, c.lsn
	next.RefilledFile, next.RefilledBefore = c.meta.Filenode, c.commitLSN
	if physical(next) {
		// The rewrite's rows are the new heap generation's.
		next.Filenode, next.FilenodeFrom = c.meta.Filenode, c.lsn
	}
	if err := o.store.Put(next); err != nil {
		return globalf("recording the rebuilt table of %s: %w", name, err)
	}
	o.tables[d.Oid] = newTableState(o.conn.Dialect(), next)
	o.loads.Invalidate(d.Oid)
	o.m.tableRefills.Incr(1, name)
	o.log.Infof("%s was rewritten at %s (%s): %s is rebuilt empty under the new shape and refilled from the rows the rewrite wrote to the WAL, without a reload",
		name, c.lsn, why, clickhouse.QuoteQualified(target))
	return nil
}
