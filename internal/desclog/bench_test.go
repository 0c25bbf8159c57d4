package desclog

import (
	"math/rand/v2"
	"testing"

	"github.com/walshadow/walshadow/internal/wal"
)

const benchStride = 0x100000 // WAL between two versions

// benchLog builds, in memory, a log of rels relations with versions
// versions each: one batch per version, every relation's entry biased a
// little before the batch.
func benchLog(tb testing.TB, rels, versions int) *Log {
	tb.Helper()
	descs := make([]*Descriptor, rels)
	for i := range descs {
		d := table(uint32(16400+i), uint32(16400+i), "t", col(1, "id", typInt4), col(2, "v", typText))
		descs[i] = &d
	}
	batches := make([]*Batch, versions)
	for v := range batches {
		b := &Batch{CapturedAt: wal.LSN(0x10000 + v*benchStride), Entries: make([]Entry, rels)}
		for i := range b.Entries {
			d := descs[i]
			b.Entries[i] = Entry{Kind: EntryPresent, Source: SourceFirstCatalogTouch, Oid: d.Oid, Rfn: d.Rfn,
				ValidFrom: b.CapturedAt - 0x10000 + wal.LSN(i%0x10000), Desc: d}
		}
		batches[v] = b
	}
	ix, err := buildIndex(testDB, meta{CoveredThrough: batches[0].CapturedAt}, true, batches, nil)
	if err != nil {
		tb.Fatal(err)
	}
	l := &Log{id: testID}
	l.publish(ix)
	return l
}

type benchQuery struct {
	rfn wal.RelFileNode
	oid uint32
	lsn wal.LSN
}

func benchQueries(rels, versions int) []benchQuery {
	rng := rand.New(rand.NewPCG(1, 2))
	qs := make([]benchQuery, 1<<16)
	for i := range qs {
		oid := uint32(16400 + rng.IntN(rels))
		qs[i] = benchQuery{rfn: rfn(oid), oid: oid, lsn: wal.LSN(rng.Int64N(int64(0x10000 + versions*benchStride)))}
	}
	return qs
}

var sinkLookup Lookup

// BenchmarkDescriptorAt: 10k relations x 100 versions, random relation and
// LSN per lookup.
func BenchmarkDescriptorAt(b *testing.B) {
	const rels, versions = 10_000, 100
	l := benchLog(b, rels, versions)
	qs := benchQueries(rels, versions)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		q := &qs[i&(len(qs)-1)]
		sinkLookup = l.DescriptorAt(q.rfn, q.lsn)
	}
}

// BenchmarkDescriptorAtHead: random relations, LSNs past every version
// (live decoding).
func BenchmarkDescriptorAtHead(b *testing.B) {
	const rels, versions = 10_000, 100
	l := benchLog(b, rels, versions)
	qs := benchQueries(rels, versions)
	for i := range qs {
		qs[i].lsn = wal.LSN(0x10000 + versions*benchStride)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		q := &qs[i&(len(qs)-1)]
		sinkLookup = l.DescriptorAt(q.rfn, q.lsn)
	}
}

// BenchmarkDescriptorAtHot: 64 relations (cache-resident), random LSNs.
func BenchmarkDescriptorAtHot(b *testing.B) {
	const rels, versions = 10_000, 100
	l := benchLog(b, rels, versions)
	qs := benchQueries(64, versions)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		q := &qs[i&(len(qs)-1)]
		sinkLookup = l.DescriptorAt(q.rfn, q.lsn)
	}
}

func BenchmarkDescriptorByOidInDBAt(b *testing.B) {
	const rels, versions = 10_000, 100
	l := benchLog(b, rels, versions)
	qs := benchQueries(rels, versions)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		q := &qs[i&(len(qs)-1)]
		sinkLookup = l.DescriptorByOidInDBAt(testDB, q.oid, q.lsn)
	}
}

func BenchmarkDescriptorAtParallel(b *testing.B) {
	const rels, versions = 10_000, 100
	l := benchLog(b, rels, versions)
	qs := benchQueries(rels, versions)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := rand.IntN(len(qs))
		var sink Lookup
		for pb.Next() {
			q := &qs[i&(len(qs)-1)]
			sink = l.DescriptorAt(q.rfn, q.lsn)
			i++
		}
		_ = sink
	})
}

func benchBatch(rels int) *Batch {
	b := &Batch{CapturedAt: 0x5000, DrainXID: 1}
	for i := range rels {
		d := table(uint32(16400+i), uint32(16400+i), "some_table_name", notNull(col(1, "id", typInt4)), col(2, "name", typText),
			withMissing(col(3, "amount", typNumeric), "0.00"), col(4, "created", typInt8))
		b.Entries = append(b.Entries, Entry{Kind: EntryPresent, Source: SourcePgClassTouch, Oid: d.Oid, Rfn: d.Rfn, ValidFrom: 0x4000, Desc: &d})
	}
	return b
}

func BenchmarkDecodeBatch(b *testing.B) {
	body := appendBatch(nil, benchBatch(100))
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeBatch(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeBatch(b *testing.B) {
	batch := benchBatch(100)
	buf := appendBatch(nil, batch)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf = appendBatch(buf[:0], batch)
	}
}

// BenchmarkAppend: one single-relation boundary per op (encode, write,
// fdatasync, publish) into a log of 1000 relations.
func BenchmarkAppend(b *testing.B) {
	var seed []Descriptor
	for i := range 1000 {
		seed = append(seed, table(uint32(16400+i), uint32(16400+i), "t", col(1, "id", typInt4)))
	}
	l := seededLog(b, seed...)
	b.ReportAllocs()
	var bytes int64
	for i := 0; b.Loop(); i++ {
		next := wal.LSN(0x10000 * (i + 1))
		oid := uint32(16400 + i%1000)
		d := table(oid, oid, "t"+itoa(uint32(i)), col(1, "id", typInt4)) // a rename
		batch, _, err := Capture(l, BoundaryInput{NextLSN: next, AffectedOids: []uint32{oid}, FirstCatalogTouch: next - 0x100}, []Descriptor{d})
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Append(batch); err != nil {
			b.Fatal(err)
		}
		bytes += int64(len(appendBatch(nil, batch)))
	}
	b.SetBytes(bytes / int64(max(b.N, 1)))
}
