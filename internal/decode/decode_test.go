package decode

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/pierrec/lz4/v4"

	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/wal"
)

// accountsDesc is pgbench_accounts: aid int, bid int, abalance int, filler char(84).
var accountsDesc = desclog.Descriptor{Namespace: "public", Name: "pgbench_accounts", Columns: []desclog.Column{
	{Num: 1, Name: "aid", TypeOid: OidInt4, Len: 4, Align: 'i', ByVal: true},
	{Num: 2, Name: "bid", TypeOid: OidInt4, Len: 4, Align: 'i', ByVal: true},
	{Num: 3, Name: "abalance", TypeOid: OidInt4, Len: 4, Align: 'i', ByVal: true},
	{Num: 4, Name: "filler", TypeOid: OidBpchar, Len: -1, Align: 'i'},
}}

func accountsTuple() wal.HeapTuple {
	data := make([]byte, 1) // t_hoff 24: one pad byte after the 23-byte header
	data = binary.LittleEndian.AppendUint32(data, 42)
	data = binary.LittleEndian.AppendUint32(data, 1)
	data = binary.LittleEndian.AppendUint32(data, math.MaxUint32) // -1
	filler := make([]byte, 84)
	for i := range filler {
		filler[i] = ' '
	}
	data = append(data, byte((1+84)<<1|1)) // 1-byte header: no alignment
	data = append(data, filler...)
	return wal.HeapTuple{Header: wal.HeapTupleHeader{Infomask2: 4, Infomask: 0x0002, Hoff: 24}, Data: data}
}

func TestDeformAccounts(t *testing.T) {
	ds, err := Deform(&accountsDesc, accountsTuple(), nil)
	if err != nil || len(ds) != 4 {
		t.Fatal(ds, err)
	}
	want := []string{"42", "1", "-1", string(make84Spaces())}
	for i, d := range ds {
		got, ok, err := Render(accountsDesc.Columns[d.Column].TypeOid, d.Raw)
		if err != nil || !ok || got != want[i] {
			t.Errorf("column %d: %q %v %v", i, got, ok, err)
		}
	}
}

func make84Spaces() []byte {
	b := make([]byte, 84)
	for i := range b {
		b[i] = ' '
	}
	return b
}

func TestDeformErrors(t *testing.T) {
	good := accountsTuple()
	cases := map[string]wal.HeapTuple{
		"hoff too small": {Header: wal.HeapTupleHeader{Infomask2: 4, Hoff: 22}, Data: good.Data},
		"hoff past data": {Header: wal.HeapTupleHeader{Infomask2: 4, Hoff: 200}, Data: good.Data},
		"too many attrs": {Header: wal.HeapTupleHeader{Infomask2: 5, Hoff: 24}, Data: good.Data},
		"truncated":      {Header: good.Header, Data: good.Data[:len(good.Data)-1]},
		"truncated int":  {Header: good.Header, Data: good.Data[:7]},
		"bitmap no room": {Header: wal.HeapTupleHeader{Infomask2: 4, Infomask: wal.HeapHasNull, Hoff: 23}, Data: good.Data},
	}
	for name, tup := range cases {
		if _, err := Deform(&accountsDesc, tup, nil); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestDeformNullsAndMissing(t *testing.T) {
	missing := "dflt"
	desc := desclog.Descriptor{Columns: []desclog.Column{
		{Num: 1, Name: "a", TypeOid: OidInt8, Len: 8, Align: 'd'},
		{Num: 2, Name: "gone", Len: 2, Align: 's', Dropped: true},
		{Num: 3, Name: "b", TypeOid: OidInt8, Len: 8, Align: 'd'},
		{Num: 4, Name: "c", TypeOid: OidText, Len: -1, Align: 'i', HasMissing: true, Missing: &missing},
		{Num: 5, Name: "d", TypeOid: OidText, Len: -1, Align: 'i'},
	}}
	// natts 3, bitmap 0b101 (a and b present, gone NULL), t_hoff 24.
	data := []byte{0x05}
	data = binary.LittleEndian.AppendUint64(data, 7)
	data = binary.LittleEndian.AppendUint64(data, 9)
	ds, err := Deform(&desc, wal.HeapTuple{Header: wal.HeapTupleHeader{Infomask2: 3, Infomask: wal.HeapHasNull, Hoff: 24}, Data: data}, nil)
	if err != nil || len(ds) != 4 {
		t.Fatal(ds, err)
	}
	if ds[0].Column != 0 || binary.LittleEndian.Uint64(ds[0].Raw) != 7 || ds[1].Column != 2 || binary.LittleEndian.Uint64(ds[1].Raw) != 9 {
		t.Fatalf("%+v", ds)
	}
	if ds[2].Missing != &missing || ds[2].Null || !ds[3].Null || ds[3].Missing != nil {
		t.Fatalf("%+v", ds[2:])
	}
}

func TestVarlenaCompressedInline(t *testing.T) {
	plain := []byte("hello hello hello hello hello hello hello hello")
	comp := make([]byte, lz4.CompressBlockBound(len(plain)))
	n, err := lz4.CompressBlock(plain, comp, nil)
	if err != nil || n == 0 {
		t.Fatal(n, err)
	}
	raw := binary.LittleEndian.AppendUint32(nil, uint32(8+n)<<2|0x02)
	raw = binary.LittleEndian.AppendUint32(raw, uint32(len(plain))|uint32(CompressionLZ4)<<30)
	raw = append(raw, comp[:n]...)
	v, err := ParseVarlena(raw)
	if err != nil || v.Kind != VarlenaCompressed || v.Method != CompressionLZ4 || v.RawSize != len(plain) {
		t.Fatal(v, err)
	}
	got, ok, err := Render(OidText, raw)
	if err != nil || !ok || got != string(plain) {
		t.Fatalf("%q %v %v", got, ok, err)
	}
	binary.LittleEndian.PutUint32(raw[4:], uint32(len(plain)+1)|uint32(CompressionLZ4)<<30)
	if _, _, err := Render(OidText, raw); err == nil {
		t.Error("lz4 value of the wrong raw size rendered")
	}
}

func TestVarlenaExternal(t *testing.T) {
	raw := []byte{0x01, 18}
	for _, v := range []uint32{10004, 5000 | 1<<30, 77, 16390} {
		raw = binary.LittleEndian.AppendUint32(raw, v)
	}
	v, err := ParseVarlena(raw)
	if err != nil || v.Kind != VarlenaExternal {
		t.Fatal(v, err)
	}
	p := v.External
	if p.RawSize != 10004 || p.ExtSize() != 5000 || !p.Compressed() || p.Method() != CompressionLZ4 || p.ValueID != 77 || p.ToastRelID != 16390 {
		t.Fatalf("%+v", p)
	}
	if _, _, err := Render(OidText, raw); !errors.Is(err, ErrExternal) {
		t.Fatal(err)
	}
	if _, err := ParseVarlena(raw[:10]); err == nil {
		t.Fatal("truncated pointer parsed")
	}
}

func TestRenderUnknownType(t *testing.T) {
	if _, ok, err := Render(3802 /* jsonb */, []byte{3, 'x'}); ok || err != nil {
		t.Fatal(ok, err)
	}
}

func TestFloatFormatting(t *testing.T) {
	for _, c := range []struct {
		f    float64
		bits int
		want string
	}{
		{0, 64, "0"}, {math.Copysign(0, -1), 64, "-0"}, {1e15, 64, "1e+15"}, {123456789012345, 64, "123456789012345"},
		{1e-5, 64, "1e-05"}, {0.0001, 64, "0.0001"}, {1e300, 64, "1e+300"}, {5e-324, 64, "5e-324"},
		{100000, 32, "100000"}, {1e6, 32, "1e+06"}, {float64(float32(0.1)), 32, "0.1"},
	} {
		if got := string(appendFloat(nil, c.f, c.bits)); got != c.want {
			t.Errorf("%v/%d: %q, want %q", c.f, c.bits, got, c.want)
		}
	}
}

func FuzzDeform(f *testing.F) {
	good := accountsTuple()
	f.Add(good.Header.Infomask2, good.Header.Infomask, good.Header.Hoff, good.Data)
	f.Add(uint16(4), uint16(wal.HeapHasNull), uint8(24), []byte{0x0f, 0, 0, 0, 0, 0, 0, 0, 0})
	desc := accountsDesc
	desc.Columns = append(append([]desclog.Column(nil), desc.Columns...),
		desclog.Column{Num: 5, Name: "cs", Len: -2, Align: 'c'},
		desclog.Column{Num: 6, Name: "d", TypeOid: OidFloat8, Len: 8, Align: 'd'},
		desclog.Column{Num: 7, Name: "n", TypeOid: OidNumeric, Len: -1, Align: 'i'})
	f.Fuzz(func(t *testing.T, im2, im uint16, hoff uint8, data []byte) {
		ds, err := Deform(&desc, wal.HeapTuple{Header: wal.HeapTupleHeader{Infomask2: im2, Infomask: im, Hoff: hoff}, Data: data}, nil)
		if err != nil {
			return
		}
		for _, d := range ds {
			if !d.Null && d.Missing == nil {
				_, _, _ = Render(desc.Columns[d.Column].TypeOid, d.Raw)
			}
		}
	})
}

func FuzzRender(f *testing.F) {
	oids := []uint32{OidBool, OidBytea, OidChar, OidName, OidInt8, OidInt2, OidInt4, OidText, OidOid, OidJSON, OidCidr,
		OidFloat4, OidFloat8, OidMoney, OidMacaddr, OidInet, OidBpchar, OidVarchar, OidDate, OidTime, OidTimestamp,
		OidTimestamptz, OidInterval, OidTimetz, OidNumeric, OidUUID}
	f.Add(uint8(0), []byte{1})
	f.Add(uint8(24), []byte{0x0b, 0x01, 0x80, 0x03, 0x00, 0x39, 0x30})
	f.Add(uint8(15), []byte{0x0d, 2, 24, 192, 168, 1, 1})
	f.Add(uint8(22), []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	f.Fuzz(func(t *testing.T, which uint8, raw []byte) {
		oid := oids[int(which)%len(oids)]
		out, ok, err := AppendText(nil, oid, raw)
		if !ok {
			t.Fatalf("type %d not known", oid)
		}
		if err == nil && len(out) == 0 && oid != OidChar && oid != OidName && oid != OidText && oid != OidVarchar && oid != OidBpchar && oid != OidJSON {
			t.Fatalf("type %d rendered empty from %x", oid, raw)
		}
	})
}

func BenchmarkDeformRenderAccounts(b *testing.B) {
	tup := accountsTuple()
	var ds []Datum
	var buf []byte
	b.SetBytes(int64(len(tup.Data)))
	b.ReportAllocs()
	for b.Loop() {
		var err error
		ds, err = Deform(&accountsDesc, tup, ds)
		if err != nil {
			b.Fatal(err)
		}
		buf = buf[:0]
		for _, d := range ds {
			buf, _, err = AppendText(buf, accountsDesc.Columns[d.Column].TypeOid, d.Raw)
			if err != nil {
				b.Fatal(err)
			}
		}
	}
}
