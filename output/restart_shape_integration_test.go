package output_test

import (
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/session"
)

// TestStartAgreesOnWrittenShape: a restart agrees on each table it
// already writes at the shape its ClickHouse table holds rows of, not at
// the newest one captured. The crash drill found it: ADD COLUMN ... DEFAULT
// and a rewrite (VACUUM FULL clears the missing value: the rows now carry
// it) were captured, but the output stopped before writing the ADD. Agreed
// at the newest shape, the column was added without its DEFAULT and every
// row written before it read NULL on ClickHouse; the replayed ADD was then
// older than the agreement and changed nothing.
func TestStartAgreesOnWrittenShape(t *testing.T) {
	r := newRig(t)
	run := r.start(t, "")
	r.src.Exec(t, `CREATE TABLE sd (id int PRIMARY KEY, v text); INSERT INTO sd VALUES (1, 'a'), (2, 'b'), (3, 'c')`)
	r.waitCH(t, run, liveCountSQL("public", "sd"), "3", ddlWait)

	// ClickHouse away: the session goes on (the shadow applies and the
	// session captures), the output writes nothing.
	r.ch.StopServer(t)
	r.src.Exec(t, `ALTER TABLE sd ADD COLUMN d text DEFAULT 'dflt'`)
	r.src.Exec(t, `VACUUM FULL sd`)
	r.src.Exec(t, `INSERT INTO sd VALUES (4, 'd', 'own')`)
	target := r.src.CurrentLSN(t)
	deadline := time.Now().Add(time.Minute)
	for {
		m, err := session.ReadManifest(r.stateDir)
		if err == nil && m != nil && m.ShadowReplay >= target {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the shadow did not replay past %s while ClickHouse was down (manifest %+v, %v)", target, m, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(time.Second) // the boundary's capture follows the shadow's apply
	run.stop(t)
	r.ch.StartServer(t)

	run = r.start(t, "")
	r.waitCH(t, run, liveCountSQL("public", "sd"), "4", ddlWait)
	r.waitCH(t, run, "SELECT count() FROM "+chTable("public", "sd")+" FINAL WHERE _is_deleted = 0 AND d = 'dflt'", "3", ddlWait)
	run.stop(t)
	r.compareAll(t)
}
