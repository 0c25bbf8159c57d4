package walstats

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/walshadow/walshadow/internal/wal"
)

var update = flag.Bool("update", false, "rewrite testdata/*.json golden files")

const (
	testSegSize  = 1 << 20 // the smallest segment size PostgreSQL allows
	testTimeline = 3
	testSysID    = 7312345678901234567
)

// segmentBuilder writes WAL records into one segment held in memory. It
// keeps every record on a page of its own choosing and never splits one
// across pages: the reader's page handling is tested elsewhere.
type segmentBuilder struct {
	start wal.LSN
	buf   []byte
	pos   int     // offset of the next record
	prev  wal.LSN // start of the previous record
}

func newSegment(start wal.LSN, prev wal.LSN) *segmentBuilder {
	b := &segmentBuilder{start: start, buf: make([]byte, testSegSize), pos: wal.LongPageHeaderLen, prev: prev}
	h := b.buf
	binary.LittleEndian.PutUint16(h[0:], 0xD110) // PG15
	binary.LittleEndian.PutUint16(h[2:], wal.XLPLongHeader|wal.XLPBkpRemovable)
	binary.LittleEndian.PutUint32(h[4:], testTimeline)
	binary.LittleEndian.PutUint64(h[8:], uint64(start))
	binary.LittleEndian.PutUint64(h[24:], testSysID)
	binary.LittleEndian.PutUint32(h[32:], testSegSize)
	binary.LittleEndian.PutUint32(h[36:], wal.BlockSize)
	return b
}

type testBlock struct {
	imageLen uint16 // 0: no image; otherwise stored bytes, with a hole
	data     []byte
}

// add appends a record and returns its LSN. corruptCRC stores a wrong CRC.
func (b *segmentBuilder) add(t testing.TB, rmid wal.RmgrID, info uint8, blocks []testBlock, main []byte, corruptCRC bool) wal.LSN {
	t.Helper()
	var hdrs, payload []byte
	for i, blk := range blocks {
		flags := byte(0)
		if blk.imageLen > 0 {
			flags |= wal.BkpBlockHasImage
		}
		if len(blk.data) > 0 {
			flags |= wal.BkpBlockHasData
		}
		if i > 0 {
			flags |= wal.BkpBlockSameRel
		}
		hdrs = append(hdrs, byte(i), flags)
		hdrs = binary.LittleEndian.AppendUint16(hdrs, uint16(len(blk.data)))
		if blk.imageLen > 0 {
			hdrs = binary.LittleEndian.AppendUint16(hdrs, blk.imageLen)
			hdrs = binary.LittleEndian.AppendUint16(hdrs, 64) // hole offset
			hdrs = append(hdrs, wal.BkpImageHasHole|wal.BkpImageApply)
		}
		if i == 0 {
			hdrs = binary.LittleEndian.AppendUint32(hdrs, 1663)
			hdrs = binary.LittleEndian.AppendUint32(hdrs, 5)
			hdrs = binary.LittleEndian.AppendUint32(hdrs, 16384)
		}
		hdrs = binary.LittleEndian.AppendUint32(hdrs, uint32(i))
		payload = append(payload, bytes.Repeat([]byte{0xAB}, int(blk.imageLen))...)
		payload = append(payload, blk.data...)
	}
	if len(main) > 0 {
		hdrs = append(hdrs, wal.XLRBlockIDDataShort, byte(len(main)))
		payload = append(payload, main...)
	}
	rec := make([]byte, wal.RecordHeaderSize, wal.RecordHeaderSize+len(hdrs)+len(payload))
	rec = append(append(rec, hdrs...), payload...)
	binary.LittleEndian.PutUint32(rec[0:], uint32(len(rec)))
	binary.LittleEndian.PutUint32(rec[4:], 735)
	binary.LittleEndian.PutUint64(rec[8:], uint64(b.prev))
	rec[16] = info
	rec[17] = byte(rmid)
	crc := wal.RecordCRC(rec)
	if corruptCRC {
		crc ^= 1
	}
	binary.LittleEndian.PutUint32(rec[20:], crc)

	if b.pos%wal.BlockSize+len(rec) > wal.BlockSize {
		t.Fatalf("record of %d bytes at offset %d would cross a page", len(rec), b.pos)
	}
	lsn := b.start + wal.LSN(b.pos)
	copy(b.buf[b.pos:], rec)
	b.pos = int(wal.MaxAlign(uint64(b.pos + len(rec))))
	b.prev = lsn
	return lsn
}

func (b *segmentBuilder) write(t testing.TB, dir string) string {
	t.Helper()
	segno := uint64(b.start) / testSegSize
	perLog := uint64(1<<32) / testSegSize
	name := filepath.Join(dir, segmentName(testTimeline, segno/perLog, segno%perLog))
	if err := os.WriteFile(name, b.buf, 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}

func segmentName(tli uint32, log, seg uint64) string {
	return hex8(uint64(tli)) + hex8(log) + hex8(seg)
}

func hex8(v uint64) string {
	const digits = "0123456789ABCDEF"
	var s [8]byte
	for i := 7; i >= 0; i-- {
		s[i] = digits[v&0xF]
		v >>= 4
	}
	return string(s[:])
}

// writeTestWAL writes two 1 MiB segments to dir: the first ends with
// XLOG_SWITCH, the second holds one record with a bad CRC and then ends
// (zeros where the next record header would be).
func writeTestWAL(t testing.TB, dir string) {
	t.Helper()
	main3 := []byte{1, 0, 0}
	s1 := newSegment(0, 0)
	s1.add(t, wal.RmgrXLOG, 0x10, nil, make([]byte, 88), false)                                 // XLOG/CHECKPOINT_ONLINE
	s1.add(t, wal.RmgrHeap, 0x80, []testBlock{{data: make([]byte, 30)}}, main3, false)          // Heap/INSERT+INIT
	s1.add(t, wal.RmgrHeap, 0x00, []testBlock{{imageLen: 300}}, main3, false)                   // Heap/INSERT with an image
	s1.add(t, wal.RmgrHeap, 0x00, []testBlock{{data: make([]byte, 30)}}, main3, false)          // Heap/INSERT
	s1.add(t, wal.RmgrBtree, 0x00, []testBlock{{imageLen: 1000}, {imageLen: 2000}}, nil, false) // Btree/INSERT_LEAF, 2 images
	s1.add(t, wal.RmgrXact, 0x80, nil, make([]byte, 12), false)                                 // Transaction/COMMIT (HAS_INFO)
	s1.add(t, wal.RmgrXLOG, 0x40, nil, nil, false)                                              // XLOG/SWITCH
	s1.write(t, dir)

	s2 := newSegment(testSegSize, s1.prev)
	s2.add(t, wal.RmgrHeap, 0x40, []testBlock{{data: make([]byte, 40)}}, make([]byte, 14), false) // Heap/HOT_UPDATE
	s2.add(t, wal.RmgrHeap, 0x10, nil, make([]byte, 8), true)                                     // Heap/DELETE, bad CRC
	s2.add(t, wal.RmgrXact, 0x00, nil, make([]byte, 8), false)                                    // Transaction/COMMIT
	s2.add(t, wal.RmgrStandby, 0x10, nil, make([]byte, 24), false)                                // Standby/RUNNING_XACTS
	s2.write(t, dir)

	// Not segments: must be ignored in a directory.
	for _, name := range []string{"00000003.history", "README", segmentName(testTimeline, 0, 1) + ".backup"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCollectSegments(t *testing.T) {
	dir := t.TempDir()
	writeTestWAL(t, dir)
	rep, err := Collect(context.Background(), []string{dir}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.SegmentsRead != 2 || rep.FirstSegment != "000000030000000000000000" || rep.LastSegment != "000000030000000000000001" {
		t.Errorf("segments %d %s..%s", rep.SegmentsRead, rep.FirstSegment, rep.LastSegment)
	}
	if rep.Timeline != testTimeline || rep.SystemIdentifier != testSysID || rep.SegmentSize != testSegSize || rep.PGMajor != 15 {
		t.Errorf("timeline %d sysid %d segsize %d major %d", rep.Timeline, rep.SystemIdentifier, rep.SegmentSize, rep.PGMajor)
	}
	if rep.Records != 10 || rep.CRCFailures != 1 || rep.FPICount != 3 || rep.FPIBytes != 3300 {
		t.Errorf("records %d crc %d fpi %d/%d", rep.Records, rep.CRCFailures, rep.FPICount, rep.FPIBytes)
	}
	if rep.Stop.Reason != StopEndOfWAL {
		t.Errorf("stop %+v", rep.Stop)
	}
	checkInvariants(t, rep)
	checkGolden(t, "testdata/segments.json", rep)
}

func TestCollectGivenFilesAndRange(t *testing.T) {
	dir := t.TempDir()
	writeTestWAL(t, dir)
	second := filepath.Join(dir, "000000030000000000000001")
	// Starting mid-WAL: the second segment alone reads fine.
	rep, err := Collect(context.Background(), []string{second}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.SegmentsRead != 1 || rep.Records != 3 || rep.CRCFailures != 1 || rep.StartLSN != testSegSize+wal.LongPageHeaderLen {
		t.Errorf("second segment: segments %d records %d crc %d start %s", rep.SegmentsRead, rep.Records, rep.CRCFailures, rep.StartLSN)
	}

	first := filepath.Join(dir, "000000030000000000000000")
	rep, err = Collect(context.Background(), []string{first, second}, Options{EndLSN: testSegSize})
	if err != nil {
		t.Fatal(err)
	}
	// The scan stops at the first record of the second segment; the
	// XLOG_SWITCH record's end is the segment boundary.
	if rep.Records != 7 || rep.EndLSN != testSegSize || rep.Stop.Reason != StopEndLSN || rep.SegmentsRead != 2 {
		t.Errorf("range: records %d end %s stop %+v segments %d", rep.Records, rep.EndLSN, rep.Stop, rep.SegmentsRead)
	}
}

func TestCollectMissingSegmentIsFatal(t *testing.T) {
	dir := t.TempDir()
	writeTestWAL(t, dir)
	s3 := newSegment(3*testSegSize, 0)
	s3.add(t, wal.RmgrXLOG, 0x20, nil, nil, false)
	s3.write(t, dir)
	// After the first segment's XLOG_SWITCH the reader needs segment 1.
	if err := os.Remove(filepath.Join(dir, "000000030000000000000001")); err != nil {
		t.Fatal(err)
	}
	rep, err := Collect(context.Background(), []string{dir}, Options{})
	if err == nil {
		t.Fatal("a missing segment after XLOG_SWITCH must be an error")
	}
	if rep == nil || rep.Stop.Reason != StopError || rep.Records != 7 || rep.Stop.LSN != testSegSize {
		t.Fatalf("report %+v", rep)
	}
}

func TestCollectNoFiles(t *testing.T) {
	if _, err := Collect(context.Background(), []string{t.TempDir()}, Options{}); err == nil {
		t.Fatal("an empty directory must be an error")
	}
	if _, err := Collect(context.Background(), []string{filepath.Join(t.TempDir(), "nope")}, Options{}); err == nil {
		t.Fatal("a missing path must be an error")
	}
}

func checkGolden(t *testing.T, path string, rep *Report) {
	t.Helper()
	var got bytes.Buffer
	if err := rep.WriteJSON(&got); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Errorf("%s differs (run with -update after checking):\n got:\n%s\nwant:\n%s", path, got.Bytes(), want)
	}
	// The JSON must read back into the same report.
	var back Report
	if err := json.Unmarshal(want, &back); err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	if err := back.WriteJSON(&again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Bytes(), want) {
		t.Errorf("%s does not round-trip through Report", path)
	}
}

// checkInvariants verifies what must hold for any report: per-rmgr and
// per-type counters add up to the totals, and record plus FPI bytes are the
// combined bytes everywhere.
func checkInvariants(t *testing.T, rep *Report) {
	t.Helper()
	var rm, ty Stats
	for _, r := range rep.Rmgrs {
		addStats(&rm, r.Stats)
		if r.RecordBytes+r.FPIBytes != r.CombinedBytes || r.Count == 0 {
			t.Errorf("rmgr %s: %+v", r.Name, r.Stats)
		}
	}
	for _, r := range rep.RecordTypes {
		addStats(&ty, r.Stats)
		if r.RecordBytes+r.FPIBytes != r.CombinedBytes || r.Count == 0 || r.Name != r.Rmgr+"/"+r.Type {
			t.Errorf("record type %s: %+v", r.Name, r.Stats)
		}
	}
	total := Stats{Count: rep.Records, RecordBytes: rep.RecordBytes, FPICount: rep.FPICount, FPIBytes: rep.FPIBytes, CombinedBytes: rep.TotalBytes}
	if rm != total || ty != total {
		t.Errorf("totals %+v, rmgrs add up to %+v, record types to %+v", total, rm, ty)
	}
	if rep.Records > 0 && rep.EndLSN <= rep.StartLSN {
		t.Errorf("range %s..%s", rep.StartLSN, rep.EndLSN)
	}
}

func addStats(dst *Stats, s Stats) {
	dst.Count += s.Count
	dst.RecordBytes += s.RecordBytes
	dst.FPICount += s.FPICount
	dst.FPIBytes += s.FPIBytes
	dst.CombinedBytes += s.CombinedBytes
}

// streamSource reads a StreamReader holding all the bytes there are: running
// out of bytes is the end of the input.
type streamSource struct{ sr *wal.StreamReader }

func (s streamSource) Next() (*wal.Record, error) {
	rec, err := s.sr.Next()
	if err == wal.ErrNeedMore {
		return nil, io.EOF
	}
	return rec, err
}

// FuzzCollectRecords feeds arbitrary bytes, seeded with a valid first page,
// through the stream reader into the accumulator: no panic, errors are
// *wal.Error, and the report's counters stay consistent.
func FuzzCollectRecords(f *testing.F) {
	s := newSegment(0, 0)
	s.add(f, wal.RmgrXLOG, 0x10, nil, make([]byte, 88), false)
	s.add(f, wal.RmgrHeap, 0x00, []testBlock{{imageLen: 300}}, []byte{1, 0, 0}, false)
	s.add(f, wal.RmgrXact, 0x80, nil, make([]byte, 12), false)
	s.add(f, wal.RmgrHeap, 0x10, nil, make([]byte, 8), true)
	s.add(f, wal.RmgrBtree, 0x00, []testBlock{{imageLen: 1000}, {imageLen: 2000}}, nil, false)
	f.Add(s.buf[:wal.BlockSize])
	f.Add(s.buf[:600])
	f.Fuzz(func(t *testing.T, page []byte) {
		sr, err := wal.NewStreamReader(0, wal.StreamOptions{SegmentSize: testSegSize})
		if err != nil {
			t.Fatal(err)
		}
		sr.Push(page)
		rep, err := CollectRecords(context.Background(), streamSource{sr}, Options{})
		if rep == nil {
			t.Fatal("nil report")
		}
		if err != nil {
			var we *wal.Error
			if !errors.As(err, &we) {
				t.Fatalf("error %v (%T) is not a *wal.Error", err, err)
			}
			if rep.Stop.Reason != StopError || rep.Stop.LSN != LSN(we.LSN) {
				t.Fatalf("stop %+v for error %v", rep.Stop, err)
			}
		}
		checkInvariants(t, rep)
	})
}
