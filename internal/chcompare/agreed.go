package chcompare

import (
	"context"
	"fmt"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/jackc/pgx/v5"

	"github.com/walshadow/walshadow/internal/clickhouse"
)

// AgreedTable is the comparison of source (the qualified, quoted
// PostgreSQL name) with the ClickHouse table the output's agreement a maps
// it to: its mapped columns in ClickHouse order, its sorting key, a change
// log when it has none, whole rows (a multiset) when it is keyed by
// physical identity.
func AgreedTable(source string, a *clickhouse.Agreed) (Table, error) {
	t := Table{Source: source, Target: a.Target, Key: a.OrderBy}
	switch clickhouse.LayoutOf(a.OrderBy) {
	case clickhouse.LayoutChangeLog:
		t.Key, t.ChangeLog = nil, true
	case clickhouse.LayoutPhysical:
		// Keyed by where each row lives: compared as a multiset of rows.
		t.Key = nil
	}
	shape := map[int16]int{}
	for i, c := range a.Shape {
		shape[c.Num] = i
	}
	for _, mc := range a.Columns {
		i, ok := shape[mc.Attnum]
		if !ok {
			return Table{}, fmt.Errorf("%s: mapped attnum %d is not in the agreed shape", source, mc.Attnum)
		}
		t.Columns = append(t.Columns, Column{Source: a.Shape[i], Spec: mc.Spec})
	}
	return t, nil
}

// CompareAgreed compares the source table schema.name (oid) with its
// ClickHouse table as the agreement in store maps it: the same live
// columns, then CompareSummaries (count, exact sums, md5 of canonical rows).
func CompareAgreed(ctx context.Context, pg *pgx.Conn, ch driver.Conn, store *clickhouse.Store, schema, name string, oid uint32) error {
	qualified := schema + "." + name
	a := store.Get(oid)
	if a == nil {
		return fmt.Errorf("%s (oid %d) has no agreed ClickHouse table", qualified, oid)
	}
	tbl, err := AgreedTable(pgx.Identifier{schema, name}.Sanitize(), a)
	if err != nil {
		return err
	}
	var live int
	if err := pg.QueryRow(ctx, "SELECT count(*) FROM pg_attribute WHERE attrelid = $1 AND attnum > 0 AND NOT attisdropped", oid).Scan(&live); err != nil {
		return fmt.Errorf("%s: counting its columns: %w", qualified, err)
	}
	if live != len(tbl.Columns) {
		return fmt.Errorf("%s: %d source columns, %d replicated", qualified, live, len(tbl.Columns))
	}
	_, _, err = CompareSummaries(ctx, pg, ch, tbl)
	return err
}
