package session

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestProgressRoundTripAndCorruption(t *testing.T) {
	dir := t.TempDir()
	if p, err := loadProgress(dir); p != nil || err != nil {
		t.Fatalf("fresh dir: %v %v", p, err)
	}
	want := Progress{SystemID: "7713829067568455522", Timeline: 1, ResumeLSN: 0x3000000}
	if err := saveProgress(dir, want); err != nil {
		t.Fatal(err)
	}
	got, err := loadProgress(dir)
	if err != nil || got.SystemID != want.SystemID || got.Timeline != 1 || got.ResumeLSN != 0x3000000 {
		t.Fatalf("%+v %v", got, err)
	}
	path := filepath.Join(dir, progressFile)
	b, _ := os.ReadFile(path)
	os.WriteFile(path, []byte(strings.Replace(string(b), "0/03000000", "0/04000000", 1)), 0o600)
	if _, err := loadProgress(dir); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("edited file accepted: %v", err)
	}
	os.WriteFile(path, b[:len(b)/2], 0o600)
	if _, err := loadProgress(dir); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("torn file accepted: %v", err)
	}
}
