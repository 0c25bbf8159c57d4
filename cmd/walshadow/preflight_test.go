package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walshadow/walshadow/internal/testrig"
)

// runPreflightCLI runs `preflight <args>` as the CLI would and returns
// stdout (with the exit error's message) and the exit code.
func runPreflightCLI(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, msg, code := runCommand(t, preflightCommand(), args...)
	return out + msg, code
}

func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestInterpolateEnvLikeBenthos(t *testing.T) {
	t.Setenv("PF_SET", "value")
	t.Setenv("PF_EMPTY", "")
	t.Setenv("PF_B64", "aGVsbG8=")
	got, err := interpolateEnv([]byte("a: ${PF_SET}\nb: ${PF_EMPTY:dflt}\nc: ${PF_UNSET_X:x:y}\nd: ${PF_B64|base64decode}\ne: ${{PF_SET}}\nf: ${PF_EMPTY}"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "a: value\nb: dflt\nc: x:y\nd: hello\ne: ${PF_SET}\nf: "; string(got) != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if _, err := interpolateEnv([]byte("a: ${PF_UNSET_1}\nb: ${PF_UNSET_2}")); err == nil || !strings.Contains(err.Error(), "PF_UNSET_1, PF_UNSET_2") {
		t.Fatalf("missing variables: %v", err)
	}
}

const preflightYAML = `
walshadow:
  - label: main
    source_dsn: ${PF_SOURCE_DSN}
    state_dir: ${PF_STATE_DIR}
    shadow:
      bin_dir: ${PF_BIN_DIR:/usr/lib/postgresql/15/bin}
input:
  pg_physical_wal:
    session: main
pipeline:
  processors:
    - walshadow_decode:
        session: main
output:
  clickhouse_ddl:
    session: main
    dsn: clickhouse://default:@${PF_CH_ADDR}/default
    database: preflight_cli
    include: [public.*]
`

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

func TestPreflightCommandConfigErrors(t *testing.T) {
	t.Setenv("PF_SOURCE_DSN", "") // restored after the test
	os.Unsetenv("PF_SOURCE_DSN")
	out, code := runPreflightCLI(t, writeConfig(t, preflightYAML))
	if code != exitPreflight || !strings.Contains(out, "PF_SOURCE_DSN") {
		t.Fatalf("unset variable: exit %d: %s", code, out)
	}
	out, code = runPreflightCLI(t, writeConfig(t, "input:\n  stdin: {}\noutput:\n  drop: {}\n"))
	if code != exitPreflight || !strings.Contains(out, "no walshadow resource") {
		t.Fatalf("no resource: exit %d: %s", code, out)
	}
	// A resource failing its own validation is a finding, and the rest
	// still runs.
	out, code = runPreflightCLI(t, writeConfig(t, `
walshadow:
  - label: main
    source_dsn: postgres://u@127.0.0.1:1/app
    state_dir: ""
`))
	if code != exitPreflight || !strings.Contains(out, "✗ config") || !strings.Contains(out, "state_dir: empty") ||
		!strings.Contains(out, "no clickhouse_ddl output") {
		t.Fatalf("invalid resource: exit %d: %s", code, out)
	}
}
