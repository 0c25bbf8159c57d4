package testrig

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// PGBenchOptions describe a pgbench run after initialisation.
type PGBenchOptions struct {
	// Database defaults to postgres.
	Database string
	// NoInit skips pgbench -i (the tables already exist).
	NoInit bool
	// Clients (-c) and Jobs (-j) default to 1.
	Clients, Jobs int
	// Transactions per client (-t); when zero, Duration (-T, whole seconds)
	// is used instead. With neither, only the initialisation runs.
	Transactions int
	Duration     time.Duration
	// Builtin script (-b): tpcb-like (default), simple-update or select-only.
	Builtin string
	// Args are passed to the run verbatim, e.g. "-M", "prepared".
	Args []string
}

// PGBench initialises pgbench tables at the given scale (pgbench -i -s
// scale) and runs the workload described by opts; it returns the run's output.
func (p *Postgres) PGBench(t testing.TB, scale int, opts PGBenchOptions) string {
	t.Helper()
	db := opts.Database
	if db == "" {
		db = "postgres"
	}
	dsn := p.DSNFor(db)
	if !opts.NoInit {
		if _, err := commandOutput(p.clientCommand("pgbench", "-i", "-q", "-s", strconv.Itoa(scale), dsn)); err != nil {
			t.Fatal(err)
		}
	}
	if opts.Transactions == 0 && opts.Duration == 0 {
		return ""
	}
	args := []string{"-n", "-c", strconv.Itoa(max(opts.Clients, 1)), "-j", strconv.Itoa(max(opts.Jobs, 1))}
	if opts.Transactions > 0 {
		args = append(args, "-t", strconv.Itoa(opts.Transactions))
	} else {
		args = append(args, "-T", strconv.Itoa(max(int(opts.Duration/time.Second), 1)))
	}
	if opts.Builtin != "" {
		args = append(args, "-b", opts.Builtin)
	}
	args = append(args, opts.Args...)
	args = append(args, dsn)
	out, err := commandOutput(p.clientCommand("pgbench", args...))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// RunSQLScript runs script with psql -v ON_ERROR_STOP=1 against the postgres
// database and returns psql's output; any error fails the test.
func (p *Postgres) RunSQLScript(t testing.TB, script string) string {
	t.Helper()
	f, err := os.CreateTemp(p.dir.path, "script-*.sql")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(f.Name())
	_, werr := f.WriteString(script)
	if err := f.Close(); werr != nil || err != nil {
		t.Fatalf("writing %s: %v %v", f.Name(), werr, err)
	}
	out, err := commandOutput(p.clientCommand("psql", "-X", "-q", "-v", "ON_ERROR_STOP=1",
		"-d", p.DSN(), "-f", filepath.Clean(f.Name())))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// DDLScript is the schema-change workload the WAL decoder acceptance test
// drives: CREATE/ALTER (add, add with constant and volatile defaults, rename,
// drop, retype)/DROP/TRUNCATE, VACUUM FULL, replica identity FULL, two-phase
// commit and rollback, savepoints with ROLLBACK TO, and TOASTed values: about
// 1 MB of incompressible text (md5 hex), a large compressible value stored
// out of line, and a compressible value small enough to stay inline
// compressed. It needs max_prepared_transactions > 0
// (WithMaxPreparedTransactions) and can be run again on the same database.
const DDLScript = `
DROP TABLE IF EXISTS ddl_items, ddl_dropped, ddl_toast, ddl_savepoints, ddl_twophase;

-- CREATE, then ALTER in every way that changes a row's shape.
CREATE TABLE ddl_items (id int PRIMARY KEY, name text NOT NULL, qty int, price numeric(10,2));
INSERT INTO ddl_items SELECT g, 'item ' || g, g % 17, g * 1.25 FROM generate_series(1, 200) g;
ALTER TABLE ddl_items ADD COLUMN note text;
UPDATE ddl_items SET note = 'note ' || id WHERE id % 10 = 0;
-- Constant default: a catalog-only change, old rows read it from attmissingval.
ALTER TABLE ddl_items ADD COLUMN status text NOT NULL DEFAULT 'new';
-- Volatile default: rewrites the table.
ALTER TABLE ddl_items ADD COLUMN created timestamptz DEFAULT clock_timestamp();
ALTER TABLE ddl_items RENAME COLUMN name TO title;
INSERT INTO ddl_items (id, title, qty) VALUES (1001, 'after rename', 1);
ALTER TABLE ddl_items DROP COLUMN price;
INSERT INTO ddl_items (id, title, qty, note) VALUES (1002, 'after drop', 2, 'dropped price');
ALTER TABLE ddl_items ALTER COLUMN qty TYPE bigint;
UPDATE ddl_items SET qty = qty + 1000000000000 WHERE id <= 5;
ALTER TABLE ddl_items REPLICA IDENTITY FULL;
UPDATE ddl_items SET status = 'full' WHERE id BETWEEN 6 AND 10;
DELETE FROM ddl_items WHERE id % 7 = 0;
VACUUM FULL ddl_items;
UPDATE ddl_items SET note = 'after vacuum full' WHERE id = 1;
TRUNCATE ddl_items;
INSERT INTO ddl_items (id, title, qty) VALUES (1, 'after truncate', 1);

CREATE TABLE ddl_dropped (id int, payload text);
INSERT INTO ddl_dropped VALUES (1, 'soon gone');
DROP TABLE ddl_dropped;

-- Two-phase commit: one committed, one rolled back.
CREATE TABLE ddl_twophase (id int PRIMARY KEY, v text);
BEGIN;
INSERT INTO ddl_twophase VALUES (1, 'prepared then committed');
PREPARE TRANSACTION 'walshadow_2pc_commit';
COMMIT PREPARED 'walshadow_2pc_commit';
BEGIN;
INSERT INTO ddl_twophase VALUES (2, 'prepared then rolled back');
ALTER TABLE ddl_twophase ADD COLUMN rolled_back int;
PREPARE TRANSACTION 'walshadow_2pc_abort';
ROLLBACK PREPARED 'walshadow_2pc_abort';

-- Savepoints: subtransactions, one rolled back, one released.
CREATE TABLE ddl_savepoints (id int PRIMARY KEY, v text);
BEGIN;
INSERT INTO ddl_savepoints VALUES (1, 'top');
SAVEPOINT s1;
INSERT INTO ddl_savepoints VALUES (2, 'rolled back');
ALTER TABLE ddl_savepoints ADD COLUMN gone int;
ROLLBACK TO SAVEPOINT s1;
INSERT INTO ddl_savepoints VALUES (3, 'after rollback to');
SAVEPOINT s2;
UPDATE ddl_savepoints SET v = 'released' WHERE id = 1;
RELEASE SAVEPOINT s2;
COMMIT;

-- TOAST: out-of-line uncompressed, out-of-line compressed, inline compressed.
CREATE TABLE ddl_toast (id int PRIMARY KEY, label text, payload text);
INSERT INTO ddl_toast SELECT 1, 'incompressible 1 MiB', string_agg(md5(g::text), '') FROM generate_series(1, 32768) g;
INSERT INTO ddl_toast VALUES (2, 'compressible, out of line', repeat('walshadow compressible ', 60000));
INSERT INTO ddl_toast VALUES (3, 'compressible, inline', repeat('x', 5000));
-- Unchanged TOAST columns are not re-logged on UPDATE.
UPDATE ddl_toast SET label = label || ' (updated)';
UPDATE ddl_toast SET payload = payload || 'tail' WHERE id = 2;
DELETE FROM ddl_toast WHERE id = 3;
`
