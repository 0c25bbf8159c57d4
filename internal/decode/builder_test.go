package decode

import (
	"encoding/binary"
	"testing"

	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/wal"
	"github.com/walshadow/walshadow/internal/wal/walbuild"
)

// Hand-built WAL records for the Tx tests, laid out as PostgreSQL 15 writes
// them (internal/wal/walbuild).

var layout15 = func() *wal.Layout {
	l, err := wal.LayoutForMajor(15)
	if err != nil {
		panic(err)
	}
	return l
}()

type testBlock struct {
	rel   wal.RelFileNode
	blk   uint32
	image bool // a 100-byte full-page image with a hole
	data  []byte
}

// buildRawRecord assembles a complete record (header, block references,
// payload, main data, CRC).
func buildRawRecord(rmid wal.RmgrID, info uint8, xid uint32, blocks []testBlock, main []byte) []byte {
	bs := make([]walbuild.Block, len(blocks))
	for i, b := range blocks {
		bs[i] = walbuild.Block{Rel: b.rel, Blk: b.blk, Image: b.image, Data: b.data}
	}
	return walbuild.Record(rmid, info, xid, bs, main)
}

func buildRecord(t testing.TB, lsn wal.LSN, rmid wal.RmgrID, info uint8, blocks []testBlock, main []byte) *wal.Record {
	t.Helper()
	rec := new(wal.Record)
	if err := wal.DecodeRecord(buildRawRecord(rmid, info, 777, blocks, main), lsn, layout15, rec); err != nil {
		t.Fatalf("building test record: %v", err)
	}
	return rec
}

// tupleOf lays out vals (nil = NULL) for desc's columns as heap_fill_tuple
// does and returns xl_heap_header + bitmap/padding + user data.
func tupleOf(desc *desclog.Descriptor, vals [][]byte) []byte { return walbuild.Tuple(desc, vals) }

func insertRecord(t testing.TB, lsn wal.LSN, rel wal.RelFileNode, offnum uint16, flags uint8, tuple []byte) *wal.Record {
	main := binary.LittleEndian.AppendUint16(nil, offnum)
	main = append(main, flags|wal.XLHInsertContainsNewTuple)
	return buildRecord(t, lsn, wal.RmgrHeap, wal.XLogHeapInsert, []testBlock{{rel: rel, blk: 0, data: tuple}}, main)
}

func multiInsertRecord(t testing.TB, lsn wal.LSN, rel wal.RelFileNode, flags uint8, tuples [][]byte) *wal.Record {
	main := []byte{flags | wal.XLHInsertContainsNewTuple, 0}
	main = binary.LittleEndian.AppendUint16(main, uint16(len(tuples)))
	var data []byte
	for i, tup := range tuples {
		main = binary.LittleEndian.AppendUint16(main, uint16(i+1))
		if len(data)%2 == 1 {
			data = append(data, 0)
		}
		data = binary.LittleEndian.AppendUint16(data, uint16(len(tup)-5))
		data = append(data, tup...) // infomask2, infomask, hoff, then the bytes
	}
	return buildRecord(t, lsn, wal.RmgrHeap2, wal.XLogHeap2MultiInsert, []testBlock{{rel: rel, data: data}}, main)
}

func updateRecord(t testing.TB, lsn wal.LSN, rel wal.RelFileNode, newTuple, oldTuple []byte, oldFlag uint8) *wal.Record {
	main := binary.LittleEndian.AppendUint32(nil, 1) // old xmax
	main = binary.LittleEndian.AppendUint16(main, 1)
	flags := uint8(wal.XLHUpdateContainsNewTuple)
	if oldTuple != nil {
		flags |= oldFlag
	}
	main = append(main, 0, flags)
	main = binary.LittleEndian.AppendUint32(main, 0)
	main = binary.LittleEndian.AppendUint16(main, 2)
	main = append(main, oldTuple...)
	return buildRecord(t, lsn, wal.RmgrHeap, wal.XLogHeapUpdate, []testBlock{{rel: rel, data: newTuple}}, main)
}

func deleteRecord(t testing.TB, lsn wal.LSN, rel wal.RelFileNode, offnum uint16, flags uint8, oldTuple []byte) *wal.Record {
	main := binary.LittleEndian.AppendUint32(nil, 1)
	main = binary.LittleEndian.AppendUint16(main, offnum)
	main = append(main, 0, flags)
	main = append(main, oldTuple...)
	return buildRecord(t, lsn, wal.RmgrHeap, wal.XLogHeapDelete, []testBlock{{rel: rel}}, main)
}

func confirmRecord(t testing.TB, lsn wal.LSN, rel wal.RelFileNode, offnum uint16) *wal.Record {
	return buildRecord(t, lsn, wal.RmgrHeap, wal.XLogHeapConfirm, []testBlock{{rel: rel}}, binary.LittleEndian.AppendUint16(nil, offnum))
}

func truncateRecord(t testing.TB, lsn wal.LSN, db uint32, relids ...uint32) *wal.Record {
	main := binary.LittleEndian.AppendUint32(nil, db)
	main = binary.LittleEndian.AppendUint32(main, uint32(len(relids)))
	main = append(main, 0, 0, 0, 0)
	for _, r := range relids {
		main = binary.LittleEndian.AppendUint32(main, r)
	}
	return buildRecord(t, lsn, wal.RmgrHeap, wal.XLogHeapTruncate, nil, main)
}

// externalPointer is a TOAST pointer datum (0x01, tag 18, varatt_external).
func externalPointer(rawSize int32, extSize int, method CompressionMethod, valueID, toastRel uint32) []byte {
	b := []byte{0x01, 18}
	b = binary.LittleEndian.AppendUint32(b, uint32(rawSize))
	b = binary.LittleEndian.AppendUint32(b, uint32(extSize)|uint32(method)<<30)
	b = binary.LittleEndian.AppendUint32(b, valueID)
	return binary.LittleEndian.AppendUint32(b, toastRel)
}

// insertRecordAt is insertRecord on block blk.
func insertRecordAt(t testing.TB, lsn wal.LSN, rel wal.RelFileNode, blk uint32, offnum uint16, tuple []byte) *wal.Record {
	main := binary.LittleEndian.AppendUint16(nil, offnum)
	main = append(main, wal.XLHInsertContainsNewTuple)
	return buildRecord(t, lsn, wal.RmgrHeap, wal.XLogHeapInsert, []testBlock{{rel: rel, blk: blk, data: tuple}}, main)
}

// multiInsertRecordAt is multiInsertRecord on block blk with the tuples at
// offsets (nil: a re-initialised page, offsets 1..n).
func multiInsertRecordAt(t testing.TB, lsn wal.LSN, rel wal.RelFileNode, blk uint32, offsets []uint16, tuples [][]byte) *wal.Record {
	info := uint8(wal.XLogHeap2MultiInsert)
	if offsets == nil {
		info |= wal.XLogHeapInitPage
	}
	main := []byte{wal.XLHInsertContainsNewTuple | wal.XLHInsertLastInMulti, 0}
	main = binary.LittleEndian.AppendUint16(main, uint16(len(tuples)))
	for _, o := range offsets {
		main = binary.LittleEndian.AppendUint16(main, o)
	}
	var data []byte
	for _, tup := range tuples {
		if len(data)%2 == 1 {
			data = append(data, 0)
		}
		data = binary.LittleEndian.AppendUint16(data, uint16(len(tup)-5))
		data = append(data, tup...)
	}
	return buildRecord(t, lsn, wal.RmgrHeap2, info, []testBlock{{rel: rel, blk: blk, data: data}}, main)
}

// updateRecordAt is an UPDATE (HOT_UPDATE when hot) of the tuple at
// (oldBlk, oldOff) to (newBlk, newOff): block 0 is the new tuple's page,
// block 1 the old one's when they differ (heap_xlog_update).
func updateRecordAt(t testing.TB, lsn wal.LSN, rel wal.RelFileNode, hot bool, newBlk uint32, newOff uint16, oldBlk uint32, oldOff uint16, newTuple, oldTuple []byte, oldFlag uint8) *wal.Record {
	main := binary.LittleEndian.AppendUint32(nil, 1) // old xmax
	main = binary.LittleEndian.AppendUint16(main, oldOff)
	flags := uint8(wal.XLHUpdateContainsNewTuple)
	if oldTuple != nil {
		flags |= oldFlag
	}
	main = append(main, 0, flags)
	main = binary.LittleEndian.AppendUint32(main, 0)
	main = binary.LittleEndian.AppendUint16(main, newOff)
	main = append(main, oldTuple...)
	blocks := []testBlock{{rel: rel, blk: newBlk, data: newTuple}}
	if oldBlk != newBlk {
		blocks = append(blocks, testBlock{rel: rel, blk: oldBlk})
	}
	info := uint8(wal.XLogHeapUpdate)
	if hot {
		info = wal.XLogHeapHotUpdate
	}
	return buildRecord(t, lsn, wal.RmgrHeap, info, blocks, main)
}

// deleteRecordAt is deleteRecord of the tuple at (blk, offnum).
func deleteRecordAt(t testing.TB, lsn wal.LSN, rel wal.RelFileNode, blk uint32, offnum uint16, flags uint8, oldTuple []byte) *wal.Record {
	main := binary.LittleEndian.AppendUint32(nil, 1)
	main = binary.LittleEndian.AppendUint16(main, offnum)
	main = append(main, 0, flags)
	main = append(main, oldTuple...)
	return buildRecord(t, lsn, wal.RmgrHeap, wal.XLogHeapDelete, []testBlock{{rel: rel, blk: blk}}, main)
}
