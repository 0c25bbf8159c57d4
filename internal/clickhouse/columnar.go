package clickhouse

import "time"

// Columnar blocks. clickhouse-go's row-wise Append takes each value as an
// `any` and, for a Nullable column, inspects it by reflection; a whole
// column handed over as one typed slice ([]int32, []*string, ...) is
// appended in a loop over its elements. columnar transposes rows (values as
// ConvertValue returns them) into such slices; a column of a type it does
// not know (Decimal, UUID, arrays, ...) leaves the block row-wise.

// columnar is rows transposed into one typed slice per column, or false
// when a column holds values of a type (or a mix) it does not transpose.
func columnar(cols []ColumnSpec, rows [][]any) ([]any, bool) {
	out := make([]any, len(cols))
	for i, spec := range cols {
		col, ok := transpose(rows, i, spec.Nullable)
		if !ok {
			return nil, false
		}
		out[i] = col
	}
	return out, true
}

// transpose is column i of rows as a typed slice: []T, or []*T when the
// column is Nullable (nil for NULL).
func transpose(rows [][]any, i int, nullable bool) (any, bool) {
	var first any
	for _, row := range rows {
		if first = row[i]; first != nil {
			break
		}
	}
	switch first.(type) {
	case string:
		return gather[string](rows, i, nullable)
	case int8:
		return gather[int8](rows, i, nullable)
	case int16:
		return gather[int16](rows, i, nullable)
	case int32:
		return gather[int32](rows, i, nullable)
	case int64:
		return gather[int64](rows, i, nullable)
	case uint8:
		return gather[uint8](rows, i, nullable)
	case uint16:
		return gather[uint16](rows, i, nullable)
	case uint32:
		return gather[uint32](rows, i, nullable)
	case uint64:
		return gather[uint64](rows, i, nullable)
	case float32:
		return gather[float32](rows, i, nullable)
	case float64:
		return gather[float64](rows, i, nullable)
	case bool:
		return gather[bool](rows, i, nullable)
	case time.Time:
		return gather[time.Time](rows, i, nullable)
	}
	// Only NULLs, or a type left to the row-wise path.
	return nil, false
}

// gather collects column i, every value a T (or, when nullable, nil).
func gather[T any](rows [][]any, i int, nullable bool) (any, bool) {
	if !nullable {
		out := make([]T, len(rows))
		for r, row := range rows {
			v, ok := row[i].(T)
			if !ok {
				return nil, false
			}
			out[r] = v
		}
		return out, true
	}
	vals := make([]T, len(rows))
	ptrs := make([]*T, len(rows))
	for r, row := range rows {
		if row[i] == nil {
			continue
		}
		v, ok := row[i].(T)
		if !ok {
			return nil, false
		}
		vals[r] = v
		ptrs[r] = &vals[r]
	}
	return ptrs, true
}
