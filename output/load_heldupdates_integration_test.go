package output_test

import (
	"context"
	"fmt"
	"math/rand"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/load"
)

// TestInitialLoadUnderKeyChanges: key-changing updates of TOASTed rows
// (the TOASTed column unchanged, so the WAL does not carry it) run for the
// whole load, chains of them (a->b, later b->c) and keys changed back
// (a->b, b->a) among them, and updates of a keyless table's TOASTed rows
// (each one moves its tuple: a key change of the physical identity). The
// stream holds each such update until the publish, whose old row only the
// load has; the publish completes them from the newest row of the old key
// before the update, not the key change's own delete half. Every load
// publishes at its first attempt, and every table equals the source.
//
// Copy mode: a base backup's pages are copied over its duration, so a row
// a key change moved before its page was copied is not in the load at
// all, and the held update finds no earlier row of its old key (the table
// is loaded again).
func TestInitialLoadUnderKeyChanges(t *testing.T) {
	const (
		rows     = 1000
		reserved = 100 // ids 1..reserved: each changed away and back once, then left alone
	)
	r := newRig(t)
	// STORAGE EXTERNAL: big is stored out of line, uncompressed.
	r.src.Exec(t, fmt.Sprintf(`CREATE TABLE kinds (id int PRIMARY KEY, v text, big text);
		ALTER TABLE kinds ALTER COLUMN big SET STORAGE EXTERNAL;
		INSERT INTO kinds SELECT g, 'v' || g, repeat(md5(g::text), 125) FROM generate_series(1, %[1]d) g;
		CREATE TABLE kinds_heap (id int, v text, big text);
		ALTER TABLE kinds_heap ALTER COLUMN big SET STORAGE EXTERNAL;
		INSERT INTO kinds_heap SELECT g, 'h' || g, repeat(md5((-g)::text), 125) FROM generate_series(1, %[1]d) g`, rows))

	logs := &logLines{}
	// Throttled, so that the loads last about 30 s, well past the 10-15 s
	// the stream takes to start: the changes of the rest are held.
	run := r.startLogged(t, "initial_load: { mode: copy, workers: 2, max_bytes_per_second: 262144 }", logs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	var keyChanges, changedBack, heapUpdates int
	wg.Add(1)
	go func() {
		defer wg.Done()
		conn := r.src.Connect(t)
		rng := rand.New(rand.NewSource(1))
		ids := make([]int, 0, rows-reserved) // the live ids of kinds the writer changes at random
		for id := reserved + 1; id <= rows; id++ {
			ids = append(ids, id)
		}
		next := 1_000_000
		exec := func(sql string) bool {
			if _, err := conn.Exec(ctx, sql); err != nil {
				if ctx.Err() == nil {
					t.Errorf("writer: %s: %v", sql, err)
				}
				return false
			}
			return true
		}
		for i := 0; ctx.Err() == nil; i++ {
			switch {
			case i%25 == 0 && changedBack < reserved:
				// A key changed and changed back, one transaction each.
				a := changedBack + 1
				if !exec(fmt.Sprintf("UPDATE kinds SET id = %d WHERE id = %d", -a, a)) || !exec(fmt.Sprintf("UPDATE kinds SET id = %d WHERE id = %d", a, -a)) {
					return
				}
				changedBack++
			case rng.Intn(8) == 0:
				if !exec(fmt.Sprintf("UPDATE kinds_heap SET v = v || '+' WHERE id = %d", 1+rng.Intn(rows))) {
					return
				}
				heapUpdates++
			default:
				// A key change to a fresh key: a row changed again later
				// makes a chain.
				j := rng.Intn(len(ids))
				if !exec(fmt.Sprintf("UPDATE kinds SET id = %d, v = v || '>' WHERE id = %d", next, ids[j])) {
					return
				}
				ids[j] = next
				next++
				keyChanges++
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()

	// Wait for both loads, failing at the first retry.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, "level=ERROR") || strings.Contains(line, "loading it again") {
				t.Fatalf("a load did not publish at its first attempt: %s\n%s", line, tail(logs.String(), 4000))
			}
		}
		l, err := load.ReadLedger(filepath.Join(r.stateDir, "clickhouse"))
		done := 0
		if err == nil {
			for _, e := range l.All() {
				if e.Phase == load.PhaseDone {
					done++
				}
			}
		}
		if done == 2 {
			for _, e := range l.All() {
				if e.Attempt != 1 {
					t.Errorf("the load of %s.%s published at attempt %d, want 1", e.Schema, e.Table, e.Attempt)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("loads not done after 3 minutes\n%s", tail(logs.String(), 6000))
		}
		select {
		case err := <-run.done:
			t.Fatalf("the stream stopped during the load: %v\n%s", err, tail(logs.String(), 4000))
		case <-time.After(300 * time.Millisecond):
		}
	}
	cancel()
	wg.Wait()
	t.Logf("during the loads: %d key changes, %d keys changed and back, %d updates of the keyless table", keyChanges, changedBack, heapUpdates)
	held := regexp.MustCompile(`initial load of (public\.kinds(?:_heap)?): (\d+) update\(s\) held for the load, (\d+) written`)
	heldBy := map[string]int{}
	for _, line := range strings.Split(logs.String(), "\n") {
		if m := held.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[2])
			heldBy[m[1]] += n
			t.Log(line)
		} else if strings.Contains(line, "published") {
			t.Log(line)
		}
	}
	for _, table := range []string{"public.kinds", "public.kinds_heap"} {
		if heldBy[table] == 0 {
			t.Errorf("%s: no update was held for its load (the test did not exercise it)", table)
		}
	}
	// After its publish, a keyless table's update reads its unchanged
	// TOAST column back by tuple identity, which takes a while on 18.16.
	r.src.Exec(t, "CREATE TABLE kinds_marker (id int PRIMARY KEY); INSERT INTO kinds_marker VALUES (1)")
	r.waitCH(t, run, liveCountSQL("public", "kinds_marker"), "1", 3*time.Minute)
	run.stop(t)
	r.compareAll(t)
	r.assertNoLoadTables(t)
	if t.Failed() {
		logs.logMatching(t, "initial load")
	}
}
