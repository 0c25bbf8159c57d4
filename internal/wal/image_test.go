package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// imageGolden is a record carrying a full-page image, captured from
// PostgreSQL 15.18 with one wal_compression setting, and the live page read
// with pageinspect's get_raw_page right after the record was written (see
// testdata/images/README.md).
//
// The oracle: PostgreSQL takes the image in XLogInsert, after the change is
// applied to the buffer and before PageSetLSN(page, EndRecPtr). Nothing else
// touches these pages between the record and get_raw_page (a private table,
// autovacuum off, no reads that set hint bits in between). So the restored
// image must equal the live page in every byte except pd_lsn (bytes 0..7),
// and the live pd_lsn must be exactly this record's end, which proves the
// live page is the one this record imaged. The same page state is captured
// under off, pglz, lz4 and zstd, so all three decompressors and the
// uncompressed path are held to PostgreSQL's own bytes; and
// TestRestorePageGoldenAgreeAcrossCompression checks the four restorations
// against each other.
type imageGolden struct {
	name     string
	lsn      LSN
	info     uint8 // expected bimg_info
	fork     ForkNumber
	holeOff  uint16 // expected hole (REGBUF_STANDARD: pd_lower..pd_upper)
	holeLen  uint16
	liveLSN  LSN // pd_lsn of the live page: the record's MAXALIGNed end
	storedSz int // bimg_len, as pg_waldump reports it
}

var imageGoldens = []imageGolden{
	// XLOG_HEAP2_VISIBLE from VACUUM: block 0 is the visibility map page,
	// registered without REGBUF_STANDARD, so it has no hole.
	{name: "off_vm", lsn: 0x15990A8, fork: ForkVM, info: BkpImageApply, liveLSN: 0x159B100, storedSz: 8192},
	{name: "pglz_vm", lsn: 0x15ABC20, fork: ForkVM, info: BkpImageApply | BkpImageCompressPGLZ, liveLSN: 0x15ABCD0, storedSz: 8192 - 8080},
	{name: "lz4_vm", lsn: 0x15BCE08, fork: ForkVM, info: BkpImageApply | BkpImageCompressLZ4, liveLSN: 0x15BCE88, storedSz: 8192 - 8132},
	{name: "zstd_vm", lsn: 0x15CA018, fork: ForkVM, info: BkpImageApply | BkpImageCompressZstd, liveLSN: 0x15CA080, storedSz: 8192 - 8158},
	// XLOG_HEAP_HOT_UPDATE after CHECKPOINT: block 0 is the heap page, with
	// the hole between pd_lower 188 and pd_upper 4432.
	{name: "off_heap", lsn: 0x159CFE0, fork: ForkMain, info: BkpImageApply | BkpImageHasHole, holeOff: 188, holeLen: 4244, liveLSN: 0x159DF90, storedSz: 8192 - 4244},
	{name: "pglz_heap", lsn: 0x15AC258, fork: ForkMain, info: BkpImageApply | BkpImageHasHole | BkpImageCompressPGLZ, holeOff: 188, holeLen: 4244, liveLSN: 0x15AC630, storedSz: 8192 - 4244 - 3034},
	{name: "lz4_heap", lsn: 0x15BD688, fork: ForkMain, info: BkpImageApply | BkpImageHasHole | BkpImageCompressLZ4, holeOff: 188, holeLen: 4244, liveLSN: 0x15BDA90, storedSz: 8192 - 4244 - 2983},
	{name: "zstd_heap", lsn: 0x15CAC58, fork: ForkMain, info: BkpImageApply | BkpImageHasHole | BkpImageCompressZstd, holeOff: 188, holeLen: 4244, liveLSN: 0x15CAF38, storedSz: 8192 - 4244 - 3280},
}

// recordEnd is where a record of totLen bytes starting at lsn ends, counting
// the short page headers it crosses (none of these records crosses a segment).
func recordEnd(lsn LSN, totLen int) LSN {
	pos := lsn
	for totLen > 0 {
		if pos%BlockSize == 0 {
			pos += ShortPageHeaderLen
		}
		n := min(totLen, int(BlockSize-pos%BlockSize))
		pos += LSN(n)
		totLen -= n
	}
	return pos
}

// loadImageGolden decodes the golden record (checking its CRC) and returns it
// with the live page.
func loadImageGolden(t testing.TB, g imageGolden) (*Record, []byte) {
	t.Helper()
	raw, err := os.ReadFile("testdata/images/" + g.name + ".rec")
	if err != nil {
		t.Fatal(err)
	}
	live, err := os.ReadFile("testdata/images/" + g.name + ".page")
	if err != nil {
		t.Fatal(err)
	}
	if len(live) != BlockSize {
		t.Fatalf("%s: live page has %d bytes", g.name, len(live))
	}
	layout, err := LayoutForMajor(15)
	if err != nil {
		t.Fatal(err)
	}
	rec := new(Record)
	if err := DecodeRecord(raw, g.lsn, layout, rec); err != nil {
		t.Fatalf("%s: %v", g.name, err)
	}
	return rec, live
}

func TestRestorePageGolden(t *testing.T) {
	for _, g := range imageGoldens {
		t.Run(g.name, func(t *testing.T) {
			rec, live := loadImageGolden(t, g)
			b := rec.Block(0)
			if b == nil || !b.HasImage() {
				t.Fatal("block 0 has no image")
			}
			if b.Fork() != g.fork || b.Image.Info != g.info || b.Image.HoleOffset != g.holeOff || b.Image.HoleLength != g.holeLen || len(b.ImageData) != g.storedSz {
				t.Fatalf("image header: fork %s info 0x%02X hole %d+%d stored %d; want fork %s info 0x%02X hole %d+%d stored %d",
					b.Fork(), b.Image.Info, b.Image.HoleOffset, b.Image.HoleLength, len(b.ImageData),
					g.fork, g.info, g.holeOff, g.holeLen, g.storedSz)
			}

			// The live page is the one this record imaged: PostgreSQL stamped
			// it with the record's end.
			livePDLSN := LSN(binary.LittleEndian.Uint32(live[0:]))<<32 | LSN(binary.LittleEndian.Uint32(live[4:]))
			if end := MaxAlign(recordEnd(g.lsn, len(rec.Raw))); livePDLSN != end || livePDLSN != g.liveLSN {
				t.Fatalf("live pd_lsn %s, record end %s, table says %s", livePDLSN, end, g.liveLSN)
			}

			page, err := rec.RestoreBlockImage(0, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(page) != BlockSize {
				t.Fatalf("restored %d bytes", len(page))
			}
			if i := firstDiff(page[8:], live[8:]); i != BlockSize-8 {
				t.Fatalf("restored page differs from the live page at byte %d: %#x vs %#x", 8+i, page[8+i], live[8+i])
			}
			// The image keeps the page's previous LSN, from before the record.
			imgPDLSN := LSN(binary.LittleEndian.Uint32(page[0:]))<<32 | LSN(binary.LittleEndian.Uint32(page[4:]))
			if imgPDLSN == 0 && g.fork == ForkMain || imgPDLSN >= g.lsn {
				t.Fatalf("image pd_lsn %s, want a nonzero LSN before the record at %s", imgPDLSN, g.lsn)
			}
			if g.holeLen > 0 {
				pdLower := binary.LittleEndian.Uint16(page[12:])
				pdUpper := binary.LittleEndian.Uint16(page[14:])
				if pdLower != g.holeOff || pdUpper != g.holeOff+g.holeLen {
					t.Fatalf("hole %d+%d, page has pd_lower %d pd_upper %d", g.holeOff, g.holeLen, pdLower, pdUpper)
				}
			}

			// Reusing storage gives the same page, without allocating.
			dst := bytes.Repeat([]byte{0xEE}, BlockSize)
			again, err := b.RestorePage(dst[:0])
			if err != nil || &again[0] != &dst[0] || !bytes.Equal(again, page) {
				t.Fatalf("restore into dirty dst: err %v, reused %v, equal %v", err, err == nil && &again[0] == &dst[0], bytes.Equal(again, page))
			}
			allocs := testing.AllocsPerRun(20, func() {
				if _, err := b.RestorePage(dst); err != nil {
					t.Fatal(err)
				}
			})
			maxAllocs := 0.0
			if g.info&BkpImageCompressZstd != 0 {
				// zstd's decoder keeps scratch in sync.Pools, which may
				// refill after a GC and always do under -race.
				maxAllocs = 4
			}
			if allocs > maxAllocs {
				t.Fatalf("%v allocations per restore into a page-sized dst, want <= %v", allocs, maxAllocs)
			}
		})
	}
}

// A second oracle, independent of the live pages: each setting wrote the
// same table content, so the four restorations of each page must agree
// except where PostgreSQL put per-table values: pd_lsn, pd_prune_xid and the
// tuples' t_xmin/t_xmax (the tables were filled by different transactions).
func TestRestorePageGoldenAgreeAcrossCompression(t *testing.T) {
	masked := map[ForkNumber][]byte{}
	for _, g := range imageGoldens {
		rec, _ := loadImageGolden(t, g)
		page, err := rec.RestoreBlockImage(0, nil)
		if err != nil {
			t.Fatal(err)
		}
		clear(page[0:8]) // pd_lsn
		if g.fork == ForkMain {
			clear(page[20:24]) // pd_prune_xid
			lower := int(binary.LittleEndian.Uint16(page[12:]))
			for lp := 24; lp+4 <= lower; lp += 4 {
				id := binary.LittleEndian.Uint32(page[lp:])
				off, flags := int(id&0x7fff), id>>15&3
				if flags == 1 && off+8 <= BlockSize { // LP_NORMAL: a tuple header at off
					clear(page[off : off+8]) // t_xmin, t_xmax
				}
			}
		}
		if first, ok := masked[g.fork]; !ok {
			masked[g.fork] = page
		} else if i := firstDiff(first, page); i != BlockSize {
			t.Fatalf("%s: restored page differs from the %s image restored without compression at byte %d", g.name, g.fork, i)
		}
	}
	if len(masked) != 2 {
		t.Fatalf("compared %d forks, want main and vm", len(masked))
	}
}

func TestRestorePageConcurrent(t *testing.T) {
	type job struct {
		b    *BlockRef
		want []byte
	}
	var jobs []job
	for _, g := range imageGoldens {
		rec, live := loadImageGolden(t, g)
		want := append([]byte(nil), live...)
		page, err := rec.RestoreBlockImage(0, nil)
		if err != nil {
			t.Fatal(err)
		}
		copy(want[:8], page[:8])
		jobs = append(jobs, job{rec.Block(0), want})
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			dst := make([]byte, BlockSize)
			for i := range 50 {
				j := jobs[(w+i)%len(jobs)]
				page, err := j.b.RestorePage(dst)
				if err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(page, j.want) {
					errs <- errors.New("concurrent restore produced a different page")
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// testPage is a deterministic page with a standard-looking header whose
// pd_lower..pd_upper range is zero, like a heap page.
func testPage(holeOff, holeLen int) []byte {
	p := make([]byte, BlockSize)
	for i := range p {
		p[i] = byte(i*7 + i/251)
	}
	clear(p[holeOff : holeOff+holeLen])
	return p
}

// imageBlock builds a BlockRef holding page compressed with method (0 for
// none, else a BkpImageCompress* bit), with the hole cut out.
func imageBlock(t testing.TB, page []byte, holeOff, holeLen int, method uint8) *BlockRef {
	t.Helper()
	body := append(append([]byte(nil), page[:holeOff]...), page[holeOff+holeLen:]...)
	var stored []byte
	switch method {
	case 0:
		stored = body
	case BkpImageCompressPGLZ:
		stored = pglzCompressForTest(body)
	case BkpImageCompressLZ4:
		buf := make([]byte, lz4.CompressBlockBound(len(body)))
		n, err := lz4.CompressBlock(body, buf, nil)
		if err != nil || n == 0 {
			t.Fatalf("lz4: n %d err %v", n, err)
		}
		stored = buf[:n]
	case BkpImageCompressZstd:
		enc, err := zstd.NewWriter(nil)
		if err != nil {
			t.Fatal(err)
		}
		stored = enc.EncodeAll(body, nil)
	}
	info := BkpImageApply | method
	if holeLen > 0 {
		info |= BkpImageHasHole
	}
	return &BlockRef{
		ID:        5,
		ForkFlags: BkpBlockHasImage,
		Image:     BlockImage{Length: uint16(len(stored)), HoleOffset: uint16(holeOff), HoleLength: uint16(holeLen), Info: info},
		ImageData: stored,
	}
}

var imageMethods = map[string]uint8{"none": 0, "pglz": BkpImageCompressPGLZ, "lz4": BkpImageCompressLZ4, "zstd": BkpImageCompressZstd}

func TestRestorePageSynthetic(t *testing.T) {
	holes := [][2]int{{0, 0}, {24, 100}, {200, 4000}, {8000, 192}, {1, 8191}}
	for name, method := range imageMethods {
		for _, h := range holes {
			page := testPage(h[0], h[1])
			b := imageBlock(t, page, h[0], h[1], method)
			got, err := b.RestorePage(nil)
			if err != nil {
				t.Fatalf("%s hole %v: %v", name, h, err)
			}
			if !bytes.Equal(got, page) {
				t.Fatalf("%s hole %v: restored page differs at %d", name, h, firstDiff(got, page))
			}
		}
	}
}

func TestRestorePageErrors(t *testing.T) {
	page := testPage(100, 1000)
	fresh := func(method uint8) *BlockRef { return imageBlock(t, page, 100, 1000, method) }
	tests := []struct {
		name    string
		block   func() *BlockRef
		kind    ErrorKind
		wantMsg string
	}{
		{"no image", func() *BlockRef { b := fresh(0); b.ForkFlags = 0; return b }, KindCorrupt, "block 5 has no image"},
		{"unknown method bit", func() *BlockRef { b := fresh(0); b.Image.Info |= 0x20; return b }, KindUnsupported, "bits 0x20 unknown"},
		{"hole past the page", func() *BlockRef { b := fresh(0); b.Image.HoleOffset = 7500; return b }, KindCorrupt, "hole 7500+1000 exceeds the page"},
		{"length disagrees with bytes", func() *BlockRef { b := fresh(BkpImageCompressLZ4); b.Image.Length--; return b }, KindCorrupt, "image bytes, header says"},
		{"uncompressed wrong size", func() *BlockRef { b := fresh(0); b.Image.HoleLength = 999; return b }, KindCorrupt, "uncompressed image is 7192 bytes, want 7193"},
		{"pglz wrong hole", func() *BlockRef { b := fresh(BkpImageCompressPGLZ); b.Image.HoleLength = 999; return b }, KindCorrupt, "could not decompress pglz image"},
		{"pglz truncated", func() *BlockRef {
			b := fresh(BkpImageCompressPGLZ)
			b.ImageData = b.ImageData[:len(b.ImageData)-3]
			b.Image.Length -= 3
			return b
		}, KindCorrupt, "block 5: could not decompress pglz"},
		{"lz4 wrong hole, output short", func() *BlockRef { b := fresh(BkpImageCompressLZ4); b.Image.HoleLength = 999; return b }, KindCorrupt, "could not decompress LZ4 image"},
		{"lz4 wrong hole, output long", func() *BlockRef { b := fresh(BkpImageCompressLZ4); b.Image.HoleLength = 1001; return b }, KindCorrupt, "could not decompress LZ4 image"},
		{"lz4 garbage", func() *BlockRef {
			b := fresh(BkpImageCompressLZ4)
			b.ImageData = []byte{0xF0, 1, 2}
			b.Image.Length = 3
			return b
		}, KindCorrupt, "LZ4"},
		{"zstd wrong hole, output short", func() *BlockRef { b := fresh(BkpImageCompressZstd); b.Image.HoleLength = 999; return b }, KindCorrupt, "could not decompress zstd image of"},
		{"zstd wrong hole, output long", func() *BlockRef { b := fresh(BkpImageCompressZstd); b.Image.HoleLength = 1001; return b }, KindCorrupt, "could not decompress zstd image of"},
		{"zstd not a frame", func() *BlockRef {
			b := fresh(BkpImageCompressZstd)
			b.ImageData = []byte("not zstd")
			b.Image.Length = 8
			return b
		}, KindCorrupt, "zstd"},
		{"zstd empty", func() *BlockRef { b := fresh(BkpImageCompressZstd); b.ImageData = nil; b.Image.Length = 0; return b }, KindCorrupt, "got 0 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			page, err := tt.block().RestorePage(nil)
			var werr *Error
			if !errors.As(err, &werr) {
				t.Fatalf("err = %v (%T), want *Error; page %d bytes", err, err, len(page))
			}
			if werr.Kind != tt.kind || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("err = %q (kind %s), want kind %s containing %q", err, werr.Kind, tt.kind, tt.wantMsg)
			}
			if page != nil {
				t.Fatal("a page came back with the error")
			}
		})
	}
}

func TestRestoreBlockImageLSN(t *testing.T) {
	g := imageGoldens[1]
	rec, _ := loadImageGolden(t, g)
	if _, err := rec.RestoreBlockImage(7, nil); !IsKind(err, KindCorrupt) || !strings.Contains(err.Error(), "no block 7") {
		t.Fatalf("missing block: err = %v", err)
	}
	// Damage the stored image (it aliases rec.Raw, a private copy here).
	b := rec.Block(0)
	b.ImageData[len(b.ImageData)-1] ^= 0xFF
	b.ImageData = b.ImageData[:len(b.ImageData)-1]
	b.Image.Length--
	_, err := rec.RestoreBlockImage(0, nil)
	var werr *Error
	if !errors.As(err, &werr) || werr.LSN != g.lsn || !strings.Contains(err.Error(), "block 0") {
		t.Fatalf("err = %v, want an *Error at %s naming block 0", err, g.lsn)
	}
	if !errors.As(werr.Err, new(*Error)) {
		t.Fatalf("cause %v: want the pglz *Error kept as the cause", werr.Err)
	}
}

func FuzzRestorePage(f *testing.F) {
	for _, g := range imageGoldens {
		rec, _ := loadImageGolden(f, g)
		b := rec.Block(0)
		f.Add(b.Image.Info, b.Image.HoleOffset, b.Image.HoleLength, false, uint16(0), b.ImageData)
	}
	f.Add(uint8(BkpImageCompressPGLZ|BkpImageHasHole), uint16(10), uint16(8000), true, uint16(5), []byte("\x02a\x0f\x01\xff"))
	f.Fuzz(func(t *testing.T, info uint8, holeOff, holeLen uint16, setLength bool, length uint16, data []byte) {
		b := &BlockRef{
			ID:        1,
			ForkFlags: BkpBlockHasImage,
			Image:     BlockImage{Length: uint16(len(data)), HoleOffset: holeOff, HoleLength: holeLen, Info: info},
			ImageData: data,
		}
		if setLength {
			b.Image.Length = length
		}
		page, err := b.RestorePage(nil)
		if err != nil {
			var werr *Error
			if !errors.As(err, &werr) {
				t.Fatalf("error %v is %T, want *Error", err, err)
			}
			return
		}
		if len(page) != BlockSize {
			t.Fatalf("restored %d bytes, want %d", len(page), BlockSize)
		}
		for i := int(holeOff); i < int(holeOff)+int(holeLen); i++ {
			if page[i] != 0 {
				t.Fatalf("hole byte %d is %#x", i, page[i])
			}
		}
		again, err := b.RestorePage(bytes.Repeat([]byte{0x77}, BlockSize))
		if err != nil || !bytes.Equal(again, page) {
			t.Fatalf("restore into reused storage: err %v, equal %v", err, bytes.Equal(again, page))
		}
	})
}

func BenchmarkRestorePage(b *testing.B) {
	for _, g := range imageGoldens {
		b.Run(g.name, func(b *testing.B) {
			rec, _ := loadImageGolden(b, g)
			blk := rec.Block(0)
			dst := make([]byte, BlockSize)
			b.SetBytes(BlockSize)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := blk.RestorePage(dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
