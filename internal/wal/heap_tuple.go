package wal

import "encoding/binary"

// t_infomask and t_infomask2 bits (src/include/access/htup_details.h).
const (
	HeapHasNull        = 0x0001
	HeapHasVarWidth    = 0x0002
	HeapHasExternal    = 0x0004
	HeapHasOIDOld      = 0x0008
	HeapXmaxKeyshrLock = 0x0010
	HeapComboCID       = 0x0020
	HeapXmaxExclLock   = 0x0040
	HeapXmaxLockOnly   = 0x0080
	HeapXminCommitted  = 0x0100
	HeapXminInvalid    = 0x0200
	HeapXmaxCommitted  = 0x0400
	HeapXmaxInvalid    = 0x0800
	HeapXmaxIsMulti    = 0x1000
	HeapUpdated        = 0x2000
	HeapMovedOff       = 0x4000
	HeapMovedIn        = 0x8000

	HeapNattsMask   = 0x07FF // infomask2
	HeapKeysUpdated = 0x2000 // infomask2
	HeapHotUpdated  = 0x4000 // infomask2
	HeapOnlyTuple   = 0x8000 // infomask2
)

// HeapTupleHeader is xl_heap_header: the three HeapTupleHeaderData fields
// WAL stores for a logged tuple. The other 18 bytes of the on-page header
// (xmin, xmax, cid, ctid) are rebuilt by redo from the record.
type HeapTupleHeader struct {
	Infomask2 uint16
	Infomask  uint16
	Hoff      uint8 // offset of user data from the start of the on-page tuple
}

// Decode reads the 5-byte xl_heap_header at the start of src. With no record
// at hand the error carries LSN 0.
func (dst *HeapTupleHeader) Decode(src []byte) error {
	if len(src) < sizeOfHeapHeader {
		return errorf(0, KindCorrupt, "xl_heap_header: %d bytes, want %d", len(src), sizeOfHeapHeader)
	}
	dst.decode(src)
	return nil
}

func (dst *HeapTupleHeader) decode(src []byte) {
	dst.Infomask2 = binary.LittleEndian.Uint16(src[0:])
	dst.Infomask = binary.LittleEndian.Uint16(src[2:])
	dst.Hoff = src[4]
}

// Natts is the number of attributes the writer stored; later columns come
// from the catalog's missing values or are NULL.
func (src HeapTupleHeader) Natts() int { return int(src.Infomask2 & HeapNattsMask) }

// HasNulls reports whether a null bitmap is present.
func (src HeapTupleHeader) HasNulls() bool { return src.Infomask&HeapHasNull != 0 }

// HasVarWidth reports whether any attribute is variable-width.
func (src HeapTupleHeader) HasVarWidth() bool { return src.Infomask&HeapHasVarWidth != 0 }

// HasExternal reports whether any attribute is a TOAST pointer.
func (src HeapTupleHeader) HasExternal() bool { return src.Infomask&HeapHasExternal != 0 }

// KeysUpdated reports HEAP_KEYS_UPDATED.
func (src HeapTupleHeader) KeysUpdated() bool { return src.Infomask2&HeapKeysUpdated != 0 }

// HotUpdated reports HEAP_HOT_UPDATED.
func (src HeapTupleHeader) HotUpdated() bool { return src.Infomask2&HeapHotUpdated != 0 }

// HeapOnly reports HEAP_ONLY_TUPLE (the new version of a HOT update).
func (src HeapTupleHeader) HeapOnly() bool { return src.Infomask2&HeapOnlyTuple != 0 }

// BitmapLen is the null bitmap's length in bytes (BITMAPLEN), 0 without nulls.
func (src HeapTupleHeader) BitmapLen() int {
	if !src.HasNulls() {
		return 0
	}
	return (src.Natts() + 7) / 8
}

// HeapTuple is a tuple as WAL carries it: xl_heap_header plus the bytes from
// offset 23 (SizeofHeapTupleHeader) of the on-page tuple: null bitmap,
// padding, then user data at Data[Hoff-23:]. Data aliases the record.
type HeapTuple struct {
	Header HeapTupleHeader
	Data   []byte
}

// Decode parses an xl_heap_header followed by tuple bytes, all of src. With
// no record at hand the error carries LSN 0.
func (dst *HeapTuple) Decode(src []byte) error {
	return dst.decode(0, "heap tuple", src)
}

// decode parses src into dst and checks that t_hoff and the null bitmap fit,
// so UserData and Bitmap never slice out of range.
func (dst *HeapTuple) decode(lsn LSN, what string, src []byte) error {
	if len(src) < sizeOfHeapHeader {
		return errorf(lsn, KindCorrupt, "%s: %d bytes, want >= %d for xl_heap_header", what, len(src), sizeOfHeapHeader)
	}
	dst.Header.decode(src)
	dst.Data = src[sizeOfHeapHeader:]
	return dst.check(lsn, what)
}

func (src *HeapTuple) check(lsn LSN, what string) error {
	h := src.Header
	if h.Hoff < sizeofHeapTupleHeaderData {
		return errorf(lsn, KindCorrupt, "%s: t_hoff %d < %d", what, h.Hoff, sizeofHeapTupleHeaderData)
	}
	pre := int(h.Hoff) - sizeofHeapTupleHeaderData
	if pre > len(src.Data) {
		return errorf(lsn, KindCorrupt, "%s: t_hoff %d past %d stored tuple bytes", what, h.Hoff, len(src.Data)+sizeofHeapTupleHeaderData)
	}
	if n := h.BitmapLen(); n > pre {
		return errorf(lsn, KindCorrupt, "%s: null bitmap of %d attributes needs %d bytes, t_hoff %d leaves %d", what, h.Natts(), n, h.Hoff, pre)
	}
	return nil
}

// Bitmap returns the null bitmap (bit set = not null), nil without nulls.
func (src *HeapTuple) Bitmap() []byte {
	n := src.Header.BitmapLen()
	if n == 0 || n > len(src.Data) {
		return nil
	}
	return src.Data[:n:n]
}

// UserData returns the attribute bytes, which start at t_hoff on the page.
// Attribute offsets and alignment are relative to its start.
func (src *HeapTuple) UserData() []byte {
	pre := int(src.Header.Hoff) - sizeofHeapTupleHeaderData
	if pre < 0 || pre > len(src.Data) {
		return nil
	}
	return src.Data[pre:]
}

// IsNull reports whether attribute i (0-based) is NULL according to the
// bitmap. Attributes at or past Natts are not stored: the caller resolves
// them from the catalog (missing value or NULL), so IsNull reports false.
func (src *HeapTuple) IsNull(i int) bool {
	if i < 0 || i >= src.Header.Natts() || !src.Header.HasNulls() {
		return false
	}
	bm := src.Bitmap()
	if i>>3 >= len(bm) {
		return false // a hand-built tuple with a short bitmap; decoded ones are checked
	}
	return bm[i>>3]&(1<<(i&7)) == 0
}
