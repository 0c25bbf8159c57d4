package pagewalk

import (
	"fmt"
	"strconv"
)

// SLRU geometry (access/slru.h, access/transam/clog.c).
const (
	slruPagesPerSegment = 32
	slruSegmentBytes    = slruPagesPerSegment * BlockSize
	clogXactsPerByte    = 4
	clogXactsPerSegment = slruSegmentBytes * clogXactsPerByte
)

// XidStatus is a transaction's pg_xact state.
type XidStatus uint8

const (
	XidInProgress   XidStatus = 0
	XidCommitted    XidStatus = 1
	XidAborted      XidStatus = 2
	XidSubCommitted XidStatus = 3
)

func (s XidStatus) String() string {
	return [...]string{"in progress", "committed", "aborted", "sub-committed"}[s&3]
}

// slru is one SLRU directory as the backup holds it: segment number to
// contents (a segment may be shorter than 32 pages).
type slru struct {
	name  string
	segs  map[uint32][]byte
	pages []uint64 // the held page numbers, listed by beyondNewest (nil: not yet)
}

func newSLRU(name string) *slru { return &slru{name: name, segs: map[uint32][]byte{}} }

// add records the segment file named name (4 to 6 hex digits, %04X).
func (s *slru) add(name string, data []byte) error {
	if len(name) < 4 || len(name) > 6 {
		return fmt.Errorf("%s: segment file name %q is not 4 to 6 hex digits", s.name, name)
	}
	n, err := strconv.ParseUint(name, 16, 32)
	if err != nil {
		return fmt.Errorf("%s: segment file name %q is not hex: %w", s.name, name, err)
	}
	if len(data)%BlockSize != 0 || len(data) > slruSegmentBytes {
		return fmt.Errorf("%s: segment %s holds %d bytes, not whole pages of one segment", s.name, name, len(data))
	}
	if _, dup := s.segs[uint32(n)]; dup {
		return fmt.Errorf("%s: segment %s appears twice", s.name, name)
	}
	s.segs[uint32(n)] = data
	s.pages = nil
	return nil
}

// at returns the 4 bytes at byte offset off of the SLRU's address space,
// ok false when the backup does not hold that page.
func (s *slru) bytesAt(off uint64, n int) ([]byte, bool) {
	seg := s.segs[uint32(off/slruSegmentBytes)]
	in := int(off % slruSegmentBytes)
	if in+n > len(seg) {
		return nil, false
	}
	return seg[in : in+n], true
}

// Clog reads transaction status from a backup's pg_xact: 2 bits per xid,
// 4 xids per byte, 32 pages of 8 KiB per segment file.
type Clog struct{ s *slru }

// NewClog returns an empty pg_xact.
func NewClog() *Clog { return &Clog{newSLRU("pg_xact")} }

// AddSegment records pg_xact/<name>.
func (c *Clog) AddSegment(name string, data []byte) error { return c.s.add(name, data) }

// Status returns xid's status. pg_xact is copied at one moment of the
// backup, heap pages at others: a page newer than every page the copy holds
// belongs to transactions that had not begun when it was copied, so they
// are in progress as far as the backup knows (they committed after, if at
// all: the stream carries them). A page missing below the newest one
// (truncated away, or a hole) is an error, never a guess.
func (c *Clog) Status(xid uint32) (XidStatus, error) {
	b, ok := c.s.bytesAt(uint64(xid)/clogXactsPerByte, 1)
	if !ok {
		if c.s.beyondNewest(uint64(xid) / clogXactsPerByte / BlockSize) {
			return XidInProgress, nil
		}
		return 0, fmt.Errorf("transaction %d: its pg_xact page (segment %04X) is not in the backup", xid, xid/clogXactsPerSegment)
	}
	return XidStatus(b[0]>>((xid%clogXactsPerByte)*2)) & 3, nil
}

// clogPages is the number of pg_xact pages of the 32-bit xid space.
const clogPages = (1 << 32) / (BlockSize * clogXactsPerByte)

// beyondNewest reports whether page (of the 32-bit xid space, which wraps)
// lies after every page the copy holds: no held page is ahead of it by
// less than half the space. The held pages are listed once (the walk asks
// for every tuple whose page is missing).
func (s *slru) beyondNewest(page uint64) bool {
	if len(s.segs) == 0 {
		return false
	}
	if s.pages == nil {
		s.pages = []uint64{} // listed, even when no segment holds a whole page
		for seg, data := range s.segs {
			first := uint64(seg) * slruPagesPerSegment
			for i := range uint64(len(data) / BlockSize) {
				s.pages = append(s.pages, first+i)
			}
		}
	}
	for _, held := range s.pages {
		if ahead := (held - page + clogPages) % clogPages; ahead > 0 && ahead < clogPages/2 {
			return false
		}
	}
	return true
}
