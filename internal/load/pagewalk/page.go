// Package pagewalk is the base_backup initial load: it reads the heap files
// of the target relations out of a BASE_BACKUP tar stream page by page,
// decodes each tuple with the WAL path's decoder (decode.PageRows) and emits
// only the rows a visibility gate built from the backup's own pg_xact and
// pg_multixact proves committed and not deleted. It is pure: no I/O but the
// tar stream and an optional spill directory.
package pagewalk

import (
	"encoding/binary"
	"fmt"
)

// Page layout (storage/bufpage.h, storage/itemid.h).
const (
	BlockSize = 8192
	// pageHeaderSize is SizeOfPageHeaderData: pd_lsn 8, pd_checksum 2,
	// pd_flags 2, pd_lower 2, pd_upper 2, pd_special 2,
	// pd_pagesize_version 2, pd_prune_xid 4.
	pageHeaderSize   = 24
	itemIDSize       = 4
	pageLayoutV4     = 4
	pdValidFlagBits  = 0x0007
	tupleHeaderSize  = 23 // SizeofHeapTupleHeader
	maxAlign         = 8
	blocksPerSegment = 131072 // RELSEG_SIZE: 1 GiB of 8 KiB blocks

	lpUnused   = 0
	lpNormal   = 1
	lpRedirect = 2
	lpDead     = 3
)

// PageError is a page or item that cannot be trusted. The walk fails on it
// rather than skipping rows silently.
type PageError struct {
	File  string // the relation file's path in the archive
	Block uint32 // block number within the relation
	Item  int    // 1-based line pointer; 0 for the page header
	Msg   string
}

func (e *PageError) Error() string {
	if e.Item == 0 {
		return fmt.Sprintf("relation file %s block %d: %s", e.File, e.Block, e.Msg)
	}
	return fmt.Sprintf("relation file %s block %d item %d: %s", e.File, e.Block, e.Item, e.Msg)
}

// Page is one parsed heap page; it aliases the caller's buffer.
type Page struct {
	b        []byte
	Checksum uint16
	Flags    uint16
	Lower    uint16
	Upper    uint16
	Special  uint16
}

// ParsePage checks an 8 KiB page's header. isNew reports an all-zero page
// (extended but never initialized), which holds no tuples. A page whose
// header is inconsistent, or a new page that is not all zeros, is an
// error; file and block only name it.
func ParsePage(b []byte, file string, block uint32) (p Page, isNew bool, err error) {
	if len(b) != BlockSize {
		return Page{}, false, &PageError{File: file, Block: block, Msg: fmt.Sprintf("page of %d bytes, want %d", len(b), BlockSize)}
	}
	p = Page{
		b:        b,
		Checksum: binary.LittleEndian.Uint16(b[8:]),
		Flags:    binary.LittleEndian.Uint16(b[10:]),
		Lower:    binary.LittleEndian.Uint16(b[12:]),
		Upper:    binary.LittleEndian.Uint16(b[14:]),
		Special:  binary.LittleEndian.Uint16(b[16:]),
	}
	if p.Upper == 0 { // PageIsNew
		for i, c := range b {
			if c != 0 {
				return Page{}, false, &PageError{File: file, Block: block, Msg: fmt.Sprintf("pd_upper is 0 (new page) but byte %d is %#x, not zero", i, c)}
			}
		}
		return p, true, nil
	}
	sizeVersion := binary.LittleEndian.Uint16(b[18:])
	switch {
	case sizeVersion != BlockSize|pageLayoutV4:
		err = fmt.Errorf("pd_pagesize_version %#x, want %#x", sizeVersion, BlockSize|pageLayoutV4)
	case p.Flags&^pdValidFlagBits != 0:
		err = fmt.Errorf("pd_flags %#x has unknown bits", p.Flags)
	case p.Lower < pageHeaderSize || p.Lower > p.Upper || p.Upper > p.Special || int(p.Special) > BlockSize:
		err = fmt.Errorf("pd_lower %d, pd_upper %d, pd_special %d out of order", p.Lower, p.Upper, p.Special)
	case p.Special%maxAlign != 0:
		err = fmt.Errorf("pd_special %d is not MAXALIGNed", p.Special)
	}
	if err != nil {
		return Page{}, false, &PageError{File: file, Block: block, Msg: err.Error()}
	}
	return p, false, nil
}

// NumItems is the number of line pointers, (pd_lower - 24) / 4.
func (p Page) NumItems() int { return (int(p.Lower) - pageHeaderSize) / itemIDSize }

// item decodes line pointer i (1-based): ItemIdData is a 32-bit word of
// bitfields lp_off:15, lp_flags:2, lp_len:15 from the least significant
// bit up, as GCC lays them out on a little-endian machine.
func (p Page) item(i int) (off, flags, length int) {
	w := binary.LittleEndian.Uint32(p.b[pageHeaderSize+(i-1)*itemIDSize:])
	return int(w & 0x7FFF), int(w>>15) & 3, int(w >> 17)
}

// Tuple returns the bytes of line pointer i (1-based) when it is LP_NORMAL
// (ok false for unused, redirect and dead items). An LP_NORMAL item outside
// the page's tuple space or shorter than a tuple header is an error.
func (p Page) Tuple(i int, file string, block uint32) (tup []byte, ok bool, err error) {
	off, flags, length := p.item(i)
	if flags != lpNormal {
		return nil, false, nil
	}
	switch {
	case length < tupleHeaderSize:
		err = fmt.Errorf("LP_NORMAL item of %d bytes, shorter than the %d-byte tuple header", length, tupleHeaderSize)
	case off < int(p.Upper) || off+length > int(p.Special):
		err = fmt.Errorf("LP_NORMAL item [%d, %d) outside the tuple space [%d, %d)", off, off+length, p.Upper, p.Special)
	case off%maxAlign != 0:
		err = fmt.Errorf("LP_NORMAL item at offset %d is not MAXALIGNed", off)
	}
	if err != nil {
		return nil, false, &PageError{File: file, Block: block, Item: i, Msg: err.Error()}
	}
	return p.b[off : off+length : off+length], true, nil
}

// checksumBaseOffsets and the mixing below are pg_checksum_block
// (storage/checksum_impl.h).
var checksumBaseOffsets = [32]uint32{
	0x5B1F36E9, 0xB8525960, 0x02AB50AA, 0x1DE66D2A,
	0x79FF467A, 0x9BB9F8A3, 0x217E7CD2, 0x83E13D2C,
	0xF8D4474F, 0xE39EB970, 0x42C6AE16, 0x993216FA,
	0x7B093B5D, 0x98DAFF3C, 0xF718902A, 0x0B1C9CDB,
	0xE58F764B, 0x187636BC, 0x5D7B3BB1, 0xE73DE7DE,
	0x92BEC979, 0xCCA6C0B2, 0x304A0979, 0x85AA43D4,
	0x783125BB, 0x6CA8EAA2, 0xE407EAC6, 0x4B5CFC3E,
	0x9FBF8C76, 0x15CA20BE, 0xF2CA9FD3, 0x959BD756,
}

// PageChecksum is pg_checksum_page: the checksum of an initialized page at
// block blkno of its relation (segment offset included), pd_checksum
// taken as zero.
func PageChecksum(b []byte, blkno uint32) uint16 {
	const fnvPrime = 16777619
	sums := checksumBaseOffsets
	for i := 0; i < BlockSize/4; i += 32 {
		for j := 0; j < 32; j++ {
			v := binary.LittleEndian.Uint32(b[(i+j)*4:])
			if i+j == 2 { // bytes 8..11: pd_checksum (low half) and pd_flags
				v &^= 0xFFFF
			}
			tmp := sums[j] ^ v
			sums[j] = tmp*fnvPrime ^ tmp>>17
		}
	}
	for r := 0; r < 2; r++ {
		for j := range sums {
			tmp := sums[j]
			sums[j] = tmp*fnvPrime ^ tmp>>17
		}
	}
	var sum uint32
	for _, s := range sums {
		sum ^= s
	}
	sum ^= blkno
	return uint16(sum%65535 + 1)
}

// VerifyChecksum checks p's pd_checksum against its content (for a
// cluster with data checksums).
func (p Page) VerifyChecksum(file string, block uint32) error {
	if want := PageChecksum(p.b, block); want != p.Checksum {
		return &PageError{File: file, Block: block, Msg: fmt.Sprintf("checksum %#04x, computed %#04x (torn or corrupt page)", p.Checksum, want)}
	}
	return nil
}
