package output

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

// deferredToast is carryUnchanged's answer for such an update.
type deferredToast struct {
	key  []any // the key to read the columns back by (the old key of a key change), in the table's column layout
	want []int // the columns to fill
}

func (d *deferredToast) Error() string {
	return "unchanged TOAST columns wait for the table's initial load"
}

// deferredRow is a held update.
type deferredRow struct {
	oid    uint32
	row    []any
	key    []any
	want   []int
	lsn    wal.LSN
	commit wal.LSN
	xid    uint32
}

var _ error = (*deferredToast)(nil)

// addDeferred holds the updates of a written batch.
func (l *loader) addDeferred(rows []deferredRow) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.deferred == nil {
		l.deferred = map[uint32][]deferredRow{}
	}
	for _, d := range rows {
		l.deferred[d.oid] = append(l.deferred[d.oid], d)
	}
}

// takeDeferred removes and returns oid's held updates in LSN order.
func (l *loader) takeDeferred(oid uint32) []deferredRow {
	l.mu.Lock()
	defer l.mu.Unlock()
	rows := l.deferred[oid]
	delete(l.deferred, oid)
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].lsn < rows[j].lsn })
	return rows
}

// completeDeferred fills the held updates of a load being published from
// its staging table (the load's rows plus the changes copied back) and
// inserts them there. An update the load already holds is dropped; one a
// newer version of its key supersedes is dropped too (its values would
// never be read); a key with no earlier row at all fails the publish.
func (l *loader) completeDeferred(ctx context.Context, name string, ts *tableState, staging clickhouse.Target, snap pgSnapshot, rows []deferredRow) error {
	keySpecs := make([]clickhouse.ColumnSpec, len(ts.keyIdx))
	for j, i := range ts.keyIdx {
		keySpecs[j] = ts.cols[i]
	}
	written := 0
	defer func() {
		if len(rows) > 0 {
			l.log.Infof("initial load of %s: %d update(s) held for the load, %d written (the rest were in the load or superseded)", name, len(rows), written)
		}
	}()
	for _, d := range rows {
		if d.commit < snap.seenBy && snap.sees(d.xid) {
			continue // in the load
		}
		keyVals := make([]any, len(ts.keyIdx))
		for j, i := range ts.keyIdx {
			keyVals[j] = d.key[i]
		}
		want := make([]clickhouse.ColumnSpec, 0, len(d.want)+2)
		for _, idx := range d.want {
			want = append(want, ts.cols[idx])
		}
		want = append(want, ts.cols[ts.lsnIdx], ts.cols[ts.delIdx])
		got, err := l.o.conn.LookupLatest(ctx, staging, keySpecs, [][]any{keyVals}, want)
		if err != nil {
			return fmt.Errorf("completing an update held for the load (at %s): %w", d.lsn, err)
		}
		if len(got) != 1 || got[0] == nil {
			return fmt.Errorf("%w: the update at %s leaves a TOAST column unchanged, but neither the load nor the stream holds an earlier row of its key", errReload, d.lsn)
		}
		latest := got[0]
		if v, _ := latest[len(d.want)].(uint64); v > uint64(d.lsn) {
			continue // superseded
		}
		if del, _ := latest[len(d.want)+1].(uint8); del == 1 {
			return fmt.Errorf("the update at %s leaves a TOAST column unchanged of a key whose newest earlier row is a delete", d.lsn)
		}
		row := append([]any(nil), d.row...)
		for j, idx := range d.want {
			row[idx] = latest[j]
		}
		if err := l.o.conn.Insert(ctx, staging, ts.cols, [][]any{row}); err != nil {
			return fmt.Errorf("writing an update held for the load (at %s): %w", d.lsn, err)
		}
		written++
	}
	return nil
}
