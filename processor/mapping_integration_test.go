package processor_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/testrig"
)

// TestDecodeMapping runs the decoder followed by a bloblang mapping that
// masks one column: the mapping sees and changes the typed payload (the
// model equals the source apart from the masked column). Pipeline threads
// may hand batches to the output out of order; putting them back in order
// is the output's (TestThreadsDeliverOutOfOrder in output/): this test's
// model consumer applies them as they come, so it runs one thread.
func TestDecodeMapping(t *testing.T) {
	src := testrig.StartPostgres(t, testrig.WithMaxPreparedTransactions(5), testrig.WithSetting("log_min_error_statement", "panic"))
	bridgeDir := buildPgext(t, src.BinDir())
	stateDir := newStateDir(t, src)
	const slot = "walshadow_threads"
	yaml := pipelineYAML(src, stateDir, bridgeDir, testrig.FreePort(t), slot)
	yaml = strings.Replace(yaml, "        messages: row\noutput:", `        messages: row
    - mapping: |
        root = this
        root.secret = if @walshadow_table == "masked" && this.exists("secret") { "xxx" }
output:`, 1)
	if !strings.Contains(yaml, "root.secret") {
		t.Fatalf("pipeline not rewritten:\n%s", yaml)
	}
	consumer := newModelConsumer(nil)
	stream := buildStream(t, yaml, consumer)
	runErr := make(chan error, 1)
	go func() { runErr <- stream.Run(context.Background()) }()
	defer stream.StopWithin(time.Minute)
	waitSlotActive(t, src, slot, runErr)

	src.Exec(t, "CREATE TABLE masked (id int PRIMARY KEY, secret text, n int)")
	opt := testrig.RandomLoadOptions{Seed: 7, Tables: 10, Ops: 600, Clients: 3, DDL: true, TwoPhase: true}
	src.CreateRandomSchema(t, opt)
	src.Exec(t, "INSERT INTO masked SELECT g, 'secret ' || g, g FROM generate_series(1, 200) g")
	src.RunRandomLoad(t, opt)
	src.Exec(t, "UPDATE masked SET n = n + 1 WHERE id % 3 = 0")
	src.Exec(t, "CREATE TABLE tp_marker (id int PRIMARY KEY, token text); INSERT INTO tp_marker VALUES (1, 'threads')")
	waitToken(t, consumer, "threads")

	consumer.mu.Lock()
	defer consumer.mu.Unlock()
	for _, err := range consumer.errs {
		t.Errorf("model: %v", err)
	}
	for _, id := range []string{"1", "3", "200"} {
		row, ok := consumer.model.Lookup("public.masked", &id)
		if !ok || row["secret"] == nil || *row["secret"] != "xxx" {
			t.Fatalf("masked row %s: %v (the mapping did not apply)", id, row)
		}
	}
	// Everything else equals the source once the mask is applied there too.
	src.Exec(t, "UPDATE masked SET secret = 'xxx'")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := consumer.model.Compare(ctx, src.Connect(t)); err != nil {
		t.Error(err)
	}
}
