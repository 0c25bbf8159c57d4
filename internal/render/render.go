// Package render renders, through the shadow's bridge, the values
// walshadow does not decode itself (decode.Field.Pending): the shadow's
// own output functions produce their text.
package render

import (
	"context"
	"errors"
	"fmt"

	"github.com/walshadow/walshadow/internal/decode"
	"github.com/walshadow/walshadow/internal/shadow"
)

// ErrNoBridge is the error a value to render meets when the shadow has no
// bridge.
var ErrNoBridge = errors.New("this type is rendered by the shadow's bridge, which is not configured: set shadow.bridge_library_dir on the walshadow resource (build it with make -C pgext)")

// Pending renders, through the shadow's bridge, every value of rows
// walshadow does not decode itself (Field.Pending): one round trip per
// chunk of values, not per value. It returns how many it rendered. A value
// whose output function fails is an error.
func Pending(ctx context.Context, bridge *shadow.Bridge, rows []decode.RowChange) (int, error) {
	return PendingOrFail(ctx, bridge, rows, nil)
}

// PendingOrFail is Pending; with onFail set, a value whose output
// function failed goes to onFail (its row, an error naming the LSN,
// relation and column) instead, and the other values still render.
func PendingOrFail(ctx context.Context, bridge *shadow.Bridge, rows []decode.RowChange, onFail func(row int, err error)) (int, error) {
	const maxItems, maxBytes = 4096, 16 << 20
	type ref struct{ row, field int }
	var items []shadow.DecodeItem
	var refs []ref
	size, rendered := 0, 0
	flush := func() error {
		if len(items) == 0 {
			return nil
		}
		r0 := refs[0]
		if bridge == nil {
			return fmt.Errorf("%s: %w", describeField(&rows[r0.row], r0.field), ErrNoBridge)
		}
		texts, err := bridge.Decode(ctx, items)
		if err != nil {
			return fmt.Errorf("rendering %d values through the shadow's bridge (first: %s): %w", len(items), describeField(&rows[r0.row], r0.field), err)
		}
		for i, r := range refs {
			if texts[i].Err != "" {
				err := fmt.Errorf("%s: the type's output function failed: %s", describeField(&rows[r.row], r.field), texts[i].Err)
				if onFail == nil {
					return err
				}
				onFail(r.row, err)
				continue
			}
			f := &rows[r.row].Fields[r.field]
			f.Value, f.Pending = texts[i].Text, false
		}
		rendered += len(items)
		items, refs, size = items[:0], refs[:0], 0
		return nil
	}
	for i := range rows {
		for j := range rows[i].Fields {
			f := &rows[i].Fields[j]
			if !f.Pending || f.Null || f.Omitted {
				continue
			}
			items = append(items, shadow.DecodeItem{TypeOid: f.Col.TypeOid, Data: f.Raw})
			refs = append(refs, ref{i, j})
			size += len(f.Raw)
			if len(items) >= maxItems || size >= maxBytes {
				if err := flush(); err != nil {
					return rendered, err
				}
			}
		}
	}
	return rendered, flush()
}

// describeField names field i of r for an error: its LSN, relation and
// column.
func describeField(r *decode.RowChange, i int) string {
	f := &r.Fields[i]
	return fmt.Sprintf("LSN %s, relation %s.%s (oid %d), column %q (type %s)", r.LSN, r.Desc.Namespace, r.Desc.Name, r.Desc.Oid, f.Col.Name, f.Col.TypeName)
}
