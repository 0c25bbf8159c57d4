package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestIsTransient(t *testing.T) {
	pg := func(code string) error { return &pgconn.PgError{Severity: "FATAL", Code: code, Message: "m"} }
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"admin shutdown", pg("57P01"), true},
		{"crash shutdown", pg("57P02"), true},
		{"cannot connect now", pg("57P03"), true},
		{"connection failure class 08", pg("08006"), true},
		{"protocol violation class 08", pg("08P01"), true},
		{"too many connections", pg("53300"), true},
		{"slot active", pg("55006"), true},
		{"bad password", pg("28P01"), false},
		{"no pg_hba entry", pg("28000"), false},
		{"syntax error", pg("42601"), false},
		{"undefined file (WAL removed)", pg("58P01"), false},
		{"wrapped shutdown", fmt.Errorf("receiving: %w", pg("57P01")), true},
		{"scrubbed shutdown", clientScrub(fmt.Errorf("x: %w", pg("57P01")), "secret-pw"), true},
		{"stream ended", fmt.Errorf("at 0/1: %w", errClientStreamEnded), true},
		{"source stopping", fmt.Errorf("at 0/1: %w", errClientSourceStopping), true},
		{"eof", io.EOF, true},
		{"unexpected eof", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, true},
		{"connection reset", fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{"closed", net.ErrClosed, true},
		{"caller cancelled", context.Canceled, false},
		{"identity mismatch", &IdentityMismatchError{Stored: Identity{SystemID: 1}, Current: Identity{SystemID: 2}}, false},
		{"wal removed", &WALRemovedError{LSN: 1, Err: pg("58P01")}, false},
		{"end of timeline", &EndOfTimelineError{Timeline: 1, NextTimeline: 2}, false},
		{"plain error", errors.New("bad config"), false},
	}
	for _, c := range cases {
		if got := IsTransient(c.err); got != c.want {
			t.Errorf("%s: IsTransient(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

func TestReconnectDelay(t *testing.T) {
	var def ReconnectPolicy
	want := []time.Duration{100, 200, 400, 800, 1600, 3200, 6400, 10000, 10000}
	for i, w := range want {
		if got := def.delay(i + 1); got != w*time.Millisecond {
			t.Errorf("default delay(%d) = %v, want %v", i+1, got, w*time.Millisecond)
		}
	}
	p := ReconnectPolicy{InitialBackoff: 30 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}
	for n, w := range map[int]time.Duration{1: 30, 2: 60, 3: 100, 50: 100} {
		if got := p.delay(n); got != w*time.Millisecond {
			t.Errorf("delay(%d) = %v, want %v", n, got, w*time.Millisecond)
		}
	}
	if def.maxElapsed() != DefaultMaxElapsed || (ReconnectPolicy{MaxElapsed: -1}).maxElapsed() >= 0 {
		t.Error("maxElapsed defaults")
	}
}

func TestWALRemovedErrorNamesRemedy(t *testing.T) {
	inner := &pgconn.PgError{Severity: "ERROR", Code: "58P01", Message: "requested WAL segment 000000010000000000000001 has already been removed"}
	slotless := (&WALRemovedError{LSN: 0x1000000, Err: inner}).Error()
	for _, want := range []string{"0/01000000", "already been removed", "wal_keep_size", "replication slot", "fresh state directory"} {
		if !strings.Contains(slotless, want) {
			t.Errorf("slotless error %q lacks %q", slotless, want)
		}
	}
	slotted := &WALRemovedError{LSN: 0x1000000, Slot: "ws", Err: inner}
	if !strings.Contains(slotted.Error(), `slot "ws"`) || !errors.Is(slotted, error(inner)) {
		t.Errorf("slot error %q", slotted)
	}
}

// A reconnect's backoff cut short by the caller's deadline is not an
// attempt: a caller receiving with short deadlines (the session polls every
// 100 ms) would otherwise escalate the backoff without ever connecting.
func TestReconnectWaitCutByDeadlineIsNoAttempt(t *testing.T) {
	s := &Stream{cfg: StreamConfig{DSN: "host=127.0.0.1 port=1", Reconnect: ReconnectPolicy{InitialBackoff: time.Second}}}
	s.log = slog.New(slog.DiscardHandler)
	for range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		_, err := s.Receive(ctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("receive: %v", err)
		}
	}
	if s.outageAttempts != 0 || s.fatal != nil {
		t.Fatalf("%d attempts counted, fatal %v", s.outageAttempts, s.fatal)
	}
}
