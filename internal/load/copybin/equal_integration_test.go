package copybin

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/walshadow/walshadow/internal/decode"
	"github.com/walshadow/walshadow/internal/desclog"
)

// TestCopyValuesEqualWALDecoder reads the types table through COPY binary
// and compares every value with what decode.Value gives for the same
// tuple's on-disk datum (pageinspect's tuple_data_split, detoasted), and
// for types decode leaves to the bridge with the server's output function
// text (the simple protocol's text).
func TestCopyValuesEqualWALDecoder(t *testing.T) {
	conn, cols := typesTable(t)
	ctx := context.Background()

	stream := copyBinary(t, conn, []string{"ctid::text"}, cols)
	rd, err := NewReader(bytes.NewReader(stream), append([]*desclog.Column{ctidColumn}, cols...))
	if err != nil {
		t.Fatal(err)
	}

	// On-disk datums per ctid, varlenas detoasted (pageinspect lives in public: SessionSettings
	// set search_path to pg_catalog), indexed by attnum-1 (dropped columns too).
	raw := map[string][][]byte{}
	rows, err := conn.Query(ctx, `
SELECT format('(%s,%s)', blk, lp),
       public.tuple_data_split('public.types'::regclass, t_data, t_infomask, t_infomask2, t_bits, true)
FROM generate_series(0, pg_relation_size('public.types') / current_setting('block_size')::int - 1) AS blk,
     LATERAL public.heap_page_items(public.get_raw_page('public.types', blk::int))
WHERE lp_flags = 1 AND t_data IS NOT NULL`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var ctid string
		var attrs [][]byte
		if err := rows.Scan(&ctid, &attrs); err != nil {
			t.Fatal(err)
		}
		raw[ctid] = attrs
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}

	// Output function text per ctid and live column (simple protocol: text format).
	text := map[string][][]byte{}
	res, err := conn.PgConn().Exec(ctx, "SELECT ctid, * FROM public.types").ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res[0].Rows {
		text[string(r[0])] = r[1:]
	}

	live := rd.Columns()[1:]
	dst := make([]any, len(rd.Columns()))
	nativeChecked, pendingChecked, nulls := 0, 0, 0
	for {
		err := rd.Next(dst)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("row %d: %v", rd.Rows()+1, err)
		}
		ctid, _ := dst[0].(string)
		attrs, ok := raw[ctid]
		if !ok {
			t.Fatalf("row %d: ctid %v not on disk", rd.Rows(), dst[0])
		}
		texts := text[ctid]
		for i, col := range live {
			got := dst[i+1]
			datum := attrs[col.Num-1]
			if (datum == nil) != (got == nil) {
				t.Errorf("%s %s (%s): COPY %#v, on disk NULL=%v", ctid, col.Name, col.TypeName, got, datum == nil)
				continue
			}
			if datum == nil {
				nulls++
				continue
			}
			if col.Len == -1 { // detoasted: the payload without its header
				datum = append(binary.LittleEndian.AppendUint32(nil, uint32(len(datum)+4)<<2), datum...)
			}
			want, pending, err := decode.Value(col, datum)
			if err != nil {
				t.Errorf("%s %s (%s): decode.Value: %v", ctid, col.Name, col.TypeName, err)
				continue
			}
			if pending {
				want = string(texts[i])
				pendingChecked++
			} else {
				nativeChecked++
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s %s (%s): COPY %T %#v, WAL decoder %T %#v", ctid, col.Name, col.TypeName, got, got, want, want)
			}
		}
	}
	if rd.Rows() != 8 || rd.Bytes() != int64(len(stream)) {
		t.Errorf("read %d rows, %d of %d bytes", rd.Rows(), rd.Bytes(), len(stream))
	}
	t.Logf("%d native and %d bridge-rendered values equal, %d NULLs", nativeChecked, pendingChecked, nulls)
	if nativeChecked < 140 || pendingChecked < 20 {
		t.Errorf("too few values checked: %d native, %d pending", nativeChecked, pendingChecked)
	}
}
