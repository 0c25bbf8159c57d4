package shadow

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walshadow/walshadow/internal/fsutil"
	"github.com/walshadow/walshadow/internal/wal"
)

// BootstrapConfig describes a catalog-only bootstrap of the shadow.
type BootstrapConfig struct {
	// SourceDSN reaches the source as a role with REPLICATION (for
	// BASE_BACKUP) that can connect to every database (for the catalog
	// filenode query). Any pgx/libpq connection string.
	SourceDSN string
	// Dir is the shadow's data directory. It must not exist, be empty, hold
	// a completed bootstrap (which is resumed, never rebuilt) or an
	// interrupted one (IncompleteMarker without CompleteMarker: its contents
	// are removed and the bootstrap is done again).
	Dir string
	// OSUser owns the files and runs PostgreSQL; default postgres when
	// walshadow runs as root, else the current user.
	OSUser string
	// FollowedDB is the source database walshadow replicates; it must exist
	// and allow connections. Optional: its OID is reported when set.
	FollowedDB string
	// BinDir holds the shadow's PostgreSQL binaries; when set, their major
	// version must equal the source's.
	BinDir string
	// TransformWAL, when set, rewrites each WAL segment of the backup window
	// in place before it is written to pg_wal (the filter plugs in here to
	// turn user records into NOOPs). It must not change the length.
	TransformWAL func(name string, data []byte) error
	// Logger defaults to slog.Default().
	Logger *slog.Logger

	// onEntry, for tests, is called before each tar entry is handled: the
	// backup window is open then.
	onEntry func(name string)
}

// BootstrapResult describes a completed bootstrap; it is stored in the
// completion marker and returned again when the directory is resumed.
type BootstrapResult struct {
	// StartLSN is the backup's start (its checkpoint's redo point), EndLSN
	// the end of its backup-end record: the shadow is consistent once it has
	// replayed through EndLSN.
	StartLSN, EndLSN wal.LSN
	Timeline         uint32
	SystemID         uint64
	// WALEnd is the end of the last WAL segment written into pg_wal, segment
	// aligned: where streaming to the shadow continues.
	WALEnd         wal.LSN
	WALSegmentSize int
	// ServerVersionNum is the source's server_version_num.
	ServerVersionNum int
	// FollowedDBOID is the OID of BootstrapConfig.FollowedDB (0 if unset).
	FollowedDBOID uint32
	// SuperUser is the bootstrap superuser's role name (OID 10), which local
	// SQL connections to the shadow use.
	SuperUser string
	// RelocatedCatalogs are the catalog files kept although their filenode
	// is at or above FirstNormalObjectID.
	RelocatedCatalogs []RelFile
	// Tablespaces other than pg_default and pg_global, stored in place under
	// pg_tblspc/<oid>.
	Tablespaces []BackupTablespace
	Stats       ExtractStats
	// Resumed is true when Bootstrap found a completed directory and did
	// nothing.
	Resumed bool
}

// Marker files in the shadow's data directory.
const (
	// CompleteMarker holds the BootstrapResult as JSON; it is written only
	// after every file and directory is fsynced.
	CompleteMarker = "walshadow.bootstrap_complete"
	// IncompleteMarker is written before the first byte of the backup, so an
	// interrupted bootstrap is recognised even before PG_VERSION arrives.
	IncompleteMarker = "walshadow.bootstrap_incomplete"
)

// ErrNotBootstrapped is returned (wrapped) for a directory that holds no
// bootstrap at all; a half-built one gets a different error.
var ErrNotBootstrapped = errors.New("shadow directory is not bootstrapped")

// Bootstrap builds a catalog-only shadow data directory from one BASE_BACKUP
// of the source, or resumes a directory bootstrapped before. A directory an
// interrupted bootstrap left (IncompleteMarker, no CompleteMarker) is
// emptied and bootstrapped again once the source has answered.
//
// Only catalogs land on disk: global/, pg_xact, pg_multixact, pg_twophase,
// pg_commit_ts, PG_VERSION, backup_label, pg_control, the relation maps and
// every relation file whose filenode is below 16384 or belongs to a catalog
// relocated by VACUUM FULL/CLUSTER (found by querying every connectable
// database before the backup). User relation bytes are read off the wire and
// dropped. The WAL of the backup window goes to pg_wal through TransformWAL.
//
// DDL on the source while Bootstrap runs is not supported: a catalog
// relocated between the filenode query and the backup would be dropped as
// user data, and the shadow would fail to replay.
func Bootstrap(ctx context.Context, cfg BootstrapConfig) (*BootstrapResult, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	if cfg.SourceDSN == "" {
		return nil, errors.New("shadow bootstrap: SourceDSN is empty")
	}
	if cfg.Dir == "" {
		return nil, errors.New("shadow bootstrap: Dir is empty")
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("shadow bootstrap: %w", err)
	}
	owner, err := lookupOSUser(cfg.OSUser)
	if err != nil {
		return nil, fmt.Errorf("shadow bootstrap: %w", err)
	}
	interrupted := isInterruptedBootstrap(dir)
	if !interrupted {
		prev, err := ReadBootstrapResult(dir)
		switch {
		case err == nil:
			log.Info("shadow already bootstrapped; resuming it", "dir", dir, "end_lsn", prev.EndLSN)
			prev.Resumed = true
			return prev, nil
		case !errors.Is(err, ErrNotBootstrapped):
			return nil, err
		}
	}

	facts, err := querySource(ctx, cfg.SourceDSN, cfg.FollowedDB, log)
	if err != nil {
		return nil, fmt.Errorf("shadow bootstrap: %w", err)
	}
	if cfg.BinDir != "" {
		if err := checkBinaryMajor(ctx, cfg.BinDir, facts.versionNum); err != nil {
			return nil, fmt.Errorf("shadow bootstrap: %w", err)
		}
	}
	if interrupted {
		// Only after the source answered: a source that is down leaves the
		// directory as it was.
		log.Warn("the shadow directory holds an interrupted bootstrap; removing its contents and bootstrapping again",
			"dir", dir, "marker", IncompleteMarker)
		if err := clearInterruptedBootstrap(dir); err != nil {
			return nil, fmt.Errorf("shadow bootstrap: %w", err)
		}
	}
	if err := createDataDir(dir, owner); err != nil {
		return nil, fmt.Errorf("shadow bootstrap: %w", err)
	}
	if err := fsutil.WriteFileAtomic(filepath.Join(dir, IncompleteMarker), []byte("bootstrap in progress\n"), 0o600, owner.chown); err != nil {
		return nil, fmt.Errorf("shadow bootstrap: %w", err)
	}
	res, err := runBaseBackup(ctx, cfg, dir, owner, facts, log)
	if err != nil {
		return nil, fmt.Errorf("shadow bootstrap into %s failed (the next start bootstraps it again): %w", dir, err)
	}
	if err := writeCompleteMarker(dir, owner, res); err != nil {
		return nil, fmt.Errorf("shadow bootstrap: %w", err)
	}
	log.Info("shadow bootstrapped", "dir", dir, "start_lsn", res.StartLSN, "end_lsn", res.EndLSN,
		"kept_files", res.Stats.KeptFiles, "kept_bytes", res.Stats.KeptBytes,
		"discarded_bytes", res.Stats.DiscardedBytes, "wal_segments", res.Stats.WALSegments)
	return res, nil
}

func runBaseBackup(ctx context.Context, cfg BootstrapConfig, dir string, owner *osUser, facts *sourceFacts, log *slog.Logger) (*BootstrapResult, error) {
	pcfg, err := pgconn.ParseConfig(cfg.SourceDSN)
	if err != nil {
		return nil, fmt.Errorf("parsing the source DSN: %w", err)
	}
	pcfg.RuntimeParams["replication"] = "true"
	conn, err := pgconn.ConnectConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("opening a replication connection to the source: %w", err)
	}
	defer conn.Close(context.Background())

	sysID, tli, err := identifySystem(ctx, conn)
	if err != nil {
		return nil, err
	}
	stream, err := startBaseBackup(ctx, conn, log)
	if err != nil {
		return nil, err
	}
	log.Info("BASE_BACKUP started", "start_lsn", stream.proto.Start, "timeline", stream.proto.StartTLI,
		"tablespaces", len(stream.proto.Tablespaces), "estimated_bytes", stream.progress.estimate)
	x := newExtractor(dir, owner, facts.relocated, cfg.TransformWAL, log)
	x.onEntry = cfg.onEntry
	stream.progress.kept = func() int64 { return x.stats.KeptBytes }
	if err := receiveArchives(stream, x); err != nil {
		return nil, err
	}
	stream.progress.finished()
	p := &stream.proto
	if p.StartTLI != tli {
		return nil, fmt.Errorf("BASE_BACKUP started on timeline %d but IDENTIFY_SYSTEM reported %d", p.StartTLI, tli)
	}
	if p.EndTLI != p.StartTLI {
		return nil, fmt.Errorf("the source switched timeline during BASE_BACKUP (%d to %d): bootstrap again", p.StartTLI, p.EndTLI)
	}
	last, ok := wal.ParseSegmentName(x.lastWAL)
	if !ok {
		return nil, fmt.Errorf("bad WAL segment name %q", x.lastWAL)
	}
	res := &BootstrapResult{
		StartLSN: p.Start, EndLSN: p.End, Timeline: p.StartTLI, SystemID: sysID,
		WALSegmentSize:   int(x.walSize),
		ServerVersionNum: facts.versionNum, FollowedDBOID: facts.followedOID, SuperUser: facts.superUser,
		Tablespaces: p.Tablespaces, Stats: x.stats,
	}
	lastStart, err := last.StartLSN(uint32(x.walSize))
	if err != nil {
		return nil, fmt.Errorf("WAL segment %s: %w", x.lastWAL, err)
	}
	res.WALEnd = lastStart + wal.LSN(x.walSize)
	if res.WALEnd < res.EndLSN {
		return nil, fmt.Errorf("pg_wal ends at %s, before the backup end %s", res.WALEnd, res.EndLSN)
	}
	for r := range facts.relocated {
		res.RelocatedCatalogs = append(res.RelocatedCatalogs, r)
	}
	sortRelFiles(res.RelocatedCatalogs)
	return res, nil
}

// receiveArchives extracts every archive of the COPY stream, reads the
// command to its end and completes the data directory.
func receiveArchives(stream *backupStream, x *extractor) error {
	for {
		arc, ok, err := stream.nextArchive()
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		spc, err := stream.proto.archiveTablespaceOf(arc)
		if err != nil {
			return err
		}
		if err := x.archive(stream, spc, arc.name); err != nil {
			return err
		}
		// Past the tar end-of-archive blocks.
		if _, err := io.Copy(io.Discard, stream); err != nil {
			return err
		}
	}
	if err := stream.finish(); err != nil {
		return err
	}
	return x.finish()
}

func identifySystem(ctx context.Context, conn *pgconn.PgConn) (sysID uint64, tli uint32, err error) {
	results, err := conn.Exec(ctx, "IDENTIFY_SYSTEM").ReadAll()
	if err != nil {
		return 0, 0, fmt.Errorf("IDENTIFY_SYSTEM on the source: %w", err)
	}
	if len(results) != 1 || len(results[0].Rows) != 1 || len(results[0].Rows[0]) < 2 {
		return 0, 0, errors.New("IDENTIFY_SYSTEM on the source: unexpected result shape")
	}
	row := results[0].Rows[0]
	sysID, err1 := strconv.ParseUint(string(row[0]), 10, 64)
	t, err2 := strconv.ParseUint(string(row[1]), 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return 0, 0, fmt.Errorf("IDENTIFY_SYSTEM on the source: %w", err)
	}
	return sysID, uint32(t), nil
}

// sourceFacts is what bootstrap learns over ordinary SQL before the backup.
type sourceFacts struct {
	versionNum  int
	superUser   string
	followedOID uint32
	relocated   CatalogSet
}

// relocatedCatalogQuery lists, in the current database, the catalogs (OID
// below 16384, not shared: global/ is kept whole) whose storage now has a
// filenode at or above 16384, with the tablespace the file lives in.
const relocatedCatalogQuery = `
SELECT CASE WHEN c.reltablespace = 0 THEN d.dattablespace ELSE c.reltablespace END,
       pg_relation_filenode(c.oid)
FROM pg_class c, pg_database d
WHERE d.datname = current_database()
  AND c.oid < 16384 AND NOT c.relisshared
  AND pg_relation_filenode(c.oid) >= 16384`

// querySource reads the source's version, its bootstrap superuser, the
// followed database's OID and every connectable database's relocated
// catalogs. A database dropped between the listing and the connection to it
// is skipped (see forEachDatabase); the followed one is not.
func querySource(ctx context.Context, dsn, followedDB string, log *slog.Logger) (*sourceFacts, error) {
	base, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parsing the source DSN: %w", err)
	}
	conn, err := pgx.ConnectConfig(ctx, base)
	if err != nil {
		return nil, fmt.Errorf("connecting to the source: %w", err)
	}
	defer conn.Close(context.Background())
	facts := &sourceFacts{relocated: make(CatalogSet)}
	if err := conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int, (SELECT rolname FROM pg_roles WHERE oid = 10)").
		Scan(&facts.versionNum, &facts.superUser); err != nil {
		return nil, fmt.Errorf("querying the source's version: %w", err)
	}
	if _, err := wal.LayoutForMajor(facts.versionNum / 10000); err != nil {
		return nil, fmt.Errorf("the source runs server_version_num %d: %w", facts.versionNum, err)
	}
	dbs, err := listDatabases(ctx, conn)
	if err != nil {
		return nil, err
	}
	found := followedDB == ""
	for _, d := range dbs {
		if d.name == followedDB {
			facts.followedOID, found = d.oid, true
		}
	}
	skipped, err := forEachDatabase(ctx, dbs, log,
		func(ctx context.Context, d sourceDatabase) error {
			return queryRelocated(ctx, base, d.name, d.oid, facts.relocated)
		},
		func(ctx context.Context, oid uint32) (string, bool, error) {
			return lookUpDatabase(ctx, conn, oid)
		})
	if err != nil {
		return nil, err
	}
	for _, d := range skipped {
		if followedDB != "" && d.oid == facts.followedOID {
			return nil, fmt.Errorf("the followed database %q was dropped on the source while walshadow started", followedDB)
		}
	}
	if !found {
		return nil, fmt.Errorf("the followed database %q does not exist on the source or does not allow connections", followedDB)
	}
	return facts, nil
}

func queryRelocated(ctx context.Context, base *pgx.ConnConfig, dbName string, dbOID uint32, into CatalogSet) error {
	cfg := base.Copy()
	cfg.Database = dbName
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connecting to source database %q for its catalog filenodes: %w", dbName, err)
	}
	defer conn.Close(context.Background())
	// The name may have moved to another database since the listing (the
	// listed one dropped or renamed, another created or renamed to it):
	// its filenodes are not dbOID's.
	var oid uint32
	if err := conn.QueryRow(ctx, "SELECT oid FROM pg_database WHERE datname = current_database()").Scan(&oid); err != nil {
		return fmt.Errorf("querying the OID of source database %q: %w", dbName, err)
	}
	if oid != dbOID {
		return fmt.Errorf("source database %q is OID %d, listed as %d a moment ago", dbName, oid, dbOID)
	}
	rows, err := conn.Query(ctx, relocatedCatalogQuery)
	if err != nil {
		return fmt.Errorf("querying catalog filenodes of source database %q: %w", dbName, err)
	}
	defer rows.Close()
	for rows.Next() {
		var spc, fn uint32
		if err := rows.Scan(&spc, &fn); err != nil {
			return fmt.Errorf("querying catalog filenodes of source database %q: %w", dbName, err)
		}
		into[RelFile{Spc: spc, DB: dbOID, Filenode: fn}] = struct{}{}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("querying catalog filenodes of source database %q: %w", dbName, err)
	}
	return nil
}

var binaryVersion = regexp.MustCompile(`\(PostgreSQL\) (\d+)`)

// checkBinaryMajor refuses a source whose major version differs from the
// shadow's binaries: physical WAL and data files are major-specific.
func checkBinaryMajor(ctx context.Context, binDir string, sourceVersionNum int) error {
	out, err := runOutput(execCommand(ctx, filepath.Join(binDir, "postgres"), "--version"))
	if err != nil {
		return fmt.Errorf("checking the shadow's PostgreSQL version: %w", err)
	}
	m := binaryVersion.FindStringSubmatch(out)
	if m == nil {
		return fmt.Errorf("checking the shadow's PostgreSQL version: unexpected output %q", strings.TrimSpace(out))
	}
	major, _ := strconv.Atoi(m[1])
	if major != sourceVersionNum/10000 {
		return fmt.Errorf("the source is PostgreSQL %d but the shadow's binaries in %s are %d: they must match",
			sourceVersionNum/10000, binDir, major)
	}
	return nil
}

// isInterruptedBootstrap reports whether dir holds walshadow's own
// interrupted bootstrap: the in-progress marker without the completion
// marker. Such a directory is walshadow's to clear; anything else without a
// completion marker is not.
func isInterruptedBootstrap(dir string) bool {
	return exists(filepath.Join(dir, IncompleteMarker)) && !exists(filepath.Join(dir, CompleteMarker))
}

// clearInterruptedBootstrap empties dir, removing IncompleteMarker last: a
// crash while clearing leaves a directory still recognised as interrupted.
// Symbolic links (tablespaces under pg_tblspc) are removed, not followed.
func clearInterruptedBootstrap(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("listing the interrupted bootstrap in %s: %w", dir, err)
	}
	for _, e := range entries {
		if e.Name() == IncompleteMarker {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("removing the interrupted bootstrap's %s: %w", filepath.Join(dir, e.Name()), err)
		}
	}
	if err := os.Remove(filepath.Join(dir, IncompleteMarker)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing %s: %w", filepath.Join(dir, IncompleteMarker), err)
	}
	return fsutil.SyncDir(dir)
}

// createDataDir makes dir (0700, owned by the OS user); an existing empty
// directory is adopted.
func createDataDir(dir string, owner *osUser) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("creating the parent of %s: %w", dir, err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("chmod %s: %w", dir, err)
	}
	return owner.chown(dir)
}
