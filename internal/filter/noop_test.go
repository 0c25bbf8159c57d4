package filter

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"testing"

	"github.com/walshadow/walshadow/internal/wal"
)

func TestNoopRecordLayout(t *testing.T) {
	for _, tc := range []struct {
		totLen   uint32
		mainLen  int
		headerID byte
	}{
		{24, 0, 0},
		{26, 0, wal.XLRBlockIDDataShort},
		{24 + 100, 98, wal.XLRBlockIDDataShort},
		{24 + 257, 255, wal.XLRBlockIDDataShort}, // largest short header
		{24 + 258, 253, wal.XLRBlockIDDataLong},  // smallest long header
		{8241, 8241 - 24 - 5, wal.XLRBlockIDDataLong},
		{1 << 20, 1<<20 - 24 - 5, wal.XLRBlockIDDataLong},
	} {
		junk := bytes.Repeat([]byte{0xAB}, int(tc.totLen)+7) // reused storage must be cleared
		buf, err := NoopRecord(junk, tc.totLen, 4242, 0x1234560)
		if err != nil {
			t.Fatalf("totLen %d: %v", tc.totLen, err)
		}
		if len(buf) != int(tc.totLen) || &buf[0] != &junk[0] {
			t.Fatalf("totLen %d: len %d, reused storage %t", tc.totLen, len(buf), &buf[0] == &junk[0])
		}
		var rec wal.Record
		if err := wal.DecodeRecord(buf, 0x5000028, pg15, &rec); err != nil {
			t.Fatalf("totLen %d: %v", tc.totLen, err)
		}
		h := rec.Header
		if h.TotLen != tc.totLen || h.XID != 4242 || h.Prev != 0x1234560 || h.RmID != wal.RmgrXLOG || h.Info != wal.XLogNoop {
			t.Fatalf("totLen %d: header %+v", tc.totLen, h)
		}
		if len(rec.MainData) != tc.mainLen || len(rec.Blocks) != 0 {
			t.Fatalf("totLen %d: main data %d, want %d", tc.totLen, len(rec.MainData), tc.mainLen)
		}
		if tc.headerID != 0 && buf[24] != tc.headerID {
			t.Fatalf("totLen %d: main data header id %d, want %d", tc.totLen, buf[24], tc.headerID)
		}
		if slices.ContainsFunc(rec.MainData, func(b byte) bool { return b != 0 }) || buf[18] != 0 || buf[19] != 0 {
			t.Fatalf("totLen %d: body or padding not zero", tc.totLen)
		}
		body, err := wal.DecodeBody(&rec)
		if err != nil {
			t.Fatal(err)
		}
		if n, ok := body.(*wal.Noop); !ok || n.TotLen != tc.totLen {
			t.Fatalf("totLen %d: body %#v", tc.totLen, body)
		}
	}
	for _, bad := range []uint32{0, 23, 25} {
		if _, err := NoopRecord(nil, bad, 0, 0); err == nil {
			t.Errorf("totLen %d accepted", bad)
		}
	}
}

func TestRecordSpans(t *testing.T) {
	const seg = 1 << 20
	cases := []struct {
		lsn    wal.LSN
		totLen uint32
		want   []Span
	}{
		{0x100028, 50, []Span{{0x100028, 50}}},
		{0x101FF8, 50, []Span{{0x101FF8, 8}, {0x102018, 42}}},  // header crosses into the next page
		{0x1FFFF0, 30, []Span{{0x1FFFF0, 16}, {0x200028, 14}}}, // crosses into the next segment's long header
		{0x100028, 8192 * 3, []Span{{0x100028, 8192 - 40}, {0x102018, 8192 - 24}, {0x104018, 8192 - 24}, {0x106018, 8192*3 - (8192 - 40) - 2*(8192-24)}}},
	}
	for _, c := range cases {
		got, err := RecordSpans(nil, c.lsn, c.totLen, seg)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("RecordSpans(%s, %d) = %v, want %v", c.lsn, c.totLen, got, c.want)
		}
	}
	if _, err := RecordSpans(nil, 0x100028, 10, 12345); err == nil {
		t.Error("invalid segment size accepted")
	}
	if err := Scatter([]byte{1}, 0x100028, 0, func(wal.LSN, []byte) {}); err == nil {
		t.Error("Scatter accepted segment size 0")
	}
}

// synthWAL is a synthetic stretch of WAL of PostgreSQL 15 pages starting at
// a page boundary, for checking rewritten records with the real reader.
type synthWAL struct {
	start   wal.LSN
	segSize uint32
	buf     []byte
}

func newSynthWAL(start wal.LSN, segSize uint32, size int) *synthWAL {
	w := &synthWAL{start: start, segSize: segSize, buf: make([]byte, size)}
	for p := 0; p < size; p += wal.BlockSize {
		lsn := start + wal.LSN(p)
		h := w.buf[p:]
		binary.LittleEndian.PutUint16(h[0:], pg15.Magic)
		binary.LittleEndian.PutUint32(h[4:], 1)
		binary.LittleEndian.PutUint64(h[8:], uint64(lsn))
		if lsn%wal.LSN(segSize) == 0 {
			binary.LittleEndian.PutUint16(h[2:], wal.XLPLongHeader)
			binary.LittleEndian.PutUint64(h[24:], 7000000000000000001)
			binary.LittleEndian.PutUint32(h[32:], segSize)
			binary.LittleEndian.PutUint32(h[36:], wal.BlockSize)
		}
	}
	return w
}

// place scatters a record and sets the continuation headers of the pages it
// runs into, as PostgreSQL's CopyXLogRecordToWAL does.
func (w *synthWAL) place(t testing.TB, lsn wal.LSN, record []byte) {
	spans, err := RecordSpans(nil, lsn, uint32(len(record)), w.segSize)
	if err != nil {
		t.Fatal(err)
	}
	done := uint32(0)
	for i, s := range spans {
		if i > 0 {
			page := int((s.At - w.start) / wal.BlockSize * wal.BlockSize)
			info := binary.LittleEndian.Uint16(w.buf[page+2:])
			binary.LittleEndian.PutUint16(w.buf[page+2:], info|wal.XLPFirstIsContrecord)
			binary.LittleEndian.PutUint32(w.buf[page+16:], uint32(len(record))-done)
		}
		done += s.Len
	}
	if err := Scatter(record, lsn, w.segSize, func(at wal.LSN, b []byte) {
		off := int(at - w.start)
		if (off%wal.BlockSize)+len(b) > wal.BlockSize {
			t.Fatalf("write at %s of %d bytes crosses a page", at, len(b))
		}
		copy(w.buf[off:], b)
	}); err != nil {
		t.Fatal(err)
	}
}

// FuzzNoopScatter rewrites a record of any length at any position (near
// segment ends too) as a NOOP, scatters it into synthetic pages and checks
// that wal.StreamReader reads it back: a NOOP of the same length at the same
// LSN, with xid and prev kept, and the page headers untouched.
func FuzzNoopScatter(f *testing.F) {
	f.Add(uint16(0), uint16(0), uint32(24), uint32(7))
	f.Add(uint16(127), uint16(8150), uint32(60), uint32(0))
	f.Add(uint16(126), uint16(8100), uint32(8241), uint32(1))
	f.Add(uint16(3), uint16(40), uint32(40000), uint32(900))
	f.Add(uint16(127), uint16(8184), uint32(258), uint32(2))
	f.Fuzz(func(t *testing.T, page, inPage uint16, totLen, xid uint32) {
		const segSize = 1 << 20
		const pagesPerSeg = segSize / wal.BlockSize
		totLen = wal.RecordHeaderSize + totLen%(5*wal.BlockSize)
		if totLen == wal.RecordHeaderSize+1 {
			totLen++
		}
		// The stream starts at a page of segment 0x10; records begin after its
		// header, MAXALIGNed, with a filler NOOP in front when needed.
		startPage := wal.LSN(0x10*segSize) + wal.LSN(page%pagesPerSeg)*wal.BlockSize
		first := startPage + pageHeaderLen(startPage, segSize)
		lsn := wal.MaxAlign(startPage + wal.LSN(inPage%wal.BlockSize))
		if lsn < first {
			lsn = first
		}
		if gap := lsn - first; gap > 0 && gap < wal.RecordHeaderSize {
			lsn = first + wal.RecordHeaderSize
		}
		if lsn > startPage+wal.BlockSize-8 { // xl_tot_len must fit on the first page
			lsn = first
		}
		size := int(wal.MaxAlign(lsn-startPage+wal.LSN(totLen)+3*wal.BlockSize)) / wal.BlockSize * wal.BlockSize
		w := newSynthWAL(startPage, segSize, size)
		headers := pageHeaders(w)

		var prev wal.LSN
		if lsn > first {
			filler, err := NoopRecord(nil, uint32(lsn-first), 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			w.place(t, first, filler)
			prev = first
		}
		rec, err := NoopRecord(nil, totLen, xid, prev)
		if err != nil {
			t.Fatal(err)
		}
		w.place(t, lsn, rec)

		// Scatter wrote around the page headers, never over them (only the
		// continuation fields place sets may differ).
		for i, h := range pageHeaders(w) {
			if !bytes.Equal(h[:2], headers[i][:2]) || !bytes.Equal(h[4:16], headers[i][4:16]) || !bytes.Equal(h[20:], headers[i][20:]) {
				t.Fatalf("page header %d overwritten", i)
			}
		}

		r, err := wal.NewStreamReader(startPage, wal.StreamOptions{SegmentSize: segSize})
		if err != nil {
			t.Fatal(err)
		}
		r.Push(w.buf)
		var got *wal.Record
		for {
			got, err = r.Next()
			if err != nil {
				t.Fatalf("record at %s (len %d): %v", lsn, totLen, err)
			}
			if got.LSN == lsn {
				break
			}
			if got.LSN > lsn {
				t.Fatalf("record at %s skipped, next is %s", lsn, got.LSN)
			}
		}
		h := got.Header
		if h.TotLen != totLen || h.RmID != wal.RmgrXLOG || h.Info != wal.XLogNoop || h.XID != xid || h.Prev != prev {
			t.Fatalf("read back %+v at %s, want NOOP of %d bytes, xid %d, prev %s", h, got.LSN, totLen, xid, prev)
		}
		spans, _ := RecordSpans(nil, lsn, totLen, segSize)
		if end := spans[len(spans)-1]; got.End != end.At+wal.LSN(end.Len) {
			t.Fatalf("record ends at %s, spans end at %s", got.End, end.At+wal.LSN(end.Len))
		}
		// Nothing follows: the reader reports the end of WAL, not damage.
		if _, err := r.Next(); err != nil && !errors.Is(err, wal.ErrNeedMore) && !wal.IsKind(err, wal.KindEndOfWAL) {
			t.Fatalf("after the record: %v", err)
		}
	})
}

func pageHeaders(w *synthWAL) [][]byte {
	var out [][]byte
	for p := 0; p < len(w.buf); p += wal.BlockSize {
		out = append(out, append([]byte(nil), w.buf[p:p+wal.ShortPageHeaderLen]...))
	}
	return out
}
