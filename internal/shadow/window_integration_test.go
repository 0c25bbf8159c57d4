package shadow

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/testrig"
	"github.com/walshadow/walshadow/internal/wal"
)

// TestBackupWindowWithoutTransformWAL pins down what the WAL of the backup
// window does to a shadow when TransformWAL is unset, i.e. replayed
// unfiltered:
//
//   - DML during the window replays: every first touch of a page after the
//     backup's checkpoint carries a full-page image, so the page is rebuilt
//     (and a user relation file appears on the shadow's disk);
//   - a VACUUM that marks pages all-visible during the window does not: the
//     XLOG_HEAP2_VISIBLE record references the heap page without an image
//     (checksums and wal_log_hints off), the page is absent, and recovery
//     PANICs "WAL contains references to invalid pages" on reaching
//     consistency.
//
// Hence production bootstraps must plug the filter in as TransformWAL.
func TestBackupWindowWithoutTransformWAL(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	src := testrig.StartPostgres(t, testrig.WithSetting("autovacuum", "off"))
	src.PGBench(t, 2, testrig.PGBenchOptions{})
	src.Exec(t, "CREATE TABLE window_vis (id int, pad text)")
	src.Exec(t, "INSERT INTO window_vis SELECT g, repeat('p', 100) FROM generate_series(1, 30000) g")
	src.Checkpoint(t)
	userFiles := sourceUserFiles(t, ctx, src)

	t.Run("pgbench during the window replays", func(t *testing.T) {
		parent := ownedTempDir(t, "walshadow-shadow-")
		dir := filepath.Join(parent, "data")
		var transformed []string
		var once sync.Once
		var load *exec.Cmd
		res, err := Bootstrap(ctx, BootstrapConfig{
			SourceDSN: src.DSN(), Dir: dir, BinDir: src.BinDir(),
			TransformWAL: func(name string, data []byte) error {
				transformed = append(transformed, name)
				return nil
			},
			onEntry: func(string) {
				once.Do(func() {
					load = exec.CommandContext(ctx, filepath.Join(src.BinDir(), "pgbench"), "-n", "-c", "2", "-T", "3", src.DSN())
					if err := load.Start(); err != nil {
						t.Error(err)
					}
					time.Sleep(2 * time.Second) // keep the window open under load
				})
			},
		})
		if load != nil {
			load.Wait()
		}
		if err != nil {
			t.Fatal(err)
		}
		checkTransformedSegments(t, dir, transformed)
		heapRecords := countWindowRecords(t, dir, res, "Heap/")
		t.Logf("window %s..%s: %d bytes of WAL, %d heap records", res.StartLSN, res.EndLSN, res.EndLSN-res.StartLSN, heapRecords)
		if heapRecords < 100 {
			t.Fatalf("only %d heap records in the backup window: the load did not overlap it", heapRecords)
		}
		assertNoUserFiles(t, src.DataDir(), dir, userFiles)

		sh := startShadow(t, ctx, src, dir, parent)
		if err := sh.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := sh.WaitForReplay(ctx, res.EndLSN); err != nil {
			t.Fatal(err)
		}
		created := relationFiles(t, dir, userFiles)
		t.Logf("the unfiltered window replayed; it created %d user relation files on the shadow, e.g. %v", len(created), first(created, 3))
	})

	t.Run("VACUUM during the window makes the shadow PANIC", func(t *testing.T) {
		parent := ownedTempDir(t, "walshadow-shadow-")
		dir := filepath.Join(parent, "data")
		var once sync.Once
		res, err := Bootstrap(ctx, BootstrapConfig{
			SourceDSN: src.DSN(), Dir: dir, BinDir: src.BinDir(),
			onEntry: func(string) { once.Do(func() { src.Exec(t, "VACUUM window_vis") }) },
		})
		if err != nil {
			t.Fatal(err)
		}
		visible := countWindowRecords(t, dir, res, "Heap2/VISIBLE")
		if visible == 0 {
			t.Fatal("no XLOG_HEAP2_VISIBLE in the backup window")
		}
		sh := startShadow(t, ctx, src, dir, parent)
		err = sh.Start(ctx)
		if major := src.QueryInt(t, "SELECT current_setting('server_version_num')::int / 10000"); err == nil && major >= 18 {
			// 18 replays them without refusing (the first subtest still
			// shows why the window is filtered: user files appear).
			t.Logf("PostgreSQL %d replayed %d unfiltered VISIBLE records of absent pages without refusing", major, visible)
			return
		}
		if err == nil {
			t.Fatalf("the shadow replayed %d unfiltered VISIBLE records of absent pages; PostgreSQL is expected to refuse", visible)
		}
		if !strings.Contains(err.Error(), "invalid pages") {
			t.Fatalf("start failed, but not for invalid pages: %v", err)
		}
		t.Logf("as expected, %d VISIBLE records of absent user pages stop the shadow: %s", visible, firstLineWith(err.Error(), "invalid pages"))
	})
}

func startShadow(t *testing.T, ctx context.Context, src *testrig.Postgres, dir, parent string) *Shadow {
	t.Helper()
	sh, err := New(ShadowConfig{
		Dir: dir, BinDir: src.BinDir(), PrimarySocketDir: filepath.Join(parent, "no-walsender"), PrimaryPort: 1,
		RestoreCommand: "/bin/false", StartTimeout: 2 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sh.Stop(context.Background()); err != nil {
			t.Errorf("stopping the shadow: %v", err)
		}
	})
	return sh
}

// checkTransformedSegments: TransformWAL saw every segment in pg_wal, in WAL
// order.
func checkTransformedSegments(t *testing.T, dir string, transformed []string) {
	t.Helper()
	files, err := wal.SegmentFiles(filepath.Join(dir, "pg_wal"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	if strings.Join(names, ",") != strings.Join(transformed, ",") || len(names) == 0 {
		t.Errorf("TransformWAL saw %v; pg_wal holds %v", transformed, names)
	}
}

// countWindowRecords counts the records of the backup window in pg_wal whose
// pg_waldump type name starts with prefix.
func countWindowRecords(t *testing.T, dir string, res *BootstrapResult, prefix string) int {
	t.Helper()
	files, err := wal.SegmentFiles(filepath.Join(dir, "pg_wal"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := wal.NewFileReader(files...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	n := 0
	for {
		rec, err := r.Next()
		if err != nil {
			break // end of the valid WAL
		}
		if rec.LSN < res.StartLSN || rec.LSN >= res.EndLSN {
			continue
		}
		name := rmgrName(rec.Header.RmID) + "/" + wal.Identify(rec.Layout, rec.Header.RmID, rec.Header.Info)
		if strings.HasPrefix(name, prefix) {
			n++
		}
	}
	return n
}

func rmgrName(id wal.RmgrID) string {
	switch id {
	case wal.RmgrHeap:
		return "Heap"
	case wal.RmgrHeap2:
		return "Heap2"
	}
	return "Other"
}

func first(s []string, n int) []string { return s[:min(n, len(s))] }

func firstLineWith(s, substr string) string {
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, substr) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}
