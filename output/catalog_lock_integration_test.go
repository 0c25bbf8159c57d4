package output_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestCatalogLockedAtBoundary: a transaction holds an ACCESS EXCLUSIVE
// lock on a system catalog (as VACUUM FULL of it does while it runs) when
// another transaction commits DDL. The shadow, standing at that boundary
// with the locking transaction still open, must still be read there: a
// replayed lock would be held until that transaction ends, which replay
// held at the boundary never reaches (the capture waited until the hold
// timed out, and every restart met the lock again).
func TestCatalogLockedAtBoundary(t *testing.T) {
	r := newRig(t)
	logs := &logLines{}
	run := r.startLogged(t, "", logs)
	ctx := context.Background()
	// The DDL's connection has pg_type's entries it needs in its caches:
	// on the source it does not wait for the lock.
	ddl := r.src.Connect(t)
	if _, err := ddl.Exec(ctx, "CREATE TABLE cl (id int PRIMARY KEY, v text); ALTER TABLE cl ADD COLUMN w0 int; INSERT INTO cl VALUES (1, 'a', 0)"); err != nil {
		t.Fatal(err)
	}
	r.waitCH(t, run, liveCountSQL("public", "cl"), "1", ddlWait)
	locker := r.src.Connect(t)
	if _, err := locker.Exec(ctx, "BEGIN; LOCK TABLE pg_catalog.pg_type IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	if _, err := ddl.Exec(ctx, "ALTER TABLE cl ADD COLUMN w1 int; INSERT INTO cl VALUES (2, 'b', 0, 1)"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // the shadow reaches the boundary while the lock is held
	if _, err := locker.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if _, err := ddl.Exec(ctx, "INSERT INTO cl VALUES (3, 'c', 0, 2)"); err != nil {
		t.Fatal(err)
	}
	// Within the 30 s hold timeout: the capture did not wait for the lock.
	r.waitCH(t, run, fmt.Sprintf("SELECT sum(w1) FROM %s FINAL WHERE _is_deleted = 0", chTable("public", "cl")), "3", 25*time.Second)
	run.stop(t)
	r.compareAll(t)
	if strings.Contains(logs.String(), "hold timed out") {
		t.Errorf("a catalog boundary hold timed out:\n%s", tail(logs.String(), 4000))
	}
}
