package shadow

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walshadow/walshadow/internal/wal"
)

// Supervision timing.
const (
	superviseInterval = 2 * time.Second
	restartBackoffMin = time.Second
	restartBackoffMax = 30 * time.Second
	// stableUptime resets the backoff: a postmaster that stayed up this long
	// is not crash-looping.
	stableUptime = time.Minute
	// stopTimeout bounds pg_ctl stop.
	stopTimeout = 60 * time.Second
	// logTailBytes is how much of the server log goes into start errors.
	logTailBytes = 4096
)

// Shadow runs and watches the shadow PostgreSQL: a hot standby of the source
// holding catalogs only.
type Shadow struct {
	cfg  *resolved
	boot *BootstrapResult

	// mu serialises Start and Stop, and guards floors, stopped and startedAt.
	mu        sync.Mutex
	floors    Floors
	stopped   bool
	startedAt time.Time

	// connMu guards the cached local connection of ReplayLSN and the
	// supervisor's checks.
	connMu sync.Mutex
	conn   *pgx.Conn

	restarts atomic.Int64
}

// New validates cfg against a bootstrapped directory. It refuses a
// directory whose bootstrap is missing or incomplete.
func New(cfg ShadowConfig) (*Shadow, error) {
	r, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	boot, err := ReadBootstrapResult(r.Dir)
	if err != nil {
		return nil, err
	}
	if r.User == "" {
		r.User = boot.SuperUser
	}
	if r.User == "" {
		r.User = "postgres"
	}
	return &Shadow{cfg: r, boot: boot}, nil
}

// Bootstrap is the directory's bootstrap result.
func (s *Shadow) Bootstrap() BootstrapResult { return *s.boot }

// Dir is the data directory.
func (s *Shadow) Dir() string { return s.cfg.Dir }

// SocketDir and Port are where local clients reach the shadow.
func (s *Shadow) SocketDir() string { return s.cfg.SocketDir }
func (s *Shadow) Port() int         { return s.cfg.Port }

// LogFile is the server log.
func (s *Shadow) LogFile() string { return s.cfg.LogFile }

// Restarts counts the times Supervise brought a dead postmaster back (the
// walshadow_shadow_restarts_total metric).
func (s *Shadow) Restarts() int64 { return s.restarts.Load() }

// Floors are the GUC floors of the last boot.
func (s *Shadow) Floors() Floors {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.floors
}

// Start starts the shadow with a freshly materialized configuration and
// waits until it accepts connections (hot standby, consistent). A postmaster
// of an earlier run still serving this directory is restarted so the
// configuration applies; a stale postmaster.pid is cleared only when no such
// process runs. When startup fails because replay raised a GUC floor
// (PostgreSQL records it in pg_control, then exits), the floors are read
// again and the start retried once.
func (s *Shadow) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = false
	return s.startLocked(ctx)
}

func (s *Shadow) startLocked(ctx context.Context) error {
	s.closeConn()
	if err := s.clearPostmaster(ctx); err != nil {
		return err
	}
	if err := s.prepareLog(); err != nil {
		return err
	}
	floors, err := s.cfg.materialize(ctx)
	if err != nil {
		return err
	}
	s.floors = floors
	for attempt := 0; ; attempt++ {
		logStart := fileSize(s.cfg.LogFile)
		err := s.pgctlStart(ctx)
		if err == nil {
			s.startedAt = time.Now()
			s.cfg.log.Info("shadow started", "dir", s.cfg.Dir, "floors", floors)
			return nil
		}
		// pg_ctl may give up (timeout) while the postmaster still runs.
		s.stopPostmaster(ctx, "immediate")
		tail := readTail(s.cfg.LogFile, logStart, logTailBytes)
		if attempt > 0 {
			return fmt.Errorf("starting the shadow in %s (retried after raising GUC floors): %w\nserver log:\n%s", s.cfg.Dir, err, tail)
		}
		again, rerr := s.cfg.materialize(ctx)
		if rerr != nil {
			return errors.Join(fmt.Errorf("starting the shadow in %s: %w\nserver log:\n%s", s.cfg.Dir, err, tail), rerr)
		}
		if !again.raisedAbove(floors) {
			return fmt.Errorf("starting the shadow in %s: %w\nserver log:\n%s", s.cfg.Dir, err, tail)
		}
		s.cfg.log.Warn("shadow startup failed after replay raised a GUC floor; retrying with the new floors",
			"old", floors, "new", again)
		floors = again
		s.floors = floors
	}
}

func (s *Shadow) pgctlStart(ctx context.Context) error {
	timeout := int(s.cfg.StartTimeout.Round(time.Second) / time.Second)
	_, err := runOutput(s.cfg.owner.command(ctx, s.cfg.Dir, filepath.Join(s.cfg.BinDir, "pg_ctl"),
		"-D", s.cfg.Dir, "-l", s.cfg.LogFile, "-w", "-t", strconv.Itoa(max(timeout, 1)), "start"))
	return err
}

// prepareLog makes sure the OS user can create and append the log file.
func (s *Shadow) prepareLog() error {
	dir := filepath.Dir(s.cfg.LogFile)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("creating the shadow's log directory: %w", err)
		}
		if err := s.cfg.owner.chown(dir); err != nil {
			return err
		}
	}
	return nil
}

// clearPostmaster handles postmaster.pid before a start: a live postmaster
// of this directory is stopped (its configuration may be stale); a pid file
// whose process is gone, or is some other process now, is removed.
func (s *Shadow) clearPostmaster(ctx context.Context) error {
	pid, ok := s.postmasterPID()
	if !ok {
		return nil
	}
	if ownsDataDir(pid, s.cfg.Dir) {
		s.cfg.log.Info("a shadow postmaster from an earlier run is up; restarting it", "pid", pid)
		if err := s.stopPostmaster(ctx, "fast"); err != nil {
			return err
		}
		return nil
	}
	path := filepath.Join(s.cfg.Dir, "postmaster.pid")
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing stale %s: %w", path, err)
	}
	s.cfg.log.Info("removed a stale postmaster.pid", "pid", pid)
	return nil
}

// postmasterPID reads the first line of postmaster.pid.
func (s *Shadow) postmasterPID() (int, bool) {
	b, err := os.ReadFile(filepath.Join(s.cfg.Dir, "postmaster.pid"))
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, true
}

// ownsDataDir reports whether pid is a live (not zombie) process whose
// working directory is dir: the postmaster chdirs into its data directory,
// which tells it apart from an unrelated process that reused the pid.
func ownsDataDir(pid int, dir string) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name, which may hold spaces.
	if i := strings.LastIndexByte(string(stat), ')'); i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' || stat[i+2] == 'X' {
		return false
	}
	cwd, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "cwd"))
	if err != nil {
		return false
	}
	want, err := filepath.EvalSymlinks(dir)
	if err != nil {
		want = dir
	}
	return cwd == want
}

// Running reports the postmaster's pid when one serves the directory.
func (s *Shadow) Running() (int, bool) {
	pid, ok := s.postmasterPID()
	if !ok || !ownsDataDir(pid, s.cfg.Dir) {
		return 0, false
	}
	return pid, true
}

// Stop shuts the shadow down (fast mode: replay stops, connections end),
// falling back to immediate mode, and keeps Supervise from restarting it.
func (s *Shadow) Stop(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	s.closeConn()
	return s.stopPostmaster(ctx, "fast")
}

// stopPostmaster runs pg_ctl stop when a postmaster serves the directory.
func (s *Shadow) stopPostmaster(ctx context.Context, mode string) error {
	if _, ok := s.Running(); !ok {
		return nil
	}
	pgctl := filepath.Join(s.cfg.BinDir, "pg_ctl")
	timeout := strconv.Itoa(int(stopTimeout / time.Second))
	_, err := runOutput(s.cfg.owner.command(ctx, s.cfg.Dir, pgctl, "-D", s.cfg.Dir, "-m", mode, "-w", "-t", timeout, "stop"))
	if err != nil && mode != "immediate" {
		s.cfg.log.Warn("stopping the shadow failed; retrying in immediate mode", "err", err)
		_, err = runOutput(s.cfg.owner.command(ctx, s.cfg.Dir, pgctl, "-D", s.cfg.Dir, "-m", "immediate", "-w", "-t", timeout, "stop"))
	}
	if err != nil {
		return fmt.Errorf("stopping the shadow in %s: %w", s.cfg.Dir, err)
	}
	return nil
}

// Supervise watches the postmaster every 2 s until ctx ends, restarting it
// when it died (backoff from 1 s doubling to 30 s, reset after a minute of
// uptime). When replay paused because the source raised a GUC floor above
// the shadow's setting, it resumes replay: PostgreSQL then shuts down, and
// the restart picks the new floor up from pg_control.
func (s *Shadow) Supervise(ctx context.Context) error {
	ticker := time.NewTicker(superviseInterval)
	defer ticker.Stop()
	backoff := restartBackoffMin
	var nextAttempt time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
		s.mu.Lock()
		stopped, startedAt := s.stopped, s.startedAt
		s.mu.Unlock()
		if stopped {
			continue
		}
		if _, ok := s.Running(); ok {
			if !startedAt.IsZero() && time.Since(startedAt) > stableUptime {
				backoff = restartBackoffMin
			}
			s.resumeIfPausedForFloors(ctx)
			continue
		}
		if nextAttempt.IsZero() {
			s.cfg.log.Warn("the shadow postmaster is gone; restarting it", "dir", s.cfg.Dir, "in", backoff)
			nextAttempt = time.Now().Add(backoff)
		}
		if time.Now().Before(nextAttempt) {
			continue
		}
		if err := s.restart(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			backoff = min(backoff*2, restartBackoffMax)
			nextAttempt = time.Now().Add(backoff)
			s.cfg.log.Error("restarting the shadow failed", "err", err, "retry_in", backoff)
			continue
		}
		nextAttempt = time.Time{}
		backoff = min(backoff*2, restartBackoffMax)
		s.restarts.Add(1)
	}
}

func (s *Shadow) restart(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil
	}
	return s.startLocked(ctx)
}

// resumeIfPausedForFloors resumes replay that PostgreSQL paused for
// insufficient parameter settings (xlogrecovery.c
// RecoveryRequiresIntParameter); any other pause is left alone.
func (s *Shadow) resumeIfPausedForFloors(ctx context.Context) {
	var state string
	if err := s.queryRow(ctx, "SELECT pg_get_wal_replay_pause_state()", &state); err != nil || state == "not paused" {
		return
	}
	cd, err := readControlData(ctx, s.cfg.owner, s.cfg.BinDir, s.cfg.Dir)
	if err != nil {
		s.cfg.log.Warn("replay is paused and pg_controldata failed", "err", err)
		return
	}
	if !cd.Floors.raisedAbove(s.Floors()) {
		return
	}
	s.cfg.log.Warn("replay paused because the source raised a GUC floor; resuming so the shadow restarts with the new floors",
		"floors", cd.Floors)
	var ignored string
	if err := s.queryRow(ctx, "SELECT pg_wal_replay_resume()::text", &ignored); err != nil {
		s.cfg.log.Warn("pg_wal_replay_resume failed", "err", err)
	}
}

// ReplayLSN is pg_last_wal_replay_lsn(): the end of the last record the
// shadow replayed (wal.Record.Next), 0 before the first.
func (s *Shadow) ReplayLSN(ctx context.Context) (wal.LSN, error) {
	var text *string
	if err := s.queryRow(ctx, "SELECT pg_last_wal_replay_lsn()::text", &text); err != nil {
		return 0, fmt.Errorf("reading the shadow's replay LSN: %w", err)
	}
	if text == nil {
		return 0, nil
	}
	lsn, err := wal.ParseLSN(*text)
	if err != nil {
		return 0, fmt.Errorf("reading the shadow's replay LSN: %w", err)
	}
	return lsn, nil
}

// WaitForReplay polls ReplayLSN every 50 ms until it reaches target.
func (s *Shadow) WaitForReplay(ctx context.Context, target wal.LSN) (wal.LSN, error) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		lsn, err := s.ReplayLSN(ctx)
		if err == nil && lsn >= target {
			return lsn, nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return lsn, fmt.Errorf("waiting for the shadow to replay %s: %w (last error: %v)", target, ctx.Err(), err)
			}
			return lsn, fmt.Errorf("waiting for the shadow to replay %s: %w (replayed %s)", target, ctx.Err(), lsn)
		case <-t.C:
		}
	}
}

// queryRow runs a one-row query on the cached local connection, redialling
// once when the connection broke (the shadow restarted).
func (s *Shadow) queryRow(ctx context.Context, sql string, dest ...any) error {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		if s.conn == nil || s.conn.IsClosed() {
			if s.conn, err = s.Connect(ctx, s.cfg.Database); err != nil {
				s.conn = nil
				return err
			}
		}
		if err = s.conn.QueryRow(ctx, sql).Scan(dest...); err == nil {
			return nil
		}
		if ctx.Err() != nil || !s.conn.IsClosed() && !isConnectionError(err) {
			return err
		}
		s.conn.Close(context.Background())
		s.conn = nil
	}
	return err
}

func isConnectionError(err error) bool {
	var pgErr interface{ SQLState() string }
	if errors.As(err, &pgErr) {
		// 57P01 admin_shutdown, 57P02 crash_shutdown, 57P03 cannot_connect_now
		st := pgErr.SQLState()
		return strings.HasPrefix(st, "08") || st == "57P01" || st == "57P02" || st == "57P03"
	}
	return true
}

func (s *Shadow) closeConn() {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	if s.conn != nil {
		s.conn.Close(context.Background())
		s.conn = nil
	}
}

// Connect opens a new local (unix socket) connection to database db of the
// shadow as ShadowConfig.User. The caller closes it.
func (s *Shadow) Connect(ctx context.Context, db string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig("sslmode=disable connect_timeout=10")
	if err != nil {
		return nil, err
	}
	cfg.Host, cfg.Port, cfg.User, cfg.Database = s.cfg.SocketDir, uint16(s.cfg.Port), s.cfg.User, db
	cfg.Password, cfg.Fallbacks = "", nil
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to the shadow (%s, port %d, database %q): %w", s.cfg.SocketDir, s.cfg.Port, db, err)
	}
	return conn, nil
}

// QueryStrings runs sql on database db of the shadow and returns every row
// in PostgreSQL's text format, NULL as `\N`: handy for comparing catalogs.
func (s *Shadow) QueryStrings(ctx context.Context, db, sql string, args ...any) ([][]string, error) {
	conn, err := s.Connect(ctx, db)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	return QueryStrings(ctx, conn, sql, args...)
}

// QueryStrings runs sql on conn with the simple protocol (text results) and
// returns every row, NULL as `\N`.
func QueryStrings(ctx context.Context, conn *pgx.Conn, sql string, args ...any) ([][]string, error) {
	rows, err := conn.Query(ctx, sql, append([]any{pgx.QueryExecModeSimpleProtocol}, args...)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][]string
	for rows.Next() {
		raw := rows.RawValues()
		row := make([]string, len(raw))
		for i, v := range raw {
			if v == nil {
				row[i] = `\N`
			} else {
				row[i] = string(v)
			}
		}
		out = append(out, row)
	}
	return out, rows.Err()
}

// DataDirSize is the bytes of regular files in the data directory, pg_wal
// and the server log excluded: what the catalogs cost on disk.
func (s *Shadow) DataDirSize() (int64, error) {
	return dataDirSize(s.cfg.Dir, s.cfg.LogFile)
}

func dataDirSize(dir, logFile string) (int64, error) {
	var total int64
	walDir := filepath.Join(dir, "pg_wal")
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while walking (server temp files)
			}
			return err
		}
		if d.IsDir() && path == walDir {
			return filepath.SkipDir
		}
		if !d.Type().IsRegular() || path == logFile {
			return nil
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		total += info.Size()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("measuring the shadow in %s: %w", dir, err)
	}
	return total, nil
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// readTail returns up to n bytes of path from offset on (the last n when
// there are more).
func readTail(path string, offset, n int64) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	if offset > int64(len(b)) {
		offset = 0
	}
	b = b[offset:]
	if int64(len(b)) > n {
		b = b[int64(len(b))-n:]
	}
	return string(b)
}
