package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/urfave/cli/v2"
)

const fixtureWAL = "../../internal/wal/testdata/pg15/wal"

// runWAL runs `wal <args>` as the CLI would and returns stdout and the exit code.
func runWAL(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, _, code := runCommand(t, walCommand(), args...)
	return out, code
}

// runCommand runs one of walshadow's own subcommands as the CLI would and
// returns its stdout, the error it exited with and the exit code.
func runCommand(t *testing.T, cmd *cli.Command, args ...string) (out, msg string, code int) {
	t.Helper()
	var stdout bytes.Buffer
	app := &cli.App{
		Name:           "walshadow",
		Writer:         &stdout,
		ErrWriter:      &bytes.Buffer{},
		Commands:       []*cli.Command{cmd},
		ExitErrHandler: func(*cli.Context, error) {},
	}
	err := app.Run(append([]string{"walshadow", cmd.Name}, args...))
	var ec cli.ExitCoder
	switch {
	case err == nil:
		return stdout.String(), "", 0
	case errors.As(err, &ec):
		return stdout.String(), err.Error(), ec.ExitCode()
	}
	t.Fatalf("%s %v: %v", cmd.Name, args, err)
	return "", "", -1
}

func TestWALStatsFixture(t *testing.T) {
	out, code := runWAL(t, "stats", fixtureWAL)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	var rep struct {
		Records     uint64 `json:"records"`
		TotalBytes  uint64 `json:"total_bytes"`
		FPIBytes    uint64 `json:"fpi_bytes"`
		CRCFailures uint64 `json:"crc_failures"`
		Stop        struct{ Reason string }
		Rmgrs       []struct {
			Name  string
			Count uint64
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	// pg_waldump --stats=record over the same files (testdata/pg15/waldump_stats_record.txt).
	if rep.Records != 3445 || rep.TotalBytes != 1010677 || rep.FPIBytes != 577327 || rep.CRCFailures != 0 || rep.Stop.Reason != "end_of_wal" {
		t.Fatalf("report %+v", rep)
	}
}

func TestWALStatsCRCFailureExitCode(t *testing.T) {
	dir := t.TempDir()
	files, _ := filepath.Glob(fixtureWAL + "/0000*")
	for i, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			b[100_000] ^= 0xFF // inside some record of the first segment
		}
		os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o600)
	}
	out, code := runWAL(t, "stats", dir)
	if code != exitCRCFailures {
		t.Fatalf("exit %d, want %d", code, exitCRCFailures)
	}
	if !bytes.Contains([]byte(out), []byte(`"crc_failures": 1,`)) {
		t.Fatalf("no report printed: %s", out)
	}
}

func TestWALStatsBadArguments(t *testing.T) {
	if _, code := runWAL(t, "stats"); code != exitFatal {
		t.Fatalf("no arguments: exit %d", code)
	}
	if _, code := runWAL(t, "stats", "--start", "nope", fixtureWAL); code != exitFatal {
		t.Fatalf("bad LSN: exit %d", code)
	}
	if _, code := runWAL(t, "stats", t.TempDir()); code != exitFatal {
		t.Fatalf("empty directory: exit %d", code)
	}
}
