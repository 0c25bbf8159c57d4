package load

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/decode"
	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/load/pagewalk"
	"github.com/walshadow/walshadow/internal/render"
	"github.com/walshadow/walshadow/internal/shadow"
	"github.com/walshadow/walshadow/internal/wal"
)

// startBackupPass loads tables from one BASE_BACKUP of the source: the
// backup streams the whole cluster once, the walk keeps the tables'
// pages. Tables a pass could not publish (changed during it) go into the
// next pass; a dropped one is discarded.
func (l *Engine) startBackupPass(entries []Entry) {
	l.mu.Lock()
	var oids []uint32
	for _, e := range entries {
		if _, running := l.runs[e.Oid]; running {
			continue
		}
		l.runs[e.Oid] = &loadRun{oid: e.Oid}
		oids = append(oids, e.Oid)
	}
	l.mu.Unlock()
	if len(oids) == 0 {
		return
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer func() {
			l.mu.Lock()
			for _, oid := range oids {
				delete(l.runs, oid)
			}
			l.mu.Unlock()
		}()
		backoff := 2 * time.Second
		for len(oids) > 0 {
			select {
			case l.tables <- struct{}{}:
			case <-l.ctx.Done():
				return
			}
			l.m.running.Incr(1)
			var remaining []uint32
			var err error
			for _, oid := range oids {
				// (A publish an earlier pass failed in the middle of.)
				if finishing, ferr := l.finishPublishing(l.ctx, oid); !finishing {
					remaining = append(remaining, oid)
				} else if ferr != nil {
					remaining, err = append(remaining, oid), ferr
				}
			}
			if err == nil && len(remaining) > 0 {
				remaining, err = l.backupPass(l.ctx, remaining)
			}
			l.m.running.Decr(1)
			<-l.tables
			if l.ctx.Err() != nil {
				return
			}
			oids = l.withoutDropped(remaining)
			if errors.Is(err, errReload) {
				l.log.Infof("initial load from a base backup: %v: loading again", err)
				err = nil
				time.Sleep(time.Second)
			}
			if err != nil {
				l.m.failures.Incr(1, "base_backup")
				// The tables the failure is of park once it recurs
				// identically; the others go on.
				var parked []uint32
				for _, oid := range l.failedInPass(oids, err) {
					if l.noteFailure(oid, err) {
						parked = append(parked, oid)
					}
				}
				oids = slices.DeleteFunc(oids, func(oid uint32) bool { return slices.Contains(parked, oid) })
				if len(oids) == 0 {
					return
				}
				l.log.Errorf("initial load from a base backup (%d table(s)) failed, retrying in %s: %v", len(oids), backoff, err)
				select {
				case <-time.After(backoff):
				case <-l.ctx.Done():
					return
				}
				backoff = min(2*backoff, 2*time.Minute)
			}
		}
	}()
}

// failedInPass are the tables of a base backup pass (oids) that its
// failure err is of: the one table of a pass of one, else those the error
// names (their load, or their staging table).
func (l *Engine) failedInPass(oids []uint32, err error) []uint32 {
	if len(oids) == 1 {
		return oids
	}
	msg := err.Error()
	var out []uint32
	for _, oid := range oids {
		e, ok := l.ledger.Get(oid)
		if !ok {
			continue
		}
		name := "initial load of " + describeLoad(e)
		if strings.Contains(msg, name+":") || strings.Contains(msg, name+",") ||
			e.Staging != "" && strings.Contains(msg, clickhouse.QuoteQualified(clickhouse.Target{Database: e.Database, Table: e.Staging})) {
			out = append(out, oid)
		}
	}
	return out
}

// withoutDropped discards the loads of relations dropped meanwhile.
func (l *Engine) withoutDropped(oids []uint32) []uint32 {
	var keep []uint32
	for _, oid := range oids {
		l.mu.Lock()
		run := l.runs[oid]
		dropped := run != nil && run.dropped
		l.mu.Unlock()
		e, ok := l.ledger.Get(oid)
		if !ok || e.Phase == PhaseDone {
			continue
		}
		if dropped {
			if err := l.Discard(l.ctx, e); err != nil {
				l.log.Errorf("initial load of %s: %v", describeLoad(e), err)
			}
			continue
		}
		keep = append(keep, oid)
	}
	return keep
}

// backupTable is one table of a base backup pass.
type backupTable struct {
	e      Entry
	a      *clickhouse.Agreed
	gen    uint64
	desc   *desclog.Descriptor
	toast  *desclog.Descriptor
	ts     *clickhouse.RowLayout
	ins    *stagingInserter
	rows   atomic.Int64
	bytes  atomic.Int64
	tuples int64
}

// backupPass loads oids from one base backup and publishes each; it
// returns the ones still to load.
func (l *Engine) backupPass(ctx context.Context, oids []uint32) ([]uint32, error) {
	dlog := l.src.DescLog()
	if dlog == nil {
		return oids, errors.New("the session's descriptor log is not open")
	}
	db := dlog.Identity().DbOid
	byRfn := map[uint32]pagewalk.Target{}
	tables := map[uint32]*backupTable{}
	var order []*backupTable
	var stale []uint32 // to load in a later pass
	for _, oid := range oids {
		e, ok := l.ledger.Get(oid)
		if !ok || e.Phase == PhaseDone || e.Parked != nil {
			continue
		}
		a := l.store.Get(oid)
		if a == nil || a.Dropped {
			continue
		}
		t := &backupTable{e: e, a: a.Clone(), gen: l.generation(oid)}
		// The relation's newest shape and files as captured: its columns
		// must be the agreed ones, its files the source's (checkStorage).
		latest := max(dlog.LastCapturedAt(), dlog.CoveredThrough())
		at := dlog.DescriptorByOidInDBAt(db, oid, latest)
		if at.Result != desclog.Present || at.Desc == nil {
			return oids, fmt.Errorf("%s.%s: no shape at %s in the descriptor log (%v)", a.Schema, a.Table, latest, at.Result)
		}
		if !sameColumns(at.Desc.Columns, a.Shape) {
			l.log.Infof("initial load of %s: its newest captured shape is not agreed yet: loading it in the next pass", describeLoad(e))
			stale = append(stale, oid)
			continue
		}
		t.desc = at.Desc
		if at.Desc.ToastOid != 0 {
			tl := dlog.DescriptorByOidInDBAt(db, at.Desc.ToastOid, latest)
			if tl.Result != desclog.Present || tl.Desc == nil {
				return oids, fmt.Errorf("%s.%s: its TOAST relation %d has no shape at %s in the descriptor log (%v)", a.Schema, a.Table, at.Desc.ToastOid, latest, tl.Result)
			}
			t.toast = tl.Desc
		}
		if err := l.prepareStaging(ctx, &t.e, t.a); err != nil {
			return oids, err
		}
		rl := clickhouse.NewRowLayout(l.dst.Conn().Dialect(), t.a)
		t.ts = &rl
		t.ins = &stagingInserter{l: l, ts: t.ts, target: clickhouse.Target{Database: t.e.Database, Table: t.e.Staging}}
		tables[oid] = t
		order = append(order, t)
		byRfn[t.desc.Rfn.RelNum] = pagewalk.Target{Desc: t.desc, DescFrom: a.ValidFrom, Toast: t.toast}
	}
	if len(order) == 0 {
		if len(stale) > 0 {
			time.Sleep(time.Second) // the shape is on its way from the stream
		}
		return stale, nil
	}
	coord, err := l.sources.get(ctx)
	if err != nil {
		return oids, err
	}
	defer l.sources.put(coord)
	s, _, err := l.coverage(ctx, coord, fmt.Sprintf("%d table(s) from a base backup", len(order)))
	if err != nil {
		return oids, err
	}
	var checksums string
	if err := coord.QueryRow(ctx, "SHOW data_checksums").Scan(&checksums); err != nil {
		return oids, fmt.Errorf("reading data_checksums: %w", err)
	}
	// Every transaction this snapshot sees committed before the backup
	// starts: the pages hold its changes, the stream skips them.
	var snapText, seenText string
	if err := coord.QueryRow(ctx, "SELECT pg_current_snapshot()::text, pg_current_wal_insert_lsn()::text").Scan(&snapText, &seenText); err != nil {
		return oids, fmt.Errorf("reading the source's snapshot: %w", err)
	}
	snap, err := parsePGSnapshot(snapText)
	if err != nil {
		return oids, err
	}
	if snap.seenBy, err = wal.ParseLSN(seenText); err != nil {
		return oids, err
	}
	if err := l.checkStorage(ctx, coord, order); err != nil {
		var se *staleStorageError
		if errors.As(err, &se) {
			err = fmt.Errorf("%w (before the backup: the change is still to be streamed)", errReload)
		}
		return oids, err
	}
	var estRows int64
	names := make([]string, 0, len(order))
	for _, t := range order {
		t.e.Coverage, t.e.Snapshot, t.e.SeenBy = s, snapText, snap.seenBy
		if err := l.ledger.putLoad(t.e); err != nil {
			return oids, err
		}
		l.setFilter(t.e.Oid, snap)
		estRows += t.tuples
		names = append(names, describeLoad(t.e))
	}
	passName := "base backup of " + strings.Join(names, ", ")
	if len(names) > 3 {
		passName = fmt.Sprintf("base backup of %s and %d more", strings.Join(names[:3], ", "), len(names)-3)
	}
	l.log.Infof("initial load from a %s: rows tagged _lsn %s", passName, s)
	defer func() {
		for _, t := range order {
			t.ins.abandon()
		}
	}()
	progress := NewProgress(estRows, 0, time.Now())
	stop := l.progressLogger(passName, progress, func() {
		for _, t := range order {
			running := t.e
			running.Rows, running.Bytes = t.rows.Load(), t.bytes.Load()
			if err := l.ledger.putLoad(running); err != nil {
				l.log.Warnf("initial load of %s: recording progress: %v", describeLoad(t.e), err)
			}
		}
	})
	cfg := pagewalk.Config{DbOid: db, Targets: byRfn, LSN: s, SpillDir: l.cfg.SpillDir, DataChecksums: checksums == "on"}
	rate := 0
	if l.cfg.MaxRate > 0 {
		rate = int(max(l.cfg.MaxRate>>10, 32))
	}
	walked := false
	_, _, err = shadow.ReadBaseBackup(ctx, l.src.SourceDSN(), shadow.BaseBackupOptions{Label: "walshadow initial load", Fast: true, MaxRate: rate, ApplicationName: applicationName}, nil,
		func(spc shadow.BackupTablespace, r io.Reader) error {
			if spc.OID != 0 {
				return nil // only the default tablespace's tables are walked
			}
			walked = true
			_, err := pagewalk.Walk(ctx, r, cfg, func(oid uint32, rows []decode.RowChange) error {
				t := tables[oid]
				if t == nil {
					return fmt.Errorf("the walk emitted rows of relation %d, which it was not asked for", oid)
				}
				n, b, err := l.insertWalked(ctx, t, rows, s)
				if err != nil {
					return err
				}
				t.rows.Add(n)
				t.bytes.Add(b)
				progress.Add(n, b)
				l.m.rows.Incr(n, describeLoad(t.e))
				l.m.bytes.Incr(b, describeLoad(t.e))
				return nil
			})
			return err
		})
	progress.Done(time.Now())
	stop()
	if err != nil {
		return oids, fmt.Errorf("reading the base backup: %w", err)
	}
	if !walked {
		return oids, errors.New("the base backup had no archive of the data directory")
	}
	for _, t := range order {
		if err := t.ins.flush(ctx); err != nil {
			return oids, err
		}
	}
	// The shapes and files read must still be the relations' now: a change
	// during the backup reloads that table.
	staleAfter := map[uint32]bool{}
	if err := l.checkStorage(ctx, coord, order); err != nil {
		var se *staleStorageError
		if !errors.As(err, &se) {
			return oids, err
		}
		for _, oid := range se.oids {
			staleAfter[oid] = true
		}
	}
	remaining := stale
	for _, t := range order {
		if staleAfter[t.e.Oid] {
			remaining = append(remaining, t.e.Oid)
			continue
		}
		t.e.Rows, t.e.Bytes = t.rows.Load(), t.bytes.Load()
		err := l.publish(ctx, &t.e, t.a, t.gen, snap)
		if errors.Is(err, errReload) {
			l.log.Infof("initial load of %s: %v: loading it again in the next pass", describeLoad(t.e), err)
			remaining = append(remaining, t.e.Oid)
			continue
		}
		if err != nil {
			return append(remaining, l.unpublished(order, t)...), err
		}
	}
	return remaining, nil
}

// unpublished are the oids of order from t on.
func (l *Engine) unpublished(order []*backupTable, from *backupTable) []uint32 {
	var out []uint32
	seen := false
	for _, t := range order {
		seen = seen || t == from
		if seen {
			out = append(out, t.e.Oid)
		}
	}
	return out
}

// sameColumns reports whether a descriptor's live columns are the agreed
// shape's (number, name, type).
func sameColumns(cols []desclog.Column, agreed []desclog.Column) bool {
	var live, want []desclog.Column
	for _, c := range cols {
		if !c.Dropped {
			live = append(live, c)
		}
	}
	for _, c := range agreed {
		if !c.Dropped {
			want = append(want, c)
		}
	}
	if len(live) != len(want) {
		return false
	}
	for i := range live {
		if live[i].Num != want[i].Num || live[i].Name != want[i].Name || live[i].TypeOid != want[i].TypeOid {
			return false
		}
	}
	return true
}

// staleStorageError names tables whose files or columns moved.
type staleStorageError struct{ oids []uint32 }

func (e *staleStorageError) Error() string {
	return fmt.Sprintf("%d table(s) changed storage or columns during the base backup", len(e.oids))
}

// checkStorage compares each table's filenodes and columns on the source
// with the shape the walk decodes with.
func (l *Engine) checkStorage(ctx context.Context, conn *pgx.Conn, tables []*backupTable) error {
	var stale []uint32
	for _, t := range tables {
		tx, err := conn.Begin(ctx)
		if err != nil {
			return err
		}
		var rfn, toastRfn int64
		err = tx.QueryRow(ctx, `SELECT c.relfilenode::bigint, coalesce(t.relfilenode::bigint, 0)
			FROM pg_class c LEFT JOIN pg_class t ON t.oid = c.reltoastrelid WHERE c.oid = $1`, t.e.Oid).Scan(&rfn, &toastRfn)
		if err == nil {
			var rel sourceRelation
			rel, err = relationInSnapshot(ctx, tx, t.a)
			t.tuples = rel.tuples
		}
		_ = tx.Rollback(ctx)
		switch {
		case errors.Is(err, errReload):
			stale = append(stale, t.e.Oid)
			continue
		case err != nil:
			return fmt.Errorf("checking %s on the source: %w", describeLoad(t.e), err)
		}
		want := int64(0)
		if t.toast != nil {
			want = int64(t.toast.Rfn.RelNum)
		}
		if rfn != int64(t.desc.Rfn.RelNum) || toastRfn != want {
			stale = append(stale, t.e.Oid)
		}
	}
	if len(stale) > 0 {
		return &staleStorageError{oids: stale}
	}
	return nil
}

// insertWalked renders and converts walked rows into the staging table.
func (l *Engine) insertWalked(ctx context.Context, t *backupTable, rows []decode.RowChange, s wal.LSN) (n, bytes int64, err error) {
	if _, err := render.Pending(ctx, l.src.Bridge(), rows); err != nil {
		return 0, 0, fmt.Errorf("initial load of %s: %w", describeLoad(t.e), err)
	}
	ts := t.ts
	for i := range rows {
		row := make([]any, len(ts.Cols))
		filled := 0
		size := 24
		for j := range rows[i].Fields {
			f := &rows[i].Fields[j]
			idx, ok := ts.ByAttnum[f.Col.Num]
			if !ok {
				continue // excluded by configuration
			}
			var v any
			if !f.Null {
				if f.Omitted || f.Pending {
					return 0, 0, fmt.Errorf("initial load of %s: column %s of a walked row has no value", describeLoad(t.e), f.Col.Name)
				}
				v = f.Value
			}
			cv, err := clickhouse.ConvertValue(ts.Cols[idx], v)
			if err != nil {
				return 0, 0, fmt.Errorf("initial load of %s: column %s: %w", describeLoad(t.e), ts.Cols[idx].Name, err)
			}
			row[idx] = cv
			filled++
			size += clickhouse.ValueSize(cv)
		}
		if filled != ts.Mapped() {
			return 0, 0, fmt.Errorf("initial load of %s: a walked row has %d of the %d mapped columns", describeLoad(t.e), filled, ts.Mapped())
		}
		loadedRowMeta(ts, row, s, 0)
		if err := t.ins.add(ctx, row, size); err != nil {
			return 0, 0, err
		}
		n++
		bytes += int64(size)
	}
	return n, bytes, nil
}
