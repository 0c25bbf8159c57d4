package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/load"
	"github.com/walshadow/walshadow/internal/session"
	"github.com/walshadow/walshadow/internal/shadow"
	"github.com/walshadow/walshadow/internal/spool"
	"github.com/walshadow/walshadow/internal/statefile"
	"github.com/walshadow/walshadow/internal/wal"
)

// runStatusCLI runs `status <args>` as the CLI would.
func runStatusCLI(t *testing.T, args ...string) (out, msg string, code int) {
	t.Helper()
	return runCommand(t, statusCommand(), args...)
}

func mustLSN(t *testing.T, s string) wal.LSN {
	t.Helper()
	l, err := wal.ParseLSN(s)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// testManifest is a manifest with distinct positions, updated 3 s ago.
func testManifest(t *testing.T) session.Manifest {
	return session.Manifest{
		SystemID: 7445501238329857311, Timeline: 1, ServerVersionNum: 150018, WALSegmentSize: 16 << 20,
		Received:        mustLSN(t, "0/5A3F1C8"),
		FilteredDurable: mustLSN(t, "0/5000000"),
		ShadowReplay:    mustLSN(t, "0/5A3F0B0"),
		Delivered:       mustLSN(t, "0/5A3E9E0"),
		Floor:           mustLSN(t, "0/5A3E100"),
		Restart:         mustLSN(t, "0/5000000"),
		UpdatedAt:       time.Now().Add(-3 * time.Second),
	}
}

// writeFakeShadow writes a shadow directory as a bootstrap leaves it: the
// completion marker and some catalog-sized files; postmaster.pid names pid
// when it is not 0. It returns the bytes written.
func writeFakeShadow(t *testing.T, stateDir string, systemID uint64, pid int) int64 {
	t.Helper()
	dir := filepath.Join(stateDir, "shadow")
	if err := os.MkdirAll(filepath.Join(dir, "global"), 0o700); err != nil {
		t.Fatal(err)
	}
	marker := fmt.Sprintf(`{"version": 1, "start_lsn": "0/2000028", "end_lsn": "0/2000100", "wal_end": "0/3000000",
 "timeline": 1, "system_id": "%d", "wal_segment_size": 16777216, "server_version_num": 150018,
 "followed_db_oid": 5, "superuser": "postgres", "relocated_catalogs": [], "tablespaces": [], "stats": {}}`, systemID)
	files := map[string][]byte{
		shadow.CompleteMarker:           []byte(marker),
		"PG_VERSION":                    []byte("15\n"),
		filepath.Join("global", "1262"): bytes.Repeat([]byte{7}, 8192*3),
	}
	if pid != 0 {
		files["postmaster.pid"] = []byte(fmt.Sprintf("%d\n%s\n1700000000\n54329\n", pid, dir))
	}
	var total int64
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
		total += int64(len(b))
	}
	return total
}

func TestStatusReport(t *testing.T) {
	stateDir := t.TempDir()
	m := testManifest(t)
	if err := session.WriteManifest(stateDir, m); err != nil {
		t.Fatal(err)
	}
	size := writeFakeShadow(t, stateDir, m.SystemID, os.Getpid())
	chDir := filepath.Join(stateDir, "clickhouse")
	if err := os.MkdirAll(chDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(chDir, "written.json"), []byte(`{"format":1,"written_before":"0/5A3E000"}`), 0o600); err != nil {
		t.Fatal(err)
	}

	ledger, err := load.OpenLedger(chDir)
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now().Add(-90 * time.Second)
	for _, e := range []load.Entry{
		{Oid: 16384, Schema: "public", Table: "pgbench_accounts", Mode: load.ModeCopy, Phase: load.PhaseDone, Coverage: mustLSN(t, "0/3000027"),
			Rows: 200000, Bytes: 20 << 20, StartedAt: started, FinishedAt: started.Add(12 * time.Second), Attempt: 1},
		{Oid: 16390, Schema: "public", Table: "big", Mode: load.ModeBaseBackup, Phase: load.PhaseLoading, Attempt: 2, StartedAt: started,
			LastError: "reading the base backup: connection reset"},
		{Oid: 16395, Schema: "public", Table: "broken", Mode: load.ModeCopy, Phase: load.PhaseLoading, Attempt: 1, StartedAt: started,
			Reason: "failed at 0/5A3D000: inserting into `shop`.`public.broken`: cannot parse", FailedAt: mustLSN(t, "0/5A3D000")},
	} {
		if err := ledger.Put(e); err != nil {
			t.Fatal(err)
		}
	}

	store, err := clickhouse.OpenStore(chDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []*clickhouse.Agreed{
		{Oid: 16400, Schema: "public", Table: "archived", Left: true, Target: clickhouse.Target{Database: "shop", Table: "public.archived"}},
		{Oid: 16401, Schema: "public", Table: "followed", Target: clickhouse.Target{Database: "shop", Table: "public.followed"}},
	} {
		if err := store.Put(a); err != nil {
			t.Fatal(err)
		}
	}

	sp, err := spool.Open(filepath.Join(stateDir, "spool"), 1, 16<<20)
	if err != nil {
		t.Fatal(err)
	}
	if err := sp.Reset(mustLSN(t, "0/5000000")); err != nil {
		t.Fatal(err)
	}
	if err := sp.Append(mustLSN(t, "0/5000000"), make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	if _, err := sp.Sync(); err != nil {
		t.Fatal(err)
	}
	sp.Close()

	out, msg, code := runStatusCLI(t, "--state-dir", stateDir)
	if code != 0 {
		t.Fatalf("exit %d (%s):\n%s", code, msg, out)
	}
	line := func(format string, args ...any) *regexp.Regexp {
		return regexp.MustCompile("(?m)^" + fmt.Sprintf(format, args...) + "$")
	}
	for _, want := range []*regexp.Regexp{
		line(`manifest\s+updated [2-9] s ago \(.*\)`),
		line(`source identity\s+system 7445501238329857311, timeline 1, server_version_num 150018, WAL segments of 16\.0 MiB \(16777216 B\)`),
		line(`received\s+%s\s+updated [2-9] s ago`, m.Received),
		line(`filtered durable\s+%s\s+updated [2-9] s ago`, m.FilteredDurable),
		line(`shadow replay\s+%s\s+updated [2-9] s ago`, m.ShadowReplay),
		line(`delivered\s+%s\s+updated [2-9] s ago`, m.Delivered),
		line(`floor\s+%s\s+updated [2-9] s ago`, m.Floor),
		line(`restart\s+%s\s+updated [2-9] s ago`, m.Restart),
		line(`spooled \(durable\)\s+%s\s+from %s: 1 segment files, 1000 B`, mustLSN(t, "0/50003E8"), mustLSN(t, "0/5000000")),
		line(`clickhouse written\s+%s\s+updated \d+ s ago \(%s\)`, mustLSN(t, "0/5A3E000"), regexp.QuoteMeta(filepath.Join(chDir, "written.json"))),
		// 0x5A3F1C8 - 0x5A3F0B0, - 0x5A3E9E0 and - 0x5A3E000.
		line(`received → shadow replay\s+280 B`),
		line(`received → delivered\s+2\.0 KiB \(2024 B\)`),
		line(`received → clickhouse written\s+4\.4 KiB \(4552 B\)`),
		line(`bootstrap\s+complete: backup %s to %s, timeline 1, system 7445501238329857311`, mustLSN(t, "0/2000028"), mustLSN(t, "0/2000100")),
		line(`postmaster\s+running, pid %d`, os.Getpid()),
		line(`size on disk\s+24\.4 KiB \(%d B\)`, size),
		line(`INITIAL LOADS\s+1 of 3 done`),
		line(`FAILED\s+1 table\(s\) could not take a change: each is being reloaded .*`),
		line("public\\.broken\\s+state failed, reloading \\(copy, loading\\): failed at 0/5A3D000: inserting into `shop`\\.`public\\.broken`: cannot parse"),
		line("public\\.broken\\s+copy, loading: attempt 1, started .*; loaded again: failed at 0/5A3D000: .*"),
		line(`public\.pgbench_accounts\s+copy, done, rows tagged _lsn 0/03000027: 200000 rows, 20\.0 MiB \(20971520 B\) in 12 s`),
		line(`public\.big\s+base_backup, loading: attempt 2, started 1 min 3\d s ago; last error: reading the base backup: connection reset`),
		line(`NOT FOLLOWED\s+1 table\(s\) left the scope: .*`),
		line("public\\.archived\\s+`shop`\\.`public\\.archived` \\(oid 16400\\)"),
	} {
		if !want.MatchString(out) {
			t.Errorf("output lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "public.followed") {
		t.Errorf("a followed table listed as not followed:\n%s", out)
	}
	if strings.Contains(out, "SOURCE") || strings.Contains(out, "source →") {
		t.Errorf("source lines without a source DSN:\n%s", out)
	}
}

func TestStatusShadowNotRunning(t *testing.T) {
	stateDir := t.TempDir()
	m := testManifest(t)
	if err := session.WriteManifest(stateDir, m); err != nil {
		t.Fatal(err)
	}
	// The pid of a process that has exited.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	writeFakeShadow(t, stateDir, m.SystemID+1, cmd.Process.Pid)

	out, msg, code := runStatusCLI(t, "--state-dir", stateDir)
	if code != 0 {
		t.Fatalf("exit %d (%s):\n%s", code, msg, out)
	}
	for _, want := range []string{
		fmt.Sprintf("not running (stale postmaster.pid: no such process)"),
		fmt.Sprintf("WARNING: the manifest's system is %d", m.SystemID),
		"no " + filepath.Join(stateDir, "clickhouse", "written.json"),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	// No shadow directory at all.
	if err := os.RemoveAll(filepath.Join(stateDir, "shadow")); err != nil {
		t.Fatal(err)
	}
	out, _, code = runStatusCLI(t, "--state-dir", stateDir)
	if code != 0 || !regexp.MustCompile(`(?m)^bootstrap\s+not bootstrapped$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^postmaster\s+not running \(no postmaster.pid\)$`).MatchString(out) {
		t.Errorf("exit %d, output without a shadow directory:\n%s", code, out)
	}
}

func TestStatusNotStarted(t *testing.T) {
	stateDir := t.TempDir()
	out, msg, code := runStatusCLI(t, "--state-dir", stateDir)
	if code != exitFatal || !strings.Contains(msg, "not started yet") || !strings.Contains(msg, stateDir) {
		t.Fatalf("exit %d, message %q, output:\n%s", code, msg, out)
	}
	_, msg, code = runStatusCLI(t)
	if code != exitFatal || !strings.Contains(msg, "--state-dir") {
		t.Fatalf("no state directory: exit %d, message %q", code, msg)
	}
}

func TestStatusCorruptManifest(t *testing.T) {
	stateDir := t.TempDir()
	if err := session.WriteManifest(stateDir, testManifest(t)); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(stateDir, session.ManifestFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Another delivered position: the checksum no longer matches.
	delivered := testManifest(t).Delivered
	if !bytes.Contains(b, []byte(delivered.String())) {
		t.Fatalf("the manifest does not hold %s:\n%s", delivered, b)
	}
	b = bytes.Replace(b, []byte(delivered.String()), []byte((delivered + 8).String()), 1)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	out, msg, code := runStatusCLI(t, "--state-dir", stateDir)
	if code != exitFatal {
		t.Fatalf("exit %d, want %d:\n%s", code, exitFatal, out)
	}
	var me *statefile.Error
	_, rerr := session.ReadManifest(stateDir)
	if !errors.As(rerr, &me) {
		t.Fatalf("the test's manifest is not corrupt: %v", rerr)
	}
	if !strings.Contains(msg, me.Error()) || !strings.Contains(msg, "checksum") {
		t.Fatalf("message %q lacks the manifest error %q", msg, me.Error())
	}
	if out != "" {
		t.Errorf("a report printed for a corrupt manifest:\n%s", out)
	}
}

func TestByteSizeAndAgo(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB (1024 B)", 16 << 20: "16.0 MiB (16777216 B)", 3 << 40: "3.0 TiB (3298534883328 B)"} {
		if got := byteSize(n); got != want {
			t.Errorf("byteSize(%d) = %q, want %q", n, got, want)
		}
	}
	now := time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC)
	for d, want := range map[time.Duration]string{
		3 * time.Second:                 "3 s ago",
		125 * time.Second:               "2 min 5 s ago",
		4*time.Hour + 12*time.Minute:    "4 h 12 min ago",
		50 * time.Hour:                  "2 d 2 h ago",
		-90 * time.Second:               "1 min 30 s in the future (clock skew?)",
		1500 * time.Millisecond:         "1 s ago",
		-(1500 * time.Millisecond):      "1 s in the future (clock skew?)",
		time.Duration(0):                "0 s ago",
		59*time.Minute + 59*time.Second: "59 min 59 s ago",
	} {
		if got := ago(now, now.Add(-d)); got != want {
			t.Errorf("ago(%v) = %q, want %q", d, got, want)
		}
	}
	if got := lag(100, 300); got != "0 B (ahead by 200 B)" {
		t.Errorf("lag ahead = %q", got)
	}
}

// TestStatusFromPipelineConfig: `status <config>` takes the state directory
// from the config's walshadow resource, ${ENV} interpolated; flags win.
func TestStatusFromPipelineConfig(t *testing.T) {
	stateDir := t.TempDir()
	if err := session.WriteManifest(stateDir, testManifest(t)); err != nil {
		t.Fatal(err)
	}
	t.Setenv("WALSHADOW_STATE_DIR", stateDir)
	t.Setenv("PG_SOURCE_DSN", "")
	example := filepath.Join(examplesDir, "pg_to_clickhouse.yaml")
	out, msg, code := runStatusCLI(t, example)
	if code != 0 || !regexp.MustCompile(`(?m)^state directory\s+`+regexp.QuoteMeta(stateDir)+`$`).MatchString(out) {
		t.Fatalf("exit %d (%s):\n%s", code, msg, out)
	}
	if strings.Contains(out, "SOURCE") {
		t.Errorf("source lines with PG_SOURCE_DSN empty:\n%s", out)
	}
	// --state-dir wins over the config.
	empty := t.TempDir()
	if _, msg, code := runStatusCLI(t, "--state-dir", empty, example); code != exitFatal || !strings.Contains(msg, empty) {
		t.Errorf("--state-dir over a config: exit %d, %q", code, msg)
	}

	two := filepath.Join(t.TempDir(), "two.yaml")
	conf := `
walshadow:
  - label: a
    source_dsn: postgres://u:secretpw@db-a/app
    state_dir: /nonexistent/a
  - label: b
    source_dsn: postgres://u@db-b/app
    state_dir: ${WALSHADOW_STATE_DIR}
    slot: { name: slot_b }
input:
  pg_physical_wal: { session: b }
output:
  drop: {}
`
	if err := os.WriteFile(two, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, msg, code := runStatusCLI(t, two); code != exitFatal || !strings.Contains(msg, "--label") {
		t.Errorf("two resources without --label: exit %d, %q", code, msg)
	}
	ps, err := readPipelineSession(two, "b")
	if err != nil {
		t.Fatal(err)
	}
	if want := (pipelineSession{Label: "b", SourceDSN: "postgres://u@db-b/app", StateDir: stateDir, SlotName: "slot_b",
		SpoolRelease: "delivered", SpoolMaxBytes: 10 << 30}); ps != want {
		t.Errorf("resource b: %+v, want %+v", ps, want)
	}
	ps, err = readPipelineSession(two, "a")
	if err != nil || ps.SlotName != defaultSlotName || ps.StateDir != "/nonexistent/a" {
		t.Errorf("resource a: %+v, %v (want the default slot name)", ps, err)
	}
	if _, err := readPipelineSession(two, "c"); err == nil || !strings.Contains(err.Error(), `"c"`) {
		t.Errorf("an unknown label: %v", err)
	}
}

// TestStatusParkedAndRequests: a parked table is listed under FAILED with
// its position, reason and remedy; a reload request waiting for the
// output is listed; the reloads are counted by reason.
func TestStatusParkedAndRequests(t *testing.T) {
	stateDir := t.TempDir()
	if err := session.WriteManifest(stateDir, testManifest(t)); err != nil {
		t.Fatal(err)
	}
	chDir := filepath.Join(stateDir, "clickhouse")
	if err := os.MkdirAll(chDir, 0o700); err != nil {
		t.Fatal(err)
	}
	ledger, err := load.OpenLedger(chDir)
	if err != nil {
		t.Fatal(err)
	}
	since := time.Now().Add(-5 * time.Minute)
	for _, e := range []load.Entry{
		{Oid: 16395, Schema: "public", Table: "stuck", Mode: load.ModeCopy, Phase: load.PhaseLoading, Attempt: 2, Loads: 3, StartedAt: since,
			Reason: "failed at 0/5A3D000: value 100000 does not fit Int8", FailedAt: mustLSN(t, "0/5A3D000"),
			Streak: load.Streak{Failure: load.Failure{Signature: "value # does not fit Int8"}, Count: 2, Attempt: 2},
			Parked: &load.Parking{Since: since, Reason: `initial load of public.stuck, row 1: column "v": value 100000 does not fit Int8`, At: mustLSN(t, "0/5A3D000"),
				Count: 2, Remedy: "give the column a type that holds every value"}},
		{Oid: 16396, Schema: "public", Table: "healing", Mode: load.ModeCopy, Phase: load.PhaseLoading, Attempt: 1, StartedAt: since,
			Reason: "failed at 0/5A3E000: cannot parse", FailedAt: mustLSN(t, "0/5A3E000")},
		// A name with a tab and a line break stays on its own line, in
		// its own column.
		{Oid: 16397, Schema: "tab\tschema", Table: "nl\nname", Mode: load.ModeCopy, Phase: load.PhaseLoading, Attempt: 1, StartedAt: since,
			Reason: "failed at 0/5A3F000: column \"a\tb\" refused", FailedAt: mustLSN(t, "0/5A3F000")},
	} {
		if err := ledger.Put(e); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range []string{load.ReloadValueRefused, load.ReloadValueRefused, load.ReloadTypeChange} {
		if err := ledger.CountReload(r); err != nil {
			t.Fatal(err)
		}
	}
	out, msg, code := runCommand(t, reloadCommand(), "--state-dir", stateDir, "public.stuck")
	if code != 0 || !strings.Contains(out, "reload of public.stuck requested") || strings.Contains(out, "note:") {
		t.Fatalf("reload: exit %d (%s):\n%s", code, msg, out)
	}
	out, _, _ = runCommand(t, reloadCommand(), "--state-dir", stateDir, "public.nosuch")
	if !strings.Contains(out, "note: public.nosuch is not among the tables") {
		t.Errorf("a request for a table the output never wrote is not noted:\n%s", out)
	}
	if _, msg, code := runCommand(t, reloadCommand(), "--state-dir", stateDir, "orders"); code != exitFatal || !strings.Contains(msg, "schema.table") {
		t.Errorf("a table without its schema: exit %d, %q", code, msg)
	}

	out, msg, code = runStatusCLI(t, "--state-dir", stateDir)
	if code != 0 {
		t.Fatalf("exit %d (%s):\n%s", code, msg, out)
	}
	line := func(format string, args ...any) *regexp.Regexp {
		return regexp.MustCompile("(?m)^" + fmt.Sprintf(format, args...) + "$")
	}
	for _, want := range []*regexp.Regexp{
		line(`FAILED\s+3 table\(s\) could not take a change, 1 of them PARKED: .*walshadow reload .*`),
		line(`tab\\tschema\.nl\\nname\s+state failed, reloading \(copy, loading\): failed at 0/5A3F000: column \\"a\\tb\\" refused`),
		line(`public\.stuck\s+state failed, PARKED at 0/05A3D000 \(since 5 min \d s ago, the same failure 2 times, 3 loads of it\): initial load of public\.stuck, row 1: column "v": value 100000 does not fit Int8`),
		line(`\s+remedy: give the column a type that holds every value`),
		line(`public\.healing\s+state failed, reloading \(copy, loading\): failed at 0/5A3E000: cannot parse`),
		line(`RELOAD REQUESTED\s+2 table\(s\): .*`),
		line(`public\.stuck\s+requested [0-9] s ago \(.*\)`),
		line(`public\.stuck\s+copy, loading: attempt 2, started .*; 3 loads of it in all; PARKED \(see FAILED\); .*`),
		line(`RELOADS\s+3 of followed tables, by reason .*`),
		line(`value_refused\s+2`),
		line(`type_change\s+1`),
	} {
		if !want.MatchString(out) {
			t.Errorf("output lacks %s:\n%s", want, out)
		}
	}
}
