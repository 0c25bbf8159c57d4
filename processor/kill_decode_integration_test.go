package processor_test

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/rowmodel"
	"github.com/walshadow/walshadow/internal/testrig"
)

// TestDecodeKillRestartLosesNothing streams the random workload (DDL and
// two-phase commit on) through a child pipeline that is SIGKILLed and
// restarted at seeded random moments, some right after a start and some
// mid-load. The journal of everything the runs acknowledged, replayed into
// a model, must equal the source; a run repeats only transactions not
// recorded as delivered and only records at or above the resume floor; the
// shadow is never bootstrapped again.
func TestDecodeKillRestartLosesNothing(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	pgOpts := []testrig.PGOption{testrig.WithMaxPreparedTransactions(10), testrig.WithSetting("log_min_error_statement", "panic")}
	src := testrig.StartPostgres(t, pgOpts...)
	bridgeDir := buildPgext(t, src.BinDir())
	stateDir := newStateDir(t, src)
	const slot = "walshadow_kill_decode"

	workDir, err := os.MkdirTemp("", "walshadow-killdecode-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kept the journal and run logs in %s", workDir)
		} else {
			os.RemoveAll(workDir)
		}
	})
	runner := &helperRunner{dir: workDir, config: filepath.Join(workDir, "pipeline.yaml"), journal: filepath.Join(workDir, "journal.jsonl")}
	if err := os.WriteFile(runner.config, []byte(pipelineYAML(src, stateDir, bridgeDir, testrig.FreePort(t), slot)), 0o600); err != nil {
		t.Fatal(err)
	}

	first, err := runner.start(0)
	if err != nil {
		t.Fatal(err)
	}
	k := &killer{runner: runner, stateDir: stateDir, rng: rng, schedule: killSchedule(rng), logf: t.Logf, current: first}
	t.Cleanup(func() {
		if p := k.child(); p != nil {
			p.kill()
		}
	})
	waitStreaming(t, src, stateDir, slot, first)
	bootstrapMarker := filepath.Join(stateDir, "shadow", "walshadow.bootstrap_complete")
	bootstrapped, err := os.Stat(bootstrapMarker)
	if err != nil {
		t.Fatal(err)
	}

	loadFor := killLoadDuration
	if v := os.Getenv("WALSHADOW_KILL_LOAD_SECONDS"); v != "" {
		secs, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("WALSHADOW_KILL_LOAD_SECONDS=%q: %v", v, err)
		}
		loadFor = time.Duration(secs) * time.Second
	}
	loadDone := make(chan struct{})
	killerDone := make(chan struct{})
	stopKiller := make(chan struct{})
	go func() {
		defer close(killerDone)
		k.loop(loadDone, stopKiller)
	}()
	// Should the workload fail the test, the killer stops before the
	// cleanup that kills the last child.
	t.Cleanup(func() {
		close(stopKiller)
		<-killerDone
	})
	// The workload runs on the test goroutine (it may t.Fatal); the killer
	// works beside it.
	runPacedLoad(t, src, seed, loadFor)
	close(loadDone)
	<-killerDone
	if k.err != nil {
		t.Fatal(k.err)
	}

	// The marker commits last: once the journal has it, it has everything.
	token := fmt.Sprintf("done-%d", seed)
	src.Exec(t, "CREATE TABLE rl_marker (id int PRIMARY KEY, token text); INSERT INTO rl_marker VALUES (1, '"+token+"')")
	last := k.child()
	waitJournalMarker(t, runner.journal, stateDir, token, last, 3*time.Minute)
	last.kill()

	if after, err := os.Stat(bootstrapMarker); err != nil || !after.ModTime().Equal(bootstrapped.ModTime()) {
		t.Errorf("the shadow was bootstrapped again: %s mtime %v, was %v (%v)", bootstrapMarker, modTime(after), bootstrapped.ModTime(), err)
	}

	entries, _, err := readJournalFrom(runner.journal, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkReplaysOnlyUndelivered(t, entries, k.kills)

	model := rowmodel.New()
	var applyErrs int
	for _, e := range entries {
		if err := model.Apply(e.msg); err != nil {
			if applyErrs++; applyErrs <= maxModelErrors {
				t.Errorf("contract (journal byte %d): %v", e.offset, err)
			}
		}
	}
	t.Logf("model: %+v from %d journal messages over %d runs", model.Stats(), len(entries), len(k.kills)+1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := model.Compare(ctx, src.Connect(t)); err != nil {
		t.Errorf("seed %d: %v", seed, err)
	}
}
