package decode

import (
	"bytes"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/wal"
)

// poolScript is a run of committed transactions as batches of segments,
// built from records the test builder makes: inserts, multi-inserts,
// updates, deletes and TOASTed values, some transactions spanning two
// batches (the TOAST chunks in one, the row pointing at them in the next).
type poolScript struct {
	cat     *fakeCatalog
	batches [][]scriptSeg
	// spanning counts the transactions cut between two batches.
	spanning int
}

type scriptSeg struct {
	tx      int // index of the transaction
	records []SegmentRecord
	finish  bool
}

func newPoolScript(t testing.TB, seed int64, txs int) *poolScript {
	rnd := rand.New(rand.NewSource(seed))
	s := &poolScript{cat: newFakeCatalog(testDB, 0x100, []desclog.Descriptor{*mainDesc(), *toastDesc()})}
	lsn := wal.LSN(0x10000)
	rec := func(r *wal.Record) SegmentRecord {
		raw := append([]byte(nil), r.Raw...)
		sr := SegmentRecord{Raw: raw, LSN: r.LSN, Next: r.LSN + wal.LSN(len(raw)), Layout: layout15}
		return sr
	}
	next := func() wal.LSN { lsn += 0x200; return lsn }
	var batch []scriptSeg
	var carry *scriptSeg // the second half of a spanning transaction
	for i := 0; i < txs; i++ {
		var recs []SegmentRecord
		spanning := false
		for n := 1 + rnd.Intn(6); n > 0; n-- {
			id := int32(rnd.Intn(50))
			switch k := rnd.Intn(10); {
			case k < 4:
				recs = append(recs, rec(insertRecord(t, next(), mainRfn, uint16(1+rnd.Intn(100)), 0, itemTuple(id, short(fmt.Sprintf("body %d/%d", i, n)), int64(i)))))
			case k < 5:
				tuples := [][]byte{itemTuple(id, short("m1"), 1), itemTuple(id+1, nil, 2), itemTuple(id+2, short("m3"), 3)}
				recs = append(recs, rec(multiInsertRecord(t, next(), mainRfn, 0, tuples)))
			case k < 7:
				recs = append(recs, rec(updateRecord(t, next(), mainRfn, itemTuple(id, short("new"), int64(k)), nil, 0)))
			case k < 8:
				recs = append(recs, rec(deleteRecord(t, next(), mainRfn, 1, wal.XLHDeleteContainsOldKey, tupleOf(mainDesc(), [][]byte{int4(id), nil, nil}))))
			default:
				// A TOASTed value: its chunks, then the row.
				value := bytes.Repeat([]byte{byte('a' + i%26)}, 3000+rnd.Intn(5000))
				vid := uint32(1000 + i)
				for seq := 0; seq*1996 < len(value); seq++ {
					chunk := value[seq*1996 : min(len(value), (seq+1)*1996)]
					tup := tupleOf(toastDesc(), [][]byte{le32(vid), int4(int32(seq)), plain(chunk)})
					recs = append(recs, rec(insertRecord(t, next(), toastRfn, 1, wal.XLHInsertOnToastRelation, tup)))
				}
				spanning = spanning || rnd.Intn(3) == 0
				ptr := externalPointer(int32(len(value)+4), len(value), CompressionPGLZ, vid, 20001)
				recs = append(recs, rec(insertRecord(t, next(), mainRfn, 2, 0, itemTuple(id, ptr, 9))))
			}
		}
		if carry != nil {
			batch = append(batch, *carry)
			carry = nil
		}
		if spanning && len(recs) > 1 {
			// The batch ends inside this transaction: its last record goes
			// on in the next batch.
			batch = append(batch, scriptSeg{tx: i, records: recs[:len(recs)-1]})
			carry = &scriptSeg{tx: i, records: recs[len(recs)-1:], finish: true}
			s.spanning++
			s.batches = append(s.batches, batch)
			batch = nil
			continue
		}
		batch = append(batch, scriptSeg{tx: i, records: recs, finish: true})
		if rnd.Intn(8) == 0 {
			s.batches = append(s.batches, batch)
			batch = nil
		}
	}
	if carry != nil {
		batch = append(batch, *carry)
	}
	if len(batch) > 0 {
		s.batches = append(s.batches, batch)
	}
	return s
}

// run decodes the script through p and renders every row, batch by batch,
// in order.
func (s *poolScript) run(t testing.TB, p *Pool) string {
	var out strings.Builder
	txs := map[int]*Tx{}
	for b, batch := range s.batches {
		segs := make([]*Segment, len(batch))
		for i, sc := range batch {
			tx := txs[sc.tx]
			if tx == nil {
				tx = NewTx(s.cat, Commit{TopXID: uint32(sc.tx + 1), LSN: 0x5000_0000, NextLSN: 0x5000_0100, DbOid: testDB}, TxOptions{})
				txs[sc.tx] = tx
			}
			segs[i] = &Segment{Tx: tx, Records: sc.records, Finish: sc.finish}
		}
		p.Decode(segs)
		for i, seg := range segs {
			if seg.Err != nil {
				t.Fatalf("batch %d, transaction %d: %v", b, batch[i].tx, seg.Err)
			}
			fmt.Fprintf(&out, "batch %d tx %d:\n", b, batch[i].tx)
			for _, r := range seg.Rows {
				fmt.Fprintf(&out, "  %s %s", r.Op, r.LSN)
				for _, f := range r.Fields {
					v := fmt.Sprint(f.Value)
					if len(v) > 40 {
						v = fmt.Sprintf("%s...(%d)", v[:8], len(v))
					}
					fmt.Fprintf(&out, " %s=%s/%v/%v", f.Col.Name, v, f.Null, f.Omitted)
				}
				out.WriteByte('\n')
			}
		}
	}
	return out.String()
}

// TestPoolMatchesOneWorker: a batch decoded over several workers gives
// every transaction's rows exactly as one worker does, in commit order,
// TOASTed values whose chunks came a batch earlier included.
func TestPoolMatchesOneWorker(t *testing.T) {
	defer func(n int) { parallelMinRecords = n }(parallelMinRecords)
	parallelMinRecords = 1 // every batch of the script on several workers
	for _, seed := range []int64{1, 2, 3} {
		s := newPoolScript(t, seed, 400)
		want := s.run(t, NewPool(1))
		if !strings.Contains(want, "...(") || s.spanning == 0 {
			t.Fatalf("seed %d: the script decoded no TOASTed value or cut no transaction between batches (%d):\n%s", seed, s.spanning, want[:min(2000, len(want))])
		}
		for _, n := range []int{2, 3, 8} {
			s := newPoolScript(t, seed, 400)
			if got := s.run(t, NewPool(n)); got != want {
				t.Fatalf("seed %d, %d workers: rows differ from one worker's\n%s", seed, n, firstDiff(got, want))
			}
		}
	}
}

// TestPoolErrorsStayInTheirSegment: a record that does not parse stops its
// own segment (RecordErr, naming the LSN); the others decode.
func TestPoolErrorsStayInTheirSegment(t *testing.T) {
	defer func(n int) { parallelMinRecords = n }(parallelMinRecords)
	parallelMinRecords = 1
	s := newPoolScript(t, 7, 300)
	var segs []*Segment
	for i, sc := range s.batches[0] {
		tx := NewTx(s.cat, Commit{TopXID: uint32(i + 1), LSN: 0x5000_0000, NextLSN: 0x5000_0100, DbOid: testDB}, TxOptions{})
		segs = append(segs, &Segment{Tx: tx, Records: sc.records, Finish: sc.finish})
	}
	if len(segs) < 4 {
		t.Fatalf("the script's first batch has %d transactions: too few to put a broken one between others", len(segs))
	}
	bad := len(segs) / 2
	broken := append([]byte(nil), segs[bad].Records[0].Raw...)
	broken[len(broken)-1] ^= 0xFF // the CRC no longer matches
	segs[bad].Records = append([]SegmentRecord{{Raw: broken, LSN: segs[bad].Records[0].LSN, Layout: layout15}}, segs[bad].Records[1:]...)
	NewPool(4).Decode(segs)
	for i, seg := range segs {
		switch {
		case i == bad && (seg.Err == nil || !seg.RecordErr || !strings.Contains(seg.Err.Error(), segs[bad].Records[0].LSN.String())):
			t.Errorf("segment %d: error %v (record error %v), want a record error naming %s", i, seg.Err, seg.RecordErr, segs[bad].Records[0].LSN)
		case i != bad && (seg.Err != nil || len(seg.Rows) == 0):
			t.Errorf("segment %d: error %v, %d rows", i, seg.Err, len(seg.Rows))
		}
	}
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < min(len(al), len(bl)); i++ {
		if al[i] != bl[i] {
			return fmt.Sprintf("line %d:\n got  %s\n want %s", i+1, al[i], bl[i])
		}
	}
	return fmt.Sprintf("%d lines, want %d", len(al), len(bl))
}

// BenchmarkPoolDecode decodes batches of pgbench-like transactions (an
// UPDATE of a 4-column row and an INSERT of a 20-column one each) on a
// pool of GOMAXPROCS workers: run it with -cpu 1,2,4 for the scaling
// table (MB/s of record bytes, rows/s).
func BenchmarkPoolDecode(b *testing.B) {
	acc := accountsRowDesc()
	mixed, vals := mixedDesc()
	mixed.Oid, mixed.Rfn = 20010, wal.RelFileNode{SpcOid: 1663, DbOid: testDB, RelNum: 20010}
	cat := newFakeCatalog(testDB, 0x100, []desclog.Descriptor{*acc, *mixed})
	const txs = 2000 // about one 8192-record batch
	var recs [][]SegmentRecord
	var bytesPerBatch int64
	lsn := wal.LSN(0x10000)
	for i := 0; i < txs; i++ {
		filler := make([]byte, 84)
		for j := range filler {
			filler[j] = ' '
		}
		accTuple := tupleOf(acc, [][]byte{int4(int32(i)), int4(1), int4(int32(-i)), short(string(filler))})
		u := updateRecord(b, lsn, acc.Rfn, accTuple, nil, 0)
		m := insertRecord(b, lsn+0x100, mixed.Rfn, 1, 0, tupleOf(mixed, vals))
		lsn += 0x200
		var tx []SegmentRecord
		for _, r := range []*wal.Record{u, m} {
			raw := append([]byte(nil), r.Raw...)
			bytesPerBatch += int64(len(raw))
			tx = append(tx, SegmentRecord{Raw: raw, LSN: r.LSN, Next: r.LSN + 0x100, Layout: layout15})
		}
		recs = append(recs, tx)
	}
	p := NewPool(0)
	segs := make([]*Segment, txs)
	b.SetBytes(bytesPerBatch)
	b.ReportAllocs()
	b.ResetTimer()
	rows := 0
	for n := 0; n < b.N; n++ {
		for i := range segs {
			tx := NewTx(cat, Commit{TopXID: uint32(i + 1), LSN: 0x5000_0000, NextLSN: 0x5000_0100, DbOid: testDB}, TxOptions{})
			segs[i] = &Segment{Tx: tx, Records: recs[i], Finish: true}
		}
		p.Decode(segs)
		for _, s := range segs {
			if s.Err != nil {
				b.Fatal(s.Err)
			}
			rows += len(s.Rows)
		}
	}
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(p.Workers()), "workers")
}
