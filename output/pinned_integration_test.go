package output_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/clickhouse"
)

// These tests prove the pinned baseline's promises against a real
// pipeline and ClickHouse 18.16: the DDL a source change causes does not
// depend on whether the output learnt the table's shape in this run or
// reloaded it from disk, renames never lose data, drops and truncates
// follow, and tables or columns dropped on ClickHouse are healed.

// testDatabase is the rig's target database (helpers_test.go's yaml).
const testDatabase = "walshadow_test"

// ddlWait bounds waiting for one change to reach ClickHouse.
const ddlWait = 90 * time.Second

// chTableName is the unqualified ClickHouse name of schema.table's table.
func chTableName(schema, table string) string {
	return clickhouse.DefaultTarget(testDatabase, schema, table).Table
}

// chColumns lists the ClickHouse table's columns as "name type", in the
// table's column order (system.columns lists them so).
func (r *rig) chColumns(t *testing.T, schema, table string) []string {
	t.Helper()
	out := r.ch.HTTPQuery(t, fmt.Sprintf("SELECT name, type FROM system.columns WHERE database = %s AND table = %s FORMAT TSV",
		clickhouse.QuoteString(testDatabase), clickhouse.QuoteString(chTableName(schema, table))))
	var cols []string
	for _, line := range strings.Split(out, "\n") {
		if line != "" {
			cols = append(cols, strings.Replace(line, "\t", " ", 1))
		}
	}
	return cols
}

// chColumnCountSQL counts the ClickHouse columns of schema.table named name.
func chColumnCountSQL(schema, table, name string) string {
	return fmt.Sprintf("SELECT count() FROM system.columns WHERE database = %s AND table = %s AND name = %s",
		clickhouse.QuoteString(testDatabase), clickhouse.QuoteString(chTableName(schema, table)), clickhouse.QuoteString(name))
}

// chTableCountSQL is 1 while schema.table's ClickHouse table exists, else 0.
func chTableCountSQL(schema, table string) string {
	return fmt.Sprintf("SELECT count() FROM system.tables WHERE database = %s AND name = %s",
		clickhouse.QuoteString(testDatabase), clickhouse.QuoteString(chTableName(schema, table)))
}

// liveCountSQL counts schema.table's rows as the source has them.
func liveCountSQL(schema, table string) string {
	return fmt.Sprintf("SELECT count() FROM %s FINAL WHERE _is_deleted = 0", chTable(schema, table))
}

// chRows is the ClickHouse table's live rows, columns cols, ordered by id,
// as TSV (NULL is \N).
func (r *rig) chRows(t *testing.T, schema, table string, cols ...string) string {
	t.Helper()
	quoted := make([]string, len(cols))
	for i, c := range cols {
		quoted[i] = clickhouse.QuoteIdent(c)
	}
	return r.ch.HTTPQuery(t, fmt.Sprintf("SELECT %s FROM %s FINAL WHERE _is_deleted = 0 ORDER BY id FORMAT TSV",
		strings.Join(quoted, ", "), chTable(schema, table)))
}

// pgRows is the source table's rows, one SQL expression per column,
// ordered by id, rendered as chRows renders them.
func (r *rig) pgRows(t *testing.T, table string, exprs ...string) string {
	t.Helper()
	fields := make([]string, len(exprs))
	for i, e := range exprs {
		fields[i] = fmt.Sprintf(`coalesce((%s)::text, '\N')`, e)
	}
	return r.src.QueryString(t, fmt.Sprintf(`SELECT coalesce(string_agg(concat_ws(E'\t', %s), E'\n' ORDER BY id), '') FROM %s`,
		strings.Join(fields, ", "), table))
}

// syntheticColumns1816 are the columns walshadow adds on ClickHouse 18.16,
// as chColumns lists them.
func syntheticColumns1816() []string {
	var cols []string
	for _, s := range clickhouse.SyntheticColumns(clickhouse.Legacy1816) {
		cols = append(cols, s.Name+" "+s.TypeSQL())
	}
	return cols
}

// agreedOf reads oid's agreement from the output's store (the stream
// must be stopped).
func (r *rig) agreedOf(t *testing.T, oid uint32) *clickhouse.Agreed {
	t.Helper()
	store, err := clickhouse.ReadStore(filepath.Join(r.stateDir, "clickhouse"))
	if err != nil {
		t.Fatal(err)
	}
	return store.Get(oid)
}

func (r *rig) relOid(t *testing.T, table string) uint32 {
	t.Helper()
	return uint32(r.src.QueryInt(t, "SELECT $1::regclass::oid::bigint", table))
}

// TestPinnedWarmVsColdInvariance: the same ALTER on three tables with the
// same pinned subset, one while the output's agreement is the one it made
// in this run (warm), one right after a restart reloaded it from disk
// (cold), and one while the stream was stopped (downtime drift), gives the
// same ClickHouse table: the added column arrives, the column the operator
// left out never does.
func TestPinnedWarmVsColdInvariance(t *testing.T) {
	r := newRig(t)
	pinned := []string{"pin_warm", "pin_cold", "pin_down"}
	// The tables exist before the output first starts: their first
	// agreement is the start-up reconciliation's. Walshadow streams
	// changes only, so the rows come after the start.
	for _, tbl := range pinned {
		r.src.Exec(t, fmt.Sprintf(`CREATE TABLE %s (id int PRIMARY KEY, name text, email text, internal_notes text)`, tbl))
	}
	outputYAML := `
tables:
  public.pin_warm:
    columns: [ id, name, email ]
  public.pin_cold:
    columns: [ id, name, email ]
  public.pin_down:
    columns: [ id, name, email ]
`
	// The same ALTER and the same later changes for every table.
	alterAndWrite := func(tbl string) {
		r.src.Exec(t, fmt.Sprintf(`ALTER TABLE %[1]s ADD COLUMN signup_ts timestamptz;
			INSERT INTO %[1]s VALUES (4, 'dee', 'dee@example.com', 'secret 4', '2024-02-29 12:34:56.789012+00'), (5, 'eve', NULL, NULL, NULL);
			UPDATE %[1]s SET signup_ts = '1999-12-31 23:59:59.5+00', internal_notes = 'changed' WHERE id = 1`, tbl))
	}
	run := r.start(t, outputYAML)
	for _, tbl := range pinned {
		r.src.Exec(t, fmt.Sprintf(`INSERT INTO %s VALUES (1, 'ann', 'ann@example.com', 'secret 1'), (2, 'bob', NULL, 'secret 2'), (3, 'cy', 'cy@example.com', NULL)`, tbl))
		r.waitCH(t, run, liveCountSQL("public", tbl), "3", ddlWait)
	}

	alterAndWrite("pin_warm")
	r.waitCH(t, run, liveCountSQL("public", "pin_warm"), "5", ddlWait)
	r.waitCH(t, run, fmt.Sprintf("SELECT count() FROM %s FINAL WHERE _is_deleted = 0 AND signup_ts IS NOT NULL", chTable("public", "pin_warm")), "2", ddlWait)

	// Downtime: pin_down's ALTER happens while the stream is stopped.
	// Cold: the output's state is rebuilt from disk before pin_cold's ALTER.
	run.stop(t)
	alterAndWrite("pin_down")
	run = r.start(t, outputYAML)
	alterAndWrite("pin_cold")
	for _, tbl := range []string{"pin_down", "pin_cold"} {
		r.waitCH(t, run, liveCountSQL("public", tbl), "5", ddlWait)
		r.waitCH(t, run, fmt.Sprintf("SELECT count() FROM %s FINAL WHERE _is_deleted = 0 AND signup_ts IS NOT NULL", chTable("public", tbl)), "2", ddlWait)
	}
	run.stop(t)

	// 18.16 appends an added column after the synthetic ones.
	want := append([]string{"id Int32", "name Nullable(String)", "email Nullable(String)"}, syntheticColumns1816()...)
	want = append(want, "signup_ts Nullable(Int64)")
	warmCols := r.chColumns(t, "public", "pin_warm")
	if !slices.Equal(warmCols, want) {
		t.Errorf("warm table columns:\n got %q\nwant %q", warmCols, want)
	}
	for _, tbl := range []string{"pin_cold", "pin_down"} {
		if cols := r.chColumns(t, "public", tbl); !slices.Equal(cols, warmCols) {
			t.Errorf("%s columns differ from the warm table's:\n%s %q\nwarm %q", tbl, tbl, cols, warmCols)
		}
	}

	// timestamptz is Int64 microseconds since the epoch on 18.16.
	pgExprs := []string{"id", "name", "email", "(extract(epoch FROM signup_ts) * 1000000)::bigint"}
	for _, tbl := range pinned {
		got := r.chRows(t, "public", tbl, "id", "name", "email", "signup_ts")
		if wantRows := r.pgRows(t, tbl, pgExprs...); got != wantRows {
			t.Errorf("%s on ClickHouse:\n%s\nwant (from the source):\n%s", tbl, got, wantRows)
		}
	}
	warmRows := r.chRows(t, "public", "pin_warm", "id", "name", "email", "signup_ts")
	for _, tbl := range []string{"pin_cold", "pin_down"} {
		if rows := r.chRows(t, "public", tbl, "id", "name", "email", "signup_ts"); rows != warmRows {
			t.Errorf("pin_warm and %s hold different rows:\npin_warm:\n%s\n%s:\n%s", tbl, warmRows, tbl, rows)
		}
	}

	// The agreements record the full source shape (internal_notes too),
	// so a later diff still knows it was excluded, not added.
	for _, tbl := range pinned {
		a := r.agreedOf(t, r.relOid(t, tbl))
		if a == nil {
			t.Fatalf("%s has no stored agreement", tbl)
		}
		var shape, mapped []string
		for _, c := range a.Shape {
			shape = append(shape, c.Name)
		}
		for _, m := range a.Columns {
			mapped = append(mapped, m.Source)
		}
		if wantShape := []string{"id", "name", "email", "internal_notes", "signup_ts"}; !slices.Equal(shape, wantShape) {
			t.Errorf("%s agreed shape %q, want %q", tbl, shape, wantShape)
		}
		if wantMapped := []string{"id", "name", "email", "signup_ts"}; !slices.Equal(mapped, wantMapped) {
			t.Errorf("%s mapped columns %q, want %q", tbl, mapped, wantMapped)
		}
	}
}

// TestRestartKeepsAddedColumn: a column added (and written) in one run
// is still there with its values after a restart; the start-up
// reconciliation never moves an agreement back to an older shape.
func TestRestartKeepsAddedColumn(t *testing.T) {
	r := newRig(t)
	// Existing before the first start: the descriptor log's seed has the
	// table without the column.
	r.src.Exec(t, `CREATE TABLE kept (id int PRIMARY KEY, v text)`)
	run := r.start(t, "")
	r.src.Exec(t, `INSERT INTO kept VALUES (1, 'a'); ALTER TABLE kept ADD COLUMN extra int; INSERT INTO kept VALUES (2, 'b', 20)`)
	r.waitCH(t, run, fmt.Sprintf("SELECT extra FROM %s FINAL WHERE _is_deleted = 0 AND id = 2", chTable("public", "kept")), "20", ddlWait)
	run.stop(t)

	run = r.start(t, "")
	r.src.Exec(t, `INSERT INTO kept VALUES (3, 'c', 30)`)
	r.waitCH(t, run, liveCountSQL("public", "kept"), "3", ddlWait)
	if got := r.ch.HTTPQuery(t, chColumnCountSQL("public", "kept", "extra")); got != "1" {
		t.Fatalf("column extra is gone from ClickHouse after the restart (system.columns count %s)", got)
	}
	r.waitCH(t, run, fmt.Sprintf("SELECT id, v, extra FROM %s FINAL WHERE _is_deleted = 0 ORDER BY id FORMAT TSV", chTable("public", "kept")),
		"1\ta\t\\N\n2\tb\t20\n3\tc\t30", ddlWait)
	run.stop(t)
	r.compareAll(t)
}

// TestRenameColumnKeepsData: a source RENAME COLUMN on ClickHouse 18.16
// (no RENAME COLUMN there) keeps the ClickHouse column under its old name
// with every value written before the rename, and later rows write into
// it; never a DROP+ADD, and a restart changes nothing.
func TestRenameColumnKeepsData(t *testing.T) {
	r := newRig(t)
	run := r.start(t, "")
	r.src.Exec(t, `CREATE TABLE ren (id int PRIMARY KEY, label text, qty int);
		INSERT INTO ren VALUES (1, 'one', 10), (2, 'two', 20), (3, 'three', NULL)`)
	r.waitCH(t, run, liveCountSQL("public", "ren"), "3", ddlWait)
	before := r.chColumns(t, "public", "ren")

	r.src.Exec(t, `ALTER TABLE ren RENAME COLUMN qty TO quantity;
		INSERT INTO ren VALUES (4, 'four', 40);
		UPDATE ren SET quantity = 21 WHERE id = 2`)
	r.waitCH(t, run, fmt.Sprintf("SELECT qty FROM %s FINAL WHERE _is_deleted = 0 AND id = 4", chTable("public", "ren")), "40", ddlWait)
	r.waitCH(t, run, fmt.Sprintf("SELECT qty FROM %s FINAL WHERE _is_deleted = 0 AND id = 2", chTable("public", "ren")), "21", ddlWait)

	check := func(when string) {
		t.Helper()
		if got := r.chColumns(t, "public", "ren"); !slices.Equal(got, before) {
			t.Errorf("%s: ClickHouse columns %q, want them unchanged %q", when, got, before)
		}
		if n := r.ch.HTTPQuery(t, chColumnCountSQL("public", "ren", "quantity")); n != "0" {
			t.Errorf("%s: ClickHouse has a column named quantity (%s), want the old name qty only", when, n)
		}
		// Row 1 and 3 were written before the rename and never touched
		// again: a DROP+ADD would have lost 10.
		got := r.chRows(t, "public", "ren", "id", "label", "qty")
		if want := r.pgRows(t, "ren", "id", "label", "quantity"); got != want {
			t.Errorf("%s: ClickHouse rows\n%s\nwant (from the source)\n%s", when, got, want)
		}
	}
	check("after the rename")

	run.stop(t)
	run = r.start(t, "")
	r.src.Exec(t, `INSERT INTO ren VALUES (5, 'five', 50)`)
	r.waitCH(t, run, fmt.Sprintf("SELECT qty FROM %s FINAL WHERE _is_deleted = 0 AND id = 5", chTable("public", "ren")), "50", ddlWait)
	check("after a restart")
	run.stop(t)
	r.compareAll(t)
}

// TestDropColumn: a source DROP COLUMN drops the ClickHouse column; rows
// after it insert fine.
func TestDropColumn(t *testing.T) {
	r := newRig(t)
	run := r.start(t, "")
	r.src.Exec(t, `CREATE TABLE dropc (id int PRIMARY KEY, keep text, gone int, tail text);
		INSERT INTO dropc VALUES (1, 'a', 1, 'x'), (2, 'b', 2, 'y')`)
	r.waitCH(t, run, liveCountSQL("public", "dropc"), "2", ddlWait)
	r.waitCH(t, run, chColumnCountSQL("public", "dropc", "gone"), "1", ddlWait)

	r.src.Exec(t, `ALTER TABLE dropc DROP COLUMN gone;
		INSERT INTO dropc VALUES (3, 'c', 'z');
		UPDATE dropc SET tail = 'y2' WHERE id = 2`)
	r.waitCH(t, run, chColumnCountSQL("public", "dropc", "gone"), "0", ddlWait)
	r.waitCH(t, run, liveCountSQL("public", "dropc"), "3", ddlWait)
	r.waitCH(t, run, fmt.Sprintf("SELECT tail FROM %s FINAL WHERE _is_deleted = 0 AND id = 2", chTable("public", "dropc")), "y2", ddlWait)
	run.stop(t)

	want := append([]string{"id Int32", "keep Nullable(String)", "tail Nullable(String)"}, syntheticColumns1816()...)
	if got := r.chColumns(t, "public", "dropc"); !slices.Equal(got, want) {
		t.Errorf("ClickHouse columns after DROP COLUMN:\n got %q\nwant %q", got, want)
	}
	r.compareAll(t)
}

// TestDropColumnThenImmediateRestart: the stream stops right after a
// DROP COLUMN reached ClickHouse, before the session's position may have
// moved past the rows written before the drop; rows the restart redelivers
// still carry the dropped column and must be written without it.
func TestDropColumnThenImmediateRestart(t *testing.T) {
	r := newRig(t)
	run := r.start(t, "")
	r.src.Exec(t, `CREATE TABLE dropr (id int PRIMARY KEY, keep text, gone int)`)
	r.src.Exec(t, `INSERT INTO dropr VALUES (1, 'a', 1), (2, 'b', 2)`)
	r.waitCH(t, run, liveCountSQL("public", "dropr"), "2", ddlWait)
	r.src.Exec(t, `ALTER TABLE dropr DROP COLUMN gone`)
	// The table exists with the column now: a count of 0 is the drop.
	r.waitCH(t, run, chColumnCountSQL("public", "dropr", "gone"), "0", ddlWait)
	run.stop(t)

	run = r.start(t, "")
	r.src.Exec(t, `INSERT INTO dropr VALUES (3, 'c')`)
	r.waitCH(t, run, fmt.Sprintf("SELECT id, keep FROM %s FINAL WHERE _is_deleted = 0 ORDER BY id FORMAT TSV", chTable("public", "dropr")),
		"1\ta\n2\tb\n3\tc", ddlWait)
	run.stop(t)
	r.compareAll(t)
}

// TestAgreementRecordsItsVersion: a stored agreement names the descriptor
// version it agreed on (Agreed.ValidFrom), which the output's replay
// guards compare with redelivered changes' LSNs.
func TestAgreementRecordsItsVersion(t *testing.T) {
	r := newRig(t)
	run := r.start(t, "")
	r.src.Exec(t, `CREATE TABLE versioned (id int PRIMARY KEY, v text); INSERT INTO versioned VALUES (1, 'a')`)
	r.waitCH(t, run, liveCountSQL("public", "versioned"), "1", ddlWait)
	beforeAlter := r.src.CurrentLSN(t)
	r.src.Exec(t, `ALTER TABLE versioned ADD COLUMN w int; INSERT INTO versioned VALUES (2, 'b', 2)`)
	r.waitCH(t, run, fmt.Sprintf("SELECT w FROM %s FINAL WHERE _is_deleted = 0 AND id = 2", chTable("public", "versioned")), "2", ddlWait)
	run.stop(t)
	a := r.agreedOf(t, r.relOid(t, "versioned"))
	if a == nil {
		t.Fatal("public.versioned has no stored agreement")
	}
	if a.ValidFrom < beforeAlter {
		t.Errorf("agreement after ADD COLUMN has valid_from %s, want the ALTER's descriptor version (after %s)", a.ValidFrom, beforeAlter)
	}
}

// TestDropColumnAlreadyGoneOnClickHouse: a column dropped on ClickHouse
// by hand and then on the source is not dropped a second time (18.16 has
// no DROP COLUMN IF EXISTS): the output carries on.
func TestDropColumnAlreadyGoneOnClickHouse(t *testing.T) {
	r := newRig(t)
	run := r.start(t, "")
	r.src.Exec(t, `CREATE TABLE twice (id int PRIMARY KEY, keep text, gone int);
		INSERT INTO twice VALUES (1, 'a', 1), (2, 'b', 2)`)
	r.waitCH(t, run, liveCountSQL("public", "twice"), "2", ddlWait)
	run.stop(t)

	r.ch.HTTPQuery(t, fmt.Sprintf("ALTER TABLE %s DROP COLUMN gone", chTable("public", "twice")))
	r.src.Exec(t, `ALTER TABLE twice DROP COLUMN gone; INSERT INTO twice VALUES (3, 'c')`)
	run = r.start(t, "")
	r.waitCH(t, run, liveCountSQL("public", "twice"), "3", ddlWait)
	if n := r.ch.HTTPQuery(t, chColumnCountSQL("public", "twice", "gone")); n != "0" {
		t.Errorf("ClickHouse column gone is back (%s), want it dropped", n)
	}
	run.stop(t)
	r.compareAll(t)
}

// TestClickHouseSelfHeal: a table dropped on ClickHouse and a column
// dropped there while the stream was stopped are re-created on restart,
// and new rows arrive in both.
func TestClickHouseSelfHeal(t *testing.T) {
	r := newRig(t)
	r.src.Exec(t, `CREATE TABLE heal_t (id int PRIMARY KEY, a text, b bigint);
		CREATE TABLE heal_c (id int PRIMARY KEY, x text, y bigint NOT NULL DEFAULT 0)`)
	run := r.start(t, "")
	r.src.Exec(t, `INSERT INTO heal_t VALUES (1, 'one', 1), (2, 'two', NULL);
		INSERT INTO heal_c VALUES (1, 'one', 11), (2, 'two', 22)`)
	r.waitCH(t, run, liveCountSQL("public", "heal_t"), "2", ddlWait)
	r.waitCH(t, run, liveCountSQL("public", "heal_c"), "2", ddlWait)
	wantT, wantC := r.chColumns(t, "public", "heal_t"), r.chColumns(t, "public", "heal_c")
	run.stop(t)

	r.ch.HTTPQuery(t, "DROP TABLE "+chTable("public", "heal_t"))
	r.ch.HTTPQuery(t, fmt.Sprintf("ALTER TABLE %s DROP COLUMN y", chTable("public", "heal_c")))
	if n := r.ch.HTTPQuery(t, chTableCountSQL("public", "heal_t")); n != "0" {
		t.Fatalf("heal_t still on ClickHouse after DROP TABLE (%s)", n)
	}

	run = r.start(t, "")
	// Start-up reconciliation heals before any row is written.
	r.waitCH(t, run, chTableCountSQL("public", "heal_t"), "1", ddlWait)
	r.waitCH(t, run, chColumnCountSQL("public", "heal_c", "y"), "1", ddlWait)
	if got := r.chColumns(t, "public", "heal_t"); !slices.Equal(got, wantT) {
		t.Errorf("re-created heal_t columns:\n got %q\nwant %q", got, wantT)
	}
	// The re-added column goes last on 18.16; every column is back.
	gotC := r.chColumns(t, "public", "heal_c")
	if !slices.Equal(slices.Sorted(slices.Values(gotC)), slices.Sorted(slices.Values(wantC))) {
		t.Errorf("healed heal_c columns:\n got %q\nwant %q (any order)", gotC, wantC)
	}

	r.src.Exec(t, `INSERT INTO heal_t VALUES (3, 'three', 3);
		INSERT INTO heal_c VALUES (3, 'three', 33);
		UPDATE heal_c SET y = 222 WHERE id = 2`)
	r.waitCH(t, run, fmt.Sprintf("SELECT a, b FROM %s FINAL WHERE _is_deleted = 0 AND id = 3", chTable("public", "heal_t")), "three\t3", ddlWait)
	r.waitCH(t, run, fmt.Sprintf("SELECT id, x, y FROM %s FINAL WHERE _is_deleted = 0 AND id >= 2 ORDER BY id FORMAT TSV", chTable("public", "heal_c")),
		"2\ttwo\t222\n3\tthree\t33", ddlWait)
	// Rows written before the damage are gone from the re-created table
	// unless the restart redelivered them (the session acknowledges its
	// position every status_interval): whichever rows are there are the
	// source's.
	sourceT := strings.Split(r.pgRows(t, "heal_t", "id", "a", "b"), "\n")
	for _, row := range strings.Split(r.chRows(t, "public", "heal_t", "id", "a", "b"), "\n") {
		if !slices.Contains(sourceT, row) {
			t.Errorf("re-created heal_t holds row %q, which the source does not have (source: %q)", row, sourceT)
		}
	}
	// heal_c's row 1 lost its y value with the ClickHouse column: it reads
	// the column's default, or the source's value if it was redelivered.
	if y := r.ch.HTTPQuery(t, fmt.Sprintf("SELECT y FROM %s FINAL WHERE _is_deleted = 0 AND id = 1", chTable("public", "heal_c"))); y != "0" && y != "11" {
		t.Errorf("heal_c row 1 reads y = %q, want the default 0 or the source's 11", y)
	}
	run.stop(t)
}
