package source

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/walshadow/walshadow/internal/filter"
	"github.com/walshadow/walshadow/internal/testrig"
	"github.com/walshadow/walshadow/internal/wal"
)

const archiveTestSegSize = 1 << 20

func archiveTestSegment(segNo uint64) []byte {
	b := bytes.Repeat([]byte{byte(segNo)}, archiveTestSegSize)
	copy(b, strconv.FormatUint(segNo, 10))
	return b
}

func archiveTestName(segNo uint64) string {
	return archiveSegmentName(1, segNo, archiveTestSegSize)
}

func archiveOpen(t *testing.T, dir string) *Archive {
	t.Helper()
	a, err := OpenArchive(ArchiveConfig{Dir: dir, SegmentSize: archiveTestSegSize})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestArchiveWriteHasPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "archive")
	a := archiveOpen(t, dir)
	if a.DurableEnd() != 0 {
		t.Fatalf("empty archive: DurableEnd %s", a.DurableEnd())
	}
	name := archiveTestName(3)
	if name != "000000010000000000000003" {
		t.Fatalf("segment name %s", name)
	}
	if a.Has(name) {
		t.Fatal("Has before WriteSegment")
	}
	if err := a.WriteSegment(name, archiveTestSegment(3)); err != nil {
		t.Fatal(err)
	}
	if !a.Has(name) || a.Path(name) != filepath.Join(dir, name) {
		t.Fatalf("Has %v, Path %s", a.Has(name), a.Path(name))
	}
	got, err := os.ReadFile(a.Path(name))
	if err != nil || !bytes.Equal(got, archiveTestSegment(3)) {
		t.Fatalf("archived bytes differ (err %v)", err)
	}
	if want := wal.LSN(4 * archiveTestSegSize); a.DurableEnd() != want {
		t.Errorf("DurableEnd %s, want %s", a.DurableEnd(), want)
	}
	if fi, _ := os.Stat(a.Path(name)); fi.Mode().Perm() != archiveFileMode {
		t.Errorf("segment mode %v, want %v", fi.Mode().Perm(), os.FileMode(archiveFileMode))
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != archiveDirMode {
		t.Errorf("directory mode %v, want %v", fi.Mode().Perm(), os.FileMode(archiveDirMode))
	}
	// Rewriting a segment replaces it.
	if err := a.WriteSegment(name, archiveTestSegment(9)); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(a.Path(name)); !bytes.Equal(got, archiveTestSegment(9)) {
		t.Error("rewrite did not replace the segment")
	}
	// Other timeline, same segment: refused, the archive serves one timeline.
	if err := a.WriteSegment(archiveSegmentName(2, 3, archiveTestSegSize), archiveTestSegment(3)); err == nil {
		t.Error("a second timeline's copy of a held segment was accepted")
	}
	if a.Has(archiveSegmentName(2, 3, archiveTestSegSize)) {
		t.Error("Has answers for another timeline's name")
	}
}

func TestArchiveRejectsBadInput(t *testing.T) {
	a := archiveOpen(t, t.TempDir())
	for _, name := range []string{"", "x", "000000010000000000000003.partial", "00000001.history", "../000000010000000000000003",
		"0000000100000000000000FFF", "000000010000000000001000" /* seg beyond 4 GiB / 1 MiB */} {
		if err := a.WriteSegment(name, archiveTestSegment(1)); err == nil {
			t.Errorf("WriteSegment(%q) accepted", name)
		}
	}
	if err := a.WriteSegment(archiveTestName(1), make([]byte, 100)); err == nil {
		t.Error("short segment accepted")
	}
	if _, err := OpenArchive(ArchiveConfig{Dir: t.TempDir(), SegmentSize: 1000}); err == nil {
		t.Error("segment size 1000 accepted")
	}
	if _, err := OpenArchive(ArchiveConfig{SegmentSize: archiveTestSegSize}); err == nil {
		t.Error("empty directory accepted")
	}
	if _, err := OpenArchive(ArchiveConfig{Dir: t.TempDir() + "/a\nb", SegmentSize: archiveTestSegSize}); err == nil {
		t.Error("directory with a newline accepted")
	}
	if _, err := OpenArchive(ArchiveConfig{Dir: t.TempDir(), SegmentSize: archiveTestSegSize, ReaderGroup: "no-such-group-walshadow"}); err == nil {
		t.Error("unknown reader group accepted")
	}
}

func TestArchiveDurableEndIsContiguous(t *testing.T) {
	a := archiveOpen(t, t.TempDir())
	for _, n := range []uint64{5, 6, 8} {
		if err := a.WriteSegment(archiveTestName(n), archiveTestSegment(n)); err != nil {
			t.Fatal(err)
		}
	}
	if want := wal.LSN(7 * archiveTestSegSize); a.DurableEnd() != want {
		t.Errorf("with a gap at 7: DurableEnd %s, want %s", a.DurableEnd(), want)
	}
	if err := a.WriteSegment(archiveTestName(7), archiveTestSegment(7)); err != nil {
		t.Fatal(err)
	}
	if want := wal.LSN(9 * archiveTestSegSize); a.DurableEnd() != want {
		t.Errorf("gap filled: DurableEnd %s, want %s", a.DurableEnd(), want)
	}
}

func TestArchiveReopenAndSweep(t *testing.T) {
	dir := t.TempDir()
	a := archiveOpen(t, dir)
	for n := uint64(1); n <= 4; n++ {
		if err := a.WriteSegment(archiveTestName(n), archiveTestSegment(n)); err != nil {
			t.Fatal(err)
		}
	}
	// Files the archive does not own: a partial, a history file, a stranger,
	// a leftover temp file of a crashed write (the only one it removes).
	strangers := []string{archiveTestName(1) + ".partial", "00000002.history", "README", archiveTestName(2) + ".manifest.json"}
	for _, name := range strangers {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	leftover := filepath.Join(dir, "."+archiveTestName(5)+".tmp")
	if err := os.WriteFile(leftover, []byte("torn"), 0o600); err != nil {
		t.Fatal(err)
	}

	a = archiveOpen(t, dir)
	if _, err := os.Stat(leftover); !os.IsNotExist(err) {
		t.Errorf("leftover temp file survived reopening: %v", err)
	}
	if want := wal.LSN(5 * archiveTestSegSize); a.DurableEnd() != want || !a.Has(archiveTestName(1)) {
		t.Fatalf("reopened: DurableEnd %s (want %s), Has(1) %v", a.DurableEnd(), want, a.Has(archiveTestName(1)))
	}

	// keepFrom inside segment 3: segments 1 and 2 end at or below it.
	keepFrom := wal.LSN(3*archiveTestSegSize + 100)
	removed, err := a.Sweep(keepFrom)
	if err != nil || removed != 2 {
		t.Fatalf("Sweep removed %d, err %v; want 2", removed, err)
	}
	for n := uint64(1); n <= 4; n++ {
		_, statErr := os.Stat(filepath.Join(dir, archiveTestName(n)))
		if gone := os.IsNotExist(statErr); gone != (n <= 2) || a.Has(archiveTestName(n)) == gone {
			t.Errorf("segment %d: gone %v, Has %v", n, gone, a.Has(archiveTestName(n)))
		}
	}
	for _, name := range strangers {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("Sweep touched %s: %v", name, err)
		}
	}
	// A segment ending exactly at keepFrom goes; the one starting there stays.
	if removed, err := a.Sweep(wal.LSN(4 * archiveTestSegSize)); err != nil || removed != 1 || !a.Has(archiveTestName(4)) {
		t.Errorf("Sweep at a segment boundary: removed %d, err %v, Has(4) %v", removed, err, a.Has(archiveTestName(4)))
	}
	if want := wal.LSN(5 * archiveTestSegSize); a.DurableEnd() != want {
		t.Errorf("after sweeping: DurableEnd %s, want %s", a.DurableEnd(), want)
	}
}

func TestArchiveLSNSink(t *testing.T) {
	a := archiveOpen(t, t.TempDir())
	sink := a.LSNSink(1)
	if err := sink.WriteSegment(wal.LSN(2*archiveTestSegSize), archiveTestSegment(2)); err != nil {
		t.Fatal(err)
	}
	if !a.Has("000000010000000000000002") {
		t.Error("LSN sink wrote under another name")
	}
	if err := sink.WriteSegment(wal.LSN(2*archiveTestSegSize+8192), archiveTestSegment(2)); err == nil {
		t.Error("unaligned start accepted")
	}
}

// archiveExpandRestoreCommand substitutes %f, %p and %% as PostgreSQL's
// BuildRestoreCommand does; other %x pairs stay as they are.
func archiveExpandRestoreCommand(cmd, file, path string) string {
	var b strings.Builder
	for i := 0; i < len(cmd); i++ {
		if cmd[i] == '%' && i+1 < len(cmd) {
			switch cmd[i+1] {
			case 'f':
				b.WriteString(file)
				i++
				continue
			case 'p':
				b.WriteString(path)
				i++
				continue
			case '%':
				b.WriteByte('%')
				i++
				continue
			}
		}
		b.WriteByte(cmd[i])
	}
	return b.String()
}

func TestArchiveRestoreCommand(t *testing.T) {
	// A directory name that breaks naive quoting and PostgreSQL's % escapes.
	dir := filepath.Join(t.TempDir(), `it's a %f "dir" $(x)`)
	a := archiveOpen(t, dir)
	name := archiveTestName(1)
	if err := a.WriteSegment(name, archiveTestSegment(1)); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(t.TempDir(), "RECOVERYXLOG")
	run := func(file string) error {
		return exec.Command("/bin/sh", "-c", archiveExpandRestoreCommand(a.RestoreCommand(), file, dest)).Run()
	}
	if err := run(name); err != nil {
		t.Fatalf("restore_command %q failed: %v", a.RestoreCommand(), err)
	}
	if got, _ := os.ReadFile(dest); !bytes.Equal(got, archiveTestSegment(1)) {
		t.Fatal("restore_command copied the wrong bytes")
	}
	// A missing file is "not archived": exit status 1, neither a signal nor
	// >125, which PostgreSQL would treat as fatal.
	err := run(archiveTestName(2))
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 {
		t.Fatalf("missing segment: %v, want exit status 1", err)
	}
}

func TestArchiveReaderGroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give files to another group")
	}
	g, err := user.LookupGroup("postgres")
	if err != nil {
		t.Skip("no postgres group")
	}
	gid, _ := strconv.Atoi(g.Gid)
	dir := filepath.Join(t.TempDir(), "archive")
	a, err := OpenArchive(ArchiveConfig{Dir: dir, SegmentSize: archiveTestSegSize, ReaderGroup: "postgres"})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.WriteSegment(archiveTestName(1), archiveTestSegment(1)); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, a.Path(archiveTestName(1))} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); int(st.Gid) != gid || fi.Mode().Perm()&0o007 != 0 {
			t.Errorf("%s: gid %d (want %d), mode %v (others must get nothing)", p, st.Gid, gid, fi.Mode().Perm())
		}
	}
}

// archiveFromSource fills an archive with real WAL of a testrig source
// (1 MiB segments, about mb MiB of it) filtered as the session filters it:
// every heap record replaced by an XLOG_NOOP of the same length, CRC
// recomputed. It returns the archive, its segment names in order and how
// many records were replaced.
func archiveFromSource(t *testing.T, mb int) (*Archive, []string, int) {
	t.Helper()
	src := testrig.StartPostgres(t, testrig.WithWALSegSizeMB(1))
	src.Exec(t, "CREATE TABLE verify_t (id int PRIMARY KEY, v text)")
	rows := mb * 4000 // about 250 bytes of WAL per row
	for done := 0; done < rows; done += 200000 {
		src.Exec(t, fmt.Sprintf("INSERT INTO verify_t SELECT g, md5(g::text) FROM generate_series(%d, %d) g", done+1, min(done+200000, rows)))
	}
	// A record of several pages, and some that cross segment boundaries.
	src.Exec(t, "INSERT INTO verify_t SELECT -1, string_agg(md5(g::text), '') FROM generate_series(1, 3000) g")
	walDir := filepath.Join(t.TempDir(), "wal")
	names := src.CopyWALSegments(t, walDir)
	if len(names) < 3 {
		t.Fatalf("only %d segments", len(names))
	}

	first, _ := wal.ParseSegmentName(names[0])
	base, err := first.StartLSN(archiveTestSegSize)
	if err != nil {
		t.Fatal(err)
	}
	all := make([]byte, 0, len(names)*archiveTestSegSize)
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(walDir, n))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	r, err := wal.NewFileReader(walDir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var noop []byte
	replaced := 0
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) || wal.IsKind(err, wal.KindEndOfWAL) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if rec.Header.RmID != wal.RmgrHeap && rec.Header.RmID != wal.RmgrHeap2 {
			continue
		}
		if noop, err = filter.NoopRecord(noop, rec.Header.TotLen, rec.Header.XID, rec.Header.Prev); err != nil {
			t.Fatal(err)
		}
		if err := filter.Scatter(noop, rec.LSN, archiveTestSegSize, func(at wal.LSN, b []byte) { copy(all[at-base:], b) }); err != nil {
			t.Fatal(err)
		}
		replaced++
	}
	a := archiveOpen(t, filepath.Join(t.TempDir(), "archive"))
	for i, n := range names {
		if err := a.WriteSegment(n, all[i*archiveTestSegSize:(i+1)*archiveTestSegSize]); err != nil {
			t.Fatal(err)
		}
	}
	return a, names, replaced
}
