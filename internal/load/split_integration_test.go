package load

import (
	"strings"
	"testing"

	"github.com/walshadow/walshadow/internal/testrig"
)

// TestSplitBlocksCoversAPostgresHeap runs the ranges' conditions on a real
// heap: every row is in exactly one range, rows added after relpages was
// read land in the open last range, and PostgreSQL plans TID range scans.
func TestSplitBlocksCoversAPostgresHeap(t *testing.T) {
	pg := testrig.StartPostgres(t)
	pg.Exec(t, `CREATE TABLE split_t (id int, pad text)`)
	pg.Exec(t, `INSERT INTO split_t SELECT g, repeat('x', 200) FROM generate_series(1, 20000) g`)
	pg.Exec(t, `VACUUM ANALYZE split_t`)
	relPages := uint32(pg.QueryInt(t, `SELECT relpages FROM pg_class WHERE relname = 'split_t'`))
	if relPages < 100 {
		t.Fatalf("relpages %d: the table should span hundreds of blocks", relPages)
	}
	// Rows arriving after relpages was read extend the heap past it.
	pg.Exec(t, `INSERT INTO split_t SELECT g, repeat('y', 200) FROM generate_series(20001, 25000) g`)

	ranges := SplitBlocks(relPages, 40*BlockSize)
	if len(ranges) < 3 {
		t.Fatalf("%d pages cut into %v: want several ranges", relPages, ranges)
	}
	var rows, idSum int64
	for _, r := range ranges {
		where := r.Where()
		rows += pg.QueryInt(t, `SELECT count(*) FROM split_t WHERE `+where)
		idSum += pg.QueryInt(t, `SELECT coalesce(sum(id), 0) FROM split_t WHERE `+where)
		plan := pg.QueryString(t, `EXPLAIN SELECT * FROM split_t WHERE `+where)
		if !strings.Contains(plan, "Tid Range Scan") {
			t.Errorf("range %v (%s) planned as %q, want a Tid Range Scan", r, where, plan)
		}
	}
	const n = 25000
	if rows != n || idSum != n*(n+1)/2 {
		t.Fatalf("ranges hold %d rows summing to %d, want each of %d rows once (sum %d)", rows, idSum, n, n*(n+1)/2)
	}
}
