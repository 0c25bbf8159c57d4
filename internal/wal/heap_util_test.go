package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// heapTestBlock is one block reference for heapTestRecord.
type heapTestBlock struct {
	id    uint8
	fork  ForkNumber
	rel   RelFileNode
	blk   uint32
	image bool   // attach a 100-byte full-page image with a hole
	data  []byte // block data; HAS_DATA is set when non-empty
}

var heapTestRel = RelFileNode{SpcOid: 1663, DbOid: 5, RelNum: 16384}

// heapTestRecord assembles a complete record (header, block references,
// payload, main data, CRC) and decodes it with DecodeRecord, so hand-built
// vectors go through the same path as real WAL.
func heapTestRecord(t testing.TB, major int, rmid RmgrID, info uint8, blocks []heapTestBlock, main []byte) *Record {
	t.Helper()
	layout, err := LayoutForMajor(major)
	if err != nil {
		t.Fatal(err)
	}
	var hdrs, payload []byte
	for _, b := range blocks {
		ff := uint8(b.fork)
		if len(b.data) > 0 {
			ff |= BkpBlockHasData
		}
		if b.image {
			ff |= BkpBlockHasImage
		}
		hdrs = append(hdrs, b.id, ff)
		hdrs = binary.LittleEndian.AppendUint16(hdrs, uint16(len(b.data)))
		if b.image {
			const imgLen, holeOff = 100, 40
			hdrs = binary.LittleEndian.AppendUint16(hdrs, imgLen)
			hdrs = binary.LittleEndian.AppendUint16(hdrs, holeOff)
			hdrs = append(hdrs, BkpImageHasHole|BkpImageApply)
			payload = append(payload, make([]byte, imgLen)...)
		}
		hdrs = binary.LittleEndian.AppendUint32(hdrs, b.rel.SpcOid)
		hdrs = binary.LittleEndian.AppendUint32(hdrs, b.rel.DbOid)
		hdrs = binary.LittleEndian.AppendUint32(hdrs, b.rel.RelNum)
		hdrs = binary.LittleEndian.AppendUint32(hdrs, b.blk)
		payload = append(payload, b.data...)
	}
	if len(main) > 0 {
		if len(main) > 255 {
			hdrs = append(hdrs, XLRBlockIDDataLong)
			hdrs = binary.LittleEndian.AppendUint32(hdrs, uint32(len(main)))
		} else {
			hdrs = append(hdrs, XLRBlockIDDataShort, uint8(len(main)))
		}
	}
	raw := make([]byte, RecordHeaderSize, RecordHeaderSize+len(hdrs)+len(payload)+len(main))
	raw = append(append(append(raw, hdrs...), payload...), main...)
	binary.LittleEndian.PutUint32(raw[0:], uint32(len(raw)))
	binary.LittleEndian.PutUint32(raw[4:], 777)
	binary.LittleEndian.PutUint64(raw[8:], 0x1000)
	raw[16] = info
	raw[17] = byte(rmid)
	binary.LittleEndian.PutUint32(raw[20:], RecordCRC(raw))
	rec := new(Record)
	if err := DecodeRecord(raw, 0x2000, layout, rec); err != nil {
		t.Fatalf("building test record: %v", err)
	}
	return rec
}

// heapBlk returns a main-fork block reference to heapTestRel.
func heapBlk(id uint8, blk uint32, data []byte) heapTestBlock {
	return heapTestBlock{id: id, rel: heapTestRel, blk: blk, data: data}
}

// heapLE builds little-endian byte strings: uint8/uint16/uint32 values are
// written at their width, []byte and string verbatim.
func heapLE(parts ...any) []byte {
	var b []byte
	for _, p := range parts {
		switch v := p.(type) {
		case uint8:
			b = append(b, v)
		case uint16:
			b = binary.LittleEndian.AppendUint16(b, v)
		case uint32:
			b = binary.LittleEndian.AppendUint32(b, v)
		case []byte:
			b = append(b, v...)
		case string:
			b = append(b, v...)
		default:
			panic(fmt.Sprintf("heapLE: unsupported %T", p))
		}
	}
	return b
}

// heapXLHeader is an xl_heap_header.
func heapXLHeader(infomask2, infomask uint16, hoff uint8) []byte {
	return heapLE(infomask2, infomask, hoff)
}

// wantHeapError fails unless err is a *Error of the given kind naming lsn
// whose message contains substr.
func wantHeapError(t *testing.T, err error, kind ErrorKind, lsn LSN, substr string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T), want *wal.Error", err, err)
	}
	if e.Kind != kind || e.LSN != lsn || !strings.Contains(e.Msg, substr) {
		t.Fatalf("error %q (kind %v, lsn %v), want kind %v at %v containing %q", e.Error(), e.Kind, e.LSN, kind, lsn, substr)
	}
}
