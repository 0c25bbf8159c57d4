package drill_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/chcompare"
	"github.com/walshadow/walshadow/internal/testrig"
)

// Crash drill tuning: about 8 minutes on two cores.
const (
	crashCycles       = 20
	crashLoadSeconds  = 3   // pgbench -T per cycle
	crashRandomOps    = 200 // random workload operations per cycle
	crashBigTxMiB     = 5   // one big transaction: past the 1 MiB buffer, it spills
	crashBigTxEvery   = 3   // cycles between big transactions (spill kills always get theirs)
	crashCatchUp      = 3 * time.Minute
	crashHookDeadline = time.Minute // for a kill hook to fire once the load is over
)

// killKind is how a cycle's run dies.
type killKind int

const (
	killDelay   killKind = iota // SIGKILL at a random moment of the load
	killCapture                 // the child kills itself after the N-th capture
	killSpill                   // the child kills itself after the N-th spill
	killAppend                  // after the N-th append to the spool, before its sync
	killTrim                    // after the N-th trim of the spool, before its new start is recorded
	killRead                    // after the N-th read of the spool went to the pump (shadow feed, filter, buffer)
)

// killPlan is one cycle's kill.
type killPlan struct {
	kind  killKind
	n     int           // the hook call that kills (capture, spill)
	delay time.Duration // after the load started (delay)
}

func (k killPlan) String() string {
	switch k.kind {
	case killCapture:
		return fmt.Sprintf("capture:%d", k.n)
	case killSpill:
		return fmt.Sprintf("spill:%d", k.n)
	case killAppend:
		return fmt.Sprintf("append:%d", k.n)
	case killTrim:
		return fmt.Sprintf("trim:%d", k.n)
	case killRead:
		return fmt.Sprintf("read:%d", k.n)
	}
	return fmt.Sprintf("after %v", k.delay)
}

// parseKills reads a comma-separated list of kill points as killPlan's
// String writes them ("capture:2", "read:40"; not the random delays).
func parseKills(list string) ([]killPlan, error) {
	if list == "" {
		return nil, nil
	}
	kinds := map[string]killKind{"capture": killCapture, "spill": killSpill, "append": killAppend, "trim": killTrim, "read": killRead}
	var out []killPlan
	for _, item := range strings.Split(list, ",") {
		name, num, _ := strings.Cut(strings.TrimSpace(item), ":")
		kind, ok := kinds[name]
		n, err := strconv.Atoi(num)
		if !ok || err != nil || n < 1 {
			return nil, fmt.Errorf("WALSHADOW_DRILL_KILLS: %q is not a kill point (capture, spill, append, trim or read, then :N with N >= 1)", item)
		}
		out = append(out, killPlan{kind: kind, n: n})
	}
	return out, nil
}

func drawKill(rng *rand.Rand) killPlan {
	switch x := rng.Intn(22); {
	case x < 6:
		return killPlan{kind: killDelay, delay: time.Duration(200+rng.Intn(crashLoadSeconds*1000)) * time.Millisecond}
	case x < 11:
		return killPlan{kind: killCapture, n: 1 + rng.Intn(4)}
	case x < 15:
		return killPlan{kind: killSpill, n: 1 + rng.Intn(2)}
	case x < 17:
		return killPlan{kind: killAppend, n: 1 + rng.Intn(300)}
	case x < 19:
		return killPlan{kind: killRead, n: 1 + rng.Intn(300)}
	default:
		return killPlan{kind: killTrim, n: 1}
	}
}

// TestCrashDrill SIGKILLs the pipeline over and over while pgbench (4
// clients), the randomized DDL/DML workload and big spilling transactions
// run: first while the shadow's BASE_BACKUP is under way, then each cycle
// at a moment the seed picks: a random time, right after a catalog
// boundary's capture (before its batch reaches ClickHouse), right after a
// transaction spilled, right after WAL was appended to the spool (before
// its sync), right after a read of the spool went to the pump (the
// shadow's feed, the filter and the transaction buffer), or right after
// the spool was trimmed (before its new start was recorded). After each kill a fresh run catches up in a
// quiet period and every table must equal the source (count, exact sums,
// md5 of the canonical rows); the shadow is never bootstrapped again.
func TestCrashDrill(t *testing.T) {
	testrig.SkipIfShort(t, "the crash drill (it runs for minutes)")
	seed := testrig.TestSeed(t)
	cycles := crashCycles
	if v := os.Getenv("WALSHADOW_DRILL_CYCLES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("WALSHADOW_DRILL_CYCLES=%q: want a positive number", v)
		}
		cycles = n
	}
	// WALSHADOW_DRILL_KILLS (e.g. "read:40,trim:1") sets the first
	// cycles' kill points, to reproduce or aim a drill.
	forced, err := parseKills(os.Getenv("WALSHADOW_DRILL_KILLS"))
	if err != nil {
		t.Fatal(err)
	}
	var stage drillStage
	stage.reportAtEnd(t)
	d := newDrill(t, "drop_strategy: drop\n", "transaction_buffer_bytes: 1048576\n")
	runCrashDrill(t, d, &stage, seed, cycles, forced)
}

// TestCrashDrillSharded runs three cycles of the crash drill (the first
// start killed in its bootstrap, then a kill after a capture and two
// drawn from the seed)
// into a cluster of two shards through node A; after each every table
// read through node A's Distributed tables equals the source, and at the
// end through node B's too, with no key (sharding-key value) on both
// shards.
func TestCrashDrillSharded(t *testing.T) {
	testrig.SkipIfShort(t, "the sharded crash drill (it runs for minutes)")
	seed := testrig.TestSeed(t)
	var stage drillStage
	stage.reportAtEnd(t)
	cluster := testrig.StartClickHouseCluster(t, testrig.TwoShards)
	d := newDrillOn(t, cluster.Nodes[0], "drop_strategy: drop\ncluster: "+testrig.ClusterName+"\n", "transaction_buffer_bytes: 1048576\n")
	// The first kill right after a catalog boundary's capture, before its
	// batch reaches the shards; the others drawn.
	runCrashDrill(t, d, &stage, seed, 3, []killPlan{{kind: killCapture, n: 1 + int(seed%4+4)%4}})

	// A start after a kill between a statement's local and Distributed
	// steps mends the Distributed tables; a start after any other kill
	// finds nothing to mend.
	mends := 0
	for _, r := range d.Runs {
		for _, line := range strings.Split(r.Log(), "\n") {
			if strings.Contains(line, "ClickHouse cluster: ") && !strings.Contains(line, "was missing; re-created") {
				mends++
				t.Logf("run %d: %s", r.Run, line)
			}
		}
	}
	if mends > len(d.Runs) {
		t.Errorf("%d Distributed tables mended over %d starts: the repair does not see its own tables as in step", mends, len(d.Runs))
	}
	stage.set("comparing through node B")
	throughB := *d
	throughB.ch = cluster.Nodes[1]
	if n, differing := throughB.compareAll(t, "through node B"); differing == 0 {
		t.Logf("%d tables equal through node B", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	summary, err := chcompare.CheckShards(ctx, d.dsn(), cluster.Nodes[1].NativeAddr(), chDatabase)
	t.Log(summary)
	if err != nil {
		t.Error(err)
	}
}

// drillStage is where a drill is, for its last line when it fails (the
// failure's own message is above the servers' log tails).
type drillStage struct{ what string }

func (s *drillStage) set(format string, args ...any) { s.what = fmt.Sprintf(format, args...) }

// reportAtEnd registers the report: before the servers start, so that it
// runs after their clean-ups.
func (s *drillStage) reportAtEnd(t *testing.T) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the drill failed at: %s", s.what)
		}
	})
}

// runCrashDrill is the crash drill on d: cycle 0 kills the first start in
// its bootstrap, then cycles kills drawn from seed (the first ones forced).
func runCrashDrill(t *testing.T, d *drill, stage *drillStage, seed int64, cycles int, forced []killPlan) {
	t.Helper()
	rng := rand.New(rand.NewSource(seed))
	started := time.Now()
	t.Cleanup(func() { d.src.Exec(t, "ALTER DATABASE postgres RESET search_path") })

	// Cycle 0: the very first start dies in its BASE_BACKUP.
	stage.set("run 0, killed in its bootstrap")
	c := d.start(t)
	if !c.WaitLog(t, logBaseBackupStarted, 2*time.Minute) {
		t.Fatalf("run 0 never logged %q:\n%s", logBaseBackupStarted, c.LogTail(60))
	}
	time.Sleep(time.Duration(rng.Intn(150)) * time.Millisecond)
	c.Kill()
	if strings.Contains(c.Log(), logBootstrapped) {
		t.Errorf("run 0 finished its bootstrap before the kill: the drill did not kill a bootstrap (seed %d)", seed)
	}
	if _, err := os.Stat(d.bootstrapMarker()); err == nil {
		t.Errorf("run 0 was killed in its bootstrap but %s exists", d.bootstrapMarker())
	}
	c = d.start(t)
	stage.set("run %d, the bootstrap after the killed one", c.Run)
	d.waitStreaming(t, c, 3*time.Minute)
	if !strings.Contains(c.Log(), logBootstrapped) {
		t.Fatalf("run 1 streams but did not log %q:\n%s", logBootstrapped, c.LogTail(60))
	}
	bootRun := c.Run
	marker, err := os.ReadFile(d.bootstrapMarker())
	if err != nil {
		t.Fatal(err)
	}
	d.createDrillTables(t)
	// pgbench's initial COPY is itself a big transaction.
	d.src.PGBench(t, 1, testrig.PGBenchOptions{})
	stage.set("run %d catching up after the bootstrap and pgbench -i", c.Run)
	d.waitCaughtUp(t, c, crashCatchUp)
	stage.set("run %d: comparing after the bootstrap", c.Run)
	n, differing := d.compareAll(t, "after the bootstrap")
	if differing > 0 {
		t.FailNow()
	}
	t.Logf("bootstrap killed once, completed by run %d; %d tables equal after pgbench -i (%v)", bootRun, n, time.Since(started).Round(time.Second))

	// capSpillPlans counts the capture and spill kill points drawn: every
	// cycle reaches those (its load has DDL; a spill plan gets its big
	// transactions), unlike a read or append count past what a short
	// cycle makes.
	hookKills, missedHooks, bigTx, capSpillPlans := 0, 0, 0, 0
	for cycle := 1; cycle <= cycles; cycle++ {
		cycleStart := time.Now()
		plan := drawKill(rng)
		if cycle <= len(forced) {
			plan = forced[cycle-1]
		}
		if plan.kind == killCapture || plan.kind == killSpill {
			capSpillPlans++
		}
		bigCount := 0
		if plan.kind == killSpill {
			bigCount = plan.n
		} else if cycle%crashBigTxEvery == 0 {
			bigCount = 1
		}
		stage.set("cycle %d (kill %s): the load", cycle, plan)
		if plan.kind != killDelay {
			// The kill point is fixed when a run starts: the caught-up run
			// makes way (a kill in a quiet moment) for one that has it.
			c.Kill()
			c = d.start(t, testrig.DrillKillAtEnv+"="+plan.String())
		}

		// The cycle's random workload gets a schema of its own: it tracks
		// its DDL only within one RunRandomLoad call. pgbench finds its
		// tables in public.
		schema := fmt.Sprintf("drill_%d", cycle)
		d.src.Exec(t, fmt.Sprintf("CREATE SCHEMA %s; ALTER DATABASE postgres SET search_path TO %s, public", schema, schema))
		opt := testrig.RandomLoadOptions{Seed: seed*1000 + int64(cycle), Tables: 11, Ops: crashRandomOps, Clients: 2,
			DDL: true, TwoPhase: true, NoFarFutureTimestamps: true, Keyless: true, TypeChanges: true, TempTables: true}
		d.src.CreateRandomSchema(t, opt)

		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		var wg sync.WaitGroup
		var errs loadErrors
		victim := c
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, err := d.pgbenchRun(ctx, 4, crashLoadSeconds)
			errs.add(err)
		}()
		go func() {
			defer wg.Done()
			for i := 0; i < bigCount; i++ {
				errs.add(bigTransaction(ctx, d.src.DSN(), cycle*10+i, crashBigTxMiB))
			}
		}()
		if plan.kind == killDelay {
			wg.Add(1)
			go func() {
				defer wg.Done()
				select {
				case <-time.After(plan.delay):
					victim.Kill()
				case <-victim.Done():
				}
			}()
		}
		stats := d.src.RunRandomLoad(t, opt)
		wg.Wait()
		cancel()
		bigTx += bigCount
		if err := errs.err(); err != nil {
			t.Fatalf("cycle %d: load: %v", cycle, err)
		}

		if plan.kind != killDelay {
			select {
			case <-victim.Done():
			case <-time.After(crashHookDeadline):
				missedHooks++
				t.Logf("cycle %d: kill point %s not reached %v after the load; killing run %d now", cycle, plan, crashHookDeadline, victim.Run)
				victim.Kill()
			}
		}
		if !victim.KilledBySignal() {
			t.Fatalf("cycle %d: run %d exited by itself (%v) instead of being killed (%s):\n%s", cycle, victim.Run, victim.Wait(), plan, victim.LogTail(60))
		}
		if plan.kind != killDelay && strings.Contains(victim.Log(), testrig.DrillKillMessage) {
			hookKills++
		}

		c = d.start(t)
		stage.set("cycle %d (run %d killed: %s): run %d catching up", cycle, victim.Run, plan, c.Run)
		lag := d.waitCaughtUp(t, c, crashCatchUp)
		stage.set("cycle %d (run %d killed: %s): comparing what run %d delivered", cycle, victim.Run, plan, c.Run)
		compareStart := time.Now()
		n, differing := d.compareAll(t, fmt.Sprintf("cycle %d (run %d killed: %s, seed %d)", cycle, victim.Run, plan, seed))
		if differing > 0 {
			t.FailNow()
		}
		compared := time.Since(compareStart)
		now, err := os.ReadFile(d.bootstrapMarker())
		if err != nil || !bytes.Equal(now, marker) {
			t.Fatalf("cycle %d: the shadow's bootstrap marker changed (err %v):\nbefore %s\nnow    %s", cycle, err, marker, now)
		}
		for _, r := range d.Runs[bootRun+1:] {
			if strings.Contains(r.Log(), logBootstrapped) {
				t.Fatalf("cycle %d: run %d bootstrapped the shadow again (%s)", cycle, r.Run, r.LogPath)
			}
		}
		t.Logf("cycle %d: killed run %d (%s); %d big transactions; random load %v; caught up in %v; %d tables equal (compared in %v); cycle took %v",
			cycle, victim.Run, plan, bigCount, stats, lag.Round(time.Millisecond), n, compared.Round(time.Millisecond), time.Since(cycleStart).Round(time.Millisecond))
	}
	c.Kill()
	t.Logf("%d cycles, %d runs, %d kills at a hook point, %d hook points not reached, %d big transactions, %v",
		cycles, len(d.Runs), hookKills, missedHooks, bigTx, time.Since(started).Round(time.Second))
	if hookKills == 0 && capSpillPlans > 0 {
		t.Errorf("no run died at a hook point, %d capture or spill kill points drawn (seed %d): is session.Hooks still called?", capSpillPlans, seed)
	}
}

func TestParseKills(t *testing.T) {
	got, err := parseKills("read:40, trim:1,capture:2")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].String() != "read:40" || got[1].String() != "trim:1" || got[2].String() != "capture:2" {
		t.Errorf("parseKills = %v", got)
	}
	for _, bad := range []string{"read", "read:0", "nap:3", "read:x", "read:2,"} {
		if _, err := parseKills(bad); err == nil {
			t.Errorf("parseKills(%q) succeeded", bad)
		}
	}
	if got, err := parseKills(""); err != nil || got != nil {
		t.Errorf(`parseKills("") = %v, %v`, got, err)
	}
}
