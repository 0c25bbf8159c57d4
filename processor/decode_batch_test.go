package processor

import (
	"errors"
	"strings"
	"testing"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/walshadow/walshadow/internal/decode"
	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/wal"
)

// TestFailRows: a row the bridge cannot render fails its table from its
// record on, in its transaction only; other tables and transactions, and
// the schema events' places, are kept.
func TestFailRows(t *testing.T) {
	p := newDecodeProcessor(nil, service.MockResources(), decode.TxOptions{})
	a, b := testDesc(16400, "a", true), testDesc(16410, "b", true)
	tx1, tx2 := testTx(0x9000), testTx(0xA000)
	o := &batchOut{}
	add := func(op decode.Op, lsn wal.LSN, d *desclog.Descriptor, tx *txMeta) {
		o.rows = append(o.rows, decode.RowChange{Op: op, LSN: lsn, Desc: d, DescFrom: 0x100, TID: decode.TID{Block: 1, Off: uint16(len(o.rows) + 1)}, Filenode: d.Rfn.RelNum})
		o.rowTx = append(o.rowTx, tx)
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
	ev := func(before int) placedEvent { return placedEvent{before: before, msg: service.NewMessage(nil)} }
	o.events = []placedEvent{ev(0), ev(7), ev(9)}
	cause := errors.New("LSN 0/00001200, relation public.a (oid 16400), column \"v\" (type mytype): the type's output function failed: boom")
	p.failRows(o, []rowFailure{{6, errors.New("later")}, {3, cause}})

	var got []string
	for i, r := range o.rows {
		got = append(got, r.Op.String()+"@"+r.LSN.String()+" "+r.Desc.Name+" "+o.rowTx[i].commitLSN.String())
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
	if f := o.rows[2]; f.Err != cause || f.TID != (decode.TID{Block: 1, Off: 4}) || f.Filenode != a.Rfn.RelNum || len(f.Fields) != 0 {
		t.Errorf("failure %+v", f)
	}
	if o.events[0].before != 0 || o.events[1].before != 4 || o.events[2].before != 6 {
		t.Errorf("events at %d, %d, %d, want 0, 4, 6", o.events[0].before, o.events[1].before, o.events[2].before)
	}
	if len(o.rowTx) != len(o.rows) {
		t.Errorf("%d rows, %d transaction tags", len(o.rows), len(o.rowTx))
	}
}

func TestIdentityNote(t *testing.T) {
	noKey := testDesc(16400, "nokey", false)
	note, ok := identityNote(noKey)
	if !ok || !strings.Contains(note, "public.nokey (oid 16400)") || !strings.Contains(note, "replicated by physical row identity") || strings.Contains(note, "stop") {
		t.Errorf("note %q, %v", note, ok)
	}
	nothing := testDesc(16401, "nothing", false)
	nothing.ReplIdent = 'n'
	if note, ok := identityNote(nothing); !ok || !strings.Contains(note, "REPLICA IDENTITY NOTHING") {
		t.Errorf("note %q, %v", note, ok)
	}
	temp := testDesc(16402, "scratch", false)
	temp.Persistence = 't'
	unlogged := testDesc(16403, "cache", false)
	unlogged.Persistence = 'u'
	full := testDesc(16404, "full", false)
	full.ReplIdent = 'f'
	toast := testDesc(16405, "pg_toast_1", false)
	toast.Kind = 't'
	for _, d := range []*desclog.Descriptor{temp, unlogged, full, testDesc(16406, "keyed", true), toast, nil} {
		if note, ok := identityNote(d); ok {
			t.Errorf("a note for %+v: %q", d, note)
		}
	}
}
