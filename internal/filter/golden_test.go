package filter

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/testrig"
	"github.com/walshadow/walshadow/internal/wal"
)

// segmentSet is a copy of WAL segment files held in memory, rewritten in
// place by Scatter and written out to dir.
type segmentSet struct {
	dir     string
	segSize uint32
	names   []string
	starts  []wal.LSN
	data    map[wal.LSN][]byte // segment start → bytes
}

func loadSegments(t testing.TB, src, dir string) *segmentSet {
	t.Helper()
	paths, err := wal.SegmentFiles(src)
	if err != nil || len(paths) == 0 {
		t.Fatalf("segments in %s: %v (%d)", src, err, len(paths))
	}
	s := &segmentSet{dir: dir, data: make(map[wal.LSN][]byte)}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if s.segSize == 0 {
			s.segSize = uint32(len(b))
		}
		name, ok := wal.ParseSegmentName(filepath.Base(p))
		if !ok || uint32(len(b)) != s.segSize {
			t.Fatalf("%s: not a segment of %d bytes", p, s.segSize)
		}
		start, err := name.StartLSN(s.segSize)
		if err != nil {
			t.Fatal(err)
		}
		s.names = append(s.names, filepath.Base(p))
		s.starts = append(s.starts, start)
		s.data[start] = b
	}
	return s
}

func (s *segmentSet) write(at wal.LSN, b []byte) {
	seg := at - at%wal.LSN(s.segSize)
	copy(s.data[seg][at-seg:], b)
}

func (s *segmentSet) flush(t testing.TB) {
	t.Helper()
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, name := range s.names {
		if err := os.WriteFile(filepath.Join(s.dir, name), s.data[s.starts[i]], 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// filtered is one record as the filter saw it.
type filtered struct {
	lsn, prev wal.LSN
	totLen    uint32
	xid       uint32
	rmid      wal.RmgrID
	route     Route
	raw       []byte            // kept records: the original bytes
	blocks    []wal.RelFileNode // NOOP'd records: their blocks
}

// filterRun is the result of filtering a segment set.
type filterRun struct {
	records    []filtered
	decisions  []Decision // parallel to records; Boundary/Aborted copied
	stop       error      // how reading ended (io.EOF or end of WAL)
	noopBytes  uint64
	totalBytes uint64
}

// filterSegments reads every record of s, decides it, and rewrites NOOP
// records in s's memory. visit, when set, sees each record before the
// rewrite.
func filterSegments(t testing.TB, f *Filter, s *segmentSet, src string, visit func(*wal.Record, Decision)) *filterRun {
	t.Helper()
	r, err := wal.NewFileReader(src)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	run := &filterRun{}
	var buf []byte
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) || wal.IsKind(err, wal.KindEndOfWAL) {
			run.stop = err
			break
		}
		if err != nil {
			t.Fatalf("reading the original WAL: %v", err)
		}
		d, err := f.Decide(rec)
		if err != nil {
			t.Fatalf("Decide: %v", err)
		}
		if visit != nil {
			visit(rec, d)
		}
		fr := filtered{lsn: rec.LSN, prev: rec.Header.Prev, totLen: rec.Header.TotLen, xid: rec.Header.XID, rmid: rec.Header.RmID, route: d.Route}
		run.totalBytes += uint64(rec.Header.TotLen)
		if d.Route == RouteNoop {
			for i := range rec.Blocks {
				fr.blocks = append(fr.blocks, rec.Blocks[i].Rel)
			}
			if buf, err = NoopRecord(buf, rec.Header.TotLen, rec.Header.XID, rec.Header.Prev); err != nil {
				t.Fatal(err)
			}
			if err := Scatter(buf, rec.LSN, s.segSize, s.write); err != nil {
				t.Fatal(err)
			}
			run.noopBytes += uint64(rec.Header.TotLen)
		} else {
			fr.raw = append([]byte(nil), rec.Raw...)
		}
		d.Aborted = append([]uint32(nil), d.Aborted...)
		run.records = append(run.records, fr)
		run.decisions = append(run.decisions, d)
	}
	s.flush(t)
	return run
}

// checkReparse reads the filtered segments back with wal.FileReader: the
// same records at the same LSNs, NOOPs where the filter said so, every
// kept record byte for byte, no CRC failure, and the same end.
func checkReparse(t testing.TB, s *segmentSet, run *filterRun) {
	t.Helper()
	r, err := wal.NewFileReader(s.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i, want := range run.records {
		rec, err := r.Next()
		if err != nil {
			t.Fatalf("filtered WAL, record %d at %s: %v", i, want.lsn, err)
		}
		if rec.LSN != want.lsn || rec.Header.TotLen != want.totLen || rec.Header.Prev != want.prev || rec.Header.XID != want.xid {
			t.Fatalf("filtered record %d at %s len %d, want %s len %d", i, rec.LSN, rec.Header.TotLen, want.lsn, want.totLen)
		}
		switch want.route {
		case RouteNoop:
			if rec.Header.RmID != wal.RmgrXLOG || rec.RmgrInfo() != wal.XLogNoop {
				t.Fatalf("record at %s: %s info 0x%02X, want XLOG/NOOP", rec.LSN, rec.Header.RmID, rec.Header.Info)
			}
		default:
			if !bytes.Equal(rec.Raw, want.raw) {
				t.Fatalf("kept record at %s changed", rec.LSN)
			}
		}
	}
	_, err = r.Next()
	if fmt.Sprint(err) != fmt.Sprint(run.stop) {
		t.Fatalf("filtered WAL ends with %v, the original with %v", err, run.stop)
	}
}

// checkOnlyNoopBytesChanged compares the filtered segment files with the
// originals byte for byte: only the spans of NOOP'd records may differ
// (page headers, padding and kept records are untouched).
func checkOnlyNoopBytesChanged(t testing.TB, src string, s *segmentSet, run *filterRun) {
	t.Helper()
	changed := make(map[wal.LSN][]bool, len(s.starts))
	for _, start := range s.starts {
		changed[start] = make([]bool, s.segSize)
	}
	var spans []Span
	for _, r := range run.records {
		if r.route != RouteNoop {
			continue
		}
		var err error
		if spans, err = RecordSpans(spans[:0], r.lsn, r.totLen, s.segSize); err != nil {
			t.Fatal(err)
		}
		for _, sp := range spans {
			seg := sp.At - sp.At%wal.LSN(s.segSize)
			if m := changed[seg]; m != nil {
				off := int(sp.At - seg)
				for i := range int(sp.Len) {
					m[off+i] = true
				}
			}
		}
	}
	for i, name := range s.names {
		orig, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		got := s.data[s.starts[i]]
		m := changed[s.starts[i]]
		for off := range orig {
			if !m[off] && orig[off] != got[off] {
				t.Fatalf("%s: byte %d (LSN %s) changed outside every NOOP'd record", name, off, s.starts[i]+wal.LSN(off))
			}
		}
	}
}

// waldumpLine is one record of pg_waldump's listing.
var waldumpLine = regexp.MustCompile(`^rmgr: (\S+)\s+len \(rec/tot\):\s+\d+/\s*(\d+), tx:\s+(\d+), lsn: ([0-9A-F]+/[0-9A-F]+), prev ([0-9A-F]+/[0-9A-F]+), desc: (.*)$`)

type waldumpRecord struct {
	rmgr   string
	totLen uint32
	lsn    wal.LSN
	desc   string
}

// waldumpList runs pg_waldump over dir's segments and returns its listing.
// Any error other than the end of valid WAL fails the test.
func waldumpList(t testing.TB, bindir string, s *segmentSet, dir string) ([]waldumpRecord, *testrig.WaldumpStop) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bindir, "pg_waldump"), "-p", dir, s.names[0], s.names[len(s.names)-1])
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var recs []waldumpRecord
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	var parseErr error
	for sc.Scan() {
		m := waldumpLine.FindStringSubmatch(sc.Text())
		if m == nil {
			if parseErr == nil {
				parseErr = fmt.Errorf("unparsed pg_waldump line %q", sc.Text())
			}
			continue
		}
		n, _ := strconv.ParseUint(m[2], 10, 32)
		lsn, err := wal.ParseLSN(m[4])
		if err != nil && parseErr == nil {
			parseErr = err
		}
		recs = append(recs, waldumpRecord{rmgr: m[1], totLen: uint32(n), lsn: lsn, desc: strings.TrimSpace(m[6])})
	}
	runErr := cmd.Wait()
	if parseErr != nil {
		t.Fatal(parseErr)
	}
	if runErr == nil {
		return recs, nil
	}
	stop, ok := testrig.ParseWaldumpStop(stderr.Bytes())
	if !ok {
		t.Fatalf("pg_waldump on %s: %v: %s", dir, runErr, stderr.String())
	}
	return recs, stop
}

// checkWaldump compares pg_waldump's view of the filtered WAL with the
// original's: same records, LSNs and lengths in the same order, NOOPs
// where the filter rewrote, kept records described identically, the same
// stop, and statistics whose totals agree.
func checkWaldump(t testing.TB, src string, s *segmentSet, run *filterRun) {
	t.Helper()
	bindir := testrig.PGBinDir(t)
	orig, origStop := waldumpList(t, bindir, s, src)
	got, gotStop := waldumpList(t, bindir, s, s.dir)
	if len(got) != len(run.records) || len(orig) != len(run.records) {
		t.Fatalf("pg_waldump lists %d filtered and %d original records, the filter saw %d", len(got), len(orig), len(run.records))
	}
	for i, g := range got {
		want := run.records[i]
		if g.lsn != want.lsn || g.totLen != want.totLen {
			t.Fatalf("pg_waldump record %d at %s len %d, want %s len %d", i, g.lsn, g.totLen, want.lsn, want.totLen)
		}
		if want.route == RouteNoop {
			if g.rmgr != "XLOG" || g.desc != "NOOP" {
				t.Fatalf("record at %s: pg_waldump says %s %q, want XLOG NOOP", g.lsn, g.rmgr, g.desc)
			}
		} else if g.rmgr != orig[i].rmgr || g.desc != orig[i].desc {
			t.Fatalf("kept record at %s: %s %q, originally %s %q", g.lsn, g.rmgr, g.desc, orig[i].rmgr, orig[i].desc)
		}
	}
	if fmt.Sprint(gotStop) != fmt.Sprint(origStop) {
		t.Fatalf("pg_waldump stops at %+v on the filtered WAL, %+v on the original", gotStop, origStop)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	first, last := s.names[0], s.names[len(s.names)-1]
	before, err := testrig.WaldumpStats(ctx, bindir, src, first, last)
	if err != nil {
		t.Fatal(err)
	}
	after, err := testrig.WaldumpStats(ctx, bindir, s.dir, first, last)
	if err != nil {
		t.Fatal(err)
	}
	noops := uint64(0)
	for _, r := range run.records {
		if r.route == RouteNoop {
			noops++
		}
	}
	origNoops, _ := before.Find("XLOG", "NOOP")
	row, _ := after.Find("XLOG", "NOOP")
	if row.Count != noops+origNoops.Count {
		t.Errorf("pg_waldump --stats: %d XLOG/NOOP, want %d", row.Count, noops+origNoops.Count)
	}
	if after.Totals.Count != before.Totals.Count || after.Totals.CombinedBytes != before.Totals.CombinedBytes ||
		after.Start != before.Start || after.End != before.End {
		t.Errorf("pg_waldump --stats totals %+v [%s, %s], original %+v [%s, %s]",
			after.Totals, after.Start, after.End, before.Totals, before.Start, before.End)
	}
}

// checkNoCatalogNooped fails if a NOOP'd record touched a file the filter
// ends up knowing as a catalog's: the shadow would lack those pages.
func checkNoCatalogNooped(t testing.TB, f *Filter, run *filterRun, extra ...wal.RelFileNode) {
	t.Helper()
	for _, r := range run.records {
		for _, b := range r.blocks {
			if f.Tracker().IsCatalog(b) {
				t.Errorf("record at %s NOOP'd but touches catalog file %s", r.lsn, b)
			}
			for _, e := range extra {
				if b.DbOid == e.DbOid && b.RelNum == e.RelNum {
					t.Errorf("record at %s NOOP'd but touches catalog file %s", r.lsn, b)
				}
			}
		}
	}
}

// TestGoldenFixture filters the PG15 fixture (DDL, VACUUM FULL pg_class,
// savepoints, 2PC, TOAST, FPIs) and checks the result with the WAL reader
// and pg_waldump.
func TestGoldenFixture(t *testing.T) {
	s := loadSegments(t, fixtureDir, t.TempDir())
	f := New(Config{DbOid: followedDB})
	run := filterSegments(t, f, s, fixtureDir, nil)
	checkReparse(t, s, run)
	checkOnlyNoopBytesChanged(t, fixtureDir, s, run)
	checkNoCatalogNooped(t, f, run)

	// VACUUM FULL pg_class moved pg_class and its three indexes.
	if got := f.Tracker().PgClassRelNum(followedDB); got != 16417 {
		t.Errorf("pg_class file %d, want 16417", got)
	}
	for _, n := range []uint32{16417, 16420, 16421, 16422} {
		if !f.Tracker().IsCatalog(rfn(followedDB, n)) {
			t.Errorf("relocated pg_class file %d not tracked", n)
		}
	}
	boundaries := 0
	for _, d := range run.decisions {
		if d.Boundary != nil {
			boundaries++
		}
	}
	st := f.Stats()
	noop, total := st.Route(RouteNoop), st.Route(RouteNoop).Records+st.Route(RouteShadow).Records
	t.Logf("%d records: %d NOOP (%.1f%%, %.1f%% of bytes); %d boundaries; tracked %d files (relmap %d, pg_class %d, rewrite %d); pg_class rows %d read, %d undecodable",
		total, noop.Records, 100*float64(noop.Records)/float64(total), 100*float64(run.noopBytes)/float64(run.totalBytes),
		boundaries, f.Tracker().Len(), st.TrackedRelMap, st.TrackedPgClass, st.TrackedRewrite, st.PgClassRows, st.PgClassUndecodable)
	if noop.Records == 0 || boundaries == 0 {
		t.Fatal("the fixture has user records and DDL commits")
	}
	checkWaldump(t, fixtureDir, s, run)
}
