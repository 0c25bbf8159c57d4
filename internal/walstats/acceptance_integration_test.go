package walstats

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/testrig"
	"github.com/walshadow/walshadow/internal/wal"
)

// TestAcceptancePGBenchDDLAllCompressions is issue 2's acceptance run: a
// real PostgreSQL 15 runs pgbench at scale 10 and the DDL script (CREATE,
// ALTER, DROP, TRUNCATE, VACUUM FULL, 2PC, savepoints, large TOASTed values)
// with wal_compression off, pglz, lz4 and zstd in turn. Over the resulting
// segments:
//   - the report equals pg_waldump --stats=record per record type (counts,
//     record bytes, FPI bytes), and its FPI count equals the FPW blocks
//     pg_waldump --bkp-details lists; zero CRC failures;
//   - the stream reader, fed the same bytes in random chunks of 1 byte to
//     1 MiB, yields exactly the file reader's records;
//   - every full-page image restores to a well-formed 8 KiB page, and images
//     compressed with each of pglz, lz4 and zstd are among them.
func TestAcceptancePGBenchDDLAllCompressions(t *testing.T) {
	pg := testrig.StartPostgres(t, testrig.WithMaxPreparedTransactions(5), testrig.WithWALCompression("off"))
	pg.PGBench(t, 10, testrig.PGBenchOptions{Transactions: 1000, Clients: 2, Jobs: 2})
	for _, method := range []string{"off", "pglz", "lz4", "zstd"} {
		pg.SetConf(t, "wal_compression", method)
		pg.Checkpoint(t) // the next change to each page logs a full-page image
		pg.RunSQLScript(t, testrig.DDLScript)
		pg.PGBench(t, 10, testrig.PGBenchOptions{NoInit: true, Transactions: 500, Clients: 2, Jobs: 2})
	}
	pg.SwitchWAL(t)

	dir := t.TempDir()
	names := pg.CopyWALSegments(t, dir)
	if len(names) < 4 {
		t.Fatalf("only %d segments copied", len(names))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	first, last := names[0], names[len(names)-1]

	want, err := testrig.WaldumpStats(ctx, pg.BinDir(), dir, first, last)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Collect(ctx, []string{dir}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	compareWithWaldump(t, got, want)
	if got.CRCFailures != 0 {
		t.Errorf("%d CRC failures", got.CRCFailures)
	}
	fpis, err := testrig.WaldumpFPICount(ctx, pg.BinDir(), dir, first, last)
	if err != nil {
		t.Fatal(err)
	}
	if got.FPICount != fpis.Images || got.Records != fpis.Records {
		t.Errorf("FPI count %d in %d records, pg_waldump --bkp-details lists %d in %d", got.FPICount, got.Records, fpis.Images, fpis.Records)
	}
	t.Logf("PostgreSQL %s: %d segments, %d records, %d bytes, %d FPIs (%d bytes), %d record types; pg_waldump agrees",
		pg.QueryString(t, "SHOW server_version"), got.SegmentsRead, got.Records, got.TotalBytes, got.FPICount, got.FPIBytes, len(got.RecordTypes))

	fileRecs := restoreAllImages(t, dir)
	streamRecs := streamInRandomChunks(t, dir)
	if len(streamRecs) != len(fileRecs) {
		t.Fatalf("stream reader: %d records, file reader %d", len(streamRecs), len(fileRecs))
	}
	for i := range fileRecs {
		if streamRecs[i] != fileRecs[i] {
			t.Fatalf("record %d: stream %+v, file %+v", i, streamRecs[i], fileRecs[i])
		}
	}
	if uint64(len(fileRecs)) != got.Records {
		t.Fatalf("file reader %d records, report %d", len(fileRecs), got.Records)
	}
}

type recID struct {
	LSN, End wal.LSN
	Len, CRC uint32
}

// restoreAllImages reads dir with the file reader, restores every full-page
// image and checks the page header is sane; it returns the records' ids.
func restoreAllImages(t *testing.T, dir string) []recID {
	t.Helper()
	r, err := wal.NewFileReader(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var ids []recID
	byMethod := map[string]int{}
	page := make([]byte, 0, wal.BlockSize+16)
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, recID{rec.LSN, rec.End, rec.Header.TotLen, rec.Header.CRC})
		for i := range rec.Blocks {
			b := &rec.Blocks[i]
			if !b.HasImage() {
				continue
			}
			p, err := rec.RestoreBlockImage(b.ID, page)
			if err != nil {
				t.Fatalf("restoring block %d of %s: %v", b.ID, rec.LSN, err)
			}
			checkPage(t, rec, b, p)
			switch {
			case b.Image.Info&wal.BkpImageCompressPGLZ != 0:
				byMethod["pglz"]++
			case b.Image.Info&wal.BkpImageCompressLZ4 != 0:
				byMethod["lz4"]++
			case b.Image.Info&wal.BkpImageCompressZstd != 0:
				byMethod["zstd"]++
			default:
				byMethod["off"]++
			}
		}
	}
	for _, m := range []string{"off", "pglz", "lz4", "zstd"} {
		if byMethod[m] == 0 {
			t.Errorf("no full-page image with compression %s (saw %v)", m, byMethod)
		}
	}
	t.Logf("restored full-page images: %v", byMethod)
	return ids
}

// checkPage applies PageHeaderIsValid's checks to a restored page, plus the
// page LSN bound: a page image is never newer than the record carrying it.
func checkPage(t *testing.T, rec *wal.Record, b *wal.BlockRef, p []byte) {
	t.Helper()
	if len(p) != wal.BlockSize {
		t.Fatalf("%s block %d: page of %d bytes", rec.LSN, b.ID, len(p))
	}
	lsn := wal.LSN(uint64(binary.LittleEndian.Uint32(p[0:]))<<32 | uint64(binary.LittleEndian.Uint32(p[4:])))
	lower, upper, special := binary.LittleEndian.Uint16(p[12:]), binary.LittleEndian.Uint16(p[14:]), binary.LittleEndian.Uint16(p[16:])
	size := binary.LittleEndian.Uint16(p[18:]) & 0xFF00
	if allZero(p) {
		return // a new, never-initialised page can be logged as is
	}
	if lsn > rec.LSN || size != wal.BlockSize || lower < 24 || lower > upper || upper > special || special > wal.BlockSize {
		t.Fatalf("%s block %d (%s): restored page header invalid: lsn %s lower %d upper %d special %d size %d",
			rec.LSN, b.ID, b.Rel, lsn, lower, upper, special, size)
	}
}

func allZero(p []byte) bool {
	for _, c := range p {
		if c != 0 {
			return false
		}
	}
	return true
}

// streamInRandomChunks pushes every segment of dir through one stream reader
// in chunks of random size, 1 byte to 1 MiB (a third of the chunks tiny).
func streamInRandomChunks(t *testing.T, dir string) []recID {
	t.Helper()
	files, err := wal.SegmentFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(2, 0xACCE55))
	var sr *wal.StreamReader
	var ids []recID
	drain := func() {
		for {
			rec, err := sr.Next()
			if err == wal.ErrNeedMore {
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, recID{rec.LSN, rec.End, rec.Header.TotLen, rec.Header.CRC})
		}
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if sr == nil {
			name, _ := wal.ParseSegmentName(f[len(f)-24:])
			start, err := name.StartLSN(uint32(len(data)))
			if err != nil {
				t.Fatal(err)
			}
			if sr, err = wal.NewStreamReader(start, wal.StreamOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		for len(data) > 0 {
			n := 1 + rng.IntN(1<<20)
			if rng.IntN(3) == 0 {
				n = 1 + rng.IntN(64)
			}
			n = min(n, len(data))
			sr.Push(data[:n])
			data = data[n:]
			drain()
		}
	}
	return ids
}
