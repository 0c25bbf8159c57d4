package session

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walshadow/walshadow/config"
	"github.com/walshadow/walshadow/internal/filter"
	"github.com/walshadow/walshadow/internal/shadow"
	"github.com/walshadow/walshadow/internal/source"
	"github.com/walshadow/walshadow/internal/wal"
)

// synthWAL lays records out into WAL pages as PostgreSQL does (long header
// on a segment's first page, XLP_FIRST_IS_CONTRECORD and xlp_rem_len on
// continuation pages, MAXALIGN between records), so a segment that opens
// in the middle of a record can be produced on demand.
type synthWAL struct {
	segSize uint32
	start   wal.LSN
	buf     []byte
	prev    wal.LSN
	recs    []synthRec
}

type synthRec struct {
	lsn, end wal.LSN
	heap     bool
	totLen   uint32
}

const synthSysID = 7000000000000000042

func newSynthWAL(start wal.LSN) *synthWAL {
	return &synthWAL{segSize: 1 << 20, start: start}
}

func (b *synthWAL) pos() wal.LSN { return b.start + wal.LSN(len(b.buf)) }

func (b *synthWAL) pageHeader(info uint16, remLen uint32) {
	p := b.pos()
	h := make([]byte, wal.ShortPageHeaderLen, wal.LongPageHeaderLen)
	long := p%wal.LSN(b.segSize) == 0
	if long {
		info |= wal.XLPLongHeader
	}
	binary.LittleEndian.PutUint16(h[0:], 0xD110) // PostgreSQL 15
	binary.LittleEndian.PutUint16(h[2:], info)
	binary.LittleEndian.PutUint32(h[4:], 1)
	binary.LittleEndian.PutUint64(h[8:], uint64(p))
	binary.LittleEndian.PutUint32(h[16:], remLen)
	if long {
		h = h[:wal.LongPageHeaderLen]
		binary.LittleEndian.PutUint64(h[24:], synthSysID)
		binary.LittleEndian.PutUint32(h[32:], b.segSize)
		binary.LittleEndian.PutUint32(h[36:], wal.BlockSize)
	}
	b.buf = append(b.buf, h...)
}

func synthCRC(rec []byte) {
	tab := crc32.MakeTable(crc32.Castagnoli)
	c := crc32.Update(crc32.Update(0, tab, rec[wal.RecordHeaderSize:]), tab, rec[:20])
	binary.LittleEndian.PutUint32(rec[20:], c)
}

// heapInsert is an XLOG_HEAP_INSERT of a user table of database db whose
// block data is pad bytes long.
func heapInsert(db uint32, pad int, xid uint32, prev wal.LSN) []byte {
	data := make([]byte, pad)
	for i := range data {
		data[i] = byte(i)
	}
	main := []byte{1, 0, 0} // offnum 1, flags 0
	rec := make([]byte, wal.RecordHeaderSize)
	rec = append(rec, 0, wal.BkpBlockHasData)
	rec = binary.LittleEndian.AppendUint16(rec, uint16(len(data)))
	rec = binary.LittleEndian.AppendUint32(rec, 1663)
	rec = binary.LittleEndian.AppendUint32(rec, db)
	rec = binary.LittleEndian.AppendUint32(rec, 16500)
	rec = binary.LittleEndian.AppendUint32(rec, 0) // block 0
	rec = append(rec, wal.XLRBlockIDDataShort, byte(len(main)))
	rec = append(append(rec, data...), main...)
	binary.LittleEndian.PutUint32(rec[0:], uint32(len(rec)))
	binary.LittleEndian.PutUint32(rec[4:], xid)
	binary.LittleEndian.PutUint64(rec[8:], uint64(prev))
	rec[16] = wal.XLogHeapInsert
	rec[17] = byte(wal.RmgrHeap)
	synthCRC(rec)
	return rec
}

// add appends a heap insert (or, noop, its filtered twin: the XLOG_NOOP of
// the same length) at the next aligned position.
func (b *synthWAL) add(t *testing.T, pad int, noop bool) wal.LSN {
	t.Helper()
	for b.pos()%8 != 0 {
		b.buf = append(b.buf, 0)
	}
	if b.pos()%wal.BlockSize == 0 {
		b.pageHeader(0, 0)
	}
	lsn := b.pos()
	raw := heapInsert(followedDBOID, pad, 700, b.prev)
	if noop {
		var err error
		if raw, err = filter.NoopRecord(nil, uint32(len(raw)), 700, b.prev); err != nil {
			t.Fatal(err)
		}
	}
	tot := uint32(len(raw))
	for len(raw) > 0 {
		if b.pos()%wal.BlockSize == 0 {
			b.pageHeader(wal.XLPFirstIsContrecord, uint32(len(raw)))
		}
		n := min(len(raw), int(wal.BlockSize-b.pos()%wal.BlockSize))
		b.buf = append(b.buf, raw[:n]...)
		raw = raw[n:]
	}
	b.prev = lsn
	b.recs = append(b.recs, synthRec{lsn: lsn, end: b.pos(), heap: !noop, totLen: tot})
	return lsn
}

// fillTo adds records until one crosses boundary, the crossing one with
// cross bytes of block data (a long continuation in the next segment).
func (b *synthWAL) fillTo(t *testing.T, boundary wal.LSN, cross int, noop bool) wal.LSN {
	t.Helper()
	for b.pos()+wal.LSN(2200) < boundary {
		b.add(t, 2000, noop)
	}
	lsn := b.add(t, int(boundary-b.pos())+cross, noop)
	if lsn >= boundary || b.pos() <= boundary {
		t.Fatalf("the record at %s (ending %s) does not cross %s", lsn, b.pos(), boundary)
	}
	return lsn
}

// segment returns the bytes of the segment starting at seg, zero-filled
// past what was built.
func (b *synthWAL) segment(seg wal.LSN) []byte {
	out := make([]byte, b.segSize)
	if seg >= b.start {
		copy(out, b.buf[min(int(seg-b.start), len(b.buf)):])
	}
	return out
}

const followedDBOID = 16384

func segName(seg wal.LSN, segSize uint32) string {
	no := uint64(seg) / uint64(segSize)
	perLog := uint64(0x100000000) / uint64(segSize)
	return fmt.Sprintf("%08X%08X%08X", 1, no/perLog, no%perLog)
}

// shadowDirWith makes a shadow data directory whose pg_wal holds segs, and
// the (empty) relation maps seedFromShadowDir reads.
func shadowDirWith(t *testing.T, segSize uint32, segs map[wal.LSN][]byte) string {
	t.Helper()
	dir := t.TempDir()
	relmap := make([]byte, 512) // PostgreSQL 15's RELMAPPER_FILESIZE: no mappings
	binary.LittleEndian.PutUint32(relmap[0:], wal.RelMapperFileMagic)
	binary.LittleEndian.PutUint32(relmap[504:], crc32.Checksum(relmap[:504], crc32.MakeTable(crc32.Castagnoli)))
	for _, d := range []string{"pg_wal", "global", filepath.Join("base", fmt.Sprint(followedDBOID))} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"global", filepath.Join("base", fmt.Sprint(followedDBOID))} {
		if err := os.WriteFile(filepath.Join(dir, d, "pg_filenode.map"), relmap, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for seg, data := range segs {
		if err := os.WriteFile(filepath.Join(dir, "pg_wal", segName(seg, segSize)), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func readSeg(t *testing.T, shadowDir string, seg wal.LSN, segSize uint32) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(shadowDir, "pg_wal", segName(seg, segSize)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The incident (a PostgreSQL regression run): the session stopped, the
// shadow's shutdown restartpoint removed every pg_wal segment before the
// one holding its redo point, and that segment (0/04000000) opened with the
// last 232 bytes of a record begun in the removed one. Every later start
// refused to filter it, "no filtered copy of them was found", forever.
// The segment is the shadow's own filtered WAL, streamed after the
// bootstrap: there is nothing to filter, let alone refuse.
func TestFilterShadowWALResumedPgWALOpensMidRecord(t *testing.T) {
	const segSize = 1 << 20
	seg3, seg4 := wal.LSN(3*segSize), wal.LSN(4*segSize)
	b := newSynthWAL(seg3)
	b.fillTo(t, seg4, 200, true) // the shadow's copy: filtered
	for range 20 {
		b.add(t, 500, true)
	}
	want := b.segment(seg4)
	if h, _ := wal.DecodePageHeader(want); !h.IsContrecord() || h.RemLen == 0 {
		t.Fatalf("segment 4 does not open with a continuation: %+v", h)
	}
	dir := shadowDirWith(t, segSize, map[wal.LSN][]byte{seg4: want})
	boot := &shadow.BootstrapResult{Timeline: 1, WALEnd: seg3, FollowedDBOID: followedDBOID}
	if err := filterShadowWAL(context.Background(), filepath.Join(dir, "pg_wal"), boot, segSize); err != nil {
		t.Fatalf("a resumed shadow whose pg_wal opens mid-record cannot start: %v", err)
	}
	if !bytes.Equal(readSeg(t, dir, seg4, segSize), want) {
		t.Fatal("the shadow's already filtered segment was rewritten")
	}
}

// The same with the bootstrap's own (unfiltered) WAL: the shadow removed
// its first bootstrap segment, and the next one opens with a continuation
// longer than a page. That continuation stays as it is (filtered, or older
// than the shadow's redo point); every user record starting after it is
// still filtered, the one crossing into the next segment in both files,
// and a segment streamed after the bootstrap is not touched.
func TestFilterShadowWALBootstrapSegmentOpensMidRecord(t *testing.T) {
	const segSize = 1 << 20
	seg3, seg4, seg5, seg6 := wal.LSN(3*segSize), wal.LSN(4*segSize), wal.LSN(5*segSize), wal.LSN(6*segSize)
	b := newSynthWAL(seg3)
	b.fillTo(t, seg4, 3*wal.BlockSize, true)
	firstInSeg4 := len(b.recs)
	b.fillTo(t, seg5, 1500, false)
	for range 10 {
		b.add(t, 300, false)
	}
	orig4, orig5 := b.segment(seg4), b.segment(seg5)
	streamed := bytes.Clone(orig4) // anything: it must not be read
	binary.LittleEndian.PutUint64(streamed[8:], uint64(seg6))
	dir := shadowDirWith(t, segSize, map[wal.LSN][]byte{seg4: orig4, seg5: orig5, seg6: streamed})
	boot := &shadow.BootstrapResult{Timeline: 1, WALEnd: seg6, FollowedDBOID: followedDBOID}
	if err := filterShadowWAL(context.Background(), filepath.Join(dir, "pg_wal"), boot, segSize); err != nil {
		t.Fatalf("filtering a pg_wal whose first segment opens mid-record: %v", err)
	}
	got4, got5 := readSeg(t, dir, seg4, segSize), readSeg(t, dir, seg5, segSize)
	cont := int(b.recs[firstInSeg4].lsn - seg4)
	if cont <= wal.BlockSize {
		t.Fatalf("test setup: a continuation of %d bytes does not cross a page", cont)
	}
	if !bytes.Equal(got4[:cont], orig4[:cont]) {
		t.Fatal("the continuation opening the segment was rewritten")
	}
	if !bytes.Equal(readSeg(t, dir, seg6, segSize), streamed) {
		t.Fatal("a segment streamed after the bootstrap was rewritten")
	}
	// Both files re-read as WAL: the records from the first one starting
	// in segment 4 on, at the same LSNs and lengths, every heap insert now
	// an XLOG_NOOP.
	sr, err := wal.NewStreamReader(seg4, wal.StreamOptions{SegmentSize: segSize})
	if err != nil {
		t.Fatal(err)
	}
	sr.Push(got4)
	sr.Push(got5)
	for i, want := range b.recs[firstInSeg4:] {
		rec, err := sr.Next()
		if err != nil {
			t.Fatalf("record %d (%s) of the filtered segments: %v", i, want.lsn, err)
		}
		if rec.LSN != want.lsn || rec.Header.TotLen != want.totLen {
			t.Fatalf("record %s/%d, want %s/%d", rec.LSN, rec.Header.TotLen, want.lsn, want.totLen)
		}
		if rec.Header.RmID != wal.RmgrXLOG || rec.Header.Info != 0x20 {
			t.Fatalf("the user record at %s was not filtered (rmgr %d info %#x)", rec.LSN, rec.Header.RmID, rec.Header.Info)
		}
	}
}

// The live restart path: a pump starting at a segment that opens with the
// tail of a user record republishes the shadow's filtered copy of that
// tail, never the source's raw bytes; without a copy it refuses.
func TestPumpRestartMidRecordRepublishesFilteredTail(t *testing.T) {
	const segSize = 1 << 20
	seg3, seg4 := wal.LSN(3*segSize), wal.LSN(4*segSize)
	raw, filtered := newSynthWAL(seg3), newSynthWAL(seg3)
	for _, w := range []*synthWAL{raw, filtered} {
		w.fillTo(t, seg4, 2*wal.BlockSize, w == filtered)
		for range 5 {
			w.add(t, 300, w == filtered)
		}
	}
	src, shadowCopy := raw.segment(seg4), filtered.segment(seg4)
	end := int(raw.pos() - seg4)
	first := int(raw.recs[len(raw.recs)-5].lsn - seg4)

	run := func(prefix []byte) ([]byte, error) {
		sh := &fakeShadow{start: seg4, t: t}
		p, err := NewPump(seg4, PumpConfig{SegmentSize: segSize, StartPrefix: prefix}, noopDecider{}, sh,
			&memSink{segs: map[wal.LSN][]byte{}}, make(chan *Batch, 16))
		if err != nil {
			t.Fatal(err)
		}
		err = p.Feed(context.Background(), src[:end])
		return sh.wire, err
	}
	wire, err := run(shadowCopy)
	if err != nil {
		t.Fatal(err)
	}
	if len(wire) < end || !bytes.Equal(wire[:end], shadowCopy[:end]) {
		t.Fatal("the restarted pump's wire differs from the shadow's filtered copy")
	}
	if bytes.Equal(src[:first], shadowCopy[:first]) {
		t.Fatal("test setup: the raw and filtered continuations are equal")
	}
	if _, err := run(nil); err == nil || !strings.Contains(err.Error(), "continuing a record begun in the previous segment") {
		t.Fatalf("without a filtered copy: err = %v", err)
	}
}

// noopDecider is fakeDecider with the filter's own NOOP images.
type noopDecider struct{ fakeDecider }

func (noopDecider) NoopRecord(dst []byte, rec *wal.Record) ([]byte, error) {
	return filter.NoopRecord(dst, rec.Header.TotLen, rec.Header.XID, rec.Header.Prev)
}

// The start segment's filtered copy: a pg_wal file of that name naming
// another page address (recycled) is passed over for the archive's copy.
func TestFilteredStartSegmentSkipsRecycledPgWALFile(t *testing.T) {
	const segSize = 1 << 20
	seg4 := wal.LSN(4 * segSize)
	b := newSynthWAL(seg4)
	for range 5 {
		b.add(t, 300, true)
	}
	good := b.segment(seg4)
	recycled := bytes.Clone(good)
	binary.LittleEndian.PutUint64(recycled[8:], uint64(seg4-2*segSize))
	state := t.TempDir()
	s := &Session{cfg: config.Session{StateDir: state}}
	if err := os.MkdirAll(filepath.Join(s.shadowDir(), "pg_wal"), 0o700); err != nil {
		t.Fatal(err)
	}
	arch, err := source.OpenArchive(source.ArchiveConfig{Dir: s.archiveDir(), SegmentSize: segSize})
	if err != nil {
		t.Fatal(err)
	}
	p := &parts{archive: arch, identity: source.Identity{Timeline: 1}}
	if got := s.filteredStartSegment(p, seg4); got != nil {
		t.Fatalf("a copy found in empty directories (%d bytes)", len(got))
	}
	if err := os.WriteFile(filepath.Join(s.shadowDir(), "pg_wal", segName(seg4, segSize)), recycled, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := arch.WriteSegment(segName(seg4, segSize), good); err != nil {
		t.Fatal(err)
	}
	if got := s.filteredStartSegment(p, seg4); !bytes.Equal(got, good) {
		t.Fatal("the recycled pg_wal file was taken over the archive's copy")
	}
}

// TestFilterBootstrapWALOncePerBootstrap: the first start filters the
// bootstrap's WAL and records it; a later start of the same bootstrap
// leaves pg_wal alone (here a segment put back unfiltered stays so), and a
// new bootstrap filters again.
func TestFilterBootstrapWALOncePerBootstrap(t *testing.T) {
	const segSize = 1 << 20
	seg3, seg4 := wal.LSN(3*segSize), wal.LSN(4*segSize)
	b := newSynthWAL(seg3)
	for range 20 {
		b.add(t, 300, false)
	}
	orig := b.segment(seg3)
	stateDir := t.TempDir()
	if err := os.Rename(shadowDirWith(t, segSize, map[wal.LSN][]byte{seg3: orig}), filepath.Join(stateDir, "shadow")); err != nil {
		t.Fatal(err)
	}
	s := &Session{cfg: config.Session{StateDir: stateDir}}
	shadowDir := s.shadowDir()
	boot := &shadow.BootstrapResult{SystemID: 7, Timeline: 1, StartLSN: seg3 + 40, EndLSN: seg3 + 4000, WALEnd: seg4, FollowedDBOID: followedDBOID}
	if err := s.filterBootstrapWAL(context.Background(), boot, segSize); err != nil {
		t.Fatal(err)
	}
	filtered := readSeg(t, shadowDir, seg3, segSize)
	if bytes.Equal(filtered, orig) {
		t.Fatal("the bootstrap's WAL was not filtered")
	}
	put := func(data []byte) {
		if err := os.WriteFile(filepath.Join(shadowDir, "pg_wal", segName(seg3, segSize)), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	put(orig)
	if err := s.filterBootstrapWAL(context.Background(), boot, segSize); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readSeg(t, shadowDir, seg3, segSize), orig) {
		t.Fatal("the same bootstrap's WAL was filtered again")
	}
	again := *boot
	again.StartLSN, again.EndLSN = seg3+8192, seg3+9000
	if err := s.filterBootstrapWAL(context.Background(), &again, segSize); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readSeg(t, shadowDir, seg3, segSize), filtered) {
		t.Fatal("a new bootstrap's WAL was not filtered")
	}
}
