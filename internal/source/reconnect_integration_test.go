package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walshadow/walshadow/internal/testrig"
	"github.com/walshadow/walshadow/internal/wal"
)

// streamCollector drains a Stream on its own goroutine, as the input will:
// it checks every chunk starts where the previous one ended, keeps a copy
// of the bytes, and reports everything received as written, flushed and
// applied.
type streamCollector struct {
	start wal.LSN
	mu    sync.Mutex
	buf   []byte
	err   error
	done  chan struct{}
}

func collectStream(ctx context.Context, s *Stream, start wal.LSN) *streamCollector {
	c := &streamCollector{start: start, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for {
			ch, err := s.Receive(ctx)
			if err != nil {
				c.mu.Lock()
				c.err = err
				c.mu.Unlock()
				return
			}
			c.mu.Lock()
			if want := c.start + wal.LSN(len(c.buf)); ch.Start != want {
				c.err = fmt.Errorf("chunk at %s, expected %s: gap or duplicate", ch.Start, want)
				c.mu.Unlock()
				return
			}
			c.buf = append(c.buf, ch.Data...)
			c.mu.Unlock()
			s.SetPositions(ch.End(), ch.End(), ch.End())
		}
	}()
	return c
}

// end is the LSN after the last byte received so far, and the first error.
func (c *streamCollector) end() (wal.LSN, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.start + wal.LSN(len(c.buf)), c.err
}

func (c *streamCollector) waitFor(t *testing.T, target wal.LSN, timeout time.Duration) {
	t.Helper()
	waitUntil(t, timeout, "the stream to reach "+target.String(), func() (bool, string) {
		end, err := c.end()
		if err != nil {
			t.Fatalf("stream failed at %s: %v", end, err)
		}
		return end >= target, end.String()
	})
}

// compareWithSegments checks buf, the WAL from start on, against the
// source's segment files byte for byte.
func compareWithSegments(t *testing.T, pg *testrig.Postgres, tli uint32, start wal.LSN, buf []byte) {
	t.Helper()
	segSize := pg.WALSegmentSize()
	pos := start
	end := start + wal.LSN(len(buf))
	segments := 0
	for pos < end {
		segNo := uint64(pos) / segSize
		name := testrig.SegmentName(tli, segNo, segSize)
		file, err := os.ReadFile(filepath.Join(pg.WALDir(), name))
		if err != nil {
			t.Fatalf("reading segment for %s: %v", pos, err)
		}
		off := uint64(pos) % segSize
		n := min(segSize-off, uint64(end-pos))
		got := buf[pos-start : pos-start+wal.LSN(n)]
		if want := file[off : off+n]; !bytes.Equal(got, want) {
			i := 0
			for got[i] == want[i] {
				i++
			}
			t.Fatalf("segment %s: received byte at %s is %#02x, the file has %#02x", name, pos+wal.LSN(i), got[i], want[i])
		}
		pos += wal.LSN(n)
		segments++
	}
	t.Logf("%d received bytes from %s to %s equal %d segment files", len(buf), start, end, segments)
}

func TestStreamSurvivesServerRestart(t *testing.T) {
	pg := testrig.StartPostgres(t, testrig.WithWALSegSizeMB(1))
	ctx := clientTestContext(t)
	segSize := pg.WALSegmentSize()

	start := segmentStart(pg.CurrentLSN(t), segSize)
	s, err := OpenStream(ctx, StreamConfig{
		DSN:            pg.DSN(),
		Slot:           "ws_restart",
		CreateSlot:     true,
		StatusInterval: 200 * time.Millisecond,
		Reconnect:      ReconnectPolicy{MaxElapsed: time.Minute},
		Logger:         slog.New(slog.NewTextHandler(testLogWriter{t}, nil)),
	}, start)
	if err != nil {
		t.Fatal(err)
	}
	recvCtx, stopRecv := context.WithCancel(ctx)
	col := collectStream(recvCtx, s, start)

	// A status loop on another goroutine, as the input's will be.
	var statusSent atomic.Int64
	statusDone := make(chan struct{})
	go func() {
		defer close(statusDone)
		for recvCtx.Err() == nil {
			if err := s.SendStatus(recvCtx, false); err == nil {
				statusSent.Add(1)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	defer func() {
		stopRecv()
		<-col.done
		<-statusDone
		s.Close(context.Background())
	}()

	pg.PGBench(t, 1, testrig.PGBenchOptions{Transactions: 300})
	col.waitFor(t, pg.CurrentLSN(t), time.Minute)
	before, _ := col.end()

	pg.Restart(t)
	pg.PGBench(t, 1, testrig.PGBenchOptions{NoInit: true, Transactions: 300})

	// Kill the walsender repeatedly while WAL is flowing: the stream breaks
	// mid-message, and the slot may still be held by the dying walsender.
	killCtx, stopKilling := context.WithCancel(ctx)
	var kills atomic.Int64
	killDone := make(chan struct{})
	go func() {
		defer close(killDone)
		conn, err := pgx.Connect(killCtx, pg.DSN())
		if err != nil {
			return
		}
		defer conn.Close(context.Background())
		for killCtx.Err() == nil {
			time.Sleep(300 * time.Millisecond)
			var n int64
			if conn.QueryRow(killCtx, "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_replication").Scan(&n) == nil {
				kills.Add(n)
			}
		}
	}()
	pg.PGBench(t, 1, testrig.PGBenchOptions{NoInit: true, Duration: 3 * time.Second})
	stopKilling()
	<-killDone
	switched := pg.SwitchWAL(t)
	col.waitFor(t, switched, time.Minute)
	// The slot follows the reported flush position (the side goroutine
	// keeps sending status).
	pg.WaitForLSN(t, "SELECT restart_lsn FROM pg_replication_slots WHERE slot_name = 'ws_restart'",
		func(l wal.LSN) bool { return l >= switched }, 10*time.Second)

	stopRecv()
	<-col.done
	<-statusDone
	if _, err := col.end(); !errors.Is(err, context.Canceled) {
		t.Fatalf("stream ended with %v, want only our cancellation", err)
	}
	// A kill can land on a connection attempt (IDENTIFY_SYSTEM) rather than a
	// stream, which retries the same reconnect: count reconnects loosely;
	// the byte-contiguity checks below are what prove no gap or duplicate.
	if kills.Load() < 2 || s.Reconnects() < 2 {
		t.Fatalf("Reconnects = %d after a server restart and %d walsender kills", s.Reconnects(), kills.Load())
	}
	end, _ := col.end()
	t.Logf("streamed %s..%s (%d MiB), restart after %s, %d walsender kills, %d reconnects, %d status updates from the side goroutine",
		start, end, (end-start)>>20, before, kills.Load(), s.Reconnects(), statusSent.Load())
	if end-start < 8<<20 {
		t.Fatalf("only %d bytes streamed; the load did not produce enough WAL", end-start)
	}
	compareWithSegments(t, pg, 1, start, col.buf)
}

func TestTimelineSwitch(t *testing.T) {
	pg := testrig.StartPostgres(t, testrig.WithWALSegSizeMB(1))
	ctx := clientTestContext(t)
	segSize := pg.WALSegmentSize()

	pg.Exec(t, "CREATE TABLE tl_load AS SELECT g FROM generate_series(1, 5000) g")
	c := clientTestConnect(t, ctx, pg.DSN())
	before, err := c.IdentifySystem(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.Close(ctx)
	start := segmentStart(pg.CurrentLSN(t), segSize)

	// Archive recovery with nothing to restore replays pg_wal and then
	// promotes onto timeline 2: a timeline switch on a single server.
	pg.SetConf(t, "restore_command", "/bin/false")
	pg.Stop(t)
	if err := os.WriteFile(filepath.Join(pg.DataDir(), "recovery.signal"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	pg.Start(t)
	waitUntil(t, 30*time.Second, "the end of archive recovery", func() (bool, string) {
		return pg.QueryString(t, "SELECT pg_is_in_recovery()::text") == "false", "in recovery"
	})
	history := pg.QueryString(t, "SELECT pg_read_file('pg_wal/00000002.history')")
	fields := strings.Fields(history)
	if len(fields) < 2 || fields[0] != "1" {
		t.Fatalf("unexpected history file %q", history)
	}
	switchLSN, err := wal.ParseLSN(fields[1])
	if err != nil {
		t.Fatal(err)
	}

	c = clientTestConnect(t, ctx, pg.DSN())
	after, err := c.IdentifySystem(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.SystemID != before.SystemID || before.Timeline != 1 || after.Timeline != 2 {
		t.Fatalf("identity before %v, after %v: want the same system moving from timeline 1 to 2", before, after)
	}

	t.Run("end of timeline", func(t *testing.T) {
		if err := c.StartReplication(ctx, "", start, 1); err != nil {
			t.Fatal(err)
		}
		var n int
		for {
			ch, err := c.Receive(ctx)
			if err == nil {
				n += len(ch.Data)
				continue
			}
			var end *EndOfTimelineError
			if !errors.As(err, &end) {
				t.Fatalf("stream of the old timeline ended with %v", err)
			}
			if end.Timeline != 1 || end.NextTimeline != 2 || end.SwitchLSN != switchLSN || c.Next() != switchLSN {
				t.Fatalf("end of timeline %+v after %s; the history file says timeline 2 from %s", end, c.Next(), switchLSN)
			}
			if IsTransient(err) {
				t.Fatal("end of timeline classified as transient")
			}
			t.Logf("timeline 1 streamed %d bytes from %s and ended: %v", n, start, err)
			return
		}
	})

	t.Run("start past the end of a historic timeline", func(t *testing.T) {
		c := clientTestConnect(t, ctx, pg.DSN())
		err := c.StartReplication(ctx, "", switchLSN, 1)
		var end *EndOfTimelineError
		if !errors.As(err, &end) || end.NextTimeline != 2 || end.SwitchLSN != switchLSN {
			t.Fatalf("START_REPLICATION at the switch point of timeline 1: %v", err)
		}
		if _, err := c.IdentifySystem(ctx); err != nil {
			t.Fatalf("the connection is unusable after the timeline result: %v", err)
		}
	})

	t.Run("identity gate", func(t *testing.T) {
		began := time.Now()
		_, err := OpenStream(ctx, StreamConfig{DSN: pg.DSN(), Identity: &before}, start)
		var mm *IdentityMismatchError
		if !errors.As(err, &mm) || mm.SystemIDChanged() || IsTransient(err) {
			t.Fatalf("stored timeline 1 against a source on timeline 2: %v", err)
		}
		if !strings.Contains(err.Error(), "timeline 2") || !strings.Contains(err.Error(), "timeline 1") {
			t.Errorf("timeline mismatch error does not name both timelines: %v", err)
		}
		t.Logf("timeline mismatch: %v", err)

		other := Identity{SystemID: before.SystemID + 1, Timeline: 2}
		_, err = OpenStream(ctx, StreamConfig{DSN: pg.DSN(), Identity: &other}, start)
		if !errors.As(err, &mm) || !mm.SystemIDChanged() ||
			!strings.Contains(err.Error(), fmt.Sprint(other.SystemID)) || !strings.Contains(err.Error(), fmt.Sprint(before.SystemID)) {
			t.Fatalf("stored system id %d against %d: %v", other.SystemID, before.SystemID, err)
		}
		t.Logf("system id mismatch: %v", err)
		if time.Since(began) > 5*time.Second {
			t.Errorf("identity mismatches were retried for %v", time.Since(began))
		}

		// The override streams the new timeline (whose history includes
		// the old position).
		s, err := OpenStream(ctx, StreamConfig{DSN: pg.DSN(), Identity: &before, AllowTimelineChange: true}, start)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(ctx)
		ch, err := s.Receive(ctx)
		if err != nil || ch.Start != start || s.Identity().Timeline != 2 {
			t.Fatalf("override: chunk at %s, timeline %d, %v", ch.Start, s.Identity().Timeline, err)
		}
	})
}

// testLogWriter sends a logger's lines to the test log.
type testLogWriter struct{ t *testing.T }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
