package session

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"time"

	"github.com/walshadow/walshadow/internal/statefile"
	"github.com/walshadow/walshadow/internal/wal"
)

// ManifestFile is the session's durable progress in the state directory
// (statefile.StateDir.Manifest), a state file in internal/statefile's
// envelope (format "walshadow-manifest", version 3):
//
//	"body": {
//	  "system_id": "7445501238329857311",   source identity (decimal: JSON numbers lose 64-bit precision)
//	  "timeline": 1,
//	  "server_version_num": 150018,
//	  "wal_segment_size": 16777216,
//	  "received_lsn": "0/05A3F1C8",         next byte received from the source
//	  "filtered_durable_lsn": "0/05000000", filtered WAL durable in the archive (whole segments)
//	  "shadow_replay_lsn": "0/05A3F0B0",    the shadow's replay position
//	  "delivered_lsn": "0/05A3E9E0",        every transaction committed at or before it is acknowledged downstream
//	  "floor_lsn": "0/05A3E100",            nothing before it is needed again
//	  "restart_lsn": "0/05000000",          the floor's segment start: where a restart streams from
//	  "updated_at": "2026-11-30T14:02:03.5Z"
//	}
//
// It is rewritten atomically; a torn or hand-edited file is refused
// (*statefile.Error) rather than trusted. floor_lsn and restart_lsn never
// move backwards. With spool.release_slot delivered the flush position
// reported to the replication slot is never above the stored floor, so the
// source keeps every byte a restart needs; with spooled it is the spool's
// durable end, and the spool (state_dir/spool) holds those bytes instead.
// A start against a source with another system identifier or timeline is
// refused.
//
// Earlier forms are read once, and the next write replaces them: version
// 2 had the same fields flat beside "format", "version" and "crc32c" (the
// CRC-32C of its compact encoding with crc32c 0); version 1 was
// progress.json (identity, resume and delivered LSNs only), read when no
// manifest exists and removed once the manifest is written.
const ManifestFile = statefile.ManifestName

var manifestSpec = statefile.Spec{Format: "walshadow-manifest", Version: 3,
	Remedy: "restore it from a backup of the state directory, or move the state directory aside and start with a fresh state_dir (the shadow is bootstrapped again)"}

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

// manifestBody is the envelope's body (LSNs as PostgreSQL writes them).
type manifestBody struct {
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
}

// manifestV2 is version 2's form: the body's fields flat (in the same
// order), beside the format, version and checksum.
type manifestV2 struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	manifestBody
	CRC uint32 `json:"crc32c"`
}

func (j manifestV2) checksum() uint32 {
	j.CRC = 0
	b, _ := json.Marshal(j)
	return statefile.CRC(b)
}

// readManifestV2 reads version 2's file into body.
func readManifestV2(data []byte, body *manifestBody) error {
	var j manifestV2
	if err := statefile.DecodeStrict(data, &j); err != nil {
		return fmt.Errorf("not a manifest: %w", err)
	}
	switch {
	case j.Format != manifestSpec.Format:
		return fmt.Errorf("format %q, want %q", j.Format, manifestSpec.Format)
	case j.Version != 2:
		return fmt.Errorf("version %d, this walshadow reads version %d (or 2, before the envelope)", j.Version, manifestSpec.Version)
	}
	if sum := j.checksum(); sum != j.CRC {
		return fmt.Errorf("checksum %d, contents sum to %d", j.CRC, sum)
	}
	*body = j.manifestBody
	return nil
}

// corruptManifest is a manifest refused for reason.
func corruptManifest(path, reason string) error {
	return manifestSpec.Corrupt(path, errors.New(reason))
}

// ReadManifest reads the manifest of a state directory (or, for a state
// directory written before it existed, its progress.json). A directory
// that holds neither gives (nil, nil): a fresh start. A manifest that
// cannot be trusted is a *statefile.Error.
func ReadManifest(stateDir string) (*Manifest, error) {
	dir := statefile.StateDir(stateDir)
	path := dir.Manifest()
	var j manifestBody
	err := manifestSpec.Read(path, &j, func(data []byte) error { return readManifestV2(data, &j) })
	if errors.Is(err, fs.ErrNotExist) {
		return readLegacyProgress(dir)
	}
	if err != nil {
		return nil, err
	}
	m := &Manifest{Timeline: j.Timeline, ServerVersionNum: j.ServerVersionNum, WALSegmentSize: j.WALSegmentSize}
	if m.SystemID, err = strconv.ParseUint(j.SystemID, 10, 64); err != nil {
		return nil, corruptManifest(path, fmt.Sprintf("system_id %q", j.SystemID))
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
			return nil, corruptManifest(path, fmt.Sprintf("%s %q", f.name, f.text))
		}
	}
	if m.UpdatedAt, err = time.Parse(time.RFC3339Nano, j.UpdatedAt); err != nil {
		return nil, corruptManifest(path, fmt.Sprintf("updated_at %q", j.UpdatedAt))
	}
	if m.Restart > m.Floor {
		return nil, corruptManifest(path, fmt.Sprintf("restart_lsn %s is past floor_lsn %s", m.Restart, m.Floor))
	}
	return m, nil
}

// readLegacyProgress reads the version-1 state file, progress.json.
func readLegacyProgress(dir statefile.StateDir) (*Manifest, error) {
	path := dir.LegacyProgress()
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
		return nil, corruptManifest(path, err.Error())
	}
	crc := p.CRC
	p.CRC = 0
	enc, _ := json.Marshal(p)
	if p.Version != 1 || statefile.CRC(enc) != crc {
		return nil, corruptManifest(path, fmt.Sprintf("version %d, checksum mismatch", p.Version))
	}
	m := &Manifest{Timeline: p.Timeline}
	if m.SystemID, err = strconv.ParseUint(p.SystemID, 10, 64); err != nil {
		return nil, corruptManifest(path, fmt.Sprintf("system_id %q", p.SystemID))
	}
	if m.Restart, err = wal.ParseLSN(p.Resume); err != nil {
		return nil, corruptManifest(path, fmt.Sprintf("resume_lsn %q", p.Resume))
	}
	m.Floor = m.Restart
	if p.Delivered != "" {
		if m.Delivered, err = wal.ParseLSN(p.Delivered); err != nil {
			return nil, corruptManifest(path, fmt.Sprintf("delivered_lsn %q", p.Delivered))
		}
	}
	return m, nil
}

// WriteManifest writes the manifest atomically and removes a version-1
// progress.json it replaces.
func WriteManifest(stateDir string, m Manifest) error {
	dir := statefile.StateDir(stateDir)
	body := manifestBody{
		SystemID: strconv.FormatUint(m.SystemID, 10), Timeline: m.Timeline,
		ServerVersionNum: m.ServerVersionNum, WALSegmentSize: m.WALSegmentSize,
		Received: m.Received.String(), FilteredDurable: m.FilteredDurable.String(),
		ShadowReplay: m.ShadowReplay.String(), Delivered: m.Delivered.String(),
		Floor: m.Floor.String(), Restart: m.Restart.String(),
		UpdatedAt: m.UpdatedAt.UTC().Format(time.RFC3339Nano),
	}
	if err := manifestSpec.Write(dir.Manifest(), body); err != nil {
		return err
	}
	if err := os.Remove(dir.LegacyProgress()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the replaced %s: %w", dir.LegacyProgress(), err)
	}
	return nil
}
