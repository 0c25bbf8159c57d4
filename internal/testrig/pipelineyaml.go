package testrig

import (
	"fmt"
	"strings"
)

// Pipeline describes the test pipeline every package runs: a walshadow
// session on Source, the pg_physical_wal input and walshadow_decode, then
// Output.
type Pipeline struct {
	Source     *Postgres
	StateDir   string
	Slot       string
	ShadowPort int
	// BridgeDir is the pgext build (BuildPgext); "" runs without the bridge.
	BridgeDir string
	// LogLevel defaults to ${WALSHADOW_TEST_LOG_LEVEL:warn}; LogFormat to
	// benthos' default.
	LogLevel, LogFormat string
	// Session holds extra fields of the walshadow resource, one per line
	// ("transaction_buffer_bytes: 1048576").
	Session string
	// Output is the output's YAML (the part under `output:`); "" drops
	// every message.
	Output string
	// DecodeMessages is walshadow_decode's messages: "" is batch into a
	// clickhouse_ddl output (what the reference pipeline does), else row.
	DecodeMessages string
}

// YAML renders the pipeline config.
func (p Pipeline) YAML() string {
	level := p.LogLevel
	if level == "" {
		level = "${WALSHADOW_TEST_LOG_LEVEL:warn}"
	}
	logger := "level: " + level
	if p.LogFormat != "" {
		logger += ", format: " + p.LogFormat
	}
	output := p.Output
	if strings.TrimSpace(output) == "" {
		output = "drop: {}"
	}
	messages := p.DecodeMessages
	if messages == "" {
		messages = "row"
		if strings.HasPrefix(strings.TrimSpace(output), "clickhouse_ddl:") {
			messages = "batch"
		}
	}
	return fmt.Sprintf(`
http: { enabled: false }
logger: { %s }
walshadow:
  - label: main
    source_dsn: %q
    state_dir: %q
    slot: { name: %s }
    shadow: { bin_dir: %q, os_user: %q, port: %d, bridge_library_dir: %q }
    status_interval: 1s
%s
input:
  pg_physical_wal:
    session: main
pipeline:
  threads: 1
  processors:
    - walshadow_decode:
        session: main
        messages: %s
output:
%s
`, logger, p.Source.DSN(), p.StateDir, p.Slot, p.Source.BinDir(), ServerOSUser(), p.ShadowPort, p.BridgeDir,
		Indent(p.Session, "    "), messages, Indent(output, "  "))
}

// ClickHouseOutput is a clickhouse_ddl output's YAML for a Pipeline:
// session main, dsn, database, then extra (its own fields, one per line).
func ClickHouseOutput(dsn, database, extra string) string {
	return fmt.Sprintf("clickhouse_ddl:\n  session: main\n  dsn: %q\n  database: %s\n%s", dsn, database, Indent(extra, "  "))
}

// Indent prefixes every non-empty line of s; blank s gives "".
func Indent(s, prefix string) string {
	if strings.TrimSpace(s) == "" {
		return ""
	}
	lines := strings.Split(strings.Trim(s, "\n"), "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "\n")
}
