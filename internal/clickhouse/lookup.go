package clickhouse

import (
	"context"
	"fmt"
	"reflect"
	"strings"
)

// LookupVersions reads, for each key tuple (values as LookupLatest takes
// them), the values of want in every version of the row that t stores
// (no FINAL), in no given order; a key without a row has none. Values are
// of the types ConvertValue returns, as LookupLatest's.
//
// A merge of a ReplacingMergeTree keeps only the newest version of each
// key in the parts it merges: a version older than the newest is read
// only while no merge has replaced it. What this returns besides the
// newest version is therefore some of the older ones, never a version
// that was not inserted.
func (c *Conn) LookupVersions(ctx context.Context, t Target, key []ColumnSpec, keys [][]any, want []ColumnSpec) ([][][]any, error) {
	out := make([][][]any, len(keys))
	if err := c.lookup(ctx, t, false, key, keys, want, func(pos int, got []any) { out[pos] = append(out[pos], got) }); err != nil {
		return nil, err
	}
	return out, nil
}

// lookup reads the rows of t whose key columns hold one of keys (FINAL
// when final), lookupChunk keys a query, and calls put with each row's
// values of want for every position of its key in keys. A key given
// twice shares the values' slice.
func (c *Conn) lookup(ctx context.Context, t Target, final bool, key []ColumnSpec, keys [][]any, want []ColumnSpec, put func(pos int, got []any)) error {
	if len(key) == 0 {
		return fmt.Errorf("looking up rows of %s: no key columns", QuoteQualified(t))
	}
	if len(want) == 0 {
		return fmt.Errorf("looking up rows of %s: no columns wanted", QuoteQualified(t))
	}
	from := QuoteQualified(t)
	if final {
		from += " FINAL"
	}
	for start := 0; start < len(keys); start += lookupChunk {
		chunk := keys[start:min(start+lookupChunk, len(keys))]
		index := make(map[string][]int, len(chunk))
		tuples := make([]string, len(chunk))
		for i, k := range chunk {
			if len(k) != len(key) {
				return fmt.Errorf("looking up rows of %s: key %d has %d values for %d key columns", QuoteQualified(t), start+i, len(k), len(key))
			}
			lits := make([]string, len(k))
			for j, v := range k {
				lit, err := valueLiteral(key[j], v)
				if err != nil {
					return fmt.Errorf("looking up rows of %s: key %d: %w", QuoteQualified(t), start+i, err)
				}
				lits[j] = lit
			}
			tuples[i] = strings.Join(lits, ", ")
			if len(key) > 1 {
				tuples[i] = "(" + tuples[i] + ")"
			}
			id := keyIdentity(k)
			index[id] = append(index[id], start+i)
		}
		keyList := columnList(key)
		if len(key) > 1 {
			keyList = "(" + keyList + ")"
		}
		sql := "SELECT " + columnList(key) + ", " + columnList(Physical(want)) + " FROM " + from + " WHERE " +
			keyList + " IN (" + strings.Join(tuples, ", ") + ")"
		if err := c.scanLookup(ctx, t, sql, key, want, func(id string, got []any) {
			for _, pos := range index[id] {
				put(pos, got)
			}
		}); err != nil {
			return err
		}
	}
	return nil
}

// scanLookup runs a lookup's query and calls put with each row's key
// identity and values of want.
func (c *Conn) scanLookup(ctx context.Context, t Target, sql string, key, want []ColumnSpec, put func(id string, got []any)) error {
	physical := Physical(want)
	if err := c.readBarrier(ctx); err != nil {
		return fmt.Errorf("looking up rows of %s: %w", QuoteQualified(t), err)
	}
	p := c.pool()
	rows, err := p.Query(ctx, sql)
	if err != nil {
		c.noteFailure(p, err)
		return fmt.Errorf("looking up rows of %s: %w", QuoteQualified(t), err)
	}
	defer rows.Close()
	types := rows.ColumnTypes()
	for rows.Next() {
		dest := make([]any, len(types))
		for i, ct := range types {
			dest[i] = reflect.New(ct.ScanType()).Interface()
		}
		if err := rows.Scan(dest...); err != nil {
			return fmt.Errorf("looking up rows of %s: %w", QuoteQualified(t), err)
		}
		values := make([]any, len(dest))
		for i, d := range dest {
			spec := physical[max(0, i-len(key))]
			if i < len(key) {
				spec = key[i]
			}
			v, err := normalizeScanned(reflect.ValueOf(d).Elem().Interface())
			if err != nil {
				return fmt.Errorf("looking up rows of %s: column %q: %w", QuoteQualified(t), spec.Name, err)
			}
			values[i] = v
		}
		put(keyIdentity(values[:len(key)]), Logical(want, values[len(key):]))
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("looking up rows of %s: %w", QuoteQualified(t), err)
	}
	return nil
}

// KeyIdentity is a map key for a key tuple (values as ConvertValue or a
// lookup returns them), equal for equal tuples.
func KeyIdentity(values []any) string { return keyIdentity(values) }
