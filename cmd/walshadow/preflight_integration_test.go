package main

import (
	"os"
	"strings"
	"testing"

	"github.com/walshadow/walshadow/internal/testrig"
)

func TestPreflightCommand(t *testing.T) {
	pg := testrig.StartPostgres(t)
	pg.Exec(t, "CREATE TABLE public.orders (id bigint PRIMARY KEY); CREATE TABLE public.events (at timestamptz)")
	ch := testrig.StartClickHouse(t)
	// Not t.TempDir: its parent is owner-only, closed to the shadow's user.
	state, err := os.MkdirTemp("", "walshadow-preflight-cli-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(state) })
	os.Chmod(state, 0o755)
	t.Setenv("PF_SOURCE_DSN", pg.DSN())
	t.Setenv("PF_STATE_DIR", state)
	t.Setenv("PF_CH_ADDR", ch.NativeAddr())
	config := writeConfig(t, preflightYAML)

	out, code := runPreflightCLI(t, config)
	t.Logf("output:\n%s", out)
	if code != 0 {
		t.Fatalf("good config: exit %d", code)
	}
	for _, want := range []string{
		"✓ wal_level", `✓ slot                    slot "walshadow" does not exist; walshadow will create it`,
		"1 table with no primary key (REPLICA IDENTITY DEFAULT): public.events", // include public.* applied
		"✓ clickhouse_write", "database `preflight_cli`", "preflight: 0 errors, 0 warnings",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}

	t.Setenv("PF_BIN_DIR", "/nonexistent/pg/bin")
	out, code = runPreflightCLI(t, config)
	if code != exitPreflight || !strings.Contains(out, "✗ shadow_bin_dir") || !strings.Contains(out, "/nonexistent/pg/bin does not exist") ||
		!strings.HasSuffix(out, "preflight: 1 error, 0 warnings") {
		t.Fatalf("bad bin_dir: exit %d\n%s", code, out)
	}
}
