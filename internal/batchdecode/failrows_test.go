package batchdecode

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/decode"
	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/msg"
	"github.com/walshadow/walshadow/internal/wal"
)

func testDesc(oid uint32, name string) *desclog.Descriptor {
	return &desclog.Descriptor{Oid: oid, DbOid: 5, Rfn: wal.RelFileNode{SpcOid: 1663, DbOid: 5, RelNum: oid + 100},
		Namespace: "public", Name: name, Kind: 'r', Persistence: 'p', ReplIdent: 'd', KeyAttnums: []int16{1},
		Columns: []desclog.Column{{Num: 1, Name: "id", TypeOid: decode.OidInt4, Len: 4}, {Num: 2, Name: "v", TypeOid: decode.OidText, Len: -1}}}
}

func testTx(commit wal.LSN) *Tx {
	ct := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	return &Tx{TopXID: 900, CommitLSN: commit, CommitNext: commit + 0x40, CommitTime: ct,
		Typed:         &msg.Tx{TopXID: 900, CommitLSN: commit, CommitNext: commit + 0x40, CommitTime: ct},
		CommitLSNText: commit.String()}
}

// TestFailRows: a row the bridge cannot render fails its table from its
// record on, in its transaction only; other tables and transactions, and
// the schema events' places, are kept.
func TestFailRows(t *testing.T) {
	d := New(nil, decode.TxOptions{}, 1, Observer{})
	a, b := testDesc(16400, "a"), testDesc(16410, "b")
	tx1, tx2 := testTx(0x9000), testTx(0xA000)
	o := &Batch{}
	add := func(op decode.Op, lsn wal.LSN, desc *desclog.Descriptor, tx *Tx) {
		o.Rows = append(o.Rows, decode.RowChange{Op: op, LSN: lsn, Desc: desc, DescFrom: 0x100, TID: decode.TID{Block: 1, Off: uint16(len(o.Rows) + 1)}, Filenode: desc.Rfn.RelNum})
		o.RowTx = append(o.RowTx, tx)
	}
	add(decode.OpInsert, 0x1000, a, tx1) // 0: kept (before the failure)
	add(decode.OpInsert, 0x1100, b, tx1) // 1
	add(decode.OpDelete, 0x1200, a, tx1) // 2: the delete half of the failing record
	add(decode.OpUpdate, 0x1200, a, tx1) // 3: fails
	add(decode.OpInsert, 0x1300, b, tx1) // 4
	add(decode.OpInsert, 0x1400, a, tx1) // 5: dropped
	add(decode.OpUpdate, 0x1500, a, tx1) // 6: fails again, dropped
	add(decode.OpInsert, 0xA100, a, tx2) // 7: another transaction: kept
	add(decode.OpInsert, 0xA200, b, tx2) // 8
	ev := func(before int) Event {
		return Event{Before: before, Event: &desclog.Event{Kind: desclog.EventAdded, Desc: a}, Tx: tx1}
	}
	o.Events = []Event{ev(0), ev(7), ev(9)}
	cause := errors.New("LSN 0/00001200, relation public.a (oid 16400), column \"v\" (type mytype): the type's output function failed: boom")
	d.failRows(o, []rowFailure{{6, errors.New("later")}, {3, cause}})

	var got []string
	for i, r := range o.Rows {
		got = append(got, r.Op.String()+"@"+r.LSN.String()+" "+r.Desc.Name+" "+o.RowTx[i].CommitLSN.String())
	}
	want := []string{
		"insert@0/00001000 a 0/00009000",
		"insert@0/00001100 b 0/00009000",
		"fail@0/00001200 a 0/00009000",
		"insert@0/00001300 b 0/00009000",
		"insert@0/0000A100 a 0/0000A000",
		"insert@0/0000A200 b 0/0000A000",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if f := o.Rows[2]; f.Err != cause || f.TID != (decode.TID{Block: 1, Off: 4}) || f.Filenode != a.Rfn.RelNum || len(f.Fields) != 0 {
		t.Errorf("failure %+v", f)
	}
	if o.Events[0].Before != 0 || o.Events[1].Before != 4 || o.Events[2].Before != 6 {
		t.Errorf("events at %d, %d, %d, want 0, 4, 6", o.Events[0].Before, o.Events[1].Before, o.Events[2].Before)
	}
	if len(o.RowTx) != len(o.Rows) {
		t.Errorf("%d rows, %d transaction tags", len(o.Rows), len(o.RowTx))
	}
}
