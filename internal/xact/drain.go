package xact

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"

	"github.com/walshadow/walshadow/internal/wal"
)

var errDrainReset = errors.New("xact drain abandoned: the buffer was reset or closed")

// Drain yields one committed transaction tree's records in LSN order, in
// slices bounded by Config.SliceRecords and Config.SliceBytes.
type Drain struct {
	buf      *Buffer
	bufs     *drainBufs // nil for a tree without records
	firstLSN wal.LSN
	records  int

	sliceRecords int
	sliceBytes   int

	started bool // written under Buffer.mu: the Buffer spills members of unstarted Drains
	lastLSN wal.LSN

	err    error // sticky: a failed drain stays failed
	closed bool
	dead   atomic.Bool // set by Reset/Close of the Buffer
}

// drainBufs is a Drain's working memory, recycled through the Buffer so
// that a small transaction's drain allocates little.
type drainBufs struct {
	members  []*txState
	heap     []*cursor // min-heap by head LSN
	cursors  []cursor
	out      []Change
	spillRaw []byte // Raw of spilled records in the current slice
	rawOff   []int  // per out index: offset into spillRaw, or -1
}

// clear drops every reference into transaction memory and files, keeping
// capacity (and each cursor's reader and frame buffer).
func (s *drainBufs) clear() {
	clear(s.members)
	s.members = s.members[:0]
	clear(s.heap[:cap(s.heap)])
	s.heap = s.heap[:0]
	for i := range s.cursors {
		s.cursors[i].reset(nil)
	}
	clear(s.out[:cap(s.out)])
	s.out, s.spillRaw, s.rawOff = s.out[:0], s.spillRaw[:0], s.rawOff[:0]
}

// cursor walks one member xid: its spill file, then its in-memory tail.
type cursor struct {
	tx        *txState
	file      *os.File
	reader    *bufio.Reader // kept across reuse
	sr        spillReader
	spillLeft int
	memIdx    int
	head      Change
	fromSpill bool
}

func (c *cursor) reset(tx *txState) {
	reader, body := c.reader, c.sr.body
	*c = cursor{tx: tx, reader: reader}
	c.sr.body = body
}

func newDrain(b *Buffer, bufs *drainBufs) *Drain {
	d := &Drain{buf: b, sliceRecords: b.cfg.SliceRecords, sliceBytes: b.cfg.SliceBytes}
	if len(bufs.members) == 0 {
		return d
	}
	d.bufs = bufs
	for _, tx := range bufs.members {
		d.records += tx.records
		if d.firstLSN == 0 || tx.firstLSN < d.firstLSN {
			d.firstLSN = tx.firstLSN
		}
	}
	return d
}

// FirstLSN is the tree's first buffered LSN (0 when it has no records).
func (d *Drain) FirstLSN() wal.LSN { return d.firstLSN }

// Len is the number of records in the tree.
func (d *Drain) Len() int { return d.records }

// Next returns the next slice of records in LSN order: at most SliceRecords
// records and SliceBytes Raw bytes, but always at least one record; io.EOF
// after the last. The slice and the Raw bytes are valid until the next call
// to Next (or Close). An error (a damaged spill file, a reset buffer) is
// final: the caller must restart from the Floor.
func (d *Drain) Next() ([]Change, error) {
	if d.closed {
		return nil, errors.New("xact drain: Next after Close")
	}
	if d.dead.Load() {
		return nil, errDrainReset
	}
	if d.err != nil {
		return nil, d.err
	}
	s := d.bufs
	if s == nil {
		return nil, io.EOF
	}
	if !d.started {
		if err := d.buf.startDrain(d); err != nil {
			d.err = err
			return nil, err
		}
		if err := d.start(); err != nil {
			d.err = err
			return nil, err
		}
	}
	if len(s.heap) == 0 {
		return nil, io.EOF
	}
	if s.out == nil {
		n := min(d.records, d.sliceRecords)
		s.out, s.rawOff = make([]Change, 0, n), make([]int, 0, n)
	}
	s.out, s.spillRaw, s.rawOff = s.out[:0], s.spillRaw[:0], s.rawOff[:0]
	bytes := 0
	for len(s.heap) > 0 {
		c := s.heap[0]
		h := c.head
		if len(s.out) > 0 && (len(s.out) >= d.sliceRecords || bytes+len(h.Raw) > d.sliceBytes) {
			break
		}
		if h.LSN <= d.lastLSN {
			d.err = fmt.Errorf("xact drain of xid %d: record %s (xid %d) not after %s: a record was buffered twice", s.members[0].xid, h.LSN, h.XID, d.lastLSN)
			return nil, d.err
		}
		d.lastLSN = h.LSN
		bytes += len(h.Raw)
		if c.fromSpill {
			// The cursor's frame buffer is reused by its next read.
			s.rawOff = append(s.rawOff, len(s.spillRaw))
			s.spillRaw = append(s.spillRaw, h.Raw...)
		} else {
			s.rawOff = append(s.rawOff, -1)
		}
		s.out = append(s.out, h)
		more, err := c.advance()
		if err != nil {
			d.err = err
			return nil, err
		}
		if more {
			s.siftDown(0)
		} else {
			s.pop()
		}
	}
	// Point the spilled records' Raw into spillRaw now that it has stopped
	// growing (appending may have moved it).
	for i, off := range s.rawOff {
		if off >= 0 {
			end := off + len(s.out[i].Raw)
			s.out[i].Raw = s.spillRaw[off:end:end]
		}
	}
	return s.out, nil
}

// start opens the members' spill files and primes every cursor's head.
func (d *Drain) start() error {
	s := d.bufs
	n := len(s.members)
	if cap(s.cursors) < n {
		s.cursors = append(s.cursors[:cap(s.cursors)], make([]cursor, n-cap(s.cursors))...)
	}
	s.cursors = s.cursors[:n]
	for i, tx := range s.members {
		c := &s.cursors[i]
		c.reset(tx)
		if tx.spillRecords > 0 {
			if err := c.open(); err != nil {
				return err
			}
		}
		more, err := c.advance()
		if err != nil {
			return err
		}
		if more {
			s.heap = append(s.heap, c)
		}
	}
	for i := len(s.heap)/2 - 1; i >= 0; i-- {
		s.siftDown(i)
	}
	return nil
}

func (c *cursor) open() error {
	tx := c.tx
	f, err := os.Open(tx.spillPath)
	if err != nil {
		return fmt.Errorf("opening spill file %s of xid %d: %w", tx.spillPath, tx.xid, err)
	}
	c.file = f
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("reading the size of spill file %s: %w", tx.spillPath, err)
	}
	if c.reader == nil {
		c.reader = bufio.NewReaderSize(f, spillReadBufSize)
	} else {
		c.reader.Reset(f)
	}
	c.sr = spillReader{r: c.reader, path: tx.spillPath, size: st.Size(), body: c.sr.body}
	if st.Size() > tx.spillSize {
		return c.sr.corrupt(tx.spillSize, "%d bytes past the %d written", st.Size()-tx.spillSize, tx.spillSize)
	}
	xid, err := c.sr.readHeader()
	if err != nil {
		return err
	}
	if xid != tx.xid {
		return c.sr.corrupt(6, "header names xid %d, expected %d", xid, tx.xid)
	}
	c.spillLeft = tx.spillRecords
	return nil
}

// advance loads the cursor's next record into head, reporting false when
// the member is exhausted.
func (c *cursor) advance() (bool, error) {
	tx := c.tx
	if c.spillLeft > 0 {
		at := c.sr.off
		h, err := c.sr.next()
		if errors.Is(err, io.EOF) {
			return false, c.sr.truncated(at, "%d of %d frames missing", c.spillLeft, tx.spillRecords)
		}
		if err != nil {
			return false, err
		}
		var last wal.LSN
		if c.spillLeft < tx.spillRecords {
			last = c.head.LSN
		}
		if err := checkFrame(&c.sr, at, h, tx.xid, last); err != nil {
			return false, err
		}
		c.spillLeft--
		c.head, c.fromSpill = h, true
		return true, nil
	}
	if c.file != nil {
		c.file.Close() // spill part done; Close still removes the file
		c.file = nil
	}
	if c.memIdx < len(tx.entries) {
		e := &tx.entries[c.memIdx]
		c.memIdx++
		c.head = Change{LSN: e.lsn, Next: e.next, XID: tx.xid, Flags: e.flags, Raw: tx.raw(e)}
		c.fromSpill = false
		return true, nil
	}
	return false, nil
}

func (s *drainBufs) less(i, j int) bool { return s.heap[i].head.LSN < s.heap[j].head.LSN }

func (s *drainBufs) siftDown(i int) {
	n := len(s.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && s.less(r, l) {
			m = r
		}
		if !s.less(m, i) {
			return
		}
		s.heap[i], s.heap[m] = s.heap[m], s.heap[i]
		i = m
	}
}

func (s *drainBufs) pop() {
	n := len(s.heap) - 1
	s.heap[0] = s.heap[n]
	s.heap[n] = nil
	s.heap = s.heap[:n]
	if n > 0 {
		s.siftDown(0)
	}
}

// Close releases the tree: its memory and its spill files. It is safe to
// call more than once.
func (d *Drain) Close() error {
	if d.closed {
		return nil
	}
	d.closed = true
	s := d.bufs
	if s == nil {
		return nil
	}
	var errs []error
	for i := range s.cursors {
		if f := s.cursors[i].file; f != nil {
			if err := f.Close(); err != nil {
				errs = append(errs, fmt.Errorf("closing spill file %s: %w", f.Name(), err))
			}
			s.cursors[i].file = nil
		}
	}
	d.buf.closeDrain(d, s)
	return errors.Join(errs...)
}
