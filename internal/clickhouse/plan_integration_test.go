package clickhouse

import (
	"reflect"
	"strings"
	"testing"

	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/testrig"
)

// TestReconcileOnClickHouse applies a sequence of plans to the real 18.16
// server, reading the existence facts from system.columns each time, and
// checks ClickHouse ends as the agreement says.
func TestReconcileOnClickHouse(t *testing.T) {
	server := testrig.StartClickHouse(t)
	d := Legacy1816
	describe := func(target Target) CHTable {
		t.Helper()
		out := server.HTTPQuery(t, "SELECT name, type FROM system.columns WHERE database = "+QuoteString(target.Database)+
			" AND table = "+QuoteString(target.Table)+" FORMAT TSVRaw") // 18.16 has no position column: rows come in table order
		table := CHTable{}
		for _, line := range strings.Split(out, "\n") {
			if name, typ, ok := strings.Cut(line, "\t"); ok {
				table.Exists = true
				table.Columns = append(table.Columns, CHColumn{Name: name, Type: typ})
			}
		}
		return table
	}
	store, err := OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg := TableConfig{IncludeColumns: []string{"id", "name", "email"}}
	apply := func(shape *desclog.Descriptor) Plan {
		t.Helper()
		prev := store.Get(shape.Oid)
		p, err := Reconcile(d, "walshadow_plan", cfg, prev, describe(DescribeTarget("walshadow_plan", cfg, prev, shape)), shape)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Refused) > 0 {
			t.Fatalf("refused: %v", p.Refused)
		}
		for _, sql := range p.Statements {
			server.HTTPQuery(t, sql)
		}
		if err := store.Put(p.Agreed); err != nil {
			t.Fatal(err)
		}
		return p
	}
	apply(users())
	evolved := rel([]int16{1}, intCol(1, "id", true), textCol(2, "full_name"), droppedCol(3), textCol(4, "internal_notes"),
		col(5, "signup_ts", oidTimestamptz, -1, "timestamp with time zone", false))
	evolved.Name = "members"
	p := apply(evolved)
	wantStatements(t, p,
		"RENAME TABLE `walshadow_plan`.`demo.users` TO `walshadow_plan`.`demo.members`",
		"ALTER TABLE `walshadow_plan`.`demo.members` DROP COLUMN `email`",
		"ALTER TABLE `walshadow_plan`.`demo.members` ADD COLUMN `signup_ts` Nullable(Int64)")
	target := p.Agreed.Target
	if got, want := sortedColumns(describe(target)), sortedColumns(chAfter(d, p.Agreed)); !reflect.DeepEqual(got, want) {
		t.Fatalf("ClickHouse holds %+v, the agreement %+v", got, want)
	}
	// A column dropped by hand comes back; nothing else changes.
	server.HTTPQuery(t, "ALTER TABLE "+QuoteQualified(target)+" DROP COLUMN `name`")
	p = apply(evolved)
	wantStatements(t, p, "ALTER TABLE `walshadow_plan`.`demo.members` ADD COLUMN `name` Nullable(String)")
	// The table dropped by hand is created again.
	server.HTTPQuery(t, DropTable(target))
	p = apply(evolved)
	if len(p.Statements) != 2 {
		t.Fatalf("re-create: %q", p.Statements)
	}
	if got, want := sortedColumns(describe(target)), sortedColumns(chAfter(d, p.Agreed)); !reflect.DeepEqual(got, want) {
		t.Fatalf("ClickHouse holds %+v, the agreement %+v", got, want)
	}
	wantStatements(t, apply(evolved))
}
