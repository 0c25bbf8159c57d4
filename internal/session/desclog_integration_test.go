package session

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/shadow"
	"github.com/walshadow/walshadow/internal/testrig"
	"github.com/walshadow/walshadow/internal/wal"
)

// ddlSteps are issue 4's DDL script, one transaction each. After every step
// the test records the source's catalog and its WAL position; the
// descriptor log must then answer, at each recorded position, exactly the
// shape the source had.
var ddlSteps = []string{
	`CREATE TABLE dl_t (id int PRIMARY KEY, a text); INSERT INTO dl_t SELECT g, 'a' || g FROM generate_series(1, 100) g`,
	`ALTER TABLE dl_t ADD COLUMN b int`,
	`ALTER TABLE dl_t ADD COLUMN c text DEFAULT 'dflt'`,
	`ALTER TABLE dl_t DROP COLUMN a`,
	`ALTER TABLE dl_t RENAME COLUMN b TO bb`,
	`ALTER TABLE dl_t RENAME TO dl_renamed`,
	`ALTER TABLE dl_renamed ALTER COLUMN bb TYPE bigint`,
	`TRUNCATE dl_renamed`,
	`INSERT INTO dl_renamed (id, bb) VALUES (1, 1)`,
	`VACUUM FULL dl_renamed`,
	`BEGIN; CREATE TABLE dl_born (id int PRIMARY KEY, v text); INSERT INTO dl_born VALUES (1, 'x'); COMMIT`,
	`ALTER TABLE dl_born ADD COLUMN w numeric(12,3) DEFAULT 1.5`,
	`DROP TABLE dl_born`,
}

func TestDescLogFollowsDDL(t *testing.T) {
	src := testrig.StartPostgres(t, testrig.WithMaxPreparedTransactions(5))
	src.Exec(t, "CREATE TABLE dl_before (id int PRIMARY KEY, v text)")
	dir := stateDir(t)
	s := New(sessionConfig(t, src, dir), nil, nil)
	s.SelfRelease = false
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	c := consume(t, s)

	conn := src.Connect(t)
	defer conn.Close(context.Background())
	type point struct {
		lsn    wal.LSN
		shapes map[uint32]*desclog.Descriptor // by oid; nil = absent
	}
	tracked := map[uint32]bool{}
	var points []point
	record := func() {
		for _, name := range []string{"dl_t", "dl_renamed", "dl_born", "dl_before"} {
			var oid uint32
			if conn.QueryRow(ctx, "SELECT oid FROM pg_class WHERE relname = $1", name).Scan(&oid) == nil {
				tracked[oid] = true
			}
		}
		var oids []uint32
		for o := range tracked {
			oids = append(oids, o)
		}
		descs, err := shadow.ReadDescriptors(ctx, conn, oids)
		if err != nil {
			t.Fatal(err)
		}
		pt := point{lsn: src.CurrentLSN(t), shapes: map[uint32]*desclog.Descriptor{}}
		for o := range tracked {
			pt.shapes[o] = nil
		}
		for i := range descs {
			pt.shapes[descs[i].Oid] = &descs[i]
		}
		points = append(points, pt)
	}
	record()
	for _, step := range ddlSteps {
		src.RunSQLScript(t, step)
		record()
	}
	// A row change after the last boundary: once the shadow has replayed it,
	// the hold at that boundary (and so its capture) is over.
	src.Exec(t, "INSERT INTO dl_before VALUES (1, 'after the last boundary')")
	waitCaughtUp(t, s, src, 2*time.Minute)
	c.mu.Lock()
	errs := c.errs
	c.mu.Unlock()
	if len(errs) > 0 {
		t.Fatalf("consumer: %v", errs)
	}

	log := s.DescLog()
	db := s.parts.boot.FollowedDBOID
	checked := 0
	for i, pt := range points {
		for oid, want := range pt.shapes {
			got := log.DescriptorByOidInDBAt(db, oid, pt.lsn)
			what := fmt.Sprintf("step %d (after %q) at %s, oid %d", i, stepName(i), pt.lsn, oid)
			switch {
			case want == nil:
				if got.Result == desclog.Present {
					t.Errorf("%s: the log has %s.%s, the source had no such relation", what, got.Desc.Namespace, got.Desc.Name)
				}
			case got.Result != desclog.Present:
				t.Errorf("%s: lookup %v, want the source's shape %s", what, got.Result, want.Name)
			case !got.Desc.Equal(want):
				t.Errorf("%s: log shape differs from the source's:\n log    %+v\n source %+v", what, *got.Desc, *want)
			default:
				// The rfn key agrees with the oid key.
				if r := log.DescriptorAt(want.Rfn, pt.lsn); r.Result != desclog.Present || r.Desc.Oid != oid {
					t.Errorf("%s: DescriptorAt(%s) = %v", what, want.Rfn, r.Result)
				}
				checked++
			}
		}
	}
	if checked < len(ddlSteps) {
		t.Fatalf("only %d shapes checked", checked)
	}
	t.Logf("%d lookups equal the source's catalog at %d points", checked, len(points))
}

func stepName(i int) string {
	if i == 0 {
		return "start"
	}
	return ddlSteps[i-1]
}
