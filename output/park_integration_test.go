package output_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/load"
	"github.com/walshadow/walshadow/internal/statefile"
)

// TestParkedTable: a table whose failure no reload cures (a value its
// configured column type cannot hold) is reloaded once, its load tried
// twice, then parked: no third copy of it from the source, while another
// table keeps streaming. It stays parked across a restart under the same
// configuration; the operator's reload request tries it once more (the
// same failure parks it again at once); a configuration that holds the
// value un-parks it at the next start, and it is repaired. A request
// reloads a table that follows the source as well.
func TestParkedTable(t *testing.T) {
	r := newRig(t)
	r.src.Exec(t, `CREATE TABLE pk_bad (id int PRIMARY KEY, v int);
		INSERT INTO pk_bad SELECT g, g % 100 FROM generate_series(1, 200) g;
		CREATE TABLE pk_good (id int PRIMARY KEY, v int)`)
	const narrow = `tables: { "public.pk_bad": { column_types: { v: "Nullable(Int16)" } } }`
	const wide = `tables: { "public.pk_bad": { column_types: { v: "Nullable(Int32)" } } }`
	chDir := filepath.Join(r.stateDir, "clickhouse")
	good := 0
	stream := func(run *running) { // one more pk_good row, through to ClickHouse
		t.Helper()
		good++
		r.src.Exec(t, fmt.Sprintf("INSERT INTO pk_good VALUES (%d, %d)", good, good))
		r.waitCH(t, run, liveCountSQL("public", "pk_good"), fmt.Sprint(good), ddlWait)
	}
	loadsOf := func(want int, parked bool) load.Entry {
		t.Helper()
		e := r.ledgerEntry(t, r.relOid(t, "pk_bad"))
		if e.Loads != want || (e.Parked != nil) != parked {
			t.Fatalf("pk_bad: %d loads, parked %v (%+v), want %d loads, parked %v", e.Loads, e.Parked != nil, e.Parked, want, parked)
		}
		return e
	}

	logs := &logLines{}
	run := r.startLogged(t, narrow, logs)
	r.waitLoadsDone(t, run, logs, 2, 2*time.Minute)
	loadsOf(1, false)

	// A value Int16 cannot hold: the stream fails the table at it; the
	// reload's copy meets it (load attempt 1), and again (attempt 2).
	r.src.Exec(t, `INSERT INTO pk_bad VALUES (1000, 100000)`)
	logs.waitLog(t, "public.pk_bad is parked", 2*time.Minute)
	stream(run)
	e := loadsOf(3, true)
	if e.Attempt != 2 || e.Parked.Count != 2 || !strings.Contains(e.Parked.Reason, "out of Int16's range") || !strings.Contains(e.Parked.Remedy, "column_types") {
		t.Errorf("pk_bad's parking: attempt %d, %+v", e.Attempt, e.Parked)
	}
	// No third copy: a retry would have come 4 s after the second.
	for range 5 {
		time.Sleep(2 * time.Second)
		stream(run)
	}
	loadsOf(3, true)
	if n := strings.Count(logs.String(), "public.pk_bad is parked"); n != 1 {
		t.Errorf("the parking is logged %d times, want once", n)
	}
	run.stop(t)

	// A restart under the same configuration: still parked, not copied.
	logs = &logLines{}
	run = r.startLogged(t, narrow, logs)
	logs.waitLog(t, "public.pk_bad stays parked", ddlWait)
	for range 4 {
		time.Sleep(2 * time.Second)
		stream(run)
	}
	loadsOf(3, true)

	// The operator asks for a reload, the value still too wide: one more
	// copy, which fails the same way: parked again at once.
	if _, err := load.RequestReload(statefile.OutputDir(chDir), "public.pk_bad", time.Now()); err != nil {
		t.Fatal(err)
	}
	logs.waitLog(t, "public.pk_bad is no longer parked: the operator asked for it", time.Minute)
	logs.waitLog(t, "public.pk_bad is parked", 2*time.Minute)
	for range 4 {
		time.Sleep(2 * time.Second)
		stream(run)
	}
	e = loadsOf(4, true)
	if e.Parked.Count != 3 {
		t.Errorf("parked again after %d identical failures, want 3", e.Parked.Count)
	}
	if reqs, _, _ := load.ReloadRequests(statefile.OutputDir(chDir)); len(reqs) != 0 {
		t.Errorf("the request is still there after it was acted on: %+v", reqs)
	}
	run.stop(t)

	// A type that holds the value: the next start un-parks it.
	logs = &logLines{}
	run = r.startLogged(t, wide, logs)
	logs.waitLog(t, "public.pk_bad is no longer parked: its configuration changed", ddlWait)
	logs.waitLog(t, "public.pk_bad is repaired", 2*time.Minute)
	loadsOf(5, false)
	r.src.Exec(t, `UPDATE pk_bad SET v = 100001 WHERE id = 1000`)
	r.waitCH(t, run, fmt.Sprintf("SELECT v FROM %s FINAL WHERE _is_deleted = 0 AND id = 1000", chTable("public", "pk_bad")), "100001", ddlWait)
	stream(run)

	// A table that follows the source is reloaded at the operator's
	// request too, the others going on.
	goodLoads := r.ledgerEntry(t, r.relOid(t, "pk_good")).Loads
	if _, err := load.RequestReload(statefile.OutputDir(chDir), "public.pk_good", time.Now()); err != nil {
		t.Fatal(err)
	}
	logs.waitLog(t, "public.pk_good is repaired: its reload (reloaded as the operator asked for it", time.Minute)
	stream(run)
	if n := r.ledgerEntry(t, r.relOid(t, "pk_good")).Loads; n != goodLoads+1 {
		t.Errorf("pk_good: %d loads after the requested reload, want %d", n, goodLoads+1)
	}
	run.stop(t)
	r.compareAll(t)
	r.assertNoLoadTables(t)
	l, err := load.ReadLedger(chDir)
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Reloads(); got[load.ReloadValueRefused] != 1 || got[load.ReloadRequested] != 2 {
		t.Errorf("reloads by reason: %v, want one value_refused and two requested", got)
	}
}
