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
	var held [][]byte
	seal := func(s wal.LSN, data []byte) error {
		held = append(held, data)
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
	// Released segments are never reused: the walsender keeps the bytes
	// published from them.
	w.Append(bytes.Repeat([]byte{0x55}, 2*seg))
	for i, b := range held {
		if !bytes.Equal(b, src[i*seg:(i+1)*seg]) {
			t.Fatalf("released segment %d was overwritten", i)
		}
	}
}

// TestWireBufferReusesBelowFloor: a released segment is reused only once
// the floor (what the walsender may still read) has passed its end, and
// only a few wait.
func TestWireBufferReusesBelowFloor(t *testing.T) {
	const seg = 1 << 16
	w, err := newWireBuffer(0, seg)
	if err != nil {
		t.Fatal(err)
	}
	floor := wal.LSN(0)
	w.floor = func() wal.LSN { return floor }
	fill := func(b byte) {
		w.Append(bytes.Repeat([]byte{b}, seg))
	}
	var first []byte
	fill(1)
	first = w.segs[0].data
	fill(2)
	fill(3)
	fill(4)
	if err := w.SealThrough(3*seg, func(wal.LSN, []byte) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if len(w.retired) != maxRetired {
		t.Fatalf("%d retired segments, want %d", len(w.retired), maxRetired)
	}
	fill(5) // floor 0: the walsender may read them all
	if &w.segs[len(w.segs)-1].data[0] == &w.retired[0].data[0] || bytes.Contains(w.retired[0].data, []byte{5}) {
		t.Fatal("a segment reused below the floor")
	}
	floor = 2 * seg // the oldest retired ([seg, 2seg): the first went, maxRetired) is free
	oldest := w.retired[0].data
	fill(6)
	if last := w.segs[len(w.segs)-1].data; &last[0] != &oldest[0] || last[0] != 6 {
		t.Fatal("the retired segment below the floor was not reused")
	}
	if &first[0] == &oldest[0] || first[0] != 1 {
		t.Fatal("the segment dropped beyond maxRetired was reused")
	}
}
