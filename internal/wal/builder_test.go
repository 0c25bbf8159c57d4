package wal

import (
	"encoding/binary"
	"hash/crc32"
)

// walBuilder lays synthetic records out into WAL pages exactly as
// PostgreSQL does (page headers, continuation flags and lengths, MAXALIGN),
// so framing edge cases can be produced on demand.
type walBuilder struct {
	segSize uint32
	tli     uint32
	sysID   uint64
	magic   uint16
	start   LSN
	buf     []byte
	prev    LSN
	lsns    []LSN
}

func newWALBuilder(start LSN) *walBuilder {
	return &walBuilder{segSize: 1 << 20, tli: 1, sysID: 7000000000000000001, magic: 0xD110, start: start}
}

func (b *walBuilder) pos() LSN { return b.start + LSN(len(b.buf)) }

// pageHeader writes the header of the page starting at pos.
func (b *walBuilder) pageHeader(info uint16, remLen uint32) {
	p := b.pos()
	long := p%LSN(b.segSize) == 0
	if long {
		info |= XLPLongHeader
	}
	h := make([]byte, ShortPageHeaderLen, LongPageHeaderLen)
	binary.LittleEndian.PutUint16(h[0:], b.magic)
	binary.LittleEndian.PutUint16(h[2:], info)
	binary.LittleEndian.PutUint32(h[4:], b.tli)
	binary.LittleEndian.PutUint64(h[8:], uint64(p))
	binary.LittleEndian.PutUint32(h[16:], remLen)
	if long {
		h = h[:LongPageHeaderLen]
		binary.LittleEndian.PutUint64(h[24:], b.sysID)
		binary.LittleEndian.PutUint32(h[32:], b.segSize)
		binary.LittleEndian.PutUint32(h[36:], BlockSize)
	}
	b.buf = append(b.buf, h...)
}

// pad zero-fills up to the next MAXALIGN boundary.
func (b *walBuilder) pad() {
	for b.pos()%8 != 0 {
		b.buf = append(b.buf, 0)
	}
}

// makeRecord assembles a record with a main-data-only body and its CRC.
func makeRecord(rmid RmgrID, info uint8, xid uint32, prev LSN, main []byte) []byte {
	var hdrs []byte
	if len(main) > 0 && len(main) < 256 {
		hdrs = []byte{XLRBlockIDDataShort, byte(len(main))}
	} else if len(main) > 0 {
		hdrs = binary.LittleEndian.AppendUint32([]byte{XLRBlockIDDataLong}, uint32(len(main)))
	}
	rec := make([]byte, RecordHeaderSize, RecordHeaderSize+len(hdrs)+len(main))
	rec = append(append(rec, hdrs...), main...)
	binary.LittleEndian.PutUint32(rec[0:], uint32(len(rec)))
	binary.LittleEndian.PutUint32(rec[4:], xid)
	binary.LittleEndian.PutUint64(rec[8:], uint64(prev))
	rec[16] = info
	rec[17] = byte(rmid)
	c := crc32.Update(0, crc32.MakeTable(crc32.Castagnoli), rec[RecordHeaderSize:])
	c = crc32.Update(c, crc32.MakeTable(crc32.Castagnoli), rec[:20])
	binary.LittleEndian.PutUint32(rec[20:], c)
	return rec
}

// add appends a record at the current (aligned) position and returns its LSN.
func (b *walBuilder) add(rmid RmgrID, info uint8, main []byte) LSN {
	b.pad()
	if b.pos()%BlockSize == 0 {
		b.pageHeader(0, 0)
	}
	lsn := b.pos()
	b.writeRecord(makeRecord(rmid, info, 0, b.prev, main))
	b.prev = lsn
	b.lsns = append(b.lsns, lsn)
	return lsn
}

// writeRecord writes raw across pages, adding continuation page headers.
func (b *walBuilder) writeRecord(raw []byte) {
	for len(raw) > 0 {
		if b.pos()%BlockSize == 0 {
			b.pageHeader(XLPFirstIsContrecord, uint32(len(raw)))
		}
		n := min(len(raw), int(BlockSize-b.pos()%BlockSize))
		b.buf = append(b.buf, raw[:n]...)
		raw = raw[n:]
	}
}

// noopFilling returns main data for an XLOG_NOOP that ends leaving exactly
// left bytes on the current page (left a multiple of 8, after alignment).
func (b *walBuilder) noopFilling(left int) []byte {
	b.pad()
	room := int(BlockSize - b.pos()%BlockSize)
	if b.pos()%LSN(b.segSize) == 0 {
		room = BlockSize - LongPageHeaderLen
	} else if b.pos()%BlockSize == 0 {
		room = BlockSize - ShortPageHeaderLen
	}
	n := room - left - RecordHeaderSize - 2
	if n > 255 {
		n -= 3 // the long main-data header takes 3 more bytes
	}
	return make([]byte, n)
}

// finishSegment zero-fills to the end of the current segment.
func (b *walBuilder) finishSegment() {
	for b.pos()%LSN(b.segSize) != 0 {
		b.buf = append(b.buf, 0)
	}
}
