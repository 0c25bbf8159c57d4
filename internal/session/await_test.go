package session

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"
)

// TestAwaitEarlier: a batch's turn comes once every earlier batch of its
// run is acknowledged, whatever order they are acknowledged in; a run that
// stops releases its waiters; a batch whose predecessors are done does not
// wait.
func TestAwaitEarlier(t *testing.T) {
	s := &Session{epoch: 3, parts: &parts{}, log: slog.New(slog.DiscardHandler)}
	b1, b2, b3 := &Batch{Seq: 1, Epoch: 3}, &Batch{Seq: 2, Epoch: 3}, &Batch{Seq: 3, Epoch: 3}
	s.pending = []*Batch{b1, b2, b3}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	if waited, err := s.AwaitEarlier(ctx, 3, 1); waited || err != nil {
		t.Fatalf("batch 1: waited %v, %v; want no wait", waited, err)
	}
	done := make(chan bool, 1)
	go func() {
		waited, err := s.AwaitEarlier(ctx, 3, 3)
		if err != nil {
			t.Error(err)
		}
		done <- waited
	}()
	s.Ack(b2) // out of order: batch 1 still pending
	select {
	case <-done:
		t.Fatal("batch 3's turn came with batch 1 unacknowledged")
	case <-time.After(50 * time.Millisecond):
	}
	s.Ack(b1)
	select {
	case waited := <-done:
		if !waited {
			t.Error("batch 3 waited but says it did not")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("batch 3's turn did not come after batches 1 and 2 were acknowledged")
	}

	// A stopped run releases its waiters (WriteBatch's stale check then
	// refuses the batch).
	b4, b5 := &Batch{Seq: 4, Epoch: 3}, &Batch{Seq: 5, Epoch: 3}
	s.pending = append(s.pending, b4, b5)
	go func() {
		_, err := s.AwaitEarlier(ctx, 3, 5)
		done <- err == nil
	}()
	time.Sleep(20 * time.Millisecond)
	s.failRun(errors.New("stopped"))
	select {
	case ok := <-done:
		if !ok {
			t.Error("a waiter released by a stopped run got an error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a stopped run did not release its waiter")
	}
	if s.Live(3) {
		t.Error("run 3 still live after failRun")
	}

	// Another run's batch does not wait; a cancelled context ends a wait.
	if waited, err := s.AwaitEarlier(ctx, 2, 9); waited || err != nil {
		t.Errorf("a stale run's batch: waited %v, %v", waited, err)
	}
	s2 := &Session{epoch: 1, parts: &parts{}, pending: []*Batch{{Seq: 1, Epoch: 1}, {Seq: 2, Epoch: 1}}}
	cctx, ccancel := context.WithCancel(ctx)
	ccancel()
	if _, err := s2.AwaitEarlier(cctx, 1, 2); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled wait: %v, want context.Canceled", err)
	}
}

// TestAwaitRoom: the input waits while the batches handed out and not
// acknowledged hold max_pending_bytes of records; an acknowledgement of
// the head that makes room lets it go on, one out of order does not; with
// nothing pending one batch always goes out; closing the session ends the
// wait.
func TestAwaitRoom(t *testing.T) {
	s := &Session{epoch: 1, parts: &parts{}, log: slog.New(slog.DiscardHandler), closedCh: make(chan struct{})}
	s.cfg.MaxPendingBytes = 100
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.awaitRoom(ctx, nil); err != nil {
		t.Fatalf("nothing pending: %v", err)
	}
	b1, b2, b3 := &Batch{Seq: 1, Epoch: 1, size: 60}, &Batch{Seq: 2, Epoch: 1, size: 30}, &Batch{Seq: 3, Epoch: 1, size: 20}
	s.pending = []*Batch{b1, b2, b3} // 110 bytes
	room := make(chan error, 1)
	go func() { room <- s.awaitRoom(ctx, nil) }()
	s.Ack(b2) // out of order: still 110 bytes pending
	select {
	case err := <-room:
		t.Fatalf("went on with 110 of 100 bytes pending (%v)", err)
	case <-time.After(50 * time.Millisecond):
	}
	s.Ack(b1) // the head and b2 go: 20 bytes
	select {
	case err := <-room:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no room after the head was acknowledged")
	}

	s.pending = []*Batch{{Seq: 4, Epoch: 1, size: 500}} // one batch over the budget
	go func() { room <- s.awaitRoom(ctx, nil) }()
	close(s.closedCh)
	select {
	case err := <-room:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("closed while waiting: %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("closing the session did not end the wait")
	}
}
