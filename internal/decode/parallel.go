package decode

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/walshadow/walshadow/internal/wal"
)

// A batch of committed transactions decodes on several cores: each
// transaction's records are decoded in order by its own Tx, and nothing a
// Tx reads is written by another (the descriptor log answers from an
// immutable snapshot; a row's memory comes from its worker's arena). So a
// batch is cut into Segments, one per transaction (or the part of one a
// batch holds), the segments are shared out in contiguous runs over the
// workers, and the caller reads every segment's rows back in batch order:
// commit order is the segments' order, whatever finished first.

// Segment is the records of one transaction within a batch, decoded in
// order by its Tx; a transaction spanning batches has one in each, with
// the same Tx.
type Segment struct {
	Tx      *Tx
	Records []SegmentRecord
	// Finish: the transaction's last record is in this segment; Finish
	// runs after its records.
	Finish bool

	// Rows are the segment's decoded changes, valid until the pool's next
	// Decode. Err is the first error, which stopped the segment: a record
	// that does not parse (RecordErr) or the transaction's own (Add,
	// Finish).
	Rows      []RowChange
	Err       error
	RecordErr bool
}

// SegmentRecord is one WAL record of a segment, undecoded.
type SegmentRecord struct {
	Raw       []byte
	LSN, Next wal.LSN
	Layout    *wal.Layout
	// Deferred: the record's relation is resolved at commit (a relation
	// the transaction itself created or rewrote).
	Deferred bool
}

// parallelMinRecords: a batch smaller than this decodes on the caller's
// goroutine (handing it out would cost more than it saves). Tests lower it.
var parallelMinRecords = 256

// Pool decodes batches of segments over its workers, one batch at a time.
type Pool struct {
	workers []poolWorker
}

type poolWorker struct {
	arena Arena
	rows  []RowChange
	rec   wal.Record
}

// NewPool makes a pool of n workers (n < 1: GOMAXPROCS).
func NewPool(n int) *Pool {
	if n < 1 {
		n = runtime.GOMAXPROCS(0)
	}
	return &Pool{workers: make([]poolWorker, n)}
}

// Workers is the pool's size.
func (p *Pool) Workers() int { return len(p.workers) }

// Decode decodes every segment, filling its Rows or Err. A segment's Tx
// must not be in another segment of the call (a transaction has one
// segment per batch). Not safe for concurrent use.
func (p *Pool) Decode(segs []*Segment) {
	total := 0
	for _, s := range segs {
		total += len(s.Records) + 1
	}
	n := min(len(p.workers), len(segs))
	if n <= 1 || total < parallelMinRecords {
		p.workers[0].decode(segs)
		return
	}
	// Contiguous runs of about total/n records each.
	var wg sync.WaitGroup
	start, w := 0, 0
	for i, acc := 0, 0; i < len(segs); i++ {
		acc += len(segs[i].Records) + 1
		last := i == len(segs)-1
		if !last && (acc*n < total*(w+1) || w == n-1) {
			continue
		}
		run, worker := segs[start:i+1], &p.workers[w]
		wg.Add(1)
		go func() {
			defer wg.Done()
			worker.decode(run)
		}()
		start, w = i+1, w+1
	}
	wg.Wait()
}

// decode runs segs in order on one goroutine, into the worker's memory.
func (w *poolWorker) decode(segs []*Segment) {
	w.rows = w.rows[:0]
	bounds := make([]int, len(segs)+1)
	for i, s := range segs {
		bounds[i] = len(w.rows)
		s.Err, s.RecordErr = nil, false
		s.Tx.arena = &w.arena.a
		w.rows = w.decodeSegment(s, w.rows)
	}
	bounds[len(segs)] = len(w.rows)
	// The slices are taken once w.rows stopped growing.
	for i, s := range segs {
		s.Rows = w.rows[bounds[i]:bounds[i+1]:bounds[i+1]]
	}
}

func (w *poolWorker) decodeSegment(s *Segment, rows []RowChange) []RowChange {
	var err error
	for i := range s.Records {
		r := &s.Records[i]
		if err := wal.DecodeRecord(r.Raw, r.LSN, r.Layout, &w.rec); err != nil {
			s.Err, s.RecordErr = fmt.Errorf("decoding the record at %s: %w", r.LSN, err), true
			return rows
		}
		w.rec.Next = r.Next
		if rows, err = s.Tx.Add(rows, &w.rec, r.Deferred); err != nil {
			s.Err = err
			return rows
		}
	}
	if s.Finish {
		if rows, err = s.Tx.Finish(rows); err != nil {
			s.Err = err
		}
	}
	return rows
}
