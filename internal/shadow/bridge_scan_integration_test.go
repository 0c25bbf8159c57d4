package shadow

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walshadow/walshadow/internal/testrig"
	"github.com/walshadow/walshadow/internal/wal"
)

// bridgeStandby is a hot standby of a rig primary, streaming from it, with
// the bridge module preloaded.
type bridgeStandby struct {
	t       *testing.T
	bindir  string
	dir     string
	dataDir string
	logPath string
}

func (s *bridgeStandby) command(name string, args ...string) *exec.Cmd {
	bin := filepath.Join(s.bindir, name)
	var cmd *exec.Cmd
	if u := serverOSUser(s.t); u != nil {
		cmd = exec.Command("runuser", append([]string{"-u", u.Username, "--", bin}, args...)...)
	} else {
		cmd = exec.Command(bin, args...)
	}
	cmd.Dir = s.dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	return cmd
}

func (s *bridgeStandby) run(name string, args ...string) {
	s.t.Helper()
	if out, err := s.command(name, args...).CombinedOutput(); err != nil {
		s.t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// startBridgeStandby clones primary with pg_basebackup -R and starts it as
// a hot standby whose bridge listens on the returned client.
func startBridgeStandby(t *testing.T, primary *testrig.Postgres) *Bridge {
	t.Helper()
	lib := buildBridgeModule(t)
	s := &bridgeStandby{t: t, bindir: primary.BinDir(), dir: serverOwnedDir(t, "walshadow-standby-")}
	s.dataDir, s.logPath = filepath.Join(s.dir, "data"), filepath.Join(s.dir, "standby.log")
	s.run("pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(primary.Port()), "-U", "postgres",
		"-D", s.dataDir, "-X", "stream", "-c", "fast", "-R")
	sock := filepath.Join(s.dir, "bridge.sock")
	preload, extra := BridgeSettings(sock, "postgres", lib)
	conf := fmt.Sprintf("\n# bridge standby\nport = %d\nlisten_addresses = ''\nunix_socket_directories = '%s'\nhot_standby = on\nshared_preload_libraries = '%s'\n",
		standbySocketPort(t), s.dir, strings.Join(preload, ","))
	for k, v := range extra {
		conf += fmt.Sprintf("%s = '%s'\n", k, v)
	}
	f, err := os.OpenFile(filepath.Join(s.dataDir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, werr := f.WriteString(conf)
	if err := errors.Join(werr, f.Close()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			if b, err := os.ReadFile(s.logPath); err == nil {
				t.Logf("standby log:\n%s", b)
			}
		}
		if _, err := os.Stat(filepath.Join(s.dataDir, "postmaster.pid")); err != nil {
			return
		}
		if out, err := s.command("pg_ctl", "-D", s.dataDir, "-m", "fast", "-w", "-t", "60", "stop").CombinedOutput(); err != nil {
			t.Errorf("stopping the standby: %v\n%s", err, out)
			s.command("pg_ctl", "-D", s.dataDir, "-m", "immediate", "-w", "-t", "60", "stop").Run()
		}
	})
	s.run("pg_ctl", "-D", s.dataDir, "-l", s.logPath, "-w", "-t", "120", "start")
	return dialBridgeWhenUp(t, sock)
}

func standbySocketPort(t *testing.T) int {
	t.Helper()
	// No TCP listener: the port only names the unix socket in the
	// standby's own directory, so any number does.
	return 20000 + os.Getpid()%20000
}

// flushAndWait waits until the standby replayed everything the primary
// inserted so far, the open transactions' records included. A transaction
// that only takes an xid commits asynchronously, which has the WAL writer
// flush everything before its commit record within wal_writer_delay; the
// flusher connection is used (and its statements cached) before any catalog
// lock is taken, since a new connection would wait on that lock.
func flushAndWait(t *testing.T, primary *testrig.Postgres, flusher *pgx.Conn, b *Bridge) wal.LSN {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var s string
	if err := flusher.QueryRow(ctx, "SELECT pg_current_xact_id()::text").Scan(&s); err != nil {
		t.Fatal(err)
	}
	if err := flusher.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&s); err != nil {
		t.Fatal(err)
	}
	target, err := wal.ParseLSN(s)
	if err != nil {
		t.Fatal(err)
	}
	// At a page start the insert position is past the page header (long
	// at a segment start), where no record ends.
	if off := uint64(target) % 8192; off == 24 {
		target -= 24
	} else if uint64(target)%primary.WALSegmentSize() == 40 {
		target -= 40
	}
	for {
		lsn, err := b.ReplayLSN(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if lsn >= target {
			return lsn
		}
		if ctx.Err() != nil {
			t.Fatalf("the standby replayed %s, want %s", lsn, target)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The primary-side projections SCAN must equal, in the server's text output.
const (
	classProjection = `SELECT oid, relnamespace, relname, relkind, relpersistence, relreplident, reltoastrelid,
		reltablespace, relfilenode FROM pg_catalog.pg_class WHERE %s`
	attributeProjection = `SELECT attrelid, attnum, attname, atttypid, atttypmod, attnotnull, attisdropped, attbyval,
		attlen, attalign, attstorage, atthasmissing, (attmissingval::text::text[])[1]
		FROM pg_catalog.pg_attribute WHERE attnum > 0 AND %s`
	indexProjection     = `SELECT indexrelid, indrelid, indisprimary, indisreplident, indkey FROM pg_catalog.pg_index WHERE %s`
	namespaceProjection = `SELECT oid, nspname FROM pg_catalog.pg_namespace`
	typeProjection      = `SELECT oid, typname, typtype, typbasetype, typelem, typlen, typbyval, typalign, typcategory FROM pg_catalog.pg_type`
)

func sortedRows(rows [][]*string) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = rowStrings([][]*string{r})
	}
	sort.Strings(out)
	return out
}

func sameRows(t *testing.T, what string, got *ScanResult, want [][]*string) {
	t.Helper()
	g, w := sortedRows(got.Rows), sortedRows(want)
	if strings.Join(g, "\n") != strings.Join(w, "\n") {
		t.Errorf("%s:\nscan:\n  %s\nprimary:\n  %s", what, strings.Join(g, "\n  "), strings.Join(w, "\n  "))
	}
}

func scanOK(t *testing.T, b *Bridge, what string, c Catalog, top uint32, oids ...uint32) *ScanResult {
	t.Helper()
	// The primary is idle as far as the test goes, but its background
	// workers (checkpointer, autovacuum, running-xacts snapshots) may still
	// write a record the standby replays mid-scan: the bridge reports that
	// (LSNStart != LSNEnd), and the scan is taken again.
	for attempt := 1; ; attempt++ {
		res, err := b.Scan(context.Background(), c, top, oids)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if res.LSNStart == res.LSNEnd {
			return res
		}
		if attempt == 5 {
			t.Errorf("%s: replay moved during each of %d scans (last %s .. %s) while the primary was idle", what, attempt, res.LSNStart, res.LSNEnd)
			return res
		}
		t.Logf("%s: replay moved during the scan (%s .. %s); scanning again", what, res.LSNStart, res.LSNEnd)
		time.Sleep(200 * time.Millisecond)
	}
}

// attNames lists a pg_attribute scan's column names in attnum order.
func attNames(res *ScanResult) string {
	rows := append([][]*string{}, res.Rows...)
	sort.Slice(rows, func(i, j int) bool {
		a, _ := strconv.Atoi(*rows[i][1])
		b, _ := strconv.Atoi(*rows[j][1])
		return a < b
	})
	var names []string
	for _, r := range rows {
		names = append(names, *r[2])
	}
	return strings.Join(names, ",")
}

// TestBridgeScanOnStandby checks SCAN on a streaming hot standby against
// the primary's catalogs: the committed view (top xid 0), an open
// transaction's view with its uncommitted DDL (a savepoint's subxact, which
// the standby cannot attribute, counted as the tree's), the inconclusive
// whole-catalog case, and a catalog lock wait bounded by lock_timeout_ms.
func TestBridgeScanOnStandby(t *testing.T) {
	primary := testrig.StartPostgres(t)
	primary.Exec(t, `CREATE TABLE s1 (a int PRIMARY KEY, b text, dropme int);
		ALTER TABLE s1 DROP COLUMN dropme;
		ALTER TABLE s1 ADD COLUMN e int DEFAULT 42;
		ALTER TABLE s1 REPLICA IDENTITY FULL;
		CREATE TABLE s2 (x timestamptz NOT NULL, y numeric(10,2)[]);
		CREATE UNIQUE INDEX s2_x ON s2 (x)`)
	b := startBridgeStandby(t, primary)
	ctx := context.Background()
	h, err := b.Hello(ctx)
	if err != nil || !h.InRecovery {
		t.Fatalf("hello from the standby: %+v, %v", h, err)
	}
	flusher := primary.Connect(t)
	flushAndWait(t, primary, flusher, b)
	committed := primary.Connect(t)
	s1 := uint32(primary.QueryInt(t, "SELECT 's1'::regclass::oid::int8"))
	s2 := uint32(primary.QueryInt(t, "SELECT 's2'::regclass::oid::int8"))
	in := fmt.Sprintf("%%s IN (%d, %d)", s1, s2)

	// The committed view equals the primary's catalogs.
	sameRows(t, "pg_class", scanOK(t, b, "pg_class", CatalogClass, 0, s2, s1, s1),
		rawRows(t, committed, fmt.Sprintf(classProjection, fmt.Sprintf(in, "oid"))))
	sameRows(t, "pg_attribute", scanOK(t, b, "pg_attribute", CatalogAttribute, 0, s1, s2),
		rawRows(t, committed, fmt.Sprintf(attributeProjection, fmt.Sprintf(in, "attrelid"))))
	sameRows(t, "pg_index", scanOK(t, b, "pg_index", CatalogIndex, 0, s1, s2),
		rawRows(t, committed, fmt.Sprintf(indexProjection, fmt.Sprintf(in, "indrelid"))))
	sameRows(t, "pg_namespace", scanOK(t, b, "pg_namespace", CatalogNamespace, 0), rawRows(t, committed, namespaceProjection))
	sameRows(t, "pg_type", scanOK(t, b, "pg_type", CatalogType, 0), rawRows(t, committed, typeProjection))
	sameRows(t, "whole pg_class", scanOK(t, b, "whole pg_class", CatalogClass, 0),
		rawRows(t, committed, fmt.Sprintf(classProjection, "true")))
	// Past 1024 oids the worker scans the catalog once instead of probing
	// the index per oid: same rows.
	many := []uint32{s1, s2}
	for o := uint32(1); len(many) < 2000; o++ {
		many = append(many, o)
	}
	sameRows(t, "pg_attribute by sequential scan", filterRows(scanOK(t, b, "2000 oids", CatalogAttribute, 0, many...), s1, s2),
		rawRows(t, committed, fmt.Sprintf(attributeProjection, fmt.Sprintf(in, "attrelid"))))
	// pg_type and pg_namespace also take object oids.
	sameRows(t, "pg_type by oid", scanOK(t, b, "pg_type by oid", CatalogType, 0, 23, 25, 1184),
		rawRows(t, committed, typeProjection+" WHERE oid IN (23, 25, 1184)"))
	sameRows(t, "pg_namespace by oid", scanOK(t, b, "pg_namespace by oid", CatalogNamespace, 0, 11, 2200),
		rawRows(t, committed, namespaceProjection+" WHERE oid IN (11, 2200)"))
	if got := attNames(scanOK(t, b, "s1 columns", CatalogAttribute, 0, s1)); got != "a,b,........pg.dropped.3........,e" {
		t.Errorf("s1 columns: %s", got)
	}
	if lsn, err := b.ReplayLSN(ctx); err != nil || scanOK(t, b, "lsn", CatalogClass, 0, s1).LSNEnd != lsn {
		t.Errorf("scan LSN differs from REPLAY_LSN %s (%v)", lsn, err)
	}

	// An open transaction with DDL, part of it in a savepoint.
	open := primary.Connect(t)
	var xidText string
	for _, sql := range []string{"BEGIN", "ALTER TABLE s1 ADD COLUMN c int", "SAVEPOINT sp",
		"ALTER TABLE s1 ADD COLUMN d text", "CREATE INDEX s1_d ON s1 (d)"} {
		if _, err := open.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	if err := open.QueryRow(ctx, "SELECT pg_current_xact_id()::xid::text").Scan(&xidText); err != nil {
		t.Fatal(err)
	}
	xid64, _ := strconv.ParseUint(xidText, 10, 32)
	xid := uint32(xid64)
	flushAndWait(t, primary, flusher, b)

	if got := attNames(scanOK(t, b, "committed view", CatalogAttribute, 0, s1)); got != "a,b,........pg.dropped.3........,e" {
		t.Errorf("the committed view shows uncommitted columns: %s", got)
	}
	mine := scanOK(t, b, "the transaction's view", CatalogAttribute, xid, s1)
	if got := attNames(mine); got != "a,b,........pg.dropped.3........,e,c,d" {
		t.Errorf("transaction %d's view: %s", xid, got)
	}
	// Inside the transaction the primary itself shows exactly that.
	sameRows(t, "pg_attribute in the transaction", mine,
		rawRows(t, open, fmt.Sprintf(attributeProjection, fmt.Sprintf("attrelid = %d", s1))))
	sameRows(t, "pg_index in the transaction", scanOK(t, b, "pg_index", CatalogIndex, xid, s1),
		rawRows(t, open, fmt.Sprintf(indexProjection, fmt.Sprintf("indrelid = %d", s1))))
	sameRows(t, "pg_index committed", scanOK(t, b, "pg_index", CatalogIndex, 0, s1),
		rawRows(t, committed, fmt.Sprintf(indexProjection, fmt.Sprintf("indrelid = %d", s1))))
	// The updated pg_class row: one version in each view, never both.
	for _, top := range []uint32{0, xid} {
		if res := scanOK(t, b, "pg_class", CatalogClass, top, s1); len(res.Rows) != 1 {
			t.Errorf("top %d: %d pg_class rows for s1", top, len(res.Rows))
		}
	}
	// A whole-catalog read for the transaction meets the savepoint's writer,
	// which the standby's pg_subtrans cannot place: inconclusive, not a guess.
	_, err = b.Scan(ctx, CatalogAttribute, xid, nil)
	var be *BridgeError
	if !errors.As(err, &be) || be.SQLState != "55000" || !strings.Contains(be.Message, "inconclusive") {
		t.Errorf("whole-catalog scan for transaction %d: %v", xid, err)
	}
	if got := attNames(filterRows(scanOK(t, b, "whole committed", CatalogAttribute, 0), s1)); got != "a,b,........pg.dropped.3........,e" {
		t.Errorf("whole-catalog committed view of s1: %s", got)
	}

	// After the commit the columns are committed.
	if _, err := open.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	flushAndWait(t, primary, flusher, b)
	for _, top := range []uint32{0, xid} {
		sameRows(t, fmt.Sprintf("pg_attribute after commit, top %d", top), scanOK(t, b, "after commit", CatalogAttribute, top, s1),
			rawRows(t, committed, fmt.Sprintf(attributeProjection, fmt.Sprintf("attrelid = %d", s1))))
	}

	// A replaying AccessExclusiveLock on a catalog bounds the scan by
	// walshadow.lock_timeout_ms (1000) instead of hanging it.
	locker := primary.Connect(t)
	for _, sql := range []string{"BEGIN", "LOCK TABLE pg_catalog.pg_index IN ACCESS EXCLUSIVE MODE"} {
		if _, err := locker.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	flushAndWait(t, primary, flusher, b)
	start := time.Now()
	_, err = b.Scan(ctx, CatalogIndex, 0, []uint32{s1})
	waited := time.Since(start)
	if !errors.As(err, &be) || be.SQLState != SQLStateLockNotAvailable {
		t.Errorf("scan under a replayed catalog lock: %v", err)
	}
	if waited < 900*time.Millisecond || waited > 20*time.Second {
		t.Errorf("the lock wait took %v, want about 1s", waited)
	}
	scanOK(t, b, "pg_class during the lock", CatalogClass, 0, s1)
	if _, err := locker.Exec(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	flushAndWait(t, primary, flusher, b)
	scanOK(t, b, "pg_index after the lock", CatalogIndex, 0, s1)
	t.Logf("lock wait ended after %v; stats %+v", waited, b.Stats())
}

// filterRows keeps the rows whose first cell is one of oids.
func filterRows(res *ScanResult, oids ...uint32) *ScanResult {
	out := &ScanResult{LSNStart: res.LSNStart, LSNEnd: res.LSNEnd, Columns: res.Columns}
	for _, r := range res.Rows {
		for _, oid := range oids {
			if r[0] != nil && *r[0] == strconv.FormatUint(uint64(oid), 10) {
				out.Rows = append(out.Rows, r)
			}
		}
	}
	return out
}
