package processor

import (
	"testing"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/walshadow/walshadow/internal/batchdecode"
	"github.com/walshadow/walshadow/internal/decode"
	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/wal"
)

// benchDesc is pgbench_accounts-like: aid int4 PRIMARY KEY, bid, abalance,
// filler.
func benchDesc() *desclog.Descriptor {
	return &desclog.Descriptor{Oid: 16400, DbOid: 5, Rfn: wal.RelFileNode{SpcOid: 1663, DbOid: 5, RelNum: 16400},
		Namespace: "public", Name: "accounts", Kind: 'r', ReplIdent: 'd', KeyAttnums: []int16{1},
		Columns: []desclog.Column{
			{Num: 1, Name: "aid", TypeOid: decode.OidInt4, Len: 4},
			{Num: 2, Name: "bid", TypeOid: decode.OidInt4, Len: 4},
			{Num: 3, Name: "abalance", TypeOid: decode.OidInt4, Len: 4},
			{Num: 4, Name: "filler", TypeOid: decode.OidBpchar, Len: -1},
		}}
}

// benchBatch is n decoded rows of one transaction: multi-insert runs of 8
// rows per LSN, then updates and deletes.
func benchBatch(d *desclog.Descriptor, n int) *batchdecode.Batch {
	tx := testTx(0x5000_0000)
	o := &batchdecode.Batch{}
	for i := 0; i < n; i++ {
		r := decode.RowChange{Op: decode.OpInsert, LSN: wal.LSN(0x1000_0000 + (i/8)*0x100), Desc: d, DescFrom: 0x100,
			TID: decode.TID{Block: uint32(i / 60), Off: uint16(i%60 + 1)}, Filenode: d.Rfn.RelNum}
		switch i % 16 {
		case 13, 14:
			r.Op = decode.OpUpdate
			r.LSN = wal.LSN(0x2000_0000 + i*0x80)
			r.OldTID = decode.TID{Block: 7, Off: uint16(i%60 + 1)}
		case 15:
			r.Op = decode.OpDelete
			r.LSN = wal.LSN(0x2000_0000 + i*0x80)
		}
		r.Fields = []decode.Field{
			{Col: &d.Columns[0], Value: int64(i)},
			{Col: &d.Columns[1], Value: int64(1)},
			{Col: &d.Columns[2], Value: int64(-i)},
			{Col: &d.Columns[3], Value: "                    "},
		}
		if r.Op == decode.OpDelete {
			r.Fields = r.Fields[:1]
		}
		o.Rows = append(o.Rows, r)
		o.RowTx = append(o.RowTx, tx)
	}
	return o
}

// BenchmarkRowMessages measures building the row messages of a decoded
// batch (payload and metadata), per row.
func BenchmarkRowMessages(b *testing.B) {
	p := newDecodeProcessor(nil, service.MockResources(), decode.TxOptions{})
	o := benchBatch(benchDesc(), 1024)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if out := p.messages(o); len(out) != len(o.Rows) {
			b.Fatal(len(out))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(o.Rows)), "ns/row")
	b.ReportMetric(float64(len(o.Rows)*b.N)/b.Elapsed().Seconds(), "rows/s")
}
