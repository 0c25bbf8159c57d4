package wal

import (
	"encoding/binary"
	"hash/crc32"
)

// RelMapperFileMagic is RELMAPPER_FILEMAGIC, the first word of a
// pg_filenode.map file.
const RelMapperFileMagic = 0x592717

// relMapFileOverhead is magic + num_mappings before the mappings and
// crc + pad after them (RelMapFile in utils/cache/relmapper.c).
const relMapFileOverhead = 16

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
// MAX_MAPPINGS = 62 entries (512 bytes); the decoder derives the capacity
// from the size it is given instead of assuming it, so a version with a
// different MAX_MAPPINGS still parses. Mappings alias the input.
type RelMapFile struct {
	Magic       uint32
	NumMappings int
	Capacity    int // MAX_MAPPINGS of the writer: (size - 16) / 8
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
	if n < relMapFileOverhead || (n-relMapFileOverhead)%relMappingSize != 0 {
		return errorf(lsn, KindCorrupt, "%s: size %d is not %d + %d*n bytes", what, n, relMapFileOverhead, relMappingSize)
	}
	dst.Magic = binary.LittleEndian.Uint32(src[0:])
	if dst.Magic != RelMapperFileMagic {
		return errorf(lsn, KindCorrupt, "%s: magic 0x%X, want 0x%X", what, dst.Magic, RelMapperFileMagic)
	}
	dst.Capacity = (n - relMapFileOverhead) / relMappingSize
	num := int32(binary.LittleEndian.Uint32(src[4:]))
	if num < 0 || int(num) > dst.Capacity {
		return errorf(lsn, KindCorrupt, "%s: %d mappings, capacity %d", what, num, dst.Capacity)
	}
	dst.NumMappings = int(num)
	crcOff := n - 8 // crc and pad close the file
	dst.CRC = binary.LittleEndian.Uint32(src[crcOff:])
	if crc := crc32.Checksum(src[:crcOff], castagnoli); crc != dst.CRC {
		return errorf(lsn, KindCorrupt, "%s: CRC %08X, computed %08X", what, dst.CRC, crc)
	}
	end := 8 + dst.NumMappings*relMappingSize
	dst.b = src[8:end:end]
	return nil
}
