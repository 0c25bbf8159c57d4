package output

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/load"
	"github.com/walshadow/walshadow/internal/wal"
)

// publish makes a loaded staging table the target, between two batches:
// the changes streamed into the target since the load's coverage are
// copied into it, then it replaces the target in one step. snap is the
// load's snapshot (copy mode): a change-log table keeps only the streamed
// changes of transactions it did not see; a table with a key keeps every
// change newer than S (versions decide).
func (l *loader) publish(ctx context.Context, e *load.Entry, loaded *clickhouse.Agreed, gen uint64, snap *pgSnapshot) error {
	o := l.o
	if len(loaded.OrderBy) == 0 && snap != nil {
		// A change log keeps a streamed change only if the snapshot did
		// not see its transaction: every transaction it saw must be in the
		// target before the copy-back, or it would be written twice.
		if err := l.waitDelivered(ctx, *e, snap.seenBy-1); err != nil {
			return err
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.conn == nil {
		return fmt.Errorf("the output is not connected")
	}
	if l.generation(e.Oid) != gen {
		return errReload
	}
	a := o.store.Get(e.Oid)
	if a == nil || a.Dropped || a.ValidFrom != loaded.ValidFrom || a.Target != loaded.Target {
		return errReload
	}
	ts := newTableState(o.conn.Dialect(), a)
	live := a.Target
	staging := clickhouse.Target{Database: e.Database, Table: e.Staging}
	var filter string
	switch {
	case len(a.OrderBy) > 0:
		filter = fmt.Sprintf("_lsn > %d", uint64(e.Coverage))
	case snap != nil:
		filter = snap.invisibleSQL()
	default:
		return fmt.Errorf("%s.%s has no key and its load no snapshot: it cannot tell the streamed changes the load holds", e.Schema, e.Table)
	}
	cols := make([]string, len(ts.cols))
	for i, c := range ts.cols {
		cols[i] = clickhouse.QuoteIdent(c.Name)
	}
	list := strings.Join(cols, ", ")
	copyBack := fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM %s WHERE %s",
		clickhouse.QuoteQualified(staging), list, list, clickhouse.QuoteQualified(live), filter)
	if err := o.conn.Exec(ctx, copyBack); err != nil {
		return fmt.Errorf("copying the changes streamed during the load into %s: %w", clickhouse.QuoteQualified(staging), err)
	}
	atomicDB, err := l.atomicDatabase(ctx, live.Database)
	if err != nil {
		return err
	}
	if atomicDB {
		if e.StagingUUID, err = l.tableUUID(ctx, staging); err != nil {
			return err
		}
	}
	e.Phase = load.PhasePublishing
	if err := l.ledger.Put(*e); err != nil {
		return err
	}
	if err := l.swap(ctx, *e, atomicDB); err != nil {
		return err
	}
	return l.finish(e)
}

// waitDelivered waits until the session has delivered every transaction
// committed at or before lsn.
func (l *loader) waitDelivered(ctx context.Context, e load.Entry, lsn wal.LSN) error {
	logged := time.Now()
	for l.o.sess.DeliveredThrough() < lsn {
		if time.Since(logged) > 30*time.Second {
			logged = time.Now()
			l.log.Infof("initial load of %s: loaded, waiting for the stream to deliver through %s (at %s) before publishing", describeLoad(e), lsn, l.o.sess.DeliveredThrough())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// swap replaces the target by the staging table and drops what the
// target held.
func (l *loader) swap(ctx context.Context, e load.Entry, atomicDB bool) error {
	live := clickhouse.Target{Database: e.Database, Table: e.Target}
	staging := clickhouse.Target{Database: e.Database, Table: e.Staging}
	old := clickhouse.Target{Database: e.Database, Table: e.Old}
	var stmts []string
	if atomicDB {
		stmts = []string{
			fmt.Sprintf("EXCHANGE TABLES %s AND %s", clickhouse.QuoteQualified(staging), clickhouse.QuoteQualified(live)),
			clickhouse.DropTable(staging),
		}
	} else {
		stmts = []string{
			clickhouse.DropTable(old),
			fmt.Sprintf("RENAME TABLE %s TO %s, %s TO %s", clickhouse.QuoteQualified(live), clickhouse.QuoteQualified(old),
				clickhouse.QuoteQualified(staging), clickhouse.QuoteQualified(live)),
			clickhouse.DropTable(old),
		}
	}
	for _, s := range stmts {
		if err := l.o.conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("publishing the load of %s.%s: %s: %w", e.Schema, e.Table, firstLine(s), err)
		}
	}
	return nil
}

// finish records a published load.
func (l *loader) finish(e *load.Entry) error {
	e.Phase = load.PhaseDone
	e.FinishedAt = time.Now().UTC()
	e.LastError = ""
	if err := l.ledger.Put(*e); err != nil {
		return err
	}
	took := e.FinishedAt.Sub(e.StartedAt)
	secs := max(took.Seconds(), 0.001)
	l.log.Infof("initial load of %s published: %d rows, %.1f MB in %s (%.0f rows/s, %.1f MB/s), rows tagged _lsn %s, attempt %d",
		describeLoad(*e), e.Rows, float64(e.Bytes)/(1<<20), took.Round(time.Millisecond), float64(e.Rows)/secs, float64(e.Bytes)/(1<<20)/secs, e.Coverage, e.Attempt)
	l.m.published.Incr(1)
	l.m.percent.Set(100, describeLoad(*e))
	l.m.eta.Set(0, describeLoad(*e))
	return nil
}

// recoverPublish finishes a publish a crash interrupted, from what
// ClickHouse holds: the copy-back ran before the ledger said publishing,
// and nothing wrote the target since (recovery runs before any batch).
func (l *loader) recoverPublish(ctx context.Context, e load.Entry) error {
	live := clickhouse.Target{Database: e.Database, Table: e.Target}
	staging := clickhouse.Target{Database: e.Database, Table: e.Staging}
	old := clickhouse.Target{Database: e.Database, Table: e.Old}
	exists := func(t clickhouse.Target) (bool, error) {
		ch, err := l.o.conn.Table(ctx, t)
		return ch.Exists, err
	}
	hasLive, err := exists(live)
	if err != nil {
		return err
	}
	hasStaging, err := exists(staging)
	if err != nil {
		return err
	}
	if e.StagingUUID != "" {
		// EXCHANGE: the target carries the staging table's uuid once swapped.
		if hasLive {
			uuid, err := l.tableUUID(ctx, live)
			if err != nil {
				return err
			}
			if uuid == e.StagingUUID {
				if err := l.o.conn.Exec(ctx, clickhouse.DropTable(staging)); err != nil {
					return err
				}
				return l.finish(&e)
			}
		}
		if !hasStaging || !hasLive {
			return fmt.Errorf("neither %s nor %s is as the publish left them: reload it by removing its entry from %s", clickhouse.QuoteQualified(live), clickhouse.QuoteQualified(staging), load.LedgerFile)
		}
		if err := l.swap(ctx, e, true); err != nil {
			return err
		}
		return l.finish(&e)
	}
	hasOld, err := exists(old)
	if err != nil {
		return err
	}
	var stmts []string
	switch {
	case hasStaging && hasLive:
		return l.swapAndFinish(ctx, e)
	case hasStaging && !hasLive:
		// The rename sequence stopped after moving the target aside.
		stmts = append(stmts, fmt.Sprintf("RENAME TABLE %s TO %s", clickhouse.QuoteQualified(staging), clickhouse.QuoteQualified(live)))
		if hasOld {
			stmts = append(stmts, clickhouse.DropTable(old))
		}
	case !hasStaging && hasLive:
		if hasOld {
			stmts = append(stmts, clickhouse.DropTable(old))
		}
	default:
		return fmt.Errorf("neither %s nor its staging table %s exists: reload it by removing its entry from %s", clickhouse.QuoteQualified(live), clickhouse.QuoteQualified(staging), load.LedgerFile)
	}
	for _, s := range stmts {
		if err := l.o.conn.Exec(ctx, s); err != nil {
			return err
		}
	}
	l.log.Infof("initial load of %s: finished the publish a restart interrupted", describeLoad(e))
	return l.finish(&e)
}

func (l *loader) swapAndFinish(ctx context.Context, e load.Entry) error {
	if err := l.swap(ctx, e, false); err != nil {
		return err
	}
	l.log.Infof("initial load of %s: finished the publish a restart interrupted", describeLoad(e))
	return l.finish(&e)
}

// atomicDatabase reports whether database uses the Atomic engine (where
// EXCHANGE TABLES swaps two tables in one step).
func (l *loader) atomicDatabase(ctx context.Context, database string) (bool, error) {
	var engine string
	err := l.o.conn.Native().QueryRow(ctx, "SELECT engine FROM system.databases WHERE name = "+clickhouse.QuoteString(database)).Scan(&engine)
	if err != nil {
		return false, fmt.Errorf("reading the engine of database %s: %w", clickhouse.QuoteIdent(database), err)
	}
	return engine == "Atomic", nil
}

// tableUUID is a table's uuid (Atomic databases).
func (l *loader) tableUUID(ctx context.Context, t clickhouse.Target) (string, error) {
	var uuid string
	err := l.o.conn.Native().QueryRow(ctx, "SELECT toString(uuid) FROM system.tables WHERE database = "+clickhouse.QuoteString(t.Database)+
		" AND name = "+clickhouse.QuoteString(t.Table)).Scan(&uuid)
	if err != nil {
		return "", fmt.Errorf("reading the uuid of %s: %w", clickhouse.QuoteQualified(t), err)
	}
	return uuid, nil
}
