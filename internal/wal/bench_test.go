package wal

import (
	"errors"
	"io"
	"os"
	"testing"
)

// BenchmarkFileReader reads every record (framing, page checks, xl_prev,
// CRC-32C, block headers) of the WAL in $WALSHADOW_BENCH_WAL, or of the
// fixture. The files should be in the page cache (run it twice).
func BenchmarkFileReader(b *testing.B) {
	dir := os.Getenv("WALSHADOW_BENCH_WAL")
	if dir == "" {
		dir = fixtureDir
	}
	var total int64
	for b.Loop() {
		r, err := NewFileReader(dir)
		if err != nil {
			b.Fatal(err)
		}
		total = 0
		for {
			rec, err := r.Next()
			if err != nil {
				if !errors.Is(err, io.EOF) && !IsKind(err, KindEndOfWAL) {
					b.Fatal(err)
				}
				break
			}
			total += int64(rec.Header.TotLen)
		}
		r.Close()
	}
	b.SetBytes(total)
	b.ReportAllocs()
}

// BenchmarkDecodeBody decodes the typed body of every fixture record.
func BenchmarkDecodeBody(b *testing.B) {
	all, start := fixtureBytes(b)
	recs, _ := readBytesErr(start, all, len(all))
	var total int64
	for _, r := range recs {
		total += int64(r.Header.TotLen)
	}
	b.SetBytes(total)
	b.ReportAllocs()
	for b.Loop() {
		for _, r := range recs {
			if _, err := DecodeBody(r); err != nil {
				b.Fatal(err)
			}
		}
	}
}
