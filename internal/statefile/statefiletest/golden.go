// Package statefiletest holds what the state files' tests share: the
// comparison of a file's bytes with its golden copy.
package statefiletest

import (
	"os"
	"testing"
)

// Golden compares got with the golden file at path, rewriting it first
// when update is set (each package's -update flag).
func Golden(t testing.TB, path string, got []byte, update bool) {
	t.Helper()
	if update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run the test with -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs:\n got %s\nwant %s", path, got, want)
	}
}
