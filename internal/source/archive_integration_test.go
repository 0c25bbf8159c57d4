package source

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/wal"
)

func TestArchiveVerify(t *testing.T) {
	mb := 8
	if v := os.Getenv("WALSHADOW_ARCHIVE_VERIFY_MB"); v != "" {
		var err error
		if mb, err = strconv.Atoi(v); err != nil {
			t.Fatalf("WALSHADOW_ARCHIVE_VERIFY_MB=%q: %v", v, err)
		}
	}
	a, names, replaced := archiveFromSource(t, mb)
	if replaced == 0 {
		t.Fatal("no heap record was replaced by a NOOP")
	}
	const resume = wal.LSN(0x5000000)
	start := time.Now()
	if err := a.Verify(0, resume); err != nil {
		t.Fatalf("healthy filtered archive: %v", err)
	}
	took := time.Since(start)
	t.Logf("Verify read %d segments of %d bytes (%d records NOOPed) in %v: %.0f MB/s", len(names), archiveTestSegSize,
		replaced, took.Round(time.Millisecond), float64(len(names)*archiveTestSegSize)/took.Seconds()/1e6)

	segStart := func(name string) wal.LSN {
		n, _ := wal.ParseSegmentName(name)
		lsn, _ := n.StartLSN(archiveTestSegSize)
		return lsn
	}
	wantCorrupt := func(t *testing.T, err error, path string, lo, hi wal.LSN) *ArchiveCorruptError {
		t.Helper()
		var ce *ArchiveCorruptError
		if !errors.As(err, &ce) {
			t.Fatalf("want *ArchiveCorruptError, got %v", err)
		}
		if ce.Path != path || ce.LSN < lo || ce.LSN >= hi || ce.Resume != resume {
			t.Errorf("error names %s at %s (resume %s), want %s in [%s, %s) (resume %s)", ce.Path, ce.LSN, ce.Resume, path, lo, hi, resume)
		}
		for _, want := range []string{"archive segment " + path + " is corrupt at " + ce.LSN.String(), "remove it", "from " + resume.String() + " on again"} {
			if !strings.Contains(ce.Error(), want) {
				t.Errorf("%q lacks %q", ce.Error(), want)
			}
		}
		t.Log(ce)
		return ce
	}

	// Flipped bytes in the middle of a segment: a record there fails its CRC.
	t.Run("flipped bytes", func(t *testing.T) {
		victim := names[len(names)/2]
		path := a.Path(victim)
		orig, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		defer os.WriteFile(path, orig, archiveFileMode)
		broken := bytes.Clone(orig)
		for i := archiveTestSegSize/2 + 1000; i < archiveTestSegSize/2+1064; i++ {
			broken[i] ^= 0x5A
		}
		if err := os.WriteFile(path, broken, archiveFileMode); err != nil {
			t.Fatal(err)
		}
		err = a.Verify(0, resume)
		lo := segStart(victim)
		wantCorrupt(t, err, path, lo, lo+archiveTestSegSize)
		// Segments ending at or before from are not read.
		if err := a.Verify(lo+archiveTestSegSize, resume); err != nil {
			t.Errorf("Verify past the damage: %v", err)
		}
	})

	t.Run("truncated file", func(t *testing.T) {
		victim := names[1]
		path := a.Path(victim)
		orig, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		defer os.WriteFile(path, orig, archiveFileMode)
		if err := os.Truncate(path, archiveTestSegSize/3); err != nil {
			t.Fatal(err)
		}
		ce := wantCorrupt(t, a.Verify(0, resume), path, segStart(victim), segStart(victim)+1)
		if !strings.Contains(ce.Reason, strconv.Itoa(archiveTestSegSize/3)) {
			t.Errorf("reason %q does not give the size", ce.Reason)
		}
	})

	// After a gap, a segment of another system: its long page header is
	// valid WAL on its own, only the system identifier gives it away.
	t.Run("another cluster after a gap", func(t *testing.T) {
		gap, victim := names[1], names[2]
		gapPath, path := a.Path(gap), a.Path(victim)
		gapBytes, err := os.ReadFile(gapPath)
		if err != nil {
			t.Fatal(err)
		}
		orig, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			os.WriteFile(gapPath, gapBytes, archiveFileMode)
			os.WriteFile(path, orig, archiveFileMode)
		}()
		b := bytes.Clone(orig)
		b[wal.ShortPageHeaderLen] ^= 0xFF // xlp_sysid follows the short header
		if err := os.WriteFile(path, b, archiveFileMode); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(gapPath); err != nil {
			t.Fatal(err)
		}
		reopened := archiveOpen(t, a.Dir())
		ce := wantCorrupt(t, reopened.Verify(0, resume), path, segStart(victim), segStart(victim)+1)
		if !strings.Contains(ce.Reason, "another cluster") {
			t.Errorf("reason %q", ce.Reason)
		}
	})
}
