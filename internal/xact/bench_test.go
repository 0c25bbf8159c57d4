package xact

import (
	"errors"
	"io"
	"testing"

	"github.com/walshadow/walshadow/internal/wal"
)

// BenchmarkAddDrain buffers and drains one transaction of 64 MiB of 1 KiB
// records per op, all in memory and through a 1 MiB budget (spilling), and
// many small interleaved transactions. MB/s counts Raw bytes through Add
// and out of Drain.
func BenchmarkAddDrain(b *testing.B) {
	const recSize = 1 << 10
	const txBytes = 64 << 20
	b.Run("memory/64MiB-tx", func(b *testing.B) {
		benchTx(b, Config{MemoryBudget: 256 << 20}, txBytes/recSize, recSize)
	})
	b.Run("spill/64MiB-tx-1MiB-budget", func(b *testing.B) {
		benchTx(b, Config{MemoryBudget: 1 << 20}, txBytes/recSize, recSize)
	})
	b.Run("memory/16-interleaved-8-record-txs", func(b *testing.B) {
		benchSmallTxs(b, Config{}, 16, 8, recSize)
	})
}

func benchTx(b *testing.B, cfg Config, records, recSize int) {
	buf := newTestBuffer(b, cfg)
	raw := make([]byte, recSize)
	for i := range raw {
		raw[i] = byte(i)
	}
	b.SetBytes(int64(records * recSize))
	b.ReportAllocs()
	lsn := wal.LSN(0x1000000)
	var sink byte
	for b.Loop() {
		for range records {
			if err := buf.Add(Change{LSN: lsn, Next: lsn + wal.LSN(recSize), XID: 9, Raw: raw}); err != nil {
				b.Fatal(err)
			}
			lsn += wal.LSN(recSize)
		}
		d, err := buf.Commit(9, nil)
		if err != nil {
			b.Fatal(err)
		}
		sink ^= drainCount(b, d, records)
	}
	_ = sink
}

func benchSmallTxs(b *testing.B, cfg Config, txs, perTx, recSize int) {
	buf := newTestBuffer(b, cfg)
	raw := make([]byte, recSize)
	b.SetBytes(int64(txs * perTx * recSize))
	b.ReportAllocs()
	lsn := wal.LSN(0x1000000)
	xid := uint32(100)
	var sink byte
	for b.Loop() {
		for range perTx {
			for x := range txs {
				if err := buf.Add(Change{LSN: lsn, Next: lsn + wal.LSN(recSize), XID: xid + uint32(x), Raw: raw}); err != nil {
					b.Fatal(err)
				}
				lsn += wal.LSN(recSize)
			}
		}
		for x := range txs {
			d, err := buf.Commit(xid+uint32(x), nil)
			if err != nil {
				b.Fatal(err)
			}
			sink ^= drainCount(b, d, perTx)
		}
		xid += uint32(txs)
	}
	_ = sink
}

func drainCount(b *testing.B, d *Drain, want int) byte {
	var sink byte
	n := 0
	for {
		s, err := d.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range s {
			sink ^= c.Raw[len(c.Raw)-1]
		}
		n += len(s)
	}
	if n != want {
		b.Fatalf("drained %d records, want %d", n, want)
	}
	if err := d.Close(); err != nil {
		b.Fatal(err)
	}
	return sink
}
