package shadow

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walshadow/walshadow/internal/testrig"
)

// skipOrFailBridge skips locally and fails under CI=true, where a missing
// toolchain must not pass silently.
func skipOrFailBridge(t *testing.T, reason string) {
	t.Helper()
	if testrig.InCI() {
		t.Fatalf("%s (CI=true: refusing to skip)", reason)
	}
	t.Skip(reason)
}

// buildBridgeModule builds pgext with -Werror into a fresh temporary copy
// that the server's OS user can read, and returns that directory (for
// dynamic_library_path).
func buildBridgeModule(t *testing.T) string {
	t.Helper()
	testrig.SkipIfShort(t, "a pgext build")
	pgConfig := filepath.Join(testrig.PGBinDir(t), "pg_config")
	for _, tool := range []string{"make", "cc"} {
		if _, err := exec.LookPath(tool); err != nil {
			skipOrFailBridge(t, tool+" is not installed: cannot build pgext")
		}
	}
	inc, err := exec.Command(pgConfig, "--includedir-server").Output()
	if err != nil {
		skipOrFailBridge(t, fmt.Sprintf("%s --includedir-server: %v: install postgresql-server-dev-15", pgConfig, err))
	}
	if _, err := os.Stat(filepath.Join(strings.TrimSpace(string(inc)), "postgres.h")); err != nil {
		skipOrFailBridge(t, "PostgreSQL server headers are missing: install postgresql-server-dev-15")
	}
	src, err := filepath.Abs(filepath.Join("..", "..", "pgext"))
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "walshadow-pgext-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if name := e.Name(); name == "Makefile" || strings.HasSuffix(name, ".c") || strings.HasSuffix(name, ".h") {
			b, err := os.ReadFile(filepath.Join(src, name))
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, name), b, 0o644)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	out, err := exec.Command("make", "-C", dir, "PG_CONFIG="+pgConfig, "WERROR=1").CombinedOutput()
	if err != nil {
		t.Fatalf("building pgext: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "warning:") {
		t.Errorf("pgext builds with warnings:\n%s", out)
	}
	return dir
}

// serverOSUser is the OS user test servers run as (postgres under root).
func serverOSUser(t *testing.T) *user.User {
	t.Helper()
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		skipOrFailBridge(t, "running as root without a postgres OS user")
	}
	return u
}

// serverOwnedDir makes a 0700 temporary directory owned by the servers' OS
// user, for the bridge socket or a standby's data.
func serverOwnedDir(t *testing.T, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kept %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	if u := serverOSUser(t); u != nil {
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// dialBridgeWhenUp waits for the worker's socket (it starts once the server
// reaches a consistent state) and dials it.
func dialBridgeWhenUp(t *testing.T, sock string) *Bridge {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		b, err := DialBridge(ctx, sock)
		cancel()
		if err == nil {
			t.Cleanup(func() { b.Close() })
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("the bridge worker never answered on %s: %v", sock, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startBridgePrimary starts a plain PostgreSQL with the module preloaded.
func startBridgePrimary(t *testing.T, opts ...testrig.PGOption) (*testrig.Postgres, *Bridge, string) {
	t.Helper()
	lib := buildBridgeModule(t)
	sock := filepath.Join(serverOwnedDir(t, "walshadow-bridge-"), "bridge.sock")
	preload, extra := BridgeSettings(sock, "postgres", lib)
	all := []testrig.PGOption{testrig.WithSetting("shared_preload_libraries", strings.Join(preload, ","))}
	for k, v := range extra {
		all = append(all, testrig.WithSetting(k, v))
	}
	p := testrig.StartPostgres(t, append(all, opts...)...) // the caller's settings win
	return p, dialBridgeWhenUp(t, sock), sock
}

func bridgeWorkerPID(t *testing.T, p *testrig.Postgres) int64 {
	t.Helper()
	return p.QueryInt(t, "SELECT coalesce((SELECT pid FROM pg_stat_activity WHERE backend_type = 'walshadow bridge'), 0)")
}

// rawRequest sends bytes on a fresh connection and reads one response frame.
func rawExchange(t *testing.T, conn net.Conn, req []byte) ([]byte, error) {
	t.Helper()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := conn.Write(req); err != nil {
		return nil, err
	}
	return readFrame(conn, MaxBridgeResponse)
}

func frame(payload ...[]byte) []byte {
	var p []byte
	for _, b := range payload {
		p = append(p, b...)
	}
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(p))), p...)
}

func be32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

// expectStatusError checks that resp is a status-1 response mentioning want.
func expectStatusError(t *testing.T, what string, resp []byte, err error, want string) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: no response: %v", what, err)
		return
	}
	_, perr := parseHelloResponse(resp)
	var be *BridgeError
	if !errors.As(perr, &be) || !strings.Contains(be.Message, want) {
		t.Errorf("%s: response %x (%v), want an error mentioning %q", what, resp, perr, want)
	}
}

func expectClosed(t *testing.T, what string, conn net.Conn) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := conn.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("%s: the worker kept the connection (read %d, %v)", what, n, err)
	}
}

func expectHello(t *testing.T, what string, conn net.Conn) {
	t.Helper()
	resp, err := rawExchange(t, conn, encodeHelloRequest())
	if err == nil {
		_, err = parseHelloResponse(resp)
	}
	if err != nil {
		t.Errorf("%s: HELLO on the same connection failed: %v", what, err)
	}
}

// TestBridgeWorkerRobustness sends broken frames as raw bytes: each gets an
// error status (the connection closed only when the framing is lost), the
// worker never crashes, and a client killed mid-frame is dropped after
// io_timeout_ms.
func TestBridgeWorkerRobustness(t *testing.T) {
	p, b, sock := startBridgePrimary(t, testrig.WithSetting("walshadow.io_timeout_ms", "500"),
		testrig.WithSetting("walshadow.max_request_mb", "1"))
	pid := bridgeWorkerPID(t, p)
	if pid == 0 {
		t.Fatal("no walshadow bridge in pg_stat_activity")
	}
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}

	c := dial()
	resp, err := rawExchange(t, c, be32(2<<20))
	expectStatusError(t, "oversized length", resp, err, "exceeds walshadow.max_request_mb")
	expectClosed(t, "oversized length", c)

	c = dial()
	c.Write(be32(100))
	c.Write(make([]byte, 10))
	c.(*net.UnixConn).CloseWrite()
	resp, err = readFrame(c, MaxBridgeResponse)
	expectStatusError(t, "truncated frame", resp, err, "truncated frame")
	expectClosed(t, "truncated frame", c)

	c = dial()
	for _, tc := range []struct {
		name, want string
		req        []byte
	}{
		{"empty frame", "empty frame", be32(0)},
		{"unknown opcode", "unknown opcode 0x7f", frame([]byte{0x7f})},
		{"hello with trailing bytes", "trailing bytes", frame([]byte{0x01, 0})},
		{"decode missing its second item", "truncated request", frame([]byte{0x02}, be32(2), be32(23), be32(4), []byte{1, 0, 0, 0})},
		{"decode item longer than the frame", "truncated request", frame([]byte{0x02}, be32(1), be32(25), be32(1000), []byte{0x0b})},
		{"decode count over the payload", "truncated request", frame([]byte{0x02}, be32(0xffffffff))},
		{"scan of 65537 oids", "exceeds the limit of 65536", frame([]byte{0x03, 1}, be32(0), be32(65537))},
		{"scan of catalog 9", "unknown catalog 9", frame([]byte{0x03, 9}, be32(0), be32(0))},
		{"scan short of its oids", "truncated request", frame([]byte{0x03, 1}, be32(0), be32(3), be32(1259))},
		{"replay_lsn with trailing bytes", "trailing bytes", frame([]byte{0x04, 1, 2})},
	} {
		resp, err := rawExchange(t, c, tc.req)
		expectStatusError(t, tc.name, resp, err, tc.want)
		expectHello(t, tc.name, c)
	}

	// A scan of exactly 65536 oids is served.
	oids := make([]uint32, MaxScanOids)
	for i := range oids {
		oids[i] = uint32(i + 1)
	}
	ctx := context.Background()
	start := time.Now()
	if res, err := b.Scan(ctx, CatalogClass, 0, oids); err != nil || len(res.Rows) == 0 {
		t.Errorf("scan of 65536 oids: %v", err)
	} else {
		t.Logf("SCAN pg_class for 65536 oids: %d rows in %v", len(res.Rows), time.Since(start))
	}

	// A client that stops inside a frame is dropped after io_timeout_ms.
	stalled := dial()
	stalled.Write([]byte{0, 0})
	expectClosed(t, "stalled client", stalled)

	// Clients past WS_MAX_CLIENTS (8: b and c hold two) are refused with an
	// error; the others stay served.
	var held []net.Conn
	for i := 0; i < 6; i++ {
		held = append(held, dial())
		expectHello(t, fmt.Sprintf("client %d", i+3), held[i])
	}
	extra := dial()
	resp, err = readFrame(extra, MaxBridgeResponse)
	expectStatusError(t, "ninth client", resp, err, "too many clients")
	for _, h := range held {
		h.Close()
	}

	if after := bridgeWorkerPID(t, p); after != pid {
		t.Errorf("the worker restarted (pid %d, then %d)", pid, after)
	}
	if _, err := b.Hello(ctx); err != nil {
		t.Errorf("HELLO after the abuse: %v", err)
	}
}

// TestBridgeWorkerRestart terminates the worker: the postmaster restarts it,
// the socket comes back, and the client redials.
func TestBridgeWorkerRestart(t *testing.T) {
	p, b, _ := startBridgePrimary(t)
	ctx := context.Background()
	h, err := b.Hello(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h.Protocol != 1 || h.InRecovery || int64(h.PGVersionNum) != p.QueryInt(t, "SELECT current_setting('server_version_num')::int") {
		t.Errorf("hello %+v", h)
	}
	before := p.CurrentInsertLSN(t)
	if lsn, err := b.ReplayLSN(ctx); err != nil || lsn < before {
		t.Errorf("REPLAY_LSN on a primary: %s (insert LSN was %s), %v", lsn, before, err)
	}

	pid := bridgeWorkerPID(t, p)
	p.Exec(t, "SELECT pg_terminate_backend($1::int)", pid)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if now := bridgeWorkerPID(t, p); now != 0 && now != pid {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the bridge worker did not come back")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The socket may lag the pid by a moment.
	var lastErr error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if _, lastErr = b.Hello(ctx); lastErr == nil {
			break
		}
	}
	if lastErr != nil {
		t.Fatalf("HELLO after the restart: %v", lastErr)
	}
	if s := b.Stats().Hello; s.Redials == 0 {
		t.Errorf("no redial counted: %+v", s)
	}
	if !strings.Contains(readLog(t, p), "walshadow bridge listening on") {
		t.Error("the worker did not log its socket")
	}
}

func readLog(t *testing.T, p *testrig.Postgres) string {
	t.Helper()
	b, err := os.ReadFile(p.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// rawRows runs a query in the simple protocol and returns each value as the
// server's text output (typoutput), nil for NULL.
func rawRows(t *testing.T, conn *pgx.Conn, sql string) [][]*string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rows, err := conn.Query(ctx, sql, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatalf("query %q: %v", sql, err)
	}
	defer rows.Close()
	var out [][]*string
	for rows.Next() {
		raw := rows.RawValues()
		row := make([]*string, len(raw))
		for i, v := range raw {
			if v != nil {
				s := string(v)
				row[i] = &s
			}
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("query %q: %v", sql, err)
	}
	return out
}
