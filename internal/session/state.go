package session

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"

	"github.com/walshadow/walshadow/internal/fsutil"
	"github.com/walshadow/walshadow/internal/wal"
)

// progressFile is the session's resume state in the state directory:
//
//	{"version":1,"system_id":"…","timeline":1,"resume_lsn":"0/3000000",
//	 "delivered_lsn":"0/3012345","crc":123}
//
// written atomically (tmp, fsync, rename, directory fsync). The CRC-32C
// covers the JSON encoding of the other fields, so a torn or edited file is
// refused rather than trusted. (The full manifest of the end-to-end issue
// replaces it.)
const progressFile = "progress.json"

// Progress is the durable resume state.
type Progress struct {
	Version   int     `json:"version"`
	SystemID  string  `json:"system_id"` // decimal: JSON numbers lose 64-bit precision
	Timeline  uint32  `json:"timeline"`
	ResumeLSN wal.LSN `json:"-"`
	Resume    string  `json:"resume_lsn"`
	// DeliveredLSN: every transaction committed at or before it was
	// acknowledged downstream; a restart skips them.
	DeliveredLSN wal.LSN `json:"-"`
	Delivered    string  `json:"delivered_lsn,omitempty"`
	CRC          uint32  `json:"crc"`
}

func (p *Progress) checksum() uint32 {
	c := *p
	c.CRC = 0
	b, _ := json.Marshal(c)
	return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))
}

// loadProgress reads the resume state; a missing file means a fresh start.
func loadProgress(dir string) (*Progress, error) {
	path := filepath.Join(dir, progressFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	var p Progress
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("%s is corrupt (%v): restore it or start from a fresh state_dir", path, err)
	}
	if p.Version != 1 || p.checksum() != p.CRC {
		return nil, fmt.Errorf("%s is corrupt (version %d, checksum mismatch): restore it or start from a fresh state_dir", path, p.Version)
	}
	if p.ResumeLSN, err = wal.ParseLSN(p.Resume); err != nil {
		return nil, fmt.Errorf("%s: resume_lsn: %w", path, err)
	}
	if p.Delivered != "" {
		if p.DeliveredLSN, err = wal.ParseLSN(p.Delivered); err != nil {
			return nil, fmt.Errorf("%s: delivered_lsn: %w", path, err)
		}
	}
	return &p, nil
}

// saveProgress writes the resume state atomically.
func saveProgress(dir string, p Progress) error {
	p.Version = 1
	p.Resume = p.ResumeLSN.String()
	if p.DeliveredLSN != 0 {
		p.Delivered = p.DeliveredLSN.String()
	}
	p.CRC = p.checksum()
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(filepath.Join(dir, progressFile), append(b, '\n'), 0o600, nil)
}
