package input

import (
	"time"

	"github.com/walshadow/walshadow/internal/wal"
)

// restartPolicy decides how long the input waits before it restarts a
// stopped session: a pure state machine, one event (a stop, with the
// session's progress position at that moment) in, a wait out.
//
// The position is how far downstream has acknowledged the stream (the
// session's delivered commit LSN). A stop counts as progress when that
// position passed the highest one seen at any earlier stop: the run got
// past where the previous one stopped. Consecutive stops without progress
// back off from initial, doubling, to max, and stay at max until a run
// makes progress; the stop after progress waits initial again. A run that
// acknowledges a few batches and then fails at the same record as before
// is no progress: the restart re-reads those batches from the resume
// point, and the delivered position is where it was at the previous stop.
type restartPolicy struct {
	initial, max time.Duration

	streak int     // consecutive stops without progress, the last one included
	mark   wal.LSN // the highest position seen at a stop
	marked bool    // a stop has been seen
}

// restartDecision is the policy's answer to one stop.
type restartDecision struct {
	// Wait before the next start.
	Wait time.Duration
	// Streak is the number of consecutive stops without progress, this one
	// included (1: the first stop, or the first after progress).
	Streak int
	// Progress: the session got past the previous stop (Streak is 1
	// again). False for the very first stop.
	Progress bool
}

func newRestartPolicy() restartPolicy {
	return restartPolicy{initial: time.Second, max: 30 * time.Second}
}

// stopped records a stop of the session whose progress position was pos.
func (p *restartPolicy) stopped(pos wal.LSN) restartDecision {
	var d restartDecision
	switch {
	case !p.marked:
		p.streak = 1
	case pos > p.mark:
		p.streak, d.Progress = 1, true
	default:
		p.streak++
	}
	p.marked, p.mark = true, max(p.mark, pos)
	d.Streak, d.Wait = p.streak, p.backoff(p.streak)
	return d
}

// backoff is the wait before the restart ending a streak of n stops.
func (p *restartPolicy) backoff(n int) time.Duration {
	w := p.initial
	for i := 1; i < n && w < p.max; i++ {
		w *= 2
	}
	return min(w, p.max)
}
