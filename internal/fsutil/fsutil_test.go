package fsutil

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state")
	if err := WriteFileAtomic(path, []byte("one"), 0o600, nil); err != nil {
		t.Fatal(err)
	}
	var sawTmp string
	err := WriteFileAtomic(path, []byte("two"), 0o640, func(tmp string) error {
		sawTmp = tmp
		b, _ := os.ReadFile(tmp)
		if string(b) != "two" {
			t.Errorf("temporary file holds %q before the rename", b)
		}
		return nil
	})
	if err != nil || sawTmp != path+".tmp" {
		t.Fatalf("%v %q", err, sawTmp)
	}
	if b, _ := os.ReadFile(path); string(b) != "two" {
		t.Fatalf("content %q", b)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v", st.Mode())
	}
	// A failing hook leaves the old content and no temporary file.
	boom := errors.New("boom")
	if err := WriteFileAtomic(path, []byte("three"), 0o600, func(string) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("err %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "two" {
		t.Fatalf("content after a failed write %q", b)
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("temporary file left: %v", err)
	}
}
