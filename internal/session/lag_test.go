package session

import (
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/wal"
)

func TestLagClock(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	var c lagClock
	c.observe(1000, t0)
	c.observe(2000, t0.Add(2*time.Second))
	c.observe(3000, t0.Add(5*time.Second))
	now := t0.Add(6 * time.Second)
	for _, tc := range []struct {
		pos   wal.LSN
		bytes int64
		secs  float64
	}{
		{3000, 0, 0},    // caught up
		{3500, 0, 0},    // ahead of the newest sample (the end moved since)
		{2500, 500, 1},  // behind since the source passed 2500 at t0+5s
		{1500, 1500, 4}, // since t0+2s
		{500, 2500, 6},  // since t0
		{2000, 1000, 1}, // exactly at a sample: behind since the next one
	} {
		b, s := c.lag(tc.pos, now)
		if b != tc.bytes || s != tc.secs {
			t.Errorf("lag(%d) = %d bytes %.1f s, want %d %.1f", tc.pos, b, s, tc.bytes, tc.secs)
		}
	}
	// An idle source: the end is far ahead of nothing, no lag.
	if b, s := c.lag(3000, t0.Add(time.Hour)); b != 0 || s != 0 {
		t.Errorf("idle: %d %.1f", b, s)
	}
	// Samples inside lagMinInterval merge and keep the first time.
	c.observe(3100, t0.Add(5*time.Second+10*time.Millisecond))
	if n := len(c.samples); n != 3 || c.samples[2].lsn != 3100 || !c.samples[2].at.Equal(t0.Add(5*time.Second)) {
		t.Errorf("merge: %+v", c.samples)
	}
	// Pruning keeps the sample that dates the stretch after pos.
	c.prune(2500)
	if len(c.samples) != 2 || c.samples[0].lsn != 2000 {
		t.Errorf("prune: %+v", c.samples)
	}
	if _, s := c.lag(2500, now); s != 1 {
		t.Errorf("after prune lag(2500) = %.1f s", s)
	}
	// Bounded memory.
	var d lagClock
	for i := range 3 * lagMaxSamples {
		d.observe(wal.LSN(i+1), t0.Add(time.Duration(i)*time.Second))
	}
	if len(d.samples) > lagMaxSamples {
		t.Errorf("%d samples kept", len(d.samples))
	}
	if _, s := d.lag(0, t0.Add(time.Duration(3*lagMaxSamples)*time.Second)); s != float64(3*lagMaxSamples) {
		t.Errorf("oldest sample lost: %.0f", s)
	}
}
