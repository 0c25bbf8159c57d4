package output_test

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/testrig"
)

func TestMain(m *testing.M) {
	testrig.RunChildIfRequested() // the kill test's pipeline runs in a child process
	os.Exit(m.Run())
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
	cur := testrig.StartChild(t, dir, config, run)
	defer func() { cur.Kill() }()
	exitCh := make(chan error, 1)
	go func() { <-cur.Done(); exitCh <- fmt.Errorf("child exited: %s", cur.LogTail(40)) }()
	testrig.WaitSlotActive(t, r.src, r.slot, exitCh)

	opt := testrig.RandomLoadOptions{Seed: seed, Tables: 12, Ops: 1200, Clients: 3, DDL: true, TwoPhase: true, NoFarFutureTimestamps: true,
		Keyless: true, TypeChanges: true, TempTables: true}
	r.src.CreateRandomSchema(t, opt)
	// Kills run beside the workload and after it, while the pipeline
	// catches up.
	kills := make(chan int, 1)
	go func() {
		n := 0
		for i := 0; i < 8; i++ {
			time.Sleep(time.Duration(300+rnd.Intn(2500)) * time.Millisecond)
			if cur.Exited() {
				break // it failed on its own: reported below
			}
			cur.Kill()
			n++
			run++
			cur = testrig.StartChild(t, dir, config, run)
		}
		kills <- n
	}()
	stats := r.src.RunRandomLoad(t, opt)
	t.Logf("workload: %v", stats)
	token := fmt.Sprintf("done-%d", seed)
	r.src.Exec(t, "CREATE TABLE rl_marker (id int PRIMARY KEY, token text); INSERT INTO rl_marker VALUES (1, '"+token+"')")
	n := <-kills
	if cur.Exited() {
		t.Fatalf("run %d of the pipeline exited by itself:\n%s", run, cur.LogTail(40))
	}
	cur.Kill()
	t.Logf("%d kills", n)
	if n < 4 {
		t.Fatalf("only %d kills happened", n)
	}
	// The last run in-process, to completion.
	last := r.start(t, outputYAML)
	r.waitCH(t, last, fmt.Sprintf("SELECT count() FROM %s FINAL WHERE _is_deleted = 0 AND token = '%s'", chTable("public", "rl_marker"), token), "1", 3*time.Minute)
	r.waitLoadsDone(t, last, nil, 0, 3*time.Minute)
	last.stop(t)
	r.compareAll(t)
}
