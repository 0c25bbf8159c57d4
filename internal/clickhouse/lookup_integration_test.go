package clickhouse

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/testrig"
)

// TestLookupVersions: every stored version of each key, no FINAL, with
// values LookupLatest would give, across chunks of keys; once a merge
// (OPTIMIZE ... FINAL) replaced the older version, only the newest is
// left, which is why the initial load reads a key's loaded row before
// the changes streamed during the load are copied in next to it.
func TestLookupVersions(t *testing.T) {
	ch := testrig.StartClickHouse(t)
	c := openTestConn(t, ch)
	ctx := context.Background()
	d := c.Dialect()
	target := Target{Database: "default", Table: "public.versions"}
	key := []ColumnSpec{{Name: "id", Type: typInt32}, {Name: "k str", Type: typString}}
	data := []ColumnSpec{{Name: "big", Type: typString, Nullable: true}, {Name: "tags", Type: arrayOf(typInt32), Nullable: true}}
	cols := append(append([]ColumnSpec(nil), key...), data...)
	sql, err := CreateTable(d, target, cols, []string{"id", "k str"}, TableOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(ctx, sql); err != nil {
		t.Fatal(err)
	}
	all := append(append([]ColumnSpec(nil), cols...), SyntheticColumns(d)...)
	convert := func(specs []ColumnSpec, values ...any) []any { return convertValues(t, specs, values...) }
	keyA, keyB, keyAbsent := convert(key, int64(1), "a'b"), convert(key, int64(2), "b"), convert(key, int64(3), "a'b")
	version := func(k []any, lsn uint64, big any, deleted int64) []any {
		v := append(append([]any(nil), k...), convert(data, big, "{1,NULL}")...)
		return append(v, convert(SyntheticColumns(d), lsn, int64(9), time.Unix(1700000000, 0), deleted)...)
	}
	// Three parts: the loaded row, then the delete half of a key change
	// and another key's row.
	for _, rows := range [][][]any{
		{version(keyA, 100, "loaded", 0)},
		{version(keyA, 200, nil, 1), version(keyB, 150, "b", 0)},
	} {
		if err := c.Insert(ctx, target, all, rows); err != nil {
			t.Fatal(err)
		}
	}
	want := append(append([]ColumnSpec(nil), data...), SyntheticColumns(d)[0], SyntheticColumns(d)[3])
	describe := func(versions [][]any) string {
		var s []string
		for _, v := range versions {
			s = append(s, fmt.Sprintf("%v@%v del=%v", v[0], v[2], v[3]))
		}
		sort.Strings(s)
		return fmt.Sprint(s)
	}
	got, err := c.LookupVersions(ctx, target, key, [][]any{keyAbsent, keyA, keyB, keyA}, want)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || got[0] != nil {
		t.Fatalf("LookupVersions: %v", got)
	}
	if g, w := describe(got[1]), "[<nil>@200 del=1 loaded@100 del=0]"; g != w || describe(got[3]) != w {
		t.Errorf("key A: %s and %s, want %s", g, describe(got[3]), w)
	}
	if g, w := describe(got[2]), "[b@150 del=0]"; g != w {
		t.Errorf("key B: %s, want %s", g, w)
	}
	if tags, ok := got[1][0][1].([]*int32); !ok || len(tags) != 2 || *tags[0] != 1 || tags[1] != nil {
		t.Errorf("key A's tags: %#v", got[1][0][1])
	}

	// More keys than one query takes.
	many := make([][]any, 2*lookupChunk+1)
	for i := range many {
		many[i] = keyAbsent
	}
	many[lookupChunk+3] = keyB
	gotMany, err := c.LookupVersions(ctx, target, key, many, want[:1])
	if err != nil {
		t.Fatal(err)
	}
	for i, versions := range gotMany {
		if (len(versions) == 1) != (i == lookupChunk+3) || len(versions) > 1 {
			t.Fatalf("chunked lookup: key %d got %v", i, versions)
		}
	}

	// A merge keeps only the newest version of each key.
	if err := c.Exec(ctx, "OPTIMIZE TABLE "+QuoteQualified(target)+" FINAL"); err != nil {
		t.Fatal(err)
	}
	got, err = c.LookupVersions(ctx, target, key, [][]any{keyA}, want)
	if err != nil {
		t.Fatal(err)
	}
	if g, w := describe(got[0]), "[<nil>@200 del=1]"; g != w {
		t.Errorf("key A after the merge: %s, want %s", g, w)
	}
}
