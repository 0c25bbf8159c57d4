package shadow

import (
	"context"
	"testing"

	"github.com/walshadow/walshadow/internal/testrig"
)

// TestReadDescriptors reads shapes from a real PostgreSQL and checks every
// field against what the DDL made.
func TestReadDescriptors(t *testing.T) {
	pg := testrig.StartPostgres(t)
	pg.RunSQLScript(t, `
CREATE SCHEMA app;
CREATE TABLE app.items (id int PRIMARY KEY, name text NOT NULL, gone int, price numeric(10,2));
ALTER TABLE app.items DROP COLUMN gone;
INSERT INTO app.items VALUES (1, 'a', 1.5);
ALTER TABLE app.items ADD COLUMN status text DEFAULT 'new';
CREATE TABLE full_ident (a int, b text);
ALTER TABLE full_ident REPLICA IDENTITY FULL;
CREATE TABLE by_index (a int NOT NULL, b int NOT NULL, c text);
CREATE UNIQUE INDEX by_index_ab ON by_index (b, a);
ALTER TABLE by_index REPLICA IDENTITY USING INDEX by_index_ab;
CREATE TABLE covering (c1 int, c2 int, c3 int, c4 text);
ALTER TABLE covering ADD CONSTRAINT covering_pk PRIMARY KEY (c2, c1) INCLUDE (c3, c4);
CREATE TABLE no_columns ();
CREATE TABLE parted (id int, v text) PARTITION BY RANGE (id);
CREATE TABLE parted_1 PARTITION OF parted FOR VALUES FROM (0) TO (100);
`)
	conn := pg.Connect(t)
	defer conn.Close(context.Background())
	all, err := ReadDescriptors(context.Background(), conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]int{}
	for i, d := range all {
		byName[d.Namespace+"."+d.Name] = i
	}
	items := all[byName["app.items"]]
	if items.Kind != 'r' || items.ReplIdent != 'd' || len(items.KeyAttnums) != 1 || items.KeyAttnums[0] != 1 || items.ToastOid == 0 {
		t.Fatalf("app.items: %+v", items)
	}
	if items.Rfn.SpcOid != 1663 || items.Rfn.DbOid != items.DbOid || items.Rfn.RelNum == 0 {
		t.Fatalf("app.items storage %+v", items.Rfn)
	}
	if len(items.Columns) != 5 || !items.Columns[2].Dropped || items.Columns[1].Name != "name" || !items.Columns[1].NotNull {
		t.Fatalf("app.items columns %+v", items.Columns)
	}
	price, status := items.Columns[3], items.Columns[4]
	if price.TypeName != "numeric(10,2)" || price.Len != -1 || price.Align != 'i' || price.Storage != 'm' {
		t.Fatalf("price %+v", price)
	}
	if !status.HasMissing || status.Missing == nil || *status.Missing != "new" {
		t.Fatalf("status %+v", status)
	}
	if d := all[byName["public.full_ident"]]; d.ReplIdent != 'f' || d.KeyAttnums != nil {
		t.Fatalf("full_ident %+v", d)
	}
	if d := all[byName["public.by_index"]]; d.ReplIdent != 'i' || len(d.KeyAttnums) != 2 || d.KeyAttnums[0] != 2 || d.IdentityIndexOid == 0 {
		t.Fatalf("by_index %+v", d)
	}
	// A key's INCLUDE columns are not part of it (they may be NULL).
	if d := all[byName["public.covering"]]; len(d.KeyAttnums) != 2 || d.KeyAttnums[0] != 2 || d.KeyAttnums[1] != 1 {
		t.Fatalf("covering: key %v, want [2 1] (its primary key without the INCLUDE columns)", d.KeyAttnums)
	}
	if i, ok := byName["public.no_columns"]; !ok || len(all[i].Columns) != 0 || all[i].Rfn.RelNum == 0 {
		t.Fatalf("a table without columns: present %v, %+v", ok, all[i])
	}
	// A partitioned table has no storage: filenode 0.
	if d := all[byName["public.parted"]]; d.Kind != 'p' || d.Rfn.RelNum != 0 || len(d.Columns) != 2 {
		t.Fatalf("parted %+v", d)
	}
	if d := all[byName["public.parted_1"]]; d.Kind != 'r' || d.Rfn.RelNum == 0 {
		t.Fatalf("parted_1 %+v", d)
	}
	// Scoped reads; an unknown oid is simply absent.
	some, err := ReadDescriptors(context.Background(), conn, []uint32{items.Oid, 999999})
	if err != nil || len(some) != 1 || some[0].Oid != items.Oid || len(some[0].Columns) != 5 {
		t.Fatalf("scoped read: %v %+v", err, some)
	}
	// The toast table is a relation of its own, kind 't'.
	if _, ok := byName["pg_toast.pg_toast_"+itoa(items.Oid)]; !ok {
		t.Fatalf("no toast descriptor for app.items among %v", byName)
	}
}

// TestReadDescriptorsCompositeType: a column of a composite type names the
// type's attributes, and asking for the type's relation (ALTER TYPE writes
// its pg_class row) brings the relations that use it.
func TestReadDescriptorsCompositeType(t *testing.T) {
	pg := testrig.StartPostgres(t)
	pg.RunSQLScript(t, `
CREATE TYPE pair AS (a int, "b c" text);
CREATE TABLE uses_pair (id int PRIMARY KEY, p pair);
CREATE TABLE plain (id int);
`)
	conn := pg.Connect(t)
	defer conn.Close(context.Background())
	ctx := context.Background()
	var typeRel uint32
	if err := conn.QueryRow(ctx, "SELECT typrelid FROM pg_type WHERE typname = 'pair'").Scan(&typeRel); err != nil {
		t.Fatal(err)
	}
	read := func() (name string) {
		t.Helper()
		descs, err := ReadDescriptors(ctx, conn, []uint32{typeRel})
		if err != nil {
			t.Fatal(err)
		}
		if len(descs) != 1 || descs[0].Name != "uses_pair" {
			t.Fatalf("relations for the composite type's oid: %+v, want uses_pair alone", descs)
		}
		return descs[0].Columns[1].TypeName
	}
	if got, want := read(), `pair (a integer, "b c" text)`; got != want {
		t.Errorf("TypeName %q, want %q", got, want)
	}
	if _, err := conn.Exec(ctx, "ALTER TYPE pair DROP ATTRIBUTE a, ADD ATTRIBUTE d int"); err != nil {
		t.Fatal(err)
	}
	if got, want := read(), `pair ("b c" text, d integer)`; got != want {
		t.Errorf("after ALTER TYPE: TypeName %q, want %q", got, want)
	}
}
