package wal

import (
	"encoding/binary"
	"hash/crc32"
)

// RelMapperFileMagic is RELMAPPER_FILEMAGIC, the first word of a
// pg_filenode.map file.
const RelMapperFileMagic = 0x592717

// The file is magic and num_mappings, the mappings, then the CRC: PG15
// sizes it for MAX_MAPPINGS = 62 and pads it to 512 bytes with a word
// after the CRC; 16 and later size it for 64 with no pad (524 bytes)
// (RelMapFile in utils/cache/relmapper.c). The two differ by 4 bytes mod
// 8, so the size tells them apart.
const (
	relMapFileHeader     = 8
	relMapFileOverhead15 = relMapFileHeader + 8 // crc + pad
	relMapFileOverhead16 = relMapFileHeader + 4 // crc
)

// relMappingSize is sizeof(RelMapping): {mapoid, mapfilenode}.
const relMappingSize = 8

// RelMapping maps a mapped catalog's OID to its current relfilenode.
type RelMapping struct {
	MapOid      uint32
	MapFileNode uint32 // mapfilenumber in 16+
}

// RelMapFile is the content of a pg_filenode.map file: the relfilenodes of
// the mapped catalogs (pg_class, pg_attribute, shared catalogs, their
// indexes, ...), whose pg_class.relfilenode is 0. PG15 sizes the file for
// MAX_MAPPINGS = 62 entries (512 bytes), 16 and later for 64 (524 bytes);
// the decoder derives the layout and capacity from the size it is given
// instead of assuming them. Mappings alias the input.
type RelMapFile struct {
	Magic       uint32
	NumMappings int
	Capacity    int // MAX_MAPPINGS of the writer
	CRC         uint32
	b           []byte // the NumMappings valid entries
}

// Len returns the number of valid mappings.
func (src *RelMapFile) Len() int { return len(src.b) / relMappingSize }

// At returns the i-th mapping; it panics if i is out of range.
func (src *RelMapFile) At(i int) RelMapping {
	p := src.b[i*relMappingSize:]
	return RelMapping{
		MapOid:      binary.LittleEndian.Uint32(p[0:]),
		MapFileNode: binary.LittleEndian.Uint32(p[4:]),
	}
}

// Lookup returns the relfilenode of the mapped catalog with OID oid.
func (src *RelMapFile) Lookup(oid uint32) (fileNode uint32, ok bool) {
	for i := 0; i < len(src.b); i += relMappingSize {
		if binary.LittleEndian.Uint32(src.b[i:]) == oid {
			return binary.LittleEndian.Uint32(src.b[i+4:]), true
		}
	}
	return 0, false
}

// Decode parses a whole pg_filenode.map image (for example read from a base
// backup) and verifies magic, count and CRC-32C. Errors are *Error with LSN 0.
func (dst *RelMapFile) Decode(src []byte) error {
	return dst.decode(src, 0, "relmap file")
}

func (dst *RelMapFile) decode(src []byte, lsn LSN, what string) error {
	*dst = RelMapFile{}
	n := len(src)
	overhead := relMapFileOverhead15
	if n >= relMapFileOverhead16 && (n-relMapFileOverhead16)%relMappingSize == 0 {
		overhead = relMapFileOverhead16
	} else if n < relMapFileOverhead15 || (n-relMapFileOverhead15)%relMappingSize != 0 {
		return errorf(lsn, KindCorrupt, "%s: size %d is neither %d + %d*n bytes (PostgreSQL 15) nor %d + %d*n (16 and later)",
			what, n, relMapFileOverhead15, relMappingSize, relMapFileOverhead16, relMappingSize)
	}
	dst.Magic = binary.LittleEndian.Uint32(src[0:])
	if dst.Magic != RelMapperFileMagic {
		return errorf(lsn, KindCorrupt, "%s: magic 0x%X, want 0x%X", what, dst.Magic, RelMapperFileMagic)
	}
	dst.Capacity = (n - overhead) / relMappingSize
	num := int32(binary.LittleEndian.Uint32(src[4:]))
	if num < 0 || int(num) > dst.Capacity {
		return errorf(lsn, KindCorrupt, "%s: %d mappings, capacity %d", what, num, dst.Capacity)
	}
	dst.NumMappings = int(num)
	crcOff := relMapFileHeader + dst.Capacity*relMappingSize // the CRC (and 15's pad) close the file
	dst.CRC = binary.LittleEndian.Uint32(src[crcOff:])
	if crc := crc32.Checksum(src[:crcOff], castagnoli); crc != dst.CRC {
		return errorf(lsn, KindCorrupt, "%s: CRC %08X, computed %08X", what, dst.CRC, crc)
	}
	end := 8 + dst.NumMappings*relMappingSize
	dst.b = src[8:end:end]
	return nil
}
