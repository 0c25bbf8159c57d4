package session

import (
	"time"

	"github.com/walshadow/walshadow/internal/wal"
)

// The session's progress arithmetic, pure: the positions a tick observed
// in, the decisions out (what to persist, what to report to the source's
// slot, what the spool, the descriptor log and the archive may let go).
// Session.tick does the I/O around it.

// progressIn is what one tick observed.
type progressIn struct {
	now     time.Time
	saved   Manifest  // the manifest last written
	savedAt time.Time // when
	segSize uint32

	received        wal.LSN // the spool's end: the next byte from the source
	spooled         wal.LSN // the spool's durable end
	filteredDurable wal.LSN // the archive's durable end
	apply           wal.LSN // the shadow's apply position (0: not known yet)
	// floor, delivered and deliveredThrough as Session.floor computes them.
	floor, delivered, deliveredThrough wal.LSN

	releaseSpooled bool    // spool.release_slot: spooled
	flushSent      wal.LSN // the flush position last sent early
	retention      int64   // archive_retention_bytes
}

// progressOut is what the tick does.
type progressOut struct {
	// manifest is the progress to persist when write is set.
	manifest Manifest
	write    bool
	// The positions reported to the source: write, flush (what its slot
	// may release) and apply.
	slotWrite, slotFlush, slotApply wal.LSN
	// sendStatus: report them now, not at the next status interval.
	sendStatus bool
	// restartMoved: the restart point passed a segment; the spool may drop
	// what is below trimBelow, the descriptor log compact below it, the
	// archive drop what is below archiveKeep (0: nothing).
	restartMoved bool
	trimBelow    wal.LSN
	archiveKeep  wal.LSN
}

// Persisting: at once when a restart point or the delivered position
// moved, the floor at most every floorEvery, anything else every
// refreshEvery.
const (
	floorEvery   = time.Second
	refreshEvery = 10 * time.Second
)

// decideProgress is one tick's decisions.
func decideProgress(in progressIn) progressOut {
	m := in.saved
	m.Received, m.FilteredDurable, m.ShadowReplay = in.received, in.filteredDurable, max(in.apply, m.ShadowReplay)
	// Past the last acknowledged commit, with nothing pending, every
	// transaction committed before what was consumed is delivered too.
	m.Delivered = max(in.delivered, in.deliveredThrough, m.Delivered)
	m.Floor = max(in.floor, m.Floor)
	m.Restart = max(m.Floor-m.Floor%wal.LSN(in.segSize), m.Restart)
	var out progressOut
	out.restartMoved = m.Restart > in.saved.Restart
	out.write = out.restartMoved || m.Delivered > in.saved.Delivered ||
		(m.Floor > in.saved.Floor && in.now.Sub(in.savedAt) >= floorEvery) ||
		(m != in.saved && in.now.Sub(in.savedAt) >= refreshEvery)
	kept := in.saved
	if out.write {
		m.UpdatedAt = in.now
		kept = m
	}
	out.manifest = m
	// The slot keeps WAL from the segment holding its flush position: the
	// stored floor (release_slot: delivered), so a restart finds every byte
	// it reads again on the source too; or the spool's durable end
	// (spooled), the spool then being the only copy.
	out.slotWrite, out.slotFlush, out.slotApply = in.received, kept.Floor, kept.Floor
	if in.releaseSpooled {
		out.slotFlush = max(in.spooled, kept.Floor)
		// Released WAL leaves the source at the next status: do not wait
		// for the status interval when much was spooled since.
		out.sendStatus = out.slotFlush >= in.flushSent+spoolStatusBytes
	}
	if out.restartMoved {
		out.trimBelow = kept.Restart
		// The archive keeps what the shadow may still need: everything
		// from retention bytes behind its apply position.
		if keep := wal.LSN(in.retention); in.apply > keep {
			out.archiveKeep = min(in.apply-keep, kept.Restart)
		}
	}
	return out
}
