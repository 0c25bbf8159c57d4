package output_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/load"
	"github.com/walshadow/walshadow/internal/shadow"
	"github.com/walshadow/walshadow/internal/testrig"
)

// BenchmarkInitialLoad loads pgbench tables (scale WALSHADOW_BENCH_SCALE,
// default 5: 500,000 accounts) that exist before the pipeline starts, per
// mode, through the whole pipeline with an idle source; bytes are the
// source tables' heap size, so MB/s compares the modes. Run it with
// -benchtime=1x: each iteration is a fresh source, ClickHouse and state.
func BenchmarkInitialLoad(b *testing.B) {
	scale := 5
	if v := os.Getenv("WALSHADOW_BENCH_SCALE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("WALSHADOW_BENCH_SCALE=%q: want a positive pgbench scale", v)
		}
		scale = n
	}
	for _, mode := range []load.Mode{load.ModeCopy, load.ModeBaseBackup} {
		b.Run(string(mode), func(b *testing.B) {
			b.ReportAllocs()
			var rows int64
			var took time.Duration
			var cpu float64
			var loadTook, refTook time.Duration
			var loadBytes int64
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				r := newRig(b)
				r.src.PGBench(b, scale, testrig.PGBenchOptions{})
				r.src.Exec(b, "VACUUM ANALYZE")
				size := r.src.QueryInt(b, "SELECT sum(pg_relation_size(c.oid))::bigint FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind = 'r'")
				b.SetBytes(size)
				// The reference: the same rows read raw from the source (COPY
				// to nowhere, or the BASE_BACKUP stream to nowhere).
				refTook = rawRead(b, r, mode)
				cpu0 := r.src.CPUSeconds(b)
				logs := &logLines{}
				b.StartTimer()
				start := time.Now()
				run := r.startLogged(b, fmt.Sprintf("initial_load: { mode: %s }", mode), logs)
				entries := r.waitLoadsDone(b, run, logs, 4, 30*time.Minute)
				took = time.Since(start)
				b.StopTimer()
				cpu = r.src.CPUSeconds(b) - cpu0
				rows = 0
				var first, last time.Time
				for _, e := range entries {
					rows += e.Rows
					if first.IsZero() || e.StartedAt.Before(first) {
						first = e.StartedAt
					}
					if e.FinishedAt.After(last) {
						last = e.FinishedAt
					}
				}
				loadTook = last.Sub(first)
				loadBytes = size
				run.stop(b)
			}
			_ = took
			// The load alone (first start to last publish, from the ledger):
			// the pipeline's start (the shadow's bootstrap) is in ns/op.
			b.ReportMetric(float64(rows)/loadTook.Seconds(), "load-rows/s")
			b.ReportMetric(float64(loadBytes)/(1<<20)/loadTook.Seconds(), "load-MB/s")
			b.ReportMetric(cpu, "source-cpu-s")
			b.ReportMetric(loadTook.Seconds()/refTook.Seconds(), "x-raw-read-time")
		})
	}
}

// rawRead times reading the pgbench tables from the source without
// walshadow's work: COPY ... TO STDOUT (FORMAT binary) of each into
// io.Discard (copy), or the whole BASE_BACKUP stream into io.Discard
// (base_backup).
func rawRead(b *testing.B, r *rig, mode load.Mode) time.Duration {
	b.Helper()
	ctx := context.Background()
	start := time.Now()
	switch mode {
	case load.ModeCopy:
		conn := r.src.Connect(b)
		for _, t := range []string{"pgbench_accounts", "pgbench_branches", "pgbench_tellers", "pgbench_history"} {
			if _, err := conn.PgConn().CopyTo(ctx, io.Discard, "COPY (SELECT * FROM public."+t+") TO STDOUT (FORMAT binary)"); err != nil {
				b.Fatal(err)
			}
		}
	default:
		_, _, err := shadow.ReadBaseBackup(ctx, r.src.DSN(), shadow.BaseBackupOptions{Fast: true}, nil,
			func(_ shadow.BackupTablespace, rd io.Reader) error {
				_, err := io.Copy(io.Discard, rd)
				return err
			})
		if err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start)
}
