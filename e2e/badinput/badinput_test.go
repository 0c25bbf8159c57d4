// Package badinput_test runs the real walshadow binary against state it
// must refuse: a corrupt archive segment, a corrupt manifest, a descriptor
// log of another cluster, a misspelt config field. Each must stop the
// process by itself, with one error line that names the file and what to
// do, and without touching the broken file or rebuilding the shadow.
package badinput_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/shadow"
	"github.com/walshadow/walshadow/internal/testrig"
	"github.com/walshadow/walshadow/internal/wal"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testrig.RemoveWalshadowBuild()
	os.Exit(code)
}

const (
	slot = "walshadow_badinput"
	// exitWithin is how soon a run on broken state must end by itself.
	exitWithin = 60 * time.Second
)

// remedy matches the words of an error message that tell the user what to do.
var remedy = regexp.MustCompile(`remove|restore|fresh state_dir|point source_dsn|delete`)

// rig is one source with its ClickHouse and the tools to run walshadow
// against it.
type rig struct {
	src       *testrig.Postgres
	ch        *testrig.ClickHouse
	bin       string
	bridgeDir string
	database  string // the ClickHouse database the output writes
}

// config writes the reference pipeline for stateDir and returns its path.
func (r *rig) config(t *testing.T, stateDir string) string {
	t.Helper()
	yaml := testrig.Pipeline{
		Source: r.src, StateDir: stateDir, Slot: slot, ShadowPort: testrig.FreePort(t), BridgeDir: r.bridgeDir,
		LogLevel: "info", LogFormat: "logfmt",
		Output: testrig.ClickHouseOutput("clickhouse://default:@"+r.ch.NativeAddr()+"/default", r.database, ""),
	}.YAML()
	path := filepath.Join(t.TempDir(), "cfg.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// process is a running `walshadow run`.
type process struct {
	cmd  *exec.Cmd
	log  string // stdout and stderr
	done chan error
}

func start(t *testing.T, bin string, args ...string) *process {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "walshadow.log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, log: logPath, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

func (p *process) output(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(p.log)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// stop sends SIGTERM and waits for a clean exit.
func (p *process) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		if err != nil {
			t.Errorf("walshadow exited with %v after SIGTERM:\n%s", err, tail(p.output(t), 30))
		}
	case <-time.After(time.Minute):
		t.Fatalf("walshadow still running a minute after SIGTERM:\n%s", tail(p.output(t), 30))
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// runOnce runs the pipeline on a fresh state directory until the slot is
// active, rows arrived in ClickHouse and the archive holds at least
// segments complete segments, then stops it with SIGTERM and stops the
// shadow, so the directory can be copied.
func (r *rig) runOnce(t *testing.T, segments int) string {
	t.Helper()
	stateDir := testrig.NewStateDir(t, r.src)
	p := start(t, r.bin, "run", r.config(t, stateDir))
	exited := make(chan error, 1)
	go func() {
		// WaitSlotActive wants the run's end: forward it without taking it
		// from stop.
		err := <-p.done
		out, _ := os.ReadFile(p.log)
		exited <- fmt.Errorf("walshadow exited (%v):\n%s", err, tail(string(out), 40))
		p.done <- err
	}()
	testrig.WaitSlotActive(t, r.src, slot, exited)

	r.src.Exec(t, "CREATE TABLE bi_rows (id int PRIMARY KEY, v text)")
	r.src.Exec(t, "INSERT INTO bi_rows SELECT g, md5(g::text) FROM generate_series(1, 1000) g")
	r.waitRows(t, p, 1000)
	// WAL for complete archive segments (without pg_switch_wal, so the
	// newest complete segment is full of records).
	segSize := int64(r.src.WALSegmentSize())
	for i := 0; countSegments(t, filepath.Join(stateDir, "archive")) < segments; i++ {
		if i == 60 {
			t.Fatalf("fewer than %d archive segments after 60 rounds of WAL:\n%s", segments, tail(p.output(t), 30))
		}
		r.src.Exec(t, fmt.Sprintf("INSERT INTO bi_rows SELECT g, md5(g::text) FROM generate_series(%d, %d) g",
			1001+int64(i)*segSize/200, 1000+int64(i+1)*segSize/200))
		time.Sleep(500 * time.Millisecond)
	}
	p.stop(t)
	testrig.StopShadow(r.src, filepath.Join(stateDir, "shadow"))
	return stateDir
}

// waitRows waits until ClickHouse holds n rows of bi_rows.
func (r *rig) waitRows(t *testing.T, p *process, n int) {
	t.Helper()
	q := fmt.Sprintf("SELECT count() FROM %s.`public.bi_rows` FINAL", r.database)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		out, err := r.ch.Query(ctx, q)
		cancel()
		if got, _ := strconv.Atoi(strings.TrimSpace(out)); err == nil && got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d rows not in ClickHouse after 2 minutes (last: %q, %v):\n%s", n, out, err, tail(p.output(t), 30))
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// segmentFiles lists the complete WAL segment files of an archive, oldest first.
func segmentFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if n, ok := wal.ParseSegmentName(e.Name()); ok && !n.Partial && e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names
}

func countSegments(t *testing.T, dir string) int { return len(segmentFiles(t, dir)) }

// copyState copies a stopped state directory (owners and modes kept, the
// run/ sockets left out) into a new one the test cleans up.
func copyState(t *testing.T, src *testrig.Postgres, from string) string {
	t.Helper()
	to := testrig.NewStateDir(t, src)
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() == "run" {
			continue
		}
		if out, err := exec.Command("cp", "-a", filepath.Join(from, e.Name()), to+"/").CombinedOutput(); err != nil {
			t.Fatalf("copying %s: %v\n%s", e.Name(), err, out)
		}
	}
	return to
}

// snapshot is the content of a file, or of every file under a directory.
func snapshot(t *testing.T, path string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		files[p] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func sameSnapshot(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}

// shadowIdentity is the completion marker's file and content: a rebuilt
// shadow has a new one.
type shadowIdentity struct {
	info    os.FileInfo
	content []byte
}

func readShadowIdentity(t *testing.T, stateDir string) shadowIdentity {
	t.Helper()
	path := filepath.Join(stateDir, "shadow", shadow.CompleteMarker)
	info, err := os.Stat(path)
	if err != nil {
		t.Fatalf("the shadow is not bootstrapped: %v", err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return shadowIdentity{info, b}
}

// expectRefusal runs walshadow on the broken copy and checks the contract:
// a non-zero exit by itself within exitWithin, exactly one error line about
// broken (a path under stateDir), naming it and a remedy, broken unchanged
// and the shadow not rebuilt.
func (r *rig) expectRefusal(t *testing.T, stateDir, broken string) {
	t.Helper()
	before := snapshot(t, broken)
	shadowBefore := readShadowIdentity(t, stateDir)
	p := start(t, r.bin, "run", r.config(t, stateDir))
	began := time.Now()
	var err error
	select {
	case err = <-p.done:
	case <-time.After(exitWithin):
		// SIGQUIT: the Go runtime prints every goroutine's stack, which
		// shows where the start is stuck.
		p.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case err = <-p.done:
		case <-time.After(10 * time.Second):
			p.cmd.Process.Kill()
			err = <-p.done
		}
		t.Errorf("walshadow still running %v after start on broken %s: killed", exitWithin, broken)
		t.Logf("walshadow's output and goroutines:\n%s", p.output(t))
	}
	took := time.Since(began)
	out := p.output(t)
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		t.Errorf("walshadow exited 0 on broken %s", broken)
	case errors.As(err, &exitErr):
		t.Logf("walshadow exited with status %d after %v", exitErr.ExitCode(), took.Round(time.Millisecond))
	}

	needle := filepath.Base(broken)
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if l := sc.Text(); strings.Contains(l, "level=error") && strings.Contains(l, needle) {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		t.Errorf("%d error lines mention %s, want 1:\n%s", len(lines), needle, tail(strings.Join(lines, "\n"), 10))
	}
	if len(lines) > 0 {
		if l := lines[0]; !strings.Contains(l, broken) || !remedy.MatchString(l) {
			t.Errorf("the error line does not name %s and a remedy:\n%s", broken, l)
		}
	}
	if t.Failed() {
		t.Logf("walshadow output (tail):\n%s", tail(out, 40))
	}

	if !sameSnapshot(before, snapshot(t, broken)) {
		t.Errorf("%s was changed by the run", broken)
	}
	after := readShadowIdentity(t, stateDir)
	if !os.SameFile(shadowBefore.info, after.info) || !bytes.Equal(shadowBefore.content, after.content) {
		t.Error("the shadow was rebuilt")
	}
	if _, err := os.Stat(filepath.Join(stateDir, "shadow", shadow.IncompleteMarker)); err == nil {
		t.Error("a bootstrap was started in the shadow directory")
	}
}

// TestMisspeltConfigField: lint and run each report a misspelt field in one
// line naming the file, the line and the field, and exit non-zero.
func TestMisspeltConfigField(t *testing.T) {
	bin := testrig.BuildWalshadow(t)
	cases := map[string]struct{ yaml, field string }{
		"session field": {field: "source_dsnn", yaml: `http: { enabled: false }
logger: { level: info, format: logfmt }
walshadow:
  - label: main
    source_dsnn: postgres://walshadow@localhost/app
    state_dir: %s
input:
  pg_physical_wal:
    session: main
output:
  drop: {}
`},
		"output field": {field: "databse", yaml: `http: { enabled: false }
logger: { level: info, format: logfmt }
walshadow:
  - label: main
    source_dsn: postgres://walshadow@localhost/app
    state_dir: %s
input:
  pg_physical_wal:
    session: main
output:
  clickhouse_ddl:
    session: main
    dsn: clickhouse://default:@127.0.0.1:9/default
    databse: x
`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			stateDir := filepath.Join(dir, "state")
			cfg := filepath.Join(dir, "cfg.yaml")
			yaml := fmt.Sprintf(c.yaml, stateDir)
			if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			lineNo := 0
			for i, l := range strings.Split(yaml, "\n") {
				if strings.Contains(l, c.field+":") {
					lineNo = i + 1
				}
			}
			for _, cmd := range []string{"lint", "run"} {
				ctx, cancel := context.WithTimeout(context.Background(), exitWithin)
				out, err := exec.CommandContext(ctx, bin, cmd, cfg).CombinedOutput()
				timedOut := ctx.Err() != nil
				cancel()
				var exitErr *exec.ExitError
				if !errors.As(err, &exitErr) || exitErr.ExitCode() <= 0 || timedOut {
					t.Errorf("walshadow %s: %v, want a non-zero exit", cmd, err)
				}
				var lines []string
				for _, l := range strings.Split(string(out), "\n") {
					if strings.Contains(l, c.field) {
						lines = append(lines, l)
					}
				}
				if len(lines) != 1 || !strings.Contains(lines[0], fmt.Sprintf("%s(%d,", cfg, lineNo)) {
					t.Errorf("walshadow %s: want one line naming %s line %d and %s; output:\n%s", cmd, cfg, lineNo, c.field, out)
				}
				if _, err := os.Stat(stateDir); err == nil {
					t.Errorf("walshadow %s created the state directory", cmd)
				}
			}
		})
	}
}
