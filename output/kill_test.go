package output_test

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/walshadow/walshadow/internal/testrig"
)

// helperConfigEnv names the pipeline config a child process runs (see
// TestMain): the kill test SIGKILLs it at random points.
const helperConfigEnv = "WALSHADOW_OUTPUT_HELPER_CONFIG"

func TestMain(m *testing.M) {
	if path := os.Getenv(helperConfigEnv); path != "" {
		if err := runHelper(path); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runHelper runs a pipeline config until the process is killed.
func runHelper(path string) error {
	yaml, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	b := service.NewStreamBuilder()
	b.SetSchema(service.GlobalEnvironment().FullConfigSchema("", ""))
	if err := b.SetYAML(string(yaml)); err != nil {
		return err
	}
	stream, err := b.Build()
	if err != nil {
		return err
	}
	return stream.Run(context.Background())
}

// child is one run of the pipeline in a child process.
type child struct {
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
}

func startChild(t *testing.T, dir, config string, run int) *child {
	t.Helper()
	logPath := filepath.Join(dir, fmt.Sprintf("run-%02d.log", run))
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperConfigEnv+"="+config)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		cmd.Wait()
		logFile.Close()
	}()
	return c
}

func (c *child) kill() {
	c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
}

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

func (c *child) logTail() string {
	b, _ := os.ReadFile(c.logPath)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// TestClickHouseKillRestartConverges SIGKILLs the whole pipeline at random
// points while the randomized workload (with DDL) runs and while it catches
// up, restarts it each time from its state directory, and then compares
// every table: rows, schema events and truncates replayed after a kill
// (at or above the resume floor) converge to the source, nothing is lost.
func TestClickHouseKillRestartConverges(t *testing.T) {
	seed := testrig.TestSeed(t)
	rnd := rand.New(rand.NewSource(seed))
	r := newRig(t, testrig.WithMaxPreparedTransactions(10), testrig.WithSetting("log_min_error_statement", "panic"))
	const outputYAML = "drop_strategy: drop\n"
	dir := t.TempDir()
	config := filepath.Join(dir, "pipeline.yaml")
	if err := os.WriteFile(config, []byte(r.yaml(outputYAML)), 0o600); err != nil {
		t.Fatal(err)
	}
	run := 0
	cur := startChild(t, dir, config, run)
	defer func() { cur.kill() }()
	exitCh := make(chan error, 1)
	go func() { <-cur.done; exitCh <- fmt.Errorf("child exited: %s", cur.logTail()) }()
	testrig.WaitSlotActive(t, r.src, r.slot, exitCh)

	opt := testrig.RandomLoadOptions{Seed: seed, Tables: 12, Ops: 1200, Clients: 3, DDL: true, TwoPhase: true, NoFarFutureTimestamps: true}
	r.src.CreateRandomSchema(t, opt)
	// Kills run beside the workload and after it, while the pipeline
	// catches up.
	kills := make(chan int, 1)
	go func() {
		n := 0
		for i := 0; i < 8; i++ {
			time.Sleep(time.Duration(300+rnd.Intn(2500)) * time.Millisecond)
			if cur.exited() {
				break // it failed on its own: reported below
			}
			cur.kill()
			n++
			run++
			cur = startChild(t, dir, config, run)
		}
		kills <- n
	}()
	stats := r.src.RunRandomLoad(t, opt)
	t.Logf("workload: %v", stats)
	token := fmt.Sprintf("done-%d", seed)
	r.src.Exec(t, "CREATE TABLE rl_marker (id int PRIMARY KEY, token text); INSERT INTO rl_marker VALUES (1, '"+token+"')")
	n := <-kills
	if cur.exited() {
		t.Fatalf("run %d of the pipeline exited by itself:\n%s", run, cur.logTail())
	}
	cur.kill()
	t.Logf("%d kills", n)
	if n < 4 {
		t.Fatalf("only %d kills happened", n)
	}
	// The last run in-process, to completion.
	last := r.start(t, outputYAML)
	r.waitCH(t, last, fmt.Sprintf("SELECT count() FROM %s FINAL WHERE _is_deleted = 0 AND token = '%s'", chTable("public", "rl_marker"), token), "1", 3*time.Minute)
	last.stop(t)
	r.compareAll(t)
}
