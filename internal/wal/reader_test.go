package wal

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

const fixtureDir = "testdata/pg15/wal"

// recordSummary is what two readers must agree on for each record.
type recordSummary struct {
	LSN, End, Next LSN
	TotLen, CRC    uint32
	Rmgr           RmgrID
	Info           uint8
	Blocks         int
	Main           int
}

func summarize(rec *Record) recordSummary {
	return recordSummary{rec.LSN, rec.End, rec.Next, rec.Header.TotLen, rec.Header.CRC,
		rec.Header.RmID, rec.Header.Info, len(rec.Blocks), len(rec.MainData)}
}

// readAllFile reads every record of the fixture with the file reader and
// returns the summaries and how the read ended.
func readAllFile(t *testing.T, paths ...string) ([]recordSummary, error) {
	t.Helper()
	r, err := NewFileReader(paths...)
	if err != nil {
		t.Fatal(err)
	}
	var out []recordSummary
	for {
		rec, err := r.Next()
		if err != nil {
			return out, err
		}
		out = append(out, summarize(rec))
	}
}

// fixtureBytes concatenates the fixture segments and returns their start LSN.
func fixtureBytes(t testing.TB) ([]byte, LSN) {
	t.Helper()
	files, err := SegmentFiles(fixtureDir)
	if err != nil || len(files) == 0 {
		t.Fatalf("fixture: %v (%d files)", err, len(files))
	}
	var all []byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	name, _ := ParseSegmentName(filepath.Base(files[0]))
	start, _ := name.StartLSN(uint32(len(all) / len(files)))
	return all, start
}

// waldumpTotals parses the fixture's pg_waldump --stats=record output into
// per-rmgr record counts plus totals (records, record bytes, FPI bytes).
func waldumpTotals(t *testing.T) (perRmgr map[string]int, total [4]int) {
	t.Helper()
	f, err := os.Open("testdata/pg15/waldump_stats_record.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	row := regexp.MustCompile(`^(\S+)/\S+\s+(\d+) \(\s*[\d.]+\)\s+(\d+) \(\s*[\d.]+\)\s+(\d+) \(\s*[\d.]+\)\s+(\d+)`)
	tot := regexp.MustCompile(`^Total\s+(\d+)\s+(\d+) \[[\d.]+%\]\s+(\d+) \[[\d.]+%\]\s+(\d+)`)
	perRmgr = map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := row.FindStringSubmatch(sc.Text()); m != nil {
			n, _ := strconv.Atoi(m[2])
			perRmgr[m[1]] += n
		} else if m := tot.FindStringSubmatch(sc.Text()); m != nil {
			for i := range 4 {
				total[i], _ = strconv.Atoi(m[i+1])
			}
		}
	}
	if total[0] == 0 {
		t.Fatal("no Total line in waldump_stats_record.txt")
	}
	return perRmgr, total
}

// TestFileReaderMatchesWaldump checks the file reader against pg_waldump's
// statistics over the same segments: records per rmgr, total bytes, FPI
// bytes, and where the WAL ends.
func TestFileReaderMatchesWaldump(t *testing.T) {
	r, err := NewFileReader(fixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	perRmgr := map[string]int{}
	var total [4]int
	var endErr error
	for {
		rec, err := r.Next()
		if err != nil {
			endErr = err
			break
		}
		fpi, _ := rec.FPIBytes()
		perRmgr[rec.Header.RmID.String()]++
		total[0]++
		total[1] += int(rec.Header.TotLen) - fpi
		total[2] += fpi
		total[3] += int(rec.Header.TotLen)
	}
	wantRmgr, wantTotal := waldumpTotals(t)
	if total != wantTotal {
		t.Errorf("totals (records, record bytes, fpi bytes, combined) = %v, pg_waldump %v", total, wantTotal)
	}
	for k, v := range wantRmgr {
		if perRmgr[k] != v {
			t.Errorf("rmgr %s: %d records, pg_waldump %d", k, perRmgr[k], v)
		}
	}
	if len(perRmgr) != len(wantRmgr) {
		t.Errorf("rmgrs seen %v, pg_waldump %v", perRmgr, wantRmgr)
	}
	// pg_waldump stops with "invalid record length at X: wanted 24, got 0".
	b, _ := os.ReadFile("testdata/pg15/waldump_stats_record.txt")
	m := regexp.MustCompile(`invalid record length at ([0-9A-F]+/[0-9A-F]+)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("pg_waldump end position not found")
	}
	want, _ := ParseLSN(string(m[1]))
	var we *Error
	if !errors.As(endErr, &we) || we.Kind != KindEndOfWAL || we.LSN != want {
		t.Errorf("end: %v, want end of WAL at %s", endErr, want)
	}
}

// TestStreamReaderRandomChunks feeds the fixture in random chunk sizes from
// 1 byte to 1 MiB and requires exactly the file reader's records.
func TestStreamReaderRandomChunks(t *testing.T) {
	want, wantErr := readAllFile(t, fixtureDir)
	if len(want) < 1000 {
		t.Fatalf("fixture too small: %d records", len(want))
	}
	fixture, start := fixtureBytes(t)
	for seed := range uint64(24) {
		rng := rand.New(rand.NewPCG(seed, 0xC0FFEE))
		maxChunk := []int{1, 7, 64, 8192, 100_000, 1 << 20}[seed%6]
		// Seeds 12 on push shared: mostly pieces of one buffer, read in
		// place, a third of them from a copy of their own. The bytes read
		// past are overwritten at once (as the pump's NOOP rewrite does):
		// the records must not change.
		shared := seed >= 12
		all := append([]byte(nil), fixture...)
		sr, err := NewStreamReader(start, StreamOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var got []recordSummary
		var gotErr error
		rest := all
		scribbled := 0
	feed:
		for {
			for {
				rec, err := sr.Next()
				if err == ErrNeedMore {
					break
				}
				if err != nil {
					gotErr = err
					break feed
				}
				got = append(got, summarize(rec))
				if shared {
					consumed := int(sr.Pos() - start)
					clear(all[scribbled:consumed])
					scribbled = consumed
				}
			}
			if len(rest) == 0 {
				break
			}
			n := min(1+rng.IntN(maxChunk), len(rest))
			switch {
			case !shared:
				sr.Push(rest[:n])
			case rng.IntN(3) == 0:
				sr.PushShared(append([]byte(nil), rest[:n]...))
				clear(rest[:n]) // only the copy holds them now
			default:
				sr.PushShared(rest[:n])
			}
			rest = rest[n:]
		}
		if len(got) != len(want) {
			t.Fatalf("seed %d (chunks ≤ %d): %d records, file reader %d", seed, maxChunk, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("seed %d record %d: %+v, file reader %+v", seed, i, got[i], want[i])
			}
		}
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
			t.Fatalf("seed %d: ended with %v, file reader %v", seed, gotErr, wantErr)
		}
	}
}

// TestStreamReaderStartMidRecord starts on every page boundary of the
// fixture's first segment: records must be exactly the suffix of the full
// read that starts at or after that page (a record begun earlier is skipped).
func TestStreamReaderStartMidRecord(t *testing.T) {
	want, _ := readAllFile(t, fixtureDir)
	all, start := fixtureBytes(t)
	sawCont := false
	var switchAt LSN
	for _, s := range want {
		if s.Rmgr == RmgrXLOG && s.Info&0xF0 == xlogSwitchInfo {
			switchAt = s.LSN
		}
	}
	// Pages after the XLOG_SWITCH hold zeros: a stream cannot start there.
	for page := LSN(BlockSize); start+page < switchAt; page += 3 * BlockSize {
		sr, _ := NewStreamReader(start+page, StreamOptions{SegmentSize: 1 << 20})
		sr.Push(all[page:])
		first := -1
		for i, s := range want {
			if s.LSN > start+page {
				first = i
				break
			}
		}
		if want[first-1].End > start+page {
			sawCont = true
		}
		for i := first; i < len(want); i++ {
			rec, err := sr.Next()
			if err != nil {
				t.Fatalf("start %s: record %d: %v", start+page, i, err)
			}
			if summarize(rec) != want[i] {
				t.Fatalf("start %s: record %d = %+v, want %+v", start+page, i, summarize(rec), want[i])
			}
		}
	}
	if !sawCont {
		t.Fatal("no start page began inside a record: the test does not cover continuation skipping")
	}
}

// TestFixtureCoversFraming makes sure the fixture holds the framing cases the
// other tests rely on.
func TestFixtureCoversFraming(t *testing.T) {
	recs, _ := readAllFile(t, fixtureDir)
	var crossing, headerStraddle, sw, fpi int
	for _, s := range recs {
		if s.LSN/BlockSize != (s.End-1)/BlockSize {
			crossing++
			if BlockSize-s.LSN%BlockSize < RecordHeaderSize {
				headerStraddle++
			}
		}
		if s.Rmgr == RmgrXLOG && s.Info&0xF0 == xlogSwitchInfo {
			sw++
			if s.Next%(1<<20) != 0 || s.End != s.Next {
				t.Errorf("XLOG_SWITCH at %s: end %s next %s, want the segment end", s.LSN, s.End, s.Next)
			}
		}
		if s.Blocks > 0 {
			fpi++
		}
	}
	t.Logf("%d records: %d cross pages (%d with the header straddling), %d switches", len(recs), crossing, headerStraddle, sw)
	if crossing < 10 || sw != 1 {
		t.Fatalf("fixture lacks framing cases: crossing %d, switch %d", crossing, sw)
	}
}

func TestSyntheticHeaderStraddlesPage(t *testing.T) {
	for _, left := range []int{8, 16} {
		b := newWALBuilder(LSN(1 << 20))
		b.add(RmgrXLOG, 0x20, b.noopFilling(left))
		want := b.add(RmgrXLOG, 0x20, bytes.Repeat([]byte{0xAB}, 100))
		b.add(RmgrXLOG, 0x20, []byte{1, 2, 3})
		b.finishSegment()
		if want%BlockSize != BlockSize-LSN(left) {
			t.Fatalf("builder placed the record at %s, want %d bytes before the page end", want, left)
		}
		recs := readBytes(t, b.start, b.buf, 1)
		if len(recs) != 3 || recs[1].LSN != want || len(recs[1].MainData) != 100 || recs[1].MainData[99] != 0xAB {
			t.Fatalf("left %d: records %+v", left, recs)
		}
		if recs[1].End != want+LSN(left)+ShortPageHeaderLen+LSN(24+2+100-left) {
			t.Fatalf("left %d: end %s", left, recs[1].End)
		}
	}
}

func TestSyntheticRecordSpanningSegments(t *testing.T) {
	b := newWALBuilder(LSN(1 << 20))
	b.add(RmgrXLOG, 0x20, []byte{1})
	big := make([]byte, 3<<20) // spans several pages and two segment boundaries
	for i := range big {
		big[i] = byte(i * 7)
	}
	lsn := b.add(RmgrXLOG, 0x20, big)
	b.add(RmgrXLOG, 0x20, []byte{2})
	b.finishSegment()
	for _, chunk := range []int{1000, 1 << 20, 5 << 20} {
		recs := readBytes(t, b.start, b.buf, chunk)
		if len(recs) != 3 || recs[1].LSN != lsn || !bytes.Equal(recs[1].MainData, big) {
			t.Fatalf("chunk %d: got %d records", chunk, len(recs))
		}
	}
}

func TestSyntheticOverwriteContrecord(t *testing.T) {
	b := newWALBuilder(LSN(1 << 20))
	first := b.add(RmgrXLOG, 0x20, []byte{1})
	// A record that would cross into the next page, cut off by a crash.
	b.pad()
	partial := b.pos()
	raw := makeRecord(RmgrXLOG, 0x20, 0, first, make([]byte, 9000))
	b.buf = append(b.buf, raw[:BlockSize-int(b.pos()%BlockSize)]...)
	// The next page says the continuation was overwritten, and starts with
	// XLOG_OVERWRITE_CONTRECORD naming the abandoned record.
	b.pageHeader(0x0008, 0)
	ow := make([]byte, 16)
	ow[0] = byte(partial)
	ow[1] = byte(partial >> 8)
	ow[2] = byte(partial >> 16)
	owLSN := b.pos()
	b.buf = append(b.buf, makeRecord(RmgrXLOG, xlogOverwriteContrecordInfo, 0, first, ow)...)
	b.prev = owLSN
	after := b.add(RmgrXLOG, 0x20, []byte{3})
	b.finishSegment()
	recs := readBytes(t, b.start, b.buf, 3)
	if len(recs) != 3 || recs[0].LSN != first || recs[1].LSN != owLSN || recs[2].LSN != after {
		t.Fatalf("records %+v", recs)
	}

	// Without the overwrite flag, the missing contrecord is corruption.
	bad := bytes.Clone(b.buf)
	hdr := int(owLSN - b.start - ShortPageHeaderLen)
	bad[hdr+2] = 0
	_, err := readBytesErr(b.start, bad, 1<<20)
	if !IsKind(err, KindCorrupt) || !strings.Contains(err.Error(), "no contrecord flag") {
		t.Fatalf("err = %v", err)
	}
}

// readBytes reads all records from data, pushed in chunks, until the end of
// the written WAL; it fails the test on any other error.
func readBytes(t *testing.T, start LSN, data []byte, chunk int) []*Record {
	t.Helper()
	recs, err := readBytesErr(start, data, chunk)
	if err != nil && !IsKind(err, KindEndOfWAL) {
		t.Fatal(err)
	}
	return recs
}

func readBytesErr(start LSN, data []byte, chunk int) ([]*Record, error) {
	sr, err := NewStreamReader(start, StreamOptions{})
	if err != nil {
		return nil, err
	}
	var out []*Record
	for {
		rec, err := sr.Next()
		if err == ErrNeedMore {
			if len(data) == 0 {
				return out, io.EOF
			}
			n := min(chunk, len(data))
			sr.Push(data[:n])
			data = data[n:]
			continue
		}
		if err != nil {
			return out, err
		}
		out = append(out, rec.Clone())
	}
}

// TestCloneMatchesRedecode: a clone (its slices moved onto its own Raw),
// by Record.Clone or into a Slab, equals the record decoded afresh from
// the copied bytes, and shares no memory with the reader; a slab's
// earlier clones stay intact as it fills further chunks.
func TestCloneMatchesRedecode(t *testing.T) {
	r, err := NewFileReader(fixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	within := func(s, raw []byte) bool {
		if len(s) == 0 {
			return true
		}
		base := uintptr(unsafe.Pointer(unsafe.SliceData(raw)))
		p := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
		return p >= base && p+uintptr(len(s)) <= base+uintptr(len(raw))
	}
	check := func(how string, c, want *Record) int {
		t.Helper()
		if !bytes.Equal(c.Raw, want.Raw) || !bytes.Equal(c.MainData, want.MainData) || len(c.Blocks) != len(want.Blocks) {
			t.Fatalf("record at %s: %s differs from a fresh decode", want.LSN, how)
		}
		if !within(c.MainData, c.Raw) {
			t.Fatalf("record at %s: %s's main data is not within its Raw", want.LSN, how)
		}
		for i := range c.Blocks {
			cb, wb := c.Blocks[i], want.Blocks[i]
			if !bytes.Equal(cb.Data, wb.Data) || !bytes.Equal(cb.ImageData, wb.ImageData) || cb.ID != wb.ID || cb.Rel != wb.Rel || cb.BlockNum != wb.BlockNum {
				t.Fatalf("record at %s: block %d of the %s differs from a fresh decode", want.LSN, i, how)
			}
			if !within(cb.Data, c.Raw) || !within(cb.ImageData, c.Raw) {
				t.Fatalf("record at %s: block %d of the %s points outside its Raw", want.LSN, i, how)
			}
		}
		return len(c.Blocks)
	}
	var slab Slab
	type kept struct{ c, want *Record }
	var slabbed []kept
	n, blocks, rawBytes := 0, 0, 0
	for {
		rec, err := r.Next()
		if err != nil {
			break
		}
		rawBytes += len(rec.Raw)
		if fast := *rec; !func() bool {
			fast.Raw = append([]byte(nil), rec.Raw...)
			return fast.rebaseOnto(rec.Raw, append([]BlockRef(nil), rec.Blocks...))
		}() {
			t.Fatalf("record at %s: a slice is not within Raw, Clone re-decodes it", rec.LSN)
		}
		want := *rec
		want.Raw = append([]byte(nil), rec.Raw...)
		want.Blocks = nil
		if err := decodeRecordBody(&want); err != nil {
			t.Fatal(err)
		}
		for how, c := range map[string]*Record{"clone": rec.Clone(), "slab clone": slab.Clone(rec)} {
			blocks += check(how, c, &want)
			if len(rec.Blocks) > 0 && &c.Blocks[0] == &rec.Blocks[0] {
				t.Fatalf("record at %s: %s shares the reader's blocks", rec.LSN, how)
			}
			if how == "slab clone" {
				slabbed = append(slabbed, kept{c, &want})
			}
		}
		n++
	}
	if n < 100 || blocks == 0 || rawBytes < 2*slabRawChunk {
		t.Fatalf("only %d records (%d blocks, %d bytes) checked", n, blocks, rawBytes)
	}
	for _, k := range slabbed {
		check("slab clone, at the end", k.c, k.want)
	}
}
