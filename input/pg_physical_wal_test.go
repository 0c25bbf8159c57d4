package input

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/walshadow/walshadow/internal/session"
	"github.com/walshadow/walshadow/internal/wal"
)

// fakeSession plays scripted runs: each hands out batches whose
// acknowledgement moves the delivered position to the given LSN, then
// stops with an error. Starts fail with startErrs first.
type fakeSession struct {
	mu        sync.Mutex
	startErrs []error
	runs      []fakeRun
	run       int // index into runs of the current run, -1 before the first
	next      int // batches handed out in the current run
	epoch     uint64
	delivered wal.LSN
	stopped   error
	starts    int
}

type fakeRun struct {
	delivers []wal.LSN // per batch, the delivered position once acknowledged
	stop     string    // the run's error after its batches
}

func (f *fakeSession) Attach(any) {}

func (f *fakeSession) Start(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.starts++
	if len(f.startErrs) > 0 {
		err := f.startErrs[0]
		f.startErrs = f.startErrs[1:]
		return err
	}
	if f.run+1 >= len(f.runs) {
		return session.ErrClosed
	}
	f.run++
	f.next, f.stopped = 0, nil
	f.epoch++
	return nil
}

func (f *fakeSession) Next(context.Context) (*session.Batch, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.runs[f.run]
	if f.stopped == nil && f.next < len(r.delivers) {
		f.next++
		return &session.Batch{Seq: uint64(f.next), Epoch: f.epoch}, nil
	}
	if f.stopped == nil {
		f.stopped = errors.New(strings.ReplaceAll(r.stop, "RUN", fmt.Sprint(f.epoch)))
	}
	return nil, fmt.Errorf("%w: %w", session.ErrStopped, f.stopped)
}

func (f *fakeSession) Ack(b *session.Batch) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if b.Epoch == f.epoch && f.stopped == nil {
		f.delivered = f.runs[f.run].delivers[b.Seq-1]
	}
}

func (f *fakeSession) Fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped == nil {
		f.stopped = err
	}
}

func (f *fakeSession) Epoch() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.epoch
}

func (f *fakeSession) Delivered() wal.LSN {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.delivered
}

// lineRecorder keeps the messages logged at error level and above.
type lineRecorder struct {
	mu    sync.Mutex
	lines []string
}

func (r *lineRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *lineRecorder) Handle(_ context.Context, rec slog.Record) error {
	if rec.Level >= slog.LevelError {
		r.mu.Lock()
		r.lines = append(r.lines, rec.Message)
		r.mu.Unlock()
	}
	return nil
}
func (r *lineRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *lineRecorder) WithGroup(string) slog.Handler      { return r }

func newTestInput(f *fakeSession) (*physicalWALInput, *lineRecorder, *[]time.Duration) {
	rec := &lineRecorder{}
	mgr := service.MockResources(service.MockResourcesOptUseLogger(service.NewLoggerFromSlog(slog.New(rec))))
	var waits []time.Duration
	in := &physicalWALInput{label: "main", mgr: mgr, sess: f, restarts: newRestartPolicy(),
		sleep: func(_ context.Context, d time.Duration) error {
			waits = append(waits, d)
			return nil
		}}
	return in, rec, &waits
}

// drive runs the input as Benthos does: Connect, then ReadBatch until it
// reports the session stopped, acknowledging every batch, until the input
// ends.
func drive(t *testing.T, in *physicalWALInput) {
	t.Helper()
	ctx := context.Background()
	for {
		if err := in.Connect(ctx); err != nil {
			if errors.Is(err, service.ErrEndOfInput) {
				return
			}
			t.Fatalf("Connect: %v", err)
		}
		for {
			_, ack, err := in.ReadBatch(ctx)
			if errors.Is(err, service.ErrNotConnected) {
				break
			}
			if err != nil {
				t.Fatalf("ReadBatch: %v", err)
			}
			if err := ack(ctx, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestInputBacksOffARecurringFailure is the user report: a run acknowledges
// a few batches (again), then fails at the same record. The restarts back
// off to 30 s and stay there; one line per restart, the error in full the
// first time only; progress past the failing record starts afresh.
func TestInputBacksOffARecurringFailure(t *testing.T) {
	same := fakeRun{delivers: []wal.LSN{90, 100}, stop: "batch 3 of run RUN was not delivered: code 241: memory limit exceeded"}
	runs := []fakeRun{{delivers: []wal.LSN{50, 90, 100}, stop: same.stop}}
	for range 8 {
		runs = append(runs, same)
	}
	// The failing record goes through at last; a later failure starts
	// the back-off again, logged in full.
	runs = append(runs, fakeRun{delivers: []wal.LSN{100, 200}, stop: "decoding the record at 0/5000028: bad tuple"},
		fakeRun{delivers: []wal.LSN{200}, stop: "decoding the record at 0/5000028: bad tuple"})
	f := &fakeSession{runs: runs, run: -1}
	in, rec, waits := newTestInput(f)
	drive(t, in)

	const s = time.Second
	want := []time.Duration{1 * s, 2 * s, 4 * s, 8 * s, 16 * s, 30 * s, 30 * s, 30 * s, 30 * s, 1 * s, 2 * s}
	if fmt.Sprint(*waits) != fmt.Sprint(want) {
		t.Errorf("waits %v, want %v", *waits, want)
	}
	if len(rec.lines) != len(runs) {
		t.Fatalf("%d lines for %d stops:\n%s", len(rec.lines), len(runs), strings.Join(rec.lines, "\n"))
	}
	if l := rec.lines[0]; l != "walshadow session stopped: batch 3 of run 1 was not delivered: code 241: memory limit exceeded; restarting it in 1s" {
		t.Errorf("first line %q", l)
	}
	for i, l := range rec.lines[1:9] {
		wantPrefix := fmt.Sprintf("walshadow session still failing: batch 3 of run %d was not delivered: code 241: memory limit exceeded (%d times since ", i+2, i+2)
		if !strings.HasPrefix(l, wantPrefix) || !strings.HasSuffix(l, fmt.Sprintf("; next restart in %s)", want[i+1])) {
			t.Errorf("line %d %q, want %q...", i+2, l, wantPrefix)
		}
	}
	if l := rec.lines[9]; l != "walshadow session stopped: decoding the record at 0/5000028: bad tuple; restarting it in 1s" {
		t.Errorf("line after progress %q", l)
	}
	if l := rec.lines[10]; !strings.HasPrefix(l, "walshadow session still failing: decoding the record at 0/5000028: bad tuple (2 times since ") {
		t.Errorf("last line %q", l)
	}
}

// TestInputRetriesAFailedStartItself: Connect does not hand a failed start
// to Benthos (which would log it at every retry, 1 s apart): it backs off
// and retries, one line per attempt.
func TestInputRetriesAFailedStartItself(t *testing.T) {
	gone := func() error {
		return errors.New(`bootstrapping the shadow: connecting to the source: dial tcp 127.0.0.1:5432: connect: connection refused`)
	}
	f := &fakeSession{startErrs: []error{gone(), gone(), gone(), gone()}, run: -1,
		runs: []fakeRun{{delivers: []wal.LSN{10}, stop: "the shadow exited"}}}
	in, rec, waits := newTestInput(f)
	if err := in.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	if f.starts != 5 {
		t.Errorf("%d starts, want 5", f.starts)
	}
	if fmt.Sprint(*waits) != "[1s 2s 4s 8s]" {
		t.Errorf("waits %v", *waits)
	}
	if len(rec.lines) != 4 || rec.lines[0] != "walshadow session could not start: "+gone().Error()+"; retrying in 1s" ||
		!strings.HasPrefix(rec.lines[3], "walshadow session still failing: "+gone().Error()+" (4 times since ") {
		t.Errorf("lines:\n%s", strings.Join(rec.lines, "\n"))
	}
	// The run's stop continues the streak: nothing was delivered since.
	_, ack, err := in.ReadBatch(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_ = ack(context.Background(), nil) // delivered 10: past the 0 of the failed starts
	if _, _, err := in.ReadBatch(context.Background()); !errors.Is(err, service.ErrNotConnected) {
		t.Fatalf("ReadBatch after the stop: %v", err)
	}
	if l := rec.lines[len(rec.lines)-1]; l != "walshadow session stopped: the shadow exited; restarting it in 1s" {
		t.Errorf("stop after progress: %q", l)
	}
}

// TestInputNackFailsTheRun: a refused batch stops the run with an error
// naming it, which the next ReadBatch reports once.
func TestInputNackFailsTheRun(t *testing.T) {
	f := &fakeSession{run: -1, runs: []fakeRun{{delivers: []wal.LSN{10, 20}, stop: "unused"}}}
	in, rec, _ := newTestInput(f)
	ctx := context.Background()
	if err := in.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	_, ack, err := in.ReadBatch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = ack(ctx, errors.New("clickhouse: connection reset"))
	if _, _, err := in.ReadBatch(ctx); !errors.Is(err, service.ErrNotConnected) {
		t.Fatalf("ReadBatch after a nack: %v", err)
	}
	want := "walshadow session stopped: batch 1 of run 1 was not delivered: clickhouse: connection reset; restarting it in 1s"
	if len(rec.lines) != 1 || rec.lines[0] != want {
		t.Errorf("lines %q, want [%q]", rec.lines, want)
	}
	if err := in.Connect(ctx); !errors.Is(err, service.ErrEndOfInput) {
		t.Errorf("Connect on a closed session: %v", err)
	}
}
