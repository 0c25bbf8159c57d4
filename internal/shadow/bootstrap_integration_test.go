package shadow

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/testrig"
)

// TestBootstrapRestartsAfterInterruption interrupts a bootstrap in the
// middle of the backup (as a SIGKILL would leave it: incomplete marker,
// part of the files), then bootstraps the same directory again: the leftovers
// are removed, a warning names the directory, the result is complete, and a
// third call resumes it without rebuilding.
func TestBootstrapRestartsAfterInterruption(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	src := testrig.StartPostgres(t)
	src.Exec(t, "CREATE TABLE filler AS SELECT g AS id, md5(g::text) AS v FROM generate_series(1, 50000) g")
	parent := ownedTempDir(t, "walshadow-shadow-")
	dir := filepath.Join(parent, "data")

	first, abort := context.WithCancel(ctx)
	entries := 0
	_, err := Bootstrap(first, BootstrapConfig{SourceDSN: src.DSN(), Dir: dir, onEntry: func(string) {
		if entries++; entries == 40 {
			abort()
		}
	}})
	abort()
	if err == nil {
		t.Fatal("the interrupted bootstrap succeeded")
	}
	t.Logf("interrupted: %v", err)
	if !exists(filepath.Join(dir, IncompleteMarker)) || exists(filepath.Join(dir, CompleteMarker)) {
		t.Fatal("the interrupted bootstrap did not leave the incomplete marker alone")
	}
	leftover := filepath.Join(dir, "global", "leftover-of-the-first-run")
	if err := os.MkdirAll(filepath.Dir(leftover), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(leftover, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}

	out, log := newLogBuffer()
	res, err := Bootstrap(ctx, BootstrapConfig{SourceDSN: src.DSN(), Dir: dir, BinDir: src.BinDir(), Logger: log})
	if err != nil {
		t.Fatalf("bootstrapping the interrupted directory again: %v\n%s", err, out)
	}
	if res.Resumed {
		t.Error("an interrupted bootstrap was resumed, not redone")
	}
	warning := regexp.MustCompile(`level=WARN msg="the shadow directory holds an interrupted bootstrap[^"]*" dir=` + regexp.QuoteMeta(dir))
	if !warning.MatchString(out.String()) {
		t.Errorf("no warning naming %s:\n%s", dir, out)
	}
	if !strings.Contains(out.String(), "bootstrapping the shadow: 100% (") {
		t.Errorf("no 100%% progress line:\n%s", out)
	}
	if _, err := os.Stat(leftover); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the first run's leftover survived: %v", err)
	}
	if exists(filepath.Join(dir, IncompleteMarker)) {
		t.Error("incomplete marker left after a completed bootstrap")
	}
	for _, f := range requiredFiles {
		if !exists(filepath.Join(dir, f)) {
			t.Errorf("%s missing after the second bootstrap", f)
		}
	}

	again, err := Bootstrap(ctx, BootstrapConfig{SourceDSN: src.DSN(), Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if !again.Resumed || again.EndLSN != res.EndLSN {
		t.Errorf("completed directory not resumed as is: %+v", again)
	}
}
