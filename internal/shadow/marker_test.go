package shadow

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walshadow/walshadow/internal/statefile/statefiletest"
	"github.com/walshadow/walshadow/internal/wal"
)

// A directory with content but neither marker (not provably walshadow's)
// is refused by Bootstrap and by New, with a message naming the directory
// and the remedy; none of this reaches the source (its DSN is unusable).
// Directories with the incomplete marker are bootstrapped again: see
// TestInterruptedBootstrapWaitsForTheSource.
func TestHalfBuiltDirectoryIsRefused(t *testing.T) {
	if _, err := lookupOSUser(""); err != nil {
		t.Skip(err)
	}
	layouts := map[string][]string{
		"PG_VERSION without marker": {"PG_VERSION", "global/pg_control"},
		"unrelated content":         {"notes.txt"},
	}
	for name, files := range layouts {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeLayout(t, dir, files)
			_, err := Bootstrap(context.Background(), BootstrapConfig{SourceDSN: "host=/nonexistent port=1", Dir: dir})
			checkRefusal(t, err, dir)
			_, err = New(ShadowConfig{Dir: dir})
			checkRefusal(t, err, dir)
			// Nothing was touched.
			entries, _ := os.ReadDir(dir)
			if len(entries) != len(topLevel(files)) {
				t.Errorf("directory changed: %v", entries)
			}
		})
	}
}

func topLevel(files []string) map[string]bool {
	m := map[string]bool{}
	for _, f := range files {
		m[strings.Split(f, "/")[0]] = true
	}
	return m
}

func checkRefusal(t *testing.T, err error, dir string) {
	t.Helper()
	if err == nil {
		t.Fatal("accepted")
	}
	if errors.Is(err, ErrNotBootstrapped) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "delete the directory") {
		t.Errorf("unclear refusal: %v", err)
	}
	t.Log(err)
}

func TestCompletedDirectoryIsResumed(t *testing.T) {
	owner, err := lookupOSUser("")
	if err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	want := &BootstrapResult{
		StartLSN: wal.LSN(0x7000028), EndLSN: wal.LSN(0x7000100), WALEnd: wal.LSN(0x8000000), Timeline: 3,
		SystemID: 7713836679048065568, WALSegmentSize: 16 << 20, ServerVersionNum: 150018, FollowedDBOID: 5,
		SuperUser: "postgres", RelocatedCatalogs: []RelFile{{1663, 5, 16500}},
		Tablespaces: []BackupTablespace{{16390, "/ts"}}, Stats: ExtractStats{KeptFiles: 3, WALSegments: 1},
	}
	if err := os.WriteFile(filepath.Join(dir, IncompleteMarker), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := writeCompleteMarker(dir, owner, want); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, IncompleteMarker)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("incomplete marker left behind: %v", err)
	}
	got, err := Bootstrap(context.Background(), BootstrapConfig{SourceDSN: "host=/nonexistent port=1", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if !got.Resumed {
		t.Error("not marked resumed")
	}
	got.Resumed = false
	if g, w := *got, *want; g.StartLSN != w.StartLSN || g.EndLSN != w.EndLSN || g.WALEnd != w.WALEnd ||
		g.Timeline != w.Timeline || g.SystemID != w.SystemID || g.SuperUser != w.SuperUser ||
		len(g.RelocatedCatalogs) != 1 || g.RelocatedCatalogs[0] != w.RelocatedCatalogs[0] ||
		len(g.Tablespaces) != 1 || g.Tablespaces[0] != w.Tablespaces[0] || g.Stats != w.Stats {
		t.Errorf("round trip:\ngot  %+v\nwant %+v", g, w)
	}

	// The marker byte for byte (testdata/bootstrap_complete_v2.json), and
	// its first form (testdata/bootstrap_complete_v1.json, fields beside
	// "version": 1, no checksum) read to the same result.
	written, err := os.ReadFile(filepath.Join(dir, CompleteMarker))
	if err != nil {
		t.Fatal(err)
	}
	statefiletest.Golden(t, filepath.Join("testdata", "bootstrap_complete_v2.json"), written, *updateMarkerGolden)
	v1, err := os.ReadFile(filepath.Join("testdata", "bootstrap_complete_v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	old := t.TempDir()
	if err := os.WriteFile(filepath.Join(old, CompleteMarker), v1, 0o600); err != nil {
		t.Fatal(err)
	}
	if g, err := ReadBootstrapResult(old); err != nil || g.SystemID != want.SystemID || g.WALEnd != want.WALEnd || g.Stats != want.Stats {
		t.Errorf("version 1 marker: %+v, %v", g, err)
	}
	if err := os.WriteFile(filepath.Join(old, CompleteMarker), []byte(strings.Replace(string(written), "postgres", "postgreS", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadBootstrapResult(old); err == nil || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Errorf("edited marker: %v, want a checksum refusal", err)
	}

	// A corrupt marker is refused, not trusted.
	if err := os.WriteFile(filepath.Join(dir, CompleteMarker), []byte(`{"version":1,"start_lsn":"x"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadBootstrapResult(dir); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Errorf("corrupt marker: %v", err)
	}
}

func TestMissingOrEmptyDirectoryIsNotBootstrapped(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Join(dir, "absent")} {
		if _, err := ReadBootstrapResult(d); !errors.Is(err, ErrNotBootstrapped) {
			t.Errorf("%s: %v", d, err)
		}
	}
}

// writeLayout creates files (paths relative to dir, each holding "15\n").
func writeLayout(t *testing.T, dir string, files []string) {
	t.Helper()
	for _, f := range files {
		path := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("15\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

var updateMarkerGolden = flag.Bool("update", false, "rewrite the golden files")
