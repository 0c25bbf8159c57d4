// Package testrig starts real PostgreSQL and ClickHouse servers as local
// processes for tests, drives workloads against them, and runs pg_waldump as
// an oracle for the WAL decoder.
//
// Every server lives in its own temporary directory. When the test passes the
// directory is removed; when it fails the directory is kept and its path and
// the tail of the server log are logged, so a failure can be inspected.
//
// Missing binaries skip the test locally and fail it when CI=true: CI must
// never pass by silently skipping. testing.Short() skips every server.
package testrig

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// Environment variables that override binary discovery.
const (
	EnvPGBinDir      = "WALSHADOW_PG_BINDIR"
	EnvClickHouseBin = "WALSHADOW_CLICKHOUSE_BIN"
)

// DefaultPGBinDir is where Debian's postgresql-15 package installs its binaries.
const DefaultPGBinDir = "/usr/lib/postgresql/15/bin"

// logTailLines is how much of a server log a failed test prints.
const logTailLines = 50

// InCI reports whether the tests run under CI (CI=true), where a missing
// dependency is a failure rather than a skip.
func InCI() bool {
	v, _ := strconv.ParseBool(os.Getenv("CI"))
	return v
}

// skipOrFatal skips the test with reason, or fails it under CI.
func skipOrFatal(t testing.TB, reason string) {
	t.Helper()
	if InCI() {
		t.Fatalf("%s (CI=true: refusing to skip)", reason)
	}
	t.Skip(reason)
}

// skipIfShort skips server tests under -short, even in CI: -short is an
// explicit request. First it holds the test to the naming rule (so that
// go tool task test:short, which starts nothing, still checks it).
func skipIfShort(t testing.TB, what string) {
	t.Helper()
	if file, ok := testFile(t); ok && !strings.HasSuffix(file, IntegrationSuffix) {
		t.Errorf("%s starts %s but is in %s: a test that starts a server lives in a file named *%s", t.Name(), what, filepath.Base(file), IntegrationSuffix)
	}
	if testing.Short() {
		t.Skipf("-short: not starting %s", what)
	}
}

// SkipIfShort is skipIfShort for a test that would start what (a server,
// or a whole pipeline) through more than testrig: call it first.
func SkipIfShort(t testing.TB, what string) {
	t.Helper()
	skipIfShort(t, what)
}

// IntegrationSuffix ends the name of every file whose tests start a
// server (StartPostgres, StartClickHouse): the one naming rule for them.
const IntegrationSuffix = "_integration_test.go"

// testFile is the file of the running test's (or benchmark's) own
// function, found on the stack: a helper in another file it calls is not
// what the rule names.
func testFile(t testing.TB) (string, bool) {
	top, _, _ := strings.Cut(t.Name(), "/")
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	for {
		f, more := frames.Next()
		fn := f.Function
		if i := strings.LastIndex(fn, "/"); i >= 0 {
			fn = fn[i+1:]
		}
		// pkg.TestX, or a closure inside it (pkg.TestX.func1).
		if _, rest, ok := strings.Cut(fn, "."); ok && (rest == top || strings.HasPrefix(rest, top+".")) {
			return f.File, true
		}
		if !more {
			return "", false
		}
	}
}

// PGBinDir returns the PostgreSQL binary directory the tests run (the
// major in WALSHADOW_PG_BINDIR, e.g. scripts/pgmajor.sh's 17 or 18, else
// Debian 12's /usr/lib/postgresql/15/bin), or skips the test (fails it under CI) when the
// binaries the rig needs are not there.
func PGBinDir(t testing.TB) string {
	t.Helper()
	dir, err := findPGBinDir()
	if err != nil {
		skipOrFatal(t, err.Error())
	}
	return dir
}

func findPGBinDir() (string, error) {
	dir := os.Getenv(EnvPGBinDir)
	hint := "install postgresql-15"
	if dir == "" {
		dir = DefaultPGBinDir
	} else {
		hint = "fix " + EnvPGBinDir
	}
	for _, name := range []string{"initdb", "pg_ctl", "postgres", "psql", "pgbench", "pg_waldump"} {
		if !isExecutable(filepath.Join(dir, name)) {
			return "", fmt.Errorf("postgres binaries not found in %s (missing %s): %s", dir, name, hint)
		}
	}
	return dir, nil
}

// ClickHouseBin returns the clickhouse-server binary (WALSHADOW_CLICKHOUSE_BIN,
// else clickhouse-server or clickhouse on PATH, /usr/bin or /usr/sbin), or
// skips the test (fails it under CI) when there is none.
func ClickHouseBin(t testing.TB) string {
	t.Helper()
	bin, err := findClickHouseBin()
	if err != nil {
		skipOrFatal(t, err.Error())
	}
	return bin
}

func findClickHouseBin() (string, error) {
	if bin := os.Getenv(EnvClickHouseBin); bin != "" {
		if !isExecutable(bin) {
			return "", fmt.Errorf("clickhouse binary %s (from %s) is not an executable file", bin, EnvClickHouseBin)
		}
		return bin, nil
	}
	for _, name := range []string{"clickhouse-server", "clickhouse"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
		// Debian puts clickhouse-server in /usr/sbin, which a non-root PATH lacks.
		for _, dir := range []string{"/usr/bin", "/usr/sbin"} {
			if p := filepath.Join(dir, name); isExecutable(p) {
				return p, nil
			}
		}
	}
	return "", errors.New("clickhouse-server not found on PATH, /usr/bin or /usr/sbin: install clickhouse-server (or set " + EnvClickHouseBin + ")")
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// freePort asks the kernel for a free loopback TCP port. Another process can
// take it before the server binds it; callers retry once on "address already
// in use".
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// serverDir is a server's temporary directory and its failure report.
type serverDir struct {
	path string
	// logs are printed (their tails) when the test fails.
	logs []string
}

// newServerDir creates a temporary directory for a server. When owner is not
// nil the directory is chowned to it, because PostgreSQL must own its data
// directory and cannot run as root. The cleanup registered here removes the
// directory when the test passed and reports it when the test failed; servers
// register their own stop cleanup after this one so they stop first.
func newServerDir(t testing.TB, prefix string, owner *user.User) *serverDir {
	t.Helper()
	path, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatalf("creating temp dir: %v", err)
	}
	d := &serverDir{path: path}
	if owner != nil {
		if err := chownUser(path, owner); err != nil {
			os.RemoveAll(path)
			t.Fatalf("chown %s to %s: %v", path, owner.Username, err)
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kept server dir %s", d.path)
			for _, log := range d.logs {
				t.Logf("last %d lines of %s:\n%s", logTailLines, log, tailFile(log, logTailLines))
			}
			return
		}
		if err := os.RemoveAll(d.path); err != nil {
			t.Logf("removing %s: %v", d.path, err)
		}
	})
	return d
}

func chownUser(path string, u *user.User) error {
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return err
	}
	gid, err := strconv.Atoi(u.Gid)
	if err != nil {
		return err
	}
	return os.Chown(path, uid, gid)
}

// tailFile returns the last n lines of a file, or a note saying why it cannot.
func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read: %v)", err)
	}
	return lastLines(string(b), n)
}

// commandOutput runs cmd and returns its combined output; the error includes
// the command line and the output, which is what a test failure needs.
func commandOutput(cmd *exec.Cmd) (string, error) {
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	return string(out), nil
}

// FreePort returns a free loopback TCP port number (for a server a test
// starts itself, e.g. a shadow's socket name). Another process can take it
// before it is bound; for unix-socket "ports" that cannot happen.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// ServerOSUser is the OS user test servers run as: postgres when the tests
// run as root (PostgreSQL refuses root), else the current user.
func ServerOSUser() string {
	if os.Geteuid() == 0 {
		return "postgres"
	}
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return ""
}
