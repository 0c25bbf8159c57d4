package load

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/walshadow/walshadow/internal/clickhouse"
)

// publish makes a loaded staging table the relation's table, between two
// batches (the output's lock): the changes streamed into the delta table
// by transactions the load's snapshot did not see are copied into it, it
// takes the configured name in one RENAME (or one EXCHANGE on an Atomic
// database when a table already holds the name), the agreement moves to
// that name and the delta table goes.
func (l *Engine) publish(ctx context.Context, e *Entry, loaded *clickhouse.Agreed, gen uint64, snap pgSnapshot) error {
	return l.locked.run(func() error { return l.publishLocked(ctx, e, loaded, gen, snap) })
}

// publishLocked is publish, under the output's lock.
func (l *Engine) publishLocked(ctx context.Context, e *Entry, loaded *clickhouse.Agreed, gen uint64, snap pgSnapshot) error {
	conn := l.dst.Conn()
	if conn == nil {
		return fmt.Errorf("the output is not connected")
	}
	if l.generation(e.Oid) != gen {
		return errReload
	}
	a := l.store.Get(e.Oid)
	if a == nil || a.Dropped || a.ValidFrom != loaded.ValidFrom || a.Target != loaded.Target {
		return errReload
	}
	if clickhouse.LayoutOf(a.OrderBy) == clickhouse.LayoutPhysical && a.Filenode != loaded.Filenode {
		if a.Filenode != 0 && a.FilenodeFrom >= e.Coverage {
			// The stream went on into another heap generation after the
			// load's snapshot (the table was rewritten meanwhile): its
			// TIDs are not the loaded ones.
			return errReload
		}
		// The stream's generation (if any) began before the snapshot,
		// which saw another: a later one, whose rewrite (VACUUM FULL,
		// CLUSTER) the stream has no row of yet. The loaded TIDs are
		// the table's; the stream's rows of the earlier generation are
		// all in the snapshot.
		a = a.Clone()
		a.Filenode, a.FilenodeFrom = loaded.Filenode, e.Coverage
		if err := l.store.Put(a); err != nil {
			return err
		}
	}
	rl := clickhouse.NewRowLayout(conn.Dialect(), a)
	ts := &rl
	delta := a.Target
	staging := clickhouse.Target{Database: e.Database, Table: e.Staging}
	// The streamed changes the load does not hold: those of transactions
	// its snapshot did not see (the rest are in the load, and the stream
	// skips them from now on: see Reflected).
	filter := snap.invisibleSQL()
	// Every ClickHouse column, a Nullable array's NULL flag included.
	physical := clickhouse.Physical(ts.Cols)
	cols := make([]string, len(physical))
	for i, c := range physical {
		cols[i] = clickhouse.QuoteIdent(c.Name)
	}
	list := strings.Join(cols, ", ")
	copyBack := func() error {
		sql := fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM %s WHERE %s",
			clickhouse.QuoteQualified(staging), list, list, clickhouse.QuoteQualified(delta), filter)
		if err := conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("copying the changes streamed during the load into %s: %w", clickhouse.QuoteQualified(staging), err)
		}
		return nil
	}
	// (The updates held for the load are completed around it.)
	if err := l.completeDeferred(ctx, describeLoad(*e), ts, staging, snap, l.takeDeferred(e.Oid), copyBack); err != nil {
		return err
	}
	e.Phase = PhasePublishing
	if err := l.ledger.putLoad(*e); err != nil {
		return err
	}
	return l.swap(ctx, *e, true)
}

// swap finishes a publish whose copy-back is done: from any point a crash
// left it at, since each step is recognised by what ClickHouse and the
// agreement hold. staged: the staging table is known to exist (the
// copy-back just wrote it), so only the target is looked up.
func (l *Engine) swap(ctx context.Context, e Entry, staged bool) error {
	conn := l.dst.Conn()
	target := clickhouse.Target{Database: e.Database, Table: e.Target}
	staging := clickhouse.Target{Database: e.Database, Table: e.Staging}
	delta := clickhouse.Target{Database: e.Database, Table: DeltaName(e.Target, e.Oid)}
	replaced := clickhouse.Target{Database: e.Database, Table: e.Old}
	exec := func(sql string) error {
		if err := conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("publishing the load of %s.%s: %s: %w", e.Schema, e.Table, clickhouse.StatementHead(sql), err)
		}
		return nil
	}
	hasStaging := staged
	if !staged {
		var err error
		if hasStaging, err = conn.TableExists(ctx, staging); err != nil {
			return err
		}
	}
	if hasStaging {
		hasTarget, err := conn.TableExists(ctx, target)
		if err != nil {
			return err
		}
		if err := l.takeName(ctx, &e, staging, target, replaced, hasTarget, exec); err != nil {
			return err
		}
	}
	// The agreement follows the table to its name.
	if a := l.store.Get(e.Oid); a != nil && a.Target != target {
		a = a.Clone()
		a.Target = target
		if err := l.store.Put(a); err != nil {
			return fmt.Errorf("recording the agreed shape of %s.%s: %w", e.Schema, e.Table, err)
		}
	}
	l.dst.Forget(e.Oid)
	if err := exec(clickhouse.DropTable(delta)); err != nil {
		return err
	}
	if err := l.dropStale(ctx, e, target, replaced, exec); err != nil {
		return err
	}
	return l.finish(&e)
}

// takeName gives the staging table the target's name. A table this output
// did not publish may hold it (left by an earlier state directory, or made
// by hand): it is kept aside under replaced, swapped out in one EXCHANGE
// on an Atomic database, else by one RENAME of both tables (on an Ordinary
// database the name is free for the moment between the two renames).
func (l *Engine) takeName(ctx context.Context, e *Entry, staging, target, replaced clickhouse.Target, hasTarget bool, exec func(string) error) error {
	if !hasTarget {
		return exec(fmt.Sprintf("RENAME TABLE %s TO %s", clickhouse.QuoteQualified(staging), clickhouse.QuoteQualified(target)))
	}
	atomicDB, err := l.atomicDatabase(ctx, e.Database)
	if err != nil {
		return err
	}
	if !atomicDB {
		if err := exec(fmt.Sprintf("RENAME TABLE %s TO %s, %s TO %s", clickhouse.QuoteQualified(target), clickhouse.QuoteQualified(replaced),
			clickhouse.QuoteQualified(staging), clickhouse.QuoteQualified(target))); err != nil {
			return err
		}
	} else {
		// After the EXCHANGE the staging name holds the other table: the
		// staging table's uuid, recorded first, tells whether a crash came
		// before or after it.
		if e.StagingUUID == "" {
			if e.StagingUUID, err = l.dst.Conn().TableUUID(ctx, staging); err != nil {
				return err
			}
			if err := l.ledger.putLoad(*e); err != nil {
				return err
			}
		}
		uuid, err := l.dst.Conn().TableUUID(ctx, target)
		if err != nil {
			return err
		}
		if uuid != e.StagingUUID {
			if err := exec(fmt.Sprintf("EXCHANGE TABLES %s AND %s", clickhouse.QuoteQualified(staging), clickhouse.QuoteQualified(target))); err != nil {
				return err
			}
		}
		if err := exec(fmt.Sprintf("RENAME TABLE %s TO %s", clickhouse.QuoteQualified(staging), clickhouse.QuoteQualified(replaced))); err != nil {
			return err
		}
	}
	if (clickhouse.Target{Database: e.StaleDatabase, Table: e.Stale}) == target {
		return nil // this output's stale table: dropStale drops it
	}
	l.log.Warnf("initial load of %s: %s already existed and was not published by this output: kept as %s", describeLoad(*e),
		clickhouse.QuoteQualified(target), clickhouse.QuoteQualified(replaced))
	return nil
}

// dropStale drops the table a reload supersedes (Entry.Stale): moved
// aside by takeName when it held the target's name, else under its own
// name unless another relation's agreement has taken that since.
func (l *Engine) dropStale(ctx context.Context, e Entry, target, replaced clickhouse.Target, exec func(string) error) error {
	if e.Stale == "" {
		return nil
	}
	stale := clickhouse.Target{Database: e.StaleDatabase, Table: e.Stale}
	if stale == target {
		stale = replaced
	} else {
		if len(l.store.OnTarget(stale)) > 0 {
			return nil
		}
	}
	if err := exec(clickhouse.DropTable(stale)); err != nil {
		return err
	}
	l.log.Infof("initial load of %s: dropped %s, the earlier table of it that had stopped following the source", describeLoad(e), clickhouse.QuoteQualified(stale))
	return nil
}

// finish records a published load.
func (l *Engine) finish(e *Entry) error {
	e.Phase = PhaseDone
	e.FinishedAt = time.Now().UTC()
	e.LastError = ""
	if err := l.ledger.putLoad(*e); err != nil {
		return err
	}
	took := e.FinishedAt.Sub(e.StartedAt)
	secs := max(took.Seconds(), 0.001)
	l.log.Infof("initial load of %s published: %d rows, %.1f MB in %s (%.0f rows/s, %.1f MB/s), rows tagged _lsn %s, attempt %d",
		describeLoad(*e), e.Rows, float64(e.Bytes)/(1<<20), took.Round(time.Millisecond), float64(e.Rows)/secs, float64(e.Bytes)/(1<<20)/secs, e.Coverage, e.Attempt)
	l.m.published.Incr(1)
	if e.Reason != "" {
		l.log.Infof("%s is repaired: its reload (%s) is published", describeLoad(*e), e.Reason)
	}
	l.dst.SetState(describeLoad(*e), false)
	l.m.percent.Set(100, describeLoad(*e))
	l.m.eta.Set(0, describeLoad(*e))
	return nil
}

// recoverPublish finishes a publish a crash interrupted (recovery runs in
// Connect, before any batch: nothing wrote the delta table since the
// copy-back).
func (l *Engine) recoverPublish(ctx context.Context, e Entry) error {
	if err := l.swap(ctx, e, false); err != nil {
		return err
	}
	l.log.Infof("initial load of %s: finished the publish a restart or a lost ClickHouse interrupted", describeLoad(e))
	return nil
}

// atomicDatabase reports whether database uses the Atomic engine (where
// EXCHANGE TABLES swaps two tables in one step).
func (l *Engine) atomicDatabase(ctx context.Context, database string) (bool, error) {
	engine, err := l.dst.Conn().DatabaseEngine(ctx, database)
	return engine == "Atomic", err
}
