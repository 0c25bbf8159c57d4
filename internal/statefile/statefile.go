// Package statefile owns the envelope every walshadow state file is kept
// in, and the state directory's layout (StateDir, OutputDir): no other
// package names a path in it or writes a state file's checksum.
//
// # The envelope
//
//	{
//	  "format": "walshadow-manifest",   what the file holds (Spec.Format)
//	  "version": 3,                      the body's layout (Spec.Version)
//	  "crc32c": 2989240071,              CRC-32C (Castagnoli) of body's bytes exactly as they are in the file
//	  "body": {                          the state itself, indented JSON
//	    ...
//	  }
//	}
//
// A file is rewritten whole and atomically: a temporary file beside it,
// fsync, rename over it, fsync of the directory (fsutil.WriteFileAtomic),
// so a crash leaves the old file or the new one. The body comes last: a
// file cut short anywhere is an incomplete JSON document.
//
// Reading tells three cases apart:
//
//   - absent: there is no file (the error satisfies errors.Is(err,
//     fs.ErrNotExist)): a fresh start;
//   - truncated (*Error with Truncated): the file is empty, only white
//     space, or a JSON document that ends before its top-level object
//     closes — what a crash can leave on a filesystem that does not order
//     data before the rename;
//   - corrupt (*Error): anything else — invalid JSON, trailing data,
//     another format, a version this walshadow does not read, a checksum
//     mismatch (a hand-edited or damaged file), a body with unknown fields
//     or values its owner refuses.
//
// A file written before the envelope existed (a JSON object without
// "body") is handed to the owner's legacy reader, once: the next write
// puts it in the envelope.
//
// # Journaled files
//
// A file holding one entry per table (the output's baseline and its load
// ledger) rewritten whole on every change would cost, over a start that
// loads N tables, time and bytes in N squared. Such a file is a snapshot,
// the file in its envelope as above, and a journal beside it
// (path + JournalSuffix) of the changes since, appended and synced one at a
// time (journal.go):
//
//	journal := header record, change record*
//	record  := length uint32 LE | crc32c uint32 LE (CRC-32C of payload) | payload (length bytes)
//	header  := {"format": "walshadow-loads",   the snapshot's Spec.Format
//	            "snapshot_crc32c": 3118023421, CRC-32C of the snapshot file's bytes
//	            "snapshot_bytes": 20480}       its size (0 and 0: no snapshot)
//
// A change record's payload is its owner's (a JSON document). A journal
// whose header does not match the snapshot beside it was written before
// that snapshot (a crash between a compaction's two steps, or an older
// walshadow that rewrote the file whole) and is ignored: the snapshot
// holds its changes. Each record is synced before the next is written, so
// only the last can be bad after a crash (cut short, zeros where its pages
// did not reach the disk, a checksum that fails): a bad record ends the
// journal, and the next append cuts it off, unless a whole record follows
// it, which makes it damage to a synced record: the file is corrupt. When
// the journal outgrows its snapshot (and 1 MiB), the snapshot is rewritten
// with every change, then an empty journal that follows it takes the old
// one's place, each atomically. Many changes made together can be
// deferred to one such rewrite (Journal.DeferSync).
package statefile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"slices"

	"github.com/walshadow/walshadow/internal/fsutil"
)

// Spec is one kind of state file.
type Spec struct {
	Format  string // e.g. "walshadow-manifest"
	Version int    // the body layout this walshadow writes and reads
	// Reads are older versions whose body this walshadow reads as it is
	// (the next write puts it in Version).
	Reads []int
	// Remedy is what an operator can do about a file that cannot be
	// trusted; it ends the error.
	Remedy string
}

// Error is a state file that cannot be trusted.
type Error struct {
	Path      string
	Truncated bool // cut short (see the package documentation), else corrupt
	Err       error
	Remedy    string
}

func (e *Error) Error() string {
	what := "corrupt"
	if e.Truncated {
		what = "truncated"
	}
	s := fmt.Sprintf("%s is %s (%v)", e.Path, what, e.Err)
	if e.Remedy != "" {
		s += ": " + e.Remedy
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CRC is CRC-32C (Castagnoli) of b: the envelope's checksum, and the one
// the state files' forms before the envelope used.
func CRC(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// Encode is the file holding body in s's envelope.
func (s Spec) Encode(body any) ([]byte, error) {
	parts, err := s.encodeParts(body)
	if err != nil {
		return nil, err
	}
	return bytes.Join(parts, nil), nil
}

// encodeParts is Encode's file in three parts (the envelope's head, the
// body, its end), so that a large body is not copied to be written.
func (s Spec) encodeParts(body any) ([][]byte, error) {
	b, err := json.MarshalIndent(body, "  ", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", s.Format, err)
	}
	format, _ := json.Marshal(s.Format)
	head := fmt.Sprintf("{\n  \"format\": %s,\n  \"version\": %d,\n  \"crc32c\": %d,\n  \"body\": ", format, s.Version, CRC(b))
	return [][]byte{[]byte(head), b, []byte("\n}\n")}, nil
}

// Write replaces path with body in s's envelope, atomically (mode 0600).
func (s Spec) Write(path string, body any) error { return s.WriteWith(path, body, nil) }

// WriteWith is Write calling beforeRename on the temporary file before it
// takes path's place (to hand it to another owner, say).
func (s Spec) WriteWith(path string, body any, beforeRename func(tmp string) error) error {
	parts, err := s.encodeParts(body)
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomicParts(path, parts, 0o600, beforeRename)
}

// Read decodes path's body into body. No file: an error satisfying
// errors.Is(err, fs.ErrNotExist). A file in the form it had before the
// envelope goes to legacy (nil: refused as corrupt), which decodes it into
// body itself; what legacy returns that is not an *Error is reported as
// the file being corrupt.
func (s Spec) Read(path string, body any, legacy func(data []byte) error) error {
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return fmt.Errorf("reading %s: %w", path, err)
	}
	return s.Decode(path, data, body, legacy)
}

// envelope is the on-disk form. Its fields stay raw: a file of the form
// before the envelope may give "format" as a number, or lack a key.
type envelope struct {
	Format  json.RawMessage  `json:"format"`
	Version json.RawMessage  `json:"version"`
	CRC     json.RawMessage  `json:"crc32c"`
	Body    *json.RawMessage `json:"body"`
}

// Corrupt is a file of s refused for err, after the envelope accepted it
// (a value its owner cannot take).
func (s Spec) Corrupt(path string, err error) error {
	return &Error{Path: path, Err: err, Remedy: s.Remedy}
}

// Decode is Read of a file's contents (path names it in errors).
func (s Spec) Decode(path string, data []byte, body any, legacy func(data []byte) error) error {
	bad := func(truncated bool, err error) error {
		return &Error{Path: path, Truncated: truncated, Err: err, Remedy: s.Remedy}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return bad(true, errors.New("the file is empty"))
	}
	var env envelope
	if err := DecodeStrict(data, &env); err != nil {
		// Not an envelope with its keys alone: a form before the envelope
		// (no "body", other keys), or damage.
		var loose envelope
		if lerr := json.Unmarshal(data, &loose); lerr != nil {
			return bad(IsCutShort(data, lerr), lerr)
		}
		if loose.Body != nil {
			return bad(false, err)
		}
		env = loose
	}
	if env.Body == nil {
		if legacy == nil {
			return bad(false, errors.New("no body"))
		}
		if err := legacy(data); err != nil {
			var se *Error
			if errors.As(err, &se) {
				return err
			}
			return bad(false, err)
		}
		return nil
	}
	var format string
	var version int
	var crc uint32
	if err := json.Unmarshal(env.Format, &format); err != nil {
		return bad(false, fmt.Errorf("format: %w", err))
	}
	if err := json.Unmarshal(env.Version, &version); err != nil {
		return bad(false, fmt.Errorf("version: %w", err))
	}
	switch {
	case format != s.Format:
		return bad(false, fmt.Errorf("format %q, want %q", format, s.Format))
	case version != s.Version && !slices.Contains(s.Reads, version):
		return bad(false, fmt.Errorf("version %d, this walshadow reads version %d", version, s.Version))
	}
	if err := json.Unmarshal(env.CRC, &crc); err != nil {
		return bad(false, fmt.Errorf("crc32c: %w", err))
	}
	if sum := CRC(*env.Body); sum != crc {
		return bad(false, fmt.Errorf("checksum mismatch: crc32c %d, the body sums to %d", crc, sum))
	}
	if err := DecodeStrict(*env.Body, body); err != nil {
		return bad(false, fmt.Errorf("body: %w", err))
	}
	return nil
}

// DecodeStrict decodes one JSON document into v, refusing unknown fields
// and trailing data: what a legacy reader uses on a file's old form.
func DecodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON document")
	}
	return nil
}

// IsCutShort reports whether err, from decoding data as JSON, means the
// document (an object) ends before it is complete, every byte valid so
// far: a file truncated rather than damaged.
func IsCutShort(data []byte, err error) bool {
	var syntax *json.SyntaxError
	content := bytes.TrimRight(data, " \t\r\n")
	return bytes.HasPrefix(bytes.TrimLeft(content, " \t\r\n"), []byte("{")) &&
		errors.As(err, &syntax) && syntax.Offset >= int64(len(content))
}
