package wal

import (
	"strings"
	"testing"
)

// TestLayoutPickedByMagic reads synthetic WAL stamped with each supported
// major's page magic: the reader must pick that major's layout, and refuse
// a magic it does not know (PostgreSQL 14's, master's).
func TestLayoutPickedByMagic(t *testing.T) {
	for _, tc := range []struct {
		magic uint16
		major int
	}{{0xD110, 15}, {0xD113, 16}, {0xD116, 17}, {0xD118, 18}} {
		b := newWALBuilder(LSN(1 << 20))
		b.magic = tc.magic
		b.add(RmgrXLOG, 0x20, []byte{1, 2, 3})
		b.finishSegment()
		recs := readBytes(t, b.start, b.buf, 4096)
		if len(recs) != 1 || recs[0].Layout.Major != tc.major {
			t.Fatalf("magic %04X: %d records, layout %+v", tc.magic, len(recs), recs[0].Layout)
		}
	}
	for _, magic := range []uint16{0xD10D, 0xD120} {
		b := newWALBuilder(LSN(1 << 20))
		b.magic = magic
		b.add(RmgrXLOG, 0x20, []byte{1})
		b.finishSegment()
		_, err := readBytesErr(b.start, b.buf, 4096)
		if !IsKind(err, KindCorrupt) || !strings.Contains(err.Error(), "unsupported WAL page magic") {
			t.Fatalf("magic %04X: %v", magic, err)
		}
	}
}

func TestLayoutTables(t *testing.T) {
	want := map[int]Layout{
		15: {DroppedStatsItemSize: 12, HeapPruneFormat: 15, HeapFreezeFormat: 15},
		16: {DroppedStatsItemSize: 12, HeapPruneFormat: 16, HeapFreezeFormat: 16},
		17: {DroppedStatsItemSize: 12, HeapPruneFormat: 17, HasCheckpointRedo: true},
		18: {DroppedStatsItemSize: 16, HeapPruneFormat: 17, HasCheckpointRedo: true, InplaceCarriesInvals: true, HasRelSyncInval: true},
	}
	for major, w := range want {
		l, err := LayoutForMajor(major)
		if err != nil {
			t.Fatal(err)
		}
		if l.DroppedStatsItemSize != w.DroppedStatsItemSize || l.HeapPruneFormat != w.HeapPruneFormat ||
			l.HeapFreezeFormat != w.HeapFreezeFormat || l.HasCheckpointRedo != w.HasCheckpointRedo ||
			l.InplaceCarriesInvals != w.InplaceCarriesInvals || l.HasRelSyncInval != w.HasRelSyncInval {
			t.Errorf("PG%d layout %+v", major, l)
		}
		// 15–18 share the page flag bits; only master moved OVERWRITE_CONTRECORD.
		if l.XLPAllFlags != 0x000F || l.XLPOverwriteContrecord != 0x0008 {
			t.Errorf("PG%d page flags %04X %04X", major, l.XLPAllFlags, l.XLPOverwriteContrecord)
		}
		if byMagic, _ := LayoutForMagic(l.Magic); byMagic != l {
			t.Errorf("PG%d: magic %04X maps elsewhere", major, l.Magic)
		}
	}
	if _, err := LayoutForMajor(14); err == nil {
		t.Fatal("PostgreSQL 14 accepted")
	}
}

// TestPageInfoBitsRejected: an xlp_info bit outside XLP_ALL_FLAGS is corruption.
func TestPageInfoBitsRejected(t *testing.T) {
	b := newWALBuilder(LSN(1 << 20))
	b.add(RmgrXLOG, 0x20, make([]byte, 9000)) // spans into page 2
	b.finishSegment()
	b.buf[BlockSize+2] |= 0x10
	_, err := readBytesErr(b.start, b.buf, 1<<20)
	if !IsKind(err, KindCorrupt) || !strings.Contains(err.Error(), "invalid info bits") {
		t.Fatalf("err = %v", err)
	}
}
