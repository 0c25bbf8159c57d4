package output

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walshadow/walshadow/internal/statefile"
	"github.com/walshadow/walshadow/internal/statefile/statefiletest"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files")

// TestWrittenGolden: written.json's current form, byte for byte
// (testdata/written.json, rewritten with -update), read back; its first
// form still read; a damaged file refused naming the file.
func TestWrittenGolden(t *testing.T) {
	dir := statefile.OutputDir(t.TempDir())
	if err := saveWritten(dir, 0x3000A28); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(dir.Written())
	if err != nil {
		t.Fatal(err)
	}
	statefiletest.Golden(t, filepath.Join("testdata", "written.json"), got, *updateGolden)
	want := got
	if lsn, at, err := ReadWritten(dir); err != nil || lsn != 0x3000A28 || at.IsZero() {
		t.Errorf("read back: %s, %v, %v", lsn, at, err)
	}

	if err := os.WriteFile(dir.Written(), []byte(`{"format":1,"written_before":"0/5A3E000"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if lsn, _, err := ReadWritten(dir); err != nil || lsn != 0x5A3E000 {
		t.Errorf("version 1 file: %s, %v", lsn, err)
	}
	if lsn, _, err := ReadWritten(statefile.OutputDir(t.TempDir())); err != nil || lsn != 0 {
		t.Errorf("no file: %s, %v; want 0, nil", lsn, err)
	}

	for name, data := range map[string]string{
		"edited":           strings.Replace(string(want), "0/03000A28", "0/03000A29", 1),
		"v1, bad LSN":      `{"format":1,"written_before":"nope"}`,
		"v1, other format": `{"format":7,"written_before":"0/1"}`,
	} {
		if err := os.WriteFile(dir.Written(), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		_, _, err := ReadWritten(dir)
		var se *statefile.Error
		if !errors.As(err, &se) || !strings.Contains(err.Error(), dir.Written()+" is corrupt") {
			t.Errorf("%s: %v, want corrupt naming %s", name, err, dir.Written())
		}
	}
	if err := os.WriteFile(dir.Written(), want[:len(want)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadWritten(dir); err == nil || !strings.Contains(err.Error(), "is truncated") {
		t.Errorf("cut in half: %v, want truncated", err)
	}
}
