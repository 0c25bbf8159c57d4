package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/walshadow/walshadow/internal/session"
	"github.com/walshadow/walshadow/internal/testrig"
	"github.com/walshadow/walshadow/internal/wal"
)

// TestStatusSourceIntegration: with a source DSN, status shows the
// source's WAL position, the slot and the lags behind the source, and
// never the DSN's password.
func TestStatusSourceIntegration(t *testing.T) {
	src := testrig.StartPostgres(t)
	src.Exec(t, "SELECT pg_create_physical_replication_slot('walshadow', true)")
	var sysID int64
	if err := src.QueryRow(t, "SELECT system_identifier FROM pg_control_system()").Scan(&sysID); err != nil {
		t.Fatal(err)
	}
	slotRestart := src.QueryLSN(t, "SELECT restart_lsn FROM pg_replication_slots WHERE slot_name = 'walshadow'")
	start := src.CurrentLSN(t)

	stateDir := t.TempDir()
	m := testManifest(t)
	m.SystemID = uint64(sysID)
	m.Received, m.ShadowReplay, m.Delivered = start-0x300, start-0x800, start-0x1000
	m.Floor, m.Restart, m.FilteredDurable = start-0x1000, start-0x1000, start-0x1000
	if err := session.WriteManifest(stateDir, m); err != nil {
		t.Fatal(err)
	}
	const password = "hunter2-not-shown"
	dsn := fmt.Sprintf("postgres://postgres:%s@127.0.0.1:%d/postgres?sslmode=disable", password, src.Port())

	out, msg, code := runStatusCLI(t, "--state-dir", stateDir, "--source-dsn", dsn)
	if code != 0 {
		t.Fatalf("exit %d (%s):\n%s", code, msg, out)
	}
	if strings.Contains(out, password) {
		t.Fatalf("the password is printed:\n%s", out)
	}
	match := regexp.MustCompile(`(?m)^source WAL\s+(\S+)\s+now$`).FindStringSubmatch(out)
	if match == nil {
		t.Fatalf("no source WAL line:\n%s", out)
	}
	srcLSN := mustLSN(t, match[1])
	if srcLSN < start || srcLSN > src.CurrentLSN(t) {
		t.Fatalf("source WAL %s outside [%s, now]", srcLSN, start)
	}
	line := func(format string, args ...any) *regexp.Regexp {
		return regexp.MustCompile("(?m)^" + fmt.Sprintf(format, args...) + "$")
	}
	size := func(n wal.LSN) string { return regexp.QuoteMeta(byteSize(int64(n))) }
	for _, want := range []*regexp.Regexp{
		line(`SOURCE\s+host=127\.0\.0\.1:%d user=postgres database=postgres`, src.Port()),
		line(`source → received\s+%s`, size(srcLSN-m.Received)),
		line(`source → shadow replay\s+%s`, size(srcLSN-m.ShadowReplay)),
		line(`source → delivered\s+%s`, size(srcLSN-m.Delivered)),
		line(`WAL the slot retains\s+%s`, size(srcLSN-slotRestart)),
		line(`slot restart\s+%s\s+now`, slotRestart),
		line(`slot\s+walshadow: physical inactive, restart_lsn %s, wal_status reserved`, slotRestart),
		line(`system\s+%d, as in the manifest`, sysID),
		line(`current WAL\s+%s, primary`, srcLSN),
	} {
		if !want.MatchString(out) {
			t.Errorf("output lacks %s:\n%s", want, out)
		}
	}

	// A slot that does not exist, and a server that is not there.
	out, _, code = runStatusCLI(t, "--state-dir", stateDir, "--source-dsn", dsn, "--slot", "other_slot")
	if code != 0 || !strings.Contains(out, "other_slot: does not exist on the source") {
		t.Errorf("exit %d, missing slot:\n%s", code, out)
	}
	down := fmt.Sprintf("postgres://postgres:%s@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2", password)
	out, _, code = runStatusCLI(t, "--state-dir", stateDir, "--source-dsn", down)
	if code != 0 || !regexp.MustCompile(`(?m)^error\s+connecting: `).MatchString(out) || strings.Contains(out, password) {
		t.Errorf("exit %d, unreachable source:\n%s", code, out)
	}
	if !strings.Contains(out, "received → delivered") {
		t.Errorf("the state directory's report is missing when the source is unreachable:\n%s", out)
	}
}
