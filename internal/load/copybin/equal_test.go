package copybin

import (
	"bytes"
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
