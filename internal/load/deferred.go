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

// completeDeferred completes the held updates of a load being published
// and inserts them into its staging table, around copyBack (which copies
// the streamed changes the load does not hold into it). An update the load
// already holds is dropped. Each other one takes its unchanged TOAST
// columns from the newest row of its old key strictly before its own LSN,
// as the stream does: the delete half of a key change (copied back) sits
// at the update's own LSN. That row is the load's, an earlier held
// update's, or a streamed change's; a key with no earlier row at all fails
// the publish, and so does an earlier row that is a delete. An update
// superseded by a newer version of its own key (streamed, or held) is not
// written (its values would never be read), but a later held update of
// that key still reads it: a chain a->b, b->c needs a->b's row of b,
// which b->c's delete half of b supersedes.
//
// Older versions of a key can be merged away on a ReplacingMergeTree once
// a newer one is in: the load's row of a key is read before the copy-back
// brings the key's later versions in, and the held updates' rows, never
// read back, are kept here and inserted together at the end.
func (l *Engine) completeDeferred(ctx context.Context, name string, ts *clickhouse.RowLayout, staging clickhouse.Target, snap pgSnapshot, rows []DeferredRow, copyBack func() error) error {
	var held []DeferredRow
	for _, d := range rows {
		if !(d.Commit < snap.seenBy && snap.sees(d.XID)) {
			held = append(held, d) // (else in the load)
		}
	}
	written := 0
	defer func() {
		if len(rows) > 0 {
			l.log.Infof("initial load of %s: %d update(s) held for the load, %d written (the rest were in the load or superseded)", name, len(rows), written)
		}
	}()
	if len(held) == 0 {
		return copyBack()
	}
	keySpecs := make([]clickhouse.ColumnSpec, len(ts.KeyIdx))
	for j, i := range ts.KeyIdx {
		keySpecs[j] = ts.Cols[i]
	}
	// Every old key and every held row's own key, once.
	var keys [][]any
	seen := map[string]bool{}
	for _, d := range held {
		for _, row := range [][]any{d.Key, d.Row} {
			k := keyOf(ts, row)
			if id := clickhouse.KeyIdentity(k); !seen[id] {
				seen[id] = true
				keys = append(keys, k)
			}
		}
	}
	conn := l.dst.Conn()
	loaded, err := conn.LookupVersions(ctx, staging, keySpecs, keys, ts.Cols)
	if err != nil {
		return fmt.Errorf("reading the loaded rows of the updates held for the load: %w", err)
	}
	if err := copyBack(); err != nil {
		return err
	}
	streamed, err := conn.LookupVersions(ctx, staging, keySpecs, keys, ts.Cols)
	if err != nil {
		return fmt.Errorf("reading the rows of the updates held for the load: %w", err)
	}
	stored := make(map[string][][]any, len(keys))
	for i, k := range keys {
		stored[clickhouse.KeyIdentity(k)] = append(streamed[i], loaded[i]...)
	}
	out, err := completeHeld(ts, held, stored)
	if err != nil {
		return err
	}
	per := l.cfg.BatchRows
	if per <= 0 {
		per = len(out)
	}
	for start := 0; start < len(out); start += per {
		if err := conn.Insert(ctx, staging, ts.Cols, out[start:min(start+per, len(out))]); err != nil {
			return fmt.Errorf("writing the updates held for the load: %w", err)
		}
	}
	written = len(out)
	return nil
}

// completeHeld fills the unchanged TOAST columns of held (in LSN order,
// none in the load) from stored, the versions of their keys in the
// staging table (by clickhouse.KeyIdentity of the key columns), and from
// the held rows completed before them. It returns the rows to write.
func completeHeld(ts *clickhouse.RowLayout, held []DeferredRow, stored map[string][][]any) ([][]any, error) {
	// The newest version of each key, streamed or held.
	newest := map[string]uint64{}
	for id, versions := range stored {
		for _, v := range versions {
			newest[id] = max(newest[id], lsnOf(ts, v))
		}
	}
	for _, d := range held {
		id := clickhouse.KeyIdentity(keyOf(ts, d.Row))
		newest[id] = max(newest[id], uint64(d.LSN))
	}
	// The newest held row of each key completed so far (row nil: one that
	// was superseded and could not be completed).
	type version struct {
		lsn uint64
		row []any
	}
	done := map[string]version{}
	var out [][]any
	for _, d := range held {
		lsn := uint64(d.LSN)
		old, own := clickhouse.KeyIdentity(keyOf(ts, d.Key)), clickhouse.KeyIdentity(keyOf(ts, d.Row))
		// The newest row of the old key strictly before the update.
		var prior *version
		for _, v := range stored[old] {
			if at := lsnOf(ts, v); at < lsn && (prior == nil || at > prior.lsn) {
				prior = &version{lsn: at, row: v}
			}
		}
		if h, ok := done[old]; ok && h.lsn < lsn && (prior == nil || h.lsn > prior.lsn) {
			prior = &h
		}
		var problem error
		switch {
		case prior == nil:
			problem = fmt.Errorf("%w: the update at %s leaves a TOAST column unchanged, but neither the load nor the stream holds an earlier row of its key", errReload, d.LSN)
		case prior.row == nil:
			problem = fmt.Errorf("%w: the update at %s leaves a TOAST column unchanged of a key whose newest earlier row, the update at %s, could not be completed", errReload, d.LSN, wal.LSN(prior.lsn))
		case deletedRow(ts, prior.row):
			problem = fmt.Errorf("the update at %s leaves a TOAST column unchanged of a key whose newest earlier row is a delete (at %s)", d.LSN, wal.LSN(prior.lsn))
		}
		superseded := newest[own] > lsn
		if problem != nil {
			if superseded {
				done[own] = version{lsn: lsn} // never read, unless by a later held update
				continue
			}
			return nil, problem
		}
		row := append([]any(nil), d.Row...)
		for _, idx := range d.Want {
			row[idx] = prior.row[idx]
		}
		done[own] = version{lsn: lsn, row: row}
		if !superseded {
			out = append(out, row)
		}
	}
	return out, nil
}

// keyOf is row's key columns (row in the table's row layout).
func keyOf(ts *clickhouse.RowLayout, row []any) []any {
	k := make([]any, len(ts.KeyIdx))
	for j, i := range ts.KeyIdx {
		k[j] = row[i]
	}
	return k
}

func lsnOf(ts *clickhouse.RowLayout, row []any) uint64 {
	v, _ := row[ts.LSNIdx].(uint64)
	return v
}

func deletedRow(ts *clickhouse.RowLayout, row []any) bool {
	v, _ := row[ts.DelIdx].(uint8)
	return v == 1
}
