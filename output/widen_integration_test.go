package output_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestUnrepresentableValueWidens: numeric NaN has no Decimal form. A
// table whose numeric(p,s) column gets one, by the stream or in its
// initial load, fails, and its reload maps that column to String (the
// source's text), after which it equals the source; its other columns
// keep their mapping, and the other table never stops.
func TestUnrepresentableValueWidens(t *testing.T) {
	r := newRig(t)
	r.src.Exec(t, `CREATE TABLE wd_load (id int PRIMARY KEY, amount numeric(10,2), other numeric(10,2));
		INSERT INTO wd_load SELECT g, g / 4.0, g FROM generate_series(1, 200) g;
		INSERT INTO wd_load VALUES (201, 'NaN', 1)`)
	logs := &logLines{}
	run := r.startLogged(t, "", logs)
	r.src.Exec(t, `CREATE TABLE wd_stream (id int PRIMARY KEY, amount numeric(10,2) NOT NULL, other numeric(10,2));
		INSERT INTO wd_stream SELECT g, g / 4.0, g FROM generate_series(1, 200) g;
		CREATE TABLE wd_good (id int PRIMARY KEY, amount numeric(10,2))`)
	r.waitCH(t, run, liveCountSQL("public", "wd_stream"), "200", ddlWait)
	r.src.Exec(t, `INSERT INTO wd_stream VALUES (201, 'NaN', 1); UPDATE wd_stream SET other = other + 1 WHERE id <= 10;
		INSERT INTO wd_good VALUES (1, 1.5)`)
	for i := 2; i <= 10; i++ {
		r.src.Exec(t, fmt.Sprintf("INSERT INTO wd_good VALUES (%d, %d.25)", i, i))
	}
	r.waitCH(t, run, liveCountSQL("public", "wd_good"), "10", ddlWait)
	logs.waitLog(t, "public.wd_stream is repaired", 2*time.Minute)
	logs.waitLog(t, "initial load of public.wd_load published", 2*time.Minute)
	r.src.Exec(t, `UPDATE wd_stream SET amount = 'NaN' WHERE id = 2; UPDATE wd_load SET amount = 'NaN' WHERE id = 3`)
	r.waitCH(t, run, fmt.Sprintf("SELECT amount FROM %s FINAL WHERE _is_deleted = 0 AND id = 2", chTable("public", "wd_stream")), "NaN", ddlWait)
	r.waitCH(t, run, fmt.Sprintf("SELECT amount FROM %s FINAL WHERE _is_deleted = 0 AND id = 3", chTable("public", "wd_load")), "NaN", ddlWait)
	r.waitLoadsDone(t, run, logs, 0, 2*time.Minute)
	run.stop(t)
	r.compareAll(t)

	for table, want := range map[string]string{"wd_stream": "String", "wd_load": "Nullable(String)"} {
		got := r.ch.HTTPQuery(t, fmt.Sprintf("SELECT type FROM system.columns WHERE database = 'walshadow_test' AND table = 'public.%s' AND name = 'amount'", table))
		if got != want {
			t.Errorf("%s.amount is %s on ClickHouse, want %s", table, got, want)
		}
		if got := r.ch.HTTPQuery(t, fmt.Sprintf("SELECT type FROM system.columns WHERE database = 'walshadow_test' AND table = 'public.%s' AND name = 'other'", table)); got != "Nullable(Decimal(10, 2))" {
			t.Errorf("%s.other is %s on ClickHouse, want it mapped as before (Nullable(Decimal(10, 2)))", table, got)
		}
	}
	n := 0
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "level=ERROR") && strings.Contains(line, "its reload maps column") {
			n++
		}
	}
	if n != 2 {
		t.Errorf("the widening is logged %d times, want once per table:\n%s", n, tail(logs.String(), 4000))
	}
}
