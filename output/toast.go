package output

import (
	"context"
	"errors"
	"fmt"

	"github.com/walshadow/walshadow/internal/clickhouse"
)

// carryUnchanged fills the unchanged TOAST columns of an update: from the
// delete half of its pair when that carried them (REPLICA IDENTITY FULL
// logs the whole old row), else from the newest earlier row of the key,
// pending here or on ClickHouse. A value found nowhere fails the table
// (contain: it is reloaded): writing anything else would be a guess. A
// replayed update whose key ClickHouse holds at its own or a newer _lsn
// is errSuperseded.
//
// old, when not nil, holds the key of the row's earlier version (a
// physical table's update: the tuple it replaced).
func (o *chOutput) carryUnchanged(ctx context.Context, ts *tableState, shape *rowShape, c change, pair *parsedChange, old []any) error {
	b := ts.block // the row is the open one
	var want []int
	for _, name := range c.omitted {
		idx, err := o.columnIndex(ts, shape, c, name)
		if err != nil {
			return err
		}
		if idx >= 0 && !b.Filled(idx) {
			want = append(want, idx)
		}
	}
	if len(want) == 0 {
		return nil
	}
	if pair != nil {
		if fields, err := pair.fields(); err == nil {
			rest := want[:0]
			for _, idx := range want {
				v, ok := fields[shape.names[ts.agreed.Columns[idx].Attnum]]
				if !ok {
					rest = append(rest, idx)
					continue
				}
				if err := b.Put(idx, v); err != nil {
					return fmt.Errorf("update of %s at %s: column %s from the old row: %w", ts.label, c.lsn, ts.Cols[idx].Name, err)
				}
			}
			want = rest
		}
	}
	if len(want) == 0 {
		return nil
	}
	if len(ts.KeyIdx) == 0 {
		return fmt.Errorf("update of %s at %s: unchanged TOAST column %s is not in the WAL and the table has no key to read it back by", ts.label, c.lsn, ts.Cols[want[0]].Name)
	}
	key := make([]any, len(ts.Cols))
	if old != nil {
		copy(key, old)
	} else if pair != nil {
		// The old key: the delete half is the newest pending row.
		if n := b.Len(); n > 0 && ts.deletedAt(n-1) && ts.lsnAt(n-1) == uint64(c.lsn) {
			key = b.Row(n - 1)
		} else {
			return fmt.Errorf("update of %s at %s: the old key of the key-changing update is not pending", ts.label, c.lsn)
		}
	} else {
		for _, i := range ts.KeyIdx {
			key[i] = b.Value(b.Len(), i)
		}
	}
	if prior := ts.findLatest(key, uint64(c.lsn)); prior != nil {
		if v, _ := prior[ts.DelIdx].(uint8); v == 1 {
			return fmt.Errorf("update of %s at %s: unchanged TOAST column %s of a key whose newest row is a delete", ts.label, c.lsn, ts.Cols[want[0]].Name)
		}
		for _, idx := range want {
			b.PutConverted(idx, prior[idx])
		}
		return nil
	}
	o.m.toastLookups.Incr(1)
	keySpecs := make([]clickhouse.ColumnSpec, len(ts.KeyIdx))
	keyVals := make([]any, len(ts.KeyIdx))
	for j, i := range ts.KeyIdx {
		keySpecs[j], keyVals[j] = ts.Cols[i], key[i]
	}
	wantSpecs := make([]clickhouse.ColumnSpec, 0, len(want)+1)
	for _, idx := range want {
		wantSpecs = append(wantSpecs, ts.Cols[idx])
	}
	wantSpecs = append(wantSpecs, ts.Cols[ts.DelIdx], ts.Cols[ts.LSNIdx])
	got, err := o.conn.LookupLatest(ctx, ts.agreed.Target, keySpecs, [][]any{keyVals}, wantSpecs)
	if err != nil {
		return fmt.Errorf("update of %s at %s: reading unchanged TOAST columns back: %w", ts.label, c.lsn, err)
	}
	if len(got) != 1 || got[0] == nil {
		if o.loads.Loading(c.oid) {
			// The row's earlier version is in the table's load, not yet
			// published: the update waits for it (load.DeferredRow).
			return &deferredToast{key: key, want: want}
		}
		return fmt.Errorf("update of %s at %s: unchanged TOAST column %s is not in the WAL and ClickHouse holds no earlier row of the key: refusing to write a guessed value", ts.label, c.lsn, ts.Cols[want[0]].Name)
	}
	if newest, _ := got[0][len(want)+1].(uint64); newest >= uint64(c.lsn) {
		// A replay: ClickHouse holds this change's version of the key, or
		// a newer one, which this change can never outrank. (The delete
		// half of a key-changing update is never flushed apart from its
		// update half: a version at c.lsn was written by this record.)
		return errSuperseded
	}
	if del, _ := got[0][len(want)].(uint8); del == 1 {
		return fmt.Errorf("update of %s at %s: unchanged TOAST column %s of a key ClickHouse holds as deleted", ts.label, c.lsn, ts.Cols[want[0]].Name)
	}
	for j, idx := range want {
		b.PutConverted(idx, got[0][j])
	}
	return nil
}

// errSuperseded: a replayed change whose key ClickHouse already holds at
// a newer _lsn. Writing it could change nothing (the newer version wins),
// so it is skipped, whatever it would have needed to read.
var errSuperseded = errors.New("superseded by a newer version of its key on ClickHouse")

// An update whose unchanged TOAST columns are not in the WAL takes them
// from the newest earlier row of its key; while the table's load is not
// published that row may be only in the load, and the update is held by
// the engine (load.DeferredRow) until the publish.

// deferredToast is carryUnchanged's answer for such an update.
type deferredToast struct {
	key  []any // the key to read the columns back by (the old key of a key change), in the table's column layout
	want []int // the columns to fill
}

func (d *deferredToast) Error() string {
	return "unchanged TOAST columns wait for the table's initial load"
}

var _ error = (*deferredToast)(nil)
