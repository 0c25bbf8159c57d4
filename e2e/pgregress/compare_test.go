package pgregress_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walshadow/walshadow/internal/chcompare"
	"github.com/walshadow/walshadow/internal/clickhouse"
)

// sourceTable is one permanent ordinary table of the source.
type sourceTable struct {
	oid          uint32
	schema, name string
	children     bool // it has inheritance children (compared FROM ONLY)
}

func (s sourceTable) String() string { return s.schema + "." + s.name }

// permanentTables lists every permanent ordinary table of the connected
// database: relkind 'r' (a partitioned parent, 'p', has no rows of its
// own; its partitions are tables of their own), relpersistence 'p' (no
// unlogged or temporary table: neither is in the WAL walshadow reads),
// outside the system schemas and the test's own.
const permanentTables = `SELECT c.oid, n.nspname, c.relname,
		EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhparent = c.oid)
	FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	WHERE c.relkind = 'r' AND c.relpersistence = 'p'
	  AND n.nspname NOT IN ('pg_catalog', 'information_schema', ` + markerSchemaLiteral + `)
	  AND n.nspname NOT LIKE 'pg\_toast%' AND n.nspname NOT LIKE 'pg\_temp\_%'
	ORDER BY n.nspname, c.relname`

func listTables(ctx context.Context, pg *pgx.Conn) ([]sourceTable, error) {
	rows, err := pg.Query(ctx, permanentTables)
	if err != nil {
		return nil, fmt.Errorf("listing the source's tables: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (sourceTable, error) {
		var x sourceTable
		err := r.Scan(&x.oid, &x.schema, &x.name, &x.children)
		return x, err
	})
}

// tableResult is one table's comparison.
type tableResult struct {
	table sourceTable
	// diff is empty when the tables are equal, else the first difference
	// (or why they could not be compared), then how many more there are.
	diff string
}

// maxDiffs is how many differences of a table are listed.
const maxDiffs = 3

// compareTable compares st value by value with the ClickHouse table the
// output's agreement in store maps it to: the same live columns, then
// chcompare.Compare (every value as PostgreSQL's text output; the source
// read FROM ONLY, so a parent with inheritance children is its own rows
// only, as the WAL has them).
func compareTable(ctx context.Context, pg *pgx.Conn, ch *clickhouse.Conn, store *clickhouse.Store, st sourceTable) string {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	a := store.Get(st.oid)
	switch {
	case a == nil:
		return fmt.Sprintf("no agreed ClickHouse table (oid %d)", st.oid)
	case a.Dropped:
		return fmt.Sprintf("its agreement (oid %d) is marked dropped, the source table is there", st.oid)
	case a.Left:
		return fmt.Sprintf("its agreement (oid %d) says it left the output's scope", st.oid)
	}
	tbl, err := chcompare.AgreedTable(pgx.Identifier{st.schema, st.name}.Sanitize(), a)
	if err != nil {
		return err.Error()
	}
	var live int
	if err := pg.QueryRow(ctx, "SELECT count(*) FROM pg_attribute WHERE attrelid = $1 AND attnum > 0 AND NOT attisdropped", st.oid).Scan(&live); err != nil {
		return fmt.Sprintf("counting its columns: %v", err)
	}
	if live != len(tbl.Columns) {
		return fmt.Sprintf("%d source columns, %d replicated to %s", live, len(tbl.Columns), clickhouse.QuoteQualified(tbl.Target))
	}
	if len(tbl.Columns) == 0 {
		// A table without columns (CREATE TABLE t ()) holds only a row
		// count, which Compare cannot read: count both sides.
		return compareCounts(ctx, pg, ch, st, tbl)
	}
	diffs, err := chcompare.Compare(ctx, pg, ch.Native(), tbl, maxDiffs)
	if err != nil {
		return err.Error()
	}
	return strings.Join(diffs, "; ")
}

// compareCounts compares the row counts of a table without columns, read
// as chcompare reads a table: FINAL, live rows; a change log's inserted
// images less its deleted ones.
func compareCounts(ctx context.Context, pg *pgx.Conn, ch *clickhouse.Conn, st sourceTable, tbl chcompare.Table) string {
	var src int64
	if err := pg.QueryRow(ctx, "SELECT count(*) FROM ONLY "+tbl.Source).Scan(&src); err != nil {
		return fmt.Sprintf("counting its rows: %v", err)
	}
	q := "SELECT count() FROM " + clickhouse.QuoteQualified(tbl.Target) + " FINAL WHERE " + clickhouse.QuoteIdent(clickhouse.ColIsDeleted) + " = 0"
	if tbl.ChangeLog {
		q = "SELECT toInt64(countIf(" + clickhouse.QuoteIdent(clickhouse.ColIsDeleted) + " = 0)) - toInt64(countIf(" +
			clickhouse.QuoteIdent(clickhouse.ColIsDeleted) + " = 1)) FROM " + clickhouse.QuoteQualified(tbl.Target) + " FINAL"
	}
	var n int64
	row := ch.Native().QueryRow(ctx, q)
	var u uint64
	var err error
	if tbl.ChangeLog {
		err = row.Scan(&n)
	} else if err = row.Scan(&u); err == nil {
		n = int64(u)
	}
	if err != nil {
		return fmt.Sprintf("counting the rows of %s: %v", clickhouse.QuoteQualified(tbl.Target), err)
	}
	if n != src {
		return fmt.Sprintf("no columns; %d rows on the source, %d in %s", src, n, clickhouse.QuoteQualified(tbl.Target))
	}
	return ""
}
