package load

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestLockQueueSharesHolds: work asked for while a hold is being waited
// for runs in the next hold, each piece once, under the lock alone, and
// each caller gets its own piece's result.
func TestLockQueueSharesHolds(t *testing.T) {
	var outputLock sync.Mutex
	var holds, inside atomic.Int32
	release := make(chan struct{})
	q := &lockQueue{ctx: context.Background(), hold: func(ctx context.Context, fn func() error) error {
		outputLock.Lock()
		defer outputLock.Unlock()
		if holds.Add(1) == 1 {
			<-release // the first hold waits (a long batch) while the others queue
		}
		if inside.Add(1) != 1 {
			return errors.New("two holds at once")
		}
		defer inside.Add(-1)
		return fn()
	}}
	const n = 50
	ran := make([]atomic.Int32, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = q.run(func() error {
				ran[i].Add(1)
				if i%7 == 0 {
					return fmt.Errorf("work %d failed", i)
				}
				return nil
			})
		}()
		if i == 0 {
			time.Sleep(10 * time.Millisecond) // the first leads and waits in its hold
		}
	}
	time.Sleep(50 * time.Millisecond)
	close(release)
	wg.Wait()
	for i := range n {
		if ran[i].Load() != 1 {
			t.Errorf("work %d ran %d times", i, ran[i].Load())
		}
		want := ""
		if i%7 == 0 {
			want = fmt.Sprintf("work %d failed", i)
		}
		if got := fmt.Sprint(errs[i]); (errs[i] == nil) != (want == "") || (want != "" && got != want) {
			t.Errorf("work %d returned %v, want %q", i, errs[i], want)
		}
	}
	if h := holds.Load(); h > 3 {
		t.Errorf("%d pieces of work took %d holds: the waiting ones did not share", n, h)
	}
}

// TestLockQueueHoldFails: a hold that cannot be had (the output's
// ClickHouse unreachable) fails the work waiting for it, which does not
// run; the next work gets a hold of its own.
func TestLockQueueHoldFails(t *testing.T) {
	fail := errors.New("checking whether ClickHouse restarted: connection refused")
	var failing atomic.Bool
	failing.Store(true)
	q := &lockQueue{ctx: context.Background(), hold: func(ctx context.Context, fn func() error) error {
		if failing.Load() {
			return fail
		}
		return fn()
	}}
	ran := false
	if err := q.run(func() error { ran = true; return nil }); !errors.Is(err, fail) || ran {
		t.Fatalf("work under a failed hold: %v (ran: %v)", err, ran)
	}
	failing.Store(false)
	if err := q.run(func() error { ran = true; return nil }); err != nil || !ran {
		t.Fatalf("work after the failure: %v (ran: %v)", err, ran)
	}
}
