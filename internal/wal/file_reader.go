package wal

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// SegmentName is a parsed WAL segment file name: 8 hex digits of timeline,
// then the segment number as two 8-digit halves ("log" and "seg").
type SegmentName struct {
	TLI     uint32
	Log     uint32
	Seg     uint32
	Partial bool // pg_receivewal's ".partial" suffix
}

// ParseSegmentName parses a base name such as 000000010000000000000003 or
// 000000010000000000000003.partial.
func ParseSegmentName(base string) (SegmentName, bool) {
	var n SegmentName
	if s, ok := strings.CutSuffix(base, ".partial"); ok {
		base, n.Partial = s, true
	}
	if len(base) != 24 {
		return n, false
	}
	for _, c := range base {
		if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'F') {
			return n, false
		}
	}
	parse := func(s string) uint32 { v, _ := strconv.ParseUint(s, 16, 32); return uint32(v) }
	n.TLI, n.Log, n.Seg = parse(base[:8]), parse(base[8:16]), parse(base[16:])
	return n, true
}

// StartLSN is the LSN of the segment's first byte for the given segment size.
func (n SegmentName) StartLSN(segSize uint32) (LSN, error) {
	perLog := uint64(0x100000000) / uint64(segSize)
	if uint64(n.Seg) >= perLog {
		return 0, fmt.Errorf("segment number %08X out of range for %d-byte segments", n.Seg, segSize)
	}
	return LSN((uint64(n.Log)*perLog + uint64(n.Seg)) * uint64(segSize)), nil
}

// SegmentFiles lists the WAL segment files in dir in WAL order. A complete
// segment shadows a ".partial" of the same name.
func SegmentFiles(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("listing WAL directory: %w", err)
	}
	complete := map[string]bool{}
	var names []string
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		n, ok := ParseSegmentName(e.Name())
		if !ok {
			continue
		}
		if !n.Partial {
			complete[e.Name()] = true
		}
		names = append(names, e.Name())
	}
	var out []string
	for _, name := range names {
		if base, ok := strings.CutSuffix(name, ".partial"); ok && complete[base] {
			continue
		}
		out = append(out, name)
	}
	// Timeline first, then segment number: names sort correctly as text,
	// and a .partial sorts after nothing it could shadow.
	sort.Strings(out)
	for i := range out {
		out[i] = filepath.Join(dir, out[i])
	}
	return out, nil
}

// fileChunk is how much of a segment is read at a time: small enough that
// the bytes are still in cache when the records are parsed, large enough to
// make the read syscalls cheap.
const fileChunk = 256 << 10

// FileReader reads records from consecutive segment files through a
// StreamReader, reading each segment in chunks straight into the stream's
// buffer.
type FileReader struct {
	paths []string
	next  int
	sr    *StreamReader
	cur   string
	f     *os.File // the open segment, nil between segments
	left  int      // bytes of f not read yet
}

// NewFileReader reads the given paths in order. A path naming a directory
// stands for the segment files in it (SegmentFiles).
func NewFileReader(paths ...string) (*FileReader, error) {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("opening WAL: %w", err)
		}
		if st.IsDir() {
			fs, err := SegmentFiles(p)
			if err != nil {
				return nil, err
			}
			files = append(files, fs...)
			continue
		}
		files = append(files, p)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("opening WAL: no segment files in %s", strings.Join(paths, ", "))
	}
	return &FileReader{paths: files}, nil
}

// Files is the list of segment files the reader will read, in order.
func (r *FileReader) Files() []string { return r.paths }

// CurrentFile is the segment file most recently loaded.
func (r *FileReader) CurrentFile() string { return r.cur }

// Stream is the underlying stream reader (nil before the first Next).
func (r *FileReader) Stream() *StreamReader { return r.sr }

// Next returns the next record. At the end of the last file it returns
// io.EOF, or a KindEndOfWAL error when the last record is incomplete.
// Records alias the reader's buffer until the next call.
func (r *FileReader) Next() (*Record, error) {
	for {
		if r.sr != nil {
			rec, err := r.sr.Next()
			if err != ErrNeedMore {
				return rec, err
			}
		}
		if r.f != nil {
			if err := r.readChunk(); err != nil {
				return nil, err
			}
			continue
		}
		if r.next == len(r.paths) {
			if r.sr != nil && r.sr.InRecord() {
				return nil, errorf(r.sr.PushLSN(), KindEndOfWAL, "WAL ends inside a record: the segment after %s is missing", filepath.Base(r.cur))
			}
			return nil, io.EOF
		}
		if err := r.load(r.paths[r.next]); err != nil {
			return nil, err
		}
		r.next++
	}
}

// Close releases the open segment file, if any.
func (r *FileReader) Close() error {
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}

// readChunk pushes the next chunk of the open segment into the stream.
func (r *FileReader) readChunk() error {
	n := min(r.left, fileChunk)
	if _, err := io.ReadFull(r.f, r.sr.WriteBuffer(n)); err != nil {
		r.Close()
		return fmt.Errorf("%s: reading: %w", r.cur, err)
	}
	r.sr.Advance(n)
	r.left -= n
	if r.left == 0 {
		return r.Close()
	}
	return nil
}

// load opens one segment file, checks it continues the stream, and pushes
// its first page header.
func (r *FileReader) load(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("opening WAL segment: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
		}
	}()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("opening WAL segment: %w", err)
	}
	size := int(st.Size())
	name, ok := ParseSegmentName(filepath.Base(path))
	if !ok {
		return fmt.Errorf("%s: not a WAL segment file name (want 24 hex digits)", path)
	}
	var hdr [LongPageHeaderLen]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		return fmt.Errorf("%s: reading the first page header: %w", path, err)
	}
	ph, _ := DecodePageHeader(hdr[:])
	if !ph.Long() || !ValidSegmentSize(ph.SegSize) {
		return fmt.Errorf("%s: first page has no valid long header (not a WAL segment, or zero-filled)", path)
	}
	if size > int(ph.SegSize) {
		return fmt.Errorf("%s: file is %d bytes, larger than its %d-byte segment size", path, size, ph.SegSize)
	}
	start, err := name.StartLSN(ph.SegSize)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if r.sr == nil {
		r.sr, err = NewStreamReader(start, StreamOptions{SegmentSize: ph.SegSize})
		if err != nil {
			return err
		}
	} else if want := r.sr.PushLSN(); start != want {
		return fmt.Errorf("%s starts at %s but the previous segment %s ended at %s: segments missing or out of order", filepath.Base(path), start, filepath.Base(r.cur), want)
	}
	r.sr.Push(hdr[:])
	r.cur = path
	r.f = f
	r.left = size - LongPageHeaderLen
	ok = true
	if r.left == 0 {
		return r.Close()
	}
	return nil
}
