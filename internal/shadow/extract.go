package shadow

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"sort"

	"github.com/walshadow/walshadow/internal/fsutil"
)

// ExtractStats counts what bootstrap kept and dropped of the backup.
type ExtractStats struct {
	KeptFiles      int   `json:"kept_files"`
	KeptBytes      int64 `json:"kept_bytes"`
	DiscardedFiles int   `json:"discarded_files"`
	// DiscardedBytes is mostly user relation data, read off the wire and
	// dropped without touching the disk.
	DiscardedBytes int64 `json:"discarded_bytes"`
	Directories    int   `json:"directories"`
	WALSegments    int   `json:"wal_segments"`
}

// maxWALSegmentSize is PostgreSQL's upper bound (1 GiB); a larger pg_wal
// entry is not a segment and would not be buffered.
const maxWALSegmentSize = 1 << 30

// extractor writes the kept part of BASE_BACKUP archives into the shadow's
// data directory: directories 0700 and files 0600, owned by the OS user,
// each file fsynced before the next; directories are fsynced in finish.
type extractor struct {
	root         string
	owner        *osUser
	relocated    CatalogSet
	transformWAL func(name string, data []byte) error
	log          *slog.Logger

	stats   ExtractStats
	made    map[string]bool // directories created, relative to root
	buf     []byte
	walSize int64
	// lastWAL is the name of the highest segment written.
	lastWAL string
	// seen records the files a startable data directory must have.
	seen map[string]bool
	// onEntry is BootstrapConfig.onEntry.
	onEntry func(name string)
}

func newExtractor(root string, owner *osUser, relocated CatalogSet, transformWAL func(string, []byte) error, log *slog.Logger) *extractor {
	return &extractor{
		root: root, owner: owner, relocated: relocated, transformWAL: transformWAL, log: log,
		made: map[string]bool{".": true}, buf: make([]byte, 256<<10), seen: make(map[string]bool),
	}
}

// requiredFiles must all arrive for the directory to start as a standby.
var requiredFiles = []string{"PG_VERSION", "backup_label", "global/pg_control", "global/pg_filenode.map"}

// archive extracts one tar archive; name is for errors.
func (x *extractor) archive(r io.Reader, spc archiveTablespace, name string) error {
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading archive %s: %w", name, err)
		}
		if err := x.entry(tr, hdr, spc); err != nil {
			return fmt.Errorf("archive %s, entry %q: %w", name, hdr.Name, err)
		}
	}
}

func (x *extractor) entry(tr *tar.Reader, hdr *tar.Header, spc archiveTablespace) error {
	if x.onEntry != nil {
		x.onEntry(hdr.Name)
	}
	var kind entryKind
	switch hdr.Typeflag {
	case tar.TypeReg, '\x00': // '\x00': a regular file in pre-POSIX archives (tar.TypeRegA, deprecated)
		kind = kindFile
	case tar.TypeDir:
		kind = kindDir
	case tar.TypeSymlink:
		kind = kindSymlink
	default:
		return fmt.Errorf("unexpected tar entry type %q", hdr.Typeflag)
	}
	if hdr.Size < 0 {
		return fmt.Errorf("negative size %d", hdr.Size)
	}
	action, dest, err := classifyEntry(spc, hdr.Name, kind, x.relocated)
	if err != nil {
		return err
	}
	switch action {
	case actionDir, actionTablespaceDir:
		return x.mkdirAll(dest)
	case actionKeep:
		x.seen[dest] = true
		return x.writeFile(dest, tr, hdr.Size)
	case actionWAL:
		return x.writeWAL(dest, tr, hdr.Size)
	default: // discard, config: tar.Reader skips the bytes on Next
		if kind == kindFile {
			x.stats.DiscardedFiles++
			x.stats.DiscardedBytes += hdr.Size
		}
		return nil
	}
}

// mkdirAll creates rel and its missing parents under root.
func (x *extractor) mkdirAll(rel string) error {
	if x.made[rel] {
		return nil
	}
	if parent := path.Dir(rel); parent != rel {
		if err := x.mkdirAll(parent); err != nil {
			return err
		}
	}
	full := filepath.Join(x.root, filepath.FromSlash(rel))
	if err := os.Mkdir(full, 0o700); err != nil {
		return fmt.Errorf("creating directory: %w", err)
	}
	if err := x.owner.chown(full); err != nil {
		return err
	}
	x.made[rel] = true
	x.stats.Directories++
	return nil
}

func (x *extractor) writeFile(rel string, r io.Reader, size int64) error {
	if err := x.mkdirAll(path.Dir(rel)); err != nil {
		return err
	}
	full := filepath.Join(x.root, filepath.FromSlash(rel))
	f, err := os.OpenFile(full, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("creating file: %w", err)
	}
	n, err := io.CopyBuffer(f, io.LimitReader(r, size), x.buf)
	if err == nil && n != size {
		err = fmt.Errorf("archive ended after %d of %d bytes", n, size)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", full, err)
	}
	if err := x.owner.chown(full); err != nil {
		return err
	}
	x.stats.KeptFiles++
	x.stats.KeptBytes += size
	return nil
}

// writeWAL buffers one segment, lets TransformWAL rewrite it in place (the
// filter NOOPs user records), and writes the result.
func (x *extractor) writeWAL(rel string, r io.Reader, size int64) error {
	if size < 1<<20 || size > maxWALSegmentSize || size&(size-1) != 0 {
		return fmt.Errorf("WAL segment of %d bytes: not a power of two between 1 MiB and 1 GiB", size)
	}
	if x.walSize != 0 && size != x.walSize {
		return fmt.Errorf("WAL segment of %d bytes after segments of %d", size, x.walSize)
	}
	x.walSize = size
	data := make([]byte, size)
	if _, err := io.ReadFull(r, data); err != nil {
		return fmt.Errorf("reading WAL segment: %w", err)
	}
	name := path.Base(rel)
	if x.transformWAL != nil {
		if err := x.transformWAL(name, data); err != nil {
			return fmt.Errorf("transforming WAL segment %s: %w", name, err)
		}
		if int64(len(data)) != size {
			return fmt.Errorf("transforming WAL segment %s changed its length", name)
		}
	}
	if err := x.writeFile(rel, bytes.NewReader(data), size); err != nil {
		return err
	}
	x.stats.WALSegments++
	if name > x.lastWAL {
		x.lastWAL = name
	}
	return nil
}

// layoutDirs are the directories of a PostgreSQL 15 data directory that
// must exist even when empty (initdb.c subdirs); the backup normally sends
// them all, this keeps a source that lost one from breaking the shadow.
var layoutDirs = []string{
	"global", "base", "pg_wal/archive_status", "pg_commit_ts", "pg_dynshmem", "pg_notify", "pg_serial",
	"pg_snapshots", "pg_subtrans", "pg_twophase", "pg_multixact/members", "pg_multixact/offsets",
	"pg_replslot", "pg_tblspc", "pg_stat", "pg_stat_tmp", "pg_xact", "pg_logical/snapshots", "pg_logical/mappings",
}

// finish checks that the data directory is complete, adds missing layout
// directories and fsyncs every directory it created (deepest first), then
// the root's parent.
func (x *extractor) finish() error {
	for _, d := range layoutDirs {
		if err := x.mkdirAll(d); err != nil {
			return err
		}
	}
	var missing []string
	for _, f := range requiredFiles {
		if !x.seen[f] {
			missing = append(missing, f)
		}
	}
	if x.stats.WALSegments == 0 {
		missing = append(missing, "pg_wal segments")
	}
	if len(missing) > 0 {
		return fmt.Errorf("the backup lacks %v", missing)
	}
	dirs := make([]string, 0, len(x.made))
	for d := range x.made {
		dirs = append(dirs, d)
	}
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	for _, d := range dirs {
		if err := fsutil.SyncDir(filepath.Join(x.root, filepath.FromSlash(d))); err != nil {
			return err
		}
	}
	return fsutil.SyncDir(filepath.Dir(x.root))
}
