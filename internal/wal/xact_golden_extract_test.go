package wal

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

// xactGoldenRecords names the records of testdata/xact/*.rec and where they
// were in the PostgreSQL 15 WAL they were cut from. The WAL came from a
// scratch cluster (initdb; wal_level=logical, max_prepared_transactions=10,
// wal_log_hints=on) running, in order: CHECKPOINT; CREATE TABLE + SAVEPOINTs;
// an INSERT rolled back; CREATE+DROP TABLE; PREPARE TRANSACTION /
// COMMIT PREPARED; PREPARE (with a subxact) / ROLLBACK PREPARED;
// VACUUM FULL pg_class; TRUNCATE; a transaction with a rolled-back savepoint
// and LOCK TABLE held across a CHECKPOINT; one with 70 subxacts held across a
// CHECKPOINT; VACUUM; pg_create_restore_point('rp_one'); full_page_writes
// off and on; pg_backup_start/stop; a restart with a new max_connections;
// DELETE + VACUUM (storage truncate); a commit from replication origin 'o1'
// with pg_replication_origin_xact_setup('0/ABCDEF01', '2024-01-02
// 03:04:05.678901+00').
var xactGoldenRecords = []struct {
	name string
	lsn  LSN
}{
	{"nextoid", 0x060000D8},
	{"standby_lock", 0x060000F8},
	{"smgr_create", 0x06000128},
	{"running_xacts_empty", 0x06000028},
	{"abort_plain", 0x060251D8},
	{"commit_drop_table", 0x06026E10},
	{"prepare_commit", 0x060285D8},
	{"commit_prepared", 0x060289B8},
	{"prepare_abort", 0x0602A078},
	{"abort_prepared", 0x0602A460},
	{"fpi", 0x0604BE30},
	{"relmap_update", 0x06053B08},
	{"commit_truncate", 0x060555A0},
	{"abort_subxact", 0x06055900},
	{"standby_lock_toplevel", 0x06055928},
	{"running_xacts_subxids", 0x06055988},
	{"checkpoint_online", 0x060559C8},
	{"commit_subxacts", 0x06055A40},
	{"assignment_small", 0x06055A80},
	{"assignment_64", 0x06057DE0},
	{"running_xacts_overflow", 0x06058250},
	{"standby_invalidations", 0x06063588},
	{"restore_point", 0x060635E8},
	{"fpw_change_false", 0x06063650},
	{"switch", 0x06063690},
	{"backup_end", 0x070000D8},
	{"checkpoint_shutdown", 0x08000028},
	{"parameter_change", 0x080000A0},
	{"smgr_truncate", 0x0900B6E0},
	{"xact_invalidations", 0x0900B9A8},
	{"commit_origin", 0x0900BD30},
}

// TestXactGoldenExtract regenerates testdata/xact from PostgreSQL 15 WAL
// segments when WALSHADOW_XACT_GOLDEN_WAL names their directory; it is
// skipped otherwise.
func TestXactGoldenExtract(t *testing.T) {
	dir := os.Getenv("WALSHADOW_XACT_GOLDEN_WAL")
	if dir == "" {
		t.Skip("set WALSHADOW_XACT_GOLDEN_WAL to a directory of PG15 segments to regenerate testdata/xact")
	}
	want := map[LSN]string{}
	for _, g := range xactGoldenRecords {
		want[g.lsn] = g.name
	}
	r, err := NewFileReader(dir)
	if err != nil {
		t.Fatal(err)
	}
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		name, ok := want[rec.LSN]
		if !ok {
			continue
		}
		delete(want, rec.LSN)
		if err := os.WriteFile(filepath.Join("testdata", "xact", name+".rec"), rec.Raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for lsn, name := range want {
		t.Errorf("record %s at %s not found", name, lsn)
	}
}
