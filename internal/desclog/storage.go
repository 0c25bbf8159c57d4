package desclog

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"strings"
)

const (
	// CheckpointFile and TailFile are the log's two files under its directory.
	CheckpointFile = "desc_log.ckpt"
	TailFile       = "desc_log.tail"

	headerLen     = 40
	formatVersion = 1
	kindCkpt      = 1
	kindTail      = 2
	frameHeader   = 8

	// MaxFrameBody caps one frame's body (a batch of about a million
	// relations). Larger lengths are corruption, not a torn write, so a
	// length flipped in one of its top bits is refused instead of being
	// mistaken for the torn end of the file.
	MaxFrameBody = 256 << 20
)

var headerMagic = [8]byte{'W', 'S', 'D', 'E', 'S', 'C', 'L', 'G'}

var (
	// ErrCorrupt: a log file is damaged in a way a crash cannot explain (a
	// bad checkpoint, an interior frame failing its crc). Fatal: the log
	// must be deleted and the state re-bootstrapped.
	ErrCorrupt = errors.New("descriptor log corrupt")
	// ErrIdentityMismatch: the log on disk belongs to another source,
	// database, timeline or server version.
	ErrIdentityMismatch = errors.New("descriptor log belongs to another source")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func encodeHeader(id Identity, kind byte) []byte {
	b := make([]byte, 0, headerLen)
	b = append(b, headerMagic[:]...)
	b = le.AppendUint16(b, formatVersion)
	b = append(b, kind, 0)
	b = le.AppendUint32(b, id.PGMajor)
	b = le.AppendUint64(b, id.SystemID)
	b = le.AppendUint32(b, id.Timeline)
	b = le.AppendUint32(b, id.DbOid)
	b = le.AppendUint32(b, id.SegmentSize)
	return le.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// checkHeader verifies a file's header against the expected identity.
func checkHeader(path string, data []byte, want Identity, kind byte) error {
	if len(data) < headerLen {
		return fmt.Errorf("%w: %s: %d bytes, shorter than the %d-byte header", ErrCorrupt, path, len(data), headerLen)
	}
	h := data[:headerLen]
	if !bytes.Equal(h[:8], headerMagic[:]) {
		return fmt.Errorf("%w: %s: bad magic %q", ErrCorrupt, path, h[:8])
	}
	if got := le.Uint32(h[36:]); got != crc32.Checksum(h[:36], castagnoli) {
		return fmt.Errorf("%w: %s: header crc mismatch", ErrCorrupt, path)
	}
	if v := le.Uint16(h[8:]); v != formatVersion {
		return fmt.Errorf("%s: format version %d, this build reads %d", path, v, formatVersion)
	}
	if h[10] != kind {
		return fmt.Errorf("%w: %s: file kind %d, want %d", ErrCorrupt, path, h[10], kind)
	}
	got := Identity{
		PGMajor: le.Uint32(h[12:]), SystemID: le.Uint64(h[16:]), Timeline: le.Uint32(h[24:]),
		DbOid: le.Uint32(h[28:]), SegmentSize: le.Uint32(h[32:]),
	}
	if got == want {
		return nil
	}
	var diffs []string
	field := func(name string, onDisk, expected uint64) {
		if onDisk != expected {
			diffs = append(diffs, fmt.Sprintf("%s %d on disk, %d expected", name, onDisk, expected))
		}
	}
	field("pg major", uint64(got.PGMajor), uint64(want.PGMajor))
	field("system id", got.SystemID, want.SystemID)
	field("timeline", uint64(got.Timeline), uint64(want.Timeline))
	field("database oid", uint64(got.DbOid), uint64(want.DbOid))
	field("wal segment size", uint64(got.SegmentSize), uint64(want.SegmentSize))
	return fmt.Errorf("%w: %s: %s", ErrIdentityMismatch, path, strings.Join(diffs, "; "))
}

func appendFrame(dst, body []byte) []byte {
	dst = le.AppendUint32(dst, uint32(len(body)))
	dst = le.AppendUint32(dst, crc32.Checksum(body, castagnoli))
	return append(dst, body...)
}

// frame is one frame's body and the file offset of its header.
type frame struct {
	off  int64
	body []byte
}

// scanFrames splits data (a whole file, header included) into frames.
// strict (the checkpoint) refuses any damage; otherwise a torn final frame
// is reported as tornAt >= 0, the offset to truncate the file to.
func scanFrames(path string, data []byte, strict bool) (frames []frame, tornAt int64, err error) {
	off := headerLen
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s at offset %d: %s", ErrCorrupt, path, off, fmt.Sprintf(format, args...))
	}
	torn := func(format string, args ...any) ([]frame, int64, error) {
		if strict {
			return nil, -1, corrupt(format, args...)
		}
		return frames, int64(off), nil
	}
	for off < len(data) {
		rest := data[off:]
		if len(rest) < frameHeader {
			return torn("%d bytes, shorter than a frame header", len(rest))
		}
		n := le.Uint32(rest)
		if n == 0 {
			if allZero(rest) {
				return torn("zero-filled end")
			}
			return nil, -1, corrupt("zero-length frame followed by data")
		}
		if n > MaxFrameBody {
			return nil, -1, corrupt("frame length %d exceeds %d", n, MaxFrameBody)
		}
		end := frameHeader + int(n)
		if end > len(rest) {
			return torn("frame of %d bytes, %d present", n, len(rest)-frameHeader)
		}
		body := rest[frameHeader:end]
		if crc32.Checksum(body, castagnoli) != le.Uint32(rest[4:]) {
			if end == len(rest) {
				return torn("crc mismatch in the final frame")
			}
			return nil, -1, corrupt("crc mismatch in a %d-byte frame followed by %d more bytes", n, len(rest)-end)
		}
		frames = append(frames, frame{off: int64(off), body: body})
		off += end
	}
	return frames, -1, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// truncateDurably cuts a torn tail off and makes the new length durable.
func truncateDurably(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return err
	}
	return f.Sync()
}
