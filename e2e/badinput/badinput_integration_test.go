package badinput_test

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/source"
	"github.com/walshadow/walshadow/internal/testrig"
)

func TestBadInput(t *testing.T) {
	bin := testrig.BuildWalshadow(t)
	src := testrig.StartPostgres(t)
	r := &rig{src: src, ch: testrig.StartClickHouse(t), bin: bin, bridgeDir: testrig.BuildPgext(t, src.BinDir()), database: "badinput"}
	stateDir := r.runOnce(t, 2)

	// The archive a real session wrote reads clean: the filter's NOOPs are
	// valid WAL.
	segSize := uint32(src.WALSegmentSize())
	archive, err := source.OpenArchive(source.ArchiveConfig{Dir: filepath.Join(stateDir, "archive"), SegmentSize: segSize})
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := archive.Verify(0, 0); err != nil {
		t.Fatalf("the archive a session wrote does not verify: %v", err)
	}
	t.Logf("Verify read %d segments in %v", countSegments(t, archive.Dir()), time.Since(began).Round(time.Millisecond))

	t.Run("corrupt archive segment", func(t *testing.T) {
		dir := copyState(t, src, stateDir)
		names := segmentFiles(t, filepath.Join(dir, "archive"))
		path := filepath.Join(dir, "archive", names[len(names)-1])
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i := len(b)/2 + 1000; i < len(b)/2+1064; i++ {
			b[i] ^= 0x5A
		}
		if err := os.WriteFile(path, b, 0o640); err != nil {
			t.Fatal(err)
		}
		r.expectRefusal(t, dir, path)
	})

	t.Run("corrupt manifest", func(t *testing.T) {
		dir := copyState(t, src, stateDir)
		path := filepath.Join(dir, "manifest.json")
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			path = filepath.Join(dir, "progress.json")
			t.Logf("no manifest.json in the state directory: corrupting %s", path)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		// Cut in half, with garbage after: no longer JSON.
		if err := os.WriteFile(path, append(b[:len(b)/2:len(b)/2], "\x00\xff#garbage"...), 0o600); err != nil {
			t.Fatal(err)
		}
		r.expectRefusal(t, dir, path)
	})

	t.Run("descriptor log of another cluster", func(t *testing.T) {
		other := testrig.StartPostgres(t)
		otherRig := &rig{src: other, ch: r.ch, bin: bin, bridgeDir: r.bridgeDir, database: "badinput_other"}
		otherState := otherRig.runOnce(t, 0)
		dir := copyState(t, src, stateDir)
		path := filepath.Join(dir, "desclog")
		if err := os.RemoveAll(path); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("cp", "-a", filepath.Join(otherState, "desclog"), dir+"/").CombinedOutput(); err != nil {
			t.Fatalf("copying the other desclog: %v\n%s", err, out)
		}
		r.expectRefusal(t, dir, path)
	})
}
