package filter

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walshadow/walshadow/internal/testrig"
	"github.com/walshadow/walshadow/internal/wal"
)

// rigStep is one step of the workload: SQL run in a database (default
// postgres, the followed one) and what the filter must find in the WAL it
// wrote.
type rigStep struct {
	name string
	db   string
	sql  string
	run  func(t *testing.T, p *testrig.Postgres) // instead of sql
	// boundaries is the number of boundaries expected between the step's
	// start and end LSNs; -1: not checked.
	boundaries int
	// table, when set, must be among each boundary's AffectedOids.
	table string
	// gid: the step commits this prepared transaction; the boundary's
	// DrainXID must be its xid.
	gid string
	// optional steps may fail (e.g. a command the server refuses); they are
	// then skipped.
	optional bool

	// Filled in while running.
	from, to    wal.LSN
	oid         uint32
	preparedXID uint32
	skipped     bool
}

var ddlTarget = regexp.MustCompile(`^(?:CREATE TABLE|ALTER TABLE|DROP TABLE|TRUNCATE|VACUUM FULL)\s+(\w+)`)

// ddlScriptSteps splits testrig.DDLScript into steps: one per statement,
// one per BEGIN ... COMMIT / PREPARE TRANSACTION block, with the number of
// boundaries each must produce.
func ddlScriptSteps(t *testing.T) []*rigStep {
	var steps []*rigStep
	var block []string
	for _, line := range strings.Split(testrig.DDLScript, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "--") {
			continue
		}
		if !strings.HasSuffix(line, ";") {
			t.Fatalf("DDLScript line without a final semicolon: %q", line)
		}
		if line == "BEGIN;" || block != nil {
			block = append(block, line)
			if line == "COMMIT;" || strings.HasPrefix(line, "PREPARE TRANSACTION") {
				// Savepoint and 2PC blocks: DDL only in rolled-back parts.
				steps = append(steps, &rigStep{name: "block " + block[1], sql: strings.Join(block, "\n"), boundaries: 0})
				block = nil
			}
			continue
		}
		s := &rigStep{name: line, sql: line}
		switch first := strings.Fields(line)[0]; first {
		case "INSERT", "UPDATE", "DELETE", "COMMIT", "ROLLBACK":
			s.boundaries = 0 // DML, and the DML-only prepared transactions
		case "CREATE", "ALTER", "DROP", "TRUNCATE", "VACUUM":
			s.boundaries = 1
			if m := ddlTarget.FindStringSubmatch(line); m != nil {
				s.table = m[1]
			}
		default:
			t.Fatalf("unexpected DDLScript statement %q", line)
		}
		if strings.HasPrefix(line, "DROP TABLE IF EXISTS") {
			s.boundaries, s.table = -1, "" // nothing to drop on a fresh server
		}
		steps = append(steps, s)
	}
	if len(steps) < 30 {
		t.Fatalf("DDLScript split into only %d steps", len(steps))
	}
	return steps
}

// TestRigWorkload filters the WAL of a real server running pgbench, the DDL
// script and catalog rewrites, and checks boundaries, tracking, the NOOP
// share and the filtered WAL itself.
func TestRigWorkload(t *testing.T) {
	p := testrig.StartPostgres(t, testrig.WithMaxPreparedTransactions(4),
		testrig.WithSetting("autovacuum", "off")) // auto-analyze commits would add boundaries
	ctx := context.Background()
	dbOid := uint32(p.QueryInt(t, "SELECT oid::int8 FROM pg_database WHERE datname = 'postgres'"))

	steps := []*rigStep{
		{name: "pgbench init", boundaries: -1, run: func(t *testing.T, p *testrig.Postgres) {
			p.PGBench(t, 1, testrig.PGBenchOptions{})
		}},
		{name: "pgbench", boundaries: 0, run: func(t *testing.T, p *testrig.Postgres) {
			p.PGBench(t, 1, testrig.PGBenchOptions{NoInit: true, Clients: 2, Jobs: 2, Transactions: 400})
		}},
	}
	steps = append(steps, ddlScriptSteps(t)...)
	steps = append(steps,
		&rigStep{name: "create index", sql: "CREATE INDEX ddl_items_qty ON ddl_items (qty)", boundaries: 1, table: "ddl_items"},
		&rigStep{name: "released savepoint with DDL", sql: "BEGIN; INSERT INTO ddl_savepoints VALUES (10, 'x'); SAVEPOINT a; ALTER TABLE ddl_savepoints ADD COLUMN kept int; RELEASE SAVEPOINT a; COMMIT", boundaries: 1, table: "ddl_savepoints"},
		&rigStep{name: "prepare DDL", sql: "BEGIN; ALTER TABLE ddl_twophase ADD COLUMN c2 int; INSERT INTO ddl_twophase VALUES (10, 'x', 1); PREPARE TRANSACTION 'walshadow_ddl_2pc'", boundaries: 0},
		&rigStep{name: "commit prepared DDL", sql: "COMMIT PREPARED 'walshadow_ddl_2pc'", boundaries: 1, table: "ddl_twophase", gid: "walshadow_ddl_2pc"},
		&rigStep{name: "vacuum full pg_class", sql: "VACUUM FULL pg_class", boundaries: 1},
		&rigStep{name: "vacuum full pg_depend", sql: "VACUUM FULL pg_depend", boundaries: 1},
		&rigStep{name: "cluster pg_description", sql: "CLUSTER pg_description USING pg_description_o_c_o_index", boundaries: 1, optional: true},
		&rigStep{name: "reindex table pg_class", sql: "REINDEX TABLE pg_class", boundaries: 1},
		&rigStep{name: "reindex index pg_depend", sql: "REINDEX INDEX pg_depend_depender_index", boundaries: 1},
		&rigStep{name: "DDL after the rewrites", sql: "ALTER TABLE ddl_items ADD COLUMN after_rewrites int", boundaries: 1, table: "ddl_items"},
		&rigStep{name: "template1 vacuum full pg_depend", db: "template1", sql: "VACUUM FULL pg_depend", boundaries: 0},
		&rigStep{name: "create database", sql: "CREATE DATABASE walshadow_other", boundaries: 0},
		&rigStep{name: "DDL in another database", db: "walshadow_other", sql: "CREATE TABLE other_t (id int PRIMARY KEY, v text); INSERT INTO other_t VALUES (1, 'x')", boundaries: 0},
	)

	conn := p.Connect(t)
	regclass := func(name string) uint32 {
		if name == "" {
			return 0
		}
		var oid int64
		if err := conn.QueryRow(ctx, "SELECT coalesce(to_regclass($1)::oid::int8, 0)", name).Scan(&oid); err != nil {
			t.Fatal(err)
		}
		return uint32(oid)
	}
	var relocatedDepend, pgClassFile uint32
	for _, s := range steps {
		s.oid = regclass(s.table)
		if s.gid != "" {
			var xid int64
			if err := conn.QueryRow(ctx, "SELECT transaction::text::int8 FROM pg_prepared_xacts WHERE gid = $1", s.gid).Scan(&xid); err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
			s.preparedXID = uint32(xid)
		}
		s.from = p.CurrentInsertLSN(t)
		switch {
		case s.run != nil:
			s.run(t, p)
		case s.db == "":
			if _, err := conn.Exec(ctx, s.sql); err != nil {
				if !s.optional {
					t.Fatalf("%s: %v", s.name, err)
				}
				t.Logf("optional step %q skipped: %v", s.name, err)
				s.skipped = true
			}
		default:
			c, err := pgx.Connect(ctx, p.DSNFor(s.db))
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Exec(ctx, s.sql)
			c.Close(ctx)
			if err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
		}
		s.to = p.CurrentInsertLSN(t)
		if o := regclass(s.table); o != 0 {
			s.oid = o
		}
		switch s.name {
		case "vacuum full pg_depend":
			relocatedDepend = uint32(p.QueryInt(t, "SELECT pg_relation_filenode('pg_depend')::int8"))
		case "vacuum full pg_class":
			pgClassFile = uint32(p.QueryInt(t, "SELECT pg_relation_filenode('pg_class')::int8"))
		}
	}
	catalogFiles := rigRelationFiles(t, p, "oid < 16384", "postgres", "template1", "walshadow_other")
	userFiles := rigRelationFiles(t, p, "oid >= 16384", "postgres", "walshadow_other")

	src := filepath.Join(t.TempDir(), "wal")
	p.CopyWALSegments(t, src)
	s := loadSegments(t, src, filepath.Join(t.TempDir(), "filtered"))
	f := New(Config{DbOid: dbOid})
	var boundaries []*BoundaryInfo
	var dependTrackedAt wal.LSN
	start := time.Now()
	run := filterSegments(t, f, s, src, func(rec *wal.Record, d Decision) {
		if d.Boundary != nil {
			boundaries = append(boundaries, d.Boundary)
		}
		if dependTrackedAt == 0 && relocatedDepend != 0 && f.Tracker().IsCatalog(rfn(dbOid, relocatedDepend)) {
			dependTrackedAt = rec.LSN
		}
	})
	elapsed := time.Since(start)

	// Every boundary after the workload began belongs to a step.
	before := 0
	for _, b := range boundaries {
		if b.CommitLSN < steps[0].from {
			before++
			continue
		}
		if !slices.ContainsFunc(steps, func(st *rigStep) bool { return b.CommitLSN >= st.from && b.CommitLSN < st.to }) {
			t.Errorf("boundary outside every step: %s", describeBoundaries([]*BoundaryInfo{b}))
		}
	}
	t.Logf("%d boundaries before the workload (cluster creation)", before)
	for _, st := range steps {
		if st.skipped {
			continue
		}
		var in []*BoundaryInfo
		for _, b := range boundaries {
			if b.CommitLSN >= st.from && b.CommitLSN < st.to {
				in = append(in, b)
			}
		}
		if st.boundaries >= 0 && len(in) != st.boundaries {
			t.Errorf("step %q [%s, %s): %d boundaries, want %d: %s", st.name, st.from, st.to, len(in), st.boundaries, describeBoundaries(in))
		}
		for _, b := range in {
			// A prepared transaction touched catalogs before its PREPARE.
			if from := st.from; st.gid != "" {
				if b.FirstCatalogTouch == 0 || b.FirstCatalogTouch >= from {
					t.Errorf("step %q: first catalog touch %s, want one before the step at %s", st.name, b.FirstCatalogTouch, from)
				}
			} else if b.FirstCatalogTouch != 0 && (b.FirstCatalogTouch < from || b.FirstCatalogTouch > b.CommitLSN) {
				t.Errorf("step %q: first catalog touch %s outside [%s, %s]", st.name, b.FirstCatalogTouch, from, b.CommitLSN)
			}
			if st.table != "" && !slices.Contains(b.AffectedOids, st.oid) {
				t.Errorf("step %q: boundary oids %v lack %s (%d)", st.name, b.AffectedOids, st.table, st.oid)
			}
			if st.gid != "" && b.DrainXID != st.preparedXID {
				t.Errorf("step %q: drain xid %d, prepared xid %d", st.name, b.DrainXID, st.preparedXID)
			}
		}
		if st.name == "pgbench" {
			checkPGBenchShare(t, run, st.from, st.to)
		}
	}

	if relocatedDepend < FirstNormalObjectID || !slices.Contains(f.Tracker().Relocated(dbOid), relocatedDepend) {
		t.Errorf("pg_depend's file %d after VACUUM FULL not tracked (tracked: %v)", relocatedDepend, f.Tracker().Relocated(dbOid))
	} else {
		t.Logf("pg_depend's new file %d tracked from %s", relocatedDepend, dependTrackedAt)
	}
	// pg_class was moved again by REINDEX? No: REINDEX moves its indexes only.
	if got := f.Tracker().PgClassRelNum(dbOid); got != pgClassFile {
		t.Errorf("tracker's pg_class file %d, the server's %d", got, pgClassFile)
	}
	for _, c := range catalogFiles {
		if !f.Tracker().IsCatalog(c) {
			t.Errorf("catalog file %s not known to the tracker", c)
		}
	}
	checkNoCatalogNooped(t, f, run, catalogFiles...)
	// And the other way round: nothing written to a user relation that
	// exists at the end reached the shadow (VACUUM FULL, ALTER TABLE rewrites
	// and CREATE INDEX of user tables write XLOG_FPI, which are NOOP'd too).
	if len(userFiles) < 10 {
		t.Fatalf("only %d user relation files found", len(userFiles))
	}
	isUser := map[[2]uint32]bool{}
	for _, u := range userFiles {
		isUser[[2]uint32{u.DbOid, u.RelNum}] = true
	}
	keptUser := 0
	for _, r := range run.records {
		if r.route == RouteShadow && r.raw != nil {
			var rec wal.Record
			if err := wal.DecodeRecord(r.raw, r.lsn, pg15, &rec); err != nil {
				t.Fatal(err)
			}
			for i := range rec.Blocks {
				if isUser[[2]uint32{rec.Blocks[i].Rel.DbOid, rec.Blocks[i].Rel.RelNum}] {
					keptUser++
					if keptUser <= 5 {
						t.Errorf("record at %s (%s info 0x%02X) kept with a block on user file %s", r.lsn, rec.Header.RmID, rec.Header.Info, rec.Blocks[i].Rel)
					}
				}
			}
		}
	}

	stats := f.Stats()
	total := stats.Route(RouteNoop).Bytes + stats.Route(RouteShadow).Bytes
	t.Logf("%d records, %.1f MiB in %v (%.0f MB/s with reading and rewriting); %d NOOP'd (%.1f%% of bytes); %d boundaries (%d capture-all); %d xids open; tracked %d files (relmap %d, pg_class %d, rewrite %d); pg_class rows %d read, %d undecodable",
		len(run.records), float64(total)/(1<<20), elapsed.Round(time.Millisecond), float64(total)/elapsed.Seconds()/1e6,
		stats.Route(RouteNoop).Records, 100*float64(stats.Route(RouteNoop).Bytes)/float64(total),
		stats.Boundaries, stats.CaptureAll, f.OpenXIDs(), f.Tracker().Len(), stats.TrackedRelMap, stats.TrackedPgClass, stats.TrackedRewrite,
		stats.PgClassRows, stats.PgClassUndecodable)

	checkReparse(t, s, run)
	checkOnlyNoopBytesChanged(t, src, s, run)
	checkWaldump(t, src, s, run)
}

// rigRelationFiles returns the files of the relations with storage that
// match cond in the given databases, shared ones under database 0.
func rigRelationFiles(t *testing.T, p *testrig.Postgres, cond string, dbs ...string) []wal.RelFileNode {
	ctx := context.Background()
	var out []wal.RelFileNode
	for _, db := range dbs {
		c, err := pgx.Connect(ctx, p.DSNFor(db))
		if err != nil {
			t.Fatal(err)
		}
		rows, err := c.Query(ctx, `SELECT CASE WHEN relisshared THEN 0 ELSE (SELECT oid::int8 FROM pg_database WHERE datname = current_database()) END,
			pg_relation_filenode(oid)::int8 FROM pg_class WHERE `+cond+` AND pg_relation_filenode(oid) IS NOT NULL`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var db, rel int64
			if err := rows.Scan(&db, &rel); err != nil {
				t.Fatal(err)
			}
			out = append(out, wal.RelFileNode{DbOid: uint32(db), RelNum: uint32(rel)})
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		c.Close(ctx)
	}
	return out
}

func describeBoundaries(bs []*BoundaryInfo) string {
	var parts []string
	for _, b := range bs {
		parts = append(parts, fmt.Sprintf("{xid %d at %s oids %v all %t}", b.DrainXID, b.CommitLSN, b.AffectedOids, b.CaptureAll))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// checkPGBenchShare reports the share of NOOP'd records in a pgbench run
// and checks that only transaction-control records (commits, running
// xacts, checkpoints) were kept: every data record is user data.
func checkPGBenchShare(t *testing.T, run *filterRun, from, to wal.LSN) {
	var all, noop Counter
	kept := map[wal.RmgrID]int{}
	for _, r := range run.records {
		if r.lsn < from || r.lsn >= to {
			continue
		}
		all.add(r.totLen)
		if r.route == RouteNoop {
			noop.add(r.totLen)
		} else {
			kept[r.rmid]++
		}
	}
	t.Logf("pgbench: %d of %d records NOOP'd (%.2f%%, %.2f%% of bytes); kept by rmgr: %v",
		noop.Records, all.Records, 100*float64(noop.Records)/float64(all.Records), 100*float64(noop.Bytes)/float64(all.Bytes), kept)
	data := 0
	for rm, n := range kept {
		if rm != wal.RmgrXact && rm != wal.RmgrStandby && rm != wal.RmgrXLOG {
			data += n
		}
	}
	if data*100 > int(all.Records) || noop.Records*10 < all.Records*8 {
		t.Errorf("pgbench: %d data records kept; %d of %d NOOP'd", data, noop.Records, all.Records)
	}
}
