package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/walshadow/walshadow/internal/fsutil"
	"github.com/walshadow/walshadow/internal/wal"
)

// ManifestFile is the session's durable progress in the state directory:
//
//	{
//	  "format": "walshadow-manifest",
//	  "version": 2,
//	  "system_id": "7445501238329857311",   source identity (decimal: JSON numbers lose 64-bit precision)
//	  "timeline": 1,
//	  "server_version_num": 150018,
//	  "wal_segment_size": 16777216,
//	  "received_lsn": "0/5A3F1C8",          next byte received from the source
//	  "filtered_durable_lsn": "0/5000000",  filtered WAL durable in the archive (whole segments)
//	  "shadow_replay_lsn": "0/5A3F0B0",     the shadow's replay position
//	  "delivered_lsn": "0/5A3E9E0",         every transaction committed at or before it is acknowledged downstream
//	  "floor_lsn": "0/5A3E100",             nothing before it is needed again
//	  "restart_lsn": "0/5000000",           the floor's segment start: where a restart streams from
//	  "updated_at": "2026-11-30T14:02:03.5Z",
//	  "crc32c": 3735928559
//	}
//
// It is rewritten atomically (temporary file, fsync, rename, directory
// fsync). crc32c is CRC-32C (Castagnoli) of the file's JSON encoding with
// crc32c set to 0, so a torn or hand-edited file is refused rather than
// trusted. floor_lsn and restart_lsn never move backwards. With
// spool.release_slot delivered the flush position reported to the
// replication slot is never above the stored floor, so the source keeps
// every byte a restart needs; with spooled it is the spool's durable end,
// and the spool (state_dir/spool) holds those bytes instead. A start
// against a source with another system identifier or timeline is refused.
//
// Version 1 of this state was progress.json (identity, resume and
// delivered LSNs only); it is read when no manifest exists and removed
// once the manifest is written.
const ManifestFile = "manifest.json"

const (
	manifestFormat  = "walshadow-manifest"
	manifestVersion = 2
	legacyProgress  = "progress.json"
)

// Manifest is the durable progress of a session.
type Manifest struct {
	SystemID         uint64
	Timeline         uint32
	ServerVersionNum int
	WALSegmentSize   int
	Received         wal.LSN
	FilteredDurable  wal.LSN
	ShadowReplay     wal.LSN
	Delivered        wal.LSN
	Floor            wal.LSN
	Restart          wal.LSN
	UpdatedAt        time.Time
}

// manifestJSON is the on-disk form (LSNs as PostgreSQL writes them).
type manifestJSON struct {
	Format           string `json:"format"`
	Version          int    `json:"version"`
	SystemID         string `json:"system_id"`
	Timeline         uint32 `json:"timeline"`
	ServerVersionNum int    `json:"server_version_num,omitempty"`
	WALSegmentSize   int    `json:"wal_segment_size,omitempty"`
	Received         string `json:"received_lsn"`
	FilteredDurable  string `json:"filtered_durable_lsn"`
	ShadowReplay     string `json:"shadow_replay_lsn"`
	Delivered        string `json:"delivered_lsn"`
	Floor            string `json:"floor_lsn"`
	Restart          string `json:"restart_lsn"`
	UpdatedAt        string `json:"updated_at"`
	CRC              uint32 `json:"crc32c"`
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func (j manifestJSON) checksum() uint32 {
	j.CRC = 0
	b, _ := json.Marshal(j)
	return crc32.Checksum(b, castagnoli)
}

// ManifestError is a manifest that cannot be trusted: its path, what is
// wrong, and what to do.
type ManifestError struct {
	Path   string
	Reason string
}

func (e *ManifestError) Error() string {
	return fmt.Sprintf("%s is corrupt (%s): restore it from a backup of the state directory, or move the state directory aside and start with a fresh state_dir (the shadow is bootstrapped again)", e.Path, e.Reason)
}

// ReadManifest reads the manifest of a state directory (or, for a state
// directory written before it existed, its progress.json). A directory
// that holds neither gives (nil, nil): a fresh start.
func ReadManifest(stateDir string) (*Manifest, error) {
	path := filepath.Join(stateDir, ManifestFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return readLegacyProgress(stateDir)
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	var j manifestJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return nil, &ManifestError{Path: path, Reason: fmt.Sprintf("not a manifest: %v", err)}
	}
	if j.Format != manifestFormat {
		return nil, &ManifestError{Path: path, Reason: fmt.Sprintf("format %q, want %q", j.Format, manifestFormat)}
	}
	if j.Version != manifestVersion {
		return nil, &ManifestError{Path: path, Reason: fmt.Sprintf("version %d, this walshadow reads version %d", j.Version, manifestVersion)}
	}
	if sum := j.checksum(); sum != j.CRC {
		return nil, &ManifestError{Path: path, Reason: fmt.Sprintf("checksum %d, contents sum to %d", j.CRC, sum)}
	}
	m := &Manifest{Timeline: j.Timeline, ServerVersionNum: j.ServerVersionNum, WALSegmentSize: j.WALSegmentSize}
	if m.SystemID, err = strconv.ParseUint(j.SystemID, 10, 64); err != nil {
		return nil, &ManifestError{Path: path, Reason: fmt.Sprintf("system_id %q", j.SystemID)}
	}
	for _, f := range []struct {
		name string
		text string
		into *wal.LSN
	}{
		{"received_lsn", j.Received, &m.Received},
		{"filtered_durable_lsn", j.FilteredDurable, &m.FilteredDurable},
		{"shadow_replay_lsn", j.ShadowReplay, &m.ShadowReplay},
		{"delivered_lsn", j.Delivered, &m.Delivered},
		{"floor_lsn", j.Floor, &m.Floor},
		{"restart_lsn", j.Restart, &m.Restart},
	} {
		if *f.into, err = wal.ParseLSN(f.text); err != nil {
			return nil, &ManifestError{Path: path, Reason: fmt.Sprintf("%s %q", f.name, f.text)}
		}
	}
	if m.UpdatedAt, err = time.Parse(time.RFC3339Nano, j.UpdatedAt); err != nil {
		return nil, &ManifestError{Path: path, Reason: fmt.Sprintf("updated_at %q", j.UpdatedAt)}
	}
	if m.Restart > m.Floor {
		return nil, &ManifestError{Path: path, Reason: fmt.Sprintf("restart_lsn %s is past floor_lsn %s", m.Restart, m.Floor)}
	}
	return m, nil
}

// readLegacyProgress reads the version-1 state file, progress.json.
func readLegacyProgress(stateDir string) (*Manifest, error) {
	path := filepath.Join(stateDir, legacyProgress)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	var p struct {
		Version   int    `json:"version"`
		SystemID  string `json:"system_id"`
		Timeline  uint32 `json:"timeline"`
		Resume    string `json:"resume_lsn"`
		Delivered string `json:"delivered_lsn,omitempty"`
		CRC       uint32 `json:"crc"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, &ManifestError{Path: path, Reason: err.Error()}
	}
	crc := p.CRC
	p.CRC = 0
	enc, _ := json.Marshal(p)
	if p.Version != 1 || crc32.Checksum(enc, castagnoli) != crc {
		return nil, &ManifestError{Path: path, Reason: fmt.Sprintf("version %d, checksum mismatch", p.Version)}
	}
	m := &Manifest{Timeline: p.Timeline}
	if m.SystemID, err = strconv.ParseUint(p.SystemID, 10, 64); err != nil {
		return nil, &ManifestError{Path: path, Reason: fmt.Sprintf("system_id %q", p.SystemID)}
	}
	if m.Restart, err = wal.ParseLSN(p.Resume); err != nil {
		return nil, &ManifestError{Path: path, Reason: fmt.Sprintf("resume_lsn %q", p.Resume)}
	}
	m.Floor = m.Restart
	if p.Delivered != "" {
		if m.Delivered, err = wal.ParseLSN(p.Delivered); err != nil {
			return nil, &ManifestError{Path: path, Reason: fmt.Sprintf("delivered_lsn %q", p.Delivered)}
		}
	}
	return m, nil
}

// WriteManifest writes the manifest atomically and removes a version-1
// progress.json it replaces.
func WriteManifest(stateDir string, m Manifest) error {
	j := manifestJSON{
		Format: manifestFormat, Version: manifestVersion,
		SystemID: strconv.FormatUint(m.SystemID, 10), Timeline: m.Timeline,
		ServerVersionNum: m.ServerVersionNum, WALSegmentSize: m.WALSegmentSize,
		Received: m.Received.String(), FilteredDurable: m.FilteredDurable.String(),
		ShadowReplay: m.ShadowReplay.String(), Delivered: m.Delivered.String(),
		Floor: m.Floor.String(), Restart: m.Restart.String(),
		UpdatedAt: m.UpdatedAt.UTC().Format(time.RFC3339Nano),
	}
	j.CRC = j.checksum()
	b, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(filepath.Join(stateDir, ManifestFile), append(b, '\n'), 0o600, nil); err != nil {
		return fmt.Errorf("writing %s: %w", filepath.Join(stateDir, ManifestFile), err)
	}
	if err := os.Remove(filepath.Join(stateDir, legacyProgress)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the replaced %s: %w", legacyProgress, err)
	}
	return nil
}
