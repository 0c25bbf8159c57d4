package wal

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"unsafe"
)

// Sizes fixed by the WAL format (xlogrecord.h, xlog_internal.h).
const (
	RecordHeaderSize   = 24 // SizeOfXLogRecord
	ShortPageHeaderLen = 24 // SizeOfXLogShortPHD
	LongPageHeaderLen  = 40 // SizeOfXLogLongPHD
	BlockSize          = 8192
	DefaultSegmentSize = 16 * 1024 * 1024

	XLRInfoMask             = 0x0F // generic bits of xl_info
	XLRRmgrInfoMask         = 0xF0 // rmgr-owned bits of xl_info
	XLRSpecialRelUpdate     = 0x01
	XLRCheckConsistency     = 0x02
	XLRMaxBlockID           = 32
	XLRBlockIDDataShort     = 255
	XLRBlockIDDataLong      = 254
	XLRBlockIDOrigin        = 253
	XLRBlockIDTopLevelXID   = 252
	BkpBlockForkMask        = 0x0F
	BkpBlockHasImage        = 0x10
	BkpBlockHasData         = 0x20
	BkpBlockWillInit        = 0x40
	BkpBlockSameRel         = 0x80
	BkpImageHasHole         = 0x01
	BkpImageApply           = 0x02
	BkpImageCompressPGLZ    = 0x04
	BkpImageCompressLZ4     = 0x08
	BkpImageCompressZstd    = 0x10
	bkpImageCompressAnyMask = BkpImageCompressPGLZ | BkpImageCompressLZ4 | BkpImageCompressZstd
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// RecordHeader is XLogRecord, the fixed 24-byte record header.
type RecordHeader struct {
	TotLen uint32 // xl_tot_len: the whole record, headers included
	XID    uint32 // xl_xid: (sub)transaction id, 0 if none
	Prev   LSN    // xl_prev: start of the previous record
	Info   uint8  // xl_info: low 4 bits generic, high 4 bits the rmgr's
	RmID   RmgrID // xl_rmid
	CRC    uint32 // xl_crc: CRC-32C of [24,tot_len) then [0,20)
}

// DecodeRecordHeader reads the 24-byte header at the start of src.
func DecodeRecordHeader(src []byte) (RecordHeader, error) {
	if len(src) < RecordHeaderSize {
		return RecordHeader{}, fmt.Errorf("record header needs %d bytes, have %d", RecordHeaderSize, len(src))
	}
	return RecordHeader{
		TotLen: binary.LittleEndian.Uint32(src[0:]),
		XID:    binary.LittleEndian.Uint32(src[4:]),
		Prev:   LSN(binary.LittleEndian.Uint64(src[8:])),
		Info:   src[16],
		RmID:   RmgrID(src[17]),
		CRC:    binary.LittleEndian.Uint32(src[20:]),
	}, nil
}

// RelFileNode names a relation's storage (RelFileNode in 15, RelFileLocator
// in 16+; same 12-byte layout).
type RelFileNode struct {
	SpcOid uint32
	DbOid  uint32
	RelNum uint32
}

func (r RelFileNode) String() string { return fmt.Sprintf("%d/%d/%d", r.SpcOid, r.DbOid, r.RelNum) }

// DecodeRelFileNode reads a 12-byte RelFileNode.
func DecodeRelFileNode(src []byte) RelFileNode {
	return RelFileNode{
		SpcOid: binary.LittleEndian.Uint32(src[0:]),
		DbOid:  binary.LittleEndian.Uint32(src[4:]),
		RelNum: binary.LittleEndian.Uint32(src[8:]),
	}
}

// ForkNumber is the relation fork a block belongs to.
type ForkNumber uint8

const (
	ForkMain ForkNumber = 0
	ForkFSM  ForkNumber = 1
	ForkVM   ForkNumber = 2
	ForkInit ForkNumber = 3
)

var forkNames = [...]string{"main", "fsm", "vm", "init"}

func (f ForkNumber) String() string {
	if int(f) < len(forkNames) {
		return forkNames[f]
	}
	return fmt.Sprintf("fork%d", uint8(f))
}

// BlockImage is XLogRecordBlockImageHeader plus the derived hole length.
type BlockImage struct {
	Length     uint16 // stored bytes (compressed size if compressed)
	HoleOffset uint16
	HoleLength uint16
	Info       uint8 // bimg_info
}

// Compressed reports whether the stored image is compressed.
func (im BlockImage) Compressed() bool { return im.Info&bkpImageCompressAnyMask != 0 }

// Apply reports whether redo applies the image (BKPIMAGE_APPLY).
func (im BlockImage) Apply() bool { return im.Info&BkpImageApply != 0 }

// BlockRef is one block reference of a record (DecodedBkpBlock). Byte slices
// alias the record's bytes.
type BlockRef struct {
	ID        uint8
	ForkFlags uint8 // fork number in the low nibble, BKPBLOCK_* flags above
	Rel       RelFileNode
	BlockNum  uint32
	Image     BlockImage // valid when HasImage()
	ImageData []byte     // stored (possibly compressed) image bytes
	Data      []byte     // block data (rmgr-specific), nil when absent

	dataLen uint16 // while decoding: the length of Data, before it is sliced
}

func (b *BlockRef) Fork() ForkNumber { return ForkNumber(b.ForkFlags & BkpBlockForkMask) }
func (b *BlockRef) HasImage() bool   { return b.ForkFlags&BkpBlockHasImage != 0 }
func (b *BlockRef) HasData() bool    { return b.ForkFlags&BkpBlockHasData != 0 }
func (b *BlockRef) WillInit() bool   { return b.ForkFlags&BkpBlockWillInit != 0 }

// Record is one decoded WAL record. Raw, MainData and the slices in Blocks
// alias memory owned by the reader that produced the record: they stay valid
// only until the next call to that reader. Clone copies them out.
type Record struct {
	LSN LSN // ReadRecPtr: where the record starts
	End LSN // the byte after its last byte (page headers crossed counted)
	// Next is where the following record starts: MAXALIGN(End), or the next
	// segment after XLOG_SWITCH. It is PostgreSQL's EndRecPtr, the value
	// pg_last_wal_replay_lsn() reports once a standby has replayed the record.
	Next   LSN
	Header RecordHeader
	Layout *Layout

	Raw         []byte // the whole record, contiguous, len == Header.TotLen
	Blocks      []BlockRef
	MainData    []byte
	Origin      uint16 // replication origin; valid when HasOrigin
	HasOrigin   bool
	TopLevelXID uint32 // XLR_BLOCK_ID_TOPLEVEL_XID, 0 when absent
}

// RmgrInfo returns the rmgr-owned high bits of xl_info.
func (r *Record) RmgrInfo() uint8 { return r.Header.Info & XLRRmgrInfoMask }

// Block returns the block reference with the given id, or nil.
func (r *Record) Block(id uint8) *BlockRef {
	for i := range r.Blocks {
		if r.Blocks[i].ID == id {
			return &r.Blocks[i]
		}
	}
	return nil
}

// FPIBytes returns the stored size of all full-page images in the record,
// the "FPI size" pg_waldump --stats reports.
func (r *Record) FPIBytes() (n int, count int) {
	for i := range r.Blocks {
		if r.Blocks[i].HasImage() {
			n += int(r.Blocks[i].Image.Length)
			count++
		}
	}
	return n, count
}

// Clone returns a deep copy that does not alias reader memory. The
// decoded slices are moved onto the copy of Raw they point into (re-decoding
// the body would do the same work again).
func (r *Record) Clone() *Record {
	c := *r
	c.Raw = append([]byte(nil), r.Raw...)
	var blocks []BlockRef
	if r.Blocks != nil {
		blocks = append([]BlockRef(nil), r.Blocks...)
	}
	if c.rebaseOnto(r.Raw, blocks) {
		return &c
	}
	c.Blocks = nil
	if err := decodeRecordBody(&c); err != nil {
		// r decoded from the same bytes, so this cannot fail.
		panic("wal: re-decoding a cloned record: " + err.Error())
	}
	return &c
}

// rebaseOnto points c's decoded slices, which point into from, at the same
// bytes of c.Raw (a copy of from), on blocks (a copy of c.Blocks of its
// own); false when one of them is not within from.
func (c *Record) rebaseOnto(from []byte, blocks []BlockRef) bool {
	var ok bool
	if c.MainData, ok = rebaseSlice(c.MainData, from, c.Raw); !ok {
		return false
	}
	c.Blocks = blocks
	for i := range c.Blocks {
		b := &c.Blocks[i]
		if b.ImageData, ok = rebaseSlice(b.ImageData, from, c.Raw); !ok {
			return false
		}
		if b.Data, ok = rebaseSlice(b.Data, from, c.Raw); !ok {
			return false
		}
	}
	return true
}

// rebaseSlice is the part of to at s's offset within from (nil stays nil).
func rebaseSlice(s, from, to []byte) ([]byte, bool) {
	if s == nil {
		return nil, true
	}
	if len(from) == 0 || len(to) != len(from) {
		return nil, false
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(from)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	if p < base || p-base > uintptr(len(from)) || uintptr(len(s)) > uintptr(len(from))-(p-base) {
		return nil, false
	}
	off := int(p - base)
	return to[off : off+len(s) : off+len(s)], true
}
