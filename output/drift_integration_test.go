package output_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/clickhouse"
)

// TestDowntimeDrift: changes made on the source while the stream was
// stopped reach ClickHouse after a restart (drift found at start, drops
// detected across the downtime): a column added with
// a DEFAULT (older rows read the default), a dropped table (per the drop
// strategy) and a table created with rows.
func TestDowntimeDrift(t *testing.T) {
	for _, strategy := range []clickhouse.DropStrategy{clickhouse.DropDrop, clickhouse.DropRetain} {
		t.Run(string(strategy), func(t *testing.T) { testDowntimeDrift(t, strategy) })
	}
}

func testDowntimeDrift(t *testing.T, strategy clickhouse.DropStrategy) {
	r := newRig(t)
	r.src.Exec(t, `CREATE TABLE drift_x (id int PRIMARY KEY, v text);
		CREATE TABLE drift_y (id int PRIMARY KEY, v text)`)
	outputYAML := "drop_strategy: " + string(strategy)
	run := r.start(t, outputYAML)
	r.src.Exec(t, `INSERT INTO drift_x VALUES (1, 'x1'), (2, 'x2');
		INSERT INTO drift_y VALUES (1, 'y1'), (2, 'y2'), (3, 'y3')`)
	r.waitCH(t, run, liveCountSQL("public", "drift_x"), "2", ddlWait)
	r.waitCH(t, run, liveCountSQL("public", "drift_y"), "3", ddlWait)
	oidY := r.relOid(t, "drift_y")
	run.stop(t)

	// Everything below happens while walshadow is down.
	r.src.Exec(t, `ALTER TABLE drift_x ADD COLUMN flag int DEFAULT 7;
		INSERT INTO drift_x VALUES (3, 'x3', 42), (4, 'x4', DEFAULT);
		UPDATE drift_x SET v = 'x2b' WHERE id = 2`)
	r.src.Exec(t, `DROP TABLE drift_y`)
	r.src.Exec(t, `CREATE TABLE drift_z (id int PRIMARY KEY, w text);
		INSERT INTO drift_z VALUES (1, 'z1'), (2, 'z2')`)

	run = r.start(t, outputYAML)
	r.waitCH(t, run, chColumnCountSQL("public", "drift_x", "flag"), "1", ddlWait)
	r.waitCH(t, run, fmt.Sprintf("SELECT id, v, flag FROM %s FINAL WHERE _is_deleted = 0 ORDER BY id FORMAT TSV", chTable("public", "drift_x")),
		"1\tx1\t7\n2\tx2b\t7\n3\tx3\t42\n4\tx4\t7", ddlWait)
	// drift_z's rows come after drift_y's drop in the stream: once they
	// are on ClickHouse the drop has been applied.
	r.waitCH(t, run, fmt.Sprintf("SELECT id, w FROM %s FINAL WHERE _is_deleted = 0 ORDER BY id FORMAT TSV", chTable("public", "drift_z")),
		"1\tz1\n2\tz2", ddlWait)
	run.stop(t)

	switch strategy {
	case clickhouse.DropDrop:
		if n := r.ch.HTTPQuery(t, chTableCountSQL("public", "drift_y")); n != "0" {
			t.Errorf("drop_strategy drop: drift_y still on ClickHouse (%s)", n)
		}
		if a := r.agreedOf(t, oidY); a != nil {
			t.Errorf("drop_strategy drop: dropped drift_y keeps an agreement %+v", a)
		}
	case clickhouse.DropRetain:
		if got := r.ch.HTTPQuery(t, fmt.Sprintf("SELECT id, v FROM %s FINAL WHERE _is_deleted = 0 ORDER BY id FORMAT TSV", chTable("public", "drift_y"))); got != "1\ty1\n2\ty2\n3\ty3" {
			t.Errorf("drop_strategy retain: drift_y on ClickHouse holds %q, want its three rows", got)
		}
		if a := r.agreedOf(t, oidY); a == nil || !a.Dropped {
			t.Errorf("drop_strategy retain: drift_y's agreement %+v, want it marked dropped", a)
		}
	}
	r.compareAll(t)
}

// TestTruncate: a source TRUNCATE empties the ClickHouse table, and rows
// written after it arrive.
func TestTruncate(t *testing.T) {
	r := newRig(t)
	run := r.start(t, "")
	r.src.Exec(t, `CREATE TABLE trunc (id int PRIMARY KEY, v text);
		INSERT INTO trunc SELECT g, 'v' || g FROM generate_series(1, 50) g`)
	r.waitCH(t, run, liveCountSQL("public", "trunc"), "50", ddlWait)

	r.src.Exec(t, `TRUNCATE trunc`)
	r.waitCH(t, run, liveCountSQL("public", "trunc"), "0", ddlWait)
	// TRUNCATE empties the table, not just hides its rows.
	if n := r.ch.HTTPQuery(t, "SELECT count() FROM "+chTable("public", "trunc")); n != "0" {
		t.Errorf("ClickHouse table holds %s rows after TRUNCATE, want 0", n)
	}

	r.src.Exec(t, `INSERT INTO trunc VALUES (7, 'after'), (51, 'new')`)
	r.waitCH(t, run, fmt.Sprintf("SELECT id, v FROM %s FINAL WHERE _is_deleted = 0 ORDER BY id FORMAT TSV", chTable("public", "trunc")),
		"7\tafter\n51\tnew", ddlWait)
	// A TRUNCATE inside a transaction drops only the rows before it.
	r.src.Exec(t, `BEGIN; INSERT INTO trunc VALUES (100, 'gone'); TRUNCATE trunc; INSERT INTO trunc VALUES (101, 'kept'); COMMIT`)
	r.waitCH(t, run, fmt.Sprintf("SELECT id, v FROM %s FINAL WHERE _is_deleted = 0 ORDER BY id FORMAT TSV", chTable("public", "trunc")),
		"101\tkept", ddlWait)
	run.stop(t)
	r.compareAll(t)
}

// TestDowntimeDropColumn: rows written while the stream was stopped, then
// a DROP COLUMN, then more rows: after the restart every row arrives and
// the column is gone, however far the start-up reconciliation's shape is
// ahead of the replayed rows.
func TestDowntimeDropColumn(t *testing.T) {
	r := newRig(t)
	r.src.Exec(t, `CREATE TABLE drift_d (id int PRIMARY KEY, keep text, gone int)`)
	run := r.start(t, "")
	r.src.Exec(t, `INSERT INTO drift_d VALUES (1, 'a', 1), (2, 'b', 2)`)
	r.waitCH(t, run, liveCountSQL("public", "drift_d"), "2", ddlWait)
	run.stop(t)

	r.src.Exec(t, `INSERT INTO drift_d VALUES (3, 'c', 3); UPDATE drift_d SET gone = 22, keep = 'b2' WHERE id = 2`)
	r.src.Exec(t, `ALTER TABLE drift_d DROP COLUMN gone`)
	r.src.Exec(t, `INSERT INTO drift_d VALUES (4, 'd')`)

	run = r.start(t, "")
	r.waitCH(t, run, fmt.Sprintf("SELECT id, keep FROM %s FINAL WHERE _is_deleted = 0 ORDER BY id FORMAT TSV", chTable("public", "drift_d")),
		"1\ta\n2\tb2\n3\tc\n4\td", ddlWait)
	r.waitCH(t, run, chColumnCountSQL("public", "drift_d", "gone"), "0", ddlWait)
	run.stop(t)
	r.compareAll(t)
}

// TestRestartWithUnwrittenRowsBeforeCapturedDrop: rows written before a
// DROP COLUMN could not be inserted (their ClickHouse table was detached)
// while the session went on and captured the drop; after a restart the
// redelivered rows, which still carry the column, arrive and the column
// ends up dropped. The start-up reconciliation sees the relation's newest
// shape, which is ahead of those rows.
func TestRestartWithUnwrittenRowsBeforeCapturedDrop(t *testing.T) {
	r := newRig(t)
	run := r.start(t, "")
	r.src.Exec(t, `CREATE TABLE held (id int PRIMARY KEY, keep text, gone int); INSERT INTO held VALUES (1, 'a', 1)`)
	r.waitCH(t, run, liveCountSQL("public", "held"), "1", ddlWait)

	r.ch.HTTPQuery(t, "DETACH TABLE "+chTable("public", "held"))
	r.src.Exec(t, `INSERT INTO held VALUES (2, 'b', 2)`)
	r.src.Exec(t, `ALTER TABLE held DROP COLUMN gone`)
	r.src.Exec(t, `INSERT INTO held VALUES (3, 'c')`)
	// Let the session capture the drop while the output keeps failing.
	time.Sleep(5 * time.Second)
	run.stop(t)
	r.ch.HTTPQuery(t, "ATTACH TABLE "+chTable("public", "held"))

	run = r.start(t, "")
	r.waitCH(t, run, fmt.Sprintf("SELECT id, keep FROM %s FINAL WHERE _is_deleted = 0 ORDER BY id FORMAT TSV", chTable("public", "held")),
		"1\ta\n2\tb\n3\tc", ddlWait)
	r.waitCH(t, run, chColumnCountSQL("public", "held", "gone"), "0", ddlWait)
	run.stop(t)
	r.compareAll(t)
}
