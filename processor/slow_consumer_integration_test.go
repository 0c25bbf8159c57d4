package processor_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/walshadow/walshadow/internal/testrig"
)

// TestDecodeSlowConsumerOutlastsHoldTimeout: downstream takes far longer
// than hold_timeout on the batches around catalog changes. The session
// captures each boundary inside its own hold as soon as the shadow reaches
// it, so no hold waits for downstream: nothing times out, and every row and
// schema event arrives.
func TestDecodeSlowConsumerOutlastsHoldTimeout(t *testing.T) {
	src := testrig.StartPostgres(t)
	bridgeDir := buildPgext(t, src.BinDir())
	stateDir := newStateDir(t, src)
	const slot = "walshadow_slow"
	yaml := strings.Replace(pipelineYAML(src, stateDir, bridgeDir, testrig.FreePort(t), slot),
		"status_interval: 1s", "status_interval: 1s\n    hold_timeout: 2s", 1)

	consumer := newModelConsumer(nil)
	var stalls atomic.Int32
	slow := func(ctx context.Context, batch service.MessageBatch) error {
		// Stall the first batches that carry rows, 3 s each: longer than
		// the hold timeout, while DDL keeps committing behind them.
		if stalls.Load() < 4 {
			for _, m := range batch {
				if op, _ := m.MetaGet("walshadow_operation"); op == "insert" {
					stalls.Add(1)
					time.Sleep(3 * time.Second)
					break
				}
			}
		}
		return consumer.consume(ctx, batch)
	}
	b := service.NewStreamBuilder()
	b.SetSchema(service.GlobalEnvironment().FullConfigSchema("", ""))
	if err := b.SetYAML(yaml); err != nil {
		t.Fatal(err)
	}
	if err := b.AddBatchConsumerFunc(slow); err != nil {
		t.Fatal(err)
	}
	stream, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- stream.Run(context.Background()) }()
	defer stream.StopWithin(time.Minute)
	waitSlotActive(t, src, slot, runErr)

	src.Exec(t, "CREATE TABLE slow_t (id int PRIMARY KEY, v text)")
	for i := range 8 {
		src.Exec(t, fmt.Sprintf("INSERT INTO slow_t SELECT g, 'r%d' FROM generate_series(%d, %d) g", i, i*100, i*100+99))
		src.Exec(t, fmt.Sprintf("ALTER TABLE slow_t ADD COLUMN c%d int DEFAULT %d", i, i))
	}
	src.Exec(t, "CREATE TABLE tp_marker (id int PRIMARY KEY, token text); INSERT INTO tp_marker VALUES (1, 'slow')")
	waitToken(t, consumer, "slow")
	if stalls.Load() < 2 {
		t.Fatalf("the consumer stalled %d times: the test did not exercise a slow downstream", stalls.Load())
	}
	consumer.mu.Lock()
	defer consumer.mu.Unlock()
	for _, err := range consumer.errs {
		t.Errorf("model: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := consumer.model.Compare(ctx, src.Connect(t)); err != nil {
		t.Error(err)
	}
	select {
	case err := <-runErr:
		t.Fatalf("the stream stopped: %v", err)
	default:
	}
}
