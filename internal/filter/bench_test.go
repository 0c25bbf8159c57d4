package filter

import (
	"errors"
	"io"
	"os"
	"strconv"
	"testing"

	"github.com/walshadow/walshadow/internal/wal"
)

// benchMaxBytes caps the records held in memory for benchmarks over large
// WAL (WALSHADOW_BENCH_WAL).
const benchMaxBytes = 512 << 20

// loadBenchRecords reads up to benchMaxBytes of records from the directory
// named by WALSHADOW_BENCH_WAL (the PG15 fixture by default) and returns
// them cloned, with the segment size and the followed database
// (WALSHADOW_BENCH_DB, default 5).
func loadBenchRecords(b *testing.B) ([]*wal.Record, uint32, uint32, int64) {
	dir := os.Getenv("WALSHADOW_BENCH_WAL")
	if dir == "" {
		dir = fixtureDir
	}
	db := uint32(followedDB)
	if s := os.Getenv("WALSHADOW_BENCH_DB"); s != "" {
		n, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			b.Fatalf("WALSHADOW_BENCH_DB: %v", err)
		}
		db = uint32(n)
	}
	r, err := wal.NewFileReader(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	var recs []*wal.Record
	var total int64
	for total < benchMaxBytes {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) || wal.IsKind(err, wal.KindEndOfWAL) {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		recs = append(recs, rec.Clone())
		total += int64(rec.Header.TotLen)
	}
	if len(recs) == 0 {
		b.Fatalf("no records in %s", dir)
	}
	return recs, r.Stream().SegmentSize(), db, total
}

// BenchmarkFilter runs Decide and the NOOP rewrite (NoopRecord + Scatter
// into a segment buffer) over real WAL. Throughput is in WAL bytes
// (xl_tot_len) per second.
func BenchmarkFilter(b *testing.B) {
	recs, segSize, db, total := loadBenchRecords(b)
	seg := make([]byte, segSize)
	write := func(at wal.LSN, p []byte) { copy(seg[at%wal.LSN(segSize):], p) }
	var buf []byte
	noop := 0
	b.SetBytes(total)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f := New(Config{DbOid: db})
		noop = 0
		for _, rec := range recs {
			d, err := f.Decide(rec)
			if err != nil {
				b.Fatal(err)
			}
			if d.Route != RouteNoop {
				continue
			}
			noop++
			if buf, err = NoopRecord(buf, rec.Header.TotLen, rec.Header.XID, rec.Header.Prev); err != nil {
				b.Fatal(err)
			}
			if err := Scatter(buf, rec.LSN, segSize, write); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(len(recs)), "records/op")
	b.ReportMetric(float64(noop), "noop/op")
}

// BenchmarkDecide is Decide alone, the classification cost per record.
func BenchmarkDecide(b *testing.B) {
	recs, _, db, total := loadBenchRecords(b)
	b.SetBytes(total)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f := New(Config{DbOid: db})
		for _, rec := range recs {
			if _, err := f.Decide(rec); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/record")
}
