package drill_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/testrig"
	"github.com/walshadow/walshadow/internal/wal"
)

// Fault drill tuning: about 2 minutes.
const (
	faultClickHouseDown = 30 * time.Second
	faultLoadBetween    = 5 * time.Second // load between two faults
	faultRecover        = 2 * time.Minute
)

// Log lines that show the pipeline waited and retried.
const (
	logShadowGone = "the shadow postmaster is gone; restarting it"
)

// TestFaultDrill runs the pipeline in a child process under a pgbench
// load and takes its servers away: ClickHouse stops for 30 s, the shadow
// postmaster is SIGKILLed, the source restarts. The pipeline must wait,
// retry and resume by itself: the same run is still up at the end, its log
// shows the retries, and once the load stops every table equals the
// source.
func TestFaultDrill(t *testing.T) {
	testrig.SkipIfShort(t, "the fault drill runs for minutes")
	started := time.Now()
	d := newDrill(t, "", "")
	c := d.start(t)
	d.waitStreaming(t, c, 3*time.Minute)
	d.createDrillTables(t)
	d.src.PGBench(t, 1, testrig.PGBenchOptions{})
	d.waitCaughtUp(t, c, faultRecover)
	t.Logf("streaming, pgbench tables replicated (%v)", time.Since(started).Round(time.Second))

	alive := func(when string) {
		t.Helper()
		if c.Exited() {
			t.Fatalf("%s: the pipeline exited (%v) instead of waiting and retrying:\n%s", when, c.Wait(), c.LogTail(80))
		}
	}
	// After each fault: the load stops, the pipeline catches up in a quiet
	// moment and every table must equal the source. A difference is
	// reported and the drill goes on to the next fault.
	quietCheck := func(after string) {
		t.Helper()
		lag := d.waitCaughtUp(t, c, faultRecover)
		n, differing := d.compareAll(t, after)
		alive(after)
		t.Logf("%s: caught up in %v; %d of %d tables equal", after, lag.Round(time.Millisecond), n-differing, n)
	}

	// 1. ClickHouse away for 30 s under load.
	load := d.startFaultLoad()
	// A failure mid-fault leaves the last load running: end it first.
	defer func() { load.cancel(); load.wg.Wait() }()
	time.Sleep(faultLoadBetween)
	stopAt := time.Now()
	d.ch.StopServer(t)
	t.Logf("ClickHouse stopped (took %v)", time.Since(stopAt).Round(time.Millisecond))
	time.Sleep(faultClickHouseDown)
	alive("ClickHouse down")
	d.ch.StartServer(t)
	t.Logf("ClickHouse started again after %v", time.Since(stopAt).Round(time.Millisecond))
	d.waitDeliveredPast(t, c, d.src.CurrentLSN(t), faultRecover, "after ClickHouse came back")
	time.Sleep(faultLoadBetween)
	load.stop(t)
	quietCheck("after ClickHouse was down 30 s")

	// 2. The shadow postmaster SIGKILLed under load.
	load = d.startFaultLoad()
	time.Sleep(faultLoadBetween)
	pid := d.shadowPostmasterPID(t)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("killing the shadow postmaster %d: %v", pid, err)
	}
	t.Logf("SIGKILLed the shadow postmaster (pid %d)", pid)
	if !c.WaitLog(t, logShadowGone, faultRecover) {
		alive("shadow killed")
		t.Fatalf("no log line %q within %v after the shadow postmaster was killed:\n%s", logShadowGone, faultRecover, c.LogTail(60))
	}
	d.waitDeliveredPast(t, c, d.src.CurrentLSN(t), faultRecover, "after the shadow postmaster was killed")
	time.Sleep(faultLoadBetween)
	load.stop(t)
	quietCheck("after the shadow postmaster was killed")

	// 3. The source restarts (fast shutdown) under load.
	load = d.startFaultLoad()
	time.Sleep(faultLoadBetween)
	port := d.src.Port()
	d.src.Restart(t)
	if d.src.Port() != port {
		t.Fatalf("the source came back on port %d instead of %d: the pipeline cannot follow", d.src.Port(), port)
	}
	t.Logf("source restarted")
	d.waitDeliveredPast(t, c, d.src.CurrentLSN(t), faultRecover, "after the source restarted")
	time.Sleep(faultLoadBetween)
	load.stop(t)
	quietCheck("after the source restarted")

	// The same run survived everything and says it retried.
	alive("at the end")
	log := c.Log()
	if !strings.Contains(log, logShadowGone) {
		t.Errorf("the run's log has no %q", logShadowGone)
	}
	retries := retryLines(log)
	if len(retries) == 0 {
		t.Errorf("the run's log shows no retry (a line with \"retry\"/\"retrying\"):\n%s", c.LogTail(60))
	}
	t.Logf("one run (%d) survived every fault; %d retry lines, e.g.:\n%s\ntook %v",
		c.Run, len(retries), strings.Join(retries[:min(len(retries), 6)], "\n"), time.Since(started).Round(time.Second))
}

// faultLoad is pgbench in a loop of short runs: a run broken by a fault
// (the source restarting) fails and the next one starts once the source
// is back.
type faultLoad struct {
	cancel      context.CancelFunc
	wg          sync.WaitGroup
	ok, failed  atomic.Int64
	lastFailure atomic.Value
}

func (d *drill) startFaultLoad() *faultLoad {
	ctx, cancel := context.WithCancel(context.Background())
	l := &faultLoad{cancel: cancel}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for ctx.Err() == nil {
			if _, err := d.pgbenchRun(ctx, 4, 2); err != nil {
				if ctx.Err() != nil {
					return
				}
				l.failed.Add(1)
				l.lastFailure.Store(err.Error())
				select {
				case <-ctx.Done():
				case <-time.After(300 * time.Millisecond):
				}
				continue
			}
			l.ok.Add(1)
		}
	}()
	return l
}

// stop ends the load and waits for it; a load of which no pgbench run
// completed fails the test.
func (l *faultLoad) stop(t *testing.T) {
	t.Helper()
	l.cancel()
	l.wg.Wait()
	if l.ok.Load() == 0 {
		t.Fatalf("no pgbench run completed; last failure: %v", l.lastFailure.Load())
	}
	t.Logf("load: %d pgbench runs completed, %d broken by the fault", l.ok.Load(), l.failed.Load())
}

// retryLines are the log lines that report a retry.
func retryLines(log string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(strings.ToLower(l), "retry") {
			out = append(out, l)
		}
	}
	return out
}

// waitDeliveredPast waits until the manifest's delivered position passes
// lsn: the pipeline delivers again after a fault.
func (d *drill) waitDeliveredPast(t *testing.T, c *testrig.Child, lsn wal.LSN, timeout time.Duration, when string) {
	t.Helper()
	start := time.Now()
	d.waitDelivered(t, c, lsn+1, timeout, when)
	t.Logf("%s: delivering again (past %s) after %v", when, lsn, time.Since(start).Round(time.Millisecond))
}

// shadowPostmasterPID reads the shadow's postmaster.pid and checks the
// process is a running postgres.
func (d *drill) shadowPostmasterPID(t *testing.T) int {
	t.Helper()
	path := filepath.Join(d.stateDir, "shadow", "postmaster.pid")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the shadow's pid file: %v", err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		t.Fatalf("%s: first line %q is not a pid", path, first)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !strings.Contains(string(cmdline), "postgres") {
		t.Fatalf("%s names pid %d, which is not a running postgres (%q, %v)", path, pid, cmdline, err)
	}
	return pid
}
