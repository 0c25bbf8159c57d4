package batchdecode

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/decode"
	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/msg"
	"github.com/walshadow/walshadow/internal/shadow"
	"github.com/walshadow/walshadow/internal/wal"
	"github.com/walshadow/walshadow/internal/wal/walbuild"
)

const testDB = 5

var itemsRfn = wal.RelFileNode{SpcOid: 1663, DbOid: testDB, RelNum: 20000}

// itemsDesc: (id int4 PRIMARY KEY, v text).
func itemsDesc() *desclog.Descriptor {
	return &desclog.Descriptor{Oid: 20000, DbOid: testDB, Rfn: itemsRfn, Namespace: "public", Name: "items", Kind: 'r',
		Persistence: 'p', ReplIdent: 'd', KeyAttnums: []int16{1}, Columns: []desclog.Column{
			{Num: 1, Name: "id", TypeOid: decode.OidInt4, Len: 4, Align: 'i', ByVal: true, TypeKind: 'b'},
			{Num: 2, Name: "v", TypeOid: decode.OidText, Len: -1, Align: 'i', TypeKind: 'b'},
		}}
}

// fakeSession answers with a real descriptor log (seeded with items) and
// the schema events the test says each boundary has.
type fakeSession struct {
	log    *desclog.Log
	events map[wal.LSN][]desclog.Event // by the boundary commit's next LSN
	asked  []wal.LSN
}

func (s *fakeSession) DescLog() *desclog.Log  { return s.log }
func (s *fakeSession) Bridge() *shadow.Bridge { return nil }
func (s *fakeSession) BoundaryEvents(ctx context.Context, next wal.LSN) ([]desclog.Event, error) {
	s.asked = append(s.asked, next)
	ev, ok := s.events[next]
	if !ok {
		return nil, fmt.Errorf("no boundary at %s", next)
	}
	return ev, nil
}

func newFakeSession(t *testing.T) *fakeSession {
	t.Helper()
	log, err := desclog.Open(t.TempDir(), desclog.Identity{PGMajor: 15, SystemID: 1, Timeline: 1, DbOid: testDB, SegmentSize: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	if _, err := log.Seed(0x1000, 0x800, []desclog.Descriptor{*itemsDesc()}); err != nil {
		t.Fatal(err)
	}
	return &fakeSession{log: log, events: map[wal.LSN][]desclog.Event{}}
}

// script builds the records of committed transactions as the session
// hands them out: each transaction's commit record first, then its row
// changes, the last flagged.
type script struct {
	recs []Record
}

// tx appends a committed transaction of xid: its commit at commit, and one
// insert of items per id, at the LSNs before it.
func (s *script) tx(xid uint32, commit wal.LSN, boundary bool, ids ...int32) *msg.Tx {
	tx := &msg.Tx{TopXID: xid, CommitLSN: commit, CommitNext: commit + 0x40, FirstLSN: commit,
		CommitTime: time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)}
	s.recs = append(s.recs, Record{Meta: &msg.Record{LSN: commit, Next: commit + 0x40, XID: xid, Rmgr: wal.RmgrXact,
		PGMajor: 15, Tx: tx, Last: len(ids) == 0}, Boundary: boundary})
	for i, id := range ids {
		lsn := commit - wal.LSN(0x100*(len(ids)-i))
		v := fmt.Sprintf("row %d", id)
		tuple := walbuild.Tuple(itemsDesc(), [][]byte{binary.LittleEndian.AppendUint32(nil, uint32(id)), append([]byte{byte((len(v)+1)<<1 | 1)}, v...)})
		raw := walbuild.HeapInsert(xid, itemsRfn, uint16(i+1), 0, tuple)
		s.recs = append(s.recs, Record{Meta: &msg.Record{LSN: lsn, Next: lsn + wal.LSN(len(raw)+7)&^7, XID: xid, Rmgr: wal.RmgrHeap,
			Info: wal.XLogHeapInsert, PGMajor: 15, Tx: tx, Last: i == len(ids)-1}, Raw: raw})
	}
	return tx
}

// describe renders a batch: its rows (op, LSN, id, commit) with the events
// in their places.
func describe(b *Batch) string {
	var out []string
	ev := 0
	for i := 0; i <= len(b.Rows); i++ {
		for ; ev < len(b.Events) && b.Events[ev].Before == i; ev++ {
			e := b.Events[ev]
			out = append(out, fmt.Sprintf("event %s %s.%s tx %d", e.Event.Kind, e.Event.Desc.Namespace, e.Event.Desc.Name, e.Tx.TopXID))
		}
		if i == len(b.Rows) {
			break
		}
		r, tx := b.Rows[i], b.RowTx[i]
		out = append(out, fmt.Sprintf("%s@%s id=%v v=%v tx %d commit %s", r.Op, r.LSN, r.Fields[0].Value, r.Fields[1].Value, tx.TopXID, tx.CommitLSN))
	}
	return strings.Join(out, "\n")
}

// TestDecodeCutsTransactions: transactions decode in commit order, a
// boundary's events go before its transaction's rows, and a transaction
// the batch cuts goes on in the next one, on one worker or several alike.
func TestDecodeCutsTransactions(t *testing.T) {
	for _, workers := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			sess := newFakeSession(t)
			var s script
			s.tx(900, 0x2000, true, 1, 2)
			s.tx(901, 0x3000, false, 3, 4, 5)
			s.tx(902, 0x3800, false) // changed no row
			s.tx(903, 0x4000, false, 6)
			sess.events[0x2040] = []desclog.Event{
				{Kind: desclog.EventAdded, Oid: 20000, ValidFrom: 0x2040, Desc: itemsDesc()},
				{Kind: desclog.EventAdded, Oid: 20001, ValidFrom: 0x2040, Desc: &desclog.Descriptor{Oid: 20001, Kind: 't'}}, // not a table
			}
			var finished, waits int
			d := New(sess, decode.TxOptions{}, workers, Observer{
				Transaction:  func(decode.TxStats) { finished++ },
				BoundaryWait: func(time.Duration) { waits++ },
			})
			cut := 5 // the first batch ends after transaction 901's first row
			b1, err := d.Decode(context.Background(), s.recs[:cut], 1, 1)
			if err != nil {
				t.Fatal(err)
			}
			want1 := `event added public.items tx 900
insert@0/00001E00 id=1 v=row 1 tx 900 commit 0/00002000
insert@0/00001F00 id=2 v=row 2 tx 900 commit 0/00002000
insert@0/00002D00 id=3 v=row 3 tx 901 commit 0/00003000`
			if got := describe(b1); got != want1 {
				t.Fatalf("first batch:\n%s\nwant\n%s", got, want1)
			}
			if b1.Epoch != 1 || b1.Seq != 1 || finished != 1 || waits != 1 {
				t.Errorf("epoch %d seq %d, %d transactions finished, %d boundary waits", b1.Epoch, b1.Seq, finished, waits)
			}
			d.Recycle(b1)
			b2, err := d.Decode(context.Background(), s.recs[cut:], 1, 2)
			if err != nil {
				t.Fatal(err)
			}
			want2 := `insert@0/00002E00 id=4 v=row 4 tx 901 commit 0/00003000
insert@0/00002F00 id=5 v=row 5 tx 901 commit 0/00003000
insert@0/00003F00 id=6 v=row 6 tx 903 commit 0/00004000`
			if got := describe(b2); got != want2 {
				t.Fatalf("second batch:\n%s\nwant\n%s", got, want2)
			}
			if finished != 4 || len(sess.asked) != 1 {
				t.Errorf("%d transactions finished, want 4; boundaries asked for %v", finished, sess.asked)
			}
			if b2.RowTx[0].Typed != s.recs[3].Meta.Tx {
				t.Errorf("the rows of the cut transaction lost its typed transaction")
			}
		})
	}
}

// TestDecodeOutOfOrder: records that do not follow the session's order
// (a row before its transaction's commit record, a commit inside another
// transaction) are errors naming the records, and Reset forgets the
// transaction in progress.
func TestDecodeOutOfOrder(t *testing.T) {
	sess := newFakeSession(t)
	var s script
	s.tx(900, 0x2000, false, 1, 2)
	s.tx(901, 0x3000, false, 3)
	d := New(sess, decode.TxOptions{}, 1, Observer{})
	if _, err := d.Decode(context.Background(), s.recs[1:2], 1, 1); err == nil || !strings.Contains(err.Error(), "arrived without its commit record first") {
		t.Fatalf("a row without its commit: %v", err)
	}
	if _, err := d.Decode(context.Background(), s.recs[0:2], 1, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Decode(context.Background(), s.recs[3:], 1, 2); err == nil || !strings.Contains(err.Error(), "began before transaction 900 (commit 0/00002000) ended") {
		t.Fatalf("a commit inside a transaction: %v", err)
	}
	d.Reset()
	b, err := d.Decode(context.Background(), s.recs[3:], 2, 1)
	if err != nil || len(b.Rows) != 1 {
		t.Fatalf("after Reset: %v, %+v", err, b)
	}
	noTx := Record{Meta: &msg.Record{LSN: 0x5000, PGMajor: 15}}
	if _, err := d.Decode(context.Background(), []Record{noTx}, 2, 2); err == nil || !strings.Contains(err.Error(), "without its transaction's metadata") {
		t.Fatalf("a record without its transaction: %v", err)
	}
}

// BenchmarkDecode decodes batches of 1,024 records (transactions of three
// inserts each) on the default pool, reporting rows/s; -cpu 1,2 gives the
// scaling over cores.
func BenchmarkDecode(b *testing.B) {
	sess := &fakeSession{events: map[wal.LSN][]desclog.Event{}}
	log, err := desclog.Open(b.TempDir(), desclog.Identity{PGMajor: 15, SystemID: 1, Timeline: 1, DbOid: testDB, SegmentSize: 16 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer log.Close()
	if _, err := log.Seed(0x1000, 0x800, []desclog.Descriptor{*itemsDesc()}); err != nil {
		b.Fatal(err)
	}
	sess.log = log
	var s script
	for i := 0; i < 256; i++ {
		s.tx(uint32(1000+i), wal.LSN(0x10000+0x1000*i), false, int32(3*i), int32(3*i+1), int32(3*i+2))
	}
	d := New(sess, decode.TxOptions{}, 0, Observer{})
	rows := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out, err := d.Decode(context.Background(), s.recs, 1, uint64(i+1))
		if err != nil {
			b.Fatal(err)
		}
		rows += len(out.Rows)
		d.Recycle(out)
	}
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
}
