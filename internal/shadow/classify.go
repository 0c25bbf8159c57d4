package shadow

import (
	"fmt"
	"path"
	"strconv"
	"strings"
)

// Object ids that decide what the shadow keeps (src/include/access/transam.h,
// catalog/pg_tablespace.dat).
const (
	// FirstNormalObjectID is the first OID (and relfilenode) handed to user
	// objects; every relation file below it belongs to a system catalog.
	FirstNormalObjectID = 16384
	// DefaultTablespaceOID is pg_default: base/<db>/ in the data directory.
	DefaultTablespaceOID = 1663
	// GlobalTablespaceOID is pg_global: global/ in the data directory.
	GlobalTablespaceOID = 1664
)

// RelFile names a relation's storage: tablespace, database and relfilenode.
type RelFile struct {
	Spc      uint32 `json:"spc"`
	DB       uint32 `json:"db"`
	Filenode uint32 `json:"filenode"`
}

func (r RelFile) String() string { return fmt.Sprintf("%d/%d/%d", r.Spc, r.DB, r.Filenode) }

// CatalogSet is the set of catalog relation files whose relfilenode is at or
// above FirstNormalObjectID: catalogs (OID < 16384) rewritten by VACUUM FULL,
// CLUSTER or REINDEX. Their files look like user files and must be kept.
type CatalogSet map[RelFile]struct{}

// Has reports whether the file belongs to a relocated catalog.
func (s CatalogSet) Has(r RelFile) bool {
	_, ok := s[r]
	return ok
}

// entryAction is what bootstrap does with one entry of a BASE_BACKUP tar.
type entryAction int

const (
	// actionDiscard skips the entry's bytes: user data, or state PostgreSQL
	// rebuilds (statistics, replication slots, logical decoding files).
	actionDiscard entryAction = iota
	// actionDir creates the directory (empty directories are part of a data
	// directory's layout).
	actionDir
	// actionKeep writes the file as it came.
	actionKeep
	// actionConfig is a configuration file Materialize rewrites; its bytes
	// are skipped.
	actionConfig
	// actionWAL is a WAL segment: TransformWAL, then write.
	actionWAL
	// actionTablespaceDir is a pg_tblspc/<oid> symlink, which becomes an
	// in-place directory so the shadow never points at the source's
	// tablespace locations.
	actionTablespaceDir
)

func (a entryAction) String() string {
	switch a {
	case actionDiscard:
		return "discard"
	case actionDir:
		return "dir"
	case actionKeep:
		return "keep"
	case actionConfig:
		return "config"
	case actionWAL:
		return "wal"
	case actionTablespaceDir:
		return "tablespace-dir"
	}
	return fmt.Sprintf("entryAction(%d)", int(a))
}

// entryKind is the tar entry type as far as classification cares.
type entryKind int

const (
	kindFile entryKind = iota
	kindDir
	kindSymlink
)

// archiveTablespace is the tablespace an archive holds: 0 for base.tar (the
// data directory), the tablespace OID for "<oid>.tar".
type archiveTablespace uint32

// classifyEntry decides what to do with a tar entry and where it lands,
// relative to the shadow's data directory. name is the entry name as the
// archive has it; names that escape the archive are an error.
func classifyEntry(spc archiveTablespace, name string, kind entryKind, relocated CatalogSet) (entryAction, string, error) {
	clean, err := cleanEntryName(name)
	if err != nil {
		return actionDiscard, "", err
	}
	if spc != 0 {
		return classifyTablespaceEntry(uint32(spc), clean, kind, relocated)
	}
	switch kind {
	case kindDir:
		return actionDir, clean, nil
	case kindSymlink:
		// BASE_BACKUP without TABLESPACE_MAP sends each tablespace as a
		// pg_tblspc/<oid> symlink to the source's location.
		if dir, oid, ok := strings.Cut(clean, "/"); ok && dir == "pg_tblspc" && isOID(oid) {
			return actionTablespaceDir, clean, nil
		}
		return actionDiscard, clean, nil
	}
	parts := strings.Split(clean, "/")
	switch parts[0] {
	case "PG_VERSION", "backup_label":
		if len(parts) == 1 {
			return actionKeep, clean, nil
		}
	case "postgresql.conf", "postgresql.auto.conf", "pg_hba.conf", "pg_ident.conf":
		if len(parts) == 1 {
			return actionConfig, clean, nil
		}
	case "global", "pg_xact", "pg_multixact", "pg_twophase", "pg_commit_ts":
		// Shared catalogs, pg_control and transaction status: all needed,
		// none holds user rows. pg_twophase keeps prepared transactions'
		// locks and invalidations; pg_commit_ts pages are read back when
		// track_commit_timestamp is on.
		if len(parts) > 1 {
			return actionKeep, clean, nil
		}
	case "base":
		if len(parts) == 3 && isOID(parts[1]) {
			db, _ := strconv.ParseUint(parts[1], 10, 32)
			return classifyDatabaseFile(DefaultTablespaceOID, uint32(db), parts[2], clean, relocated), clean, nil
		}
	case "pg_wal":
		if len(parts) == 2 {
			switch {
			case isSegmentName(parts[1]):
				return actionWAL, clean, nil
			case isHistoryName(parts[1]):
				return actionKeep, clean, nil
			}
		}
	}
	// tablespace_map is dropped on purpose: at startup PostgreSQL would
	// re-link pg_tblspc/<oid> to the source's own tablespace directories.
	return actionDiscard, clean, nil
}

// classifyTablespaceEntry handles "<oid>.tar": PG_<major>_<catversion>/<db>/<file>
// relative to the tablespace location; it lands under pg_tblspc/<oid>/.
func classifyTablespaceEntry(spc uint32, clean string, kind entryKind, relocated CatalogSet) (entryAction, string, error) {
	dest := path.Join("pg_tblspc", strconv.FormatUint(uint64(spc), 10), clean)
	switch kind {
	case kindDir:
		return actionDir, dest, nil
	case kindSymlink:
		return actionDiscard, dest, nil
	}
	parts := strings.Split(clean, "/")
	if len(parts) == 3 && strings.HasPrefix(parts[0], "PG_") && isOID(parts[1]) {
		db, _ := strconv.ParseUint(parts[1], 10, 32)
		return classifyDatabaseFile(spc, uint32(db), parts[2], clean, relocated), dest, nil
	}
	return actionDiscard, dest, nil
}

// classifyDatabaseFile decides on a file in a database directory: the
// version stamp and relation map are kept, as is every fork and segment of a
// catalog relation; everything else (user relations, unknown files) is not.
func classifyDatabaseFile(spc, db uint32, file, clean string, relocated CatalogSet) entryAction {
	switch file {
	case "PG_VERSION", "pg_filenode.map":
		return actionKeep
	}
	fn, ok := parseRelationFileName(file)
	if !ok {
		return actionDiscard
	}
	if fn < FirstNormalObjectID || relocated.Has(RelFile{Spc: spc, DB: db, Filenode: fn}) {
		return actionKeep
	}
	return actionDiscard
}

// parseRelationFileName parses <filenode>[_fsm|_vm|_init][.<segment>] and
// returns the filenode.
func parseRelationFileName(file string) (uint32, bool) {
	base, seg, hasSeg := strings.Cut(file, ".")
	if hasSeg && !isDigits(seg) {
		return 0, false
	}
	node, fork, hasFork := strings.Cut(base, "_")
	if hasFork && fork != "fsm" && fork != "vm" && fork != "init" {
		return 0, false
	}
	if !isOID(node) {
		return 0, false
	}
	fn, _ := strconv.ParseUint(node, 10, 32)
	return uint32(fn), fn != 0
}

// cleanEntryName normalises a tar entry name ("./base/1/", "base/1") and
// refuses names that are absolute or climb out of the archive.
func cleanEntryName(name string) (string, error) {
	if name == "" || strings.HasPrefix(name, "/") || strings.ContainsRune(name, 0) {
		return "", fmt.Errorf("tar entry %q: not a relative path", name)
	}
	for _, part := range strings.Split(strings.TrimSuffix(name, "/"), "/") {
		if part == ".." {
			return "", fmt.Errorf("tar entry %q climbs out of the archive", name)
		}
	}
	clean := path.Clean(name)
	if clean == "." {
		return "", fmt.Errorf("tar entry %q names the archive root", name)
	}
	return clean, nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// isOID reports whether s is the decimal form of a 32-bit OID (no sign, no
// leading zeros, as PostgreSQL writes them).
func isOID(s string) bool {
	if !isDigits(s) || (len(s) > 1 && s[0] == '0') {
		return false
	}
	_, err := strconv.ParseUint(s, 10, 32)
	return err == nil
}

func isUpperHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// isSegmentName matches XLogFileName: 24 upper-case hex digits.
func isSegmentName(s string) bool { return len(s) == 24 && isUpperHex(s) }

// isHistoryName matches a timeline history file: 8 hex digits + ".history".
func isHistoryName(s string) bool {
	tli, ok := strings.CutSuffix(s, ".history")
	return ok && len(tli) == 8 && isUpperHex(tli)
}
