package testrig

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// repoRoot is the module's root: the nearest parent of the working
// directory holding go.mod (tests run in their package directory).
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// BuildPgext builds the shadow's bridge module (pgext/) into a directory
// the shadow's OS user can read and returns it. Outside CI a machine
// without the server headers or a compiler skips the test.
func BuildPgext(t testing.TB, pgBinDir string) string {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "walshadow-pgext-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	src := filepath.Join(root, "pgext")
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if n := e.Name(); n == "Makefile" || strings.HasSuffix(n, ".c") || strings.HasSuffix(n, ".h") {
			b, err := os.ReadFile(filepath.Join(src, n))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	out, err := exec.Command("make", "-C", dir, "PG_CONFIG="+filepath.Join(pgBinDir, "pg_config")).CombinedOutput()
	if err != nil {
		if InCI() {
			t.Fatalf("building pgext: %v\n%s", err, out)
		}
		t.Skipf("cannot build pgext (install postgresql-server-dev-15, make, gcc): %v\n%s", err, out)
	}
	return dir
}

// NewStateDir makes a walshadow state directory the shadow's OS user can
// traverse, and stops the shadow postmaster (which outlives a stopped or
// killed stream) when the test ends; the directory is kept when the test
// failed.
func NewStateDir(t testing.TB, src *Postgres) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "walshadow-state-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o711)
	t.Cleanup(func() {
		StopShadow(src, filepath.Join(dir, "shadow"))
		if !t.Failed() {
			os.RemoveAll(dir)
		} else {
			t.Logf("kept state dir %s", dir)
		}
	})
	return dir
}

// StopShadow stops a shadow postmaster (immediate mode) if one runs in dir.
func StopShadow(src *Postgres, dir string) {
	args := []string{filepath.Join(src.BinDir(), "pg_ctl"), "-D", dir, "-m", "immediate", "stop"}
	var cmd *exec.Cmd
	if os.Geteuid() == 0 {
		cmd = exec.Command("runuser", append([]string{"-u", ServerOSUser(), "--"}, args...)...)
	} else {
		cmd = exec.Command(args[0], args[1:]...)
	}
	cmd.Run()
}

// TestSeed is a randomized test's seed: WALSHADOW_SEED when set, else
// from the clock; logged either way so a failure can be rerun.
func TestSeed(t testing.TB) int64 {
	t.Helper()
	seed := time.Now().UnixNano() % 1_000_000
	if s := os.Getenv("WALSHADOW_SEED"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("WALSHADOW_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("seed %d (rerun with WALSHADOW_SEED=%d)", seed, seed)
	// Registered before the servers are started, this runs after their
	// clean-ups have printed their logs' tails: a failure's last line
	// names the seed to rerun it with.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s failed with seed %d (rerun with WALSHADOW_SEED=%d)", t.Name(), seed, seed)
		}
	})
	return seed
}

// WaitSlotActive waits until a walshadow session streams from its slot, so
// what the test does next is in the stream; runErr reports a stream that
// stopped first.
func WaitSlotActive(t testing.TB, src *Postgres, slot string, runErr <-chan error) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if src.QueryInt(t, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1 AND active", slot) == 1 {
			return
		}
		select {
		case err := <-runErr:
			t.Fatalf("the stream stopped before streaming: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("slot %s not active after 2 minutes", slot)
		}
	}
}
