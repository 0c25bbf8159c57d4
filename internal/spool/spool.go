// Package spool owns the durable copy of the source's WAL as received,
// between the replication connection and everything that reads WAL: the
// connection only appends to it (and answers the source's keepalives), the
// pump (filter, shadow feed, decoder) reads it at its own pace, and a
// restart resumes from it instead of asking the source again. A slow
// shadow, decoder or ClickHouse never makes the connection wait.
//
// On disk (state_dir/spool, mode 0700: it holds every row of the source):
//
//	spool/
//	  000000010000000000000003   raw WAL as received, named and laid out as
//	  000000010000000000000004   PostgreSQL names and lays out pg_wal: the byte
//	  ...                        at LSN l is at offset l % segment size of the
//	                             file of segment l / segment size (mode 0600)
//	  end                        where the spool's bytes start and end (below)
//
// The end file is two 40-byte slots, rewritten in turn after every sync, so
// that a write torn by a crash spoils one slot, never both:
//
//	slot (40 bytes, little endian):
//	+--------+---------+----------+----------+-----------+-----------+---------+
//	| "WSPL" | version | timeline | seg size | start LSN |  end LSN  | CRC-32C |
//	|   4    |  u32=1  |   u32    |   u32    |    u64    |    u64    |   u32   |
//	+--------+---------+----------+----------+-----------+-----------+---------+
//	| generation u32 is folded into version's upper 16 bits (see slotGen)      |
//	+--------------------------------------------------------------------------+
//
// The CRC covers the slot's first 36 bytes. The valid slot with the higher
// generation wins. Only bytes in [start, end) count: end is the durable end
// (every segment file was fsynced through it before the slot naming it was
// written). On open, bytes past end (a torn last write) are cut off and
// segment files past it removed; a missing segment inside [start, end) is
// corruption, reported naming the file; the spool's end file absent means
// an empty spool, its two slots both unreadable is corruption. Readers may
// read bytes appended but not yet synced: the WAL is the source's, so bytes
// lost by a crash are received again, identical, from the same position.
//
// Trim removes whole segments below a position nobody needs again; the
// start it records moves at the next sync (a crash in between finds the
// first remaining segment and starts there). As PostgreSQL does with pg_wal,
// a few trimmed files are renamed to the names of segments still to come
// rather than removed: overwriting a file's blocks costs the kernel less
// than allocating new ones. Their old bytes lie past the end, where nothing
// reads, until overwritten; a restart removes them with the rest past the
// end.
package spool

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/walshadow/walshadow/internal/fsutil"
	"github.com/walshadow/walshadow/internal/wal"
)

// EndFile is the name of the file holding the spool's durable extent.
const EndFile = "end"

const (
	dirMode  = 0o700
	fileMode = 0o600

	slotLen     = 40
	slotMagic   = "WSPL"
	slotVersion = 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is wrapped by every error that reports a damaged spool.
var ErrCorrupt = errors.New("corrupt WAL spool")

// Spool is an open spool directory. Append, Sync, Trim and Reset belong to
// one writer goroutine; readers (NewReader) and the accessors may run on
// any goroutine.
type Spool struct {
	dir      string
	segSize  uint32
	timeline uint32

	// writer's state (one goroutine)
	wf       *os.File // the segment file being appended to
	wfSeg    uint64   // its segment number
	unsynced []*os.File
	newFiles bool // files were created or renamed since the last sync: fsync the directory
	// recycledTo is the highest segment number a trimmed file was renamed
	// to (0: none since the spool opened).
	recycledTo uint64
	endFile    *os.File
	gen        uint32

	mu      sync.Mutex
	start   wal.LSN       // first byte that counts
	written wal.LSN       // end of what was appended
	durable wal.LSN       // end of what was synced
	grew    chan struct{} // closed and replaced by every append
	closed  bool
}

// Open opens (creating if needed) the spool in dir for WAL of the given
// timeline and segment size. A spool written for another timeline or
// segment size is emptied: its bytes are not this stream's.
func Open(dir string, timeline, segSize uint32) (*Spool, error) {
	if !wal.ValidSegmentSize(segSize) {
		return nil, fmt.Errorf("spool: invalid WAL segment size %d", segSize)
	}
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return nil, fmt.Errorf("spool: creating %s: %w", dir, err)
	}
	if err := os.Chmod(dir, dirMode); err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	s := &Spool{dir: dir, segSize: segSize, timeline: timeline, grew: make(chan struct{})}
	ext, found, err := readEnd(filepath.Join(dir, EndFile))
	if err != nil {
		return nil, err
	}
	s.gen = ext.gen
	ef, err := os.OpenFile(filepath.Join(dir, EndFile), os.O_RDWR|os.O_CREATE, fileMode)
	if err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	s.endFile = ef
	if !found || ext.timeline != timeline || ext.segSize != segSize {
		if err := s.removeSegments(func(uint64) bool { return true }); err != nil {
			ef.Close()
			return nil, err
		}
		return s, nil
	}
	if err := s.recover(ext); err != nil {
		ef.Close()
		return nil, err
	}
	return s, nil
}

// recover makes the directory match the recorded extent: segments past the
// end go, the last one is cut at the end, a gap inside is corruption.
func (s *Spool) recover(ext extent) error {
	start, end := ext.start, ext.end
	if end < start {
		return fmt.Errorf("%w: %s names start %s after end %s", ErrCorrupt, filepath.Join(s.dir, EndFile), start, end)
	}
	drop := func(n uint64) bool { return end == start || s.segEnd(n) <= start || s.segStart(n) >= end }
	segs, err := s.segments()
	if err != nil {
		return err
	}
	if err := s.removeSegments(drop); err != nil {
		return err
	}
	if end == start {
		s.start, s.written, s.durable = start, start, start
		return nil
	}
	// Trim keeps the last segment, so the first remaining one above the
	// recorded start is a trim's that crashed before recording it.
	for _, n := range segs {
		if !drop(n) {
			start = max(start, s.segStart(n))
			break
		}
	}
	for n := s.segNo(start); n <= s.segNo(end-1); n++ {
		path := s.segPath(n)
		fi, err := os.Stat(path)
		if err != nil {
			return fmt.Errorf("%w: %s: segment %s of the spool's [%s, %s) is missing: %w", ErrCorrupt, s.dir, filepath.Base(path), start, end, err)
		}
		want := int64(s.segSize)
		if n == s.segNo(end-1) {
			want = int64(end - s.segStart(n))
		}
		if fi.Size() < want {
			return fmt.Errorf("%w: %s holds %d bytes, the spool recorded %d as synced", ErrCorrupt, path, fi.Size(), want)
		}
		if fi.Size() > want {
			if err := os.Truncate(path, want); err != nil {
				return fmt.Errorf("spool: cutting the unsynced tail of %s: %w", path, err)
			}
		}
		if err := s.checkFirstPage(path, n, start); err != nil {
			return err
		}
	}
	s.start, s.written, s.durable = start, end, end
	return nil
}

// checkFirstPage refuses a segment file whose first page is not that
// segment's (a file renamed or overwritten by something else).
func (s *Spool) checkFirstPage(path string, n uint64, start wal.LSN) error {
	if s.segStart(n) < start {
		return nil // the spool starts inside it: its first page is not ours
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	defer f.Close()
	var b [wal.LongPageHeaderLen]byte
	if _, err := io.ReadFull(f, b[:]); err != nil {
		return nil // shorter than a header: its content is checked when read
	}
	h, _ := wal.DecodePageHeader(b[:])
	if h.PageAddr != s.segStart(n) || h.TLI != s.timeline {
		return fmt.Errorf("%w: %s: its first page names address %s on timeline %d, not %s on %d", ErrCorrupt, path, h.PageAddr, h.TLI, s.segStart(n), s.timeline)
	}
	return nil
}

// Extent is [start, written): the bytes a reader may read.
func (s *Spool) Extent() (start, written wal.LSN) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.start, s.written
}

// Durable is the end of the bytes synced (a restart finds them).
func (s *Spool) Durable() wal.LSN {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.durable
}

// Bytes is how much WAL the spool holds, from its first segment's start.
func (s *Spool) Bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.written == s.start {
		return 0
	}
	return int64(s.written - s.segStart(s.segNo(s.start)))
}

// Segments is the number of segment files the spool holds.
func (s *Spool) Segments() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.written == s.start {
		return 0
	}
	return int(s.segNo(s.written-1) - s.segNo(s.start) + 1)
}

// SegmentPath is the file holding the byte at lsn (for error messages).
func (s *Spool) SegmentPath(lsn wal.LSN) string { return s.segPath(s.segNo(lsn)) }

// Covers reports whether a reader can start at lsn.
func (s *Spool) Covers(lsn wal.LSN) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.start <= lsn && lsn <= s.written
}

// Reset empties the spool and makes it start at start (a segment start):
// the spool no longer reaches back to where reading must begin.
func (s *Spool) Reset(start wal.LSN) error {
	if start%wal.LSN(s.segSize) != 0 {
		return fmt.Errorf("spool: reset at %s: not a segment start", start)
	}
	if err := s.closeWriter(); err != nil {
		return err
	}
	if err := s.removeSegments(func(uint64) bool { return true }); err != nil {
		return err
	}
	s.mu.Lock()
	s.recycledTo = 0
	s.start, s.written, s.durable = start, start, start
	s.mu.Unlock()
	return s.writeEnd(start, start)
}

// Append adds WAL bytes starting at lsn, which must be where the last
// append ended. They count once Sync returns.
func (s *Spool) Append(lsn wal.LSN, data []byte) error {
	s.mu.Lock()
	written, closed := s.written, s.closed
	s.mu.Unlock()
	if closed {
		return errors.New("spool: closed")
	}
	if lsn != written {
		return fmt.Errorf("spool: append at %s, the spool ends at %s", lsn, written)
	}
	for len(data) > 0 {
		n := s.segNo(lsn)
		if s.wf == nil || s.wfSeg != n {
			if err := s.openSegment(n); err != nil {
				return err
			}
		}
		room := int(s.segEnd(n) - lsn)
		chunk := data[:min(room, len(data))]
		if _, err := s.wf.WriteAt(chunk, int64(lsn-s.segStart(n))); err != nil {
			return fmt.Errorf("spool: writing %s: %w", s.wf.Name(), err)
		}
		lsn += wal.LSN(len(chunk))
		data = data[len(chunk):]
	}
	s.mu.Lock()
	s.written = lsn
	close(s.grew)
	s.grew = make(chan struct{})
	s.mu.Unlock()
	return nil
}

// openSegment makes segment n the one appended to; the one before waits
// for the next sync.
func (s *Spool) openSegment(n uint64) error {
	if s.wf != nil {
		s.unsynced = append(s.unsynced, s.wf)
		s.wf = nil
	}
	f, err := os.OpenFile(s.segPath(n), os.O_WRONLY|os.O_CREATE, fileMode)
	if err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	// Created now, or renamed by a trim: the directory entry must be
	// durable before an end past this segment's start is recorded.
	s.newFiles = true
	s.wf, s.wfSeg = f, n
	return nil
}

// Sync makes everything appended durable and records it: a restart finds
// it. It returns the durable end.
func (s *Spool) Sync() (wal.LSN, error) {
	s.mu.Lock()
	start, written, durable := s.start, s.written, s.durable
	s.mu.Unlock()
	if written == durable && len(s.unsynced) == 0 {
		return durable, nil
	}
	for _, f := range s.unsynced {
		if err := f.Sync(); err != nil {
			return durable, fmt.Errorf("spool: syncing %s: %w", f.Name(), err)
		}
		f.Close()
	}
	s.unsynced = s.unsynced[:0]
	if s.wf != nil {
		if err := s.wf.Sync(); err != nil {
			return durable, fmt.Errorf("spool: syncing %s: %w", s.wf.Name(), err)
		}
	}
	if s.newFiles {
		if err := fsutil.SyncDir(s.dir); err != nil {
			return durable, fmt.Errorf("spool: %w", err)
		}
		s.newFiles = false
	}
	if err := s.writeEnd(start, written); err != nil {
		return durable, err
	}
	s.mu.Lock()
	s.durable = written
	s.mu.Unlock()
	return written, nil
}

// Trim removes the segments wholly below keepFrom, never past the durable
// end.
func (s *Spool) Trim(keepFrom wal.LSN) (removed int, err error) {
	s.mu.Lock()
	start, durable := s.start, s.durable
	s.mu.Unlock()
	keepFrom = min(keepFrom, durable)
	keepFrom -= keepFrom % wal.LSN(s.segSize)
	if keepFrom <= start || durable == start {
		return 0, nil
	}
	last := s.segNo(durable - 1) // always kept: see recover
	for n := s.segNo(start); s.segEnd(n) <= keepFrom && n < last; n++ {
		if err := s.recycle(n); err != nil {
			return removed, fmt.Errorf("spool: trimming: %w", err)
		}
		removed++
	}
	if removed > 0 {
		s.mu.Lock()
		s.start = max(s.start, s.segStart(s.segNo(start)+uint64(removed)))
		s.mu.Unlock()
	}
	return removed, nil
}

// recycledAhead is how many trimmed files may wait, renamed, for the
// segments to come.
const recycledAhead = 4

// recycle renames trimmed segment n's file to the next segment to come
// that has none, or removes it when enough wait already.
func (s *Spool) recycle(n uint64) error {
	s.mu.Lock()
	writing := s.segNo(s.written - 1)
	s.mu.Unlock()
	if s.recycledTo < writing+recycledAhead {
		to := max(s.recycledTo, writing) + 1
		if err := os.Rename(s.segPath(n), s.segPath(to)); err == nil {
			s.recycledTo = to
			return nil
		} else if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
	}
	if err := os.Remove(s.segPath(n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// Close closes the spool's files (what was not synced is not recorded).
func (s *Spool) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.grew)
	s.mu.Unlock()
	err := s.closeWriter()
	if s.endFile != nil {
		if cerr := s.endFile.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

func (s *Spool) closeWriter() error {
	var err error
	for _, f := range s.unsynced {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	s.unsynced = nil
	if s.wf != nil {
		if cerr := s.wf.Close(); err == nil {
			err = cerr
		}
		s.wf = nil
	}
	return err
}

// Reader reads the spool from a position on, waiting for bytes to arrive.
type Reader struct {
	s    *Spool
	next wal.LSN
	f    *os.File
	fSeg uint64
	buf  []byte
}

// NewReader starts a reader at from, which the spool must cover.
func (s *Spool) NewReader(from wal.LSN, bufSize int) (*Reader, error) {
	if !s.Covers(from) {
		start, written := s.Extent()
		return nil, fmt.Errorf("spool: reading from %s: the spool holds [%s, %s)", from, start, written)
	}
	if bufSize <= 0 {
		bufSize = 128 << 10
	}
	return &Reader{s: s, next: from, buf: make([]byte, bufSize)}, nil
}

// Next is the position of the next byte Read returns.
func (r *Reader) Next() wal.LSN { return r.next }

// ErrClosed is returned by Read once the spool is closed.
var ErrClosed = errors.New("spool closed")

// Read returns the next bytes (never crossing a segment's end), waiting
// until there are some, ctx ends or the spool closes. The slice is valid
// until the next Read.
func (r *Reader) Read(ctx context.Context) (wal.LSN, []byte, error) {
	at, n, err := r.ReadInto(ctx, r.buf)
	return at, r.buf[:n], err
}

// ReadInto is Read into dst (len(dst) bytes at most, at least one): a
// caller that keeps the bytes reads them where it keeps them.
func (r *Reader) ReadInto(ctx context.Context, dst []byte) (wal.LSN, int, error) {
	if len(dst) == 0 {
		return 0, 0, errors.New("spool: reading into an empty buffer")
	}
	for {
		r.s.mu.Lock()
		written, grew, closed := r.s.written, r.s.grew, r.s.closed
		r.s.mu.Unlock()
		if r.next < written {
			return r.read(written, dst)
		}
		if closed {
			return 0, 0, ErrClosed
		}
		select {
		case <-grew:
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		}
	}
}

func (r *Reader) read(written wal.LSN, dst []byte) (wal.LSN, int, error) {
	s := r.s
	n := s.segNo(r.next)
	if r.f == nil || r.fSeg != n {
		if r.f != nil {
			r.f.Close()
		}
		f, err := os.Open(s.segPath(n))
		if err != nil {
			r.f = nil
			return 0, 0, fmt.Errorf("spool: reading %s: %w", s.segPath(n), err)
		}
		r.f, r.fSeg = f, n
	}
	want := min(int(min(written, s.segEnd(n))-r.next), len(dst))
	got, err := r.f.ReadAt(dst[:want], int64(r.next-s.segStart(n)))
	if got < want {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, 0, fmt.Errorf("%w: %s: reading %d bytes at %s: %w", ErrCorrupt, r.f.Name(), want, r.next, err)
	}
	at := r.next
	r.next += wal.LSN(want)
	return at, want, nil
}

// Close releases the reader's file.
func (r *Reader) Close() {
	if r.f != nil {
		r.f.Close()
		r.f = nil
	}
}

// segment arithmetic and names

func (s *Spool) segNo(lsn wal.LSN) uint64  { return uint64(lsn) / uint64(s.segSize) }
func (s *Spool) segStart(n uint64) wal.LSN { return wal.LSN(n * uint64(s.segSize)) }
func (s *Spool) segEnd(n uint64) wal.LSN   { return wal.LSN((n + 1) * uint64(s.segSize)) }
func (s *Spool) segPath(n uint64) string   { return filepath.Join(s.dir, s.segName(n)) }
func (s *Spool) segName(n uint64) string {
	perLog := uint64(0x100000000) / uint64(s.segSize)
	return fmt.Sprintf("%08X%08X%08X", s.timeline, n/perLog, n%perLog)
}

// segments lists the segment numbers present, ascending.
func (s *Spool) segments() ([]uint64, error) {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	var out []uint64
	for _, e := range ents {
		name, ok := wal.ParseSegmentName(e.Name())
		if !ok || name.Partial || name.TLI != s.timeline {
			continue
		}
		lsn, err := name.StartLSN(s.segSize)
		if err != nil {
			continue
		}
		out = append(out, s.segNo(lsn))
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

// removeSegments removes every segment file (of any timeline) whose number
// drop selects (files of another timeline always go).
func (s *Spool) removeSegments(drop func(n uint64) bool) error {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	removed := false
	for _, e := range ents {
		name, ok := wal.ParseSegmentName(e.Name())
		if !ok {
			continue
		}
		lsn, err := name.StartLSN(s.segSize)
		if name.TLI == s.timeline && err == nil && !name.Partial && !drop(s.segNo(lsn)) {
			continue
		}
		if err := os.Remove(filepath.Join(s.dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("spool: %w", err)
		}
		removed = true
	}
	if removed {
		return fsutil.SyncDir(s.dir)
	}
	return nil
}

// extent is one slot of the end file.
type extent struct {
	gen        uint32
	timeline   uint32
	segSize    uint32
	start, end wal.LSN
}

func encodeSlot(e extent) []byte {
	b := make([]byte, slotLen)
	copy(b, slotMagic)
	binary.LittleEndian.PutUint32(b[4:], slotVersion|e.gen<<16)
	binary.LittleEndian.PutUint32(b[8:], e.timeline)
	binary.LittleEndian.PutUint32(b[12:], e.segSize)
	binary.LittleEndian.PutUint64(b[16:], uint64(e.start))
	binary.LittleEndian.PutUint64(b[24:], uint64(e.end))
	binary.LittleEndian.PutUint32(b[32:], 0)
	binary.LittleEndian.PutUint32(b[36:], crc32.Checksum(b[:36], castagnoli))
	return b
}

// decodeSlot reads one slot; ok is false for a slot never written or torn.
func decodeSlot(b []byte) (extent, bool) {
	if len(b) < slotLen || string(b[:4]) != slotMagic || crc32.Checksum(b[:36], castagnoli) != binary.LittleEndian.Uint32(b[36:]) {
		return extent{}, false
	}
	v := binary.LittleEndian.Uint32(b[4:])
	if v&0xffff != slotVersion {
		return extent{}, false
	}
	return extent{
		gen:      v >> 16,
		timeline: binary.LittleEndian.Uint32(b[8:]),
		segSize:  binary.LittleEndian.Uint32(b[12:]),
		start:    wal.LSN(binary.LittleEndian.Uint64(b[16:])),
		end:      wal.LSN(binary.LittleEndian.Uint64(b[24:])),
	}, true
}

// newer tells whether generation a follows b (16-bit, wrapping).
func newer(a, b uint32) bool { return int16(uint16(a)-uint16(b)) > 0 }

// readEnd reads the end file: found is false when it does not exist or was
// never written.
func readEnd(path string) (extent, bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) || err == nil && len(b) == 0 {
		return extent{}, false, nil
	}
	if err != nil {
		return extent{}, false, fmt.Errorf("spool: %w", err)
	}
	a, okA := decodeSlot(b)
	var c extent
	okC := false
	if len(b) >= 2*slotLen {
		c, okC = decodeSlot(b[slotLen:])
	}
	switch {
	case okA && okC:
		if newer(c.gen, a.gen) {
			return c, true, nil
		}
		return a, true, nil
	case okA:
		return a, true, nil
	case okC:
		return c, true, nil
	}
	return extent{}, false, fmt.Errorf("%w: %s: neither of its two records reads back (%d bytes)", ErrCorrupt, path, len(b))
}

// writeEnd records [start, end) in the slot after the last one written.
func (s *Spool) writeEnd(start, end wal.LSN) error {
	s.gen = (s.gen + 1) & 0xffff
	b := encodeSlot(extent{gen: s.gen, timeline: s.timeline, segSize: s.segSize, start: start, end: end})
	if _, err := s.endFile.WriteAt(b, int64(s.gen%2)*slotLen); err != nil {
		return fmt.Errorf("spool: writing %s: %w", s.endFile.Name(), err)
	}
	if err := s.endFile.Sync(); err != nil {
		return fmt.Errorf("spool: syncing %s: %w", s.endFile.Name(), err)
	}
	return nil
}

// State is what a spool directory records, read without changing it (for
// walshadow status).
type State struct {
	Start, End wal.LSN // the durable extent
	Segments   int     // segment files present
	Bytes      int64   // their total size
}

// ReadState reads dir's end record and sizes its segment files; found is
// false when the directory holds no spool.
func ReadState(dir string) (st State, found bool, err error) {
	ext, found, err := readEnd(filepath.Join(dir, EndFile))
	if err != nil || !found {
		return State{}, false, err
	}
	st.Start, st.End = ext.start, ext.end
	ents, err := os.ReadDir(dir)
	if err != nil {
		return st, true, fmt.Errorf("spool: %w", err)
	}
	for _, e := range ents {
		if _, ok := wal.ParseSegmentName(e.Name()); !ok {
			continue
		}
		if fi, err := e.Info(); err == nil {
			st.Segments++
			st.Bytes += fi.Size()
		}
	}
	return st, true, nil
}
