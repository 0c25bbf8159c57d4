package source

import (
	"bytes"
	"testing"

	"github.com/walshadow/walshadow/internal/wal"
)

// TestWalsenderKeptMemory: published bytes are kept where the publisher
// holds them, not copied. Publications contiguous in one buffer make one
// chunk (the session's wire buffer: one per segment), others a chunk each;
// the bytes read back at any LSN, a frame never runs past its chunk, whose
// end is a publication's, and a comparison spans chunks.
func TestWalsenderKeptMemory(t *testing.T) {
	w := &Walsender{cfg: WalsenderConfig{SegmentSize: 16 << 20}}
	start := wal.LSN(0x1000010) // not page-aligned, as after a gap
	w.winStart, w.pubEnd, w.published = start, start, true
	data := make([]byte, 3<<20+12345)
	for i := range data {
		data[i] = byte(i * 7 / 3)
	}
	// The first two thirds from one buffer in uneven pieces, the rest in
	// separate buffers (copies), one per piece.
	split := 2 << 20
	var ends []wal.LSN
	copies := 0
	for off, step := 0, 1; off < len(data); step = step*3 + 1 {
		n := min(step%(700<<10)+1, len(data)-off)
		if off < split {
			n = min(n, split-off)
		}
		piece := data[off : off+n]
		if off >= split {
			piece = append([]byte(nil), piece...)
			copies++
		}
		w.appendLocked(piece)
		off += n
		ends = append(ends, start+wal.LSN(off))
	}
	if w.pubEnd != start+wal.LSN(len(data)) || w.winStart != start {
		t.Fatalf("memory [%s, %s), want [%s, %s)", w.winStart, w.pubEnd, start, start+wal.LSN(len(data)))
	}
	if &w.mem[0].data[0] != &data[0] || w.mem[0].end() != start+wal.LSN(split) {
		t.Fatalf("the contiguous publications are not one chunk of the publisher's memory: first chunk [%s, %s)", w.mem[0].start, w.mem[0].end())
	}
	if want := 1 + copies; len(w.mem) != want {
		t.Fatalf("%d chunks, want %d", len(w.mem), want)
	}
	for _, c := range w.mem {
		if indexOf(ends, c.end()) < 0 {
			t.Fatalf("chunk [%s, %s) ends where no publication ended", c.start, c.end())
		}
	}
	for _, lsn := range []wal.LSN{start, start + 1, 0x10FFFFF, 0x1100000, start + wal.LSN(split) - 1, start + wal.LSN(split), 0x1234567, w.pubEnd - 1} {
		got := w.memLocked(lsn)
		want := data[lsn-start:]
		if len(got) == 0 || !bytes.Equal(got, want[:len(got)]) {
			t.Fatalf("memory at %s: %d bytes, not the published ones", lsn, len(got))
		}
		if end := lsn + wal.LSN(len(got)); indexOf(ends, end) < 0 {
			t.Fatalf("memory at %s ends at %s, where no publication ended", lsn, end)
		}
	}
	from := start + wal.LSN(split) - 0x100
	if !w.memEqualLocked(from, data[from-start:from-start+0x300]) {
		t.Error("bytes across a chunk boundary compare unequal")
	}
	bad := append([]byte(nil), data[from-start:from-start+0x300]...)
	bad[0x250] ^= 1
	if w.memEqualLocked(from, bad) {
		t.Error("a difference past a chunk boundary went unseen")
	}
}

func indexOf(s []wal.LSN, v wal.LSN) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// TestWalsenderMemoryFloor: the floor is the oldest kept byte, or lower
// while a connection (closing or not) writes a frame from memory since
// dropped; nothing kept and nothing being read: no floor.
func TestWalsenderMemoryFloor(t *testing.T) {
	w := &Walsender{cfg: WalsenderConfig{SegmentSize: 1 << 20}, conns: map[*wsConn]struct{}{}}
	if f := w.MemoryFloor(); f != ^wal.LSN(0) {
		t.Fatalf("floor before anything was published: %s", f)
	}
	start := wal.LSN(4 << 20)
	w.winStart, w.pubEnd, w.published = start, start, true
	data := make([]byte, 3<<20)
	w.appendLocked(data)
	if f := w.MemoryFloor(); f != start {
		t.Fatalf("floor %s, want the oldest byte kept %s", f, start)
	}
	c := &wsConn{w: w, streaming: true, sentPtr: start + 100}
	w.conns[c] = struct{}{}
	if st := w.nextStep(c); st.kind != wsStepMemory {
		t.Fatalf("step %v, want a frame from memory", st.kind)
	}
	w.trimLocked() // the connection's unsent bytes keep the memory
	if f := w.MemoryFloor(); f != start {
		t.Fatalf("floor %s while a frame from %s is written", f, start+100)
	}
	c.closing = true
	w.trimLocked() // a closing connection no longer keeps memory...
	if w.mem[0].start == start {
		t.Fatal("trim kept memory for a closing connection")
	}
	if f := w.MemoryFloor(); f != start+100 {
		t.Fatalf("floor %s, want %s: the frame being written", f, start+100) // ...but its frame counts
	}
	w.sent(c, start+100, 10, false)
	if f := w.MemoryFloor(); f != w.mem[0].start {
		t.Fatalf("floor %s after the frame was written, want %s", f, w.mem[0].start)
	}
}
