package source

import (
	"fmt"
	"strconv"

	"github.com/walshadow/walshadow/internal/wal"
)

// Identity is what IDENTIFY_SYSTEM reports about the source cluster.
type Identity struct {
	// SystemID is the cluster's system identifier, fixed at initdb: a
	// different value is a different cluster.
	SystemID uint64
	// Timeline is the server's current timeline.
	Timeline uint32
	// XLogPos is the server's current WAL flush position.
	XLogPos wal.LSN
	// DBName is the connected database; empty on a physical replication
	// connection.
	DBName string
}

// String renders the identity for logs.
func (id Identity) String() string {
	return fmt.Sprintf("system %d timeline %d at %s", id.SystemID, id.Timeline, id.XLogPos)
}

// IdentityMismatchError reports a source that is not the one the stored
// state was built from: another cluster (system identifier) or another
// timeline. Either way the stored LSNs may not name the same WAL bytes on
// this source, so resuming would silently corrupt the replica.
type IdentityMismatchError struct {
	Stored  Identity
	Current Identity
}

// SystemIDChanged reports whether the mismatch is a different cluster (as
// opposed to only a different timeline).
func (e *IdentityMismatchError) SystemIDChanged() bool {
	return e.Stored.SystemID != e.Current.SystemID
}

func (e *IdentityMismatchError) Error() string {
	if e.SystemIDChanged() {
		return fmt.Sprintf("source system identifier %d does not match the stored state's %d: "+
			"this is a different PostgreSQL cluster (re-initialised or restored from another backup); "+
			"walshadow cannot resume on it: start from a fresh state directory",
			e.Current.SystemID, e.Stored.SystemID)
	}
	return fmt.Sprintf("source is on timeline %d but the stored state is on timeline %d (system %d): "+
		"the source was promoted or restored onto a new timeline, and the stored position may not be on its history; "+
		"walshadow does not follow timeline switches: start from a fresh state directory",
		e.Current.Timeline, e.Stored.Timeline, e.Current.SystemID)
}

// CheckIdentity is the identity gate applied on every (re)connect: a
// different system identifier is always fatal, a different timeline is fatal
// (the caller may offer an explicit override), equal identities pass. XLogPos
// and DBName are not compared: they change legitimately.
func CheckIdentity(stored, current Identity) error {
	if stored.SystemID != current.SystemID || stored.Timeline != current.Timeline {
		return &IdentityMismatchError{Stored: stored, Current: current}
	}
	return nil
}

// identityParseRow parses the single IDENTIFY_SYSTEM row: systemid (text),
// timeline (int4), xlogpos (text LSN), dbname (NULL on physical connections).
func identityParseRow(row [][]byte) (Identity, error) {
	if len(row) < 3 {
		return Identity{}, fmt.Errorf("IDENTIFY_SYSTEM returned %d columns, want at least 3", len(row))
	}
	var id Identity
	var err error
	if id.SystemID, err = strconv.ParseUint(string(row[0]), 10, 64); err != nil {
		return Identity{}, fmt.Errorf("IDENTIFY_SYSTEM systemid %q: %w", row[0], err)
	}
	tli, err := strconv.ParseUint(string(row[1]), 10, 32)
	if err != nil {
		return Identity{}, fmt.Errorf("IDENTIFY_SYSTEM timeline %q: %w", row[1], err)
	}
	if tli == 0 {
		return Identity{}, fmt.Errorf("IDENTIFY_SYSTEM timeline is 0")
	}
	id.Timeline = uint32(tli)
	if id.XLogPos, err = wal.ParseLSN(string(row[2])); err != nil {
		return Identity{}, fmt.Errorf("IDENTIFY_SYSTEM xlogpos: %w", err)
	}
	if len(row) > 3 && row[3] != nil {
		id.DBName = string(row[3])
	}
	return id, nil
}
