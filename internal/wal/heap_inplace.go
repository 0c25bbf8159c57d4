package wal

import "encoding/binary"

// HeapInplace is XLOG_HEAP_INPLACE: an in-place overwrite of a catalog tuple's
// user data (VACUUM's pg_class statistics, pg_database.datfrozenxid, ...),
// same length, no new tuple version.
type HeapInplace struct {
	Rel    RelFileNode
	Block  uint32
	OffNum uint16

	// HasTuple is false when block 0 has a full-page image, which drops the
	// data: the new contents are then only in the image.
	HasTuple bool
	// UserData is the tuple's new bytes from t_hoff to its end; the header,
	// bitmap and length are unchanged.
	UserData []byte

	// PostgreSQL 18 logs the catalog invalidations with the record
	// (Layout.InplaceCarriesInvals); zero before 18.
	DbID                  uint32
	TsID                  uint32
	RelcacheInitFileInval bool
	// InvalMsgs holds NumInvalMsgs raw 16-byte SharedInvalidationMessages.
	NumInvalMsgs int
	InvalMsgs    []byte
}

func (*HeapInplace) walBody() {}

// Decode parses rec, an XLOG_HEAP_INPLACE record, per rec.Layout. The byte
// slices alias rec.
func (dst *HeapInplace) Decode(rec *Record) error {
	const what = "heap inplace"
	if err := heapCheckOp(rec, what, RmgrHeap, XLogHeapInplace); err != nil {
		return err
	}
	*dst = HeapInplace{}
	if rec.Layout == nil {
		return errorf(rec.LSN, KindUnsupported, "%s: record has no layout (PostgreSQL major)", what)
	}
	md := rec.MainData
	if !rec.Layout.InplaceCarriesInvals {
		if len(md) != sizeOfHeapInplace {
			return errorf(rec.LSN, KindCorrupt, "%s: main data %d bytes, want %d", what, len(md), sizeOfHeapInplace)
		}
	} else {
		if len(md) < minSizeOfHeapInplace18 {
			return errorf(rec.LSN, KindCorrupt, "%s: main data %d bytes, want >= %d", what, len(md), minSizeOfHeapInplace18)
		}
		n := int32(binary.LittleEndian.Uint32(md[16:]))
		if n < 0 || int64(len(md)-minSizeOfHeapInplace18) != int64(n)*heapInvalMsgSize {
			return errorf(rec.LSN, KindCorrupt, "%s: nmsgs %d needs %d bytes of messages, main data has %d", what, n, int64(n)*heapInvalMsgSize, len(md)-minSizeOfHeapInplace18)
		}
		dst.DbID = binary.LittleEndian.Uint32(md[4:])
		dst.TsID = binary.LittleEndian.Uint32(md[8:])
		dst.RelcacheInitFileInval = md[12] != 0
		dst.NumInvalMsgs = int(n)
		if n > 0 {
			dst.InvalMsgs = md[minSizeOfHeapInplace18:]
		}
	}
	dst.OffNum = binary.LittleEndian.Uint16(md[0:])
	b, err := heapBlock0(rec, what)
	if err != nil {
		return err
	}
	dst.Rel, dst.Block = b.Rel, b.BlockNum
	dst.UserData = b.Data
	dst.HasTuple = len(b.Data) > 0
	return nil
}

// InvalMsg returns the i-th raw 16-byte SharedInvalidationMessage.
func (src *HeapInplace) InvalMsg(i int) []byte {
	return src.InvalMsgs[i*heapInvalMsgSize : (i+1)*heapInvalMsgSize : (i+1)*heapInvalMsgSize]
}
