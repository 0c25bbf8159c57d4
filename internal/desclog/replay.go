package desclog

import (
	"errors"
	"fmt"

	"github.com/walshadow/walshadow/internal/wal"
)

// Plan is what a catalog boundary needs, as PlanBoundary decides it.
type Plan uint8

const (
	// PlanCapture: the log has no batch for the boundary yet: hold,
	// Capture, Append.
	PlanCapture Plan = iota + 1
	// PlanReplay: the batch is stored (a re-read after a restart): take its
	// events from ReplayEvents, run no capture.
	PlanReplay
	// PlanSkip: the boundary is at or below the horizon, baked into the
	// checkpoint (seed or compaction); nothing to capture or replay.
	PlanSkip
)

func (p Plan) String() string {
	switch p {
	case PlanCapture:
		return "capture"
	case PlanReplay:
		return "replay"
	case PlanSkip:
		return "skip"
	}
	return fmt.Sprintf("plan(%d)", uint8(p))
}

// ErrCoverageLost: a boundary the log should hold is missing and cannot be
// captured any more (the shadow replayed past it, so its catalogs no longer
// show that state). Fatal; the log must be rebuilt.
var ErrCoverageLost = errors.New("descriptor log lost coverage")

// PlanBoundary decides how to handle the boundary at nextLSN given how far
// the shadow has replayed: skip (baked in), replay the stored batch, or
// capture. A missing batch is an ErrCoverageLost when the shadow is past
// the boundary, or when later batches exist: the log can only grow at its
// end, in boundary order.
func (l *Log) PlanBoundary(nextLSN, shadowReplay wal.LSN) (Plan, *Batch, error) {
	ix := l.snap.Load()
	if !ix.seeded {
		return 0, nil, fmt.Errorf("boundary at %s: the descriptor log is not seeded", nextLSN)
	}
	if nextLSN <= ix.horizon() {
		return PlanSkip, nil, nil
	}
	if b, ok := ix.batchAt(nextLSN); ok {
		return PlanReplay, b, nil
	}
	var why string
	switch last := ix.lastCapturedAt(); {
	case shadowReplay > nextLSN:
		why = fmt.Sprintf("the shadow has already replayed to %s", shadowReplay)
	case nextLSN < last:
		why = fmt.Sprintf("the log already holds a later batch at %s", last)
	default:
		return PlanCapture, nil, nil
	}
	return 0, nil, fmt.Errorf("%w: no batch for the catalog boundary at %s and %s, so its catalog state cannot be captured again; "+
		"remedy: stop walshadow and start it on an empty state_dir, which re-bootstraps the shadow and re-seeds the log (%s and %s in %s cannot be repaired)",
		ErrCoverageLost, nextLSN, why, CheckpointFile, TailFile, l.dir)
}

// ReplayEvents re-derives a stored batch's events from its entries against
// each relation's history before the batch, with no capture: the same
// events the original capture produced, on every replay.
func (l *Log) ReplayEvents(b *Batch) []Event { return l.snap.Load().eventsFor(b) }
