package spool

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/wal"
)

const (
	testSeg = 1 << 20
	testTLI = 1
)

// fakeWAL is n bytes of WAL-shaped data from lsn: random bytes with a
// long page header (magic, timeline, page address) at each segment start,
// which is all the spool looks at.
func fakeWAL(rng *rand.Rand, lsn wal.LSN, n int) []byte {
	b := make([]byte, n)
	rng.Read(b)
	for off := 0; off < n; off++ {
		at := lsn + wal.LSN(off)
		if at%testSeg != 0 {
			continue
		}
		if off+wal.LongPageHeaderLen > n {
			break
		}
		binary.LittleEndian.PutUint16(b[off:], 0xD110)
		binary.LittleEndian.PutUint16(b[off+2:], wal.XLPLongHeader)
		binary.LittleEndian.PutUint32(b[off+4:], testTLI)
		binary.LittleEndian.PutUint64(b[off+8:], uint64(at))
	}
	return b
}

func openT(t *testing.T, dir string) *Spool {
	t.Helper()
	s, err := Open(dir, testTLI, testSeg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// readAll reads [from, to) through a reader.
func readAll(t *testing.T, s *Spool, from, to wal.LSN) []byte {
	t.Helper()
	r, err := s.NewReader(from, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []byte
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for r.Next() < to {
		at, b, err := r.Read(ctx)
		if err != nil {
			t.Fatalf("reading at %s: %v", r.Next(), err)
		}
		if at != from+wal.LSN(len(out)) {
			t.Fatalf("read returned %s, want %s", at, from+wal.LSN(len(out)))
		}
		if wal.LSN(at)/testSeg != (at+wal.LSN(len(b))-1)/testSeg {
			t.Fatalf("a read at %s of %d bytes crosses a segment end", at, len(b))
		}
		out = append(out, b...)
	}
	return out
}

func TestAppendSyncReopen(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewSource(1))
	start := wal.LSN(3 * testSeg)
	s := openT(t, dir)
	if err := s.Reset(start); err != nil {
		t.Fatal(err)
	}
	data := fakeWAL(rng, start, 2*testSeg+12345)
	// Appends of uneven sizes, some crossing segment ends.
	for off := 0; off < len(data); {
		n := min(1+rng.Intn(300<<10), len(data)-off)
		if err := s.Append(start+wal.LSN(off), data[off:off+n]); err != nil {
			t.Fatal(err)
		}
		off += n
	}
	end := start + wal.LSN(len(data))
	if got, err := s.Sync(); err != nil || got != end {
		t.Fatalf("Sync = %s, %v; want %s", got, err, end)
	}
	if got := readAll(t, s, start+100, end); !bytes.Equal(got, data[100:]) {
		t.Fatal("read back differs from what was appended")
	}
	if s.Segments() != 3 || s.Bytes() != int64(len(data)) {
		t.Fatalf("segments %d bytes %d", s.Segments(), s.Bytes())
	}
	if err := s.Append(start, data[:10]); err == nil {
		t.Fatal("an append that is not at the end was taken")
	}
	s.Close()

	s = openT(t, dir)
	defer s.Close()
	if a, b := s.Extent(); a != start || b != end || s.Durable() != end {
		t.Fatalf("reopened extent [%s, %s) durable %s; want [%s, %s)", a, b, s.Durable(), start, end)
	}
	if got := readAll(t, s, start, end); !bytes.Equal(got, data) {
		t.Fatal("read back after reopening differs")
	}
	// Appending goes on where it ended.
	more := fakeWAL(rng, end, 5000)
	if err := s.Append(end, more); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, s, end-10, end+5000); !bytes.Equal(got, append(data[len(data)-10:], more...)) {
		t.Fatal("read across the reopen point differs")
	}
}

// TestUnsyncedTailCut: what was appended after the last sync is not the
// spool's after a crash: the torn tail is cut and the next segment removed.
func TestUnsyncedTailCut(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewSource(2))
	s := openT(t, dir)
	if err := s.Reset(0); err != nil {
		t.Fatal(err)
	}
	data := fakeWAL(rng, 0, testSeg+500)
	if err := s.Append(0, data[:testSeg-100]); err != nil {
		t.Fatal(err)
	}
	synced, err := s.Sync()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Append(synced, data[testSeg-100:]); err != nil {
		t.Fatal(err)
	}
	// No sync, no Close: the process dies here.
	s.closeWriter()
	s.endFile.Close()

	s = openT(t, dir)
	defer s.Close()
	if _, w := s.Extent(); w != synced {
		t.Fatalf("reopened at %s, want the synced end %s", w, synced)
	}
	if fi, err := os.Stat(s.SegmentPath(0)); err != nil || fi.Size() != int64(synced) {
		t.Fatalf("the last segment was not cut at the synced end: %v %v", fi, err)
	}
	if _, err := os.Stat(s.SegmentPath(testSeg)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the segment past the synced end is still there: %v", err)
	}
	// The bytes come again from the source, identical.
	if err := s.Append(synced, data[synced:]); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, s, 0, wal.LSN(len(data))); !bytes.Equal(got, data) {
		t.Fatal("read back differs")
	}
}

func TestTrim(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewSource(3))
	s := openT(t, dir)
	if err := s.Reset(0); err != nil {
		t.Fatal(err)
	}
	data := fakeWAL(rng, 0, 4*testSeg+10)
	if err := s.Append(0, data); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Trim(3 * testSeg); err != nil || n != 0 {
		t.Fatalf("trim before any sync removed %d (%v): nothing is durable yet", n, err)
	}
	if _, err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Trim(2*testSeg + 77); err != nil || n != 2 {
		t.Fatalf("Trim = %d, %v; want 2 segments", n, err)
	}
	if a, _ := s.Extent(); a != 2*testSeg {
		t.Fatalf("start after trim %s", a)
	}
	if s.Covers(testSeg) || !s.Covers(2*testSeg) {
		t.Fatal("Covers disagrees with the trim")
	}
	// The new start is not recorded yet: a crash now.
	s.closeWriter()
	s.endFile.Close()
	s = openT(t, dir)
	if a, w := s.Extent(); a != 2*testSeg || w != wal.LSN(len(data)) {
		t.Fatalf("after a crash following the trim: [%s, %s)", a, w)
	}
	// Never the last segment, whatever keepFrom says.
	if n, err := s.Trim(wal.LSN(len(data)) + 10*testSeg); err != nil || n != 2 {
		t.Fatalf("Trim past the end = %d, %v; want 2 (the last segment stays)", n, err)
	}
	if s.Segments() != 1 {
		t.Fatalf("%d segments", s.Segments())
	}
	s.Close()
	s = openT(t, dir)
	defer s.Close()
	if got := readAll(t, s, 4*testSeg, wal.LSN(len(data))); !bytes.Equal(got, data[4*testSeg:]) {
		t.Fatal("what trim kept reads back differently")
	}
}

func TestCorruption(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	prepare := func(t *testing.T) string {
		dir := t.TempDir()
		s := openT(t, dir)
		if err := s.Reset(0); err != nil {
			t.Fatal(err)
		}
		if err := s.Append(0, fakeWAL(rng, 0, 3*testSeg)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Sync(); err != nil {
			t.Fatal(err)
		}
		s.Close()
		return dir
	}
	segName := func(n int) string {
		return (&Spool{timeline: testTLI, segSize: testSeg}).segName(uint64(n))
	}
	cases := []struct {
		name   string
		damage func(dir string)
		want   string // in the error; "" = opens
	}{
		{"interior segment missing", func(dir string) { os.Remove(filepath.Join(dir, segName(1))) }, segName(1)},
		{"interior segment short", func(dir string) { os.Truncate(filepath.Join(dir, segName(1)), 100) }, segName(1)},
		{"segment of another address", func(dir string) {
			f, _ := os.OpenFile(filepath.Join(dir, segName(2)), os.O_RDWR, 0)
			f.WriteAt(make([]byte, 8), 8)
			f.Close()
		}, segName(2)},
		{"both end records spoiled", func(dir string) {
			os.WriteFile(filepath.Join(dir, EndFile), bytes.Repeat([]byte{0xAB}, 2*slotLen), 0o600)
		}, EndFile},
		{"the last end record torn", func(dir string) {
			b, _ := os.ReadFile(filepath.Join(dir, EndFile))
			// The sync wrote generation 2 (slot 0) last; tear it.
			b[20] ^= 0xFF
			os.WriteFile(filepath.Join(dir, EndFile), b, 0o600)
		}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := prepare(t)
			c.damage(dir)
			s, err := Open(dir, testTLI, testSeg)
			if c.want == "" {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				defer s.Close()
				// The other slot (the reset's) names an empty spool at 0.
				if a, w := s.Extent(); a != 0 || w != 0 {
					t.Fatalf("with the last record torn: [%s, %s), want the one before it", a, w)
				}
				return
			}
			if err == nil {
				s.Close()
				t.Fatalf("Open took a damaged spool")
			}
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q: want ErrCorrupt naming %s", err, c.want)
			}
		})
	}
}

// TestOtherStream: a spool of another timeline or segment size is emptied.
func TestOtherStream(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	if err := s.Reset(0); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(0, fakeWAL(rand.New(rand.NewSource(5)), 0, 1000)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s2, err := Open(dir, testTLI+1, testSeg)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if a, w := s2.Extent(); a != 0 || w != 0 || s2.Segments() != 0 {
		t.Fatalf("another timeline's spool was kept: [%s, %s)", a, w)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("files left: %v", ents)
	}
}

func TestReaderWaits(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	if err := s.Reset(testSeg); err != nil {
		t.Fatal(err)
	}
	r, err := s.NewReader(testSeg, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := make(chan []byte, 1)
	go func() {
		_, b, err := r.Read(context.Background())
		if err != nil {
			t.Error(err)
		}
		got <- append([]byte(nil), b...)
	}()
	select {
	case <-got:
		t.Fatal("Read returned before anything was appended")
	case <-time.After(50 * time.Millisecond):
	}
	data := fakeWAL(rand.New(rand.NewSource(6)), testSeg, 64)
	if err := s.Append(testSeg, data); err != nil {
		t.Fatal(err)
	}
	select {
	case b := <-got:
		if !bytes.Equal(b, data) {
			t.Fatal("Read returned other bytes")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Read did not wake on an append")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, _, err := r.Read(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Read with nothing new = %v", err)
	}
	if _, err := s.NewReader(0, 0); err == nil {
		t.Fatal("a reader below the spool's start was made")
	}
	s.Close()
	if _, _, err := r.Read(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Read after Close = %v", err)
	}
}

// TestSlotGolden pins the end file's record layout.
func TestSlotGolden(t *testing.T) {
	b := encodeSlot(extent{gen: 2, timeline: 1, segSize: 16 << 20, start: 0x3000000, end: 0x30012AB})
	// magic, version 1 | generation 2 << 16, timeline, segment size,
	// start, end, reserved; then the CRC.
	want := "5753504c" + "01000200" + "01000000" + "00000001" + "0000000300000000" + "ab12000300000000" + "00000000"
	if got := hex.EncodeToString(b[:36]); got != want {
		t.Fatalf("slot bytes\n got %s\nwant %s", got, want)
	}
	e, ok := decodeSlot(b)
	if !ok || e.gen != 2 || e.end != 0x30012AB {
		t.Fatalf("decode: %+v %v", e, ok)
	}
	if !newer(0, 0xffff) || newer(0xffff, 0) {
		t.Fatal("generation wrap")
	}
}

func FuzzDecodeSlot(f *testing.F) {
	f.Add(encodeSlot(extent{gen: 7, timeline: 1, segSize: testSeg, start: 5, end: 9}))
	f.Add(make([]byte, slotLen))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, ok := decodeSlot(b)
		if !ok {
			return
		}
		if again := encodeSlot(e); !bytes.Equal(again[:36], b[:36]) {
			t.Fatalf("a slot that decodes does not encode back")
		}
	})
}

// TestTrimRecycles: trimmed files are renamed to segments to come (a few
// only), the appends that reach them overwrite them, what was appended
// reads back exactly with none of their old bytes, and a reopen removes the
// ones past the end and cuts the last one at it.
func TestTrimRecycles(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewSource(5))
	s := openT(t, dir)
	if err := s.Reset(0); err != nil {
		t.Fatal(err)
	}
	data := fakeWAL(rng, 0, 7*testSeg+100)
	if err := s.Append(0, data); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Trim(6 * testSeg); err != nil || n != 6 {
		t.Fatalf("Trim = %d, %v; want 6 segments", n, err)
	}
	names := func() []string {
		ents, _ := os.ReadDir(dir)
		var out []string
		for _, e := range ents {
			if e.Name() != EndFile {
				out = append(out, e.Name())
			}
		}
		return out
	}
	// Segment 7 is being written: 8 to 11 wait, the other two went.
	want := []string{"000000010000000000000006", "000000010000000000000007", "000000010000000000000008", "000000010000000000000009", "00000001000000000000000A", "00000001000000000000000B"}
	if got := names(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("files after the trim: %v, want %v", got, want)
	}
	more := fakeWAL(rng, wal.LSN(len(data)), 2*testSeg+100)
	if err := s.Append(wal.LSN(len(data)), more); err != nil {
		t.Fatal(err)
	}
	all := append(data, more...)
	end := wal.LSN(len(all))
	if got := readAll(t, s, 6*testSeg, end); !bytes.Equal(got, all[6*testSeg:]) {
		t.Fatal("bytes appended over recycled files read back differently")
	}
	if _, err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	s.closeWriter()
	s.endFile.Close()
	s = openT(t, dir)
	defer s.Close()
	if a, w := s.Extent(); a != 6*testSeg || w != end {
		t.Fatalf("reopened: [%s, %s), want [%s, %s)", a, w, wal.LSN(6*testSeg), end)
	}
	want = []string{"000000010000000000000006", "000000010000000000000007", "000000010000000000000008", "000000010000000000000009"}
	if got := names(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("files after reopening: %v, want %v", got, want)
	}
	if fi, err := os.Stat(filepath.Join(dir, want[3])); err != nil || fi.Size() != int64(end-9*testSeg) {
		t.Fatalf("the last segment file is not cut at the end: %v %v", fi.Size(), err)
	}
	if got := readAll(t, s, 6*testSeg, end); !bytes.Equal(got, all[6*testSeg:]) {
		t.Fatal("bytes read back differently after reopening")
	}
}
