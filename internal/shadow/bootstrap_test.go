package shadow

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// logBuffer collects a logger's text output; safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newLogBuffer() (*logBuffer, *slog.Logger) {
	b := &logBuffer{}
	return b, slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func tablespaceRow(oid, location, sizeKB []byte) *pgproto3.DataRow {
	return &pgproto3.DataRow{Values: [][]byte{oid, location, sizeKB}}
}

func TestBootstrapProgressWithEstimate(t *testing.T) {
	out, log := newLogBuffer()
	p := newBackupProgress(log)
	p.addTablespaceSize(tablespaceRow([]byte("16390"), []byte("/ts"), []byte("100000")))
	p.addTablespaceSize(tablespaceRow(nil, nil, []byte("452960"))) // the data directory
	kept := int64(21 << 20)
	p.kept = func() int64 { return kept }
	if want := int64(552960) << 10; p.estimate != want {
		t.Fatalf("estimate %d, want %d", p.estimate, want)
	}

	// Within the interval nothing is logged, however much streams.
	p.streamed(100 << 20)
	if s := out.String(); s != "" {
		t.Fatalf("logged within the interval: %s", s)
	}
	p.lastLog = time.Now().Add(-progressInterval)
	p.streamed(130 << 20)
	if want := "bootstrapping the shadow: 42% (230 MB of 540 MB streamed, 21 MB kept)"; !strings.Contains(out.String(), want) {
		t.Fatalf("progress line missing %q:\n%s", want, out.String())
	}
	// Just logged: the next bytes log nothing.
	p.streamed(10 << 20)
	if n := strings.Count(out.String(), "bootstrapping the shadow"); n != 1 {
		t.Fatalf("%d progress lines, want 1:\n%s", n, out.String())
	}
	// The stream outgrows the estimate (WAL, tar headers): 99% until done,
	// then 100% of what streamed.
	p.lastLog = time.Now().Add(-progressInterval)
	p.streamed(500 << 20)
	if want := "bootstrapping the shadow: 99% (740 MB of 740 MB streamed"; !strings.Contains(out.String(), want) {
		t.Fatalf("progress line missing %q:\n%s", want, out.String())
	}
	p.finished()
	if want := "bootstrapping the shadow: 100% (740 MB of 740 MB streamed, 21 MB kept)"; !strings.Contains(out.String(), want) {
		t.Fatalf("final line missing %q:\n%s", want, out.String())
	}
}

func TestBootstrapProgressWithoutEstimate(t *testing.T) {
	out, log := newLogBuffer()
	p := newBackupProgress(log)
	p.addTablespaceSize(tablespaceRow(nil, nil, nil)) // no PROGRESS: size NULL
	p.lastLog = time.Now().Add(-progressInterval)
	p.streamed(3 << 20)
	p.finished()
	s := out.String()
	if n := strings.Count(s, "bootstrapping the shadow: 3 MB streamed, 0 MB kept"); n != 2 {
		t.Fatalf("want 2 byte-only lines:\n%s", s)
	}
	if strings.Contains(s, "%") {
		t.Errorf("a percentage without an estimate:\n%s", s)
	}
}

// A directory holding the incomplete marker is walshadow's own interrupted
// bootstrap: it is not refused, but nothing is removed before the source
// answered (its DSN here is unusable), and New still refuses it.
func TestInterruptedBootstrapWaitsForTheSource(t *testing.T) {
	if _, err := lookupOSUser(""); err != nil {
		t.Skip(err)
	}
	for name, files := range map[string][]string{
		"incomplete marker only":           {IncompleteMarker},
		"incomplete marker and PG_VERSION": {IncompleteMarker, "PG_VERSION", "global/pg_control"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeLayout(t, dir, files)
			_, err := Bootstrap(context.Background(), BootstrapConfig{SourceDSN: "host=/nonexistent port=1", Dir: dir})
			if err == nil || strings.Contains(err.Error(), "delete the directory") || !strings.Contains(err.Error(), "connecting to the source") {
				t.Errorf("want a connection failure, not a refusal: %v", err)
			}
			for _, f := range files {
				if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
					t.Errorf("removed before the source answered: %v", err)
				}
			}
			_, err = New(ShadowConfig{Dir: dir})
			checkRefusal(t, err, dir)
		})
	}
}

// Both markers: the crash came between writing the completion marker and
// removing the incomplete one. The bootstrap is complete and is resumed.
func TestBootstrapWithBothMarkersIsResumed(t *testing.T) {
	owner, err := lookupOSUser("")
	if err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	want := &BootstrapResult{StartLSN: 0x7000028, EndLSN: 0x7000100, WALEnd: 0x8000000, Timeline: 1, SystemID: 42,
		WALSegmentSize: 16 << 20, ServerVersionNum: 150018, SuperUser: "postgres"}
	if err := writeCompleteMarker(dir, owner, want); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, IncompleteMarker), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := Bootstrap(context.Background(), BootstrapConfig{SourceDSN: "host=/nonexistent port=1", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if !got.Resumed || got.EndLSN != want.EndLSN || got.SystemID != want.SystemID {
		t.Errorf("got %+v, want the completed bootstrap resumed", got)
	}
}
