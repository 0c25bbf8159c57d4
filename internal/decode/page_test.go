package decode

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/walshadow/walshadow/internal/wal"
)

// onPage turns tupleOf's WAL shape (xl_heap_header + the bytes from offset
// 23) into an on-page tuple with the given xmin and xmax.
func onPage(xmin, xmax uint32, walShape []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, xmin)
	b = binary.LittleEndian.AppendUint32(b, xmax)
	b = append(b, make([]byte, 10)...) // t_cid, t_ctid
	return append(b, walShape...)
}

func mustPageTuple(t *testing.T, item []byte) (PageTupleHeader, wal.HeapTuple) {
	t.Helper()
	h, tup, err := PageTuple(item)
	if err != nil {
		t.Fatal(err)
	}
	return h, tup
}

func TestPageTuple(t *testing.T) {
	walShape := tupleOf(mainDesc(), [][]byte{int4(7), nil, le64(9)})
	h, tup := mustPageTuple(t, onPage(100, 200, walShape))
	if h.Xmin != 100 || h.Xmax != 200 || h.Infomask&wal.HeapHasNull == 0 || h.Hoff != 24 || h.Infomask2 != 3 {
		t.Fatalf("header %+v", h)
	}
	var want wal.HeapTuple
	if err := want.Decode(walShape); err != nil {
		t.Fatal(err)
	}
	if tup.Header != want.Header || !bytes.Equal(tup.Data, want.Data) {
		t.Fatalf("tuple %+v, want %+v", tup, want)
	}
	for _, bad := range [][]byte{
		make([]byte, 22),
		onPage(1, 0, []byte{3, 0, 0, 0, 22}), // t_hoff below the header
		onPage(1, 0, []byte{3, 0, 0, 0, 40}), // t_hoff past the tuple
	} {
		if _, _, err := PageTuple(bad); err == nil {
			t.Errorf("tuple % x accepted", bad)
		}
	}
}

// chunkTuple is one TOAST chunk as a page holds it.
func chunkTuple(id uint32, seq int32, payload string) wal.HeapTuple {
	_, tup, _ := PageTuple(onPage(1, 0, tupleOf(toastDesc(), [][]byte{le32(id), int4(seq), plain([]byte(payload))})))
	return tup
}

// TestPageRowsToast: chunks arrive out of order and after the row, the row
// waits for them (needChunks) and then decodes with the WAL path's
// expansion; a second reference and a duplicate chunk are errors.
func TestPageRowsToast(t *testing.T) {
	desc, td := mainDesc(), toastDesc()
	p := NewPageRows(TxOptions{})
	body := strings.Repeat("a", 3000) + strings.Repeat("b", 3000)
	ptr := externalPointer(int32(len(body)+4), len(body), 0, 55, td.Oid)
	_, tup := mustPageTuple(t, onPage(1, 0, tupleOf(desc, [][]byte{int4(1), ptr, le64(2)})))

	if _, need, err := p.Row(desc, 0x10, tup, 0x99); err != nil || !need {
		t.Fatalf("no chunks yet: need %v err %v", need, err)
	}
	if err := p.AddToastChunk(td, chunkTuple(55, 1, body[3000:])); err != nil {
		t.Fatal(err)
	}
	if _, need, err := p.Row(desc, 0x10, tup, 0x99); err != nil || !need {
		t.Fatalf("half the chunks: need %v err %v", need, err)
	}
	if err := p.AddToastChunk(td, chunkTuple(55, 1, "again")); err == nil || !strings.Contains(err.Error(), "two visible chunks") {
		t.Fatalf("duplicate chunk: %v", err)
	}
	if err := p.AddToastChunk(td, chunkTuple(55, 0, body[:3000])); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.ToastChunks != 2 || st.ToastBytes != int64(len(body)) {
		t.Fatalf("stats %+v", st)
	}
	r, need, err := p.Row(desc, 0x10, tup, 0x99)
	if err != nil || need {
		t.Fatalf("need %v err %v", need, err)
	}
	if r.Op != OpInsert || r.LSN != 0x99 || r.DescFrom != 0x10 || r.Desc != desc || len(r.Fields) != 3 {
		t.Fatalf("row %+v", r)
	}
	if r.Fields[0].Value != int64(1) || r.Fields[1].Value != body || r.Fields[2].Value != int64(2) {
		t.Fatalf("fields %v %.20v %v", r.Fields[0].Value, r.Fields[1].Value, r.Fields[2].Value)
	}
	if st := p.Stats(); st.ToastChunks != 0 || st.ToastBytes != 0 || st.ToastValues != 1 || st.Rows != 1 {
		t.Fatalf("chunks not released: %+v", st)
	}
	if _, _, err := p.Row(desc, 0x10, tup, 0x99); err == nil || !strings.Contains(err.Error(), "second visible row") {
		t.Fatalf("second reference: %v", err)
	}
	if err := p.AddToastChunk(td, chunkTuple(55, 2, "late")); err == nil {
		t.Fatal("chunk after the value was taken accepted")
	}
}

// TestPageRowsGap: chunks whose sizes add up but with a hole in the
// sequence are an error, not a value.
func TestPageRowsGap(t *testing.T) {
	desc, td := mainDesc(), toastDesc()
	p := NewPageRows(TxOptions{})
	ptr := externalPointer(4+8, 8, 0, 9, td.Oid)
	_, tup := mustPageTuple(t, onPage(1, 0, tupleOf(desc, [][]byte{int4(1), ptr, le64(2)})))
	for _, c := range []struct {
		seq int32
		s   string
	}{{0, "abcd"}, {2, "efgh"}} {
		if err := p.AddToastChunk(td, chunkTuple(9, c.seq, c.s)); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := p.Row(desc, 0, tup, 1); err == nil || !strings.Contains(err.Error(), "chunk 1 is missing") {
		t.Fatalf("gap: %v", err)
	}
}

// TestPageRowsInline decodes a row without TOAST, pending types keeping Raw.
func TestPageRowsInline(t *testing.T) {
	desc := mainDesc()
	p := NewPageRows(TxOptions{})
	item := onPage(1, 0, tupleOf(desc, [][]byte{int4(3), plain([]byte("hi")), le64(4)}))
	_, tup := mustPageTuple(t, item)
	r, need, err := p.Row(desc, 0, tup, 1)
	if err != nil || need {
		t.Fatal(need, err)
	}
	for i := range item {
		item[i] = 0xFF // rows must not alias the page
	}
	if r.Fields[0].Value != int64(3) || r.Fields[1].Value != "hi" || r.Fields[2].Value != int64(4) {
		t.Fatalf("fields %+v", r.Fields)
	}
}
