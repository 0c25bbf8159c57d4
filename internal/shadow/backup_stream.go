package shadow

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// baseBackupCommand asks for one consistent backup: a fast checkpoint so it
// starts at once, the WAL of the backup window inside the data directory
// archive (so the shadow can reach consistency from pg_wal alone), waiting
// for archiving where the source archives, and no manifest (walshadow keeps
// only part of the files, so a manifest could not verify anyway).
const baseBackupCommand = `BASE_BACKUP (LABEL 'walshadow', CHECKPOINT 'fast', WAL true, WAIT true, MANIFEST 'no')`

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
	s := &backupStream{ctx: ctx, conn: conn, log: log}
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
