package source

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/walshadow/walshadow/internal/wal"
)

// Archive is the directory of filtered WAL segments: the shadow's
// restore_command reads it, and the walsender serves a reconnecting shadow
// from it when the bytes it asks for are no longer in memory.
//
// Every segment is written whole and atomically (temporary file, fsync,
// rename, directory fsync), so a reader sees a complete segment or none.
// Only file names that parse as WAL segments are ever read or removed; any
// other file in the directory is left alone.
//
// Permissions: the shadow runs as its own OS user (postgres), which must be
// able to read the segments, while nobody else may (the filtered WAL still
// carries every catalog change, pg_authid's password hashes included). The
// directory is made 0750 and the segments 0640; with ArchiveConfig.ReaderGroup
// set, both are given that group (the shadow user's group, e.g. "postgres"),
// so the shadow can read but neither modify nor delete them. Every parent
// directory must be searchable by the shadow user as well.
//
// An Archive is safe for concurrent use.
type Archive struct {
	dir       string
	segSize   uint32
	readerGID int // -1: leave the group alone

	writeMu sync.Mutex // one WriteSegment at a time (they share temp names)

	mu       sync.RWMutex
	segments map[uint64]string // segment number -> file name
	durable  wal.LSN           // cached DurableEnd
}

// ArchiveConfig configures OpenArchive.
type ArchiveConfig struct {
	// Dir is the archive directory (made absolute: the shadow resolves
	// restore_command from its own data directory). Created if missing.
	Dir string
	// SegmentSize is the source's WAL segment size in bytes.
	SegmentSize uint32
	// ReaderGroup is the OS group (name or numeric id) that may read the
	// segments: the shadow user's group. Empty leaves the group as created.
	ReaderGroup string
}

// archiveDirMode and archiveFileMode let the owner write and the reader
// group read; others get nothing.
const (
	archiveDirMode  = 0o750
	archiveFileMode = 0o640
)

// archiveTempPattern matches the temporary files WriteSegment creates; a
// crash can leave one behind, and OpenArchive removes it.
var archiveTempPattern = regexp.MustCompile(`^\.[0-9A-F]{24}\.tmp$`)

// OpenArchive opens (creating if needed) the archive directory and indexes
// the segments already in it.
func OpenArchive(cfg ArchiveConfig) (*Archive, error) {
	if !wal.ValidSegmentSize(cfg.SegmentSize) {
		return nil, fmt.Errorf("archive: invalid WAL segment size %d", cfg.SegmentSize)
	}
	if cfg.Dir == "" {
		return nil, errors.New("archive: no directory given")
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("archive: resolving %q: %w", cfg.Dir, err)
	}
	// The directory ends up inside restore_command in postgresql.conf.
	if strings.ContainsFunc(dir, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return nil, fmt.Errorf("archive: directory %q contains control characters", dir)
	}
	a := &Archive{dir: dir, segSize: cfg.SegmentSize, readerGID: -1, segments: map[uint64]string{}}
	if cfg.ReaderGroup != "" {
		if a.readerGID, err = archiveLookupGroupID(cfg.ReaderGroup); err != nil {
			return nil, fmt.Errorf("archive: reader group: %w", err)
		}
	}
	if err := os.MkdirAll(dir, archiveDirMode); err != nil {
		return nil, fmt.Errorf("archive: creating %s: %w", dir, err)
	}
	if err := os.Chmod(dir, archiveDirMode); err != nil {
		return nil, fmt.Errorf("archive: chmod %s: %w", dir, err)
	}
	if a.readerGID >= 0 {
		if err := os.Chown(dir, -1, a.readerGID); err != nil {
			return nil, fmt.Errorf("archive: giving %s to group %s: %w", dir, cfg.ReaderGroup, err)
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("archive: listing %s: %w", dir, err)
	}
	for _, e := range ents {
		name := e.Name()
		if archiveTempPattern.MatchString(name) {
			if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("archive: removing the leftover %s: %w", name, err)
			}
			continue
		}
		segNo, ok := a.segmentNumber(name)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		if prev, dup := a.segments[segNo]; dup {
			return nil, fmt.Errorf("archive: %s and %s hold the same segment (two timelines in one archive)", prev, name)
		}
		a.segments[segNo] = name
	}
	a.durable = a.computeDurableEnd()
	return a, nil
}

func archiveLookupGroupID(group string) (int, error) {
	if id, err := strconv.Atoi(group); err == nil && id >= 0 {
		return id, nil
	}
	g, err := user.LookupGroup(group)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(g.Gid)
}

// segmentNumber parses a complete segment's file name.
func (a *Archive) segmentNumber(name string) (uint64, bool) {
	n, ok := wal.ParseSegmentName(name)
	if !ok || n.Partial {
		return 0, false
	}
	start, err := n.StartLSN(a.segSize)
	if err != nil {
		return 0, false
	}
	return uint64(start) / uint64(a.segSize), true
}

// Dir is the archive directory (absolute).
func (a *Archive) Dir() string { return a.dir }

// SegmentSize is the WAL segment size the archive was opened with.
func (a *Archive) SegmentSize() uint32 { return a.segSize }

// SegmentName is the file name of the segment of timeline tli containing lsn.
func (a *Archive) SegmentName(tli uint32, lsn wal.LSN) string {
	return archiveSegmentName(tli, uint64(lsn)/uint64(a.segSize), a.segSize)
}

// archiveSegmentName is PostgreSQL's XLogFileName.
func archiveSegmentName(tli uint32, segNo uint64, segSize uint32) string {
	perLog := uint64(0x100000000) / uint64(segSize)
	return fmt.Sprintf("%08X%08X%08X", tli, segNo/perLog, segNo%perLog)
}

// Path is where the segment name lives (or would live) in the archive.
func (a *Archive) Path(name string) string { return filepath.Join(a.dir, name) }

// Has reports whether the archive holds the complete segment name.
func (a *Archive) Has(name string) bool {
	segNo, ok := a.segmentNumber(name)
	if !ok {
		return false
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.segments[segNo] == name
}

// WriteSegment stores one complete filtered segment under its WAL file name,
// atomically and durably; an existing segment of that name is replaced.
func (a *Archive) WriteSegment(name string, data []byte) error {
	segNo, ok := a.segmentNumber(name)
	if !ok {
		return fmt.Errorf("archive: %q is not a WAL segment file name", name)
	}
	if len(data) != int(a.segSize) {
		return fmt.Errorf("archive: segment %s has %d bytes, want %d", name, len(data), a.segSize)
	}
	a.mu.RLock()
	other, taken := a.segments[segNo]
	a.mu.RUnlock()
	if taken && other != name {
		return fmt.Errorf("archive: segment %s would shadow %s (same segment, other timeline)", name, other)
	}

	a.writeMu.Lock()
	defer a.writeMu.Unlock()
	final := a.Path(name)
	tmp := filepath.Join(a.dir, "."+name+".tmp")
	if err := a.writeFileSynced(tmp, data); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("archive: writing segment %s: %w", name, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("archive: renaming segment %s into place: %w", name, err)
	}
	if err := archiveSyncDir(a.dir); err != nil {
		return fmt.Errorf("archive: segment %s: %w", name, err)
	}

	a.mu.Lock()
	a.segments[segNo] = name
	a.durable = a.computeDurableEnd()
	a.mu.Unlock()
	return nil
}

func (a *Archive) writeFileSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, archiveFileMode)
	if err != nil {
		return err
	}
	// The umask may have narrowed the mode, and a stale temp file keeps its own.
	err = f.Chmod(archiveFileMode)
	if err == nil && a.readerGID >= 0 {
		err = f.Chown(-1, a.readerGID)
	}
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// archiveSyncDir fsyncs a directory, making renames and creations in it durable.
func archiveSyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("opening directory %s to fsync it: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync of directory %s: %w", dir, err)
	}
	return nil
}

// DurableEnd is the end LSN of the highest segment H such that every segment
// from the lowest one held through H is in the archive (0 when empty): the
// archive holds every byte of [lowest segment start, DurableEnd).
func (a *Archive) DurableEnd() wal.LSN {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.durable
}

// computeDurableEnd walks up from the lowest segment; called with a.mu held.
func (a *Archive) computeDurableEnd() wal.LSN {
	if len(a.segments) == 0 {
		return 0
	}
	nums := make([]uint64, 0, len(a.segments))
	for n := range a.segments {
		nums = append(nums, n)
	}
	slices.Sort(nums)
	last := nums[0]
	for _, n := range nums[1:] {
		if n != last+1 {
			break
		}
		last = n
	}
	return wal.LSN((last + 1) * uint64(a.segSize))
}

// Sweep removes the segments that end at or below keepFrom; the segment
// containing keepFrom stays. The caller computes keepFrom as
// min(shadow replay - retention bytes, shadow restartpoint REDO), so the
// shadow can always restart from what is left. Files that are not segments
// the archive indexed are never touched. It returns how many it removed.
func (a *Archive) Sweep(keepFrom wal.LSN) (removed int, err error) {
	a.mu.RLock()
	var doomed []uint64
	for n := range a.segments {
		if wal.LSN((n+1)*uint64(a.segSize)) <= keepFrom {
			doomed = append(doomed, n)
		}
	}
	a.mu.RUnlock()
	slices.Sort(doomed)

	var errs []error
	for _, n := range doomed {
		a.mu.Lock()
		name, ok := a.segments[n]
		if ok {
			// Drop it from the index first: from now on nobody is told it exists.
			delete(a.segments, n)
			a.durable = a.computeDurableEnd()
		}
		a.mu.Unlock()
		if !ok {
			continue
		}
		if rerr := os.Remove(a.Path(name)); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("archive: removing segment %s: %w", name, rerr))
			continue
		}
		removed++
	}
	return removed, errors.Join(errs...)
}

// RestoreCommand is the shadow's restore_command: copy the requested file
// out of the archive when it is there, fail quietly (exit 1, which
// PostgreSQL takes as "not archived") when it is not. The directory is
// shell-quoted and its '%' doubled for PostgreSQL's own escapes; %f is
// always a bare WAL or history file name and %p a path PostgreSQL chose.
// Segments appear by rename, so cp never sees a partial file.
func (a *Archive) RestoreCommand() string {
	dir := strings.ReplaceAll(archiveShellQuote(a.dir), "%", "%%")
	return fmt.Sprintf("test -f %s/%%f && cp %s/%%f %%p", dir, dir)
}

// archiveShellQuote single-quotes s for /bin/sh.
func archiveShellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// LSNSink adapts the archive to writers that address a segment by its start
// LSN rather than its file name (the session pump's segment sink).
func (a *Archive) LSNSink(tli uint32) *ArchiveLSNSink { return &ArchiveLSNSink{archive: a, tli: tli} }

// ArchiveLSNSink writes segments of one timeline by start LSN.
type ArchiveLSNSink struct {
	archive *Archive
	tli     uint32
}

// WriteSegment archives the segment that starts at start.
func (s *ArchiveLSNSink) WriteSegment(start wal.LSN, data []byte) error {
	if start%wal.LSN(s.archive.segSize) != 0 {
		return fmt.Errorf("archive: segment start %s is not on a %d-byte segment boundary", start, s.archive.segSize)
	}
	return s.archive.WriteSegment(s.archive.SegmentName(s.tli, start), data)
}

// ArchiveCorruptError is a segment of the archive that does not read as WAL.
// It is permanent: the bytes on disk do not change by retrying.
type ArchiveCorruptError struct {
	// Path is the segment file at fault.
	Path string
	// LSN is where reading failed: the damaged record or page, or the
	// segment's start for a file of the wrong size.
	LSN    wal.LSN
	Reason string
	// Resume is where walshadow streams from the source's slot again once
	// the segment is removed.
	Resume wal.LSN
}

func (e *ArchiveCorruptError) Error() string {
	return fmt.Sprintf("archive segment %s is corrupt at %s (%s): remove it; walshadow streams segments from %s on again from the source's slot",
		e.Path, e.LSN, e.Reason, e.Resume)
}

// Verify reads every complete segment of the archive whose range ends after
// from, as WAL: page headers, the xl_prev chain and the CRC-32C of every
// record, across consecutive segments (a record may continue into the next
// file; the last segment may end inside one). It returns an
// *ArchiveCorruptError for the first damage, naming resume in the remedy.
// Segments removed while it runs (Sweep) are skipped.
func (a *Archive) Verify(from, resume wal.LSN) error {
	type segment struct {
		no   uint64
		name string
	}
	var segs []segment
	a.mu.RLock()
	for n, name := range a.segments {
		if wal.LSN((n+1)*uint64(a.segSize)) > from {
			segs = append(segs, segment{n, name})
		}
	}
	a.mu.RUnlock()
	slices.SortFunc(segs, func(x, y segment) int { return cmp.Compare(x.no, y.no) })

	v := archiveVerifier{archive: a, resume: resume}
	for _, s := range segs {
		if err := v.segment(s.no, s.name); err != nil {
			return err
		}
	}
	return nil
}

// archiveVerifier reads runs of consecutive segments through one stream
// reader; a gap starts a new one.
type archiveVerifier struct {
	archive *Archive
	resume  wal.LSN
	sr      *wal.StreamReader
	lastNo  uint64
	sysID   uint64 // of the first segment read; every run must match it
	// names of the segments of the current run, by number, to name the
	// file a failing record starts in.
	names map[uint64]string
}

// archiveVerifyChunk is how much of a segment is pushed at a time.
const archiveVerifyChunk = 256 << 10

func (v *archiveVerifier) segment(no uint64, name string) error {
	a := v.archive
	path := a.Path(name)
	start := wal.LSN(no * uint64(a.segSize))
	corrupt := func(lsn wal.LSN, reason string) error {
		return &ArchiveCorruptError{Path: path, LSN: lsn, Reason: reason, Resume: v.resume}
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		v.sr = nil // swept meanwhile: what follows is a new run
		return nil
	}
	if err != nil {
		return fmt.Errorf("archive: verifying segment %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("archive: verifying segment %s: %w", path, err)
	}
	if st.Size() != int64(a.segSize) {
		return corrupt(start, fmt.Sprintf("the file has %d bytes, not the segment size %d", st.Size(), a.segSize))
	}
	if v.sr == nil || no != v.lastNo+1 {
		if v.sr, err = wal.NewStreamReader(start, wal.StreamOptions{SegmentSize: a.segSize}); err != nil {
			return fmt.Errorf("archive: verifying segment %s: %w", path, err)
		}
		v.names = map[uint64]string{}
	}
	v.lastNo = no
	v.names[no] = name
	for left := int(a.segSize); left > 0; {
		n := min(left, archiveVerifyChunk)
		if _, err := io.ReadFull(f, v.sr.WriteBuffer(n)); err != nil {
			v.sr = nil
			return fmt.Errorf("archive: verifying segment %s: reading: %w", path, err)
		}
		v.sr.Advance(n)
		left -= n
		for {
			_, err := v.sr.Next()
			if errors.Is(err, wal.ErrNeedMore) {
				break
			}
			if err != nil {
				return v.failure(err, path, name)
			}
		}
		if id := v.sr.SystemID(); id != 0 {
			if v.sysID == 0 {
				v.sysID = id
			} else if id != v.sysID {
				return corrupt(start, fmt.Sprintf("system identifier %d, earlier segments have %d: from another cluster", id, v.sysID))
			}
		}
	}
	return nil
}

// failure turns a reading error into an ArchiveCorruptError naming the
// segment holding the failing LSN; when that is an earlier segment than the
// one being read (a record crossing files), the reason names both.
func (v *archiveVerifier) failure(err error, path, name string) error {
	var werr *wal.Error
	if !errors.As(err, &werr) {
		return fmt.Errorf("archive: verifying segment %s: %w", path, err)
	}
	reason := werr.Kind.String() + ": " + werr.Msg
	if werr.Err != nil {
		reason += ": " + werr.Err.Error()
	}
	at := name
	if other, ok := v.names[uint64(werr.LSN)/uint64(v.archive.segSize)]; ok && other != name {
		at = other
		reason += "; the record continues into " + name
	}
	v.sr = nil
	return &ArchiveCorruptError{Path: v.archive.Path(at), LSN: werr.LSN, Reason: reason, Resume: v.resume}
}
