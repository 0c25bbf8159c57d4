package output_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/testrig"
)

// TestThreadsDeliverOutOfOrder runs the pipeline with four pipeline
// threads and a processor after walshadow_decode that holds some batches
// back (a sleep of up to 40 ms on a batch's first message), so later
// batches reach clickhouse_ddl before earlier ones; under a randomized
// workload with DDL, every table must still equal the source, and the
// output must say (once) that it put batches back in order.
func TestThreadsDeliverOutOfOrder(t *testing.T) {
	seed := testrig.TestSeed(t)
	r := newRig(t, testrig.WithMaxPreparedTransactions(10), testrig.WithSetting("log_min_error_statement", "panic"))
	r.editPipeline = func(y string) string {
		out := strings.Replace(y, "  threads: 1\n", "  threads: 4\n", 1)
		// (One message per row: a processor after walshadow_decode sees
		// the rows, as walshadow run requires.)
		out = strings.Replace(out, "        messages: batch\noutput:", `        messages: row
    - sleep:
        duration: '${! if batch_index() == 0 { random_int(max: 40).string() + "ms" } else { "0s" } }'
output:`, 1)
		if !strings.Contains(out, "threads: 4") || !strings.Contains(out, "- sleep:") {
			t.Fatalf("pipeline not rewritten:\n%s", y)
		}
		return out
	}
	logs := &logLines{}
	run := r.startLogged(t, "drop_strategy: drop\n", logs)
	opt := testrig.RandomLoadOptions{Seed: seed, Tables: 10, Ops: 800, Clients: 3, DDL: true, TwoPhase: true, NoFarFutureTimestamps: true}
	r.src.CreateRandomSchema(t, opt)
	t.Logf("workload: %v", r.src.RunRandomLoad(t, opt))
	token := fmt.Sprintf("threads-%d", seed)
	r.src.Exec(t, "CREATE TABLE rl_marker (id int PRIMARY KEY, token text); INSERT INTO rl_marker VALUES (1, '"+token+"')")
	r.waitCH(t, run, fmt.Sprintf("SELECT count() FROM %s FINAL WHERE _is_deleted = 0 AND token = '%s'", chTable("public", "rl_marker"), token), "1", 3*time.Minute)
	if !strings.Contains(logs.String(), "reached the output before batch") {
		t.Errorf("no batch reached the output out of order: the test did not exercise reordering\n%s", tail(logs.String(), 20))
	}
	run.stop(t)
	r.compareAll(t)
}
