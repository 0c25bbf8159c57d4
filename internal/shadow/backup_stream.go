package shadow

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// baseBackupCommand asks for one consistent backup: a fast checkpoint so it
// starts at once, the WAL of the backup window inside the data directory
// archive (so the shadow can reach consistency from pg_wal alone), waiting
// for archiving where the source archives, no manifest (walshadow keeps
// only part of the files, so a manifest could not verify anyway), and
// PROGRESS, which makes the tablespace list carry each tablespace's
// estimated size for the progress log.
const baseBackupCommand = `BASE_BACKUP (LABEL 'walshadow', PROGRESS true, CHECKPOINT 'fast', WAL true, WAIT true, MANIFEST 'no')`

// backupStream drives one BASE_BACKUP over a replication connection. It is
// the I/O edge around backupProtocol: nextArchive and Read pull messages
// only when the caller needs bytes, so the tar reader sets the pace and a
// single goroutine does everything.
type backupStream struct {
	ctx   context.Context
	conn  messageReceiver
	proto backupProtocol
	log   *slog.Logger

	// pending is the unread part of the last data message; it aliases the
	// connection's buffer, so nothing is received until it is consumed.
	pending []byte
	// next is an archive announced but not yet handed out by nextArchive.
	next *archiveStart
	// open is true while Read serves the current archive's bytes.
	open     bool
	copyDone bool

	progress backupProgress
}

// messageReceiver is the part of *pgconn.PgConn the stream reads with.
type messageReceiver interface {
	ReceiveMessage(ctx context.Context) (pgproto3.BackendMessage, error)
}

// startBaseBackup sends BASE_BACKUP and reads up to the start of the COPY
// stream (start position and tablespace list).
func startBaseBackup(ctx context.Context, conn *pgconn.PgConn, log *slog.Logger) (*backupStream, error) {
	conn.Frontend().SendQuery(&pgproto3.Query{String: baseBackupCommand})
	if err := conn.Frontend().Flush(); err != nil {
		return nil, fmt.Errorf("sending BASE_BACKUP: %w", err)
	}
	return newBackupStream(ctx, conn, log)
}

// newBackupStream reads the exchange up to the start of the COPY stream.
func newBackupStream(ctx context.Context, conn messageReceiver, log *slog.Logger) (*backupStream, error) {
	s := &backupStream{ctx: ctx, conn: conn, log: log, progress: newBackupProgress(log)}
	for s.proto.phase < phaseCopy {
		if _, err := s.receive(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *backupStream) receive() (backupEvent, error) {
	msg, err := s.conn.ReceiveMessage(s.ctx)
	if err != nil {
		return backupEvent{}, fmt.Errorf("BASE_BACKUP: receiving during the %s: %w", s.proto.phase, err)
	}
	if row, ok := msg.(*pgproto3.DataRow); ok && s.proto.phase == phaseTablespaces {
		s.progress.addTablespaceSize(row)
	}
	ev, err := s.proto.handle(msg)
	if err != nil {
		return backupEvent{}, err
	}
	if ev.notice != "" {
		s.log.Info("source notice during BASE_BACKUP", "notice", ev.notice)
	}
	switch ev.kind {
	case eventArchive:
		a := ev.archive
		s.next, s.open, s.pending = &a, false, nil
	case eventData:
		s.pending = ev.data
		s.progress.streamed(len(ev.data))
	case eventCopyDone:
		s.copyDone, s.open, s.pending = true, false, nil
	}
	return ev, nil
}

// nextArchive skips what is left of the current archive and returns the
// next one; ok is false once the COPY stream has ended.
func (s *backupStream) nextArchive() (a archiveStart, ok bool, err error) {
	s.pending = nil
	for s.next == nil && !s.copyDone {
		if _, err := s.receive(); err != nil {
			return archiveStart{}, false, err
		}
		s.pending = nil
	}
	if s.next == nil {
		return archiveStart{}, false, nil
	}
	a, s.next, s.open = *s.next, nil, true
	return a, true, nil
}

// Read serves the current archive's bytes and io.EOF at its end (the next
// archive's announcement or the end of the COPY stream).
func (s *backupStream) Read(b []byte) (int, error) {
	for len(s.pending) == 0 {
		if !s.open {
			return 0, io.EOF
		}
		if _, err := s.receive(); err != nil {
			return 0, err
		}
	}
	n := copy(b, s.pending)
	s.pending = s.pending[n:]
	return n, nil
}

// finish reads the end position and the command's completion; call it after
// nextArchive reported the end of the COPY stream.
func (s *backupStream) finish() error {
	if !s.copyDone {
		return fmt.Errorf("BASE_BACKUP: finish during the %s", s.proto.phase)
	}
	for s.proto.phase != phaseDone {
		if _, err := s.receive(); err != nil {
			return err
		}
	}
	return nil
}

// Progress is logged at most this often while the backup streams, and once
// at its end.
const (
	progressInterval = 5 * time.Second
	// progressCheckBytes is how much is streamed between two looks at the
	// clock, so the clock is not read for every message.
	progressCheckBytes = 1 << 20
)

// backupProgress counts the bytes of the COPY stream against the size the
// source estimated for the backup, and logs the share done.
type backupProgress struct {
	log *slog.Logger
	// estimate is the sum of the tablespace sizes in bytes; -1 when the
	// source gave none for some tablespace.
	estimate  int64
	rows      int
	done      int64
	nextCheck int64
	lastLog   time.Time
	// kept reports how many bytes the bootstrap wrote to disk so far.
	kept func() int64
}

func newBackupProgress(log *slog.Logger) backupProgress {
	return backupProgress{log: log, nextCheck: progressCheckBytes, lastLog: time.Now()}
}

// addTablespaceSize adds one tablespace row's size (kB, NULL when the
// command did not ask for PROGRESS) to the estimate. A malformed row is
// left to the protocol state machine to refuse.
func (p *backupProgress) addTablespaceSize(row *pgproto3.DataRow) {
	p.rows++
	if len(row.Values) != 3 || p.estimate < 0 {
		return
	}
	kb, err := strconv.ParseInt(string(row.Values[2]), 10, 64)
	if row.Values[2] == nil || err != nil || kb < 0 {
		p.estimate = -1
		return
	}
	p.estimate += kb << 10
}

// streamed counts n more bytes and logs when progressInterval has passed.
func (p *backupProgress) streamed(n int) {
	p.done += int64(n)
	if p.done < p.nextCheck {
		return
	}
	p.nextCheck = p.done + progressCheckBytes
	if now := time.Now(); now.Sub(p.lastLog) >= progressInterval {
		p.lastLog = now
		p.report(false)
	}
}

// finished logs the 100% line.
func (p *backupProgress) finished() { p.report(true) }

func (p *backupProgress) report(finished bool) {
	const mb = 1 << 20
	var kept int64
	if p.kept != nil {
		kept = p.kept()
	}
	total := p.estimate
	if p.rows == 0 {
		total = -1
	}
	if total < 0 {
		p.log.Info(fmt.Sprintf("bootstrapping the shadow: %d MB streamed, %d MB kept", p.done/mb, kept/mb),
			"streamed_bytes", p.done, "kept_bytes", kept)
		return
	}
	// The estimate leaves out the WAL of the backup window and the tar
	// headers, so the stream outgrows it near the end.
	total = max(total, p.done)
	pct := int64(100)
	if !finished {
		pct = 99
		if total > 0 {
			pct = min(p.done*100/total, 99)
		}
	}
	p.log.Info(fmt.Sprintf("bootstrapping the shadow: %d%% (%d MB of %d MB streamed, %d MB kept)", pct, p.done/mb, total/mb, kept/mb),
		"streamed_bytes", p.done, "estimated_bytes", total, "kept_bytes", kept)
}
