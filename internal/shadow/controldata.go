package shadow

import (
	"bufio"
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/walshadow/walshadow/internal/wal"
)

// Floors are the settings a hot standby must hold at least at the values the
// primary had, as pg_control records them (xlogrecovery.c
// CheckRequiredParameterValues). WAL can raise them (XLOG_PARAMETER_CHANGE),
// and the standby updates pg_control before it stops, so they are read from
// pg_controldata at every boot and never from the source.
type Floors struct {
	MaxConnections          int
	MaxWorkerProcesses      int
	MaxWALSenders           int
	MaxPreparedTransactions int
	MaxLocksPerTransaction  int
}

// raisedAbove reports whether any floor in f exceeds the one in old: after a
// failed start that means WAL raised a floor and a retry can succeed.
func (f Floors) raisedAbove(old Floors) bool {
	return f.MaxConnections > old.MaxConnections ||
		f.MaxWorkerProcesses > old.MaxWorkerProcesses ||
		f.MaxWALSenders > old.MaxWALSenders ||
		f.MaxPreparedTransactions > old.MaxPreparedTransactions ||
		f.MaxLocksPerTransaction > old.MaxLocksPerTransaction
}

// ControlData is what walshadow uses of `pg_controldata` output (run under
// LC_ALL=C: the labels are translated otherwise).
type ControlData struct {
	ControlVersion    int
	CatalogVersion    int
	SystemID          uint64
	ClusterState      string
	CheckpointLSN     wal.LSN
	RedoLSN           wal.LSN
	TimeLineID        uint32
	MinRecoveryLSN    wal.LSN
	BackupStartLSN    wal.LSN
	BackupEndLSN      wal.LSN
	WALLevel          string
	Floors            Floors
	BlockSize         int
	WALBlockSize      int
	WALSegmentSize    int
	ChecksumVersion   int
	TrackCommitTS     bool
	EndOfBackupNeeded bool
}

// controlField binds a pg_controldata label to the parser of its value.
type controlField struct {
	label    string
	required bool
	set      func(c *ControlData, v string) error
}

func intField(dst func(*ControlData) *int) func(*ControlData, string) error {
	return func(c *ControlData, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fmt.Errorf("not a non-negative integer: %q", v)
		}
		*dst(c) = n
		return nil
	}
}

func lsnField(dst func(*ControlData) *wal.LSN) func(*ControlData, string) error {
	return func(c *ControlData, v string) error {
		l, err := wal.ParseLSN(v)
		if err != nil {
			return err
		}
		*dst(c) = l
		return nil
	}
}

func onOffField(dst func(*ControlData) *bool, on, off string) func(*ControlData, string) error {
	return func(c *ControlData, v string) error {
		switch v {
		case on:
			*dst(c) = true
		case off:
			*dst(c) = false
		default:
			return fmt.Errorf("neither %q nor %q: %q", on, off, v)
		}
		return nil
	}
}

var controlFields = []controlField{
	{"pg_control version number", true, intField(func(c *ControlData) *int { return &c.ControlVersion })},
	{"Catalog version number", true, intField(func(c *ControlData) *int { return &c.CatalogVersion })},
	{"Database system identifier", true, func(c *ControlData, v string) error {
		id, err := strconv.ParseUint(v, 10, 64)
		c.SystemID = id
		return err
	}},
	{"Database cluster state", true, func(c *ControlData, v string) error { c.ClusterState = v; return nil }},
	{"Latest checkpoint location", true, lsnField(func(c *ControlData) *wal.LSN { return &c.CheckpointLSN })},
	{"Latest checkpoint's REDO location", true, lsnField(func(c *ControlData) *wal.LSN { return &c.RedoLSN })},
	{"Latest checkpoint's TimeLineID", true, func(c *ControlData, v string) error {
		t, err := strconv.ParseUint(v, 10, 32)
		c.TimeLineID = uint32(t)
		return err
	}},
	{"Minimum recovery ending location", false, lsnField(func(c *ControlData) *wal.LSN { return &c.MinRecoveryLSN })},
	{"Backup start location", false, lsnField(func(c *ControlData) *wal.LSN { return &c.BackupStartLSN })},
	{"Backup end location", false, lsnField(func(c *ControlData) *wal.LSN { return &c.BackupEndLSN })},
	{"End-of-backup record required", false, onOffField(func(c *ControlData) *bool { return &c.EndOfBackupNeeded }, "yes", "no")},
	{"wal_level setting", true, func(c *ControlData, v string) error { c.WALLevel = v; return nil }},
	{"max_connections setting", true, intField(func(c *ControlData) *int { return &c.Floors.MaxConnections })},
	{"max_worker_processes setting", true, intField(func(c *ControlData) *int { return &c.Floors.MaxWorkerProcesses })},
	{"max_wal_senders setting", true, intField(func(c *ControlData) *int { return &c.Floors.MaxWALSenders })},
	{"max_prepared_xacts setting", true, intField(func(c *ControlData) *int { return &c.Floors.MaxPreparedTransactions })},
	{"max_locks_per_xact setting", true, intField(func(c *ControlData) *int { return &c.Floors.MaxLocksPerTransaction })},
	{"track_commit_timestamp setting", false, onOffField(func(c *ControlData) *bool { return &c.TrackCommitTS }, "on", "off")},
	{"Database block size", true, intField(func(c *ControlData) *int { return &c.BlockSize })},
	{"WAL block size", true, intField(func(c *ControlData) *int { return &c.WALBlockSize })},
	{"Bytes per WAL segment", true, intField(func(c *ControlData) *int { return &c.WALSegmentSize })},
	{"Data page checksum version", false, intField(func(c *ControlData) *int { return &c.ChecksumVersion })},
}

// ParseControlData parses `LC_ALL=C pg_controldata` output. Unknown lines are
// ignored (versions add fields); a missing or malformed field walshadow
// relies on is an error naming it.
func ParseControlData(out string) (*ControlData, error) {
	values := make(map[string]string)
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		label, value, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		// "Latest checkpoint's oldestCommitTsXid:0" has no space after the
		// colon; labels never contain a colon, values may ("Mon Nov 30 05:45:59").
		values[strings.TrimSpace(label)] = strings.TrimSpace(value)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading pg_controldata output: %w", err)
	}
	var c ControlData
	for _, f := range controlFields {
		v, ok := values[f.label]
		if !ok {
			if f.required {
				return nil, fmt.Errorf("pg_controldata output lacks %q (was it run under LC_ALL=C?)", f.label)
			}
			continue
		}
		if err := f.set(&c, v); err != nil {
			return nil, fmt.Errorf("pg_controldata %q: %w", f.label, err)
		}
	}
	return &c, nil
}

// readControlData runs pg_controldata on dir as the shadow's OS user.
func readControlData(ctx context.Context, u *osUser, binDir, dir string) (*ControlData, error) {
	out, err := runOutput(u.command(ctx, dir, filepath.Join(binDir, "pg_controldata"), dir))
	if err != nil {
		return nil, fmt.Errorf("reading the shadow's control file: %w", err)
	}
	c, err := ParseControlData(out)
	if err != nil {
		return nil, fmt.Errorf("shadow %s: %w", dir, err)
	}
	return c, nil
}
