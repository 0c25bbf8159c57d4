package processor

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/walshadow/walshadow/internal/batchdecode"
	"github.com/walshadow/walshadow/internal/decode"
	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/msg"
	"github.com/walshadow/walshadow/internal/wal"
)

func testDesc(oid uint32, name string, keyed bool) *desclog.Descriptor {
	d := &desclog.Descriptor{Oid: oid, DbOid: 5, Rfn: wal.RelFileNode{SpcOid: 1663, DbOid: 5, RelNum: oid + 100},
		Namespace: "public", Name: name, Kind: 'r', Persistence: 'p', ReplIdent: 'd',
		Columns: []desclog.Column{{Num: 1, Name: "id", TypeOid: decode.OidInt4, Len: 4}, {Num: 2, Name: "v", TypeOid: decode.OidText, Len: -1}}}
	if keyed {
		d.KeyAttnums = []int16{1}
	}
	return d
}

func testTx(commit wal.LSN) *batchdecode.Tx {
	ct := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	return &batchdecode.Tx{TopXID: 900, CommitLSN: commit, CommitNext: commit + 0x40, CommitTime: ct,
		Typed:         &msg.Tx{TopXID: 900, CommitLSN: commit, CommitNext: commit + 0x40, CommitTime: ct},
		CommitLSNText: commit.String()}
}

// metaOf is m's metadata as strings: those set as strings, and the typed
// change's rendering of every other key.
func metaOf(m *service.Message) map[string]string { return msg.Strings(m) }

// stringMeta is the metadata m carries as strings.
func stringMeta(m *service.Message) map[string]string {
	out := map[string]string{}
	_ = m.MetaWalkMut(func(k string, v any) error {
		if s, ok := v.(string); ok {
			out[k] = s
		}
		return nil
	})
	return out
}

func TestRowMessageIdentity(t *testing.T) {
	p := newDecodeProcessor(nil, service.MockResources(), decode.TxOptions{})
	d := testDesc(16400, "nokey", false)
	fn := d.Rfn.RelNum
	id := func(v int64) []decode.Field { return []decode.Field{{Col: &d.Columns[0], Value: v}} }
	o := &batchdecode.Batch{}
	tx := testTx(0x9000)
	for _, r := range []decode.RowChange{
		{Op: decode.OpInsert, LSN: 0x1000, Desc: d, DescFrom: 0x100, Fields: id(1), TID: decode.TID{Block: 3, Off: 7}, Filenode: fn},
		{Op: decode.OpUpdate, LSN: 0x1100, Desc: d, DescFrom: 0x100, Fields: id(1), TID: decode.TID{Block: 4, Off: 1}, OldTID: decode.TID{Block: 3, Off: 7}, Filenode: fn},
		// rewritten within the transaction: another filenode than the descriptor's
		{Op: decode.OpDelete, LSN: 0x1200, Desc: d, DescFrom: 0x100, TID: decode.TID{Block: 4, Off: 1}, Filenode: 99999},
		{Op: decode.OpTruncate, LSN: 0x1300, Desc: d, DescFrom: 0x100},
	} {
		o.Rows = append(o.Rows, r)
		o.RowTx = append(o.RowTx, tx)
	}
	msgs := p.messages(o)
	want := []map[string]string{
		{MetaOperation: "insert", MetaTID: "3:7", MetaFilenode: "16500"},
		{MetaOperation: "update", MetaTID: "4:1", MetaOldTID: "3:7", MetaFilenode: "16500"},
		{MetaOperation: "delete", MetaTID: "4:1", MetaFilenode: "99999"},
		{MetaOperation: "truncate"},
	}
	for i, m := range msgs {
		meta := metaOf(m)
		for _, k := range []string{MetaOperation, MetaTID, MetaOldTID, MetaFilenode} {
			if meta[k] != want[i][k] {
				t.Errorf("message %d: %s = %q, want %q (metadata %v)", i, k, meta[k], want[i][k], meta)
			}
		}
		if meta[MetaRelationOid] != "16400" || meta[MetaCommitLSN] != tx.CommitLSNText {
			t.Errorf("message %d: metadata %v", i, meta)
		}
	}
	// The strings set are the routing ones (every one on a truncate), as
	// the typed change renders them: a mapping routing on them sees what
	// the output writes.
	for i, m := range msgs {
		c, err := msg.ChangeOf(m)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{}
		c.AppendStrings(c.Op == OperationTruncate, func(k, v string) { want[k] = v })
		if got := stringMeta(m); !maps.Equal(got, want) {
			t.Errorf("message %d: string metadata %v, want the routing keys %v", i, got, want)
		}
	}
}

func TestFailMessage(t *testing.T) {
	p := newDecodeProcessor(nil, service.MockResources(), decode.TxOptions{})
	d := testDesc(16400, "items", true)
	reason := errors.New(`LSN 0/00001000, relation public.items (oid 16400), column "v": TOAST value 7 of relation 16401 is not in the transaction`)
	o := &batchdecode.Batch{Rows: []decode.RowChange{{Op: decode.OpFail, LSN: 0x1000, Desc: d, DescFrom: 0x100, TID: decode.TID{Block: 0, Off: 2}, Filenode: d.Rfn.RelNum, Err: reason}},
		RowTx: []*batchdecode.Tx{testTx(0x9000)}}
	msgs := p.messages(o)
	if len(msgs) != 1 {
		t.Fatalf("%d messages", len(msgs))
	}
	meta := metaOf(msgs[0])
	for k, v := range map[string]string{
		MetaOperation: OperationFail, MetaError: reason.Error(), MetaSchema: "public", MetaTable: "items", MetaRelationOid: "16400",
		MetaKey: "id", MetaLSN: "0/00001000", MetaCommitLSN: "0/00009000", MetaXID: "900", MetaCommitTime: "2024-01-02T03:04:05Z",
		MetaDescVersion: "0/00000100", MetaTID: "0:2", MetaFilenode: "16500", MetaRecordIndex: "0",
	} {
		if meta[k] != v {
			t.Errorf("%s = %q, want %q", k, meta[k], v)
		}
	}
	payload, err := msgs[0].AsStructured()
	if m, ok := payload.(map[string]any); err != nil || !ok || len(m) != 0 {
		t.Errorf("payload %v (%v), want {}", payload, err)
	}
}

// TestMessagesOnWorkers: a batch's row messages built over several workers
// are the ones a single worker builds, in the same order, events in their
// places, record indexes counted across the runs' cuts (a multi-insert of
// many tuples spans them) and key-change halves told on both sides of one.
func TestMessagesOnWorkers(t *testing.T) {
	a, b := testDesc(16400, "a", true), testDesc(16410, "b", false)
	build := func() *batchdecode.Batch {
		o := &batchdecode.Batch{Epoch: 3, Seq: 9}
		tx := testTx(0x9000)
		lsn := wal.LSN(0x1000)
		add := func(op decode.Op, d *desclog.Descriptor, id int64) {
			o.Rows = append(o.Rows, decode.RowChange{Op: op, LSN: lsn, Desc: d, DescFrom: 0x100,
				Fields: []decode.Field{{Col: &d.Columns[0], Value: id}, {Col: &d.Columns[1], Value: "v"}}, TID: decode.TID{Block: 1, Off: uint16(len(o.Rows))}, Filenode: d.Rfn.RelNum})
			o.RowTx = append(o.RowTx, tx)
		}
		for i := 0; i < 3000; i++ {
			switch {
			case i%700 < 400: // a multi-insert of 400 tuples, cut by the runs
				add(decode.OpInsert, a, int64(i))
				if i%700 == 399 {
					lsn += 0x100
				}
			case i%2 == 0: // a key change: delete then update at one LSN
				add(decode.OpDelete, a, int64(i))
				add(decode.OpUpdate, a, int64(i+1))
				lsn += 0x100
			default:
				add(decode.OpInsert, b, int64(i))
				lsn += 0x100
			}
		}
		for _, at := range []int{0, 1000, 2047, len(o.Rows)} {
			o.Events = append(o.Events, batchdecode.Event{Before: at, Event: &desclog.Event{Kind: desclog.EventAdded, Oid: a.Oid, ValidFrom: wal.LSN(0x100 + at), Desc: a}, Tx: tx})
		}
		return o
	}
	render := func(workers int) []string {
		p := newDecodeProcessor(nil, service.MockResources(), decode.TxOptions{})
		p.dec = batchdecode.New(nil, decode.TxOptions{}, workers, batchdecode.Observer{})
		var out []string
		for _, m := range p.messages(build()) {
			if c, err := msg.ChangeOf(m); err == nil {
				s, _ := m.AsStructured()
				out = append(out, fmt.Sprintf("%s %s idx=%d kc=%v tid=%v seq=%d %v %v", c.Op, c.LSN, c.RecordIndex, c.KeyChanged, c.TID, c.Seq, s, stringMeta(m)))
			} else {
				b, _ := m.AsBytes()
				out = append(out, string(b))
			}
		}
		return out
	}
	want := render(1)
	if len(want) < 3000 {
		t.Fatalf("%d messages", len(want))
	}
	for _, n := range []int{2, 3, 8} {
		got := render(n)
		if len(got) != len(want) {
			t.Fatalf("%d workers: %d messages, want %d", n, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%d workers, message %d:\n got  %s\n want %s", n, i, got[i], want[i])
			}
		}
	}
	if !strings.Contains(strings.Join(want, "\n"), "idx=399 ") {
		t.Errorf("no record index counted across a cut: %v", want[395:401])
	}
}

// TestChangesMessageMatchesRows: a batch as one change batch message
// carries, in the same order, the changes and payloads its row messages
// carry, events in their places, on one worker or several.
func TestChangesMessageMatchesRows(t *testing.T) {
	a, b := testDesc(16400, "a", true), testDesc(16410, "b", false)
	build := func() *batchdecode.Batch {
		o := &batchdecode.Batch{Epoch: 3, Seq: 9}
		tx := testTx(0x9000)
		lsn := wal.LSN(0x1000)
		add := func(op decode.Op, d *desclog.Descriptor, id int64) {
			r := decode.RowChange{Op: op, LSN: lsn, Desc: d, DescFrom: 0x100, TID: decode.TID{Block: 1, Off: uint16(len(o.Rows) + 1)}, Filenode: d.Rfn.RelNum}
			switch op {
			case decode.OpFail:
				r.Err = errors.New("boom")
			case decode.OpTruncate:
			default:
				r.Fields = []decode.Field{{Col: &d.Columns[0], Value: id}, {Col: &d.Columns[1], Value: fmt.Sprint("v", id)}}
			}
			o.Rows = append(o.Rows, r)
			o.RowTx = append(o.RowTx, tx)
		}
		for i := 0; i < 1500; i++ {
			switch {
			case i%500 < 300: // a multi-insert, cut by the runs
				add(decode.OpInsert, a, int64(i))
				if i%500 == 299 {
					lsn += 0x100
				}
			case i%7 == 0:
				add(decode.OpDelete, a, int64(i))
				add(decode.OpUpdate, a, int64(i+1))
				lsn += 0x100
			case i == 1499:
				add(decode.OpTruncate, b, 0)
			case i == 1333:
				add(decode.OpFail, b, 0)
			default:
				add(decode.OpInsert, b, int64(i))
				lsn += 0x100
			}
		}
		for j, at := range []int{0, 0, 700, 1200, len(o.Rows)} {
			o.Events = append(o.Events, batchdecode.Event{Before: at, Tx: tx,
				Event: &desclog.Event{Kind: desclog.EventAdded, Oid: a.Oid, ValidFrom: wal.LSN(0x100 + j), Desc: a}})
		}
		return o
	}
	line := func(c *msg.Change, payload any) string {
		return fmt.Sprintf("%s %s %s rel=%v lsn=%s idx=%d kc=%v tid=%v old=%v fn=%d toast=%v err=%q seq=%d/%d %v",
			c.Op, c.Event, c.Tx.CommitLSN, *c.Rel, c.LSN, c.RecordIndex, c.KeyChanged, c.TID, c.OldTID, c.Filenode, c.UnchangedToast, c.Error, c.Epoch, c.Seq, payload)
	}
	rowForm := func() []string {
		p := newDecodeProcessor(nil, service.MockResources(), decode.TxOptions{})
		var out []string
		for _, m := range p.messages(build()) {
			c, err := msg.ChangeOf(m)
			if err != nil {
				t.Fatal(err)
			}
			s, _ := m.AsStructured()
			out = append(out, line(c, s))
		}
		return out
	}
	want := rowForm()
	for _, workers := range []int{1, 2, 8} {
		p := newDecodeProcessor(nil, service.MockResources(), decode.TxOptions{})
		p.batchMessages = true
		p.dec = batchdecode.New(nil, decode.TxOptions{}, workers, batchdecode.Observer{})
		msgs := p.messages(build())
		if len(msgs) != 1 {
			t.Fatalf("%d workers: %d messages, want one", workers, len(msgs))
		}
		cs, ok, err := msg.ChangesOf(msgs[0])
		if !ok || err != nil {
			t.Fatalf("%d workers: not a change batch (%v)", workers, err)
		}
		if s, _ := msgs[0].MetaGet(msg.KeySeq); s != "9" || cs.Epoch != 3 {
			t.Errorf("batch position %q, epoch %d", s, cs.Epoch)
		}
		if len(cs.Changes) != len(want) {
			t.Fatalf("%d workers: %d changes, want %d", workers, len(cs.Changes), len(want))
		}
		for i := range cs.Changes {
			if got := line(&cs.Changes[i], cs.Payloads[i]); got != want[i] {
				t.Fatalf("%d workers, change %d:\n got  %s\n want %s", workers, i, got, want[i])
			}
		}
	}
	joined := strings.Join(want, "\n")
	for _, s := range []string{"idx=299 ", "kc=true", "fail ", "truncate truncate", "schema added"} {
		if !strings.Contains(joined, s) {
			t.Errorf("the batch has no %q: the comparison misses a case", s)
		}
	}
}
