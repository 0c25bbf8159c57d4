package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
