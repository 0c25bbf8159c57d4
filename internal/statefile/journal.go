package statefile

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"time"

	"github.com/walshadow/walshadow/internal/fsutil"
)

// JournalSuffix names a journaled state file's journal: path + JournalSuffix.
const JournalSuffix = ".journal"

// journalMinCompact is the journal size below which it is never compacted,
// however small its snapshot (a variable for tests).
var journalMinCompact int64 = 1 << 20

// recordHeader is a record's length and checksum.
const recordHeader = 8

// journalHeader ties a journal to the snapshot it follows: the CRC-32C and
// size of the snapshot file's bytes (0, 0: no snapshot).
type journalHeader struct {
	Format        string `json:"format"`
	SnapshotCRC   uint32 `json:"snapshot_crc32c"`
	SnapshotBytes int64  `json:"snapshot_bytes"`
}

// Journal is the writing end of a journaled state file (see the package
// documentation): the snapshot at path, the journal at path+JournalSuffix.
// It is not safe for concurrent use: its owner serialises changes.
type Journal struct {
	spec Spec
	path string
	tie  journalHeader // the snapshot on disk
	// tied: the journal on disk follows tie and ends at end with whole
	// records; else the next Append compacts first.
	tied bool
	end  int64
	f    *os.File // open for appending once tied
	// deferred: changes are kept in the owner's memory until Sync, which
	// writes them all as one compaction (pending: the last change's
	// snapshot, nil when there is none to write).
	deferred bool
	pending  func() (any, error)
}

// OpenJournal reads the journaled state file at path for its owner: the
// snapshot's bytes go to readSnapshot (not called when there is none), and
// the change records since it are returned in order, for the owner to
// apply. Nothing is written: the first Append ties a new journal to the
// snapshot when the one on disk does not follow it (none yet, an older
// walshadow's file, a crash between a compaction's two steps) and cuts off
// a record a crash left incomplete. A snapshot or journal that cannot be
// trusted is an *Error.
func OpenJournal(path string, spec Spec, readSnapshot func(data []byte) error) (*Journal, [][]byte, error) {
	tie, records, tied, end, err := readJournaled(path, spec, readSnapshot)
	if err != nil {
		return nil, nil, err
	}
	return &Journal{spec: spec, path: path, tie: tie, tied: tied, end: end}, records, nil
}

// ReadJournal reads a journaled state file that another process may be
// writing (walshadow status, tests): as OpenJournal, but a journal that
// does not follow the snapshot is read again for up to a second, since a
// compaction replaces the snapshot, then the journal. readSnapshot may
// then be called again: each call replaces what the last one read.
func ReadJournal(path string, spec Spec, readSnapshot func(data []byte) error) ([][]byte, error) {
	for try := 0; ; try++ {
		_, records, tied, _, err := readJournaled(path, spec, readSnapshot)
		if err != nil || tied || try == 50 {
			return records, err
		}
		if _, serr := os.Stat(path + JournalSuffix); errors.Is(serr, fs.ErrNotExist) {
			return records, nil // no journal: the snapshot is the whole state
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// readJournaled reads the snapshot and, when the journal follows it, the
// journal's change records; end is where its last whole record ends.
func readJournaled(path string, spec Spec, readSnapshot func(data []byte) error) (tie journalHeader, records [][]byte, tied bool, end int64, err error) {
	tie.Format = spec.Format
	snap, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return tie, nil, false, 0, fmt.Errorf("reading %s: %w", path, err)
	default:
		if err := readSnapshot(snap); err != nil {
			return tie, nil, false, 0, err
		}
		tie.SnapshotCRC, tie.SnapshotBytes = CRC(snap), int64(len(snap))
	}
	jpath := path + JournalSuffix
	data, err := os.ReadFile(jpath)
	if errors.Is(err, fs.ErrNotExist) {
		return tie, nil, false, 0, nil
	}
	if err != nil {
		return tie, nil, false, 0, fmt.Errorf("reading %s: %w", jpath, err)
	}
	all, end, err := splitRecords(data)
	if err != nil {
		return tie, nil, false, 0, &Error{Path: jpath, Err: err, Remedy: spec.Remedy}
	}
	if len(all) == 0 {
		return tie, nil, false, 0, nil // its header was never written whole
	}
	var head journalHeader
	if err := DecodeStrict(all[0], &head); err != nil {
		return tie, nil, false, 0, &Error{Path: jpath, Err: fmt.Errorf("header: %w", err), Remedy: spec.Remedy}
	}
	if head.Format != spec.Format {
		return tie, nil, false, 0, &Error{Path: jpath, Err: fmt.Errorf("format %q, want %q", head.Format, spec.Format), Remedy: spec.Remedy}
	}
	if head != tie {
		return tie, nil, false, 0, nil // it follows an earlier snapshot: the snapshot holds its changes
	}
	return tie, all[1:], true, end, nil
}

// splitRecords splits a journal into its records' payloads; end is where
// the last whole one ends. A bad record (a length of 0 or past the end, a
// checksum that fails) is what a crash during the last append can leave
// (its pages need not reach the disk in order: zeros, then part of it)
// and ends the journal, unless a whole record follows it somewhere: then
// it is damage to a record that was synced, and the journal is corrupt.
func splitRecords(data []byte) (records [][]byte, end int64, err error) {
	off := 0
	for off < len(data) {
		n, ok := recordAt(data, off)
		if !ok {
			if q := wholeRecordAfter(data, off+1); q >= 0 {
				return nil, 0, fmt.Errorf("record at byte %d is damaged, and a whole one follows at byte %d", off, q)
			}
			return records, int64(off), nil
		}
		records = append(records, data[off+recordHeader:off+recordHeader+n])
		off += recordHeader + n
	}
	return records, int64(off), nil
}

// recordAt reports whether a whole record starts at off, and its payload's
// length.
func recordAt(data []byte, off int) (int, bool) {
	if len(data)-off < recordHeader {
		return 0, false
	}
	n := int64(binary.LittleEndian.Uint32(data[off:]))
	if n == 0 || n > int64(len(data)-off-recordHeader) {
		return 0, false
	}
	payload := data[off+recordHeader : off+recordHeader+int(n)]
	return int(n), CRC(payload) == binary.LittleEndian.Uint32(data[off+4:])
}

// wholeRecordAfter is the first offset from from on where a whole record
// starts, -1 for none.
func wholeRecordAfter(data []byte, from int) int {
	for q := from; q+recordHeader < len(data); q++ {
		if _, ok := recordAt(data, q); ok {
			return q
		}
	}
	return -1
}

// appendRecord frames payload as a record.
func appendRecord(buf, payload []byte) []byte {
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(payload)))
	buf = binary.LittleEndian.AppendUint32(buf, CRC(payload))
	return append(buf, payload...)
}

// Append makes one change durable: its record is written to the journal
// and synced before Append returns. snapshot returns the owner's whole
// state with the change (the body in its Spec's envelope); it is called
// only to compact: before the record when the journal on disk does not
// follow the snapshot (the snapshot then holds the change, and no record
// is written), after it when the journal has outgrown the snapshot. A
// failed compaction after the record leaves the change durable (the
// snapshot, if it was replaced, holds it) and the next Append compacts
// first. On error the change is not on disk.
func (j *Journal) Append(payload []byte, snapshot func() (any, error)) error {
	if len(payload) == 0 {
		return errors.New("appending an empty journal record")
	}
	if j.deferred {
		j.pending = snapshot
		return nil
	}
	if !j.tied {
		body, err := snapshot()
		if err != nil {
			return err
		}
		if written, err := j.compact(body); !written {
			return err
		}
		return nil // the snapshot holds the change (a journal not made is made at the next Append)
	}
	if j.f == nil {
		if err := j.reopen(); err != nil {
			return err
		}
	}
	rec := appendRecord(nil, payload)
	if _, err := j.f.Write(rec); err != nil {
		j.untie()
		return fmt.Errorf("appending to %s: %w", j.path+JournalSuffix, err)
	}
	if err := j.f.Sync(); err != nil {
		j.untie()
		return fmt.Errorf("syncing %s: %w", j.path+JournalSuffix, err)
	}
	j.end += int64(len(rec))
	if j.end > max(journalMinCompact, j.tie.SnapshotBytes) {
		if body, err := snapshot(); err != nil {
			j.untie() // the next Append compacts first, and fails as this did
		} else {
			_, _ = j.compact(body) // on failure untied: the next Append compacts first
		}
	}
	return nil
}

// reopen opens the journal read at open for appending, cutting off what
// follows its last whole record.
func (j *Journal) reopen() error {
	jpath := j.path + JournalSuffix
	f, err := os.OpenFile(jpath, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("opening %s: %w", jpath, err)
	}
	if st, err := f.Stat(); err != nil || st.Size() != j.end {
		if err == nil {
			err = f.Truncate(j.end)
		}
		if err == nil {
			err = f.Sync()
		}
		if err != nil {
			f.Close()
			return fmt.Errorf("cutting %s to its last whole record: %w", jpath, err)
		}
	}
	j.f = f
	return nil
}

// DeferSync makes the next appends return at once, writing nothing, until
// Sync writes them all in one compaction: many changes made together (an
// output's start agreeing on every table) then cost one atomic rewrite of
// the file, not a synced record each. Until Sync returns they are not on
// disk at all: the owner must not let anything depend on them before.
// (Records appended without a sync each could reach the disk out of
// order, leaving a hole that reads as damage.)
func (j *Journal) DeferSync() { j.deferred = true }

// Sync writes the changes appended since DeferSync (one compaction) and
// appends records one by one again from then on.
func (j *Journal) Sync() error {
	j.deferred = false
	snapshot := j.pending
	j.pending = nil
	if snapshot == nil {
		return nil
	}
	body, err := snapshot()
	if err != nil {
		return err
	}
	if written, err := j.compact(body); !written {
		return err
	}
	return nil // (a journal not made is made at the next Append)
}

// untie closes the journal: the next Append compacts first (a write that
// failed may have left part of a record, which no later record may follow).
func (j *Journal) untie() {
	j.tied = false
	if j.f != nil {
		j.f.Close()
		j.f = nil
	}
}

// Compact replaces the snapshot with body (in the Spec's envelope, written
// atomically), then the journal with an empty one that follows it.
func (j *Journal) Compact(body any) error {
	_, err := j.compact(body)
	return err
}

// compact is Compact; written: the snapshot was replaced (body is on disk
// even when making the journal failed).
func (j *Journal) compact(body any) (written bool, err error) {
	j.untie()
	parts, err := j.spec.encodeParts(body)
	if err != nil {
		return false, err
	}
	if err := fsutil.WriteFileAtomicParts(j.path, parts, 0o600, nil); err != nil {
		return false, err
	}
	tie := journalHeader{Format: j.spec.Format}
	for _, p := range parts {
		tie.SnapshotCRC = crc32.Update(tie.SnapshotCRC, castagnoli, p)
		tie.SnapshotBytes += int64(len(p))
	}
	j.tie = tie
	head, err := json.Marshal(tie)
	if err != nil {
		return true, err
	}
	jpath := j.path + JournalSuffix
	fresh := appendRecord(nil, head)
	if err := fsutil.WriteFileAtomic(jpath, fresh, 0o600, nil); err != nil {
		return true, err
	}
	f, err := os.OpenFile(jpath, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return true, fmt.Errorf("opening %s: %w", jpath, err)
	}
	j.f, j.tied, j.end = f, true, int64(len(fresh))
	return true, nil
}

// Close closes the journal's file.
func (j *Journal) Close() error {
	if j == nil || j.f == nil {
		return nil
	}
	err := j.f.Close()
	j.f, j.tied = nil, false
	return err
}
