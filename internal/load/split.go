package load

import "fmt"

// BlockSize is PostgreSQL's heap page size (BLCKSZ as built by default).
const BlockSize = 8192

// maxRanges bounds SplitBlocks' output: an absurdly small target widens
// the ranges instead of exhausting memory on billions of them.
const maxRanges = 1 << 20

// CtidRange is a block range [From, To) of a heap; To == 0 means to the
// end of the relation.
type CtidRange struct{ From, To uint32 }

// Where is the SQL condition selecting the range's rows ("" for the whole
// table). PostgreSQL 14 and later run it as a TID range scan.
func (r CtidRange) Where() string {
	switch {
	case r.From == 0 && r.To == 0:
		return ""
	case r.To == 0:
		return fmt.Sprintf("ctid >= '(%d,0)'::tid", r.From)
	case r.From == 0:
		return fmt.Sprintf("ctid < '(%d,0)'::tid", r.To)
	default:
		return fmt.Sprintf("ctid >= '(%d,0)'::tid AND ctid < '(%d,0)'::tid", r.From, r.To)
	}
}

// SplitBlocks cuts a heap of relPages 8 KiB blocks into ranges of about
// targetBytes each, in block order from 0: every range holds at most
// targetBytes rounded down to whole blocks (one block at least) and about
// half of that at the least, as the blocks are shared out evenly. The last range is open-ended, so pages added after
// relPages was read are not missed. A table of at most targetBytes, or a
// targetBytes ≤ 0, is one range {0, 0}. There are at most 2^20 ranges.
func SplitBlocks(relPages uint32, targetBytes int64) []CtidRange {
	if targetBytes <= 0 || int64(relPages)*BlockSize <= targetBytes {
		return []CtidRange{{}}
	}
	perRange := max(targetBytes/BlockSize, 1)
	n := (int64(relPages) + perRange - 1) / perRange
	n = min(n, maxRanges)
	// Even cuts: range sizes differ by one block at most, no tiny tail.
	ranges := make([]CtidRange, n)
	for i := range n {
		ranges[i] = CtidRange{From: uint32(i * int64(relPages) / n), To: uint32((i + 1) * int64(relPages) / n)}
	}
	ranges[n-1].To = 0
	return ranges
}
