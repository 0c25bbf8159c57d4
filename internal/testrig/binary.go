package testrig

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// walshadowBuild is the binary BuildWalshadow built for this test process.
var walshadowBuild struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// BuildWalshadow builds the walshadow binary (go build ./cmd/walshadow from
// the module root) once per test process and returns its path; every later
// call returns the same binary. Tests that run it are end-to-end tests of
// the real CLI: `walshadow run cfg.yaml`, `walshadow lint cfg.yaml`.
//
// The binary's directory outlives the test that asked first (later tests use
// it too): a TestMain removes it after m.Run with RemoveWalshadowBuild.
func BuildWalshadow(t testing.TB) string {
	t.Helper()
	b := &walshadowBuild
	b.once.Do(func() {
		root, err := repoRoot()
		if err != nil {
			b.err = err
			return
		}
		if b.dir, err = os.MkdirTemp("", "walshadow-bin-"); err != nil {
			b.err = err
			return
		}
		// The shadow's OS user runs nothing from here, but walshadow may
		// run as root and drop to it: keep the directory traversable.
		os.Chmod(b.dir, 0o755)
		path := filepath.Join(b.dir, "walshadow")
		cmd := exec.Command("go", "build", "-o", path, "./cmd/walshadow")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build ./cmd/walshadow in %s: %w\n%s", root, err, out)
			return
		}
		b.path = path
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// RemoveWalshadowBuild removes the binary BuildWalshadow built, if any; call
// it from TestMain once the tests are done.
func RemoveWalshadowBuild() {
	if walshadowBuild.dir != "" {
		os.RemoveAll(walshadowBuild.dir)
	}
}
