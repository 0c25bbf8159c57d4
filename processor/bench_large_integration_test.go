package processor_test

import (
	"encoding/hex"
	"os"
	"strconv"
	"testing"
)

// BenchmarkDecodeLargeCopy runs one COPY of about 10x an 8 MiB reorder
// buffer (1M pgbench_accounts-like rows, ~100 MiB of row WAL) through the
// real pipeline, whatever b.N is: the run takes tens of seconds, so the
// framework does not repeat it (use -benchtime=1x to be sure). The timer
// covers BEGIN until the last row arrived. Metrics:
//
//   - rows/s: rows over that time; decode-rows/s: rows over COMMIT until the
//     last row (the session drains its spill, the processor decodes);
//   - MB/s (b.SetBytes): the transaction's WAL over that time;
//   - peak-RSS-MiB: how far VmHWM rose above the RSS at BEGIN;
//   - peak/budget: that rise over the buffer budget (goal < 2).
//
// It needs PostgreSQL 15 (skipped, saying so, when the rig finds none).
//
// WALSHADOW_BENCH_BUDGET_MB and WALSHADOW_BENCH_ROWS override the budget
// (8) and the row count (1,000,000), e.g. 64 and 6,500,000 for the default
// budget at ten times its size.
func BenchmarkDecodeLargeCopy(b *testing.B) {
	budget, rows := int64(8<<20), int64(1_000_000)
	if v, err := strconv.Atoi(os.Getenv("WALSHADOW_BENCH_BUDGET_MB")); err == nil && v > 0 {
		budget = int64(v) << 20
	}
	if v, err := strconv.Atoi(os.Getenv("WALSHADOW_BENCH_ROWS")); err == nil && v > 0 {
		rows = int64(v)
	}
	b.ReportAllocs()
	res := runLargeCopy(b, largeCopyOptions{
		rows: rows, bufferBytes: budget, slot: "walshadow_bench_large",
		measureStart: b.ResetTimer, measureEnd: b.StopTimer,
	})
	d := res.digest
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, err := range d.errs {
		b.Errorf("row: %v", err)
	}
	if d.rows != res.sourceRows || d.sumAid != res.sourceSum || hex.EncodeToString(d.h.Sum(nil)) != res.sourceMD5 {
		b.Errorf("received %d rows (sum %d), the source has %d (sum %d), or their md5 differs", d.rows, d.sumAid, res.sourceRows, res.sourceSum)
	}
	b.SetBytes(res.txWALBytes)
	b.ReportMetric(float64(d.rows)/res.total.Seconds(), "rows/s")
	b.ReportMetric(float64(d.rows)/res.decodeTime.Seconds(), "decode-rows/s")
	b.ReportMetric(mib(res.peakDelta()), "peak-RSS-MiB")
	b.ReportMetric(float64(res.peakDelta())/float64(budget), "peak/budget")
	b.ReportMetric(mib(res.rowWALBytes), "row-WAL-MiB")
	b.Logf("%d rows, %.1f MiB WAL (%.1f MiB row WAL), spill up to %.1f MiB, BEGIN to last row %v, decode after COMMIT %v",
		d.rows, mib(res.txWALBytes), mib(res.rowWALBytes), mib(res.spillBytes), res.total, res.decodeTime)
}
