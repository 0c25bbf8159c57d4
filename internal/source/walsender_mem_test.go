package source

import (
	"bytes"
	"testing"

	"github.com/walshadow/walshadow/internal/wal"
)

// TestWalsenderChunkedMemory: published bytes kept in chunks smaller than
// a segment (production: 1 MiB chunks of 16 MiB segments) read back at any
// LSN, chunks end at chunk-size multiples (page boundaries), a frame
// never runs past its chunk, and a comparison spans chunks.
func TestWalsenderChunkedMemory(t *testing.T) {
	w := &Walsender{cfg: WalsenderConfig{SegmentSize: 16 << 20}}
	start := wal.LSN(0x1000010) // not chunk-aligned, as after a gap
	w.winStart, w.pubEnd, w.published = start, start, true
	data := make([]byte, 3<<20+12345)
	for i := range data {
		data[i] = byte(i * 7 / 3)
	}
	for off, step := 0, 1; off < len(data); step = step*3 + 1 {
		n := min(step%(700<<10)+1, len(data)-off)
		w.appendLocked(data[off : off+n])
		off += n
	}
	if w.pubEnd != start+wal.LSN(len(data)) || w.winStart != start {
		t.Fatalf("memory [%s, %s), want [%s, %s)", w.winStart, w.pubEnd, start, start+wal.LSN(len(data)))
	}
	size := w.chunkSize()
	for i, c := range w.mem[:len(w.mem)-1] {
		if c.end()%size != 0 || len(c.data) != cap(c.data) {
			t.Fatalf("chunk %d [%s, %s) is not full up to a %d-byte boundary", i, c.start, c.end(), size)
		}
	}
	for _, lsn := range []wal.LSN{start, start + 1, 0x10FFFFF, 0x1100000, 0x1100001, 0x1234567, w.pubEnd - 1} {
		got := w.memLocked(lsn)
		want := data[lsn-start:]
		if len(got) == 0 || !bytes.Equal(got, want[:len(got)]) {
			t.Fatalf("memory at %s: %d bytes, not the published ones", lsn, len(got))
		}
		if end := lsn + wal.LSN(len(got)); end != w.pubEnd && end%size != 0 {
			t.Fatalf("memory at %s ends at %s, inside a chunk", lsn, end)
		}
	}
	from := wal.LSN(0x10FFF00)
	if !w.memEqualLocked(from, data[from-start:from-start+0x300]) {
		t.Error("bytes across a chunk boundary compare unequal")
	}
	bad := append([]byte(nil), data[from-start:from-start+0x300]...)
	bad[0x250] ^= 1
	if w.memEqualLocked(from, bad) {
		t.Error("a difference past a chunk boundary went unseen")
	}

}
