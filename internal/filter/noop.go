package filter

import (
	"encoding/binary"
	"fmt"

	"github.com/walshadow/walshadow/internal/wal"
)

// Main-data header sizes (xlogrecord.h): XLR_BLOCK_ID_DATA_SHORT + u8 length,
// XLR_BLOCK_ID_DATA_LONG + u32 length.
const (
	shortDataHeaderLen = 2
	longDataHeaderLen  = 5
	// maxShortBody is the largest body a short main-data header can describe:
	// the header itself plus 255 bytes of data.
	maxShortBody = shortDataHeaderLen + 255
)

// NoopRecord builds, in dst's storage when it is large enough, the contiguous
// bytes of an XLOG_NOOP record of exactly totLen bytes that stands in for a
// user-data record on the shadow:
//
//   - the header keeps xl_tot_len, xl_xid and xl_prev, so the shadow's LSNs,
//     xl_prev chain and view of running transactions equal the source's;
//   - rmid XLOG, info XLOG_NOOP (0x20), padding zero;
//   - the body is one main-data block of zeros: a short header (255, u8)
//     when the body has at most 257 bytes, a long one (254, u32) otherwise;
//   - xl_crc is CRC-32C over the body and then the header up to xl_crc, as
//     ValidXLogRecord checks it.
//
// A body of 0 bytes (totLen 24) is a bare header, which DecodeXLogRecord
// accepts. No valid record has totLen 25 (a body byte is always followed by
// more), and none is shorter than its header: both are errors.
func NoopRecord(dst []byte, totLen uint32, xid uint32, prev wal.LSN) ([]byte, error) {
	if totLen < wal.RecordHeaderSize || totLen == wal.RecordHeaderSize+1 {
		return dst[:0], fmt.Errorf("filter: no XLOG_NOOP record can be %d bytes long", totLen)
	}
	n := int(totLen)
	if cap(dst) < n {
		dst = make([]byte, n)
	} else {
		dst = dst[:n]
		clear(dst)
	}
	binary.LittleEndian.PutUint32(dst[0:], totLen)
	binary.LittleEndian.PutUint32(dst[4:], xid)
	binary.LittleEndian.PutUint64(dst[8:], uint64(prev))
	dst[16] = wal.XLogNoop
	dst[17] = byte(wal.RmgrXLOG)
	switch body := totLen - wal.RecordHeaderSize; {
	case body == 0:
	case body <= maxShortBody:
		dst[24] = wal.XLRBlockIDDataShort
		dst[25] = byte(body - shortDataHeaderLen)
	default:
		dst[24] = wal.XLRBlockIDDataLong
		binary.LittleEndian.PutUint32(dst[25:], body-longDataHeaderLen)
	}
	binary.LittleEndian.PutUint32(dst[20:], wal.RecordCRC(dst))
	return dst, nil
}

// Span is a run of a record's bytes that lies within one WAL page.
type Span struct {
	At  wal.LSN
	Len uint32
}

// pageHeaderLen is the size of the page header at pos, a page boundary: the
// long form on a segment's first page.
func pageHeaderLen(pos wal.LSN, segSize uint32) wal.LSN {
	if pos%wal.LSN(segSize) == 0 {
		return wal.LongPageHeaderLen
	}
	return wal.ShortPageHeaderLen
}

func checkSegSize(segSize uint32) error {
	if !wal.ValidSegmentSize(segSize) {
		return fmt.Errorf("filter: invalid WAL segment size %d", segSize)
	}
	return nil
}

// RecordSpans appends to dst the byte ranges a record of totLen bytes that
// starts at lsn occupies in the WAL, skipping the page headers it crosses
// (24 bytes, 40 on the first page of a segment), and returns dst. A record
// that crosses a segment boundary has spans in both segments.
func RecordSpans(dst []Span, lsn wal.LSN, totLen uint32, segSize uint32) ([]Span, error) {
	if err := checkSegSize(segSize); err != nil {
		return dst, err
	}
	pos, rest := lsn, totLen
	for rest > 0 {
		if pos%wal.BlockSize == 0 {
			pos += pageHeaderLen(pos, segSize)
		}
		n := min(rest, uint32(wal.BlockSize-pos%wal.BlockSize))
		dst = append(dst, Span{At: pos, Len: n})
		pos += wal.LSN(n)
		rest -= n
	}
	return dst, nil
}

// Scatter writes record, the contiguous bytes of a record that starts at lsn
// (as NoopRecord builds them), back over the record's original byte ranges:
// write is called once per page the record touches, with the LSN of the first
// byte and bytes that never cross a page (hence never a segment) boundary.
// Page headers are never written, so XLP_FIRST_IS_CONTRECORD and xlp_rem_len
// stay as PostgreSQL wrote them, which is right because the length is the same.
func Scatter(record []byte, lsn wal.LSN, segSize uint32, write func(at wal.LSN, b []byte)) error {
	if err := checkSegSize(segSize); err != nil {
		return err
	}
	pos, rest := lsn, record
	for len(rest) > 0 {
		if pos%wal.BlockSize == 0 {
			pos += pageHeaderLen(pos, segSize)
		}
		n := min(len(rest), int(wal.BlockSize-pos%wal.BlockSize))
		write(pos, rest[:n])
		pos += wal.LSN(n)
		rest = rest[n:]
	}
	return nil
}
