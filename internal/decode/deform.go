package decode

import (
	"fmt"

	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/wal"
)

// sizeofHeapTupleHeader is SizeofHeapTupleHeader: where wal.HeapTuple.Data
// starts in the on-page tuple.
const sizeofHeapTupleHeader = 23

// Datum is one live (non-dropped) column's value in a tuple.
type Datum struct {
	// Column indexes desc.Columns.
	Column int
	Null   bool
	// Raw is the stored bytes (a varlena with its header, a cstring with its
	// NUL, or attlen bytes); it aliases the tuple.
	Raw []byte
	// Missing is set instead of Raw when the tuple predates the column and
	// the column has a non-NULL missing value (its text form).
	Missing *string
}

// Deform splits tup into the values of desc's live columns, appended to
// dst[:0], in attnum order (heap_deform_tuple).
func Deform(desc *desclog.Descriptor, tup wal.HeapTuple, dst []Datum) ([]Datum, error) {
	dst = dst[:0]
	h := tup.Header
	if h.Hoff < sizeofHeapTupleHeader {
		return dst, fmt.Errorf("decode %s.%s: t_hoff %d < %d", desc.Namespace, desc.Name, h.Hoff, sizeofHeapTupleHeader)
	}
	pre := int(h.Hoff) - sizeofHeapTupleHeader
	if pre > len(tup.Data) {
		return dst, fmt.Errorf("decode %s.%s: t_hoff %d past %d tuple bytes", desc.Namespace, desc.Name, h.Hoff, len(tup.Data)+sizeofHeapTupleHeader)
	}
	natts := h.Natts()
	if natts > len(desc.Columns) {
		return dst, fmt.Errorf("decode %s.%s: tuple has %d attributes, descriptor %d", desc.Namespace, desc.Name, natts, len(desc.Columns))
	}
	var bitmap []byte
	if h.HasNulls() {
		n := (natts + 7) / 8
		if n > pre {
			return dst, fmt.Errorf("decode %s.%s: null bitmap of %d attributes needs %d bytes, t_hoff %d leaves %d", desc.Namespace, desc.Name, natts, n, h.Hoff, pre)
		}
		bitmap = tup.Data[:n]
	}
	data := tup.Data[pre:]
	off := 0
	for i := range desc.Columns {
		col := &desc.Columns[i]
		if i >= natts {
			if !col.Dropped {
				d := Datum{Column: i, Null: true}
				if col.HasMissing && col.Missing != nil {
					d = Datum{Column: i, Missing: col.Missing}
				}
				dst = append(dst, d)
			}
			continue
		}
		if bitmap != nil && bitmap[i>>3]&(1<<(i&7)) == 0 {
			if !col.Dropped {
				dst = append(dst, Datum{Column: i, Null: true})
			}
			continue
		}
		start, end, err := attrBounds(col, data, off)
		if err != nil {
			return dst, fmt.Errorf("decode %s.%s column %d %q at user-data offset %d: %w", desc.Namespace, desc.Name, col.Num, col.Name, off, err)
		}
		off = end
		if !col.Dropped {
			dst = append(dst, Datum{Column: i, Raw: data[start:end:end]})
		}
	}
	return dst, nil
}

// attrBounds finds the attribute stored at or after off (after alignment).
func attrBounds(col *desclog.Column, data []byte, off int) (start, end int, err error) {
	switch {
	case col.Len > 0:
		start = desclog.AlignOffset(off, col.Align)
		end = start + int(col.Len)
	case col.Len == -1:
		if off >= len(data) {
			return 0, 0, fmt.Errorf("varlena starts past %d bytes", len(data))
		}
		start = off
		if data[off] == 0 {
			start = desclog.AlignOffset(off, col.Align)
		}
		if start >= len(data) {
			return 0, 0, fmt.Errorf("varlena header at %d past %d bytes", start, len(data))
		}
		n, err := varlenaSize(data[start:])
		if err != nil {
			return 0, 0, err
		}
		end = start + n
	case col.Len == -2:
		start = desclog.AlignOffset(off, col.Align)
		if start > len(data) {
			return 0, 0, fmt.Errorf("cstring at %d past %d bytes", start, len(data))
		}
		n := indexByte(data[start:], 0)
		if n < 0 {
			return 0, 0, fmt.Errorf("cstring at %d has no terminator", start)
		}
		end = start + n + 1
	default:
		return 0, 0, fmt.Errorf("attlen %d", col.Len)
	}
	if end > len(data) {
		return 0, 0, fmt.Errorf("attribute [%d,%d) past %d bytes", start, end, len(data))
	}
	return start, end, nil
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}
