package chcompare

import (
	"strings"
	"testing"

	"github.com/shopspring/decimal"
)

func TestCompareLegacy1816(t *testing.T) {
	r := newRig(t)
	r.pg.Exec(t, sourceRows)
	stored := storedRows()
	r.insert(100, false, stored...)
	assertDiffs(t, r.compare(10))

	// A newer image of row 1 with another price, a row the source lacks, a
	// row ClickHouse lacks.
	changed := append([]any(nil), stored[0]...)
	changed[3] = ref(decimal.RequireFromString("1.51"))
	r.insert(200, false, changed)
	r.pg.Exec(t, `INSERT INTO public."rl items" (id, tags, nums) VALUES (3, '{}', '{}')`)
	r.pg.Exec(t, `DELETE FROM public."rl items" WHERE id = 10`)
	assertDiffs(t, r.compare(10),
		`"public"."rl items": row (id="1"): column "price": PostgreSQL "1.50", ClickHouse "1.51"`,
		`"public"."rl items": row (id="3"): missing from ClickHouse`,
		`"public"."rl items": row (id="10"): only in ClickHouse`,
	)
	// The bound keeps the first lines and counts the rest.
	assertDiffs(t, r.compare(2),
		`"public"."rl items": row (id="1"): column "price": PostgreSQL "1.50", ClickHouse "1.51"`,
		`"public"."rl items": 2 more differences not listed`,
	)

	// A delete marker newer than the row hides it; one older than the row
	// (a replayed stale delete) does not.
	marker := func(id int64) []any {
		return []any{id, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, []*string{}, []*int32{}}
	}
	r.insert(300, true, marker(10))
	r.insert(50, true, marker(2))
	assertDiffs(t, r.compare(10),
		`"public"."rl items": row (id="1"): column "price": PostgreSQL "1.50", ClickHouse "1.51"`,
		`"public"."rl items": row (id="3"): missing from ClickHouse`,
	)

	// Whole-row matching without a key: the changed row is one missing and
	// one extra row; every NULL and array text takes part in the match.
	r.table.Key = nil
	diffs := r.compare(0)
	if len(diffs) != 3 {
		t.Fatalf("whole-row differences:\n%s\nwant 3", strings.Join(diffs, "\n"))
	}
	for i, want := range []string{`(id="1", name="plain", flag="t", price="1.50"`, `(id="1", name="plain", flag="t", price="1.51"`, `(id="3", name=NULL`} {
		if !strings.Contains(diffs[i], want) {
			t.Errorf("whole-row difference %d = %s; want it to contain %s", i, diffs[i], want)
		}
	}
}
