package shadow

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walshadow/walshadow/internal/testrig"
	"github.com/walshadow/walshadow/internal/wal"
)

// extraSchema adds, beside pgbench's tables, the relation kinds and storage
// a shadow must leave behind (indexes of several access methods, TOAST, a
// materialized view, an unlogged table, a table in a tablespace, a sequence,
// an enum) and relocates catalogs: pg_depend (plain) and pg_class (mapped).
const extraSchema = `
CREATE TABLE extra_items (id bigserial PRIMARY KEY, name text NOT NULL, payload jsonb, created timestamptz DEFAULT now());
CREATE INDEX extra_items_name ON extra_items (name);
CREATE INDEX extra_items_payload ON extra_items USING gin (payload);
INSERT INTO extra_items (name, payload) SELECT 'item ' || g, jsonb_build_object('g', g) FROM generate_series(1, 20000) g;
CREATE TABLE extra_docs (id int PRIMARY KEY, body text);
INSERT INTO extra_docs SELECT g, string_agg(md5(g::text || h::text), '') FROM generate_series(1, 40) g, generate_series(1, 300) h GROUP BY g;
CREATE TABLE extra_in_ts (id int, v text) TABLESPACE extra_ts;
INSERT INTO extra_in_ts SELECT g, 'v' || g FROM generate_series(1, 5000) g;
CREATE MATERIALIZED VIEW extra_mv AS SELECT name, count(*) FROM extra_items GROUP BY name;
CREATE UNLOGGED TABLE extra_unlogged (id int PRIMARY KEY);
INSERT INTO extra_unlogged SELECT generate_series(1, 1000);
CREATE SEQUENCE extra_seq;
CREATE TYPE extra_mood AS ENUM ('sad', 'ok', 'happy');
CREATE TABLE extra_typed (id int, mood extra_mood);
INSERT INTO extra_typed VALUES (1, 'ok');
VACUUM FULL pg_depend;
VACUUM FULL pg_class;
VACUUM ANALYZE;
`

const otherSchema = `
CREATE TABLE other_t (id int PRIMARY KEY, v text);
INSERT INTO other_t SELECT g, repeat('x', 100) FROM generate_series(1, 10000) g;
VACUUM FULL pg_attribute;
VACUUM ANALYZE;
`

// catalogComparisons select the catalog rows of every user relation.
var catalogComparisons = []string{
	"SELECT c::text FROM pg_class c WHERE c.oid >= 16384 ORDER BY c.oid",
	"SELECT a::text FROM pg_attribute a WHERE a.attrelid >= 16384 ORDER BY a.attrelid, a.attnum",
	"SELECT t::text FROM pg_type t WHERE t.oid >= 16384 ORDER BY t.oid",
}

func TestBootstrapCatalogOnlyShadow(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	tsDir := ownedTempDir(t, "walshadow-ts-")
	src := testrig.StartPostgres(t, testrig.WithSetting("autovacuum", "off"))
	src.PGBench(t, pgbenchScale(t), testrig.PGBenchOptions{})
	src.Exec(t, "CREATE DATABASE other")
	src.Exec(t, fmt.Sprintf("CREATE TABLESPACE extra_ts LOCATION '%s'", tsDir))
	src.RunSQLScript(t, extraSchema)
	execIn(t, ctx, src.DSNFor("other"), otherSchema)
	src.Checkpoint(t)

	userFiles := sourceUserFiles(t, ctx, src)
	relocatedDepend := sourceRelFile(t, ctx, src.DSNFor("postgres"), "pg_depend")
	relocatedClass := sourceRelFile(t, ctx, src.DSNFor("postgres"), "pg_class")
	relocatedAttr := sourceRelFile(t, ctx, src.DSNFor("other"), "pg_attribute")
	for _, r := range []RelFile{relocatedDepend, relocatedClass, relocatedAttr} {
		if r.Filenode < FirstNormalObjectID {
			t.Fatalf("VACUUM FULL left catalog file %s below %d", r, FirstNormalObjectID)
		}
	}
	sourceSize := src.QueryInt(t, "SELECT sum(pg_database_size(oid))::bigint FROM pg_database")

	parent := ownedTempDir(t, "walshadow-shadow-")
	dir := filepath.Join(parent, "data")
	start := time.Now()
	res, err := Bootstrap(ctx, BootstrapConfig{SourceDSN: src.DSN(), Dir: dir, FollowedDB: "postgres", BinDir: src.BinDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("bootstrap took %v: start %s end %s wal_end %s, kept %d files (%d bytes), discarded %d files (%d bytes), %d WAL segments",
		time.Since(start).Round(time.Millisecond), res.StartLSN, res.EndLSN, res.WALEnd, res.Stats.KeptFiles, res.Stats.KeptBytes,
		res.Stats.DiscardedFiles, res.Stats.DiscardedBytes, res.Stats.WALSegments)
	if res.EndLSN <= res.StartLSN || res.WALEnd < res.EndLSN || res.Timeline != 1 || res.SystemID == 0 {
		t.Fatalf("implausible result %+v", res)
	}
	if res.FollowedDBOID != uint32(src.QueryInt(t, "SELECT oid::bigint FROM pg_database WHERE datname = 'postgres'")) {
		t.Errorf("followed database OID %d", res.FollowedDBOID)
	}
	for _, r := range []RelFile{relocatedDepend, relocatedClass, relocatedAttr} {
		if !CatalogSet(relFileSet(res.RelocatedCatalogs)).Has(r) {
			t.Errorf("relocated catalog %s missing from the result's %v", r, res.RelocatedCatalogs)
		}
	}

	assertNoUserFiles(t, src.DataDir(), dir, userFiles)
	for _, r := range []RelFile{relocatedDepend, relocatedClass, relocatedAttr} {
		path := filepath.Join(dir, "base", strconv.Itoa(int(r.DB)), strconv.Itoa(int(r.Filenode)))
		if _, err := os.Stat(path); err != nil {
			t.Errorf("relocated catalog file not kept: %v", err)
		}
	}
	assertOwnedAndPrivate(t, dir)
	// The tablespace is an in-place directory, never a link to the source's.
	if len(res.Tablespaces) != 1 || res.Tablespaces[0].Location != tsDir {
		t.Errorf("tablespaces %+v, want one at %s", res.Tablespaces, tsDir)
	} else {
		tsPath := filepath.Join(dir, "pg_tblspc", strconv.Itoa(int(res.Tablespaces[0].OID)))
		if fi, err := os.Lstat(tsPath); err != nil || !fi.IsDir() {
			t.Errorf("%s: %v %v", tsPath, fi, err)
		}
		dbDirs, _ := filepath.Glob(filepath.Join(tsPath, "PG_*_*", strconv.Itoa(int(res.FollowedDBOID))))
		if len(dbDirs) != 1 {
			t.Errorf("database directory of the tablespace: %v", dbDirs)
		}
	}
	for _, d := range layoutDirs {
		if fi, err := os.Stat(filepath.Join(dir, d)); err != nil || !fi.IsDir() {
			t.Errorf("layout directory %s: %v", d, err)
		}
	}

	// The shadow replays the backup's own WAL and becomes a hot standby,
	// with nowhere to stream from and nothing to restore.
	sh, err := New(ShadowConfig{
		Dir: dir, BinDir: src.BinDir(), Port: 5432,
		PrimarySocketDir: filepath.Join(parent, "no-walsender"), PrimaryPort: 1,
		RestoreCommand: "/bin/false",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sh.Stop(context.Background()); err != nil {
			t.Errorf("stopping the shadow: %v", err)
		}
		if t.Failed() {
			t.Logf("shadow log tail:\n%s", readTail(sh.LogFile(), 0, 8192))
		}
	})
	if err := sh.Start(ctx); err != nil {
		t.Fatal(err)
	}
	replayed, err := sh.WaitForReplay(ctx, res.EndLSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("shadow replayed to %s (backup end %s)", replayed, res.EndLSN)
	assertNoUserFiles(t, src.DataDir(), dir, userFiles)

	size, err := sh.DataDirSize()
	if err != nil {
		t.Fatal(err)
	}
	catalogBytes := sourceCatalogBytes(t, ctx, src)
	t.Logf("shadow data dir without pg_wal: %d bytes; source databases: %d bytes (%.2f%%); source catalogs: %d bytes",
		size, sourceSize, 100*float64(size)/float64(sourceSize), catalogBytes)
	// The shadow holds the source's catalogs plus a little control state;
	// any user relation would blow this bound.
	if limit := catalogBytes + 4<<20; size > limit {
		t.Errorf("shadow holds %d bytes, more than the source's catalogs (%d) + 4 MiB", size, catalogBytes)
	}
	// Every database costs ~7.5 MB of catalogs whatever its size, so the
	// ratio bound of the issue needs its ≥ 500 MB source (scale ≥ 35).
	if sourceSize >= 500<<20 && float64(size) >= 0.05*float64(sourceSize) {
		t.Errorf("shadow is %.2f%% of a %d MB source, not under 5%%", 100*float64(size)/float64(sourceSize), sourceSize>>20)
	}

	for _, db := range []string{"postgres", "other"} {
		compareCatalogs(t, ctx, src.DSNFor(db), sh, db)
	}

	// Kill the postmaster: Supervise brings it back.
	pid, ok := sh.Running()
	if !ok {
		t.Fatal("shadow not running")
	}
	supCtx, supCancel := context.WithCancel(ctx)
	supDone := make(chan error, 1)
	go func() { supDone <- sh.Supervise(supCtx) }()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	deadline := time.Now().Add(2 * time.Minute)
	for sh.Restarts() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("Supervise did not restart the killed shadow")
		}
		time.Sleep(100 * time.Millisecond)
	}
	newPID, ok := sh.Running()
	if !ok || newPID == pid {
		t.Fatalf("after restart: pid %d running=%v (killed %d)", newPID, ok, pid)
	}
	if lsn, err := sh.WaitForReplay(ctx, replayed); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("killed postmaster %d; Supervise restarted it as %d after %v, replay at %s",
			pid, newPID, time.Since(killed).Round(time.Millisecond), lsn)
	}
	supCancel()
	if err := <-supDone; err != nil {
		t.Fatal(err)
	}

	// A second Bootstrap of the completed directory resumes it.
	again, err := Bootstrap(ctx, BootstrapConfig{SourceDSN: "host=/nonexistent", Dir: dir})
	if err != nil || !again.Resumed || again.EndLSN != res.EndLSN {
		t.Fatalf("resuming: %+v, %v", again, err)
	}

	raiseFloorThroughWAL(t, ctx, src, sh, parent)
}

// raiseFloorThroughWAL raises max_connections on the source and feeds the
// shadow the resulting XLOG_PARAMETER_CHANGE through restore_command: the
// shadow pauses (or fails to start) for the insufficient setting, and
// Start/Supervise bring it back with the new floor from pg_control. The
// source must have been idle since the bootstrap: its WAL reaches the shadow
// unfiltered.
func raiseFloorThroughWAL(t *testing.T, ctx context.Context, src *testrig.Postgres, sh *Shadow, parent string) {
	old := sh.Floors().MaxConnections
	raised := old + 50
	src.SetConf(t, "max_connections", strconv.Itoa(raised))
	src.Restart(t)
	target := src.CurrentInsertLSN(t)
	archive := filepath.Join(parent, "archive")
	src.CopyWALSegments(t, archive)
	u, _ := lookupOSUser("")
	filepath.WalkDir(archive, func(path string, d fs.DirEntry, err error) error { return u.chown(path) })

	if err := sh.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	sh2, err := New(ShadowConfig{
		Dir: sh.Dir(), BinDir: src.BinDir(), Port: sh.Port(),
		PrimarySocketDir: filepath.Join(parent, "no-walsender"), PrimaryPort: 1,
		RestoreCommand: "cp " + archive + "/%f %p",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sh2.Stop(context.Background()) })
	if err := sh2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	supCtx, supCancel := context.WithCancel(ctx)
	defer supCancel()
	go sh2.Supervise(supCtx)
	deadline := time.Now().Add(3 * time.Minute)
	for {
		rows, err := sh2.QueryStrings(ctx, "postgres", "SELECT current_setting('max_connections'), pg_last_wal_replay_lsn()::text")
		if err == nil && rows[0][0] == strconv.Itoa(raised) {
			lsn, _ := wal.ParseLSN(rows[0][1])
			if lsn >= target {
				path := "replay of the change failed startup and Start retried with the re-read floors"
				if sh2.Restarts() > 0 {
					path = "replay paused, Supervise resumed it and restarted the shadow"
				}
				t.Logf("source raised max_connections %d -> %d; the shadow runs with %s (%s), replay at %s",
					old, raised, rows[0][0], path, lsn)
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the shadow did not come back with max_connections %d (floors %+v, last: %v %v); log:\n%s",
				raised, sh2.Floors(), rows, err, readTail(sh2.LogFile(), 0, 4096))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if got := sh2.Floors().MaxConnections; got != raised {
		t.Errorf("floors after the restart: max_connections %d, want %d", got, raised)
	}
}

// pgbenchScale is 5, or WALSHADOW_SHADOW_TEST_SCALE (e.g. 40 for a source
// past 500 MB, where the 5% size bound is checked).
func pgbenchScale(t *testing.T) int {
	v := os.Getenv("WALSHADOW_SHADOW_TEST_SCALE")
	if v == "" {
		return 5
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("WALSHADOW_SHADOW_TEST_SCALE=%q is not a positive integer", v)
	}
	return n
}

// ownedTempDir makes a temporary directory the server's OS user owns, and
// removes it when the test passed.
func ownedTempDir(t *testing.T, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	u, err := lookupOSUser("")
	if err != nil {
		t.Fatal(err)
	}
	if err := u.chown(dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kept %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	return dir
}

func connect(t *testing.T, ctx context.Context, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func execIn(t *testing.T, ctx context.Context, dsn, sql string) {
	t.Helper()
	conn := connect(t, ctx, dsn)
	// One statement at a time: a multi-statement query is one transaction,
	// which VACUUM refuses.
	for _, stmt := range strings.Split(sql, ";\n") {
		if strings.TrimSpace(stmt) == "" {
			continue
		}
		if _, err := conn.Exec(ctx, stmt, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("%s: %q: %v", dsn, stmt, err)
		}
	}
}

// sourceUserFiles is the storage of every user relation in every
// connectable database of the source.
func sourceUserFiles(t *testing.T, ctx context.Context, src *testrig.Postgres) map[RelFile]string {
	t.Helper()
	files := make(map[RelFile]string)
	for _, db := range connectableDatabases(t, ctx, src) {
		conn := connect(t, ctx, src.DSNFor(db))
		rows, err := conn.Query(ctx, `
SELECT CASE WHEN c.reltablespace = 0 THEN d.dattablespace ELSE c.reltablespace END, d.oid,
       pg_relation_filenode(c.oid), c.relname, pg_relation_filepath(c.oid)
FROM pg_class c, pg_database d
WHERE d.datname = current_database() AND c.oid >= 16384 AND pg_relation_filenode(c.oid) IS NOT NULL`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var r RelFile
			var name, path string
			if err := rows.Scan(&r.Spc, &r.DB, &r.Filenode, &name, &path); err != nil {
				t.Fatal(err)
			}
			files[r] = db + "." + name + " (" + path + ")"
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	if len(files) < 8 {
		t.Fatalf("only %d user relation files on the source", len(files))
	}
	return files
}

func connectableDatabases(t *testing.T, ctx context.Context, src *testrig.Postgres) []string {
	t.Helper()
	rows, err := QueryStrings(ctx, connect(t, ctx, src.DSN()), "SELECT datname FROM pg_database WHERE datallowconn ORDER BY oid")
	if err != nil {
		t.Fatal(err)
	}
	var dbs []string
	for _, r := range rows {
		dbs = append(dbs, r[0])
	}
	return dbs
}

func sourceRelFile(t *testing.T, ctx context.Context, dsn, rel string) RelFile {
	t.Helper()
	var r RelFile
	err := connect(t, ctx, dsn).QueryRow(ctx, `
SELECT CASE WHEN c.reltablespace = 0 THEN d.dattablespace ELSE c.reltablespace END, d.oid, pg_relation_filenode(c.oid)
FROM pg_class c, pg_database d WHERE d.datname = current_database() AND c.oid = $1::regclass`, rel).Scan(&r.Spc, &r.DB, &r.Filenode)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// sourceCatalogBytes sums the on-disk size of every catalog relation (all
// forks) over the connectable databases, shared catalogs once.
func sourceCatalogBytes(t *testing.T, ctx context.Context, src *testrig.Postgres) int64 {
	t.Helper()
	var total int64
	for i, db := range []string{"postgres", "other", "template1"} {
		var n int64
		shared := "NOT c.relisshared"
		if i == 0 {
			shared = "true"
		}
		err := connect(t, ctx, src.DSNFor(db)).QueryRow(ctx,
			"SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c WHERE c.oid < 16384 AND c.relkind IN ('r', 'm') AND "+shared).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	// template0 does not allow connections; it is a copy of template1's catalogs.
	var t1 int64
	if err := connect(t, ctx, src.DSNFor("template1")).QueryRow(ctx,
		"SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c WHERE c.oid < 16384 AND c.relkind IN ('r', 'm') AND NOT c.relisshared").Scan(&t1); err != nil {
		t.Fatal(err)
	}
	return total + t1
}

// assertNoUserFiles walks the shadow and fails on any file of a user
// relation; it also checks the same walk finds them in the source, so the
// test cannot pass by looking in the wrong place.
func assertNoUserFiles(t *testing.T, sourceDir, shadowDir string, user map[RelFile]string) {
	t.Helper()
	if found := relationFiles(t, sourceDir, user); len(found) == 0 {
		t.Fatalf("the walk finds no user relation files in the source %s either", sourceDir)
	}
	for _, f := range relationFiles(t, shadowDir, user) {
		t.Errorf("user relation file in the shadow: %s", f)
	}
}

// relationFiles lists the files under dir that belong to a relation in set,
// following tablespace links.
func relationFiles(t *testing.T, dir string, set map[RelFile]string) []string {
	t.Helper()
	var found []string
	check := func(root string, spc uint32, depthOfDB int) {
		filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			rel, _ := filepath.Rel(root, path)
			parts := strings.Split(rel, string(filepath.Separator))
			if len(parts) != depthOfDB+2 {
				return nil
			}
			db, err1 := strconv.ParseUint(parts[depthOfDB], 10, 32)
			fn, ok := parseRelationFileName(parts[depthOfDB+1])
			if err1 != nil || !ok {
				return nil
			}
			if what, isUser := set[RelFile{Spc: spc, DB: uint32(db), Filenode: fn}]; isUser {
				found = append(found, path+": "+what)
			}
			return nil
		})
	}
	check(filepath.Join(dir, "base"), DefaultTablespaceOID, 0)
	entries, _ := os.ReadDir(filepath.Join(dir, "pg_tblspc"))
	for _, e := range entries {
		spc, err := strconv.ParseUint(e.Name(), 10, 32)
		if err != nil {
			continue
		}
		// Resolve the link (source) or enter the in-place directory (shadow).
		root, err := filepath.EvalSymlinks(filepath.Join(dir, "pg_tblspc", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		check(root, uint32(spc), 1)
	}
	return found
}

func relFileSet(rs []RelFile) map[RelFile]struct{} {
	m := make(map[RelFile]struct{}, len(rs))
	for _, r := range rs {
		m[r] = struct{}{}
	}
	return m
}

// assertOwnedAndPrivate checks modes (0700 directories, 0600 files) and
// ownership by the shadow's OS user.
func assertOwnedAndPrivate(t *testing.T, dir string) {
	t.Helper()
	u, err := lookupOSUser("")
	if err != nil {
		t.Fatal(err)
	}
	bad := 0
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		info, err := d.Info()
		if err != nil {
			t.Fatal(err)
		}
		want := os.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		}
		st := info.Sys().(*syscall.Stat_t)
		if info.Mode().Perm() != want || int(st.Uid) != u.uid {
			if bad++; bad <= 5 {
				t.Errorf("%s: mode %v uid %d, want %v uid %d", path, info.Mode().Perm(), st.Uid, want, u.uid)
			}
		}
		return nil
	})
}

// compareCatalogs checks the shadow's pg_class, pg_attribute and pg_type rows
// of user relations equal the source's.
func compareCatalogs(t *testing.T, ctx context.Context, srcDSN string, sh *Shadow, db string) {
	t.Helper()
	srcConn := connect(t, ctx, srcDSN)
	for _, q := range catalogComparisons {
		want, err := QueryStrings(ctx, srcConn, q)
		if err != nil {
			t.Fatal(err)
		}
		got, err := sh.QueryStrings(ctx, db, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(want) == 0 {
			t.Fatalf("%s: source has no rows for %q", db, q)
		}
		if len(got) != len(want) {
			t.Errorf("%s: %q: shadow has %d rows, source %d", db, q, len(got), len(want))
			continue
		}
		diffs := 0
		for i := range want {
			if got[i][0] != want[i][0] {
				if diffs++; diffs <= 3 {
					t.Errorf("%s: %q row %d:\nsource %s\nshadow %s", db, q, i, want[i][0], got[i][0])
				}
			}
		}
		t.Logf("%s: %d rows equal for %q", db, len(want)-diffs, q)
	}
}
