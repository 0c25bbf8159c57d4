package wal

import (
	"encoding/binary"
	"hash/crc32"
)

// DecodeRecord parses raw, one complete record of exactly xl_tot_len bytes
// starting at lsn, into rec: header, block references and main data
// (DecodeXLogRecord). The CRC is verified first. rec.Blocks is reused; the
// slices in rec alias raw. rec.End and rec.Next are left to the caller, who
// knows the page geometry.
func DecodeRecord(raw []byte, lsn LSN, layout *Layout, rec *Record) error {
	h, err := DecodeRecordHeader(raw)
	if err != nil {
		return &Error{LSN: lsn, Kind: KindCorrupt, Msg: "short record", Err: err}
	}
	if int(h.TotLen) != len(raw) {
		return errorf(lsn, KindCorrupt, "record length %d does not match %d bytes given", h.TotLen, len(raw))
	}
	if !h.RmID.Valid() {
		return errorf(lsn, KindCorrupt, "invalid resource manager id %d", h.RmID)
	}
	if crc := RecordCRC(raw); crc != h.CRC {
		return errorf(lsn, KindCRC, "incorrect resource manager data checksum: computed %08X, stored %08X (rmgr %s, length %d)", crc, h.CRC, h.RmID, h.TotLen)
	}
	rec.LSN = lsn
	rec.Header = h
	rec.Layout = layout
	rec.Raw = raw
	return decodeRecordBody(rec)
}

// RecordCRC computes a record's CRC-32C: the payload after the header, then
// the header up to xl_crc (ValidXLogRecord).
func RecordCRC(raw []byte) uint32 {
	c := crc32.Update(0, castagnoli, raw[RecordHeaderSize:])
	return crc32.Update(c, castagnoli, raw[:20])
}

// decodeRecordBody parses the headers that follow XLogRecord and slices the
// payload. rec.Raw, rec.LSN and rec.Header must be set.
func decodeRecordBody(rec *Record) error {
	raw := rec.Raw
	lsn := rec.LSN
	rec.Blocks = rec.Blocks[:0]
	rec.MainData = nil
	rec.HasOrigin = false
	rec.Origin = 0
	rec.TopLevelXID = 0

	pos := RecordHeaderSize
	remaining := len(raw) - RecordHeaderSize
	datatotal := 0
	mainLen := 0
	var lastRel RelFileNode
	haveRel := false
	maxID := -1

	for remaining > datatotal {
		id := raw[pos]
		pos++
		remaining--
		switch {
		case id == XLRBlockIDDataShort:
			if remaining < 1 {
				return tooShort(lsn, "main data length", pos)
			}
			mainLen = int(raw[pos])
			pos++
			remaining--
			datatotal += mainLen
			goto payload
		case id == XLRBlockIDDataLong:
			if remaining < 4 {
				return tooShort(lsn, "main data length", pos)
			}
			mainLen = int(binary.LittleEndian.Uint32(raw[pos:]))
			if mainLen < 0 || mainLen > len(raw) {
				return errorf(lsn, KindCorrupt, "main data length %d exceeds record length %d", mainLen, len(raw))
			}
			pos += 4
			remaining -= 4
			datatotal += mainLen
			goto payload
		case id == XLRBlockIDOrigin:
			if remaining < 2 {
				return tooShort(lsn, "replication origin", pos)
			}
			rec.Origin = binary.LittleEndian.Uint16(raw[pos:])
			rec.HasOrigin = true
			pos += 2
			remaining -= 2
		case id == XLRBlockIDTopLevelXID:
			if remaining < 4 {
				return tooShort(lsn, "toplevel xid", pos)
			}
			rec.TopLevelXID = binary.LittleEndian.Uint32(raw[pos:])
			pos += 4
			remaining -= 4
		case id <= XLRMaxBlockID:
			if int(id) <= maxID {
				return errorf(lsn, KindCorrupt, "out-of-order block_id %d", id)
			}
			maxID = int(id)
			if remaining < 3 {
				return tooShort(lsn, "block header", pos)
			}
			// Decode in place: BlockRef is large enough that copying it in
			// with append shows up in profiles.
			n := len(rec.Blocks)
			if n < cap(rec.Blocks) {
				rec.Blocks = rec.Blocks[:n+1]
			} else {
				rec.Blocks = append(rec.Blocks, BlockRef{})
			}
			b := &rec.Blocks[n]
			*b = BlockRef{ID: id, ForkFlags: raw[pos]}
			dataLen := int(binary.LittleEndian.Uint16(raw[pos+1:]))
			pos += 3
			remaining -= 3
			if b.HasData() && dataLen == 0 {
				return errorf(lsn, KindCorrupt, "BKPBLOCK_HAS_DATA set, but no data included (block %d)", id)
			}
			if !b.HasData() && dataLen != 0 {
				return errorf(lsn, KindCorrupt, "BKPBLOCK_HAS_DATA not set, but data length is %d (block %d)", dataLen, id)
			}
			datatotal += dataLen
			imgLen := 0
			if b.HasImage() {
				if remaining < 5 {
					return tooShort(lsn, "block image header", pos)
				}
				im := BlockImage{
					Length:     binary.LittleEndian.Uint16(raw[pos:]),
					HoleOffset: binary.LittleEndian.Uint16(raw[pos+2:]),
					Info:       raw[pos+4],
				}
				pos += 5
				remaining -= 5
				if im.Compressed() {
					if im.Info&BkpImageHasHole != 0 {
						if remaining < 2 {
							return tooShort(lsn, "block image hole length", pos)
						}
						im.HoleLength = binary.LittleEndian.Uint16(raw[pos:])
						pos += 2
						remaining -= 2
					}
				} else {
					im.HoleLength = uint16(BlockSize - int(im.Length))
				}
				if err := checkImageHeader(lsn, id, im); err != nil {
					return err
				}
				imgLen = int(im.Length)
				datatotal += imgLen
				b.Image = im
			}
			if b.ForkFlags&BkpBlockSameRel == 0 {
				if remaining < 12 {
					return tooShort(lsn, "block relfilenode", pos)
				}
				lastRel = DecodeRelFileNode(raw[pos:])
				haveRel = true
				pos += 12
				remaining -= 12
			} else if !haveRel {
				return errorf(lsn, KindCorrupt, "BKPBLOCK_SAME_REL set but no previous rel (block %d)", id)
			}
			b.Rel = lastRel
			if remaining < 4 {
				return tooShort(lsn, "block number", pos)
			}
			b.BlockNum = binary.LittleEndian.Uint32(raw[pos:])
			pos += 4
			remaining -= 4
			b.dataLen = uint16(dataLen)
		default:
			return errorf(lsn, KindCorrupt, "invalid block_id %d", id)
		}
	}
payload:
	if remaining != datatotal {
		return errorf(lsn, KindCorrupt, "record length mismatch: %d payload bytes remain, headers describe %d", remaining, datatotal)
	}
	for i := range rec.Blocks {
		b := &rec.Blocks[i]
		if b.HasImage() {
			n := int(b.Image.Length)
			b.ImageData = raw[pos : pos+n : pos+n]
			pos += n
		}
		if n := int(b.dataLen); n > 0 {
			b.Data = raw[pos : pos+n : pos+n]
			pos += n
		}
	}
	if mainLen > 0 {
		rec.MainData = raw[pos : pos+mainLen : pos+mainLen]
	}
	return nil
}

func tooShort(lsn LSN, what string, pos int) *Error {
	return errorf(lsn, KindCorrupt, "record too short reading %s at offset %d", what, pos)
}

// checkImageHeader applies DecodeXLogRecord's consistency checks.
func checkImageHeader(lsn LSN, id uint8, im BlockImage) error {
	hasHole := im.Info&BkpImageHasHole != 0
	switch {
	case hasHole && (im.HoleOffset == 0 || im.HoleLength == 0 || im.Length == BlockSize):
		return errorf(lsn, KindCorrupt, "BKPIMAGE_HAS_HOLE set, but hole offset %d length %d block image length %d (block %d)", im.HoleOffset, im.HoleLength, im.Length, id)
	case !hasHole && (im.HoleOffset != 0 || im.HoleLength != 0):
		return errorf(lsn, KindCorrupt, "BKPIMAGE_HAS_HOLE not set, but hole offset %d length %d (block %d)", im.HoleOffset, im.HoleLength, id)
	case im.Compressed() && im.Length == BlockSize:
		return errorf(lsn, KindCorrupt, "BKPIMAGE_COMPRESSED set, but block image length %d (block %d)", im.Length, id)
	case !hasHole && !im.Compressed() && im.Length != BlockSize:
		return errorf(lsn, KindCorrupt, "neither BKPIMAGE_HAS_HOLE nor BKPIMAGE_COMPRESSED set, but block image length is %d (block %d)", im.Length, id)
	case int(im.HoleOffset)+int(im.HoleLength) > BlockSize:
		return errorf(lsn, KindCorrupt, "block image hole %d+%d exceeds the page (block %d)", im.HoleOffset, im.HoleLength, id)
	}
	return nil
}
