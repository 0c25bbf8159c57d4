package shadow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/walshadow/walshadow/internal/fsutil"
	"github.com/walshadow/walshadow/internal/statefile"
	"github.com/walshadow/walshadow/internal/wal"
)

// markerSpec is CompleteMarker's state-file envelope. Version 1 was the
// body's fields beside "version": 1, without a checksum; it is read as it
// is (a shadow is bootstrapped once, so it is not rewritten).
var markerSpec = statefile.Spec{Format: "walshadow-shadow-bootstrap", Version: 2,
	Remedy: "delete the shadow directory to bootstrap the shadow again"}

// markerJSON is CompleteMarker's body. LSNs are text and the system id a
// decimal string: JSON numbers lose 64-bit precision.
type markerJSON struct {
	StartLSN          string             `json:"start_lsn"`
	EndLSN            string             `json:"end_lsn"`
	WALEnd            string             `json:"wal_end"`
	Timeline          uint32             `json:"timeline"`
	SystemID          string             `json:"system_id"`
	WALSegmentSize    int                `json:"wal_segment_size"`
	ServerVersionNum  int                `json:"server_version_num"`
	FollowedDBOID     uint32             `json:"followed_db_oid"`
	SuperUser         string             `json:"superuser"`
	RelocatedCatalogs []RelFile          `json:"relocated_catalogs"`
	Tablespaces       []BackupTablespace `json:"tablespaces"`
	Stats             ExtractStats       `json:"stats"`
}

// ReadBootstrapResult reads the completion marker of a shadow directory.
// A directory that does not exist or is empty yields ErrNotBootstrapped; one
// with content but no completion marker (an interrupted bootstrap, or a
// directory that is not a walshadow shadow) is refused with an error naming
// it and the remedy.
func ReadBootstrapResult(dir string) (*BootstrapResult, error) {
	var m markerJSON
	err := markerSpec.Read(filepath.Join(dir, CompleteMarker), &m, func(data []byte) error { return decodeMarkerV1(data, &m) })
	if err == nil {
		res, perr := resultOf(&m)
		if perr != nil {
			return nil, markerSpec.Corrupt(filepath.Join(dir, CompleteMarker), perr)
		}
		return res, nil
	}
	var se *statefile.Error
	if errors.As(err, &se) {
		return nil, err
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("shadow directory %s: reading %s: %w", dir, CompleteMarker, err)
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s does not exist", ErrNotBootstrapped, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("shadow directory %s: %w", dir, err)
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("%w: %s is empty", ErrNotBootstrapped, dir)
	}
	what := "is not empty but holds no completed walshadow bootstrap"
	switch {
	case exists(filepath.Join(dir, IncompleteMarker)):
		what = "holds an interrupted walshadow bootstrap (" + IncompleteMarker + " is present)"
	case exists(filepath.Join(dir, "PG_VERSION")):
		what = "holds a PostgreSQL data directory without " + CompleteMarker + " (an interrupted bootstrap, or not a walshadow shadow)"
	}
	return nil, fmt.Errorf("shadow directory %s %s; refusing to use it: delete the directory to bootstrap the shadow again", dir, what)
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// decodeMarkerV1 reads the marker's first form (its fields beside
// "version": 1) into m.
func decodeMarkerV1(b []byte, m *markerJSON) error {
	var v1 struct {
		Version int `json:"version"`
		markerJSON
	}
	if err := json.Unmarshal(b, &v1); err != nil {
		return err
	}
	if v1.Version != 1 {
		return fmt.Errorf("version %d, want 1 or the %s envelope", v1.Version, markerSpec.Format)
	}
	*m = v1.markerJSON
	return nil
}

// resultOf converts the marker's body.
func resultOf(m *markerJSON) (*BootstrapResult, error) {
	res := &BootstrapResult{
		Timeline: m.Timeline, WALSegmentSize: m.WALSegmentSize, ServerVersionNum: m.ServerVersionNum,
		FollowedDBOID: m.FollowedDBOID, SuperUser: m.SuperUser, RelocatedCatalogs: m.RelocatedCatalogs,
		Tablespaces: m.Tablespaces, Stats: m.Stats,
	}
	var errs [4]error
	res.StartLSN, errs[0] = wal.ParseLSN(m.StartLSN)
	res.EndLSN, errs[1] = wal.ParseLSN(m.EndLSN)
	res.WALEnd, errs[2] = wal.ParseLSN(m.WALEnd)
	res.SystemID, errs[3] = strconv.ParseUint(m.SystemID, 10, 64)
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	return res, nil
}

// writeCompleteMarker records the result, then removes the in-progress
// marker: from here on the directory is resumed, never rebuilt.
func writeCompleteMarker(dir string, owner *osUser, res *BootstrapResult) error {
	m := markerJSON{
		StartLSN: res.StartLSN.String(), EndLSN: res.EndLSN.String(),
		WALEnd: res.WALEnd.String(), Timeline: res.Timeline, SystemID: strconv.FormatUint(res.SystemID, 10),
		WALSegmentSize: res.WALSegmentSize, ServerVersionNum: res.ServerVersionNum,
		FollowedDBOID: res.FollowedDBOID, SuperUser: res.SuperUser,
		RelocatedCatalogs: res.RelocatedCatalogs, Tablespaces: res.Tablespaces, Stats: res.Stats,
	}
	if err := markerSpec.WriteWith(filepath.Join(dir, CompleteMarker), m, owner.chown); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(dir, IncompleteMarker)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing %s: %w", IncompleteMarker, err)
	}
	return fsutil.SyncDir(dir)
}

func sortRelFiles(rs []RelFile) {
	sort.Slice(rs, func(i, j int) bool {
		a, b := rs[i], rs[j]
		if a.Spc != b.Spc {
			return a.Spc < b.Spc
		}
		if a.DB != b.DB {
			return a.DB < b.DB
		}
		return a.Filenode < b.Filenode
	})
}

// execCommand runs a binary as walshadow's own user (postgres --version is
// allowed as root).
func execCommand(ctx context.Context, bin string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = serverEnv()
	return cmd
}
