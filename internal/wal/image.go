package wal

import (
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// bkpImageKnownMask holds every bimg_info bit PostgreSQL 15–18 define. A
// set bit outside it would be a compression method (or feature) of a later
// release, which this build cannot restore.
const bkpImageKnownMask = BkpImageHasHole | BkpImageApply | bkpImageCompressAnyMask

// zstdSlack is spare output capacity that lets the zstd decoder copy in
// 16-byte blocks instead of its slower bounds-exact path.
const zstdSlack = 16

// zstdImageDecoder is shared by every restore: a zstd.Decoder is heavy, and
// DecodeAll may be called concurrently (with concurrency 1 the callers take
// turns on one decoder). Output is capped at the destination's capacity and
// frames at one page (PostgreSQL compresses a single page with ZSTD_compress,
// which writes the content size), so a hostile frame cannot make it allocate.
var zstdImageDecoder = sync.OnceValues(func() (*zstd.Decoder, error) {
	return zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxMemory(BlockSize),
		zstd.WithDecodeAllCapLimit(true))
})

// RestorePage rebuilds the 8192-byte page held by the block's full-page
// image, as RestoreBlockImage does in PostgreSQL: it decompresses the stored
// bytes (pglz, LZ4 or zstd, per bimg_info) to exactly 8192 - hole_length
// bytes and puts the zeroed hole back at hole_offset.
//
// The page is written into dst's storage when cap(dst) >= 8192 (dst's
// contents are ignored), otherwise into a new slice; the returned slice is
// the page. No allocation happens when dst has room. zstd images decode
// faster when the page has 16 bytes of spare capacity (a hole of 16+ bytes,
// or cap(dst) >= 8192+16); that spare storage is scratch.
//
// Errors are *Error naming the block id: KindCorrupt for damaged images,
// KindUnsupported for bimg_info bits this build does not know. A BlockRef
// does not know its record, so Error.LSN is zero; Record.RestoreBlockImage
// fills it in.
func (b *BlockRef) RestorePage(dst []byte) ([]byte, error) {
	return b.restorePage(0, dst)
}

// RestoreBlockImage is RestorePage for the block with the given id, with
// errors naming the record's LSN.
func (r *Record) RestoreBlockImage(id uint8, dst []byte) ([]byte, error) {
	b := r.Block(id)
	if b == nil {
		return nil, errorf(r.LSN, KindCorrupt, "restore image: record has no block %d", id)
	}
	return b.restorePage(r.LSN, dst)
}

func (b *BlockRef) restorePage(lsn LSN, dst []byte) ([]byte, error) {
	im := b.Image
	if !b.HasImage() {
		return nil, errorf(lsn, KindCorrupt, "restore image: block %d has no image", b.ID)
	}
	if unknown := im.Info &^ bkpImageKnownMask; unknown != 0 {
		return nil, errorf(lsn, KindUnsupported, "restore image: block %d: bimg_info 0x%02X has bits 0x%02X unknown to PostgreSQL 15–18 (a newer compression method?)", b.ID, im.Info, unknown)
	}
	holeOff, holeLen := int(im.HoleOffset), int(im.HoleLength)
	if holeOff+holeLen > BlockSize {
		return nil, errorf(lsn, KindCorrupt, "restore image: block %d: hole %d+%d exceeds the page", b.ID, holeOff, holeLen)
	}
	if len(b.ImageData) != int(im.Length) {
		return nil, errorf(lsn, KindCorrupt, "restore image: block %d: %d image bytes, header says %d", b.ID, len(b.ImageData), im.Length)
	}
	var page []byte
	if cap(dst) >= BlockSize {
		page = dst[:BlockSize]
	} else {
		page = make([]byte, BlockSize, BlockSize+zstdSlack)
	}
	want := BlockSize - holeLen

	if !im.Compressed() {
		if len(b.ImageData) != want {
			return nil, errorf(lsn, KindCorrupt, "restore image: block %d: uncompressed image is %d bytes, want %d (8192 - hole %d)", b.ID, len(b.ImageData), want, holeLen)
		}
		// Copy straight to the final places around the hole.
		copy(page[:holeOff], b.ImageData[:holeOff])
		clear(page[holeOff : holeOff+holeLen])
		copy(page[holeOff+holeLen:], b.ImageData[holeOff:])
		return page, nil
	}

	// Decompress into the front of the page, then open the hole. The method
	// bits are tried in PostgreSQL's order.
	body := page[:want:want]
	switch {
	case im.Info&BkpImageCompressPGLZ != 0:
		if _, err := PGLZDecompress(body[:0], b.ImageData, want, true); err != nil {
			return nil, &Error{LSN: lsn, Kind: KindCorrupt, Msg: restoreMsg(b.ID, "pglz", len(b.ImageData), want), Err: err}
		}
	case im.Info&BkpImageCompressLZ4 != 0:
		n, err := lz4.UncompressBlock(b.ImageData, body)
		if err != nil {
			return nil, &Error{LSN: lsn, Kind: KindCorrupt, Msg: restoreMsg(b.ID, "LZ4", len(b.ImageData), want), Err: err}
		}
		if n != want {
			return nil, errorf(lsn, KindCorrupt, "%s: got %d bytes", restoreMsg(b.ID, "LZ4", len(b.ImageData), want), n)
		}
	default: // zstd
		dec, err := zstdImageDecoder()
		if err != nil {
			return nil, &Error{LSN: lsn, Kind: KindUnsupported, Msg: restoreMsg(b.ID, "zstd", len(b.ImageData), want) + ": no decoder", Err: err}
		}
		out, err := dec.DecodeAll(b.ImageData, page[:0:min(want+zstdSlack, cap(page))])
		if err != nil {
			return nil, &Error{LSN: lsn, Kind: KindCorrupt, Msg: restoreMsg(b.ID, "zstd", len(b.ImageData), want), Err: err}
		}
		if len(out) != want {
			return nil, errorf(lsn, KindCorrupt, "%s: got %d bytes", restoreMsg(b.ID, "zstd", len(b.ImageData), want), len(out))
		}
		if want > 0 && &out[0] != &page[0] {
			copy(body, out) // the cap limit should prevent this; stay correct regardless
		}
	}
	if holeLen > 0 {
		copy(page[holeOff+holeLen:], page[holeOff:want])
		clear(page[holeOff : holeOff+holeLen])
	}
	return page, nil
}

func restoreMsg(id uint8, method string, stored, want int) string {
	return fmt.Sprintf("restore image: block %d: could not decompress %s image of %d bytes to %d", id, method, stored, want)
}
