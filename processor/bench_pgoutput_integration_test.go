package processor_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/testrig"
	"github.com/walshadow/walshadow/internal/wal"
)

// BenchmarkDecodeVsPgoutput puts walshadow's decode speed next to the
// PostgreSQL-native reference, logical decoding with pgoutput, on the very
// same transaction in the same run:
//
//  1. a source with a PUBLICATION for the table and a pgoutput LOGICAL slot,
//     both made before the workload, so both consumers see the same WAL;
//  2. one COPY of pgbench_accounts-like rows in one transaction, streamed
//     live by walshadow (pg_physical_wal -> walshadow_decode), held open
//     until walshadow has spilled it, then committed; walshadow's time is
//     COMMIT until the last row arrived;
//  3. then pg_recvlogical --start on the logical slot up to the commit's end
//     LSN, timed from launch to exit, with the logical walsender's CPU on
//     the source read from /proc.
//
// Fairness: logical_decoding_work_mem is set to walshadow's
// transaction_buffer_bytes (both spill past the same budget); pgoutput runs
// proto_version 1 without streaming, so it also holds the transaction to
// its commit; autovacuum is off so neither run shares the 2 CPUs with a
// vacuum of the fresh table. The walshadow figure covers only COMMIT to
// the last row because its buffering overlapped the COPY; pgoutput's
// launch-to-exit covers reading and buffering the WAL too, so the
// replay-phase figures (first output byte to exit) are the like-for-like
// pair.
//
// Skipped under -short and when PostgreSQL 15 or pg_recvlogical is absent.
func BenchmarkDecodeVsPgoutput(b *testing.B) {
	const (
		rows    = 1_000_000
		budget  = 8 << 20
		slot    = "walshadow_bench_vs_pgoutput"
		logical = "bench_pgoutput"
		pub     = "bench_pub"
	)
	testrig.SkipIfShort(b, "PostgreSQL to copy a million rows")
	testrig.RequirePgRecvlogical(b)
	b.ReportAllocs()

	src := testrig.StartPostgres(b,
		testrig.WithSetting("log_min_error_statement", "panic"),
		testrig.WithSetting("logical_decoding_work_mem", strconv.Itoa(budget>>10)+"kB"),
		testrig.WithSetting("autovacuum", "off"))
	// One physical slot for walshadow, one logical slot, one walsender each.
	for _, name := range []string{"max_replication_slots", "max_wal_senders"} {
		if n := src.QueryInt(b, "SELECT setting::int FROM pg_settings WHERE name = $1", name); n < 2 {
			b.Fatalf("%s = %d on the source, the benchmark needs 2", name, n)
		}
	}

	stateDir := newStateDir(b, src)
	digest := newCopyDigest("lt_accounts", "lt_marker")
	runErr := startLargeStream(b, src, stateDir, slot, budget, digest.consume)
	src.Exec(b, `CREATE TABLE lt_accounts (aid int PRIMARY KEY, bid int NOT NULL, abalance int NOT NULL, filler char(84));
		CREATE TABLE lt_marker (id int PRIMARY KEY, token text)`)
	src.Exec(b, "CREATE PUBLICATION "+pub+" FOR TABLE lt_accounts")
	src.Exec(b, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", logical)
	physicalSender := int(src.QueryInt(b, "SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1", slot))

	ws := runWalshadowCopy(b, src, filepath.Join(stateDir, "spill"), digest, runErr, rows, physicalSender)
	d := digest
	d.mu.Lock()
	for _, err := range d.errs {
		b.Errorf("row: %v", err)
	}
	var sourceRows, sourceSum int64
	var sourceMD5 string
	err := src.QueryRow(b, `SELECT count(*), coalesce(sum(aid), 0),
			coalesce(md5(string_agg(format('%s|%s|%s|%s', aid, bid, abalance, filler) || E'\n', '' ORDER BY aid)), '')
		FROM lt_accounts`).Scan(&sourceRows, &sourceSum, &sourceMD5)
	if err != nil {
		b.Fatalf("reading the source's digest: %v", err)
	}
	if d.rows != sourceRows || d.sumAid != sourceSum || hex.EncodeToString(d.h.Sum(nil)) != sourceMD5 {
		b.Errorf("walshadow delivered %d rows (sum %d), the source has %d (sum %d), or their md5 differs", d.rows, d.sumAid, sourceRows, sourceSum)
	}
	delivered := d.rows
	d.mu.Unlock()

	commitEnd, err := commitRecordEnd(src.WALDir(), ws.beforeCommit, ws.xid)
	if err != nil {
		b.Fatal(err)
	}
	pg := src.RunPgoutput(b, logical, pub, commitEnd)
	if confirmed := src.QueryLSN(b, "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = $1", logical); confirmed < commitEnd {
		b.Errorf("pg_recvlogical exited with the slot confirmed at %s, before the commit's end %s", confirmed, commitEnd)
	}
	// An INSERT message of this table is over 100 bytes (header, relation
	// oid, four text columns with the 84-character filler).
	if pg.Bytes < rows*100 {
		b.Errorf("pgoutput sent %d bytes for %d rows: it did not stream the transaction", pg.Bytes, rows)
	}

	walshadowRate := float64(delivered) / ws.decodeTime.Seconds()
	pgRate := float64(rows) / pg.Wall.Seconds()
	pgReplayRate := float64(rows) / pg.Replay.Seconds()
	b.SetBytes(ws.txWALBytes)
	b.ReportMetric(walshadowRate, "walshadow-rows/s")
	b.ReportMetric(pgRate, "pgoutput-rows/s")
	b.ReportMetric(walshadowRate/pgRate, "ratio")
	b.ReportMetric(pgReplayRate, "pgoutput-replay-rows/s")
	b.ReportMetric(walshadowRate/pgReplayRate, "ratio-replay")
	b.ReportMetric(pg.WalsenderCPU.Seconds(), "pgoutput-walsender-cpu-s")
	if ws.walsenderCPUErr == nil {
		b.ReportMetric(ws.walsenderCPU.Seconds(), "walshadow-walsender-cpu-s")
		if ws.walsenderCPU > 0 {
			b.ReportMetric(pg.WalsenderCPU.Seconds()/ws.walsenderCPU.Seconds(), "source-cpu-ratio")
		}
	}
	b.ReportMetric(ws.processCPU.Seconds(), "walshadow-decode-cpu-s")

	b.Logf("transaction: %d rows, %.1f MiB of WAL, COPY %v; commit ends at %s (xid %d)",
		rows, mib(ws.txWALBytes), ws.copyTime.Round(time.Millisecond), commitEnd, ws.xid)
	b.Logf("walshadow: COMMIT to last row %v (%.0f rows/s), BEGIN to last row %v; CPU of this process (pipeline) %.2fs over COMMIT..last row, %.2fs over BEGIN..last row",
		ws.decodeTime.Round(time.Millisecond), walshadowRate, ws.total.Round(time.Millisecond), ws.processCPU.Seconds(), ws.processCPUTotal.Seconds())
	if ws.walsenderCPUErr != nil {
		b.Logf("walshadow: physical walsender CPU not measurable: %v", ws.walsenderCPUErr)
	} else {
		b.Logf("walshadow: source-side physical walsender (pid %d) CPU %.2fs over BEGIN..last row", physicalSender, ws.walsenderCPU.Seconds())
	}
	b.Logf("pgoutput: pg_recvlogical launch to exit %v (%.0f rows/s), first output byte after %v, replay %v (%.0f rows/s), %.1f MiB of output",
		pg.Wall.Round(time.Millisecond), pgRate, pg.FirstByte.Round(time.Millisecond), pg.Replay.Round(time.Millisecond), pgReplayRate, mib(pg.Bytes))
	b.Logf("pgoutput: source-side logical walsender (pid %d) CPU %.2fs (sampled every %v; the postmaster's reaped-children CPU rose %.2fs over the run); pg_recvlogical client CPU %.2fs",
		pg.WalsenderPID, pg.WalsenderCPU.Seconds(), testrig.CPUSampleInterval, pg.ReapedCPU.Seconds(), pg.ClientCPU.Seconds())
	b.Logf("ratio walshadow/pgoutput: %.2f (launch to exit), %.2f (replay phase); source CPU pgoutput/physical: %s",
		walshadowRate/pgRate, walshadowRate/pgReplayRate, cpuRatio(pg.WalsenderCPU, ws.walsenderCPU, ws.walsenderCPUErr))
}

func cpuRatio(logical, physical time.Duration, physicalErr error) string {
	if physicalErr != nil || physical <= 0 {
		return "n/a (the physical walsender used under one clock tick)"
	}
	return fmt.Sprintf("%.1fx", logical.Seconds()/physical.Seconds())
}

// walshadowCopyResult is what the walshadow half of the run observed.
type walshadowCopyResult struct {
	xid               uint32
	txWALBytes        int64
	beforeCommit      wal.LSN // insert position after the COPY, before COMMIT
	copyTime          time.Duration
	decodeTime, total time.Duration // COMMIT / BEGIN until the last row arrived
	processCPU        time.Duration // this process over COMMIT..last row
	processCPUTotal   time.Duration // this process over BEGIN..last row
	walsenderCPU      time.Duration // the physical walsender over BEGIN..last row
	walsenderCPUErr   error
}

// runWalshadowCopy COPYs rows into lt_accounts in one transaction while
// the pipeline streams, keeps the transaction open until the session has
// spilled it (as runLargeCopy does, so COMMIT..last row is the drain and
// decode alone), commits, and waits for every row and the marker after.
func runWalshadowCopy(b *testing.B, src *testrig.Postgres, spillDir string, digest *copyDigest, runErr <-chan error, rows int64, physicalSender int) *walshadowCopyResult {
	b.Helper()
	res := &walshadowCopyResult{}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	conn := src.Connect(b)
	debug.FreeOSMemory()

	senderBefore, senderErr := testrig.ReadProcCPU(physicalSender)
	selfBefore, err := testrig.ReadProcCPU(os.Getpid())
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	before := src.CurrentInsertLSN(b)
	tx, err := conn.Begin(ctx)
	if err != nil {
		b.Fatal(err)
	}
	var xid int64
	if err := tx.QueryRow(ctx, "SELECT pg_current_xact_id()::text::bigint % 4294967296").Scan(&xid); err != nil {
		b.Fatalf("reading the transaction's xid: %v", err)
	}
	res.xid = uint32(xid)
	tag, err := conn.PgConn().CopyFrom(ctx, &accountsCopy{next: 1, last: rows}, "COPY lt_accounts (aid, bid, abalance, filler) FROM STDIN")
	if err != nil {
		b.Fatalf("COPY: %v", err)
	}
	if tag.RowsAffected() != rows {
		b.Fatalf("COPY wrote %d rows, want %d", tag.RowsAffected(), rows)
	}
	res.beforeCommit = src.CurrentInsertLSN(b)
	res.copyTime = time.Since(start)
	res.txWALBytes = int64(res.beforeCommit - before)
	waitSpilled(b, spillDir, runErr, res.txWALBytes)

	b.ResetTimer()
	selfAtCommit, err := testrig.ReadProcCPU(os.Getpid())
	if err != nil {
		b.Fatal(err)
	}
	committing := time.Now()
	if err := tx.Commit(ctx); err != nil {
		b.Fatalf("COMMIT: %v", err)
	}
	src.Exec(b, "INSERT INTO lt_marker VALUES (1, 'after the copy')")
	waitDigest(b, digest, runErr, 10*time.Minute)
	b.StopTimer()
	selfAfter, err := testrig.ReadProcCPU(os.Getpid())
	if err != nil {
		b.Fatal(err)
	}
	senderAfter, err := testrig.ReadProcCPU(physicalSender)
	switch {
	case senderErr != nil:
		res.walsenderCPUErr = senderErr
	case err != nil:
		res.walsenderCPUErr = err
	default:
		res.walsenderCPU = senderAfter.Own - senderBefore.Own
	}
	res.processCPU = selfAfter.Own - selfAtCommit.Own
	res.processCPUTotal = selfAfter.Own - selfBefore.Own

	digest.mu.Lock()
	res.total = digest.lastRowAt.Sub(start)
	res.decodeTime = digest.lastRowAt.Sub(committing)
	digest.mu.Unlock()
	return res
}

// waitSpilled waits, with the transaction open, until the session has
// spilled it (runLargeCopy's criterion: a spill file, then 2 s or half the
// transaction's WAL on disk).
func waitSpilled(b *testing.B, spillDir string, runErr <-chan error, txWALBytes int64) {
	b.Helper()
	copied := time.Now()
	seen := false
	for {
		n, size, err := spillUsage(spillDir)
		if err != nil {
			b.Fatal(err)
		}
		seen = seen || n > 0
		if seen && (time.Since(copied) > 2*time.Second || size*2 > txWALBytes) {
			return
		}
		select {
		case err := <-runErr:
			b.Fatalf("the stream stopped with the transaction open: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Since(copied) > 2*time.Minute {
			b.Fatalf("no spill file in %s within 2 minutes of a %.1f MiB transaction", spillDir, mib(txWALBytes))
		}
	}
}

// commitRecordEnd finds the COMMIT record of xid at or after from in the
// WAL directory and returns its end (EndRecPtr, what logical decoding
// stamps on the commit message and pg_recvlogical --endpos matches).
func commitRecordEnd(walDir string, from wal.LSN, xid uint32) (wal.LSN, error) {
	files, err := wal.SegmentFiles(walDir)
	if err != nil {
		return 0, err
	}
	// Start at the segment holding from: earlier ones are not needed.
	var paths []string
	for _, p := range files {
		name, ok := wal.ParseSegmentName(filepath.Base(p))
		if !ok || name.Partial {
			continue
		}
		hdr, err := readSegmentSize(p)
		if err != nil {
			return 0, err
		}
		segStart, err := name.StartLSN(hdr)
		if err != nil {
			return 0, err
		}
		if segStart+wal.LSN(hdr) > from {
			paths = append(paths, p)
		}
	}
	if len(paths) == 0 {
		return 0, fmt.Errorf("no WAL segment in %s holds %s", walDir, from)
	}
	r, err := wal.NewFileReader(paths...)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	for {
		rec, err := r.Next()
		if err != nil {
			return 0, fmt.Errorf("looking for the COMMIT of xid %d after %s in %s: %w", xid, from, walDir, err)
		}
		if rec.LSN >= from && rec.Header.RmID == wal.RmgrXact && rec.Header.XID == xid &&
			wal.Identify(rec.Layout, rec.Header.RmID, rec.Header.Info) == "COMMIT" {
			return rec.Next, nil
		}
	}
}

// readSegmentSize reads xlp_seg_size from a segment's long page header.
func readSegmentSize(path string) (uint32, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("opening WAL segment: %w", err)
	}
	defer f.Close()
	var hdr [wal.LongPageHeaderLen]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		return 0, fmt.Errorf("%s: reading the first page header: %w", path, err)
	}
	ph, _ := wal.DecodePageHeader(hdr[:])
	if !ph.Long() || !wal.ValidSegmentSize(ph.SegSize) {
		return 0, fmt.Errorf("%s: no valid long page header", path)
	}
	return ph.SegSize, nil
}

// TestParseProcStat covers testrig.ParseProcCPU, which both pgoutput
// benchmarks read their CPU figures with; the durations assume Linux's
// USER_HZ of 100 clock ticks per second.
func TestParseProcStat(t *testing.T) {
	const walsender = "4242 (postgres) S 4200 4200 4200 0 -1 4194560 1234 0 0 0 150 37 2 1 20 0 1 0 998877 225000000 3000 18446744073709551615 1 1 0 0 0 0 4194304 19935232 84487 0 0 0 17 1 0 0 0 0 0\n"
	tests := []struct {
		name, in string
		want     testrig.ProcCPU
		wantErr  bool
	}{
		{name: "walsender", in: walsender, want: testrig.ProcCPU{Own: 1870 * time.Millisecond, Children: 30 * time.Millisecond}},
		{name: "command with spaces and parens", in: "7 (a) b (c)) R 1 1 1 0 -1 0 0 0 0 0 9 8 7 6 20 0\n", want: testrig.ProcCPU{Own: 170 * time.Millisecond, Children: 130 * time.Millisecond}},
		{name: "too short", in: "7 (x) R 1 1 1 0 -1 0 0 0 0 0 9 8 7\n", wantErr: true},
		{name: "no command", in: "7 x R 1 1 1 0 -1 0 0 0 0 0 9 8 7 6\n", wantErr: true},
		{name: "not a number", in: "7 (x) R 1 1 1 0 -1 0 0 0 0 0 9 x 7 6\n", wantErr: true},
		{name: "negative", in: "7 (x) R 1 1 1 0 -1 0 0 0 0 0 9 8 -7 6\n", wantErr: true},
		{name: "out of range", in: "7 (x) R 1 1 1 0 -1 0 0 0 0 0 18446744073709551615 8 7 6\n", wantErr: true},
		{name: "empty", in: "", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := testrig.ParseProcCPU(7, tc.in)
			if (err != nil) != tc.wantErr || !tc.wantErr && got != tc.want {
				t.Fatalf("ParseProcCPU = %+v, %v; want %+v (error %v)", got, err, tc.want, tc.wantErr)
			}
		})
	}
	if _, err := testrig.ReadProcCPU(os.Getpid()); err != nil {
		t.Errorf("this process's stat: %v", err)
	}
}

func FuzzParseProcStat(f *testing.F) {
	f.Add([]byte("1 (init) S 0 1 1 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 9\n"))
	f.Add([]byte("2 ()) ) R"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := testrig.ParseProcCPU(2, string(raw))
		if err == nil && (c.Own < 0 || c.Children < 0) {
			t.Fatalf("negative times %+v from %q", c, raw)
		}
	})
}
