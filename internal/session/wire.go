package session

import (
	"fmt"

	"github.com/walshadow/walshadow/internal/wal"
)

// wireBuffer holds the source's WAL bytes, segment by segment, from the
// oldest segment not yet sealed to the newest byte received. The filter
// rewrites user records in place (NOOP), the walsender publishes decided
// bytes from it, and a segment is sealed (archived) once every record that
// ends inside it has been decided.
//
// Segments are whole-segment buffers. The bytes published from one are
// kept by the shadow's walsender, which sends them from there without a
// copy, so a released segment is reused only once the walsender reads
// nothing below its end (floor); bytes are never changed once published.
// Reuse spares a fresh buffer's zeroing and page faults.
type wireBuffer struct {
	segSize uint32
	segs    []*wireSegment // ascending by start, contiguous
	end     wal.LSN        // LSN of the next byte to append
	sealed  wal.LSN        // end of the last segment handed to Seal
	// retired are released segments, oldest first, until floor passes
	// their end; floor nil: never reused.
	retired []*wireSegment
	floor   func() wal.LSN
}

// maxRetired bounds the released segments kept for reuse (a walreceiver
// holding old bytes for long leaves them to the collector).
const maxRetired = 2

type wireSegment struct {
	start wal.LSN
	data  []byte // len == bytes received so far
}

func newWireBuffer(start wal.LSN, segSize uint32) (*wireBuffer, error) {
	if start%wal.LSN(segSize) != 0 {
		return nil, fmt.Errorf("wire buffer must start at a segment boundary, not %s", start)
	}
	return &wireBuffer{segSize: segSize, end: start}, nil
}

// End is the LSN after the last byte appended.
func (w *wireBuffer) End() wal.LSN { return w.end }

// Start is the LSN of the oldest byte held.
func (w *wireBuffer) Start() wal.LSN {
	if len(w.segs) == 0 {
		return w.end
	}
	return w.segs[0].start
}

// Append adds bytes that continue the stream at End.
func (w *wireBuffer) Append(data []byte) {
	for len(data) > 0 {
		n := copy(w.Tail(len(data)), data)
		w.Commit(n)
		data = data[n:]
	}
}

// Tail is room for up to max bytes at End, within End's segment, to be
// filled (a file read straight into the buffer) and then committed with
// Commit.
func (w *wireBuffer) Tail(max int) []byte {
	off := int(w.end % wal.LSN(w.segSize))
	if len(w.segs) == 0 || len(w.segs[len(w.segs)-1].data) == int(w.segSize) {
		w.segs = append(w.segs, &wireSegment{start: w.end - wal.LSN(off), data: w.newSegment(off)})
	}
	seg := w.segs[len(w.segs)-1]
	return seg.data[off:min(off+max, int(w.segSize))]
}

// newSegment is a segment buffer holding off bytes: a retired one the
// walsender no longer reads when there is one.
func (w *wireBuffer) newSegment(off int) []byte {
	if off == 0 && len(w.retired) > 0 && w.floor != nil {
		if old := w.retired[0]; old.start+wal.LSN(w.segSize) <= w.floor() {
			w.retired[0] = nil
			w.retired = w.retired[1:]
			return old.data[:0]
		}
	}
	return make([]byte, off, w.segSize)
}

// Commit adds the first n bytes of the slice Tail returned.
func (w *wireBuffer) Commit(n int) {
	seg := w.segs[len(w.segs)-1]
	seg.data = seg.data[:len(seg.data)+n]
	w.end += wal.LSN(n)
}

// segmentFor returns the held segment containing lsn, or nil.
func (w *wireBuffer) segmentFor(lsn wal.LSN) *wireSegment {
	if len(w.segs) == 0 || lsn < w.segs[0].start {
		return nil
	}
	i := int((lsn - w.segs[0].start) / wal.LSN(w.segSize))
	if i >= len(w.segs) {
		return nil
	}
	return w.segs[i]
}

// WriteAt overwrites already appended bytes starting at lsn (the NOOP
// rewrite of a record, one contiguous piece at a time).
func (w *wireBuffer) WriteAt(lsn wal.LSN, b []byte) error {
	for len(b) > 0 {
		seg := w.segmentFor(lsn)
		off := int(lsn - seg.startOr(lsn))
		if seg == nil || off+min(len(b), int(w.segSize)-off) > len(seg.data) {
			return fmt.Errorf("rewriting %d bytes at %s: outside the held wire bytes [%s, %s)", len(b), lsn, w.Start(), w.end)
		}
		n := copy(seg.data[off:], b)
		b = b[n:]
		lsn += wal.LSN(n)
	}
	return nil
}

func (s *wireSegment) startOr(lsn wal.LSN) wal.LSN {
	if s == nil {
		return lsn
	}
	return s.start
}

// Range calls fn with the held bytes of [from, to), one piece per segment.
func (w *wireBuffer) Range(from, to wal.LSN, fn func(start wal.LSN, b []byte) error) error {
	if from < w.Start() || to > w.end || from > to {
		return fmt.Errorf("wire range [%s, %s) outside the held bytes [%s, %s)", from, to, w.Start(), w.end)
	}
	for from < to {
		seg := w.segmentFor(from)
		off := int(from - seg.start)
		n := min(int(to-from), len(seg.data)-off)
		if err := fn(from, seg.data[off:off+n]); err != nil {
			return err
		}
		from += wal.LSN(n)
	}
	return nil
}

// SealThrough hands every complete segment that ends at or below decided to
// seal (in order) and releases it. A segment is complete when all its bytes
// have arrived.
func (w *wireBuffer) SealThrough(decided wal.LSN, seal func(start wal.LSN, data []byte) error) error {
	if err := w.Seal(decided, seal); err != nil {
		return err
	}
	w.Release(decided)
	return nil
}

// Seal hands every complete segment that ends at or below decided, and was
// not handed before, to seal (in order), keeping it held: bytes of it not
// yet published can still be read with Range until Release.
func (w *wireBuffer) Seal(decided wal.LSN, seal func(start wal.LSN, data []byte) error) error {
	for _, seg := range w.segs {
		end := seg.start + wal.LSN(w.segSize)
		if end <= w.sealed {
			continue
		}
		if end > decided || len(seg.data) < int(w.segSize) {
			return nil
		}
		if err := seal(seg.start, seg.data); err != nil {
			return err
		}
		w.sealed = end
	}
	return nil
}

// Release frees the sealed segments that end at or below through.
func (w *wireBuffer) Release(through wal.LSN) {
	for len(w.segs) > 0 {
		seg := w.segs[0]
		if end := seg.start + wal.LSN(w.segSize); end > through || end > w.sealed {
			return
		}
		if w.floor != nil {
			if len(w.retired) == maxRetired {
				w.retired[0] = nil
				w.retired = w.retired[1:]
			}
			w.retired = append(w.retired, seg)
		}
		w.segs[0] = nil
		w.segs = w.segs[1:]
	}
}
