package session

import (
	"bytes"
	"testing"

	"github.com/walshadow/walshadow/internal/wal"
)

func TestWireBufferAppendRewriteSeal(t *testing.T) {
	const seg = 1 << 20
	start := wal.LSN(7 * seg)
	w, err := newWireBuffer(start, seg)
	if err != nil {
		t.Fatal(err)
	}
	src := make([]byte, 2*seg+1000)
	for i := range src {
		src[i] = byte(i % 251)
	}
	for i := 0; i < len(src); i += 7777 {
		w.Append(src[i:min(i+7777, len(src))])
	}
	if w.End() != start+wal.LSN(len(src)) {
		t.Fatalf("end %s", w.End())
	}
	// A rewrite that crosses a segment boundary.
	patch := bytes.Repeat([]byte{0xEE}, 300)
	at := start + seg - 100
	if err := w.WriteAt(at, patch); err != nil {
		t.Fatal(err)
	}
	copy(src[seg-100:], patch)
	var got []byte
	if err := w.Range(start, w.End(), func(_ wal.LSN, b []byte) error { got = append(got, b...); return nil }); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, src) {
		t.Fatal("wire bytes differ from what was appended and rewritten")
	}
	if err := w.WriteAt(w.End()-10, make([]byte, 20)); err == nil {
		t.Fatal("rewrite past the end accepted")
	}
	var sealed []wal.LSN
	seal := func(s wal.LSN, data []byte) error {
		if len(data) != seg || !bytes.Equal(data, src[s-start:s-start+seg]) {
			t.Fatalf("sealed segment %s has wrong bytes", s)
		}
		sealed = append(sealed, s)
		return nil
	}
	// Decided only part of the first segment: nothing sealed.
	if err := w.SealThrough(start+seg-1, seal); err != nil || len(sealed) != 0 {
		t.Fatalf("sealed %v err %v", sealed, err)
	}
	if err := w.SealThrough(start+2*seg+500, seal); err != nil || len(sealed) != 2 || sealed[1] != start+seg {
		t.Fatalf("sealed %v err %v", sealed, err)
	}
	if w.Start() != start+2*seg {
		t.Fatalf("start after sealing %s", w.Start())
	}
	if err := w.WriteAt(start+10, []byte{1}); err == nil {
		t.Fatal("rewrite of a sealed segment accepted")
	}
	// Freed buffers are reused.
	w.Append(make([]byte, 2*seg))
	if len(w.free) != 0 {
		t.Fatalf("%d free buffers left unused", len(w.free))
	}
}
