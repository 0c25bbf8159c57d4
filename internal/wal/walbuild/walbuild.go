// Package walbuild builds WAL records by hand, laid out as PostgreSQL 15
// writes them, for tests of the packages that read them: a record's
// header, block references, payload, main data and CRC, and heap tuples
// laid out as heap_fill_tuple does.
package walbuild

import (
	"encoding/binary"

	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/wal"
)

// Block is a block reference of a record.
type Block struct {
	Rel   wal.RelFileNode
	Blk   uint32
	Image bool // a 100-byte full-page image with a hole
	Data  []byte
}

// Record assembles a complete record (header, block references, payload,
// main data, CRC) of transaction xid.
func Record(rmid wal.RmgrID, info uint8, xid uint32, blocks []Block, main []byte) []byte {
	var hdrs, payload []byte
	for id, b := range blocks {
		ff := uint8(wal.ForkMain)
		if len(b.Data) > 0 {
			ff |= wal.BkpBlockHasData
		}
		if b.Image {
			ff |= wal.BkpBlockHasImage
		}
		hdrs = append(hdrs, uint8(id), ff)
		hdrs = binary.LittleEndian.AppendUint16(hdrs, uint16(len(b.Data)))
		if b.Image {
			const imgLen, holeOff = 100, 40
			hdrs = binary.LittleEndian.AppendUint16(hdrs, imgLen)
			hdrs = binary.LittleEndian.AppendUint16(hdrs, holeOff)
			hdrs = append(hdrs, wal.BkpImageHasHole|wal.BkpImageApply)
			payload = append(payload, make([]byte, imgLen)...)
		}
		hdrs = binary.LittleEndian.AppendUint32(hdrs, b.Rel.SpcOid)
		hdrs = binary.LittleEndian.AppendUint32(hdrs, b.Rel.DbOid)
		hdrs = binary.LittleEndian.AppendUint32(hdrs, b.Rel.RelNum)
		hdrs = binary.LittleEndian.AppendUint32(hdrs, b.Blk)
		payload = append(payload, b.Data...)
	}
	if len(main) > 0 {
		if len(main) > 255 {
			hdrs = append(hdrs, wal.XLRBlockIDDataLong)
			hdrs = binary.LittleEndian.AppendUint32(hdrs, uint32(len(main)))
		} else {
			hdrs = append(hdrs, wal.XLRBlockIDDataShort, uint8(len(main)))
		}
	}
	raw := make([]byte, wal.RecordHeaderSize, wal.RecordHeaderSize+len(hdrs)+len(payload)+len(main))
	raw = append(append(append(raw, hdrs...), payload...), main...)
	binary.LittleEndian.PutUint32(raw[0:], uint32(len(raw)))
	binary.LittleEndian.PutUint32(raw[4:], xid)
	binary.LittleEndian.PutUint64(raw[8:], 0x1000)
	raw[16] = info
	raw[17] = byte(rmid)
	binary.LittleEndian.PutUint32(raw[20:], wal.RecordCRC(raw))
	return raw
}

// HeapInsert is an XLOG_HEAP_INSERT of tuple (Tuple's layout) at offnum
// of block 0 of rel.
func HeapInsert(xid uint32, rel wal.RelFileNode, offnum uint16, flags uint8, tuple []byte) []byte {
	main := binary.LittleEndian.AppendUint16(nil, offnum)
	main = append(main, flags|wal.XLHInsertContainsNewTuple)
	return Record(wal.RmgrHeap, wal.XLogHeapInsert, xid, []Block{{Rel: rel, Data: tuple}}, main)
}

// Tuple lays out vals (nil = NULL) for desc's columns as heap_fill_tuple
// does and returns xl_heap_header + bitmap/padding + user data.
func Tuple(desc *desclog.Descriptor, vals [][]byte) []byte {
	natts := len(vals)
	hasNull := false
	for _, v := range vals {
		if v == nil {
			hasNull = true
		}
	}
	bitmapLen := 0
	if hasNull {
		bitmapLen = (natts + 7) / 8
	}
	hoff := (23 + bitmapLen + 7) &^ 7
	pre := make([]byte, hoff-23)
	var data []byte
	infomask := uint16(0)
	if hasNull {
		infomask |= wal.HeapHasNull
	}
	for i, v := range vals {
		if v == nil {
			continue
		}
		if hasNull {
			pre[i>>3] |= 1 << (i & 7)
		}
		col := &desc.Columns[i]
		// 1-byte headers (short values and TOAST pointers) are never aligned.
		if col.Len != -1 || v[0]&1 == 0 {
			for len(data) != desclog.AlignOffset(len(data), col.Align) {
				data = append(data, 0)
			}
		}
		if col.Len == -1 {
			infomask |= wal.HeapHasVarWidth
			if v[0] == 0x01 {
				infomask |= wal.HeapHasExternal
			}
		}
		data = append(data, v...)
	}
	out := binary.LittleEndian.AppendUint16(nil, uint16(natts))
	out = binary.LittleEndian.AppendUint16(out, infomask)
	out = append(out, byte(hoff))
	out = append(out, pre...)
	return append(out, data...)
}
