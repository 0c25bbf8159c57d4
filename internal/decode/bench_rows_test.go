package decode

import (
	"testing"

	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/wal"
)

// accountsRowDesc is pgbench_accounts: aid int4 PRIMARY KEY, bid int4,
// abalance int4, filler char(84).
func accountsRowDesc() *desclog.Descriptor {
	d := accountsDesc
	d.Oid, d.DbOid, d.Rfn, d.Kind, d.ReplIdent, d.KeyAttnums = 20000, testDB, mainRfn, 'r', 'd', []int16{1}
	d.Columns = append([]desclog.Column(nil), d.Columns...)
	for i := range d.Columns {
		d.Columns[i].TypeKind = 'b'
	}
	return &d
}

// mixedDesc is a 20-column row of assorted types (one, jsonb, for the bridge).
func mixedDesc() (*desclog.Descriptor, [][]byte) {
	type c struct {
		name  string
		oid   uint32
		len   int16
		align byte
		val   []byte
	}
	cols := []c{
		{"id", OidInt8, 8, 'd', int8v(123456789)},
		{"flag", OidBool, 1, 'c', []byte{1}},
		{"small", OidInt2, 2, 's', []byte{7, 0}},
		{"qty", OidInt4, 4, 'i', int4(-42)},
		{"big", OidInt8, 8, 'd', int8v(1 << 50)},
		{"ratio", OidFloat4, 4, 'i', le32(0x3fc00000)},
		{"score", OidFloat8, 8, 'd', le64(0x400921fb54442d18)},
		{"price", OidNumeric, -1, 'i', short(string([]byte{0x80, 0x80, 12, 0, 0x88, 0x13}))},
		{"name", OidText, -1, 'i', short("a product name of some length")},
		{"code", OidVarchar, -1, 'i', short("SKU-000123")},
		{"grade", OidBpchar, -1, 'i', short("A         ")},
		{"blob", OidBytea, -1, 'i', short("\x00\x01\x02\x03\x04\x05\x06\x07")},
		{"day", OidDate, 4, 'i', int4(8800)},
		{"at", OidTimestamp, 8, 'd', int8v(760000000123456)},
		{"at_tz", OidTimestamptz, 8, 'd', int8v(760000000654321)},
		{"uid", OidUUID, 16, 'c', []byte("0123456789abcdef")},
		{"doc", 3802, -1, 'i', short("\x01\x00\x00\x20")},
		{"span", OidInterval, 16, 'd', append(int8v(3600000000), append(int4(2), int4(1)...)...)},
		{"addr", OidInet, -1, 'i', short(string([]byte{2, 32, 10, 0, 0, 1}))},
		{"cost", OidMoney, 8, 'd', int8v(123456)},
	}
	d := &desclog.Descriptor{Oid: 20000, DbOid: testDB, Rfn: mainRfn, Namespace: "public", Name: "mixed", Kind: 'r', ReplIdent: 'd', KeyAttnums: []int16{1}}
	var vals [][]byte
	for i, x := range cols {
		d.Columns = append(d.Columns, desclog.Column{Num: int16(i + 1), Name: x.name, TypeOid: x.oid, Len: x.len, Align: x.align, TypeKind: 'b', ByVal: x.len > 0 && x.len <= 8})
		vals = append(vals, x.val)
	}
	return d, vals
}

func BenchmarkDecodeRow(b *testing.B) {
	filler := make([]byte, 84)
	for i := range filler {
		filler[i] = ' '
	}
	acc := accountsRowDesc()
	mixed, mixedVals := mixedDesc()
	for _, c := range []struct {
		name string
		desc *desclog.Descriptor
		rec  *wal.Record
	}{
		{"accounts", acc, insertRecord(b, 0x1000, mainRfn, 1, 0, tupleOf(acc, [][]byte{int4(1000001), int4(11), int4(-4242), short(string(filler))}))},
		{"mixed20", mixed, insertRecord(b, 0x1000, mainRfn, 1, 0, tupleOf(mixed, mixedVals))},
	} {
		b.Run(c.name, func(b *testing.B) {
			tx, _ := newTestTx(TxOptions{}, c.desc)
			rows, err := tx.Add(nil, c.rec, false)
			if err != nil || len(rows) != 1 {
				b.Fatal(rows, err)
			}
			b.SetBytes(int64(len(c.rec.Raw)))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				rows, err = tx.Add(rows[:0], c.rec, false)
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
