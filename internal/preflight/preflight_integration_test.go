package preflight

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/testrig"
)

// want asserts r has a finding of check with severity sev whose detail
// contains every one of parts.
func want(t *testing.T, r Report, check string, sev Severity, parts ...string) {
	t.Helper()
	for _, f := range r.Find(check) {
		if f.Severity != sev {
			continue
		}
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(f.Detail, p)
		}
		if ok {
			return
		}
	}
	t.Errorf("no %s %s finding containing %q in:\n%s", sev, check, parts, r)
}

func TestSourceReportsEveryProblemAtOnce(t *testing.T) {
	pg := testrig.StartPostgres(t, testrig.WithSetting("wal_level", "minimal"), testrig.WithSetting("max_wal_senders", "0"))
	pg.Exec(t, `CREATE ROLE app LOGIN;
CREATE TABLE public.nothing_t (id int PRIMARY KEY);
ALTER TABLE public.nothing_t REPLICA IDENTITY NOTHING;
CREATE TABLE public.nokey_t (a int);
CREATE TABLE public.keyed_t (id int PRIMARY KEY);
CREATE TABLE public.full_t (a int);
ALTER TABLE public.full_t REPLICA IDENTITY FULL;
CREATE TABLE public.skipped_t (a int);
GRANT SELECT ON ALL TABLES IN SCHEMA public TO app`)
	dsn := fmt.Sprintf("postgres://app@127.0.0.1:%d/postgres?sslmode=disable", pg.Port())

	r := Source(context.Background(), SourceParams{
		DSN: dsn, Slot: "walshadow", CreateSlot: true,
		ShadowBinDir: pg.BinDir(), ShadowOSUser: defaultShadowOSUser,
		Exclude: []string{"public.skipped_*"},
	})
	t.Logf("report:\n%s", r)
	want(t, r, "wal_level", Error, "wal_level is minimal")
	want(t, r, "max_wal_senders", Error, "max_wal_senders is 0")
	want(t, r, "replication_role", Error, `role "app" has neither REPLICATION nor SUPERUSER`)
	want(t, r, "replication_connection", Error, "cannot open a replication connection")
	want(t, r, "replica_identity", Info, "1 table with REPLICA IDENTITY NOTHING: public.nothing_t;", "physical identity")
	want(t, r, "replica_identity", Info, "1 table with no primary key (REPLICA IDENTITY DEFAULT): public.nokey_t;")
	want(t, r, "replica_identity", Info, "1 table with REPLICA IDENTITY FULL", "public.full_t")
	want(t, r, "replica_identity", Info, "4 tables", "1 keyed")
	want(t, r, "shadow_major", Info, "PostgreSQL 15")
	if strings.Contains(r.String(), "skipped_t") {
		t.Errorf("excluded table reported:\n%s", r)
	}
	err := r.Err()
	if err == nil {
		t.Fatal("Err is nil")
	}
	for _, line := range []string{"wal_level is minimal", "max_wal_senders is 0", "neither REPLICATION"} {
		if !strings.Contains(err.Error(), line) {
			t.Errorf("Err lacks %q:\n%s", line, err)
		}
	}
}

func TestSourceGood(t *testing.T) {
	pg := testrig.StartPostgres(t)
	pg.Exec(t, `CREATE TABLE public.orders (id bigint PRIMARY KEY, note text);
SELECT pg_create_physical_replication_slot('busy', true)`)
	state, err := os.MkdirTemp("", "walshadow-preflight-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(state) })
	os.Chmod(state, 0o755)
	good := SourceParams{
		DSN: pg.DSN(), Slot: "walshadow", CreateSlot: true,
		ShadowBinDir: pg.BinDir(), ShadowOSUser: defaultShadowOSUser, StateDir: state,
	}
	ctx := context.Background()

	t.Run("good", func(t *testing.T) {
		r := Source(ctx, good)
		t.Logf("report:\n%s", r)
		if err := r.Err(); err != nil {
			t.Fatal(err)
		}
		want(t, r, "slot", Info, `slot "walshadow" does not exist; walshadow will create it`)
		want(t, r, "replication_connection", Info, "IDENTIFY_SYSTEM: system")
		want(t, r, "replica_identity", Info, "1 table of database \"postgres\" in scope, 1 keyed")
	})
	t.Run("wrong shadow bin dir", func(t *testing.T) {
		p := good
		p.ShadowBinDir = "/nonexistent/postgresql/bin"
		r := Source(ctx, p)
		want(t, r, "shadow_bin_dir", Error, "/nonexistent/postgresql/bin", "does not exist")
		if n := r.Count(Error); n != 1 {
			t.Fatalf("%d errors, want only the bin dir's:\n%s", n, r)
		}
	})
	t.Run("missing bridge module", func(t *testing.T) {
		p := good
		p.BridgeLibDir = t.TempDir()
		r := Source(ctx, p)
		want(t, r, "bridge_module", Error, p.BridgeLibDir+"/walshadow.so", "does not exist")
		if n := r.Count(Error); n != 1 {
			t.Fatalf("%d errors, want only the bridge's:\n%s", n, r)
		}
	})
	t.Run("slot problems", func(t *testing.T) {
		p := good
		p.CreateSlot = false
		want(t, Source(ctx, p), "slot", Error, `slot "walshadow" does not exist and slot.create is false`)
		p.Slot = ""
		want(t, Source(ctx, p), "slot", Warning, "no replication slot", "wal_keep_size")
		holdSlot(t, pg, "busy")
		p.Slot = "busy"
		want(t, Source(ctx, p), "slot", Error, `slot "busy" is in use by pid`)
	})
	t.Run("unreachable", func(t *testing.T) {
		p := good
		p.DSN = fmt.Sprintf("postgres://u:s3cret-pw@127.0.0.1:%d/app?sslmode=disable&connect_timeout=5", freePort(t))
		r := Source(ctx, p)
		want(t, r, "source", Error, "cannot connect", "skipped the checks that need it: server_version, wal_level")
		if strings.Contains(r.String(), "s3cret-pw") {
			t.Fatalf("password in report:\n%s", r)
		}
		if n := len(r.Find("source")); n != 1 || r.Count(Error) != 1 {
			t.Errorf("want the connection failure as the one Error:\n%s", r)
		}
		for _, check := range []string{"wal_level", "slot", "replica_identity", "replication_connection"} {
			if len(r.Find(check)) != 0 {
				t.Errorf("%s checked without a connection:\n%s", check, r)
			}
		}
		want(t, r, "shadow_major", Warning, "not compared")
	})
}

// holdSlot keeps slot active with pg_receivewal streaming from it until
// the test ends.
func holdSlot(t *testing.T, pg *testrig.Postgres, slot string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(pg.BinDir(), "pg_receivewal"), "-D", t.TempDir(), "--slot", slot, "--no-loop", "-d", pg.DSN())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if pg.QueryString(t, "SELECT active::text FROM pg_replication_slots WHERE slot_name = $1", slot) == "true" {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("slot %s never became active; pg_receivewal: %s", slot, stderr.String())
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

func TestClickHouse(t *testing.T) {
	ch := testrig.StartClickHouse(t)
	ctx := context.Background()
	r := ClickHouse(ctx, clickhouse.ConnConfig{DSN: "clickhouse://default:@" + ch.NativeAddr() + "/default"}, "preflight_db")
	t.Logf("report:\n%s", r)
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	want(t, r, "clickhouse_version", Info, "ClickHouse 18.16.1: legacy dialect", "no RENAME COLUMN", "no DateTime64")
	want(t, r, "clickhouse_database", Info, "`preflight_db` did not exist; preflight created it")
	want(t, r, "clickhouse_write", Info, "created, wrote and dropped")
	if got := ch.HTTPQuery(t, "SELECT count() FROM system.tables WHERE database = 'preflight_db'"); strings.TrimSpace(got) != "0" {
		t.Fatalf("scratch table left behind: %s tables", got)
	}
	// The database exists now; a scratch table a killed check left is
	// dropped (any age counts as stale here).
	ch.HTTPQuery(t, "CREATE TABLE preflight_db._walshadow_preflight_dead (x UInt8) ENGINE = Memory")
	defer func(age time.Duration) { staleScratchAge = age }(staleScratchAge)
	staleScratchAge = 0
	time.Sleep(1100 * time.Millisecond)
	r = ClickHouse(ctx, clickhouse.ConnConfig{DSN: "clickhouse://default:@" + ch.NativeAddr() + "/preflight_db"}, "")
	want(t, r, "clickhouse_database", Info, "`preflight_db` exists")
	want(t, r, "clickhouse_write", Info, "dropped `preflight_db`.`_walshadow_preflight_dead`, left by an earlier check")
	if got := ch.HTTPQuery(t, "SELECT count() FROM system.tables WHERE database = 'preflight_db'"); strings.TrimSpace(got) != "0" {
		t.Fatalf("stale scratch table not dropped: %s tables", got)
	}

	t.Run("unreachable", func(t *testing.T) {
		r := ClickHouse(ctx, clickhouse.ConnConfig{DSN: fmt.Sprintf("clickhouse://writer:s3cret-pw@127.0.0.1:%d/default", freePort(t)), DialTimeout: 5 * time.Second}, "")
		if len(r) != 1 || r[0].Severity != Error || r[0].Check != "clickhouse" {
			t.Fatalf("want one clickhouse Error:\n%s", r)
		}
		if strings.Contains(r.String(), "s3cret-pw") || !strings.Contains(r[0].Detail, "127.0.0.1") {
			t.Fatalf("detail %q", r[0].Detail)
		}
	})
}
