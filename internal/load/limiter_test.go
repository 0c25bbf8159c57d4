package load

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// fakeClock is a clock whose sleeps advance it at once.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	slept  []time.Duration
	cancel bool // sleeps fail as if their context were cancelled
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.slept = append(c.slept, d)
	if c.cancel {
		return context.Canceled
	}
	c.now = c.now.Add(d)
	return nil
}

func (c *fakeClock) sleeps() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.slept)
}

// bytesWithin feeds the limiter chunk-byte requests until the clock passes
// window and returns the bytes that were let through within it.
func bytesWithin(t *testing.T, l *Limiter, c *fakeClock, chunk int, window time.Duration) int64 {
	t.Helper()
	start := c.Now()
	var passed int64
	for {
		if err := l.Wait(context.Background(), chunk); err != nil {
			t.Fatal(err)
		}
		if c.Now().Sub(start) > window {
			return passed
		}
		passed += int64(chunk)
	}
}

func TestLimiterRate(t *testing.T) {
	for _, c := range []struct {
		rate  int64
		chunk int
	}{
		// Chunks up to a fifth of the rate: a coarser chunk cannot meet ±20% in one second.
		{1 << 20, 64 << 10}, {10 << 20, 1 << 20}, {1000, 1}, {5000, 1000}, {100 << 20, 7 << 20},
	} {
		clock := newFakeClock()
		l := newLimiterClock(c.rate, clock.Now, clock.Sleep)
		// From the start the bucket is empty: one second passes about rate bytes.
		got := bytesWithin(t, l, clock, c.chunk, time.Second)
		if lo, hi := float64(c.rate)*0.8, float64(c.rate)*1.2; float64(got) < lo || float64(got) > hi {
			t.Errorf("rate %d, chunks of %d: %d bytes in the first second, want %.0f..%.0f", c.rate, c.chunk, got, lo, hi)
		}
		// Steady state, a later second: the same.
		got = bytesWithin(t, l, clock, c.chunk, time.Second)
		if lo, hi := float64(c.rate)*0.8, float64(c.rate)*1.2; float64(got) < lo || float64(got) > hi {
			t.Errorf("rate %d, chunks of %d: %d bytes in a later second, want %.0f..%.0f", c.rate, c.chunk, got, lo, hi)
		}
	}
}

func TestLimiterBurstsOneSecondAfterIdle(t *testing.T) {
	clock := newFakeClock()
	const rate = 1 << 20
	l := newLimiterClock(rate, clock.Now, clock.Sleep)
	clock.Advance(10 * time.Second)
	for range 16 {
		if err := l.Wait(context.Background(), rate/16); err != nil {
			t.Fatal(err)
		}
	}
	if n := clock.sleeps(); n != 0 {
		t.Fatalf("one second's worth after idling slept %d times, want none", n)
	}
	// The bucket holds one second, not ten: the next byte waits.
	if err := l.Wait(context.Background(), rate/4); err != nil {
		t.Fatal(err)
	}
	if clock.sleeps() != 1 || clock.slept[0] != 250*time.Millisecond {
		t.Fatalf("after the burst slept %v, want one 250ms sleep", clock.slept)
	}
}

func TestLimiterRequestLargerThanBurst(t *testing.T) {
	clock := newFakeClock()
	l := newLimiterClock(1000, clock.Now, clock.Sleep)
	if err := l.Wait(context.Background(), 3000); err != nil {
		t.Fatal(err)
	}
	if len(clock.slept) != 1 || clock.slept[0] != 3*time.Second {
		t.Fatalf("3000 bytes at 1000/s slept %v, want 3s", clock.slept)
	}
}

func TestLimiterCancelGivesBytesBack(t *testing.T) {
	clock := newFakeClock()
	l := newLimiterClock(1000, clock.Now, clock.Sleep)
	clock.cancel = true
	if err := l.Wait(context.Background(), 500); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
	clock.cancel = false
	// Had the cancelled 500 bytes stayed in debt, this would wait 1s.
	if err := l.Wait(context.Background(), 500); err != nil {
		t.Fatal(err)
	}
	if got := clock.slept[len(clock.slept)-1]; got != 500*time.Millisecond {
		t.Fatalf("after a cancelled wait slept %v, want 500ms", got)
	}
}

func TestLimiterUnlimited(t *testing.T) {
	var nilLimiter *Limiter
	for _, l := range []*Limiter{NewLimiter(0), NewLimiter(-1), nilLimiter} {
		if err := l.Wait(context.Background(), 1<<30); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLimiterRealClockConcurrent shares a real limiter between workers:
// no timing assertion, only that cancellation ends the waits and nothing
// races.
func TestLimiterRealClockConcurrent(t *testing.T) {
	l := NewLimiter(1 << 20)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			for {
				if err := l.Wait(ctx, 64<<10); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	time.Sleep(50 * time.Millisecond)
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("worker ended with %v, want context.Canceled", err)
		}
	}
}
