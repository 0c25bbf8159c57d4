package output_test

import (
	"strings"
	"testing"
	"time"
)

// TestTypeChange: ALTER COLUMN TYPE replicates. A change ClickHouse
// converts exactly (int4 → int8, varchar(n) → text, numeric widening) is a
// MODIFY COLUMN; any other (a narrowing, timestamp → timestamptz) rewrites
// the table on the source, and its table is rebuilt under the new shape
// and refilled from the rewrite's inserts, without a reload; a table
// without a key, whose rewrite the WAL carries as inserts of every row,
// ends with each row once. Every table ends equal to the source, and
// nothing stops.
func TestTypeChange(t *testing.T) {
	r := newRig(t)
	r.src.Exec(t, `CREATE TABLE tc_wide (id int PRIMARY KEY, v int4, s varchar(10), n numeric(8,2));
		INSERT INTO tc_wide SELECT g, g, 's' || g, g / 4.0 FROM generate_series(1, 300) g;
		CREATE TABLE tc_narrow (id int PRIMARY KEY, v int8, ts timestamp);
		INSERT INTO tc_narrow SELECT g, g * 10, '2026-01-01'::timestamp + g * interval '1 hour' FROM generate_series(1, 300) g;
		CREATE TABLE tc_log (a int, b int4);
		ALTER TABLE tc_log REPLICA IDENTITY FULL;
		INSERT INTO tc_log SELECT g % 50, g FROM generate_series(1, 200) g`)
	logs := &logLines{}
	run := r.startLogged(t, "", logs)
	r.waitLoadsDone(t, run, logs, 3, 2*time.Minute)

	r.src.Exec(t, `ALTER TABLE tc_wide ALTER COLUMN v TYPE int8, ALTER COLUMN s TYPE text, ALTER COLUMN n TYPE numeric(12,3);
		INSERT INTO tc_wide VALUES (1000, 5000000000, repeat('long', 10), 123456789.125);
		UPDATE tc_wide SET v = v * 3000000 WHERE id <= 20`)
	r.src.Exec(t, `ALTER TABLE tc_narrow ALTER COLUMN v TYPE int4, ALTER COLUMN ts TYPE timestamptz;
		INSERT INTO tc_narrow VALUES (1000, 7, now());
		DELETE FROM tc_narrow WHERE id <= 5`)
	r.src.Exec(t, `ALTER TABLE tc_log ALTER COLUMN b TYPE int8;
		INSERT INTO tc_log VALUES (1, 6000000000); DELETE FROM tc_log WHERE b <= 10`)
	logs.waitLog(t, "public.tc_narrow was rewritten at", 2*time.Minute)
	logs.waitLog(t, "public.tc_log was rewritten at", 2*time.Minute)
	r.src.Exec(t, "CREATE TABLE tc_marker (id int PRIMARY KEY); INSERT INTO tc_marker VALUES (1)")
	r.waitCH(t, run, liveCountSQL("public", "tc_marker"), "1", ddlWait)
	r.waitLoadsDone(t, run, logs, 3, 2*time.Minute)
	run.stop(t)

	r.compareAll(t)
	r.assertNoLoadTables(t)
	for col, want := range map[string]string{"v": "Nullable(Int64)", "s": "Nullable(String)", "n": "Nullable(Decimal(12, 3))"} {
		if got := r.ch.HTTPQuery(t, "SELECT type FROM system.columns WHERE database = 'walshadow_test' AND table = 'public.tc_wide' AND name = '"+col+"'"); got != want {
			t.Errorf("tc_wide.%s is %s on ClickHouse, want %s", col, got, want)
		}
	}
	if strings.Contains(logs.String(), "tc_wide is repaired") || strings.Contains(logs.String(), "tc_wide changed at") {
		t.Errorf("an exact type change reloaded tc_wide")
	}
	for _, table := range []string{"tc_narrow", "tc_log"} {
		if strings.Contains(logs.String(), "public."+table+" is repaired") {
			t.Errorf("%s was reloaded; its rewrite should have refilled it", table)
		}
	}
	for _, stop := range []string{"restarting the walshadow session", "was not delivered", "column type changes are not replicated"} {
		if strings.Contains(logs.String(), stop) {
			t.Errorf("%q in the log: a type change must not stop the output", stop)
		}
	}
}

// TestCompositeTypeChange: ALTER TYPE ... DROP/ADD ATTRIBUTE changes how
// the rows already holding the type read on the source, with no WAL for
// them: the table using it is reloaded and ends equal (the regression
// suite's test_tbl3).
func TestCompositeTypeChange(t *testing.T) {
	r := newRig(t)
	r.src.Exec(t, `CREATE TYPE ct_pair AS (a int, b text);
		CREATE TABLE ct_uses (id int PRIMARY KEY, p ct_pair);
		INSERT INTO ct_uses VALUES (1, '(1,x)')`)
	logs := &logLines{}
	run := r.startLogged(t, "", logs)
	r.waitLoadsDone(t, run, logs, 1, 2*time.Minute)
	r.src.Exec(t, `INSERT INTO ct_uses VALUES (2, '(2,y)')`)
	r.waitCH(t, run, liveCountSQL("public", "ct_uses"), "2", ddlWait)

	r.src.Exec(t, `ALTER TYPE ct_pair DROP ATTRIBUTE a, ADD ATTRIBUTE c int`)
	logs.waitLog(t, "public.ct_uses is repaired", 2*time.Minute)
	r.src.Exec(t, "CREATE TABLE ct_marker (id int PRIMARY KEY); INSERT INTO ct_marker VALUES (1)")
	r.waitCH(t, run, liveCountSQL("public", "ct_marker"), "1", ddlWait)
	r.waitLoadsDone(t, run, logs, 1, 2*time.Minute)
	run.stop(t)
	r.compareAll(t)
	if !strings.Contains(logs.String(), "composite type's attributes changed") {
		t.Error("the reload does not say the composite type changed")
	}
}
