package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walshadow/walshadow/internal/testrig"
	"github.com/walshadow/walshadow/internal/wal"
)

// wsPGStandby is a real PostgreSQL hot standby whose primary is our
// walsender: made from pg_basebackup -X none of the source, so every byte
// of WAL it replays comes from the walsender or from the archive through
// restore_command.
type wsPGStandby struct {
	t       *testing.T
	bindir  string
	osUser  *user.User // nil: run as ourselves
	dir     string
	dataDir string
	logPath string
	port    int
}

// wsPGCommand runs a server binary as the cluster owner.
func (s *wsPGStandby) command(name string, args ...string) *exec.Cmd {
	bin := filepath.Join(s.bindir, name)
	var cmd *exec.Cmd
	if s.osUser != nil {
		cmd = exec.Command("runuser", append([]string{"-u", s.osUser.Username, "--", bin}, args...)...)
	} else {
		cmd = exec.Command(bin, args...)
	}
	cmd.Dir = s.dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	return cmd
}

func (s *wsPGStandby) run(name string, args ...string) {
	s.t.Helper()
	if out, err := s.command(name, args...).CombinedOutput(); err != nil {
		s.t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

func (s *wsPGStandby) chown(path string) {
	s.t.Helper()
	if s.osUser == nil {
		return
	}
	uid, _ := strconv.Atoi(s.osUser.Uid)
	gid, _ := strconv.Atoi(s.osUser.Gid)
	if err := os.Chown(path, uid, gid); err != nil {
		s.t.Fatal(err)
	}
}

func (s *wsPGStandby) start() {
	s.t.Helper()
	s.run("pg_ctl", "-D", s.dataDir, "-l", s.logPath, "-w", "-t", "120", "start")
}

func (s *wsPGStandby) stop() error {
	if _, err := os.Stat(filepath.Join(s.dataDir, "postmaster.pid")); err != nil {
		return nil
	}
	out, err := s.command("pg_ctl", "-D", s.dataDir, "-m", "fast", "-w", "-t", "60", "stop").CombinedOutput()
	if err != nil {
		out2, err2 := s.command("pg_ctl", "-D", s.dataDir, "-m", "immediate", "-w", "-t", "60", "stop").CombinedOutput()
		return fmt.Errorf("pg_ctl stop: %v %s; immediate: %v %s", err, out, err2, out2)
	}
	return nil
}

func (s *wsPGStandby) dsn() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

func (s *wsPGStandby) queryString(sql string) string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.dsn())
	if err != nil {
		s.t.Fatalf("connecting to the standby: %v", err)
	}
	defer conn.Close(context.Background())
	var v string
	if err := conn.QueryRow(ctx, sql).Scan(&v); err != nil {
		s.t.Fatalf("standby query %q: %v", sql, err)
	}
	return v
}

func (s *wsPGStandby) replayLSN() wal.LSN {
	s.t.Helper()
	l, err := wal.ParseLSN(s.queryString("SELECT coalesce(pg_last_wal_replay_lsn(), '0/0')::text"))
	if err != nil {
		s.t.Fatal(err)
	}
	return l
}

func (s *wsPGStandby) waitReplay(target wal.LSN, timeout time.Duration) wal.LSN {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got := s.replayLSN()
		if got >= target {
			return got
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("standby replayed through %s after %v, want %s", got, timeout, target)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *wsPGStandby) log() string {
	b, _ := os.ReadFile(s.logPath)
	return string(b)
}

// wsTestPump publishes the source's WAL, read from its segment files up to
// its flush position, and archives every completed segment: what the
// session pump does, minus the filter.
type wsTestPump struct {
	w       *Walsender
	archive *Archive
	walDir  string
	segSize uint32
	reader  *wal.StreamReader

	mu        sync.Mutex
	pos       wal.LSN // next byte to publish
	recordEnd wal.LSN // Next of the last complete record published
	err       error
}

func (p *wsTestPump) state() (pos, recordEnd wal.LSN, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pos, p.recordEnd, p.err
}

func (p *wsTestPump) run(ctx context.Context, sourceDSN string) {
	err := p.loop(ctx, sourceDSN)
	if err != nil && ctx.Err() == nil {
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
	}
}

func (p *wsTestPump) loop(ctx context.Context, sourceDSN string) error {
	conn, err := pgx.Connect(ctx, sourceDSN)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	seg := wal.LSN(p.segSize)
	for ctx.Err() == nil {
		var s string
		if err := conn.QueryRow(ctx, "SELECT pg_current_wal_flush_lsn()::text").Scan(&s); err != nil {
			return err
		}
		flush, err := wal.ParseLSN(s)
		if err != nil {
			return err
		}
		for pos, _, _ := p.state(); pos < flush; pos, _, _ = p.state() {
			segStart := pos - pos%seg
			name := archiveSegmentName(1, uint64(pos/seg), p.segSize)
			// Publish through the flush position or a page boundary, as the
			// session pump publishes through record ends (see Publish).
			n := min(flush, segStart+seg, pos+64<<10) - pos
			if pos+n != flush {
				n = (pos+n)&^(wsWALPageSize-1) - pos
			}
			f, err := os.Open(filepath.Join(p.walDir, name))
			if err != nil {
				return err
			}
			buf := make([]byte, n)
			_, err = f.ReadAt(buf, int64(pos-segStart))
			f.Close()
			if err != nil {
				return fmt.Errorf("reading %s at %s: %w", name, pos, err)
			}
			p.w.Publish(pos, buf)
			p.reader.Push(buf)
			end := p.recordEndAfterPush()
			p.mu.Lock()
			p.pos = pos + n
			if end != 0 {
				p.recordEnd = end
			}
			p.mu.Unlock()
			if pos+n == segStart+seg {
				whole, err := os.ReadFile(filepath.Join(p.walDir, name))
				if err != nil {
					return err
				}
				if err := p.archive.WriteSegment(name, whole); err != nil {
					return err
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

func (p *wsTestPump) recordEndAfterPush() wal.LSN {
	var end wal.LSN
	for {
		rec, err := p.reader.Next()
		if err != nil {
			return end // ErrNeedMore; a real error shows up as a stalled replay
		}
		end = rec.Next
	}
}

// waitPublished waits until the pump has published the source's flush
// position as of now and returns the end of the last complete record.
func (p *wsTestPump) waitPublished(t *testing.T, src *testrig.Postgres) wal.LSN {
	t.Helper()
	target := src.QueryLSN(t, "SELECT pg_current_wal_flush_lsn()")
	deadline := time.Now().Add(2 * time.Minute)
	for {
		pos, end, err := p.state()
		if err != nil {
			t.Fatalf("pump: %v", err)
		}
		if pos >= target {
			return end
		}
		if time.Now().After(deadline) {
			t.Fatalf("pump published through %s, want %s", pos, target)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// wsPgbenchState summarises the pgbench tables; equal on source and
// standby means the standby replayed every committed change.
const wsPgbenchState = `SELECT (SELECT count(*) || ':' || sum(abalance) FROM pgbench_accounts) || '/' ||
	(SELECT count(*) || ':' || coalesce(sum(delta), 0) FROM pgbench_history) || '/' ||
	(SELECT sum(tbalance) FROM pgbench_tellers) || '/' || (SELECT sum(bbalance) FROM pgbench_branches)`

func wsFreePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func TestWalsenderFeedsRealStandby(t *testing.T) {
	src := testrig.StartPostgres(t, testrig.WithWALSegSizeMB(1))
	segSize := uint32(src.WALSegmentSize())
	src.PGBench(t, 1, testrig.PGBenchOptions{})

	s := &wsPGStandby{t: t, bindir: src.BinDir()}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Skip("running as root without a postgres OS user")
		}
		s.osUser = u
	}
	dir, err := os.MkdirTemp("", "walshadow-standby-")
	if err != nil {
		t.Fatal(err)
	}
	s.dir, s.dataDir, s.logPath = dir, filepath.Join(dir, "data"), filepath.Join(dir, "standby.log")
	s.chown(dir)
	t.Cleanup(func() {
		if t.Failed() {
			log := s.log()
			if i := strings.LastIndexByte(log[:max(0, len(log)-8000)], '\n'); i > 0 {
				log = log[i:]
			}
			t.Logf("kept %s; standby log tail:\n%s", dir, log)
			return
		}
		os.RemoveAll(dir)
	})

	// The base backup: no WAL inside, so the standby depends on us for all of it.
	s.run("pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(src.Port()), "-U", "postgres",
		"-D", s.dataDir, "-X", "none", "-c", "fast")
	label, err := os.ReadFile(filepath.Join(s.dataDir, "backup_label"))
	if err != nil {
		t.Fatal(err)
	}
	var backupStart wal.LSN
	for _, line := range strings.Split(string(label), "\n") {
		if rest, ok := strings.CutPrefix(line, "START WAL LOCATION: "); ok {
			if backupStart, err = wal.ParseLSN(strings.Fields(rest)[0]); err != nil {
				t.Fatal(err)
			}
		}
	}
	if backupStart == 0 {
		t.Fatalf("no START WAL LOCATION in backup_label:\n%s", label)
	}

	// Walsender and archive, readable by the standby's OS user only.
	ownerName, groupName := "", ""
	if s.osUser != nil {
		ownerName, groupName = s.osUser.Username, s.osUser.Username
	}
	archive, err := OpenArchive(ArchiveConfig{Dir: filepath.Join(dir, "archive"), SegmentSize: segSize, ReaderGroup: groupName})
	if err != nil {
		t.Fatal(err)
	}
	sysID, err := strconv.ParseUint(src.QueryString(t, "SELECT system_identifier::text FROM pg_control_system()"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	versionNum := int(src.QueryInt(t, "SELECT current_setting('server_version_num')::int"))
	var logger *slog.Logger
	if os.Getenv("WALSHADOW_WS_DEBUG") != "" { // walsender events on stderr, the standby log at the end
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
		t.Cleanup(func() { t.Logf("standby log:\n%s", s.log()) })
	}
	const wsPort = 5433
	w, err := NewWalsender(WalsenderConfig{
		Logger:    logger,
		SocketDir: filepath.Join(dir, "walsender"), Port: wsPort, SocketOwner: ownerName,
		SystemID: sysID, Timeline: 1, SegmentSize: segSize, PGVersionNum: versionNum,
		Archive: archive, SlowThreshold: 1 << 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	serveDone := make(chan error, 1)
	go func() { serveDone <- w.Serve(context.Background()) }()
	t.Cleanup(func() {
		w.Close()
		if err := <-serveDone; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})

	start := backupStart - backupStart%wal.LSN(segSize)
	reader, err := wal.NewStreamReader(start, wal.StreamOptions{SegmentSize: segSize})
	if err != nil {
		t.Fatal(err)
	}
	pump := &wsTestPump{w: w, archive: archive, walDir: src.WALDir(), segSize: segSize, reader: reader, pos: start}
	pumpCtx, stopPump := context.WithCancel(context.Background())
	pumpDone := make(chan struct{})
	go func() { defer close(pumpDone); pump.run(pumpCtx, src.DSN()) }()
	t.Cleanup(func() { stopPump(); <-pumpDone })

	// The standby: primary_conninfo is our socket, restore_command our archive.
	pgSock := filepath.Join(dir, "pgsock")
	if err := os.Mkdir(pgSock, 0o700); err != nil {
		t.Fatal(err)
	}
	s.chown(pgSock)
	s.port = wsFreePort(t)
	conf := fmt.Sprintf(`
# walsender test standby
port = %d
listen_addresses = '127.0.0.1'
unix_socket_directories = '%s'
hot_standby = on
primary_conninfo = 'host=%s port=%d user=postgres application_name=walshadow_test'
restore_command = '%s'
wal_retrieve_retry_interval = '500ms'
log_min_messages = 'info'
`, s.port, pgSock, filepath.Dir(w.SocketPath()), wsPort, strings.ReplaceAll(archive.RestoreCommand(), "'", "''"))
	f, err := os.OpenFile(filepath.Join(s.dataDir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, werr := f.WriteString(conf)
	if err := errors.Join(werr, f.Close()); err != nil {
		t.Fatal(err)
	}
	signal := filepath.Join(s.dataDir, "standby.signal")
	if err := os.WriteFile(signal, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s.chown(signal)
	t.Cleanup(func() {
		if err := s.stop(); err != nil {
			t.Errorf("stopping the standby: %v", err)
		}
	})
	s.start()

	checkInSync := func(phase string) {
		t.Helper()
		target := pump.waitPublished(t, src)
		replay := s.waitReplay(target, 2*time.Minute)
		pos, _, _ := pump.state()
		if replay > pos {
			t.Errorf("%s: standby replayed %s, beyond the published %s", phase, replay, pos)
		}
		want, got := src.QueryString(t, wsPgbenchState), s.queryString(wsPgbenchState)
		if got != want {
			t.Errorf("%s: standby pgbench state %s, source %s", phase, got, want)
		}
		// The standby never saw a torn record (WAL ending inside a record
		// within a page makes PostgreSQL fail the record's CRC).
		if n := strings.Count(s.log(), "incorrect resource manager data checksum"); n > 0 {
			t.Errorf("%s: the standby log has %d CRC failures", phase, n)
		}
		t.Logf("%s: standby replayed %s (last published record ends at %s, published %s); state %s; walsender %+v",
			phase, replay, target, pos, got, w.Stats())
	}

	// 1. Streaming under load.
	src.PGBench(t, 1, testrig.PGBenchOptions{NoInit: true, Clients: 2, Jobs: 1, Duration: 5 * time.Second})
	checkInSync("streaming")
	if w.Connected() != 1 || w.ShadowApply() == 0 {
		t.Errorf("walreceivers %d, reported apply %s", w.Connected(), w.ShadowApply())
	}
	// WaitApply sees the standby's apply position (reply-requested prods).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	replayed := s.replayLSN()
	if err := w.WaitApply(ctx, replayed); err != nil {
		t.Errorf("WaitApply(%s): %v", replayed, err)
	}
	cancel()

	// 2. Dropped connection: the walreceiver reconnects and resumes.
	streams := w.Stats().Streams
	if n := w.DropConnections(); n != 1 {
		t.Errorf("dropped %d connections", n)
	}
	src.PGBench(t, 1, testrig.PGBenchOptions{NoInit: true, Clients: 2, Jobs: 1, Duration: 2 * time.Second})
	checkInSync("after a dropped connection")
	if w.Stats().Streams <= streams {
		t.Error("the walreceiver did not reconnect")
	}

	// 3. A stalled walreceiver falls SlowThreshold behind and is dropped; the
	// standby catches up through the archive (restore_command) and reconnects.
	pidText := s.queryString("SELECT coalesce((SELECT pid FROM pg_stat_wal_receiver), 0)::text")
	pid, _ := strconv.Atoi(pidText)
	if pid <= 0 {
		t.Fatal("no walreceiver on the standby")
	}
	restoredBefore := strings.Count(s.log(), "restored log file")
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)
	drops := w.Stats().SlowDrops
	for i := 0; i < 20 && w.Stats().SlowDrops == drops; i++ {
		src.PGBench(t, 1, testrig.PGBenchOptions{NoInit: true, Clients: 2, Jobs: 1, Duration: time.Second})
		pump.waitPublished(t, src)
	}
	if w.Stats().SlowDrops == drops {
		t.Fatalf("the stalled walreceiver was not dropped: %+v", w.Stats())
	}
	resume()
	checkInSync("after the slow-walreceiver drop")
	if restored := strings.Count(s.log(), "restored log file") - restoredBefore; restored == 0 && w.Stats().ArchiveBytesSent == 0 {
		t.Error("the standby caught up without the archive")
	} else {
		t.Logf("caught up through the archive: %d segments by restore_command, %d bytes by the walsender", restored, w.Stats().ArchiveBytesSent)
	}
	wsEventually(t, "the walreceiver to reconnect", func() bool { return w.Connected() == 1 })

	// 4. Restart the standby: it resumes where it was.
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	s.start()
	src.PGBench(t, 1, testrig.PGBenchOptions{NoInit: true, Clients: 2, Jobs: 1, Duration: 2 * time.Second})
	checkInSync("after a standby restart")

	// 5. Without restore_command, a standby that was down while the memory
	// window moved on gets the missing segments from the walsender, which
	// reads them from the archive.
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	f, err = os.OpenFile(filepath.Join(s.dataDir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, werr = f.WriteString("restore_command = ''\n")
	if err := errors.Join(werr, f.Close()); err != nil {
		t.Fatal(err)
	}
	down := pump.waitPublished(t, src)
	for pos := down; pos < down+3*wal.LSN(segSize); pos = pump.waitPublished(t, src) {
		src.PGBench(t, 1, testrig.PGBenchOptions{NoInit: true, Clients: 2, Jobs: 1, Duration: time.Second})
	}
	fromArchive := w.Stats().ArchiveBytesSent
	s.start()
	checkInSync("streamed from the archive")
	if w.Stats().ArchiveBytesSent == fromArchive {
		t.Errorf("the walsender served nothing from the archive: %+v", w.Stats())
	}

	// The archive never held more than what was published.
	if end, _, _ := pump.state(); archive.DurableEnd() > end {
		t.Errorf("archive end %s beyond published %s", archive.DurableEnd(), end)
	}
}
