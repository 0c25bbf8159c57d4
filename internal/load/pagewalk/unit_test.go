package pagewalk

import (
	"archive/tar"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"path"
	"strings"
	"testing"

	"github.com/walshadow/walshadow/internal/decode"
	"github.com/walshadow/walshadow/internal/wal"
)

func TestClogStatus(t *testing.T) {
	c := NewClog()
	seg := make([]byte, 2*BlockSize)
	// xid 5: byte 1, bits 2-3; xid 32768*1+3 (page 1): committed
	seg[1] = byte(XidAborted) << 2
	seg[BlockSize+0] = byte(XidSubCommitted) << 6
	if err := c.AddSegment("0000", seg); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		xid  uint32
		want XidStatus
	}{{4, XidInProgress}, {5, XidAborted}, {32768 + 3, XidSubCommitted}} {
		got, err := c.Status(tc.xid)
		if err != nil || got != tc.want {
			t.Errorf("xid %d: %v %v, want %v", tc.xid, got, err, tc.want)
		}
	}
	// Page 2 is not in the segment, segment 1 not at all: pages newer than
	// every page copied belong to transactions begun after the copy.
	for _, xid := range []uint32{2 * 32768, clogXactsPerSegment + 1} {
		if got, err := c.Status(xid); err != nil || got != XidInProgress {
			t.Errorf("xid %d (after the newest page): %v %v, want in progress", xid, got, err)
		}
	}
	// A page below a held one is a hole (or truncated away): an error.
	if err := c.AddSegment("0002", seg[:BlockSize]); err != nil {
		t.Fatal(err)
	}
	for _, xid := range []uint32{2 * 32768, clogXactsPerSegment + 1} {
		if _, err := c.Status(xid); err == nil || !strings.Contains(err.Error(), "not in the backup") {
			t.Errorf("xid %d (a hole): %v, want not in the backup", xid, err)
		}
	}
	// Truncated below: an xid older than every held page.
	old := NewClog()
	if err := old.AddSegment("0005", seg); err != nil {
		t.Fatal(err)
	}
	if _, err := old.Status(7); err == nil {
		t.Error("xid 7 below the oldest held segment: no error")
	}
	// Wraparound: segment 0FFF held, segment 0000 not yet: after it.
	wrap := NewClog()
	if err := wrap.AddSegment("0FFF", seg); err != nil {
		t.Fatal(err)
	}
	if got, err := wrap.Status(3); err != nil || got != XidInProgress {
		t.Errorf("xid 3 after segment 0FFF: %v %v, want in progress", got, err)
	}
	if err := c.AddSegment("00G0", seg); err == nil {
		t.Error("non-hex segment name accepted")
	}
	if err := c.AddSegment("0001", seg[:100]); err == nil {
		t.Error("partial page accepted")
	}
}

// memberPage lays members out as multixact.c does.
func putMember(page []byte, off uint32, xid uint32, st MultiStatus) {
	off %= membersPerPage
	base := (off / membersPerGroup) * memberGroupSize
	in := off % membersPerGroup
	page[base+in] = byte(st)
	binary.LittleEndian.PutUint32(page[base+memberFlagBytesPerGroup+in*4:], xid)
}

func TestMultixactMembers(t *testing.T) {
	m := NewMultixacts()
	offs := make([]byte, BlockSize)
	// multi 1: offsets 1..2, multi 2: 3..7 (crosses a member group), multi 3: newest, from 8
	binary.LittleEndian.PutUint32(offs[4:], 1)
	binary.LittleEndian.PutUint32(offs[8:], 3)
	binary.LittleEndian.PutUint32(offs[12:], 8)
	mem := make([]byte, BlockSize)
	putMember(mem, 1, 100, MultiForKeyShare)
	putMember(mem, 2, 101, MultiForShare)
	for i := uint32(3); i < 7; i++ {
		putMember(mem, i, 200+i, MultiForKeyShare)
	}
	putMember(mem, 7, 300, MultiNoKeyUpdate)
	putMember(mem, 8, 400, MultiForKeyShare)
	putMember(mem, 9, 401, MultiUpdate)
	if err := m.AddOffsets("0000", offs); err != nil {
		t.Fatal(err)
	}
	if err := m.AddMembers("0000", mem); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		multi   uint32
		members int
		updater uint32
	}{{1, 2, 0}, {2, 5, 300}, {3, 2, 401}} {
		got, err := m.Members(tc.multi)
		if err != nil || len(got) != tc.members {
			t.Errorf("multi %d: %v %v, want %d members", tc.multi, got, err, tc.members)
		}
		u, ok, err := m.Updater(tc.multi)
		if err != nil || ok != (tc.updater != 0) || u != tc.updater {
			t.Errorf("multi %d: updater %d %v %v, want %d", tc.multi, u, ok, err, tc.updater)
		}
	}
	if _, err := m.Members(0); err == nil || !strings.Contains(err.Error(), "unboundable multixact") {
		t.Errorf("multi 0: %v, want unboundable", err)
	}
	// Newer than the copy (an unassigned offset, a page after the newest):
	// no updater as far as the backup knows.
	for _, multi := range []uint32{4, 70000} {
		if _, err := m.Members(multi); !errors.Is(err, errMultiAfterCopy) {
			t.Errorf("multi %d: %v, want created after the copy", multi, err)
		}
		if u, ok, err := m.Updater(multi); err != nil || ok {
			t.Errorf("multi %d: updater %d %v %v, want none", multi, u, ok, err)
		}
	}
	// Below the oldest page held: truncated away, an error.
	trunc := NewMultixacts()
	if err := trunc.AddOffsets("0001", offs); err != nil {
		t.Fatal(err)
	}
	if _, err := trunc.Members(3); err == nil || !strings.Contains(err.Error(), "unboundable multixact") {
		t.Errorf("multi 3 below the oldest offsets segment: %v, want unboundable", err)
	}
}

type fakeSource struct {
	status  map[uint32]XidStatus
	updater map[uint32]uint32
}

func (f fakeSource) Status(xid uint32) (XidStatus, error) {
	s, ok := f.status[xid]
	if !ok {
		return 0, errors.New("unknown xid")
	}
	return s, nil
}

func (f fakeSource) Updater(multi uint32) (uint32, bool, error) {
	u, ok := f.updater[multi]
	return u, ok && u != 0, nil
}

func TestVisible(t *testing.T) {
	src := fakeSource{
		status:  map[uint32]XidStatus{10: XidCommitted, 11: XidAborted, 12: XidInProgress, 13: XidSubCommitted},
		updater: map[uint32]uint32{7: 10, 8: 11, 9: 0},
	}
	const (
		xminC  = wal.HeapXminCommitted
		xminI  = wal.HeapXminInvalid
		xmaxI  = wal.HeapXmaxInvalid
		xmaxC  = wal.HeapXmaxCommitted
		multi  = wal.HeapXmaxIsMulti
		lockOn = wal.HeapXmaxLockOnly
		excl   = wal.HeapXmaxExclLock
	)
	for _, tc := range []struct {
		name       string
		xmin, xmax uint32
		mask       uint16
		want       bool
	}{
		{"hinted committed, no xmax", 99, 0, xminC | xmaxI, true},
		{"frozen", 99, 0, xminC | xminI, true},
		{"xmin invalid", 10, 0, xminI, false},
		{"super-deleted speculative", 0, 0, 0, false},
		{"frozen xid", 2, 0, 0, true},
		{"bootstrap xid", 1, 0, 0, true},
		{"committed via clog", 10, 0, 0, true},
		{"aborted inserter", 11, 0, 0, false},
		{"in-progress inserter", 12, 0, 0, false},
		{"sub-committed inserter", 13, 0, 0, false},
		{"committed deleter hinted", 10, 99, xmaxC, false},
		{"committed deleter", 10, 10, 0, false},
		{"aborted deleter", 10, 11, 0, true},
		{"in-progress deleter", 10, 12, 0, true},
		{"lock only", 10, 10, lockOn, true},
		{"pre-9.3 exclusive lock", 10, 10, excl, true},
		{"multi, committed updater", 10, 7, multi, false},
		{"multi, aborted updater", 10, 8, multi, true},
		{"multi, lockers only", 10, 9, multi, true},
		{"multi lock only bit", 10, 7, multi | lockOn, true},
	} {
		h := decode.PageTupleHeader{Xmin: tc.xmin, Xmax: tc.xmax, Infomask: tc.mask}
		got, err := Visible(h, src)
		if err != nil || got != tc.want {
			t.Errorf("%s: %v %v, want %v", tc.name, got, err, tc.want)
		}
	}
	if _, err := Visible(decode.PageTupleHeader{Xmin: 10, Infomask: wal.HeapMovedOff}, src); err == nil {
		t.Error("unhinted HEAP_MOVED_OFF tuple decided")
	}
	if _, err := Visible(decode.PageTupleHeader{Xmin: 10}, deferredSource{}); !errors.Is(err, errNeedStatus) {
		t.Errorf("deferred source: %v", err)
	}
}

// TestGoldenCoversCases checks that the captured archive really holds what
// TestWalkGolden claims to cover, so a changed capture cannot hollow it out.
func TestGoldenCoversCases(t *testing.T) {
	g, archives := loadGolden(t)
	main := relPath(g.DbOid, g.Target.Desc.Rfn.RelNum)
	kinds := map[string]int{}
	tr := tar.NewReader(bytes.NewReader(archives["unhinted"]))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		if hdr.Name != main {
			if path.Dir(hdr.Name) == path.Dir(main) {
				kinds["toast file"]++
			}
			continue
		}
		for b := 0; b+BlockSize <= len(data); b += BlockSize {
			p, isNew, err := ParsePage(data[b:b+BlockSize], main, uint32(b/BlockSize))
			if err != nil || isNew {
				continue
			}
			for i := 1; i <= p.NumItems(); i++ {
				raw, ok, _ := p.Tuple(i, main, 0)
				if !ok {
					continue
				}
				h, tup, _ := decode.PageTuple(raw)
				switch {
				case h.Infomask&wal.HeapXmaxIsMulti != 0 && h.Infomask&wal.HeapXmaxLockOnly != 0:
					kinds["multi lock-only"]++
				case h.Infomask&wal.HeapXmaxIsMulti != 0:
					kinds["multi updater"]++
				}
				if h.Infomask&(wal.HeapXminCommitted|wal.HeapXminInvalid) == 0 {
					kinds["unhinted xmin"]++
				}
				if tup.Header.HeapOnly() {
					kinds["HOT"]++
				}
				if tup.Header.HasExternal() {
					kinds["external"]++
				}
			}
		}
	}
	for _, k := range []string{"multi lock-only", "multi updater", "unhinted xmin", "HOT", "external", "toast file"} {
		if kinds[k] == 0 {
			t.Errorf("golden archive has no %s tuple: %v", k, kinds)
		}
	}
}
