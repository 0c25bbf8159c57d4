package xact

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/walshadow/walshadow/internal/wal"
)

const (
	spillMagic       = "WSXS"
	spillVersion     = 1
	spillHeaderSize  = 12
	frameHeaderSize  = 8  // length u32 | crc32c u32
	bodyFixedSize    = 21 // lsn u64 | next u64 | xid u32 | flags u8
	spillSuffix      = ".spill"
	spillReadBufSize = 32 << 10
	spillWriteBufSz  = 256 << 10

	// MaxRawLen bounds one record: PostgreSQL's own limit is below 1 GiB
	// (MaxAllocSize / XLogRecordMaxSize), so anything larger in a frame
	// length is damage, not data.
	MaxRawLen = 1 << 30
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt and ErrTruncated classify spill read failures (errors.Is).
var (
	ErrCorrupt   = errors.New("corrupt spill file")
	ErrTruncated = errors.New("truncated spill file")
)

// SpillError reports a damaged spill file, naming the file and the byte
// offset of the header or frame that could not be read.
type SpillError struct {
	Path      string
	Offset    int64
	Truncated bool // the file ends early; otherwise its bytes are wrong
	Reason    string
}

func (e *SpillError) Error() string {
	kind := "corrupt"
	if e.Truncated {
		kind = "truncated"
	}
	return fmt.Sprintf("%s spill file %s at offset %d: %s", kind, e.Path, e.Offset, e.Reason)
}

// Is matches ErrCorrupt or ErrTruncated.
func (e *SpillError) Is(target error) bool {
	if e.Truncated {
		return target == ErrTruncated
	}
	return target == ErrCorrupt
}

func spillFileName(xid uint32, first wal.LSN) string {
	return fmt.Sprintf("xid-%010d-%016X%s", xid, uint64(first), spillSuffix)
}

// removeSpillFiles deletes every *.spill file in dir (nothing else).
func removeSpillFiles(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("listing spill dir %s: %w", dir, err)
	}
	var errs []error
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), spillSuffix) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing spill file %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

func appendSpillHeader(dst []byte, xid uint32) []byte {
	dst = append(dst, spillMagic...)
	dst = binary.LittleEndian.AppendUint16(dst, spillVersion)
	dst = binary.LittleEndian.AppendUint32(dst, xid)
	return binary.LittleEndian.AppendUint16(dst, 0)
}

// writeFrame writes one frame through w using scratch for the fixed part
// (no allocation) and returns the bytes written.
func writeFrame(w *bufio.Writer, scratch *[frameHeaderSize + bodyFixedSize]byte, lsn, next wal.LSN, xid uint32, flags uint8, raw []byte) (int, error) {
	body := scratch[frameHeaderSize:]
	binary.LittleEndian.PutUint64(body[0:], uint64(lsn))
	binary.LittleEndian.PutUint64(body[8:], uint64(next))
	binary.LittleEndian.PutUint32(body[16:], xid)
	body[20] = flags
	crc := crc32.Update(crc32.Update(0, castagnoli, body), castagnoli, raw)
	binary.LittleEndian.PutUint32(scratch[0:], uint32(bodyFixedSize+len(raw)))
	binary.LittleEndian.PutUint32(scratch[4:], crc)
	if _, err := w.Write(scratch[:]); err != nil {
		return 0, err
	}
	if _, err := w.Write(raw); err != nil {
		return 0, err
	}
	return len(scratch) + len(raw), nil
}

// spillReader reads a spill file sequentially. size is the number of bytes
// the file holds (its length when opened), so a length field pointing past
// the end is known to be truncation before any buffer is grown for it.
type spillReader struct {
	r    io.Reader
	path string
	off  int64
	size int64
	hdr  [frameHeaderSize]byte
	body []byte // reused: the returned Change's Raw aliases it
}

func (s *spillReader) truncated(off int64, format string, args ...any) error {
	return &SpillError{Path: s.path, Offset: off, Truncated: true, Reason: fmt.Sprintf(format, args...)}
}

func (s *spillReader) corrupt(off int64, format string, args ...any) error {
	return &SpillError{Path: s.path, Offset: off, Reason: fmt.Sprintf(format, args...)}
}

// readFull reads len(p) bytes at s.off; running out is truncation of the
// structure that starts at at (the file shrank under us).
func (s *spillReader) readFull(p []byte, at int64, what string) error {
	if _, err := io.ReadFull(s.r, p); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return s.truncated(at, "%s cut short", what)
		}
		return fmt.Errorf("reading spill file %s at offset %d: %w", s.path, s.off, err)
	}
	s.off += int64(len(p))
	return nil
}

// readHeader reads and checks the file header, returning its xid.
func (s *spillReader) readHeader() (uint32, error) {
	var h [spillHeaderSize]byte
	if s.size < spillHeaderSize {
		return 0, s.truncated(0, "file of %d bytes has no complete %d-byte header", s.size, spillHeaderSize)
	}
	if err := s.readFull(h[:], 0, "header"); err != nil {
		return 0, err
	}
	if string(h[:4]) != spillMagic {
		return 0, s.corrupt(0, "bad magic %q", h[:4])
	}
	if v := binary.LittleEndian.Uint16(h[4:]); v != spillVersion {
		return 0, s.corrupt(4, "unsupported version %d", v)
	}
	return binary.LittleEndian.Uint32(h[6:]), nil
}

// next reads one frame. It returns io.EOF exactly at the end of the file;
// the Change's Raw aliases a buffer reused by the following call.
func (s *spillReader) next() (Change, error) {
	at := s.off
	if at == s.size {
		return Change{}, io.EOF
	}
	if s.size-at < frameHeaderSize {
		return Change{}, s.truncated(at, "frame header cut short (%d of %d bytes)", s.size-at, frameHeaderSize)
	}
	if err := s.readFull(s.hdr[:], at, "frame header"); err != nil {
		return Change{}, err
	}
	length := int64(binary.LittleEndian.Uint32(s.hdr[0:]))
	want := binary.LittleEndian.Uint32(s.hdr[4:])
	if length < bodyFixedSize || length > bodyFixedSize+MaxRawLen {
		return Change{}, s.corrupt(at, "impossible frame length %d", length)
	}
	if s.size-s.off < length {
		return Change{}, s.truncated(at, "frame body of %d bytes cut short (%d left)", length, s.size-s.off)
	}
	if int64(cap(s.body)) < length {
		s.body = make([]byte, length)
	}
	body := s.body[:length]
	if err := s.readFull(body, at, "frame body"); err != nil {
		return Change{}, err
	}
	if got := crc32.Checksum(body, castagnoli); got != want {
		return Change{}, s.corrupt(at, "CRC-32C %08X, frame says %08X", got, want)
	}
	return Change{
		LSN:   wal.LSN(binary.LittleEndian.Uint64(body[0:])),
		Next:  wal.LSN(binary.LittleEndian.Uint64(body[8:])),
		XID:   binary.LittleEndian.Uint32(body[16:]),
		Flags: body[20],
		Raw:   body[bodyFixedSize:],
	}, nil
}

// ReadSpill parses a whole spill file image held in memory and calls fn for
// each frame in order (Raw is valid only during the call). It checks what a
// Drain checks short of the expected frame count: header, CRCs, lengths,
// every frame carrying the header's xid, strictly increasing LSNs. It is
// the tool for inspecting a spill file and the fuzz target's entry point.
func ReadSpill(name string, data []byte, fn func(Change) error) (xid uint32, err error) {
	s := spillReader{r: bytes.NewReader(data), path: name, size: int64(len(data))}
	xid, err = s.readHeader()
	if err != nil {
		return 0, err
	}
	var last wal.LSN
	for {
		at := s.off
		c, err := s.next()
		if errors.Is(err, io.EOF) {
			return xid, nil
		}
		if err != nil {
			return xid, err
		}
		if err := checkFrame(&s, at, c, xid, last); err != nil {
			return xid, err
		}
		last = c.LSN
		if err := fn(c); err != nil {
			return xid, err
		}
	}
}

// checkFrame validates a frame against its file: a CRC-valid frame of the
// wrong xid or out of order means the file is not what was written.
func checkFrame(s *spillReader, at int64, c Change, xid uint32, last wal.LSN) error {
	if c.XID != xid {
		return s.corrupt(at, "frame xid %d in the file of xid %d", c.XID, xid)
	}
	if c.LSN <= last && last != 0 {
		return s.corrupt(at, "frame LSN %s not after %s", c.LSN, last)
	}
	return nil
}
