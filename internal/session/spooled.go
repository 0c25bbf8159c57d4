package session

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/walshadow/walshadow/config"
	"github.com/walshadow/walshadow/internal/source"
	"github.com/walshadow/walshadow/internal/spool"
	"github.com/walshadow/walshadow/internal/statefile"
	"github.com/walshadow/walshadow/internal/wal"
)

// The session's two loops around the spool: receive (the replication
// connection appends to the spool, answers the source, reports positions
// and persists progress; it never waits on anything downstream) and feed
// (the pump reads the spool at its own pace: filter, shadow feed, boundary
// holds, batches for the processor).

// feedReadBytes is the most the pump's loop reads from the spool at once.
const feedReadBytes = 128 << 10

// spoolSyncBytes syncs the spool early when this much is unsynced.
const spoolSyncBytes = 8 << 20

// spoolStatusBytes: with release_slot spooled, a status goes to the source
// as soon as the flush position moved this far (not only every
// status_interval), so the source's slot releases WAL promptly.
const spoolStatusBytes = 8 << 20

func (s *Session) spoolDir() string { return statefile.StateDir(s.cfg.StateDir).Spool() }

// spoolMaxBytes is spool.max_bytes (its default when unset).
func (s *Session) spoolMaxBytes() int64 {
	if s.cfg.SpoolMaxBytes > 0 {
		return s.cfg.SpoolMaxBytes
	}
	return 10 << 30
}

// statusInterval is how often the source hears from a receive loop that
// is not reading (status_interval, its default when unset).
func (s *Session) statusInterval() time.Duration {
	if s.cfg.StatusInterval > 0 {
		return s.cfg.StatusInterval
	}
	return source.DefaultStatusInterval
}

// releaseSpooled: the slot may release what the spool holds durably.
func (s *Session) releaseSpooled() bool { return s.cfg.SpoolRelease == config.ReleaseSpooled }

// openSpool opens the spool and returns where the source stream resumes:
// the spool's end when it holds everything from start on, else start (the
// spool is emptied to begin there; a spool whose read failed last run is
// emptied too, with release_slot delivered only, so the source sends those
// bytes again).
func (s *Session) openSpool(p *parts, start wal.LSN) (wal.LSN, error) {
	sp, err := spool.Open(s.spoolDir(), p.identity.Timeline, p.segSize)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", errCorruptState, err)
	}
	p.spool = sp
	spStart, spEnd := sp.Extent()
	s.mu.Lock()
	suspect := s.spoolSuspect
	s.spoolSuspect = false
	s.mu.Unlock()
	switch {
	case suspect:
		s.log.Warn("the spool's copy failed to read last run: emptied; the source sends that WAL again", "from", start.String())
	case sp.Covers(start):
		return spEnd, nil
	case spEnd > spStart:
		s.log.Info("the spool does not reach back to the resume point: emptied", "spool_start", spStart.String(),
			"spool_end", spEnd.String(), "resume", start.String())
	}
	if err := sp.Reset(start); err != nil {
		return 0, err
	}
	return start, nil
}

// receive is the replication connection's loop: chunks from the source
// into the spool, status back to the source, progress to disk. When the
// spool is full it stops reading (the source then keeps the WAL behind the
// slot) and goes on answering.
func (s *Session) receive(ctx context.Context, p *parts) {
	const idle = 100 * time.Millisecond
	lastTick := time.Now()
	var lastStatus time.Time
	for {
		if full := p.spool.Bytes() >= s.spoolMaxBytes(); full {
			if !s.spoolFull.Swap(true) {
				s.log.Warn("the spool is full: not reading from the source until its readers catch up (the slot holds the WAL meanwhile)",
					"spool_bytes", p.spool.Bytes(), "max_bytes", s.spoolMaxBytes())
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(idle):
			}
			if time.Since(lastStatus) >= s.statusInterval() {
				lastStatus = time.Now()
				if err := p.stream.SendStatus(ctx, false); err != nil && ctx.Err() == nil {
					s.failRun(fmt.Errorf("answering the source while the spool is full: %w", err))
					return
				}
			}
		} else {
			if s.spoolFull.Swap(false) {
				s.log.Info("the spool has room again: reading from the source")
			}
			// A stream that lost its connection reconnects inside Receive
			// (backoff, connect, START_REPLICATION): that must not be cut
			// by the idle deadline, or it never completes.
			rctx, cancel := ctx, context.CancelFunc(func() {})
			if p.stream.Client() != nil {
				rctx, cancel = context.WithTimeout(ctx, idle)
			}
			chunk, err := p.stream.Receive(rctx)
			cancel()
			if ctx.Err() != nil {
				return
			}
			switch {
			case err == nil:
				s.observeSourceEnd(chunk.ServerWALEnd)
				if err := p.spool.Append(chunk.Start, chunk.Data); err != nil {
					s.failRun(fmt.Errorf("spooling the WAL received at %s: %w", chunk.Start, err))
					return
				}
				if Hooks.AfterSpoolAppend != nil {
					Hooks.AfterSpoolAppend()
				}
				if _, w := p.spool.Extent(); w-p.spool.Durable() >= spoolSyncBytes {
					if _, err := p.spool.Sync(); err != nil {
						s.failRun(err)
						return
					}
				}
			case errors.Is(err, context.DeadlineExceeded):
			default:
				s.failRun(fmt.Errorf("receiving from the source: %w", err))
				return
			}
		}
		if time.Since(lastTick) >= idle {
			lastTick = time.Now()
			if _, err := p.spool.Sync(); err != nil {
				s.failRun(err)
				return
			}
			s.tick(ctx, p)
		}
	}
}

// feed is the pump's loop: it reads the spool from the resume point and
// runs the records through the pump, handing a partial batch over when the
// spool has nothing new for a moment.
func (s *Session) feed(ctx context.Context, p *parts, r *spool.Reader) {
	const idle = 100 * time.Millisecond
	defer r.Close()
	for {
		if r.Next() != p.pump.wire.End() {
			s.failRun(fmt.Errorf("reading the spool at %s, the pump's next byte is %s", r.Next(), p.pump.wire.End()))
			return
		}
		rctx, cancel := context.WithTimeout(ctx, idle)
		// Straight into the pump's buffer (which the shadow's walsender
		// sends from): the bytes are not copied on the way.
		at, n, err := r.ReadInto(rctx, p.pump.Buffer(feedReadBytes))
		cancel()
		if ctx.Err() != nil {
			return
		}
		switch {
		case err == nil:
			if err := p.pump.FeedBuffered(ctx, n); err != nil {
				if ctx.Err() == nil {
					if errors.Is(err, errSourceWAL) {
						err = fmt.Errorf("%w (the spool's copy, %s)", err, p.spool.SegmentPath(at))
						if !s.releaseSpooled() {
							// The source still holds everything from the
							// resume point: the next start asks it again.
							// (With release_slot spooled the spool may be
							// the only copy: it is kept, and the error
							// names its file.)
							s.mu.Lock()
							s.spoolSuspect = true
							s.mu.Unlock()
						}
					}
					s.failRun(err)
				}
				return
			}
			if Hooks.AfterSpoolRead != nil {
				Hooks.AfterSpoolRead()
			}
		case errors.Is(err, context.DeadlineExceeded):
			if err := p.pump.FlushIdle(ctx); err != nil {
				return
			}
		default:
			s.failRun(fmt.Errorf("reading the spool at %s: %w", r.Next(), err))
			return
		}
	}
}
