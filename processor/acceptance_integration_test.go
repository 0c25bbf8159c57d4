package processor_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	// The none buffer and other core components a full config names.
	_ "github.com/redpanda-data/benthos/v4/public/components/pure"
	"github.com/redpanda-data/benthos/v4/public/service"

	_ "github.com/walshadow/walshadow/input"
	_ "github.com/walshadow/walshadow/processor"

	"github.com/walshadow/walshadow/internal/msg"
	"github.com/walshadow/walshadow/internal/rowmodel"
	"github.com/walshadow/walshadow/internal/testrig"
)

// modelConsumer replays every message the pipeline outputs into a model
// (unless model is nil) and, when a journal is set, appends it there first (fsynced per batch) so
// a process killed mid-stream leaves a replayable record.
type modelConsumer struct {
	mu      sync.Mutex
	model   *rowmodel.Model
	journal *rowmodel.Journal
	errs    []error
	batches int
}

// maxModelErrors bounds the contract violations kept for the report.
const maxModelErrors = 50

func newModelConsumer(journal *rowmodel.Journal) *modelConsumer {
	return &modelConsumer{model: rowmodel.New(), journal: journal}
}

// toModelMessage converts a Benthos message: metadata as strings, payload
// structured for row and schema messages (raw WAL records passing through
// keep no payload).
func toModelMessage(m *service.Message) (rowmodel.Message, error) {
	out := rowmodel.Message{Meta: msg.Strings(m)}
	if out.Meta[rowmodel.MetaOperation] == "" {
		return out, nil
	}
	raw, err := m.AsStructured()
	if err != nil {
		if b, _ := m.AsBytes(); len(b) == 0 {
			return out, nil // truncate: empty payload
		}
		return out, fmt.Errorf("%s message at %s: payload is not structured: %w", out.Meta[rowmodel.MetaOperation], out.Meta[rowmodel.MetaLSN], err)
	}
	switch p := raw.(type) {
	case map[string]any:
		out.Payload = p
	case nil:
	default:
		return out, fmt.Errorf("%s message at %s: payload is %T, want an object", out.Meta[rowmodel.MetaOperation], out.Meta[rowmodel.MetaLSN], raw)
	}
	return out, nil
}

func (c *modelConsumer) consume(ctx context.Context, batch service.MessageBatch) error {
	msgs := make([]rowmodel.Message, 0, len(batch))
	c.mu.Lock()
	defer c.mu.Unlock()
	c.batches++
	for _, m := range batch {
		msg, err := toModelMessage(m)
		if err != nil {
			c.record(err)
			continue
		}
		msgs = append(msgs, msg)
	}
	if c.journal != nil {
		// A failed append nacks the batch: it comes again.
		if err := c.journal.Append(msgs); err != nil {
			return err
		}
	}
	for _, msg := range msgs {
		if c.model == nil {
			break
		}
		if err := c.model.Apply(msg); err != nil {
			c.record(err)
		}
	}
	return nil
}

func (c *modelConsumer) record(err error) {
	if len(c.errs) < maxModelErrors {
		c.errs = append(c.errs, err)
	}
}

func (c *modelConsumer) errors() []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]error(nil), c.errs...)
}

// buildPgext builds the shadow's bridge module (testrig.BuildPgext).
func buildPgext(t *testing.T, pgBinDir string) string { return testrig.BuildPgext(t, pgBinDir) }

// pipelineYAML is the stream under test: the session, the input, the
// decoding processor. The test's consumer is added beside the drop output
// (the builder fans out to both), so every batch is acknowledged once the
// consumer returned.
func pipelineYAML(src *testrig.Postgres, stateDir, bridgeDir string, shadowPort int, slot string) string {
	return testrig.Pipeline{Source: src, StateDir: stateDir, Slot: slot, ShadowPort: shadowPort, BridgeDir: bridgeDir}.YAML()
}

// newStateDir is testrig.NewStateDir.
func newStateDir(t testing.TB, src *testrig.Postgres) string { return testrig.NewStateDir(t, src) }

func testSeed(t *testing.T) int64 { return testrig.TestSeed(t) }

// waitSlotActive is testrig.WaitSlotActive.
func waitSlotActive(t *testing.T, src *testrig.Postgres, slot string, runErr <-chan error) {
	testrig.WaitSlotActive(t, src, slot, runErr)
}

// TestDecodeRandomWorkloadMatchesSource streams a randomized workload over
// every type, DDL, savepoints, two-phase commit, TOAST and REPLICA IDENTITY
// variants through pg_physical_wal and walshadow_decode, replays the output
// into a model and compares the model with the source table by table.
func TestDecodeRandomWorkloadMatchesSource(t *testing.T) {
	seed := testSeed(t)
	// Skipped statements carry values of up to 300 KB: keep them out of the
	// server log the rig prints on failure.
	src := testrig.StartPostgres(t, testrig.WithMaxPreparedTransactions(10), testrig.WithSetting("log_min_error_statement", "panic"))
	bridgeDir := buildPgext(t, src.BinDir())
	stateDir := newStateDir(t, src)
	const slot = "walshadow_accept"

	consumer := newModelConsumer(nil)
	if path := os.Getenv("WALSHADOW_ACCEPTANCE_JOURNAL"); path != "" {
		j, err := rowmodel.OpenJournal(path)
		if err != nil {
			t.Fatal(err)
		}
		defer j.Close()
		consumer.journal = j
	}
	stream := buildStream(t, pipelineYAML(src, stateDir, bridgeDir, testrig.FreePort(t), slot), consumer)
	runErr := make(chan error, 1)
	go func() { runErr <- stream.Run(context.Background()) }()
	defer func() {
		if err := stream.StopWithin(time.Minute); err != nil {
			t.Logf("stopping the stream: %v", err)
		}
	}()
	waitSlotActive(t, src, slot, runErr)

	opt := testrig.RandomLoadOptions{Seed: seed, Tables: 12, Ops: 1500, Clients: 3, DDL: true, TwoPhase: true}
	src.CreateRandomSchema(t, opt)
	stats := src.RunRandomLoad(t, opt)
	t.Logf("workload: %v", stats)

	// The marker commits last: once the model has it, it has everything.
	token := fmt.Sprintf("done-%d", seed)
	src.Exec(t, "CREATE TABLE rl_marker (id int PRIMARY KEY, token text); INSERT INTO rl_marker VALUES (1, '"+token+"')")
	waitMarker(t, consumer, token, runErr, 2*time.Minute)

	consumer.mu.Lock()
	defer consumer.mu.Unlock()
	t.Logf("model: %+v after %d batches", consumer.model.Stats(), consumer.batches)
	for _, err := range consumer.errs {
		t.Errorf("contract: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := consumer.model.Compare(ctx, src.Connect(t)); err != nil {
		t.Errorf("seed %d: %v", seed, err)
	}
}

func buildStream(t *testing.T, yaml string, consumer *modelConsumer) *service.Stream {
	t.Helper()
	stream, err := newStream(yaml, consumer)
	if err != nil {
		t.Fatal(err)
	}
	return stream
}

func newStream(yaml string, consumer *modelConsumer) (*service.Stream, error) {
	b := service.NewStreamBuilder()
	// The default schema knows no custom resources: the walshadow session
	// would fail linting.
	b.SetSchema(service.GlobalEnvironment().FullConfigSchema("", ""))
	if err := b.SetYAML(yaml); err != nil {
		return nil, fmt.Errorf("pipeline config: %w\n%s", err, yaml)
	}
	if err := b.AddBatchConsumerFunc(consumer.consume); err != nil {
		return nil, err
	}
	stream, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("building the stream: %w", err)
	}
	return stream, nil
}

func waitMarker(t *testing.T, c *modelConsumer, token string, runErr <-chan error, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	one := "1"
	for {
		c.mu.Lock()
		row, ok := c.model.Lookup("public.rl_marker", &one)
		c.mu.Unlock()
		if ok && row["token"] != nil && *row["token"] == token {
			return
		}
		select {
		case err := <-runErr:
			t.Fatalf("the stream stopped before the marker arrived: %v (model errors: %v)", err, errors.Join(c.errors()...))
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			c.mu.Lock()
			stats := c.model.Stats()
			c.mu.Unlock()
			t.Fatalf("the marker row did not reach the model within %v (model: %+v; errors: %v)", timeout, stats, errors.Join(c.errors()...))
		}
	}
}

// TestMain runs the test binary as the kill/restart test's child pipeline
// when WALSHADOW_HELPER_CONFIG (a pipeline YAML as pipelineYAML writes) and
// WALSHADOW_HELPER_JOURNAL are set: the parent SIGKILLs it mid-stream,
// starts it again, and replays the journal (rowmodel.ReadJournal) into a
// model. Every batch is in the journal before it is acknowledged.
func TestMain(m *testing.M) {
	config, journal := os.Getenv("WALSHADOW_HELPER_CONFIG"), os.Getenv("WALSHADOW_HELPER_JOURNAL")
	if config == "" || journal == "" {
		os.Exit(m.Run())
	}
	if err := streamToJournal(config, journal); err != nil {
		fmt.Fprintln(os.Stderr, "walshadow helper pipeline:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// streamToJournal runs the pipeline in config until it is killed (or fails).
func streamToJournal(config, journal string) error {
	yaml, err := os.ReadFile(config)
	if err != nil {
		return err
	}
	j, err := rowmodel.OpenJournal(journal)
	if err != nil {
		return err
	}
	defer j.Close()
	consumer := newModelConsumer(j)
	consumer.model = nil // the parent replays the journal
	stream, err := newStream(string(yaml), consumer)
	if err != nil {
		return err
	}
	return stream.Run(context.Background())
}
