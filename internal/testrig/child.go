package testrig

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
)

// Environment of a child pipeline process (see RunChildIfRequested).
const (
	// ChildConfigEnv names the pipeline YAML a child process runs.
	ChildConfigEnv = "WALSHADOW_CHILD_CONFIG"
	// DrillKillAtEnv, "point:N", makes a child SIGKILL itself at the N-th
	// call of a kill hook (see ChildKillHook), e.g. "capture:2".
	DrillKillAtEnv = "WALSHADOW_DRILL_KILL_AT"
)

// DrillKillMessage starts the line a child writes to its log just before a
// kill hook SIGKILLs it, so a test can tell a hook kill from a crash.
const DrillKillMessage = "walshadow drill: SIGKILL at"

// RunChildIfRequested is for TestMain: when ChildConfigEnv names a pipeline
// YAML, it runs that pipeline in this process (built from
// service.GlobalEnvironment with its full config schema, so the test
// package must import the plugins the config names) until it stops or the
// process is killed, then exits: 0 when the stream ended cleanly, 1 with
// the error on stderr otherwise. Without the variable it returns at once.
func RunChildIfRequested() {
	path := os.Getenv(ChildConfigEnv)
	if path == "" {
		return
	}
	if err := runChildPipeline(path); err != nil {
		fmt.Fprintf(os.Stderr, "child pipeline %s: %v\n", path, err)
		os.Exit(1)
	}
	os.Exit(0)
}

func runChildPipeline(path string) error {
	yaml, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	b := service.NewStreamBuilder()
	// The default schema knows no custom resources (the walshadow
	// session is one).
	b.SetSchema(service.GlobalEnvironment().FullConfigSchema("", ""))
	if err := b.SetYAML(string(yaml)); err != nil {
		return fmt.Errorf("parsing the config: %w", err)
	}
	stream, err := b.Build()
	if err != nil {
		return fmt.Errorf("building the stream: %w", err)
	}
	return stream.Run(context.Background())
}

// ChildKillHook returns a hook that SIGKILLs this process at its N-th
// call when DrillKillAtEnv is "point:N", else nil (no hook). Before the
// kill it writes DrillKillMessage and the point to stderr. A malformed
// DrillKillAtEnv ends the process with status 2: a drill must not run
// with a kill point it silently ignores. TestMain assigns the result to
// the session's hook of that point.
func ChildKillHook(point string) func() {
	spec := os.Getenv(DrillKillAtEnv)
	if spec == "" {
		return nil
	}
	name, count, ok := strings.Cut(spec, ":")
	n, err := strconv.Atoi(count)
	if !ok || err != nil || n < 1 || name == "" {
		fmt.Fprintf(os.Stderr, "%s=%q: want point:N with N >= 1, e.g. capture:2\n", DrillKillAtEnv, spec)
		os.Exit(2)
	}
	if name != point {
		return nil
	}
	var calls atomic.Int64
	return func() {
		if calls.Add(1) != int64(n) {
			return
		}
		fmt.Fprintf(os.Stderr, "%s %s\n", DrillKillMessage, spec)
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		// SIGKILL is not delivered synchronously: keep this goroutine from
		// going on past the kill point meanwhile.
		select {}
	}
}

// Child is one run of a pipeline in a child process: the test binary
// itself, re-executed with ChildConfigEnv set (its TestMain calls
// RunChildIfRequested).
type Child struct {
	// LogPath is the child's stdout and stderr.
	LogPath string
	// Run is the run number the log file is named after.
	Run     int
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
}

// StartChild starts the pipeline yamlPath in a child process whose output
// goes to dir/run-NN.log; extraEnv ("KEY=value") is added to its
// environment. A child still running when the test ends is killed.
func StartChild(t testing.TB, dir, yamlPath string, run int, extraEnv ...string) *Child {
	t.Helper()
	logPath := filepath.Join(dir, fmt.Sprintf("run-%02d.log", run))
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatalf("creating the child's log: %v", err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), ChildConfigEnv+"="+yamlPath), extraEnv...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("starting child run %d: %v", run, err)
	}
	c := &Child{LogPath: logPath, Run: run, cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		c.waitErr = cmd.Wait()
		logFile.Close()
	}()
	t.Cleanup(c.Kill)
	return c
}

// Pid is the child's process id.
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// Kill SIGKILLs the child (if it still runs) and waits until it is reaped.
func (c *Child) Kill() {
	select {
	case <-c.done:
		return
	default:
	}
	c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
}

// DumpGoroutines makes a running child write every goroutine's stack to
// its log and exit (SIGQUIT, the Go runtime's dump), for a test that found
// it stalled; it waits up to timeout for the exit and reports whether the
// child had still been running.
func (c *Child) DumpGoroutines(timeout time.Duration) bool {
	if c.Exited() {
		return false
	}
	c.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-c.done:
	case <-time.After(timeout):
		c.Kill()
	}
	return true
}

// Done is closed once the child has exited and been reaped.
func (c *Child) Done() <-chan struct{} { return c.done }

// Exited reports whether the child has exited.
func (c *Child) Exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Wait waits for the child to exit and returns its exit error (nil for
// status 0).
func (c *Child) Wait() error {
	<-c.done
	return c.waitErr
}

// KilledBySignal reports whether the exited child died of SIGKILL (from
// Kill or from a kill hook).
func (c *Child) KilledBySignal() bool {
	if !c.Exited() || c.cmd.ProcessState == nil {
		return false
	}
	ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// Log is the child's output so far.
func (c *Child) Log() string {
	b, err := os.ReadFile(c.LogPath)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", c.LogPath, err)
	}
	return string(b)
}

// LogTail is the last n lines of the child's output.
func (c *Child) LogTail(n int) string { return lastLines(c.Log(), n) }

// WaitLog waits until the child's output holds substr and reports whether
// it did within timeout; it returns false at once when the child exits
// without writing it.
func (c *Child) WaitLog(t testing.TB, substr string, timeout time.Duration) bool {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if strings.Contains(c.Log(), substr) {
			return true
		}
		if c.Exited() {
			// It may have written the line just before exiting.
			return strings.Contains(c.Log(), substr)
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ChildRuns is one pipeline config in a work directory and the child runs
// of it, numbered from 0, their logs beside it. When the test fails the
// work directory is kept and the last run's log tail is logged.
type ChildRuns struct {
	WorkDir string // pipeline.yaml and the run logs
	Config  string // the pipeline config's path
	Runs    []*Child
}

// NewChildRuns writes yaml as pipeline.yaml in a new work directory named
// after prefix.
func NewChildRuns(t testing.TB, prefix, yaml string) *ChildRuns {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	r := &ChildRuns{WorkDir: dir, Config: filepath.Join(dir, "pipeline.yaml")}
	t.Cleanup(func() {
		if !t.Failed() {
			os.RemoveAll(dir)
			return
		}
		t.Logf("kept the pipeline config and the run logs in %s", dir)
		if n := len(r.Runs); n > 0 {
			t.Logf("last 60 lines of %s:\n%s", r.Runs[n-1].LogPath, r.Runs[n-1].LogTail(60))
		}
	})
	if err := os.WriteFile(r.Config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return r
}

// Start starts the next run; extraEnv ("KEY=value") goes to its
// environment.
func (r *ChildRuns) Start(t testing.TB, extraEnv ...string) *Child {
	t.Helper()
	c := StartChild(t, r.WorkDir, r.Config, len(r.Runs), extraEnv...)
	r.Runs = append(r.Runs, c)
	return c
}
