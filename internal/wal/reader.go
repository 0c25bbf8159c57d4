package wal

import (
	"encoding/binary"
	"fmt"
)

// StreamReader reassembles WAL records from bytes that arrive in chunks of
// any size, exactly as they come off a physical replication connection or
// out of segment files: records split at any byte, headers that straddle
// pages, continuation records, XLOG_SWITCH zero tails and
// OVERWRITE_CONTRECORD pages. It verifies page headers, the xl_prev chain and
// every record's CRC-32C. It does no I/O.
//
// The stream must start on a page boundary. When that page begins with the
// tail of a record that started earlier, the tail is skipped.
//
// Records returned by Next alias the reader's memory (or the caller's, after
// PushShared) and stay valid until the next call to Next, Push, PushShared,
// WriteBuffer or Advance; use Record.Clone to keep one.
//
// Errors are *Error values naming the LSN. A KindCRC error is not sticky: the
// record was framed correctly and the reader has stepped past it. Every other
// error is sticky: the stream is poisoned and a new reader is needed.
type StreamReader struct {
	buf []byte // buf[off:] are the pending bytes; buf[off] is at pos
	off int
	pos LSN
	// borrowed: buf is the caller's memory (PushShared); own is then the
	// reader's buffer, kept for when bytes must be copied again.
	borrowed bool
	own      []byte

	layout       *Layout
	segSize      uint32
	segSizeFixed bool
	sysID        uint64
	tli          uint32
	started      bool // the first page header has been read

	prev   LSN // start of the previous record; 0 until one is known
	skipTo LSN // bytes before skipTo are padding or an XLOG_SWITCH tail

	skipCont uint32 // continuation bytes of a record begun before the stream start

	asm       bool // assembling a record that crosses pages into scratch
	asmLSN    LSN
	asmTotLen uint32
	scratch   []byte

	overwritten LSN // an aborted partial record overwritten (OVERWRITE_CONTRECORD)

	err error
	rec Record
}

// StreamOptions tunes a StreamReader.
type StreamOptions struct {
	// SegmentSize is the WAL segment size. Zero means: learn it from the first
	// long page header (16 MiB until then).
	SegmentSize uint32
}

// NewStreamReader returns a reader whose first byte will be at start, which
// must be a multiple of the WAL page size.
func NewStreamReader(start LSN, opts StreamOptions) (*StreamReader, error) {
	if start%BlockSize != 0 {
		return nil, fmt.Errorf("wal: stream start %s is not at a page boundary", start)
	}
	r := &StreamReader{pos: start, segSize: DefaultSegmentSize}
	if opts.SegmentSize != 0 {
		if !ValidSegmentSize(opts.SegmentSize) {
			return nil, fmt.Errorf("wal: invalid segment size %d", opts.SegmentSize)
		}
		r.segSize = opts.SegmentSize
		r.segSizeFixed = true
	}
	return r, nil
}

// PushLSN is the LSN the next pushed byte must have.
func (r *StreamReader) PushLSN() LSN { return r.pos + LSN(len(r.buf)-r.off) }

// Pos is the LSN of the next byte the reader will interpret.
func (r *StreamReader) Pos() LSN { return r.pos }

// Layout is the version layout picked by the first page's magic (nil before).
func (r *StreamReader) Layout() *Layout { return r.layout }

// SegmentSize is the WAL segment size in use.
func (r *StreamReader) SegmentSize() uint32 { return r.segSize }

// SystemID is the database system identifier from the last long page header.
func (r *StreamReader) SystemID() uint64 { return r.sysID }

// Timeline is the timeline of the last page header read.
func (r *StreamReader) Timeline() uint32 { return r.tli }

// InRecord reports whether the reader holds part of a record (or of a
// skipped continuation) and needs more bytes to finish it.
func (r *StreamReader) InRecord() bool { return r.asm || r.skipCont > 0 }

// Push appends chunk, whose first byte is at PushLSN. The bytes are copied.
func (r *StreamReader) Push(chunk []byte) {
	copy(r.WriteBuffer(len(chunk)), chunk)
	r.Advance(len(chunk))
}

// PushShared appends chunk, whose first byte is at PushLSN, reading it in
// place when it can: when nothing is pending, or when chunk continues the
// previous shared chunk in the same memory (a buffer filled piece by piece).
// The caller must leave the bytes not yet returned as records unchanged
// until Next has returned ErrNeedMore; records returned alias chunk.
func (r *StreamReader) PushShared(chunk []byte) {
	pending := len(r.buf) - r.off
	switch {
	case len(chunk) == 0:
	case pending == 0:
		if !r.borrowed {
			r.own = r.buf[:0]
		}
		r.buf, r.off, r.borrowed = chunk, 0, true
	case r.borrowed && len(r.buf) < cap(r.buf) && &r.buf[:len(r.buf)+1][len(r.buf)] == &chunk[0]:
		r.buf = r.buf[:len(r.buf)+len(chunk)] // the same memory, so within its capacity
	default:
		r.Push(chunk)
	}
}

// WriteBuffer returns a slice of n bytes of internal buffer to fill with the
// bytes that follow PushLSN; Advance commits them. It lets a file or socket
// reader fill the buffer directly, without an extra copy.
func (r *StreamReader) WriteBuffer(n int) []byte {
	if r.borrowed {
		// The pending bytes move to the reader's own buffer.
		r.buf = append(r.own[:0], r.buf[r.off:]...)
		r.off, r.borrowed, r.own = 0, false, nil
	}
	if r.off > 0 {
		pending := copy(r.buf, r.buf[r.off:])
		r.buf = r.buf[:pending]
		r.off = 0
	}
	if need := len(r.buf) + n; need > cap(r.buf) {
		nb := make([]byte, len(r.buf), max(need, 2*cap(r.buf)))
		copy(nb, r.buf)
		r.buf = nb
	}
	return r.buf[len(r.buf) : len(r.buf)+n]
}

// Advance commits n bytes written into the slice WriteBuffer returned.
func (r *StreamReader) Advance(n int) { r.buf = r.buf[:len(r.buf)+n] }

func (r *StreamReader) consume(n int) {
	r.off += n
	r.pos += LSN(n)
}

func (r *StreamReader) fail(err *Error) (*Record, error) {
	r.err = err
	return nil, err
}

// Next returns the next complete record, or ErrNeedMore when the bytes pushed
// so far end before it does.
func (r *StreamReader) Next() (*Record, error) {
	if r.err != nil {
		return nil, r.err
	}
	for {
		avail := len(r.buf) - r.off
		if r.pos < r.skipTo {
			n := min(uint64(r.skipTo-r.pos), uint64(avail))
			if n == 0 {
				return nil, ErrNeedMore
			}
			r.consume(int(n))
			continue
		}
		pageOff := int(r.pos % BlockSize)
		if pageOff == 0 {
			if err := r.readPageHeader(); err != nil {
				if err == ErrNeedMore {
					return nil, err
				}
				return r.fail(err.(*Error))
			}
			continue
		}
		pageLeft := BlockSize - pageOff
		if r.skipCont > 0 {
			n := min(int(r.skipCont), pageLeft, avail)
			if n == 0 {
				return nil, ErrNeedMore
			}
			r.consume(n)
			r.skipCont -= uint32(n)
			if r.skipCont == 0 {
				r.skipTo = MaxAlign(r.pos)
			}
			continue
		}
		if r.asm {
			n := min(int(r.asmTotLen)-len(r.scratch), pageLeft, avail)
			if n == 0 {
				return nil, ErrNeedMore
			}
			r.scratch = append(r.scratch, r.buf[r.off:r.off+n]...)
			r.consume(n)
			if len(r.scratch) == int(r.asmTotLen) {
				r.asm = false
				return r.finish(r.asmLSN, r.scratch)
			}
			continue
		}

		// A new record starts at pos; its xl_tot_len is always on this page.
		if avail < 4 {
			return nil, ErrNeedMore
		}
		totLen := binary.LittleEndian.Uint32(r.buf[r.off:])
		if totLen == 0 {
			return r.fail(errorf(r.pos, KindEndOfWAL, "invalid record length: wanted %d, got 0", RecordHeaderSize))
		}
		if totLen < RecordHeaderSize {
			return r.fail(errorf(r.pos, KindCorrupt, "invalid record length: wanted %d, got %d", RecordHeaderSize, totLen))
		}
		if totLen > r.layout.MaxRecordSize {
			return r.fail(errorf(r.pos, KindCorrupt, "record length %d exceeds the maximum %d", totLen, r.layout.MaxRecordSize))
		}
		if pageLeft >= RecordHeaderSize {
			if avail < RecordHeaderSize {
				return nil, ErrNeedMore
			}
			if err := r.checkHeader(r.pos, r.buf[r.off:]); err != nil {
				return r.fail(err)
			}
		}
		if int(totLen) <= pageLeft {
			if avail < int(totLen) {
				return nil, ErrNeedMore
			}
			lsn := r.pos
			raw := r.buf[r.off : r.off+int(totLen) : r.off+int(totLen)]
			r.consume(int(totLen))
			return r.finish(lsn, raw)
		}
		r.asm = true
		r.asmLSN = r.pos
		r.asmTotLen = totLen
		if cap(r.scratch) < int(totLen) {
			r.scratch = make([]byte, 0, totLen)
		}
		r.scratch = r.scratch[:0]
	}
}

// checkHeader validates what ValidXLogRecordHeader checks before the record
// body is read: the resource manager and the xl_prev link.
func (r *StreamReader) checkHeader(lsn LSN, hdr []byte) *Error {
	rmid := RmgrID(hdr[17])
	if !rmid.Valid() {
		return errorf(lsn, KindCorrupt, "invalid resource manager ID %d", rmid)
	}
	prev := LSN(binary.LittleEndian.Uint64(hdr[8:]))
	if r.prev != 0 && prev != r.prev {
		return errorf(lsn, KindCorrupt, "record with incorrect prev-link %s (previous record starts at %s)", prev, r.prev)
	}
	return nil
}

// finish decodes a complete record whose bytes are raw and whose last byte
// was just consumed.
func (r *StreamReader) finish(lsn LSN, raw []byte) (*Record, error) {
	if err := r.checkHeader(lsn, raw); err != nil {
		return r.fail(err)
	}
	end := r.pos
	next := MaxAlign(end)
	h := raw[16]
	if RmgrID(raw[17]) == RmgrXLOG && h&XLRRmgrInfoMask == xlogSwitchInfo {
		// The rest of the segment is zeros, page headers included; PostgreSQL
		// reports the record as ending at the segment boundary.
		if off := end % LSN(r.segSize); off != 0 {
			end += LSN(r.segSize) - off
		}
		next = end
	}
	r.skipTo = next
	r.prev = lsn
	if r.overwritten != 0 {
		// The record after an abandoned partial record must be the
		// XLOG_OVERWRITE_CONTRECORD naming it (xlogrecovery.c checks this).
		ow := r.overwritten
		r.overwritten = 0
		if RmgrID(raw[17]) != RmgrXLOG || h&XLRRmgrInfoMask != xlogOverwriteContrecordInfo {
			return r.fail(errorf(lsn, KindCorrupt, "expected XLOG_OVERWRITE_CONTRECORD after the partial record at %s was overwritten", ow))
		}
	}
	if err := DecodeRecord(raw, lsn, r.layout, &r.rec); err != nil {
		e := err.(*Error)
		if e.Kind == KindCRC {
			return nil, e
		}
		return r.fail(e)
	}
	r.rec.End = end
	r.rec.Next = next
	return &r.rec, nil
}

// xl_info values the framing itself must recognise (pg_control.h).
const (
	xlogSwitchInfo              = 0x40
	xlogOverwriteContrecordInfo = 0xD0
)

// readPageHeader validates the page header at pos (a page boundary) and
// consumes it (XLogReaderValidatePageHeader plus the contrecord rules of
// XLogDecodeNextRecord).
func (r *StreamReader) readPageHeader() error {
	avail := r.buf[r.off:]
	if len(avail) < ShortPageHeaderLen {
		return ErrNeedMore
	}
	h, ok := DecodePageHeader(avail)
	if !ok {
		return ErrNeedMore
	}
	lsn := r.pos
	if isZero(avail[:ShortPageHeaderLen]) {
		return errorf(lsn, KindEndOfWAL, "zero-filled WAL page (no WAL written here yet)")
	}
	if r.layout == nil {
		l, err := LayoutForMagic(h.Magic)
		if err != nil {
			return &Error{LSN: lsn, Kind: KindCorrupt, Msg: "invalid WAL page", Err: err}
		}
		r.layout = l
	} else if h.Magic != r.layout.Magic {
		return errorf(lsn, KindCorrupt, "invalid magic number %04X in WAL page (expected %04X)", h.Magic, r.layout.Magic)
	}
	if h.Info&^r.layout.XLPAllFlags != 0 {
		return errorf(lsn, KindCorrupt, "invalid info bits %04X in WAL page", h.Info)
	}
	if h.PageAddr != lsn {
		return errorf(lsn, KindEndOfWAL, "unexpected pageaddr %s in WAL page (a recycled or foreign segment)", h.PageAddr)
	}
	if h.Long() {
		switch {
		case !ValidSegmentSize(h.SegSize):
			return errorf(lsn, KindCorrupt, "invalid WAL segment size %d in long page header", h.SegSize)
		case h.BlockSize != BlockSize:
			return errorf(lsn, KindCorrupt, "WAL block size %d in page header, this build reads %d", h.BlockSize, BlockSize)
		case r.sysID != 0 && h.SysID != r.sysID:
			return errorf(lsn, KindCorrupt, "WAL file is from a different database system: system identifier %d, expected %d", h.SysID, r.sysID)
		}
		if h.SegSize != r.segSize {
			if r.segSizeFixed {
				return errorf(lsn, KindCorrupt, "WAL segment size %d in page header, expected %d", h.SegSize, r.segSize)
			}
			r.segSize = h.SegSize
		}
		r.segSizeFixed = true
		r.sysID = h.SysID
		if lsn%LSN(r.segSize) != 0 {
			return errorf(lsn, KindCorrupt, "long page header on a page that does not start a segment")
		}
	} else if r.segSizeFixed && lsn%LSN(r.segSize) == 0 {
		return errorf(lsn, KindCorrupt, "WAL segment starts without a long page header")
	}
	if h.TLI < r.tli {
		return errorf(lsn, KindCorrupt, "out-of-sequence timeline ID %d (after %d)", h.TLI, r.tli)
	}
	r.tli = h.TLI

	switch {
	case r.asm:
		if !h.IsContrecord() {
			if h.Info&r.layout.XLPOverwriteContrecord != 0 {
				// The partial record was abandoned at a crash and the rest of
				// the page was reused; restart reading here.
				r.overwritten = r.asmLSN
				r.asm = false
				break
			}
			return errorf(lsn, KindCorrupt, "there is no contrecord flag (record at %s continues here)", r.asmLSN)
		}
		if want := r.asmTotLen - uint32(len(r.scratch)); h.RemLen != want {
			return errorf(lsn, KindCorrupt, "invalid contrecord length %d (expected %d) for the record at %s", h.RemLen, want, r.asmLSN)
		}
	case r.skipCont > 0:
		if !h.IsContrecord() || h.RemLen != r.skipCont {
			return errorf(lsn, KindCorrupt, "invalid contrecord length %d (expected %d) while skipping a record begun before the stream start", h.RemLen, r.skipCont)
		}
	case !r.started:
		if h.IsContrecord() {
			if h.RemLen == 0 {
				return errorf(lsn, KindCorrupt, "contrecord flag with zero remaining length")
			}
			r.skipCont = h.RemLen
		}
	case h.IsContrecord():
		return errorf(lsn, KindCorrupt, "contrecord flag set on a page where a new record starts")
	}
	r.started = true
	r.consume(h.Len())
	return nil
}
