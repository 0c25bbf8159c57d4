package testrig

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walshadow/walshadow/internal/wal"
)

// TestPostgresWorkloadWaldump drives the DDL script and a short pgbench run,
// copies the completed segments and checks the pg_waldump oracle on them.
func TestPostgresWorkloadWaldump(t *testing.T) {
	p := StartPostgres(t, WithMaxPreparedTransactions(4), WithWALSegSizeMB(4))
	if got := p.WALSegmentSize(); got != 4<<20 {
		t.Fatalf("WALSegmentSize = %d, want %d (initdb --wal-segsize=4)", got, 4<<20)
	}
	if got := p.QueryString(t, "SHOW wal_level"); got != "logical" {
		t.Fatalf("wal_level = %q, want logical", got)
	}
	start := p.CurrentLSN(t)

	p.RunSQLScript(t, DDLScript)
	checks := []struct {
		sql  string
		want int64
	}{
		{"SELECT count(*) FROM ddl_items", 1},
		{"SELECT count(*) FROM ddl_twophase", 1},
		{"SELECT count(*) FROM pg_prepared_xacts", 0},
		{"SELECT count(*) FROM ddl_savepoints WHERE id IN (1, 3)", 2},
		{"SELECT count(*) FROM ddl_savepoints", 2},
		{"SELECT count(*) FROM ddl_toast", 2},
		{"SELECT length(payload) FROM ddl_toast WHERE id = 1", 32768 * 32},
		// The 1 MiB md5 text stays about 1 MiB in TOAST; the repeat compresses.
		{"SELECT (pg_column_size(payload) > 1000000)::int FROM ddl_toast WHERE id = 1", 1},
		{"SELECT (pg_column_size(payload) < 100000)::int FROM ddl_toast WHERE id = 2", 1},
		{"SELECT count(*) FROM information_schema.columns WHERE table_name = 'ddl_savepoints'", 2},
	}
	for _, c := range checks {
		if got := p.QueryInt(t, c.sql); got != c.want {
			t.Errorf("%s = %d, want %d", c.sql, got, c.want)
		}
	}
	// The script is meant to be re-runnable on the same database.
	p.RunSQLScript(t, DDLScript)

	out := p.PGBench(t, 1, PGBenchOptions{Clients: 2, Transactions: 100})
	if !strings.Contains(out, "number of transactions actually processed: 200") {
		t.Errorf("pgbench output lacks 200 processed transactions:\n%s", out)
	}
	if got := p.QueryInt(t, "SELECT count(*) FROM pgbench_accounts"); got != 100000 {
		t.Errorf("pgbench_accounts has %d rows, want 100000", got)
	}

	dst := filepath.Join(t.TempDir(), "wal")
	names := p.CopyWALSegments(t, dst)
	if len(names) < 2 {
		t.Fatalf("copied %d segments, want several (1 MiB TOAST value, 4 MiB segments): %v", len(names), names)
	}
	if !slices.IsSorted(names) {
		t.Errorf("segments not in name order: %v", names)
	}
	for _, n := range names {
		fi, err := os.Stat(filepath.Join(dst, n))
		if err != nil {
			t.Fatal(err)
		}
		if uint64(fi.Size()) != p.WALSegmentSize() {
			t.Errorf("%s: %d bytes, want %d", n, fi.Size(), p.WALSegmentSize())
		}
	}
	insert := p.CurrentInsertLSN(t)
	lastSegEnd := wal.LSN((segNo(t, names[len(names)-1], p.WALSegmentSize()) + 1) * p.WALSegmentSize())
	if lastSegEnd > insert {
		t.Errorf("last copied segment %s ends at %s, past the insert position %s", names[len(names)-1], lastSegEnd, insert)
	}

	ctx := context.Background()
	report, err := WaldumpStats(ctx, p.BinDir(), dst, names[0], names[len(names)-1])
	if err != nil {
		t.Fatal(err)
	}
	// The copy ends with XLOG_SWITCH, so pg_waldump reads to the end cleanly.
	if report.Stop != nil {
		t.Errorf("pg_waldump stopped early on completed segments: %+v", report.Stop)
	}
	// The last record is XLOG_SWITCH, which ends at the segment boundary.
	if report.Start > start || report.End != lastSegEnd {
		t.Errorf("stats between %s and %s; workload started at %s, copy ends at %s", report.Start, report.End, start, lastSegEnd)
	}
	if h := report.Rmgr("Heap"); h.Count == 0 || h.RecordBytes == 0 {
		t.Errorf("no Heap records: %+v", h)
	}
	if x := report.Rmgr("Transaction"); x.Count < 200 {
		t.Errorf("Transaction records = %d, want >= 200 (pgbench commits)", x.Count)
	}
	if report.Totals.FPIBytes == 0 {
		t.Errorf("no full-page image bytes (full_page_writes is on): %+v", report.Totals)
	}
	for _, typ := range [][2]string{
		{"Transaction", "COMMIT"}, {"Transaction", "PREPARE"}, {"Transaction", "COMMIT_PREPARED"},
		{"Transaction", "ABORT_PREPARED"}, {"Transaction", "ABORT"}, {"Heap", "TRUNCATE"},
		{"Heap", "INSERT"}, {"XLOG", "SWITCH"}, {"Storage", "CREATE"},
	} {
		if row, ok := report.Find(typ[0], typ[1]); !ok || row.Count == 0 {
			t.Errorf("no %s/%s records in pg_waldump stats", typ[0], typ[1])
		}
	}

	fpis, err := WaldumpFPICount(ctx, p.BinDir(), dst, names[0], names[len(names)-1])
	if err != nil {
		t.Fatal(err)
	}
	if fpis.Records != report.Totals.Count {
		t.Errorf("--bkp-details listed %d records, --stats counted %d", fpis.Records, report.Totals.Count)
	}
	if fpis.Images == 0 || fpis.RecordsWithImages == 0 || fpis.RecordsWithImages > fpis.Images || fpis.Verification != 0 {
		t.Errorf("implausible image counts: %+v", fpis)
	}
	if fpis.LastLSN >= report.End || fpis.LastLSN < report.Start {
		t.Errorf("last record at %s, outside the stats range %s..%s", fpis.LastLSN, report.Start, report.End)
	}

	// On the live pg_wal, reading into the segment still being written stops
	// at the end of valid WAL, which is reported, not an error.
	p.Exec(t, "CREATE TABLE after_copy (x int); INSERT INTO after_copy VALUES (1)")
	// The segment holding the last written byte exists; the one holding the
	// insert position may not have been created yet.
	cur := SegmentName(1, (uint64(p.CurrentLSN(t))-1)/p.WALSegmentSize(), p.WALSegmentSize())
	live, err := WaldumpStats(ctx, p.BinDir(), p.WALDir(), names[len(names)-1], cur)
	if err != nil {
		t.Fatal(err)
	}
	if live.Stop == nil {
		t.Fatalf("want an end-of-WAL stop in the live segment %s, got none", cur)
	}
	if live.End <= lastSegEnd {
		t.Errorf("live stats end at %s, want past the copied WAL (%s): the committed after_copy records", live.End, lastSegEnd)
	}
	// Usually "invalid record length at <next record>", the end of the last
	// record (or just past the next page header when that ended a page). A
	// record whose tail is not written yet gives a page-header complaint
	// without an LSN instead.
	if end := live.Stop.End; end != 0 && (end < live.End || end > live.End+40) {
		t.Errorf("stopped at %s (%s); want the end of the last record %s", end, live.Stop.Msg, live.End)
	}
	if live.Stop.LastRecord >= live.End || live.Stop.LastRecord < live.Start {
		t.Errorf("last record before the stop at %s, outside %s..%s", live.Stop.LastRecord, live.Start, live.End)
	}
}

func segNo(t *testing.T, name string, segSize uint64) uint64 {
	t.Helper()
	_, n, err := parseSegmentName(name, segSize)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPostgresLifecycle covers settings, SetConf, Restart, WaitForLSN and the
// replication DSN.
func TestPostgresLifecycle(t *testing.T) {
	p := StartPostgres(t, WithWALCompression("lz4"), WithFullPageWrites(false), WithSetting("application_name", "it's quoted"))
	for key, want := range map[string]string{
		"wal_compression":         "lz4",
		"full_page_writes":        "off",
		"fsync":                   "off",
		"max_wal_senders":         "10",
		"max_replication_slots":   "10",
		"listen_addresses":        "127.0.0.1",
		"application_name":        "it's quoted",
		"logging_collector":       "off",
		"unix_socket_directories": filepath.Join(filepath.Dir(p.DataDir()), "sock"),
	} {
		if got := p.QueryString(t, "SELECT current_setting($1)", key); got != want {
			t.Errorf("%s = %q, want %q", key, got, want)
		}
	}

	p.SetConf(t, "work_mem", "7MB")
	p.WaitForLSN(t, "SELECT pg_current_wal_lsn()", func(wal.LSN) bool {
		return p.QueryString(t, "SHOW work_mem") == "7MB"
	}, 10*time.Second)

	// max_prepared_transactions needs a restart.
	p.SetConf(t, "max_prepared_transactions", "3")
	p.Restart(t)
	if got := p.QueryInt(t, "SELECT current_setting('max_prepared_transactions')::int"); got != 3 {
		t.Errorf("after Restart max_prepared_transactions = %d, want 3", got)
	}

	before := p.CurrentLSN(t)
	p.Exec(t, "CREATE TABLE t (x int)")
	p.Exec(t, "INSERT INTO t SELECT generate_series(1, $1::int)", 1000)
	p.Checkpoint(t)
	after := p.WaitForLSN(t, "SELECT pg_current_wal_lsn()", func(l wal.LSN) bool { return l > before }, 10*time.Second)
	if sw := p.SwitchWAL(t); sw < after {
		t.Errorf("pg_switch_wal() = %s, before %s", sw, after)
	}
	if got := p.CurrentInsertLSN(t); uint64(got)%p.WALSegmentSize() >= 8192 {
		t.Errorf("after pg_switch_wal the insert position %s is not on the first page of a segment", got)
	}

	// A slot nobody reads never confirms, so WaitForLSN must time out; run it
	// in a sub-test-like recorder to see the failure without failing t.
	p.Exec(t, "SELECT pg_create_logical_replication_slot('rig', 'test_decoding')")
	rec := &fatalRecorder{TB: t}
	func() {
		defer func() { recover() }()
		p.WaitForLSN(rec, "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'rig'",
			func(l wal.LSN) bool { return l > after+1<<30 }, 300*time.Millisecond)
	}()
	if !rec.fataled {
		t.Error("WaitForLSN returned for a condition that cannot hold")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgconn.Connect(ctx, p.ReplicationDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	res, err := conn.Exec(ctx, "IDENTIFY_SYSTEM").ReadAll()
	if err != nil {
		t.Fatalf("IDENTIFY_SYSTEM over the replication DSN: %v", err)
	}
	if len(res) != 1 || len(res[0].Rows) != 1 || len(res[0].Rows[0]) < 3 {
		t.Fatalf("IDENTIFY_SYSTEM returned %+v", res)
	}
	if xlogpos, err := wal.ParseLSN(string(res[0].Rows[0][2])); err != nil || xlogpos < after {
		t.Errorf("IDENTIFY_SYSTEM xlogpos %q (%v), want >= %s", res[0].Rows[0][2], err, after)
	}
	p.Exec(t, "SELECT pg_drop_replication_slot('rig')")

	p.Stop(t)
	if _, err := os.Stat(filepath.Join(p.DataDir(), "postmaster.pid")); !os.IsNotExist(err) {
		t.Errorf("postmaster.pid still there after Stop: %v", err)
	}
}

// fatalRecorder turns Fatal into a recorded panic so a test can check that a
// helper gives up.
type fatalRecorder struct {
	testing.TB
	fataled bool
}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.fataled = true
	r.TB.Logf("expected failure: "+format, args...)
	panic(r)
}

func (r *fatalRecorder) Fatal(args ...any) {
	r.fataled = true
	r.TB.Log(append([]any{"expected failure:"}, args...)...)
	panic(r)
}
