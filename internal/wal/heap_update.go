package wal

import "encoding/binary"

// HeapUpdate is XLOG_HEAP_UPDATE or XLOG_HEAP_HOT_UPDATE: the old tuple at
// (OldBlock, OldOffNum) gets xmax and a ctid link to the new tuple at
// (NewBlock, NewOffNum).
type HeapUpdate struct {
	HOT            bool // XLOG_HEAP_HOT_UPDATE: same page, no index entries
	InitPage       bool // XLOG_HEAP_INIT_PAGE: the new tuple is the first on a fresh page
	Rel            RelFileNode
	NewBlock       uint32 // block 0
	OldBlock       uint32 // block 1, or NewBlock when the update stays on one page
	OldXmax        uint32
	OldOffNum      uint16
	OldInfobitsSet uint8 // XLHL*
	Flags          uint8 // XLHUpdate*
	NewXmax        uint32
	NewOffNum      uint16

	// HasNewTuple is false when block 0 carries no data: it has a full-page
	// image and the relation is not logically logged, so the new tuple is
	// only in the image at NewOffNum.
	HasNewTuple bool
	// PrefixLen and SuffixLen bytes of the new tuple's user data are not
	// logged: they equal the start and the end of the old tuple's user data
	// (XLHUpdatePrefixFromOld/SuffixFromOld, wal_level < logical only).
	PrefixLen, SuffixLen uint16
	// NewTuple.Data is the null bitmap and padding (Hoff-23 bytes), then the
	// user data without the prefix and suffix; see NewUserData.
	NewTuple HeapTuple

	// HasOldTuple reports the replica identity logged in the main data
	// (wal_level=logical): the whole old row with XLHUpdateContainsOldTuple,
	// the key columns with XLHUpdateContainsOldKey (logged only when a key
	// column changed or is stored externally).
	HasOldTuple bool
	OldTuple    HeapTuple

	lsn LSN // for NewUserData's errors
}

func (*HeapUpdate) walBody() {}

// Decode parses rec, an XLOG_HEAP_UPDATE or XLOG_HEAP_HOT_UPDATE record.
// The tuples alias rec.
func (dst *HeapUpdate) Decode(rec *Record) error {
	const what = "heap update"
	hot := rec.Header.Info&XLogHeapOpMask == XLogHeapHotUpdate
	op := uint8(XLogHeapUpdate)
	if hot {
		op = XLogHeapHotUpdate
	}
	if err := heapCheckOp(rec, what, RmgrHeap, op); err != nil {
		return err
	}
	*dst = HeapUpdate{HOT: hot, InitPage: rec.Header.Info&XLogHeapInitPage != 0, lsn: rec.LSN}
	md := rec.MainData
	if len(md) < sizeOfHeapUpdate {
		return errorf(rec.LSN, KindCorrupt, "%s: main data %d bytes, want >= %d", what, len(md), sizeOfHeapUpdate)
	}
	dst.OldXmax = binary.LittleEndian.Uint32(md[0:])
	dst.OldOffNum = binary.LittleEndian.Uint16(md[4:])
	dst.OldInfobitsSet = md[6]
	dst.Flags = md[7]
	dst.NewXmax = binary.LittleEndian.Uint32(md[8:])
	dst.NewOffNum = binary.LittleEndian.Uint16(md[12:])

	nb, err := heapBlock0(rec, what)
	if err != nil {
		return err
	}
	dst.Rel, dst.NewBlock, dst.OldBlock = nb.Rel, nb.BlockNum, nb.BlockNum
	if ob := rec.Block(1); ob != nil {
		if dst.HOT {
			return errorf(rec.LSN, KindCorrupt, "%s: HOT update references a second heap block %d", what, ob.BlockNum)
		}
		dst.OldBlock = ob.BlockNum
	}

	if err := dst.decodeNew(rec, nb.Data); err != nil {
		return err
	}

	old := md[sizeOfHeapUpdate:]
	if dst.Flags&XLHUpdateContainsOld == 0 {
		if len(old) != 0 {
			return errorf(rec.LSN, KindCorrupt, "%s: %d bytes after xl_heap_update but flags 0x%02X log no old tuple", what, len(old), dst.Flags)
		}
		return nil
	}
	if err := dst.OldTuple.decode(rec.LSN, what+" old tuple", old); err != nil {
		return err
	}
	dst.HasOldTuple = true
	return nil
}

// decodeNew parses block 0's data: [u16 prefixlen][u16 suffixlen]
// xl_heap_header, bitmap/padding, user data minus prefix and suffix.
func (dst *HeapUpdate) decodeNew(rec *Record, data []byte) error {
	const what = "heap update new tuple"
	if len(data) == 0 {
		if dst.Flags&XLHUpdateContainsNewTuple != 0 {
			// KEEP_DATA goes with this flag: the writer never drops the tuple.
			return errorf(rec.LSN, KindCorrupt, "%s: flags 0x%02X claim a new tuple but block 0 has no data", what, dst.Flags)
		}
		// The writer may have chosen prefix/suffix compression before
		// XLogInsert decided to take an image after all, which drops the data.
		return nil
	}
	if dst.Flags&(XLHUpdatePrefixFromOld|XLHUpdateSuffixFromOld) != 0 && dst.OldBlock != dst.NewBlock {
		// Redo copies the prefix/suffix from the old tuple on the same page.
		return errorf(rec.LSN, KindCorrupt, "%s: prefix/suffix from old tuple across blocks %d and %d", what, dst.OldBlock, dst.NewBlock)
	}
	if dst.Flags&XLHUpdatePrefixFromOld != 0 {
		if len(data) < 2 {
			return errorf(rec.LSN, KindCorrupt, "%s: block 0 data %d bytes, too short for the prefix length", what, len(data))
		}
		dst.PrefixLen = binary.LittleEndian.Uint16(data)
		data = data[2:]
	}
	if dst.Flags&XLHUpdateSuffixFromOld != 0 {
		if len(data) < 2 {
			return errorf(rec.LSN, KindCorrupt, "%s: block 0 data too short for the suffix length", what)
		}
		dst.SuffixLen = binary.LittleEndian.Uint16(data)
		data = data[2:]
	}
	if err := dst.NewTuple.decode(rec.LSN, what, data); err != nil {
		return err
	}
	dst.HasNewTuple = true
	return nil
}

// NewUserData appends the new tuple's complete user data to dst and returns
// it: PrefixLen bytes from the start of oldUserData, the logged bytes, then
// SuffixLen bytes from the end of oldUserData (heap_xlog_update). oldUserData
// is the old tuple's user data (from t_hoff), read from the page the update
// was applied to; it is ignored when neither prefix nor suffix is set.
func (src *HeapUpdate) NewUserData(dst, oldUserData []byte) ([]byte, error) {
	if !src.HasNewTuple {
		return dst, errorf(src.lsn, KindCorrupt, "heap update: new tuple not logged")
	}
	p, s := int(src.PrefixLen), int(src.SuffixLen)
	if p+s > len(oldUserData) {
		return dst, errorf(src.lsn, KindCorrupt, "heap update: prefix %d + suffix %d exceed old user data of %d bytes", p, s, len(oldUserData))
	}
	dst = append(dst, oldUserData[:p]...)
	dst = append(dst, src.NewTuple.UserData()...)
	return append(dst, oldUserData[len(oldUserData)-s:]...), nil
}
