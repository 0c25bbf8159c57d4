package copybin

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/walshadow/walshadow/internal/decode"
	"github.com/walshadow/walshadow/internal/desclog"
)

// streamBuilder writes binary COPY streams for tests.
type streamBuilder struct{ bytes.Buffer }

func (s *streamBuilder) header() {
	s.WriteString(copySignature)
	s.Write(make([]byte, 8)) // flags, header extension length
}

// row writes one tuple; a nil field is NULL.
func (s *streamBuilder) row(fields ...[]byte) {
	s.Write(binary.BigEndian.AppendUint16(nil, uint16(len(fields))))
	for _, f := range fields {
		if f == nil {
			s.Write(be32(0xFFFFFFFF))
			continue
		}
		s.Write(be32(uint32(len(f))))
		s.Write(f)
	}
}

func (s *streamBuilder) trailer() { s.Write([]byte{0xFF, 0xFF}) }

func be32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
func be32i(v int32) []byte { return be32(uint32(v)) }
func be64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }
func be16s(vs ...uint16) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.BigEndian.AppendUint16(b, v)
	}
	return b
}

// fuzzColumns is a fixed column set covering every field kind.
func fuzzColumns() []*desclog.Column {
	return []*desclog.Column{
		{Name: "i4", TypeOid: decode.OidInt4, TypeName: "integer", TypeKind: 'b', Len: 4, ByVal: true},
		{Name: "tx", TypeOid: decode.OidText, TypeName: "text", TypeKind: 'b', Len: -1},
		{Name: "num", TypeOid: decode.OidNumeric, TypeName: "numeric", TypeKind: 'b', Len: -1},
		{Name: "ip", TypeOid: decode.OidInet, TypeName: "inet", TypeKind: 'b', Len: -1},
		{Name: "nm", TypeOid: decode.OidName, TypeName: "name", TypeKind: 'b', Len: 64},
		{Name: "ttz", TypeOid: decode.OidTimetz, TypeName: "time with time zone", TypeKind: 'b', Len: 12},
		{Name: "iv", TypeOid: decode.OidInterval, TypeName: "interval", TypeKind: 'b', Len: 16},
		{Name: "d", TypeOid: decode.OidDate, TypeName: "date", TypeKind: 'd', BaseTypeOid: decode.OidDate, Len: 4, ByVal: true},
		{Name: "mood", TypeOid: 16400, TypeName: "mood", TypeKind: 'e', Len: 4, ByVal: true},
	}
}

// fuzzSeed is a valid stream of fuzzColumns: one full row, one NULL row.
func fuzzSeed() []byte {
	var s streamBuilder
	s.header()
	s.row(be32(42), []byte("hello"), be16s(2, 0, 0x4000, 2, 12, 3400), []byte{2, 24, 0, 4, 10, 1, 2, 3},
		[]byte("relname"), append(be64(3600e6), be32i(-18000)...), append(be64(1), 0, 0, 0, 2, 0, 0, 0, 3),
		be32i(-365), []byte("happy"))
	s.row(nil, nil, nil, nil, nil, nil, nil, nil, nil)
	s.trailer()
	return s.Bytes()
}

// TestReaderSynthetic checks each conversion on hand-built fields.
func TestReaderSynthetic(t *testing.T) {
	cols := fuzzColumns()
	rd, err := NewReader(bytes.NewReader(fuzzSeed()), cols)
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]any, len(cols))
	if err := rd.Next(dst); err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, v := range dst {
		got = append(got, render(v))
	}
	want := []string{"int64 42", "string hello", "json.Number -12.34", "string 10.1.2.3/24", "string relname",
		"string 01:00:00+05", "string 3 mons 2 days 00:00:00.000001", "time.Time 1999-01-01T00:00:00Z",
		"string happy"}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("column %s: got %q, want %q", cols[i].Name, got[i], want[i])
		}
	}
	if err := rd.Next(dst); err != nil {
		t.Fatal(err)
	}
	for i, v := range dst {
		if v != nil {
			t.Errorf("column %s: %#v, want NULL", cols[i].Name, v)
		}
	}
	if err := rd.Next(dst); !errors.Is(err, io.EOF) {
		t.Fatalf("after the trailer: %v", err)
	}
	if err := rd.Next(dst); !errors.Is(err, io.EOF) {
		t.Fatalf("again after the trailer: %v", err)
	}
	if rd.Rows() != 2 || rd.Bytes() != int64(len(fuzzSeed())) {
		t.Errorf("Rows %d Bytes %d", rd.Rows(), rd.Bytes())
	}
}

// FuzzReader: arbitrary streams never panic and fail only with a
// *FormatError or io.ErrUnexpectedEOF.
func FuzzReader(f *testing.F) {
	f.Add(fuzzSeed())
	f.Add([]byte(copySignature))
	cols := fuzzColumns()
	f.Fuzz(func(t *testing.T, data []byte) {
		rd, err := NewReader(bytes.NewReader(data), cols)
		dst := make([]any, len(cols))
		for err == nil {
			err = rd.Next(dst)
		}
		var fe *FormatError
		if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.As(err, &fe) {
			t.Fatalf("error %T %v", err, err)
		}
	})
}

// BenchmarkReader reads a pgbench_accounts-shaped stream (aid, bid,
// abalance int4, filler char(84)).
func BenchmarkReader(b *testing.B) {
	cols := []*desclog.Column{
		{Name: "aid", TypeOid: decode.OidInt4, TypeName: "integer", TypeKind: 'b', Len: 4, ByVal: true},
		{Name: "bid", TypeOid: decode.OidInt4, TypeName: "integer", TypeKind: 'b', Len: 4, ByVal: true},
		{Name: "abalance", TypeOid: decode.OidInt4, TypeName: "integer", TypeKind: 'b', Len: 4, ByVal: true},
		{Name: "filler", TypeOid: decode.OidBpchar, TypeName: "character(84)", TypeKind: 'b', Len: -1},
	}
	const rows = 10000
	var s streamBuilder
	s.header()
	filler := bytes.Repeat([]byte(" "), 84)
	for i := 1; i <= rows; i++ {
		s.row(be32(uint32(i)), be32(uint32(i/100000+1)), be32(uint32(i%5000)), filler)
	}
	s.trailer()
	stream := s.Bytes()
	dst := make([]any, len(cols))
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		rd, err := NewReader(bytes.NewReader(stream), cols)
		if err != nil {
			b.Fatal(err)
		}
		for {
			err := rd.Next(dst)
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		if rd.Rows() != rows {
			b.Fatalf("%d rows", rd.Rows())
		}
	}
}
