package testrig

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/walshadow/walshadow/internal/wal"
)

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustLSN(t testing.TB, s string) wal.LSN {
	t.Helper()
	l, err := wal.ParseLSN(s)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestParseWaldumpStatsRecord(t *testing.T) {
	r, err := ParseWaldumpStats(readTestdata(t, "waldump_stats_record.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Start != mustLSN(t, "0/601B60") || r.End != mustLSN(t, "0/1400000") {
		t.Errorf("range %s..%s, want 0/601B60..0/1400000", r.Start, r.End)
	}
	if len(r.Rows) != 38 {
		t.Errorf("%d rows, want 38", len(r.Rows))
	}
	if r.Rows[0] != (WaldumpRow{"XLOG", "CHECKPOINT_SHUTDOWN", 1, 114, 0, 114}) {
		t.Errorf("first row %+v", r.Rows[0])
	}
	for _, want := range []WaldumpRow{
		{"XLOG", "FPI", 302, 15402, 1156441, 1171843},
		{"Heap", "INSERT+INIT", 151, 281960, 0, 281960},
		{"Heap2", "MULTI_INSERT+INIT", 1645, 10368815, 0, 10368815},
		{"Transaction", "COMMIT_PREPARED", 1, 71, 0, 71},
		{"Btree", "NEWROOT", 10, 964, 0, 964},
	} {
		got, ok := r.Find(want.Rmgr, want.Type)
		if !ok || got != want {
			t.Errorf("Find(%s, %s) = %+v, %v; want %+v", want.Rmgr, want.Type, got, ok, want)
		}
	}
	if _, ok := r.Find("Heap", "INSERT+"); ok {
		t.Error("Find matched a type prefix")
	}
	if want := (WaldumpRow{"Total", "", 8887, 12348700, 1306282, 13654982}); r.Totals != want {
		t.Errorf("Totals = %+v, want %+v", r.Totals, want)
	}
	if r.Stop != nil {
		t.Errorf("Stop = %+v from stdout alone", r.Stop)
	}

	// The per-rmgr output of the same WAL must agree with the per-type rows
	// summed by Rmgr.
	byRmgr, err := ParseWaldumpStats(readTestdata(t, "waldump_stats_rmgr.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(byRmgr.Rows) != 22 || byRmgr.Totals != r.Totals {
		t.Fatalf("per-rmgr: %d rows, totals %+v", len(byRmgr.Rows), byRmgr.Totals)
	}
	for _, row := range byRmgr.Rows {
		if row.Type != "" {
			t.Errorf("per-rmgr row %q has type %q", row.Rmgr, row.Type)
		}
		if got := r.Rmgr(row.Rmgr); got != row {
			t.Errorf("Rmgr(%q) = %+v, per-rmgr output says %+v", row.Rmgr, got, row)
		}
	}
}

func TestParseWaldumpStatsMalformed(t *testing.T) {
	good := string(readTestdata(t, "waldump_stats_end_of_wal.txt"))
	const row = "Heap/INSERT                                   99 ( 13.38)                 7821 ( 13.19)                    0 (  0.00)                 7821 (  8.39)"
	if !strings.Contains(good, row+"\n") {
		t.Fatal("testdata changed: Heap/INSERT row not found")
	}
	cases := map[string]string{
		"count off by one":      strings.Replace(good, "INSERT                                   99 (", "INSERT                                   98 (", 1),
		"combined != rec + fpi": strings.Replace(good, "7821 (  8.39)", "7822 (  8.39)", 1),
		"no Total line":         good[:strings.Index(good, "Total ")],
		"no header":             good[strings.Index(good, "Type "):],
		"unknown line":          strings.Replace(good, row, "Heap/INSERT 99 rows", 1),
		"row after Total":       good + row + "\n",
		"two Totals":            good + good[strings.Index(good, "Total "):],
		"count overflow":        strings.Replace(good, "Heap/INSERT                                   99", "Heap/INSERT 99999999999999999999999", 1),
	}
	for name, in := range cases {
		if _, err := ParseWaldumpStats([]byte(in)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}

	r, err := ParseWaldumpStats(nil)
	if err != nil || len(r.Rows) != 0 || r.Totals != (WaldumpRow{}) {
		t.Errorf("empty output: %+v, %v", r, err)
	}

	// Names with spaces (unknown info bits) and a leading "first record" note.
	odd := "first record is after 0/1000000, at 0/1000028, skipping over 40 bytes\n" +
		"WAL statistics between 0/1000028 and 0/1000100:\n" +
		"Heap/UNKNOWN (70)                              2 (100.00)                   60 (100.00)                    0 (  0.00)                   60 (100.00)\n" +
		"Total                                          2                           60 [100.00%]                    0 [0.00%]                    60 [100%]\n"
	r, err = ParseWaldumpStats([]byte(odd))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Rows) != 1 || r.Rows[0] != (WaldumpRow{"Heap", "UNKNOWN (70)", 2, 60, 0, 60}) {
		t.Errorf("rows %+v", r.Rows)
	}
}

func TestParseWaldumpFPIs(t *testing.T) {
	f, err := ParseWaldumpFPIs(bytes.NewReader(readTestdata(t, "waldump_bkp_details.txt")))
	if err != nil {
		t.Fatal(err)
	}
	want := WaldumpFPIs{Records: 247, Images: 247, RecordsWithImages: 247, LastLSN: mustLSN(t, "0/012FEB98")}
	if *f != want {
		t.Errorf("got %+v, want %+v", *f, want)
	}

	// Uncompressed, verification-only and image-less block references, a
	// record with two images and one without any (formats from
	// XLogRecGetBlockRefInfo).
	mixed := `rmgr: Heap        len (rec/tot):     54/  8246, tx:        740, lsn: 0/01000028, prev 0/00FFFFD0, desc: INSERT off 2 flags 0x00
	blkref #0: rel 1663/5/16384 fork main blk 0 (FPW); hole: offset: 44, length: 8000
	blkref #1: rel 1663/5/16385 fork vm blk 0 (FPW for WAL verification); hole: offset: 0, length: 0
rmgr: Heap        len (rec/tot):     54/    54, tx:        741, lsn: 0/01002078, prev 0/01000028, desc: INSERT off 3 flags 0x00
	blkref #0: rel 1663/5/16384 fork main blk 0
rmgr: XLOG        len (rec/tot):     49/  1234, tx:          0, lsn: 0/010020B0, prev 0/01002078, desc: FPI_FOR_HINT 
	blkref #0: rel 1663/5/16386 fork main blk 7 (FPW); hole: offset: 0, length: 0, compression saved: 6958, method: pglz

`
	f, err = ParseWaldumpFPIs(strings.NewReader(mixed))
	if err != nil {
		t.Fatal(err)
	}
	want = WaldumpFPIs{Records: 3, Images: 3, Verification: 1, RecordsWithImages: 2, LastLSN: mustLSN(t, "0/010020B0")}
	if *f != want {
		t.Errorf("mixed: got %+v, want %+v", *f, want)
	}

	for name, in := range map[string]string{
		"block before record": "\tblkref #0: rel 1663/5/16384 fork main blk 0 (FPW); hole: offset: 44, length: 8000\n",
		"malformed block":     strings.Replace(mixed, "blkref #1: rel 1663/5/16385", "blkref #1: relation 1663/5/16385", 1),
		"bad lsn":             strings.Replace(mixed, "lsn: 0/01002078,", "lsn: 0/1FFFFFFFF,", 1),
	} {
		if _, err := ParseWaldumpFPIs(strings.NewReader(in)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestParseWaldumpStop(t *testing.T) {
	cases := []struct {
		name   string
		stderr string
		ok     bool
		want   WaldumpStop
	}{
		{"end of WAL", string(readTestdata(t, "waldump_stderr_end_of_wal.txt")), true,
			WaldumpStop{mustLSN(t, "0/1400028"), mustLSN(t, "0/1400060"), "invalid record length at 0/1400060: wanted 24, got 0"}},
		{"no record", string(readTestdata(t, "waldump_stderr_no_record.txt")), true,
			WaldumpStop{0, mustLSN(t, "0/1400100"), "could not find a valid record after 0/1400100"}},
		{"crc", string(readTestdata(t, "waldump_stderr_crc.txt")), false, WaldumpStop{}},
		// The rest follow the format strings of xlogreader.c.
		{"non-zero bad length", "pg_waldump: error: error in WAL record at 0/1400028: invalid record length at 0/1400060: wanted 24, got 17\n", false, WaldumpStop{}},
		{"zeroed page", "pg_waldump: error: error in WAL record at 0/1FFFF88: invalid magic number 0000 in log segment 000000010000000000000002, offset 0\n", true,
			WaldumpStop{mustLSN(t, "0/1FFFF88"), 0, "invalid magic number 0000 in log segment 000000010000000000000002, offset 0"}},
		{"wrong magic", "pg_waldump: error: error in WAL record at 0/1FFFF88: invalid magic number D10D in log segment 000000010000000000000002, offset 0\n", false, WaldumpStop{}},
		{"recycled page", "pg_waldump: error: error in WAL record at 0/2001F88: unexpected pageaddr 0/1002000 in log segment 000000010000000000000002, offset 8192\n", true,
			WaldumpStop{mustLSN(t, "0/2001F88"), 0, "unexpected pageaddr 0/1002000 in log segment 000000010000000000000002, offset 8192"}},
		{"stale record", "pg_waldump: error: error in WAL record at 0/2000100: record with incorrect prev-link 0/1000F00 at 0/2000138\n", true,
			WaldumpStop{mustLSN(t, "0/2000100"), mustLSN(t, "0/2000138"), "record with incorrect prev-link 0/1000F00 at 0/2000138"}},
		{"bad rmgr", "pg_waldump: error: error in WAL record at 0/2000100: invalid resource manager ID 99 at 0/2000138\n", false, WaldumpStop{}},
		{"missing file", "pg_waldump: error: could not locate WAL file \"000000010000000000000009\"\n", false, WaldumpStop{}},
		{"empty", "", false, WaldumpStop{}},
	}
	for _, c := range cases {
		stop, ok := ParseWaldumpStop([]byte(c.stderr))
		if ok != c.ok {
			t.Errorf("%s: ok = %v, want %v", c.name, ok, c.ok)
			continue
		}
		if ok && *stop != c.want {
			t.Errorf("%s: got %+v, want %+v", c.name, *stop, c.want)
		}
	}
}

// fakeWaldump writes a pg_waldump stand-in that prints the given stdout and
// stderr files and exits with code; it lets WaldumpStats' exit handling be
// tested without a server.
func fakeWaldump(t *testing.T, stdoutFile, stderrFile string, code int) string {
	t.Helper()
	dir := t.TempDir()
	abs := func(name string) string {
		if name == "" {
			return "/dev/null"
		}
		p, err := filepath.Abs(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	script := "#!/bin/sh\ncat '" + abs(stdoutFile) + "'\ncat '" + abs(stderrFile) + "' >&2\nexit " + strconv.Itoa(code) + "\n"
	if err := os.WriteFile(filepath.Join(dir, "pg_waldump"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestWaldumpStatsExit(t *testing.T) {
	ctx := context.Background()

	bin := fakeWaldump(t, "waldump_stats_end_of_wal.txt", "waldump_stderr_end_of_wal.txt", 1)
	r, err := WaldumpStats(ctx, bin, "/nonexistent", "000000010000000000000013", "000000010000000000000014")
	if err != nil {
		t.Fatal(err)
	}
	if r.Stop == nil || r.Stop.End != r.End || r.Totals.Count != 740 {
		t.Errorf("end of WAL: stop %+v, end %s, totals %+v", r.Stop, r.End, r.Totals)
	}

	bin = fakeWaldump(t, "waldump_stats_record.txt", "", 0)
	if r, err := WaldumpStats(ctx, bin, "/nonexistent", "a", ""); err != nil || r.Stop != nil || r.Totals.Count != 8887 {
		t.Errorf("clean exit: %+v, %v", r, err)
	}

	bin = fakeWaldump(t, "waldump_stats_end_of_wal.txt", "waldump_stderr_crc.txt", 1)
	_, err = WaldumpStats(ctx, bin, "/nonexistent", "a", "")
	if err == nil || !strings.Contains(err.Error(), "incorrect resource manager data checksum") {
		t.Errorf("CRC error: got %v", err)
	}

	bin = fakeWaldump(t, "waldump_bkp_details.txt", "waldump_stderr_end_of_wal.txt", 1)
	f, err := WaldumpFPICount(ctx, bin, "/nonexistent", "a", "")
	if err != nil {
		t.Fatal(err)
	}
	if f.Images != 247 || f.Stop == nil || f.Stop.End != mustLSN(t, "0/1400060") {
		t.Errorf("FPI count: %+v (stop %+v)", f, f.Stop)
	}

	bin = fakeWaldump(t, "waldump_bkp_details.txt", "waldump_stderr_crc.txt", 1)
	if _, err := WaldumpFPICount(ctx, bin, "/nonexistent", "a", ""); err == nil {
		t.Error("FPI count with a CRC error: no error")
	}

	if _, err := WaldumpStats(ctx, t.TempDir(), "/nonexistent", "a", ""); err == nil {
		t.Error("missing pg_waldump: no error")
	}
}

func FuzzParseWaldumpStats(f *testing.F) {
	for _, name := range []string{"waldump_stats_record.txt", "waldump_stats_rmgr.txt", "waldump_stats_end_of_wal.txt"} {
		f.Add(readTestdata(f, name))
	}
	f.Fuzz(func(t *testing.T, out []byte) {
		r, err := ParseWaldumpStats(out)
		if err != nil {
			return
		}
		var sum WaldumpRow
		for _, row := range r.Rows {
			sum.Count += row.Count
			sum.CombinedBytes += row.CombinedBytes
			if row.RecordBytes+row.FPIBytes != row.CombinedBytes {
				t.Fatalf("row %+v does not add up", row)
			}
		}
		if sum.Count != r.Totals.Count || sum.CombinedBytes != r.Totals.CombinedBytes {
			t.Fatalf("accepted rows %+v that do not add up to %+v", r.Rows, r.Totals)
		}
	})
}

func FuzzParseWaldumpFPIs(f *testing.F) {
	f.Add(readTestdata(f, "waldump_bkp_details.txt")[:2000])
	f.Fuzz(func(t *testing.T, out []byte) {
		r, err := ParseWaldumpFPIs(bytes.NewReader(out))
		if err != nil {
			return
		}
		if r.RecordsWithImages > r.Records || r.RecordsWithImages > r.Images || r.Verification > r.Images {
			t.Fatalf("inconsistent counts %+v", r)
		}
	})
}

func FuzzParseWaldumpStop(f *testing.F) {
	for _, name := range []string{"waldump_stderr_end_of_wal.txt", "waldump_stderr_no_record.txt", "waldump_stderr_crc.txt"} {
		f.Add(readTestdata(f, name))
	}
	f.Fuzz(func(t *testing.T, stderr []byte) {
		stop, ok := ParseWaldumpStop(stderr)
		if ok != (stop != nil) {
			t.Fatalf("ok %v with stop %+v", ok, stop)
		}
	})
}
