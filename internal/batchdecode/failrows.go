package batchdecode

import (
	"slices"

	"github.com/walshadow/walshadow/internal/decode"
	"github.com/walshadow/walshadow/internal/wal"
)

// rowFailure is a decoded row that cannot be emitted.
type rowFailure struct {
	row int
	err error
}

// failRows turns decoded rows that cannot be emitted into their tables'
// failures, as the decoder does for what it finds itself: a failing row's
// record becomes one OpFail (the other changes of that record go too, e.g.
// the delete half of a key change), the table's later rows of the same
// transaction are dropped, and so are the ones the transaction has yet to
// decode, when it goes on past this batch. Schema events keep their place.
func (d *Decoder) failRows(b *Batch, failed []rowFailure) {
	type relTx struct {
		commit wal.LSN
		oid    uint32
	}
	keyOf := func(i int) relTx { return relTx{b.RowTx[i].CommitLSN, b.Rows[i].Desc.Oid} }
	slices.SortStableFunc(failed, func(x, y rowFailure) int { return x.row - y.row })
	// start: where each failed table's output ends, at its failing record.
	type failure struct {
		start int
		row   decode.RowChange
	}
	fails := map[relTx]*failure{}
	for _, f := range failed {
		k := keyOf(f.row)
		if fails[k] != nil {
			continue // the first failure of a table counts
		}
		start := f.row
		for start > 0 && keyOf(start-1) == k && b.Rows[start-1].LSN == b.Rows[f.row].LSN {
			start--
		}
		r := b.Rows[f.row]
		fails[k] = &failure{start: start, row: decode.RowChange{Op: decode.OpFail, LSN: r.LSN, Desc: r.Desc, DescFrom: r.DescFrom,
			TID: r.TID, Filenode: r.Filenode, Err: f.err}}
		if d.tx != nil && d.txMeta.CommitLSN == k.commit {
			d.tx.FailRelation(k.oid)
		}
	}
	newPos := make([]int, len(b.Rows)+1)
	w := 0
	for i := range b.Rows {
		newPos[i] = w
		if f := fails[keyOf(i)]; f != nil && i >= f.start {
			if i == f.start {
				b.Rows[w], b.RowTx[w] = f.row, b.RowTx[i]
				w++
			}
			continue
		}
		b.Rows[w], b.RowTx[w] = b.Rows[i], b.RowTx[i]
		w++
	}
	newPos[len(b.Rows)] = w
	clear(b.Rows[w:]) // do not pin dropped rows' values
	b.Rows, b.RowTx = b.Rows[:w], b.RowTx[:w]
	for i := range b.Events {
		b.Events[i].Before = newPos[b.Events[i].Before]
	}
}
