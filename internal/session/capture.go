package session

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/shadow"
	"github.com/walshadow/walshadow/internal/statefile"
	"github.com/walshadow/walshadow/internal/wal"
)

func (s *Session) descLogDir() string { return statefile.StateDir(s.cfg.StateDir).DescLog() }

// DescLog is the session's descriptor log (nil before Start).
func (s *Session) DescLog() *desclog.Log {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.parts == nil {
		return nil
	}
	return s.parts.desclog
}

// PageCopied reports whether the source wrote a block of rfn's main fork
// as a whole page image (filter.Filter.PageCopied): its
// file was filled by copying pages, not by the heap inserts of a rewrite.
// False before Start.
func (s *Session) PageCopied(rfn wal.RelFileNode) bool {
	s.mu.Lock()
	p := s.parts
	s.mu.Unlock()
	return p != nil && p.filter != nil && p.filter.PageCopied(rfn)
}

// openDescLog opens the descriptor log bound to the source's identity,
// before the shadow starts: a log of another source or a corrupt one stops
// the start with nothing changed.
func (s *Session) openDescLog(p *parts) error {
	log, err := desclog.Open(s.descLogDir(), desclog.Identity{
		PGMajor:     uint32(p.boot.ServerVersionNum / 10000),
		SystemID:    p.identity.SystemID,
		Timeline:    p.identity.Timeline,
		DbOid:       p.boot.FollowedDBOID,
		SegmentSize: p.segSize,
	})
	switch {
	case errors.Is(err, desclog.ErrIdentityMismatch):
		return fmt.Errorf("%w: descriptor log %s belongs to another source (%v): restore this state directory's own desclog from a backup, or start with a fresh state_dir", errCorruptState, s.descLogDir(), err)
	case errors.Is(err, desclog.ErrCorrupt):
		return fmt.Errorf("%w: descriptor log %s is corrupt (%v): restore it from a backup of the state directory, or start with a fresh state_dir", errCorruptState, s.descLogDir(), err)
	case err != nil:
		return fmt.Errorf("%w: opening the descriptor log %s: %v", errCorruptState, s.descLogDir(), err)
	}
	p.desclog = log
	return nil
}

// seedDescLog seeds an empty descriptor log from the shadow's catalogs:
// every user relation, valid from the stream's start, covered through the
// shadow's replay position.
func (s *Session) seedDescLog(ctx context.Context, p *parts, start wal.LSN) error {
	log := p.desclog
	if log.Seeded() {
		return nil
	}
	// The shadow replays only its own pg_wal and archive until the pump
	// runs, so its catalogs stand still once it is consistent.
	if _, err := p.shadow.WaitForReplay(ctx, p.boot.EndLSN); err != nil {
		return fmt.Errorf("waiting for the shadow to be consistent before seeding the descriptor log: %w", err)
	}
	for attempt := 0; ; attempt++ {
		before, err := p.shadow.ReplayLSN(ctx)
		if err != nil {
			return err
		}
		s.captureMu.Lock()
		descs, err := s.readShadowDescriptors(ctx, p, nil)
		s.captureMu.Unlock()
		if err != nil {
			return err
		}
		after, err := p.shadow.ReplayLSN(ctx)
		if err != nil {
			return err
		}
		if before != after {
			if attempt < 20 {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			return fmt.Errorf("seeding the descriptor log: the shadow kept replaying (%s → %s)", before, after)
		}
		covered := max(after, start)
		if _, err := log.Seed(covered, min(start, after), descs); err != nil {
			return fmt.Errorf("seeding the descriptor log: %w", err)
		}
		s.log.Info("seeded the descriptor log", "relations", len(descs), "covered_through", covered.String())
		return nil
	}
}

// readShadowDescriptors reads shapes from the shadow's followed database;
// the caller holds captureMu.
func (s *Session) readShadowDescriptors(ctx context.Context, p *parts, oids []uint32) ([]desclog.Descriptor, error) {
	// The caller holds captureMu, which guards p.captureConn. A kept
	// connection that fails is dropped and the read tried once on a new
	// one (the shadow may have restarted under it).
	if conn := p.captureConn; conn != nil && !conn.IsClosed() {
		descs, err := shadow.ReadDescriptors(ctx, conn, oids)
		if err == nil || ctx.Err() != nil {
			return descs, err
		}
		_ = conn.Close(context.Background())
	}
	p.captureConn = nil
	conn, err := p.shadow.Connect(ctx, p.followedDB)
	if err != nil {
		return nil, fmt.Errorf("connecting to the shadow: %w", err)
	}
	descs, err := shadow.ReadDescriptors(ctx, conn, oids)
	if err != nil {
		_ = conn.Close(context.Background())
		return nil, err
	}
	p.captureConn = conn
	return descs, nil
}

// ErrShadowPastBoundary means the shadow replayed beyond a held boundary:
// the hold was broken and a capture now would read the wrong shapes.
var ErrShadowPastBoundary = errors.New("the shadow replayed past a held catalog boundary")

// CaptureAndRelease ends a hold from outside the pump (a session run with
// SelfRelease off, as tests do to observe holds): for the boundary whose
// next_lsn is nextLSN it waits until the shadow has replayed exactly
// through it, captures the affected relations' shapes into the descriptor
// log (durably) unless the pump already did, and releases the hold. A boundary the log already holds
// (WAL re-read after a restart) or baked into the seed is not captured
// again.
//
// It returns the schema events of the boundary (the same events when the
// boundary is replayed from the log after a restart).
func (s *Session) CaptureAndRelease(ctx context.Context, nextLSN wal.LSN) ([]desclog.Event, error) {
	s.mu.Lock()
	p := s.parts
	var held *Batch
	for _, b := range s.pending {
		if b.Boundary != nil && b.Boundary.NextLSN == nextLSN {
			held = b
		}
	}
	s.mu.Unlock()
	if p == nil || held == nil {
		return nil, fmt.Errorf("no held boundary at %s in this session", nextLSN)
	}
	events, err := s.captureLocked(ctx, p, held.Boundary, droppedStorage(held, nextLSN))
	if err != nil {
		return nil, err
	}
	held.Release()
	return events, nil
}

// captureLocked serialises captures: the pump's own (inside the hold) and
// a test's CaptureAndRelease may race for the same boundary; the second
// finds it in the log and replays its events.
func (s *Session) captureLocked(ctx context.Context, p *parts, b *Boundary, dropped []wal.RelFileNode) ([]desclog.Event, error) {
	s.captureMu.Lock()
	defer s.captureMu.Unlock()
	return s.captureBoundary(ctx, p, b, dropped)
}

// pumpCapture is the pump's Capture: the boundary's shapes into the
// descriptor log while the shadow stands exactly at it.
func (s *Session) pumpCapture(p *parts) func(ctx context.Context, b *Batch) error {
	return func(ctx context.Context, b *Batch) error {
		_, err := s.captureLocked(ctx, p, b.Boundary, droppedStorage(b, b.Boundary.NextLSN))
		if err == nil && Hooks.AfterCapture != nil {
			Hooks.AfterCapture()
		}
		return err
	}
}

// ErrNotCaptured: the descriptor log has no batch for a boundary the
// processor reached (it was compacted away or baked into the seed, which
// only happens below the resume floor).
var ErrNotCaptured = errors.New("boundary not in the descriptor log")

// BoundaryEvents waits until the boundary whose commit's next LSN is
// nextLSN (in a batch handed out by Next) has been captured — the pump does
// it inside the hold — and returns its schema events, derived from the
// stored batch (the same events after a restart). A boundary baked into the
// seed or a compacted checkpoint has none.
func (s *Session) BoundaryEvents(ctx context.Context, nextLSN wal.LSN) ([]desclog.Event, error) {
	s.mu.Lock()
	var captured <-chan struct{}
	for _, b := range s.pending {
		for _, it := range b.Items {
			if tx := it.Tx; tx != nil && tx.Boundary != nil && tx.CommitNext == nextLSN {
				captured = tx.captured
			}
		}
	}
	s.mu.Unlock()
	if captured != nil {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for waiting := true; waiting; {
			select {
			case <-captured:
				waiting = false
			case <-ctx.Done():
				return nil, fmt.Errorf("waiting for the capture of the boundary at %s: %w", nextLSN, ctx.Err())
			case <-tick.C:
				s.mu.Lock()
				err := s.runErr
				s.mu.Unlock()
				if err != nil {
					return nil, fmt.Errorf("waiting for the capture of the boundary at %s: %w: %w", nextLSN, ErrStopped, err)
				}
			}
		}
	}
	log := s.DescLog()
	if log == nil {
		return nil, fmt.Errorf("boundary at %s: the session has no descriptor log", nextLSN)
	}
	if b, ok := log.BatchAt(nextLSN); ok {
		return log.ReplayEvents(b), nil
	}
	if nextLSN <= log.Horizon() {
		return nil, nil // baked into the seed or a compacted checkpoint
	}
	return nil, fmt.Errorf("%w at %s (last capture %s)", ErrNotCaptured, nextLSN, log.LastCapturedAt())
}

// droppedStorage lists the relation storage the boundary's commit record
// drops (DROP TABLE, and the old files of a rewrite or TRUNCATE).
func droppedStorage(b *Batch, nextLSN wal.LSN) []wal.RelFileNode {
	var c wal.XactCommit
	found := false
	for _, it := range b.Items {
		if it.Record.Next == nextLSN && it.Record.Header.RmID == wal.RmgrXact {
			found = c.Decode(it.Record) == nil
			break
		}
	}
	if !found {
		return nil
	}
	out := make([]wal.RelFileNode, 0, c.Rels.Len())
	for i := range c.Rels.Len() {
		out = append(out, c.Rels.At(i))
	}
	return out
}

func (s *Session) captureBoundary(ctx context.Context, p *parts, b *Boundary, dropped []wal.RelFileNode) ([]desclog.Event, error) {
	log := p.desclog
	replay, err := p.shadow.ReplayLSN(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the shadow's replay position at the boundary %s: %w", b.NextLSN, err)
	}
	plan, stored, err := log.PlanBoundary(b.NextLSN, replay)
	switch {
	case err != nil:
		return nil, err
	case plan == desclog.PlanReplay:
		return log.ReplayEvents(stored), nil // WAL re-read after a restart
	case plan == desclog.PlanSkip:
		return nil, nil // baked into the seed or compacted away
	}
	if err := s.waitReplayExactly(ctx, p, b.NextLSN); err != nil {
		return nil, err
	}
	// A dropped relation is named by neither a pg_class row the filter can
	// read nor, always, a relcache invalidation; the commit's dropped storage
	// names its filenode, which the log maps back to the oid.
	oids := slices.Clone(b.AffectedOids)
	for _, rfn := range dropped {
		if r := log.DescriptorAt(rfn, b.NextLSN-1); r.Result == desclog.Present && !slices.Contains(oids, r.Desc.Oid) {
			oids = append(oids, r.Desc.Oid)
		}
	}
	slices.Sort(oids)
	if b.CaptureAll {
		oids = nil
	} else {
		oids = desclog.WithToastOids(log, oids)
	}
	descs, err := s.readShadowDescriptors(ctx, p, oids)
	if err != nil {
		return nil, fmt.Errorf("reading shapes at %s: %w", b.NextLSN, err)
	}
	if err := s.waitReplayExactly(ctx, p, b.NextLSN); err != nil {
		return nil, err
	}
	batch, events, err := desclog.Capture(log, desclog.BoundaryInput{
		NextLSN:           b.NextLSN,
		DrainXID:          b.DrainXID,
		AffectedOids:      oids,
		CaptureAll:        b.CaptureAll,
		FirstCatalogTouch: b.FirstCatalogTouch,
		SmgrCreates:       p.filter.SmgrCreateLSN,
	}, descs)
	if err != nil {
		return nil, fmt.Errorf("capturing shapes at %s: %w", b.NextLSN, err)
	}
	if err := log.Append(batch); err != nil {
		return nil, fmt.Errorf("appending the descriptor log at %s: %w", b.NextLSN, err)
	}
	return events, nil
}

// waitReplayExactly waits until the shadow reports replay == lsn; beyond it
// is fatal (ErrShadowPastBoundary).
func (s *Session) waitReplayExactly(ctx context.Context, p *parts, lsn wal.LSN) error {
	for {
		got, err := p.shadow.ReplayLSN(ctx)
		if err == nil {
			if got == lsn {
				return nil
			}
			if got > lsn {
				return fmt.Errorf("%w: boundary %s, shadow at %s", ErrShadowPastBoundary, lsn, got)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the shadow to replay through %s (at %s, %v): %w", lsn, got, err, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}
