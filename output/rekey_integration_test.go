package output_test

import (
	"strings"
	"testing"
	"time"
)

// TestPrimaryKeyAddedRebuilds: a table created without a key (keyed by
// physical identity on ClickHouse) gets a primary key after its rows are
// loaded, as pgbench -i does it; the output rebuilds the ClickHouse table
// ordered by the key, keeps its rows, and later updates and deletes
// replace them. Dropping the key again reloads it under its physical
// identity.
func TestPrimaryKeyAddedRebuilds(t *testing.T) {
	r := newRig(t)
	logs := &logLines{}
	run := r.startLogged(t, "", logs)
	r.src.Exec(t, `CREATE TABLE loaded (id int, name text, n numeric(10,2));
		INSERT INTO loaded SELECT i, 'row ' || i, i * 1.5 FROM generate_series(1, 500) i`)
	target := chTable("public", "loaded")
	r.waitCH(t, run, "SELECT count() FROM "+target+" FINAL", "500", time.Minute)
	if got := strings.TrimSpace(r.ch.HTTPQuery(t, "SELECT sorting_key FROM system.tables WHERE database = 'walshadow_test' AND name = 'public.loaded'")); got != "_filenode, _block, _offset" {
		t.Fatalf("keyless table ordered by %q, want its rows' physical identity", got)
	}

	r.src.Exec(t, `ALTER TABLE loaded ADD PRIMARY KEY (id);
		UPDATE loaded SET name = 'updated' WHERE id <= 100;
		DELETE FROM loaded WHERE id > 450;
		INSERT INTO loaded VALUES (1000, 'new', 1)`)
	r.waitCH(t, run, "SELECT count() FROM "+target+" FINAL WHERE _is_deleted = 0 AND name = 'new'", "1", time.Minute)
	if got := strings.TrimSpace(r.ch.HTTPQuery(t, "SELECT engine, sorting_key FROM system.tables WHERE database = 'walshadow_test' AND name = 'public.loaded'")); !strings.HasPrefix(got, "ReplacingMergeTree") {
		t.Fatalf("after ADD PRIMARY KEY the table is %q, want a ReplacingMergeTree", got)
	}
	r.waitCH(t, run, "SELECT count() FROM "+target+" FINAL WHERE _is_deleted = 0", "451", time.Minute)

	r.src.Exec(t, `ALTER TABLE loaded DROP CONSTRAINT loaded_pkey; INSERT INTO loaded VALUES (2000, 'after', 2)`)
	// The key gone, nothing in ClickHouse says where each row lives: the
	// table is reloaded under its physical identity.
	logs.waitLog(t, "public.loaded is repaired", 2*time.Minute)
	r.src.Exec(t, `UPDATE loaded SET name = 'after reload' WHERE id = 2000`)
	r.waitCH(t, run, "SELECT count() FROM "+target+" FINAL WHERE _is_deleted = 0 AND name = 'after reload'", "1", time.Minute)
	run.stop(t)
	if got := strings.TrimSpace(r.ch.HTTPQuery(t, "SELECT sorting_key FROM system.tables WHERE database = 'walshadow_test' AND name = 'public.loaded'")); got != "_filenode, _block, _offset" {
		t.Errorf("after DROP CONSTRAINT the table is ordered by %q, want its rows' physical identity", got)
	}
	if got := strings.TrimSpace(r.ch.HTTPQuery(t, "SELECT count() FROM system.tables WHERE database = 'walshadow_test' AND name LIKE '%rekey%'")); got != "0" {
		t.Errorf("%s rebuild tables left behind", got)
	}
	r.compareAll(t)
}
