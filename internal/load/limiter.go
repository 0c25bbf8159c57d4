package load

import (
	"context"
	"sync"
	"time"
)

// Limiter is a token bucket of bytes per second shared by a load's
// workers. A zero rate, or a nil *Limiter, is unlimited. The bucket starts
// empty and holds at most one second's worth, so over any window of T
// seconds at most rate×(T+1) bytes pass, and at most rate×T from the start.
// A request larger than the bucket passes after the time it is worth: it
// takes the bucket into debt that later requests wait out.
type Limiter struct {
	rate  float64 // bytes per second; 0 unlimited
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error

	mu     sync.Mutex
	tokens float64 // bytes that may pass now; negative is debt
	last   time.Time
}

// NewLimiter returns a limiter of bytesPerSecond (≤ 0 is unlimited).
func NewLimiter(bytesPerSecond int64) *Limiter {
	return newLimiterClock(bytesPerSecond, time.Now, sleepContext)
}

// newLimiterClock is NewLimiter with the clock and the sleep injected, for
// tests.
func newLimiterClock(bytesPerSecond int64, now func() time.Time, sleep func(ctx context.Context, d time.Duration) error) *Limiter {
	return &Limiter{rate: float64(max(bytesPerSecond, 0)), now: now, sleep: sleep, last: now()}
}

// Wait blocks until n bytes may pass, or ctx is done (its error is
// returned and the n bytes are given back).
func (l *Limiter) Wait(ctx context.Context, n int) error {
	if l == nil || l.rate == 0 || n <= 0 {
		return nil
	}
	l.mu.Lock()
	now := l.now()
	if elapsed := now.Sub(l.last); elapsed > 0 {
		l.tokens = min(l.tokens+elapsed.Seconds()*l.rate, l.rate)
		l.last = now
	}
	l.tokens -= float64(n)
	debt := -l.tokens
	l.mu.Unlock()
	if debt <= 0 {
		return nil
	}
	if err := l.sleep(ctx, time.Duration(debt/l.rate*float64(time.Second))); err != nil {
		l.mu.Lock()
		l.tokens = min(l.tokens+float64(n), l.rate)
		l.mu.Unlock()
		return err
	}
	return nil
}

func sleepContext(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
