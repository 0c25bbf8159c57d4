package walstats

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/testrig"
	"github.com/walshadow/walshadow/internal/wal"
)

// EnvBenchWAL names a directory of WAL segments to benchmark on instead of
// generating them with a scratch PostgreSQL and pgbench.
const EnvBenchWAL = "WALSHADOW_BENCH_WAL"

// Workload of the generated benchmark WAL: pgbench's initial load (with
// wal_level=logical) plus TPC-B-like transactions, about 120 MB of WAL.
const (
	benchScale        = 5
	benchTransactions = 10000
)

// benchWAL is generated once per test binary run and shared by every call of
// the benchmark function (it runs several times with growing b.N).
var benchWAL struct {
	dir     string
	tempDir string // removed by TestMain
	bindir  string // pg_waldump's directory; "" when there is none

	waldumpDone  bool
	waldumpMBps  float64
	waldumpError string
}

func TestMain(m *testing.M) {
	code := m.Run()
	if benchWAL.tempDir != "" {
		os.RemoveAll(benchWAL.tempDir)
	}
	os.Exit(code)
}

// benchDir returns the WAL directory to benchmark, generating it on first use.
func benchDir(b *testing.B) string {
	b.Helper()
	if benchWAL.dir != "" {
		return benchWAL.dir
	}
	if dir := os.Getenv(EnvBenchWAL); dir != "" {
		benchWAL.dir = dir
		if bindir, ok := findWaldump(); ok {
			benchWAL.bindir = bindir
		}
		return dir
	}
	// testrig skips (or fails under CI=true) without PostgreSQL binaries.
	b.Logf("%s not set: generating WAL with pgbench -s %d and %d transactions", EnvBenchWAL, benchScale, benchTransactions)
	pg := testrig.StartPostgres(b)
	pg.PGBench(b, benchScale, testrig.PGBenchOptions{Transactions: benchTransactions})
	tmp, err := os.MkdirTemp("", "walshadow-bench-wal-")
	if err != nil {
		b.Fatal(err)
	}
	benchWAL.tempDir = tmp
	pg.CopyWALSegments(b, tmp)
	benchWAL.dir = tmp
	benchWAL.bindir = pg.BinDir()
	return tmp
}

// findWaldump looks for pg_waldump where testrig would, without skipping.
func findWaldump() (string, bool) {
	for _, dir := range []string{os.Getenv(testrig.EnvPGBinDir), testrig.DefaultPGBinDir} {
		if dir == "" {
			continue
		}
		if st, err := os.Stat(filepath.Join(dir, "pg_waldump")); err == nil && st.Mode()&0o111 != 0 {
			return dir, true
		}
	}
	return "", false
}

// waldumpThroughput times pg_waldump --stats=record over the complete
// segments of dir (best of three runs, process start included) and returns
// MB/s of record bytes (sum of xl_tot_len, as b.SetBytes counts ours).
func waldumpThroughput(b *testing.B, dir string) (mbps float64, ok bool) {
	b.Helper()
	if benchWAL.waldumpDone {
		if benchWAL.waldumpError != "" {
			b.Log(benchWAL.waldumpError)
		}
		return benchWAL.waldumpMBps, benchWAL.waldumpMBps > 0
	}
	benchWAL.waldumpDone = true
	fail := func(msg string) (float64, bool) {
		benchWAL.waldumpError = "pg_waldump comparison skipped: " + msg
		b.Log(benchWAL.waldumpError)
		return 0, false
	}
	if benchWAL.bindir == "" {
		return fail("no pg_waldump binary found")
	}
	files, err := wal.SegmentFiles(dir)
	if err != nil {
		return fail(err.Error())
	}
	var names []string
	for _, f := range files {
		if base := filepath.Base(f); !strings.HasSuffix(base, ".partial") {
			names = append(names, base)
		}
	}
	if len(names) == 0 {
		return fail("no complete segments in " + dir)
	}
	best := time.Duration(0)
	var bytes uint64
	for range 3 {
		start := time.Now()
		rep, err := testrig.WaldumpStats(context.Background(), benchWAL.bindir, dir, names[0], names[len(names)-1])
		d := time.Since(start)
		if err != nil {
			return fail(err.Error())
		}
		bytes = rep.Totals.CombinedBytes
		if best == 0 || d < best {
			best = d
		}
	}
	benchWAL.waldumpMBps = float64(bytes) / best.Seconds() / 1e6
	return benchWAL.waldumpMBps, true
}

// BenchmarkCollect measures Collect over a directory of real WAL (files in
// the page cache) and reports pg_waldump --stats=record on the same files:
// "pg_waldump_MB/s" and "ratio_vs_pg_waldump" (ours / pg_waldump; above 1
// means faster).
func BenchmarkCollect(b *testing.B) {
	dir := benchDir(b)
	ctx := context.Background()
	first, err := Collect(ctx, []string{dir}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	if first.Records == 0 {
		b.Fatalf("no records in %s", dir)
	}
	waldumpMBps, haveWaldump := waldumpThroughput(b, dir)

	b.SetBytes(int64(first.TotalBytes))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		rep, err := Collect(ctx, []string{dir}, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if rep.Records != first.Records {
			b.Fatalf("records %d, first run %d", rep.Records, first.Records)
		}
	}
	b.StopTimer()
	oursMBps := float64(first.TotalBytes) * float64(b.N) / b.Elapsed().Seconds() / 1e6
	b.ReportMetric(float64(first.Records)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	if haveWaldump {
		b.ReportMetric(waldumpMBps, "pg_waldump_MB/s")
		b.ReportMetric(oursMBps/waldumpMBps, "ratio_vs_pg_waldump")
	}
}
