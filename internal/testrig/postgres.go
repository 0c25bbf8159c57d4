package testrig

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walshadow/walshadow/internal/wal"
)

// pgQueryTimeout bounds every helper query, so a wedged server fails the test
// instead of hanging it until the go test timeout.
const pgQueryTimeout = 2 * time.Minute

// pgSuperuser is the bootstrap superuser initdb creates (-U), whatever OS
// user runs the server.
const pgSuperuser = "postgres"

// Postgres is a PostgreSQL server started by StartPostgres for one test.
type Postgres struct {
	bindir  string
	dir     *serverDir
	dataDir string
	sockDir string
	logPath string
	port    int
	// osUser is the OS user the server runs as when the tests run as root
	// (PostgreSQL refuses root); nil when the server runs as the current user.
	osUser  *user.User
	running bool
	segSize uint64
}

// PGOption configures StartPostgres.
type PGOption func(*pgConfig)

type pgConfig struct {
	settings     []setting // later entries win, as in postgresql.conf
	walSegSizeMB int
	initdbArgs   []string
}

type setting struct{ key, value string }

// WithSetting sets a postgresql.conf parameter (value as it would appear
// unquoted in SET, e.g. "on", "16MB", "lz4").
func WithSetting(key, value string) PGOption {
	return func(c *pgConfig) { c.settings = append(c.settings, setting{key, value}) }
}

// WithWALCompression sets wal_compression: off, on (pglz), pglz, lz4 or zstd.
func WithWALCompression(method string) PGOption { return WithSetting("wal_compression", method) }

// WithMaxPreparedTransactions enables two-phase commit; DDLScript needs n > 0.
func WithMaxPreparedTransactions(n int) PGOption {
	return WithSetting("max_prepared_transactions", strconv.Itoa(n))
}

// WithFullPageWrites sets full_page_writes.
func WithFullPageWrites(on bool) PGOption { return WithSetting("full_page_writes", onOff(on)) }

// WithFsync sets fsync; the rig turns it off by default for speed.
func WithFsync(on bool) PGOption { return WithSetting("fsync", onOff(on)) }

// WithWALSegSizeMB makes initdb use WAL segments of mb MiB (a power of two
// from 1 to 1024) instead of 16.
func WithWALSegSizeMB(mb int) PGOption { return func(c *pgConfig) { c.walSegSizeMB = mb } }

// WithInitDBArgs passes extra arguments to initdb, e.g. "--data-checksums".
func WithInitDBArgs(args ...string) PGOption {
	return func(c *pgConfig) { c.initdbArgs = append(c.initdbArgs, args...) }
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// settingName guards SetConf and the generated postgresql.conf against
// parameter names that would inject SQL or config lines.
var settingName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.]*$`)

// StartPostgres initdbs a fresh cluster in a temporary directory and starts
// it on a free loopback port with wal_level=logical. It runs as the postgres
// OS user when the tests run as root. The server is stopped when the test
// ends; see the package doc for what happens to its directory.
//
// Defaults: wal_level=logical, max_wal_senders=10, max_replication_slots=10,
// listen_addresses=127.0.0.1, fsync=off, logging_collector=off (server log in
// the temp dir), wal_keep_size=1GB (so completed segments survive checkpoints
// until CopyWALSegments copies them), trust authentication from 127.0.0.1 for
// every database and for replication.
func StartPostgres(t testing.TB, opts ...PGOption) *Postgres {
	t.Helper()
	skipIfShort(t, "PostgreSQL")
	bindir := PGBinDir(t)

	var cfg pgConfig
	for _, o := range opts {
		o(&cfg)
	}
	for _, s := range cfg.settings {
		if !settingName.MatchString(s.key) || strings.ContainsAny(s.value, "\n\r") {
			t.Fatalf("bad setting %q = %q", s.key, s.value)
		}
	}

	p := &Postgres{bindir: bindir}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			skipOrFatal(t, "running as root and there is no postgres OS user to run the server as: install postgresql-15")
		}
		p.osUser = u
	}
	p.dir = newServerDir(t, "walshadow-pg-", p.osUser)
	p.dataDir = filepath.Join(p.dir.path, "data")
	p.sockDir = filepath.Join(p.dir.path, "sock")
	p.logPath = filepath.Join(p.dir.path, "postgres.log")
	p.dir.logs = []string{p.logPath}

	if err := p.mkdir(p.sockDir); err != nil {
		t.Fatal(err)
	}
	if err := p.initdb(cfg); err != nil {
		t.Fatal(err)
	}
	if err := p.writeConfig(cfg); err != nil {
		t.Fatal(err)
	}
	// Stop before the directory cleanup (registered earlier) runs.
	t.Cleanup(func() {
		if err := p.stop(t, "fast"); err != nil {
			t.Errorf("stopping postgres: %v", err)
		}
	})
	p.Start(t)

	size, err := strconv.ParseUint(p.QueryString(t, "SELECT setting FROM pg_settings WHERE name = 'wal_segment_size'"), 10, 64)
	if err != nil {
		t.Fatalf("wal_segment_size: %v", err)
	}
	p.segSize = size
	return p
}

func (p *Postgres) initdb(cfg pgConfig) error {
	args := []string{"-D", p.dataDir, "-U", pgSuperuser, "--auth=trust", "-E", "UTF8", "--locale=C", "--no-instructions"}
	if cfg.walSegSizeMB != 0 {
		args = append(args, "--wal-segsize="+strconv.Itoa(cfg.walSegSizeMB))
	}
	args = append(args, cfg.initdbArgs...)
	_, err := commandOutput(p.serverCommand("initdb", args...))
	return err
}

func (p *Postgres) writeConfig(cfg pgConfig) error {
	settings := []setting{
		{"listen_addresses", "127.0.0.1"},
		{"unix_socket_directories", p.sockDir},
		{"wal_level", "logical"},
		{"max_wal_senders", "10"},
		{"max_replication_slots", "10"},
		{"wal_keep_size", "1GB"},
		{"fsync", "off"},
		{"logging_collector", "off"},
	}
	settings = append(settings, cfg.settings...)
	var conf strings.Builder
	conf.WriteString("\n# walshadow testrig\n")
	for _, s := range settings {
		fmt.Fprintf(&conf, "%s = '%s'\n", s.key, strings.ReplaceAll(s.value, "'", "''"))
	}
	if err := p.appendFile(filepath.Join(p.dataDir, "postgresql.conf"), conf.String()); err != nil {
		return err
	}
	const hba = `# walshadow testrig: trust everything from this host
local   all          all                 trust
local   replication  all                 trust
host    all          all   127.0.0.1/32  trust
host    replication  all   127.0.0.1/32  trust
`
	hbaPath := filepath.Join(p.dataDir, "pg_hba.conf")
	if err := os.WriteFile(hbaPath, []byte(hba), 0o600); err != nil {
		return err
	}
	return p.chown(hbaPath)
}

// Start starts the (stopped) server and waits until it accepts connections.
// StartPostgres already calls it; use it after Stop.
func (p *Postgres) Start(t testing.TB) {
	t.Helper()
	if p.running {
		t.Fatal("postgres: Start on a running server")
	}
	for attempt := 0; ; attempt++ {
		if p.port == 0 || attempt > 0 {
			port, err := freePort()
			if err != nil {
				t.Fatalf("finding a free port: %v", err)
			}
			p.port = port
		}
		logStart := fileSize(p.logPath)
		_, err := commandOutput(p.serverCommand("pg_ctl", "-D", p.dataDir, "-l", p.logPath,
			"-o", "-p "+strconv.Itoa(p.port), "-w", "-t", "120", "start"))
		if err == nil {
			p.running = true
			break
		}
		// pg_ctl may give up while the postmaster is still running.
		p.stop(t, "immediate")
		if attempt == 0 && strings.Contains(readFrom(p.logPath, logStart), "Address already in use") {
			continue
		}
		t.Fatalf("starting postgres: %v", err)
	}
	// pg_ctl -w waits for readiness; check the TCP path the tests use too.
	ctx, cancel := context.WithTimeout(context.Background(), pgQueryTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.DSN())
	if err != nil {
		t.Fatalf("postgres started but connecting to %s failed: %v", p.DSN(), err)
	}
	conn.Close(ctx)
}

// Stop shuts the server down (fast mode) and waits for it to exit.
func (p *Postgres) Stop(t testing.TB) {
	t.Helper()
	if !p.running {
		t.Fatal("postgres: Stop on a stopped server")
	}
	if err := p.stop(t, "fast"); err != nil {
		t.Fatal(err)
	}
}

// Restart stops and starts the server, e.g. after SetConf of a parameter
// that needs a restart. The port may change if it was taken meanwhile.
func (p *Postgres) Restart(t testing.TB) {
	t.Helper()
	p.Stop(t)
	p.Start(t)
}

// stop runs pg_ctl stop in the given mode, falling back to immediate. It is
// idempotent, so cleanups can call it whatever state the test left.
func (p *Postgres) stop(t testing.TB, mode string) error {
	if _, err := os.Stat(filepath.Join(p.dataDir, "postmaster.pid")); err != nil {
		p.running = false
		return nil
	}
	_, err := commandOutput(p.serverCommand("pg_ctl", "-D", p.dataDir, "-m", mode, "-w", "-t", "60", "stop"))
	if err != nil && mode != "immediate" {
		t.Logf("postgres: %v; retrying with -m immediate", err)
		_, err = commandOutput(p.serverCommand("pg_ctl", "-D", p.dataDir, "-m", "immediate", "-w", "-t", "60", "stop"))
	}
	if err == nil {
		p.running = false
	}
	return err
}

// DataDir is the cluster's data directory.
func (p *Postgres) DataDir() string { return p.dataDir }

// WALDir is the cluster's pg_wal directory.
func (p *Postgres) WALDir() string { return filepath.Join(p.dataDir, "pg_wal") }

// BinDir is the directory of the PostgreSQL binaries the server runs.
func (p *Postgres) BinDir() string { return p.bindir }

// Port is the server's TCP port on 127.0.0.1.
func (p *Postgres) Port() int { return p.port }

// LogPath is the server log file.
func (p *Postgres) LogPath() string { return p.logPath }

// DSN is a pgx connection string for the postgres database as superuser.
func (p *Postgres) DSN() string { return p.DSNFor("postgres") }

// DSNFor is a pgx connection string for database db as superuser.
func (p *Postgres) DSNFor(db string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", pgSuperuser, p.port, db)
}

// ReplicationDSN is a connection string for a physical replication
// connection (replication=true: IDENTIFY_SYSTEM, START_REPLICATION PHYSICAL),
// for pgconn.Connect.
func (p *Postgres) ReplicationDSN() string { return p.DSN() + "&replication=true" }

// WALSegmentSize is the cluster's WAL segment size in bytes.
func (p *Postgres) WALSegmentSize() uint64 { return p.segSize }

// Connect opens a connection that is closed when the test ends.
func (p *Postgres) Connect(t testing.TB) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), pgQueryTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.DSN())
	if err != nil {
		t.Fatalf("connecting to %s: %v", p.DSN(), err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// Each helper below opens its own short connection: it keeps them safe to
// call from several goroutines and across Restart, and loopback trust
// connections take a few milliseconds.

// Exec runs sql (several statements are allowed when there are no args) and
// fails the test on error.
func (p *Postgres) Exec(t testing.TB, sql string, args ...any) pgconn.CommandTag {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), pgQueryTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.DSN())
	if err != nil {
		t.Fatalf("connecting to %s: %v", p.DSN(), err)
	}
	defer conn.Close(context.Background())
	tag, err := conn.Exec(ctx, sql, args...)
	if err != nil {
		t.Fatalf("exec %q: %v", abbreviate(sql), err)
	}
	return tag
}

// QueryRow runs a query returning one row; the caller must call Scan, which
// also closes the connection.
func (p *Postgres) QueryRow(t testing.TB, sql string, args ...any) pgx.Row {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), pgQueryTimeout)
	conn, err := pgx.Connect(ctx, p.DSN())
	if err != nil {
		cancel()
		t.Fatalf("connecting to %s: %v", p.DSN(), err)
	}
	return &closingRow{row: conn.QueryRow(ctx, sql, args...), conn: conn, cancel: cancel}
}

type closingRow struct {
	row    pgx.Row
	conn   *pgx.Conn
	cancel context.CancelFunc
}

func (r *closingRow) Scan(dest ...any) error {
	defer r.cancel()
	defer r.conn.Close(context.Background())
	return r.row.Scan(dest...)
}

// QueryInt runs a query returning one non-NULL integer.
func (p *Postgres) QueryInt(t testing.TB, sql string, args ...any) int64 {
	t.Helper()
	var v int64
	if err := p.QueryRow(t, sql, args...).Scan(&v); err != nil {
		t.Fatalf("query %q: %v", abbreviate(sql), err)
	}
	return v
}

// QueryString runs a query returning one non-NULL value as text (add ::text
// to non-text expressions).
func (p *Postgres) QueryString(t testing.TB, sql string, args ...any) string {
	t.Helper()
	var v string
	if err := p.QueryRow(t, sql, args...).Scan(&v); err != nil {
		t.Fatalf("query %q: %v", abbreviate(sql), err)
	}
	return v
}

// QueryLSN runs a query returning one pg_lsn (or its text form).
func (p *Postgres) QueryLSN(t testing.TB, sql string, args ...any) wal.LSN {
	t.Helper()
	s := p.QueryString(t, "SELECT ("+sql+")::text", args...)
	lsn, err := wal.ParseLSN(s)
	if err != nil {
		t.Fatalf("query %q: %v", abbreviate(sql), err)
	}
	return lsn
}

// CurrentLSN is pg_current_wal_lsn(): the WAL write position.
func (p *Postgres) CurrentLSN(t testing.TB) wal.LSN {
	t.Helper()
	return p.QueryLSN(t, "SELECT pg_current_wal_lsn()")
}

// CurrentInsertLSN is pg_current_wal_insert_lsn(): where the next record goes.
func (p *Postgres) CurrentInsertLSN(t testing.TB) wal.LSN {
	t.Helper()
	return p.QueryLSN(t, "SELECT pg_current_wal_insert_lsn()")
}

// WaitForLSN polls sql, which returns one pg_lsn (NULL counts as not yet),
// every 50 ms until cond holds for it, and returns that LSN. It fails the test
// after timeout. Example: wait until a slot has confirmed a position:
//
//	p.WaitForLSN(t, "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 's'",
//		func(l wal.LSN) bool { return l >= target }, 10*time.Second)
func (p *Postgres) WaitForLSN(t testing.TB, sql string, cond func(wal.LSN) bool, timeout time.Duration) wal.LSN {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := "no value yet"
	for {
		var s *string
		if err := p.QueryRow(t, "SELECT ("+sql+")::text").Scan(&s); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			t.Fatalf("query %q: %v", abbreviate(sql), err)
		}
		if s != nil {
			lsn, err := wal.ParseLSN(*s)
			if err != nil {
				t.Fatalf("query %q: %v", abbreviate(sql), err)
			}
			if cond(lsn) {
				return lsn
			}
			last = lsn.String()
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for the LSN of %q; last value: %s", timeout, abbreviate(sql), last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// SwitchWAL runs pg_switch_wal() and returns its result: the end of the
// switch record (or the current position when the segment was still empty
// and no switch happened).
func (p *Postgres) SwitchWAL(t testing.TB) wal.LSN {
	t.Helper()
	return p.QueryLSN(t, "SELECT pg_switch_wal()")
}

// Checkpoint runs CHECKPOINT.
func (p *Postgres) Checkpoint(t testing.TB) {
	t.Helper()
	p.Exec(t, "CHECKPOINT")
}

// SetConf sets a parameter with ALTER SYSTEM and reloads the configuration.
// Parameters that need a restart take effect only after Restart.
func (p *Postgres) SetConf(t testing.TB, key, value string) {
	t.Helper()
	if !settingName.MatchString(key) {
		t.Fatalf("SetConf: bad parameter name %q", key)
	}
	p.Exec(t, fmt.Sprintf("ALTER SYSTEM SET %s = '%s'", key, strings.ReplaceAll(value, "'", "''")))
	p.Exec(t, "SELECT pg_reload_conf()")
}

// CopyWALSegments switches to a new WAL segment and copies every completed
// segment file (those before the one holding the insert position after the
// switch) of the current timeline from pg_wal into dst, in name order, and
// returns their base names. Partial and history files, backup labels and
// archive_status are not copied. dst is created if needed. Segments already
// recycled by a checkpoint are gone; the default wal_keep_size of 1GB keeps
// them for test-sized workloads.
func (p *Postgres) CopyWALSegments(t testing.TB, dst string) []string {
	t.Helper()
	p.SwitchWAL(t)
	insert := p.CurrentInsertLSN(t)
	tli := uint32(p.QueryInt(t, "SELECT timeline_id FROM pg_control_checkpoint()"))
	names, err := completedSegments(p.WALDir(), tli, uint64(insert)/p.segSize, p.segSize)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if err := copyFile(filepath.Join(p.WALDir(), name), filepath.Join(dst, name)); err != nil {
			t.Fatal(err)
		}
	}
	return names
}

// segmentNamePattern matches WAL segment file names: timeline, log and
// segment as 8 upper-case hex digits each.
var segmentNamePattern = regexp.MustCompile(`^[0-9A-F]{24}$`)

// completedSegments lists the segment files of timeline tli in walDir whose
// segment number is below endSegNo, in name order.
func completedSegments(walDir string, tli uint32, endSegNo, segSize uint64) ([]string, error) {
	entries, err := os.ReadDir(walDir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || !segmentNamePattern.MatchString(name) {
			continue
		}
		fileTLI, segNo, err := parseSegmentName(name, segSize)
		if err != nil {
			return nil, err
		}
		if fileTLI == tli && segNo < endSegNo {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names, nil
}

// parseSegmentName inverts XLogFileName: TTTTTTTTLLLLLLLLSSSSSSSS where the
// segment number is L*segmentsPerXLogId + S.
func parseSegmentName(name string, segSize uint64) (tli uint32, segNo uint64, err error) {
	if len(name) != 24 || segSize == 0 {
		return 0, 0, fmt.Errorf("bad WAL segment name %q", name)
	}
	t, err1 := strconv.ParseUint(name[0:8], 16, 32)
	log, err2 := strconv.ParseUint(name[8:16], 16, 32)
	seg, err3 := strconv.ParseUint(name[16:24], 16, 32)
	if err := errors.Join(err1, err2, err3); err != nil {
		return 0, 0, fmt.Errorf("bad WAL segment name %q: %w", name, err)
	}
	return uint32(t), log*(0x100000000/segSize) + seg, nil
}

// SegmentName is XLogFileName: the file name of segment segNo on timeline tli.
func SegmentName(tli uint32, segNo, segSize uint64) string {
	perID := 0x100000000 / segSize
	return fmt.Sprintf("%08X%08X%08X", tli, segNo/perID, segNo%perID)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copying %s: %w", src, err)
	}
	return out.Close()
}

// serverCommand builds a command for a server-side binary (initdb, pg_ctl)
// that must run as the cluster's owner.
func (p *Postgres) serverCommand(name string, args ...string) *exec.Cmd {
	bin := filepath.Join(p.bindir, name)
	var cmd *exec.Cmd
	if p.osUser != nil {
		cmd = exec.Command("runuser", append([]string{"-u", p.osUser.Username, "--", bin}, args...)...)
	} else {
		cmd = exec.Command(bin, args...)
	}
	// The owner may not be able to enter the caller's working directory.
	cmd.Dir = p.dir.path
	cmd.Env = CleanPGEnv()
	return cmd
}

// clientCommand builds a command for a client binary (psql, pgbench); those
// connect over TCP and run as the current user.
func (p *Postgres) clientCommand(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(p.bindir, name), args...)
	cmd.Dir = p.dir.path
	cmd.Env = CleanPGEnv()
	return cmd
}

// CleanPGEnv is the environment without PG* variables, which would otherwise
// redirect the rig's commands (PGDATA, PGHOST, PGOPTIONS, ...).
func CleanPGEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			env = append(env, kv)
		}
	}
	return env
}

func (p *Postgres) mkdir(path string) error {
	if err := os.Mkdir(path, 0o700); err != nil {
		return err
	}
	return p.chown(path)
}

func (p *Postgres) chown(path string) error {
	if p.osUser == nil {
		return nil
	}
	return chownUser(path, p.osUser)
}

func (p *Postgres) appendFile(path, text string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// readFrom returns the file's content from offset on, or "" on error.
func readFrom(path string, offset int64) string {
	b, err := os.ReadFile(path)
	if err != nil || offset > int64(len(b)) {
		return ""
	}
	return string(b[offset:])
}

// abbreviate shortens SQL for error messages.
func abbreviate(sql string) string {
	const max = 200
	if len(sql) <= max {
		return sql
	}
	return sql[:max] + "..."
}
