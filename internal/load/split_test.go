package load

import (
	"testing"
)

func TestSplitBlocksProperties(t *testing.T) {
	const mb = 1 << 20
	for _, c := range []struct {
		relPages uint32
		target   int64
	}{
		{2, 64 * mb}, {8191, 64 * mb}, {8192, 64 * mb}, {8193, 64 * mb}, {100_000, 64 * mb},
		{100_000, 1 << 30}, {1_000_003, 8 * mb}, {1 << 31, 1 << 30}, {^uint32(0), 1 << 30},
		{10, 8192}, {10, 100}, {17, 3 * 8192},
	} {
		ranges := SplitBlocks(c.relPages, c.target)
		perRange := max(c.target/BlockSize, 1)
		if len(ranges) == 0 || ranges[0].From != 0 || ranges[len(ranges)-1].To != 0 {
			t.Fatalf("%d pages / %d: %v: want a first range from 0 and an open last one", c.relPages, c.target, ranges)
		}
		for i := 1; i < len(ranges); i++ {
			if ranges[i].From != ranges[i-1].To || ranges[i].From <= ranges[i-1].From {
				t.Fatalf("%d pages / %d: ranges %d and %d not contiguous: %v %v", c.relPages, c.target, i-1, i, ranges[i-1], ranges[i])
			}
		}
		// Sizes, the open last range measured to relPages: between half
		// the target and the target, in whole blocks.
		for i, r := range ranges {
			to := int64(r.To)
			if r.To == 0 {
				to = int64(c.relPages)
			}
			size := to - int64(r.From)
			if size > perRange || (len(ranges) > 1 && size < perRange/2) {
				t.Fatalf("%d pages / %d: range %d %v holds %d blocks, want %d/2..%d", c.relPages, c.target, i, r, size, perRange, perRange)
			}
		}
		wantN := (int64(c.relPages) + perRange - 1) / perRange
		if int64(len(ranges)) != wantN {
			t.Fatalf("%d pages / %d: %d ranges, want %d", c.relPages, c.target, len(ranges), wantN)
		}
	}
}

func TestSplitBlocksSingleRange(t *testing.T) {
	for _, c := range []struct {
		relPages uint32
		target   int64
	}{{0, 1 << 20}, {128, 1 << 20}, {1 << 20, 0}, {1 << 20, -5}} {
		if got := SplitBlocks(c.relPages, c.target); len(got) != 1 || got[0] != (CtidRange{}) || got[0].Where() != "" {
			t.Errorf("SplitBlocks(%d, %d) = %v, want the whole table", c.relPages, c.target, got)
		}
	}
}

func TestSplitBlocksBoundsRangeCount(t *testing.T) {
	ranges := SplitBlocks(^uint32(0), 1)
	if len(ranges) != maxRanges || ranges[len(ranges)-1].To != 0 || ranges[1].From != ranges[0].To {
		t.Fatalf("%d ranges for 2^32 blocks of 1 byte target, want %d contiguous", len(ranges), maxRanges)
	}
}

func TestCtidRangeWhere(t *testing.T) {
	for r, want := range map[CtidRange]string{
		{0, 0}:       "",
		{0, 128}:     "ctid < '(128,0)'::tid",
		{128, 256}:   "ctid >= '(128,0)'::tid AND ctid < '(256,0)'::tid",
		{4096, 0}:    "ctid >= '(4096,0)'::tid",
		{1 << 31, 0}: "ctid >= '(2147483648,0)'::tid",
	} {
		if got := r.Where(); got != want {
			t.Errorf("%v.Where() = %q, want %q", r, got, want)
		}
	}
}
