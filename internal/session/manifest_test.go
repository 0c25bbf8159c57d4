package session

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/statefile"
	"github.com/walshadow/walshadow/internal/statefile/statefiletest"
)

func TestManifestRoundTripAndCorruption(t *testing.T) {
	dir := t.TempDir()
	if m, err := ReadManifest(dir); m != nil || err != nil {
		t.Fatalf("fresh dir: %v %v", m, err)
	}
	want := Manifest{
		SystemID: 7713829067568455522, Timeline: 1, ServerVersionNum: 150018, WALSegmentSize: 16 << 20,
		Received: 0x5A3F1C8, FilteredDurable: 0x5000000, ShadowReplay: 0x5A3F0B0,
		Delivered: 0x5A3E9E0, Floor: 0x5A3E100, Restart: 0x5000000,
		UpdatedAt: time.Date(2026, 11, 30, 14, 2, 3, 500_000_000, time.UTC),
	}
	if err := WriteManifest(dir, want); err != nil {
		t.Fatal(err)
	}
	got, err := ReadManifest(dir)
	if err != nil || *got != want {
		t.Fatalf("round trip: %+v %v, want %+v", got, err, want)
	}
	path := filepath.Join(dir, ManifestFile)
	b, _ := os.ReadFile(path)
	if !strings.Contains(string(b), `"floor_lsn": "0/05A3E100"`) || !strings.Contains(string(b), `"system_id": "7713829067568455522"`) {
		t.Fatalf("unexpected encoding:\n%s", b)
	}
	for name, broken := range map[string][]byte{
		"edited":  []byte(strings.Replace(string(b), "0/05A3E9E0", "0/05A3E9E8", 1)),
		"torn":    b[:len(b)/2],
		"garbage": []byte("\x00\x01not json"),
		"unknown": []byte(strings.Replace(string(b), `"format"`, `"extra": 1, "format"`, 1)),
		"restart past floor": func() []byte {
			m := want
			m.Restart = m.Floor + 1
			d := t.TempDir()
			if err := WriteManifest(d, m); err != nil {
				t.Fatal(err)
			}
			out, _ := os.ReadFile(filepath.Join(d, ManifestFile))
			return out
		}(),
	} {
		if err := os.WriteFile(path, broken, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := ReadManifest(dir)
		var me *statefile.Error
		if !errors.As(err, &me) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "fresh state_dir") {
			t.Errorf("%s manifest: %v", name, err)
		}
	}
}

// A state directory of the version before the manifest resumes from its
// progress.json, which the first manifest write removes.
func TestManifestReadsLegacyProgress(t *testing.T) {
	dir := t.TempDir()
	legacy := `{
  "version": 1,
  "system_id": "7713829067568455522",
  "timeline": 1,
  "resume_lsn": "0/03000000",
  "delivered_lsn": "0/03012345",
  "crc": 1741265422
}
`
	if err := os.WriteFile(filepath.Join(dir, "progress.json"), []byte(legacy), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.SystemID != 7713829067568455522 || m.Restart != 0x3000000 || m.Floor != 0x3000000 || m.Delivered != 0x3012345 {
		t.Fatalf("%+v", m)
	}
	m.UpdatedAt = time.Now()
	if err := WriteManifest(dir, *m); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "progress.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("progress.json left behind: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "progress.json"), []byte(strings.Replace(legacy, "0/03000000", "0/04000000", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, ManifestFile))
	if _, err := ReadManifest(dir); err == nil || !strings.Contains(err.Error(), "progress.json") {
		t.Fatalf("edited progress.json accepted: %v", err)
	}
}

// TestManifestGoldenAndVersion2: the manifest byte for byte
// (testdata/manifest_v3.json, -update rewrites it), and a version 2 file
// (testdata/manifest_v2.json, as the code before the envelope wrote it)
// read to the same progress and rewritten in the envelope by the next
// write.
func TestManifestGoldenAndVersion2(t *testing.T) {
	want := Manifest{
		SystemID: 7713829067568455522, Timeline: 1, ServerVersionNum: 150018, WALSegmentSize: 16 << 20,
		Received: 0x5A3F1C8, FilteredDurable: 0x5000000, ShadowReplay: 0x5A3F0B0,
		Delivered: 0x5A3E9E0, Floor: 0x5A3E100, Restart: 0x5000000,
		UpdatedAt: time.Date(2026, 11, 30, 14, 2, 3, 500_000_000, time.UTC),
	}
	dir := t.TempDir()
	if err := WriteManifest(dir, want); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	statefiletest.Golden(t, filepath.Join("testdata", "manifest_v3.json"), got, *updateManifestGolden)

	v2, err := os.ReadFile(filepath.Join("testdata", "manifest_v2.json"))
	if err != nil {
		t.Fatal(err)
	}
	old := t.TempDir()
	if err := os.WriteFile(filepath.Join(old, ManifestFile), v2, 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := ReadManifest(old)
	if err != nil || *m != want {
		t.Fatalf("version 2 manifest: %+v, %v; want %+v", m, err, want)
	}
	if err := WriteManifest(old, *m); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(filepath.Join(old, ManifestFile)); string(again) != string(got) {
		t.Errorf("version 2 manifest not rewritten in the envelope:\n%s", again)
	}
	edited := []byte(strings.Replace(string(v2), "0/05A3E9E0", "0/05A3E9E8", 1))
	if err := os.WriteFile(filepath.Join(old, ManifestFile), edited, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadManifest(old); err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Errorf("edited version 2 manifest: %v, want a checksum refusal", err)
	}
}

var updateManifestGolden = flag.Bool("update", false, "rewrite the golden files")
