package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walshadow/walshadow/internal/wal"
)

// Reconnect defaults.
const (
	DefaultInitialBackoff = 100 * time.Millisecond
	DefaultMaxBackoff     = 10 * time.Second
	DefaultMaxElapsed     = 5 * time.Minute
)

// reconnectHealthyAfter is how long a connection must have lived (or a chunk
// must have arrived on it) before a later failure counts as a new outage
// with a fresh backoff and deadline.
const reconnectHealthyAfter = 30 * time.Second

// ReconnectPolicy bounds how a Stream retries transient failures.
type ReconnectPolicy struct {
	// InitialBackoff is the wait before the first retry, doubled after each
	// failed attempt up to MaxBackoff. Defaults: 100 ms and 10 s.
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
	// MaxAttempts caps the attempts in one outage; 0 means no cap.
	MaxAttempts int
	// MaxElapsed caps one outage's duration; 0 means DefaultMaxElapsed,
	// negative means no limit.
	MaxElapsed time.Duration
}

// delay is the wait before attempt n (1-based) of an outage.
func (p ReconnectPolicy) delay(n int) time.Duration {
	d, limit := p.InitialBackoff, p.MaxBackoff
	if d <= 0 {
		d = DefaultInitialBackoff
	}
	if limit <= 0 {
		limit = DefaultMaxBackoff
	}
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

func (p ReconnectPolicy) maxElapsed() time.Duration {
	if p.MaxElapsed == 0 {
		return DefaultMaxElapsed
	}
	return p.MaxElapsed
}

// WALRemovedError reports that the source no longer has the WAL the stream
// must resume at (SQLSTATE 58P01): walshadow cannot continue without a gap.
type WALRemovedError struct {
	LSN  wal.LSN
	Slot string
	Err  error
}

func (e *WALRemovedError) Error() string {
	remedy := "stream through a physical replication slot (it keeps WAL until walshadow confirms it) or raise wal_keep_size"
	if e.Slot != "" {
		remedy = fmt.Sprintf("replication slot %q did not retain it (was it dropped and recreated, or invalidated by max_slot_wal_keep_size?)", e.Slot)
	}
	return fmt.Sprintf("the source no longer has the WAL at %s that walshadow must resume from: %v; %s; "+
		"walshadow cannot continue without a gap: start from a fresh state directory", e.LSN, e.Err, remedy)
}

func (e *WALRemovedError) Unwrap() error { return e.Err }

// IsTransient reports whether err is worth a reconnect: network failures,
// timeouts, the server shutting down, restarting or not accepting
// connections yet (SQLSTATE class 08, 57P01-57P03, 53300), and a slot still
// held by the walsender of a connection that just broke (55006). Identity
// mismatches, removed WAL, timeline ends, authentication and other server
// errors are not.
func IsTransient(err error) bool {
	if err == nil {
		return false
	}
	var (
		mismatch *IdentityMismatchError
		removed  *WALRemovedError
		tlEnd    *EndOfTimelineError
	)
	if errors.As(err, &mismatch) || errors.As(err, &removed) || errors.As(err, &tlEnd) {
		return false
	}
	if errors.Is(err, context.Canceled) && !pgconn.Timeout(err) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "57P01", "57P02", "57P03", // admin/crash shutdown, cannot connect now
			"53300", // too many connections
			"55006": // object in use: the slot's previous walsender has not exited yet
			return true
		}
		return len(pgErr.Code) == 5 && pgErr.Code[:2] == "08"
	}
	if errors.Is(err, errClientStreamEnded) || errors.Is(err, errClientSourceStopping) ||
		pgconn.SafeToRetry(err) || pgconn.Timeout(err) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed)
}

// StreamConfig configures OpenStream.
type StreamConfig struct {
	// DSN of the source (without replication=...; it is added).
	DSN string
	// Slot is the physical replication slot to stream through; "" streams
	// without one (only wal_keep_size then protects unread WAL: the caller
	// should warn).
	Slot string
	// CreateSlot creates Slot on the first connection if it is missing.
	CreateSlot bool
	// Identity is the stored identity of the source; every connection must
	// match it (CheckIdentity). nil pins the identity of the first
	// connection, so a reconnect can never land on another cluster.
	Identity *Identity
	// AllowTimelineChange accepts a source whose timeline differs from the
	// stored one (same system identifier) and streams its current timeline.
	AllowTimelineChange bool
	// StatusInterval: see Client.StatusInterval.
	StatusInterval time.Duration
	Reconnect      ReconnectPolicy
	// Logger receives reconnects and warnings; nil discards them.
	Logger *slog.Logger
}

// Stream is a replication stream that survives transient failures: it owns
// a Client and, when the connection breaks, reconnects with exponential
// backoff, re-identifies the source, applies the identity gate, and
// restarts replication at the next byte it has not delivered, so the chunks
// it returns are contiguous across reconnects (no gap, no duplicate).
//
// Receive and Close belong to one goroutine; SetPositions, SendStatus and
// Positions may be called from any.
type Stream struct {
	cfg      StreamConfig
	log      *slog.Logger
	identity Identity
	next     wal.LSN // next byte to deliver; owned by the receiving goroutine

	// Outage bookkeeping, owned by the receiving goroutine. An outage lasts
	// until a connection proves healthy, so a source that accepts and then
	// drops every connection still meets the backoff and the deadline.
	outageStart    time.Time
	outageAttempts int
	connectedAt    time.Time
	delivered      bool
	reconnects     int
	fatal          error

	mu        sync.Mutex
	client    *Client
	positions Positions
}

// OpenStream connects (retrying transient failures like any reconnect),
// checks the identity, ensures the slot when configured, and starts
// replication at start on the stored (or current) timeline. walshadow starts
// a fresh stream at a segment boundary and resumes at the reader's next byte.
func OpenStream(ctx context.Context, cfg StreamConfig, start wal.LSN) (*Stream, error) {
	s := &Stream{cfg: cfg, log: cfg.Logger, next: start}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if cfg.Slot != "" {
		if err := clientValidateSlotName(cfg.Slot); err != nil {
			return nil, err
		}
	}
	if cfg.Identity != nil {
		s.identity = *cfg.Identity
	}
	if err := s.connect(ctx, true); err != nil {
		return nil, err
	}
	return s, nil
}

// Identity is the identity the stream is pinned to.
func (s *Stream) Identity() Identity { return s.identity }

// Next is the LSN of the next byte Receive will deliver.
func (s *Stream) Next() wal.LSN { return s.next }

// Reconnects counts successful reconnects since OpenStream.
func (s *Stream) Reconnects() int { return s.reconnects }

// Client is the current connection, for helper queries (WALSenderTimeout,
// ...) from the receiving goroutine; it changes when Receive reconnects and
// is nil after a fatal error.
func (s *Stream) Client() *Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.client
}

// Receive returns the next chunk, reconnecting through transient failures.
// Chunk.Data is valid until the next Receive. Cancelling ctx returns
// ctx.Err() and leaves the stream usable; any other error is fatal and
// sticky (an *IdentityMismatchError, *WALRemovedError,
// *EndOfTimelineError, a non-transient server error, or exhausted retries).
func (s *Stream) Receive(ctx context.Context) (Chunk, error) {
	for {
		if s.fatal != nil {
			return Chunk{}, s.fatal
		}
		c := s.Client()
		if c == nil {
			if err := s.connect(ctx, false); err != nil {
				if ctx.Err() != nil {
					return Chunk{}, ctx.Err()
				}
				return Chunk{}, err
			}
			continue
		}
		chunk, err := c.Receive(ctx)
		if err == nil {
			s.next = chunk.End()
			s.delivered = true
			return chunk, nil
		}
		if ctx.Err() != nil && c.failed == nil {
			return Chunk{}, ctx.Err()
		}
		s.drop(c)
		err = s.describe(err)
		if !IsTransient(err) {
			s.fatal = err
			return Chunk{}, err
		}
		s.log.Warn("source stream broke; reconnecting", "source", c.Target(), "next_lsn", s.next.String(), "error", err)
		if s.delivered || time.Since(s.connectedAt) >= reconnectHealthyAfter {
			s.outageStart, s.outageAttempts = time.Time{}, 0
		}
	}
}

// drop closes and forgets the current client.
func (s *Stream) drop(c *Client) {
	s.mu.Lock()
	if s.client == c {
		s.client = nil
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.Close(ctx)
}

// describe turns a removed-WAL server error into a *WALRemovedError naming
// the resume LSN and the remedy.
func (s *Stream) describe(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "58P01" {
		return &WALRemovedError{LSN: s.next, Slot: s.cfg.Slot, Err: err}
	}
	return err
}

// connect establishes a streaming client, retrying transient failures with
// backoff within the policy's bounds. first also ensures the slot.
func (s *Stream) connect(ctx context.Context, first bool) error {
	pol := s.cfg.Reconnect
	if s.outageStart.IsZero() {
		s.outageStart = time.Now()
	}
	for {
		s.outageAttempts++
		attempt := s.outageAttempts
		if !first || attempt > 1 {
			t := time.NewTimer(pol.delay(attempt))
			select {
			case <-ctx.Done():
				t.Stop()
				// Not an attempt: a caller retrying with short deadlines
				// must not escalate the backoff.
				s.outageAttempts--
				return ctx.Err()
			case <-t.C:
			}
		}
		err := s.connectOnce(ctx, first)
		if err == nil {
			if !first {
				s.reconnects++
				s.log.Info("source stream reconnected", "next_lsn", s.next.String(), "attempt", attempt)
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		err = s.describe(err)
		if !IsTransient(err) {
			s.fatal = err
			return err
		}
		elapsed := time.Since(s.outageStart)
		if (pol.MaxAttempts > 0 && attempt >= pol.MaxAttempts) || (pol.maxElapsed() > 0 && elapsed >= pol.maxElapsed()) {
			s.fatal = fmt.Errorf("connecting to the source to resume at %s: giving up after %d attempts over %s: %w",
				s.next, attempt, elapsed.Round(time.Millisecond), err)
			return s.fatal
		}
		s.log.Warn("connecting to the source failed; retrying", "attempt", attempt, "next_lsn", s.next.String(), "error", err)
	}
}

// connectOnce makes one attempt: connect, identify, gate, slot, start.
func (s *Stream) connectOnce(ctx context.Context, first bool) (err error) {
	c, err := Connect(ctx, s.cfg.DSN)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			c.Close(context.Background())
		}
	}()
	c.StatusInterval = s.cfg.StatusInterval
	id, err := c.IdentifySystem(ctx)
	if err != nil {
		return err
	}
	if s.identity.SystemID == 0 {
		s.identity = id // first connection, nothing stored: pin it
	}
	if err := CheckIdentity(s.identity, id); err != nil {
		var mm *IdentityMismatchError
		if !s.cfg.AllowTimelineChange || !errors.As(err, &mm) || mm.SystemIDChanged() {
			return fmt.Errorf("source %s: %w", c.Target(), err)
		}
		s.log.Warn("source timeline changed; continuing on the new timeline as configured",
			"stored_timeline", s.identity.Timeline, "timeline", id.Timeline)
		s.identity.Timeline = id.Timeline
	}
	if first && s.cfg.Slot != "" && s.cfg.CreateSlot {
		created, err := c.EnsureSlot(ctx, s.cfg.Slot)
		if err != nil {
			return err
		}
		if created {
			s.log.Info("created physical replication slot", "slot", s.cfg.Slot)
		}
	}
	s.mu.Lock()
	pos := s.positions
	s.mu.Unlock()
	c.SetPositions(pos.Write, pos.Flush, pos.Apply)
	if err := c.StartReplication(ctx, s.cfg.Slot, s.next, s.identity.Timeline); err != nil {
		return err
	}
	s.mu.Lock()
	s.client = c
	// Positions raised while StartReplication ran.
	c.SetPositions(s.positions.Write, s.positions.Flush, s.positions.Apply)
	s.mu.Unlock()
	s.connectedAt = time.Now()
	s.delivered = false
	return nil
}

// SetPositions raises the reported positions (each to its own running
// maximum, kept across reconnects).
func (s *Stream) SetPositions(write, flush, apply wal.LSN) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.positions = s.positions.Advance(write, flush, apply)
	if s.client != nil {
		s.client.SetPositions(write, flush, apply)
	}
}

// Positions returns the positions reported to the source.
func (s *Stream) Positions() Positions {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.positions
}

// SendStatus sends a status update now. While the stream is reconnecting
// there is no connection and it returns nil: the new connection reports the
// positions as soon as replication restarts.
func (s *Stream) SendStatus(ctx context.Context, replyRequested bool) error {
	c := s.Client()
	if c == nil {
		return nil
	}
	return c.SendStatus(ctx, replyRequested)
}

// Close ends the stream. It must not run concurrently with Receive.
func (s *Stream) Close(ctx context.Context) error {
	s.mu.Lock()
	c := s.client
	s.client = nil
	s.mu.Unlock()
	if s.fatal == nil {
		s.fatal = errors.New("stream closed")
	}
	if c == nil {
		return nil
	}
	return c.Close(ctx)
}
