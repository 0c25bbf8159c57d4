package load

import (
	"context"
	"fmt"
	"sort"

	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/wal"
)

// An update whose unchanged TOAST columns are not in the WAL takes them
// from the newest earlier row of its key. While the table's load is not
// published, that row may be only in the load: the update is then held
// (in memory) and completed at the publish, from the staging table, before
// the table takes its name. Held rows need no durability: a restart before
// the publish reloads the table with a snapshot that sees their
// transactions.

// DeferredRow is a held update.
type DeferredRow struct {
	Oid    uint32
	Row    []any // the update's row, its unchanged TOAST columns not filled
	Key    []any // the key to read them back by, in the table's row layout
	Want   []int // the columns to fill
	LSN    wal.LSN
	Commit wal.LSN // its transaction's commit record
	XID    uint32
}

// AddDeferred holds the updates of a written batch whose unchanged
// TOAST columns wait for their table's load.
func (l *Engine) AddDeferred(rows []DeferredRow) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.deferred == nil {
		l.deferred = map[uint32][]DeferredRow{}
	}
	for _, d := range rows {
		l.deferred[d.Oid] = append(l.deferred[d.Oid], d)
	}
}

// takeDeferred removes and returns oid's held updates in LSN order.
func (l *Engine) takeDeferred(oid uint32) []DeferredRow {
	l.mu.Lock()
	defer l.mu.Unlock()
	rows := l.deferred[oid]
	delete(l.deferred, oid)
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].LSN < rows[j].LSN })
	return rows
}

// completeDeferred fills the held updates of a load being published from
// its staging table (the load's rows plus the changes copied back) and
// inserts them there. An update the load already holds is dropped; one a
// newer version of its key supersedes is dropped too (its values would
// never be read); a key with no earlier row at all fails the publish.
func (l *Engine) completeDeferred(ctx context.Context, name string, ts *clickhouse.RowLayout, staging clickhouse.Target, snap pgSnapshot, rows []DeferredRow) error {
	keySpecs := make([]clickhouse.ColumnSpec, len(ts.KeyIdx))
	for j, i := range ts.KeyIdx {
		keySpecs[j] = ts.Cols[i]
	}
	written := 0
	defer func() {
		if len(rows) > 0 {
			l.log.Infof("initial load of %s: %d update(s) held for the load, %d written (the rest were in the load or superseded)", name, len(rows), written)
		}
	}()
	for _, d := range rows {
		if d.Commit < snap.seenBy && snap.sees(d.XID) {
			continue // in the load
		}
		keyVals := make([]any, len(ts.KeyIdx))
		for j, i := range ts.KeyIdx {
			keyVals[j] = d.Key[i]
		}
		want := make([]clickhouse.ColumnSpec, 0, len(d.Want)+2)
		for _, idx := range d.Want {
			want = append(want, ts.Cols[idx])
		}
		want = append(want, ts.Cols[ts.LSNIdx], ts.Cols[ts.DelIdx])
		got, err := l.dst.Conn().LookupLatest(ctx, staging, keySpecs, [][]any{keyVals}, want)
		if err != nil {
			return fmt.Errorf("completing an update held for the load (at %s): %w", d.LSN, err)
		}
		if len(got) != 1 || got[0] == nil {
			return fmt.Errorf("%w: the update at %s leaves a TOAST column unchanged, but neither the load nor the stream holds an earlier row of its key", errReload, d.LSN)
		}
		latest := got[0]
		if v, _ := latest[len(d.Want)].(uint64); v > uint64(d.LSN) {
			continue // superseded
		}
		if del, _ := latest[len(d.Want)+1].(uint8); del == 1 {
			return fmt.Errorf("the update at %s leaves a TOAST column unchanged of a key whose newest earlier row is a delete", d.LSN)
		}
		row := append([]any(nil), d.Row...)
		for j, idx := range d.Want {
			row[idx] = latest[j]
		}
		if err := l.dst.Conn().Insert(ctx, staging, ts.Cols, [][]any{row}); err != nil {
			return fmt.Errorf("writing an update held for the load (at %s): %w", d.LSN, err)
		}
		written++
	}
	return nil
}
