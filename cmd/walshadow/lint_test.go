package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/redpanda-data/benthos/v4/public/service"
)

// lint runs `walshadow lint` in-process on yaml and returns its exit code.
func lint(t *testing.T, yaml string, env ...string) int {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(env); i += 2 {
		t.Setenv(env[i], env[i+1])
	}
	opts := append(cliOptions(), service.CLIOptSetArgs("walshadow", "lint", path))
	code, err := service.RunCLIToCode(context.Background(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return code
}

const sessionYAML = `
walshadow:
  - label: main
    source_dsn: ${PG_SOURCE_DSN}
    state_dir: ${WALSHADOW_STATE_DIR:./var/walshadow}
input:
  pg_physical_wal:
    session: main
output:
  drop: {}
`

func TestLintSessionConfig(t *testing.T) {
	if code := lint(t, sessionYAML, "PG_SOURCE_DSN", "postgres://u@localhost/app"); code != 0 {
		t.Fatalf("valid config: exit %d", code)
	}
	os.Unsetenv("PG_SOURCE_DSN")
	if code := lint(t, sessionYAML); code == 0 {
		t.Fatal("missing PG_SOURCE_DSN passed lint")
	}
	noStateDir := `
walshadow:
  - label: main
    source_dsn: postgres://u@localhost/app
input:
  pg_physical_wal:
    session: main
output:
  drop: {}
`
	if code := lint(t, noStateDir); code == 0 {
		t.Fatal("missing state_dir passed lint")
	}
	emptyDSN := `
walshadow:
  - label: main
    source_dsn: ""
    state_dir: /tmp/x
input:
  pg_physical_wal:
    session: main
output:
  drop: {}
`
	if code := lint(t, emptyDSN); code == 0 {
		t.Fatal("empty source_dsn passed lint")
	}
	typo := `
walshadow:
  - label: main
    source_dsn: postgres://u@localhost/app
    state_dir: /tmp/x
    hold_timout: 5s
input:
  pg_physical_wal:
    session: main
output:
  drop: {}
`
	if code := lint(t, typo); code == 0 {
		t.Fatal("misspelt field passed lint")
	}
}

// TestExamplePipelinesLint lints every pipeline shipped under resources/.
func TestExamplePipelinesLint(t *testing.T) {
	files, err := filepath.Glob("../../resources/pipelines/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example pipelines found: %v", err)
	}
	t.Setenv("PG_SOURCE_DSN", "postgres://walshadow@localhost/app")
	t.Setenv("CLICKHOUSE_DSN", "clickhouse://default:@localhost:9000/default")
	for _, f := range files {
		opts := append(cliOptions(), service.CLIOptSetArgs("walshadow", "lint", f))
		if code, err := service.RunCLIToCode(context.Background(), opts...); err != nil || code != 0 {
			t.Errorf("%s: lint exit %d (%v)", f, code, err)
		}
	}
}

// TestLintClickHouseOutput: the output's required DSN and its enums are
// checked by lint, before anything connects.
func TestLintClickHouseOutput(t *testing.T) {
	base := `
walshadow:
  - label: main
    source_dsn: postgres://u@localhost/app
    state_dir: ./var/walshadow
input:
  pg_physical_wal:
    session: main
pipeline:
  processors:
    - walshadow_decode: { session: main }
output:
  clickhouse_ddl:
    session: main
`
	if code := lint(t, base+"    dsn: clickhouse://default:@localhost:9000/default\n"); code != 0 {
		t.Fatalf("valid config: exit %d", code)
	}
	if code := lint(t, base); code == 0 {
		t.Fatal("a clickhouse_ddl output without dsn passed lint")
	}
	if code := lint(t, base+"    dsn: clickhouse://localhost:9000\n    drop_strategy: explode\n"); code == 0 {
		t.Fatal("an unknown drop_strategy passed lint")
	}
	if code := lint(t, base+"    dsn: clickhouse://localhost:9000\n    tables:\n      public.t: { drop_strategy: sometimes }\n"); code == 0 {
		t.Fatal("an unknown per-table drop_strategy passed lint")
	}
}
