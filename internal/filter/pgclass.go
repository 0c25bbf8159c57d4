package filter

import (
	"encoding/binary"

	"github.com/walshadow/walshadow/internal/wal"
)

// pg_class's first eight columns (catalog/pg_class.h) are fixed-width and
// NOT NULL: oid, relname (name, 64 bytes), relnamespace, reltype, reloftype,
// relowner, relam, relfilenode. Their offsets from t_hoff are therefore the
// same in every row, and with no alignment padding (all 4-byte aligned).
const (
	pgClassOidOff         = 0
	pgClassRelfilenodeOff = 88
	pgClassPrefixLen      = pgClassRelfilenodeOff + 4
	pgClassPrefixAtts     = 8
)

// pgClassRow is what the tracker reads from a pg_class row.
type pgClassRow struct {
	oid, relfilenode uint32
}

// decodePgClassUserData reads oid and relfilenode from a pg_class row's user
// data (from t_hoff), given its natts and null bitmap (nil: no nulls).
func decodePgClassUserData(ud []byte, natts int, bitmap []byte) (pgClassRow, bool) {
	if len(ud) < pgClassPrefixLen || natts < pgClassPrefixAtts {
		return pgClassRow{}, false
	}
	if bitmap != nil {
		// Bit set = not null (att_isnull); the first eight must all be set.
		if len(bitmap) < 1 || bitmap[0] != 0xFF {
			return pgClassRow{}, false
		}
	}
	return pgClassRow{
		oid:         binary.LittleEndian.Uint32(ud[pgClassOidOff:]),
		relfilenode: binary.LittleEndian.Uint32(ud[pgClassRelfilenodeOff:]),
	}, true
}

func decodePgClassTuple(tup *wal.HeapTuple) (pgClassRow, bool) {
	return decodePgClassUserData(tup.UserData(), tup.Header.Natts(), tup.Bitmap())
}

// Heap page layout (storage/bufpage.h, itemid.h, htup_details.h).
const (
	pageHeaderSize   = 24
	itemIDSize       = 4
	lpNormal         = 1
	tupleHeaderSize  = 23 // SizeofHeapTupleHeader
	tupleInfomask2At = 18
	tupleInfomaskAt  = 20
	tupleHoffAt      = 22
)

// pageTupleUserData finds the tuple at line pointer off (1-based) of a heap
// page and returns its user data, natts and null bitmap (nil without nulls).
// Anything inconsistent reports false: the page came from WAL and is
// checked, but the filter must not trust it blindly.
func pageTupleUserData(page []byte, off uint16) (ud []byte, natts int, bitmap []byte, ok bool) {
	if off == 0 || len(page) != wal.BlockSize {
		return nil, 0, nil, false
	}
	lower := int(binary.LittleEndian.Uint16(page[12:]))
	lpAt := pageHeaderSize + (int(off)-1)*itemIDSize
	if lpAt+itemIDSize > lower || lower > wal.BlockSize {
		return nil, 0, nil, false
	}
	lp := binary.LittleEndian.Uint32(page[lpAt:])
	lpOff, lpFlags, lpLen := int(lp&0x7FFF), (lp>>15)&3, int(lp>>17)
	if lpFlags != lpNormal || lpLen < tupleHeaderSize || lpOff+lpLen > wal.BlockSize {
		return nil, 0, nil, false
	}
	tup := page[lpOff : lpOff+lpLen]
	infomask2 := binary.LittleEndian.Uint16(tup[tupleInfomask2At:])
	infomask := binary.LittleEndian.Uint16(tup[tupleInfomaskAt:])
	hoff := int(tup[tupleHoffAt])
	natts = int(infomask2 & wal.HeapNattsMask)
	if hoff < tupleHeaderSize || hoff > lpLen {
		return nil, 0, nil, false
	}
	if infomask&wal.HeapHasNull != 0 {
		n := (natts + 7) / 8
		if tupleHeaderSize+n > hoff {
			return nil, 0, nil, false
		}
		bitmap = tup[tupleHeaderSize : tupleHeaderSize+n]
	}
	return tup[hoff:], natts, bitmap, true
}

// pgClassWrite classifies what a heap write to pg_class revealed.
type pgClassWrite uint8

const (
	pgClassNone      pgClassWrite = iota // not a row-writing record
	pgClassDecoded                       // rows were read
	pgClassUndecoded                     // a row was written but cannot be read from this record alone
)

// readPgClassRows calls fn for each pg_class row a heap INSERT, UPDATE,
// HOT_UPDATE or MULTI_INSERT to pg_class writes. Rows come from the record's
// block data or, when a full-page image replaced the data (catalogs are not
// logically logged, so their data is omitted whenever the page is backed
// up), from the restored image.
//
// An UPDATE whose new tuple is prefix-compressed (PREFIX_FROM_OLD: same page,
// no image, a catalog, so even at wal_level=logical) lacks the first bytes of
// the row, the oid among them, and cannot be read without the old tuple; nor
// can one whose logged part ends before relfilenode. Those are reported as
// pgClassUndecoded and handled conservatively by the caller.
func (f *Filter) readPgClassRows(rec *wal.Record, fn func(pgClassRow)) (pgClassWrite, error) {
	switch {
	case rec.Header.RmID == wal.RmgrHeap && rec.Header.Info&wal.XLogHeapOpMask == wal.XLogHeapInsert:
		ins := &f.scratch.heapInsert
		if err := ins.Decode(rec); err != nil {
			return pgClassUndecoded, err
		}
		if ins.HasTuple {
			return f.emitTuple(&ins.Tuple, fn), nil
		}
		return f.emitFromImage(rec, 0, fn, ins.OffNum)
	case rec.Header.RmID == wal.RmgrHeap && (rec.Header.Info&wal.XLogHeapOpMask == wal.XLogHeapUpdate ||
		rec.Header.Info&wal.XLogHeapOpMask == wal.XLogHeapHotUpdate):
		upd := &f.scratch.heapUpdate
		if err := upd.Decode(rec); err != nil {
			return pgClassUndecoded, err
		}
		if upd.HasNewTuple {
			if upd.PrefixLen > 0 {
				return pgClassUndecoded, nil
			}
			return f.emitTuple(&upd.NewTuple, fn), nil
		}
		return f.emitFromImage(rec, 0, fn, upd.NewOffNum)
	case rec.Header.RmID == wal.RmgrHeap2 && rec.Header.Info&wal.XLogHeapOpMask == wal.XLogHeap2MultiInsert:
		mi := &f.scratch.multiInsert
		if err := mi.Decode(rec); err != nil {
			return pgClassUndecoded, err
		}
		if !mi.HasTuples {
			offs := f.scratch.offsets[:0]
			for i := 0; i < mi.NTuples; i++ {
				offs = append(offs, mi.OffNum(i))
			}
			f.scratch.offsets = offs
			return f.emitFromImage(rec, 0, fn, offs...)
		}
		res := pgClassDecoded
		it := mi.Tuples()
		var t wal.MultiInsertTuple
		for it.Next(&t) {
			if f.emitTuple(&t.Tuple, fn) == pgClassUndecoded {
				res = pgClassUndecoded
			}
		}
		return res, nil
	}
	return pgClassNone, nil
}

func (f *Filter) emitTuple(tup *wal.HeapTuple, fn func(pgClassRow)) pgClassWrite {
	row, ok := decodePgClassTuple(tup)
	if !ok {
		return pgClassUndecoded
	}
	fn(row)
	return pgClassDecoded
}

// emitFromImage reads the rows at the given line pointers of block id's
// full-page image.
func (f *Filter) emitFromImage(rec *wal.Record, id uint8, fn func(pgClassRow), offs ...uint16) (pgClassWrite, error) {
	b := rec.Block(id)
	if b == nil || !b.HasImage() || !b.Image.Apply() {
		return pgClassUndecoded, nil
	}
	page, err := rec.RestoreBlockImage(id, f.scratch.page)
	if err != nil {
		return pgClassUndecoded, err
	}
	f.scratch.page = page
	res := pgClassDecoded
	for _, off := range offs {
		ud, natts, bitmap, ok := pageTupleUserData(page, off)
		if !ok {
			res = pgClassUndecoded
			continue
		}
		row, ok := decodePgClassUserData(ud, natts, bitmap)
		if !ok {
			res = pgClassUndecoded
			continue
		}
		fn(row)
	}
	return res, nil
}
