package copybin

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"reflect"
	"testing"
	"testing/iotest"

	"github.com/walshadow/walshadow/internal/decode"
	"github.com/walshadow/walshadow/internal/desclog"
)

// ctidColumn is a pseudo-column the test selects first to match COPY rows
// with heap tuples.
var ctidColumn = &desclog.Column{Name: "ctid", TypeOid: decode.OidText, TypeName: "text", TypeKind: 'b', Len: -1}

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

// TestSelectExprs pins the quoting and the native/text split.
func TestSelectExprs(t *testing.T) {
	cols := []*desclog.Column{
		{Name: "id", TypeOid: decode.OidInt4, TypeKind: 'b'},
		{Name: "gone", Dropped: true},
		{Name: `we"ird`, TypeOid: decode.OidNumeric, TypeKind: 'b'},
		{Name: "mood", TypeOid: 99999, TypeKind: 'e'},
		{Name: "dom", TypeOid: 99998, TypeKind: 'd', BaseTypeOid: decode.OidInet},
		{Name: "dom2", TypeOid: 99997, TypeKind: 'd', BaseTypeOid: 99998},
		{Name: "jb", TypeOid: 3802, TypeKind: 'b'},
	}
	want := []string{
		`"id"`,
		`"we""ird"`,
		`CASE WHEN pg_catalog.num_nulls("mood") = 1 THEN NULL ELSE pg_catalog.format('%s', "mood") END AS "mood"`,
		`"dom"`,
		`CASE WHEN pg_catalog.num_nulls("dom2") = 1 THEN NULL ELSE pg_catalog.format('%s', "dom2") END AS "dom2"`,
		`CASE WHEN pg_catalog.num_nulls("jb") = 1 THEN NULL ELSE pg_catalog.format('%s', "jb") END AS "jb"`,
	}
	if got := SelectExprs(cols); !reflect.DeepEqual(got, want) {
		t.Errorf("SelectExprs:\n got %q\nwant %q", got, want)
	}
}

// TestReaderErrors: truncation is io.ErrUnexpectedEOF, malformed data a
// *FormatError naming the row and column.
func TestReaderErrors(t *testing.T) {
	cols := fuzzColumns()
	good := fuzzSeed()
	for cut := 0; cut < len(good)-2; cut++ { // the trailer's 2 bytes: cut before it
		rd, err := NewReader(bytes.NewReader(good[:cut]), cols)
		if err == nil {
			dst := make([]any, len(cols))
			for err == nil {
				err = rd.Next(dst)
			}
		}
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("stream cut at %d: %v, want io.ErrUnexpectedEOF", cut, err)
		}
	}

	var s streamBuilder
	s.header()
	s.row(be32(5), []byte("x"), nil, nil, nil, nil, nil, nil, nil)
	s.row(be32(5), []byte("x"), nil, nil, nil, []byte{1, 2, 3}, nil, nil, nil) // timetz of 3 bytes
	s.trailer()
	rd, err := NewReader(bytes.NewReader(s.Bytes()), cols)
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]any, len(cols))
	if err := rd.Next(dst); err != nil {
		t.Fatal(err)
	}
	err = rd.Next(dst)
	var fe *FormatError
	if !errors.As(err, &fe) || fe.Row != 2 || fe.Column != "ttz" || fe.Type != "time with time zone" {
		t.Fatalf("bad timetz: %v (%#v)", err, fe)
	}
	if again := rd.Next(dst); again != err {
		t.Errorf("Next after a format error: %v, want the same error", again)
	}
	if want := fmt.Sprintf(`binary COPY row 2 column "ttz" (time with time zone) at byte %d: field of 3 bytes, want 12`, fe.Offset); err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}

	boom := errors.New("connection reset")
	rd, err = NewReader(io.MultiReader(bytes.NewReader(good[:40]), iotest.ErrReader(boom)), cols)
	if err == nil {
		for err == nil {
			err = rd.Next(dst)
		}
	}
	if !errors.Is(err, boom) || errors.As(err, &fe) {
		t.Errorf("failing reader: %v, want the reader's error, not a format error", err)
	}

	withOids := append([]byte(copySignature), 0, 1, 0, 0, 0, 0, 0, 0)
	if _, err := NewReader(bytes.NewReader(withOids), cols); !errors.As(err, &fe) {
		t.Errorf("stream with OIDs: %v", err)
	}
	if _, err := NewReader(bytes.NewReader([]byte("PGCOPY\nxxxxxxxxxxxxx")), cols); !errors.As(err, &fe) {
		t.Errorf("bad signature: %v", err)
	}
}
