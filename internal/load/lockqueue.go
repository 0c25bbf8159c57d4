package load

import (
	"context"
	"sync"
)

// lockQueue runs the loads' work that needs the output's lock (making a
// staging table, publishing) in shared holds: the work of every load that
// asks while one hold is being waited for runs in the next, one piece
// after another, so that thousands of small loads neither take the lock
// twice each nor each have the output check ClickHouse for a restart
// (which every hold does first). Each piece keeps its own result; the
// output's batches still come between two holds.
type lockQueue struct {
	// hold takes the output's lock once and runs fn under it
	// (Destination.WithLock); ctx is the engine's: a hold fails for all
	// its work only when the engine closes or the output cannot take it
	// (ClickHouse unreachable), never for one load's cancellation.
	hold func(ctx context.Context, fn func() error) error
	ctx  context.Context

	mu      sync.Mutex
	pending []*lockedWork
	leading bool // a goroutine is taking holds for the pending work
}

type lockedWork struct {
	fn   func() error
	done chan error
}

// run runs fn under the output's lock, in a hold shared with the other
// loads' work that is waiting, and returns fn's error (or the hold's,
// when the lock could not be had: fn did not run). fn watches its own
// load's context.
func (q *lockQueue) run(fn func() error) error {
	w := &lockedWork{fn: fn, done: make(chan error, 1)}
	q.mu.Lock()
	q.pending = append(q.pending, w)
	lead := !q.leading
	q.leading = true
	q.mu.Unlock()
	if lead {
		q.lead()
	}
	return <-w.done
}

// lead takes holds until no work is pending.
func (q *lockQueue) lead() {
	for {
		q.mu.Lock()
		work := q.pending
		q.pending = nil
		if len(work) == 0 {
			q.leading = false
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		ran := 0
		err := q.hold(q.ctx, func() error {
			for _, w := range work {
				ran++
				w.done <- w.fn()
			}
			return nil
		})
		for _, w := range work[ran:] {
			w.done <- err // the hold failed before this work ran
		}
	}
}
