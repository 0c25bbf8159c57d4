package wal

import "encoding/binary"

// xlp_info bits (xlog_internal.h). Bit 0x0004 is XLP_BKP_REMOVABLE in
// 15–18 and is accepted as set on ordinary pages.
const (
	XLPFirstIsContrecord = 0x0001
	XLPLongHeader        = 0x0002
	XLPBkpRemovable      = 0x0004
)

// PageHeader is XLogPageHeaderData, extended with the XLogLongPageHeaderData
// fields when Long is set (the first page of every segment).
type PageHeader struct {
	Magic    uint16
	Info     uint16
	TLI      uint32
	PageAddr LSN
	RemLen   uint32
	// Long header fields.
	SysID     uint64
	SegSize   uint32
	BlockSize uint32
}

// Long reports whether the page carries the long header.
func (h *PageHeader) Long() bool { return h.Info&XLPLongHeader != 0 }

// Len is the header's size on the page.
func (h *PageHeader) Len() int {
	if h.Long() {
		return LongPageHeaderLen
	}
	return ShortPageHeaderLen
}

// IsContrecord reports whether the page starts with the continuation of a
// record begun on an earlier page.
func (h *PageHeader) IsContrecord() bool { return h.Info&XLPFirstIsContrecord != 0 }

// DecodePageHeader reads a page header from src, which must hold at least the
// short header, and the long one when XLP_LONG_HEADER is set. It checks only
// that enough bytes are present; ValidatePageHeader checks meaning.
func DecodePageHeader(src []byte) (PageHeader, bool) {
	if len(src) < ShortPageHeaderLen {
		return PageHeader{}, false
	}
	h := PageHeader{
		Magic:    binary.LittleEndian.Uint16(src[0:]),
		Info:     binary.LittleEndian.Uint16(src[2:]),
		TLI:      binary.LittleEndian.Uint32(src[4:]),
		PageAddr: LSN(binary.LittleEndian.Uint64(src[8:])),
		RemLen:   binary.LittleEndian.Uint32(src[16:]),
	}
	if h.Long() {
		if len(src) < LongPageHeaderLen {
			return PageHeader{}, false
		}
		h.SysID = binary.LittleEndian.Uint64(src[24:])
		h.SegSize = binary.LittleEndian.Uint32(src[32:])
		h.BlockSize = binary.LittleEndian.Uint32(src[36:])
	}
	return h, true
}

// ValidSegmentSize reports whether n is a segment size PostgreSQL allows:
// a power of two from 1 MiB to 1 GiB.
func ValidSegmentSize(n uint32) bool {
	return n >= 1<<20 && n <= 1<<30 && n&(n-1) == 0
}

// isZero reports whether every byte of b is zero.
func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
