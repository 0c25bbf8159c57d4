package shadow

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walshadow/walshadow/internal/testrig"
)

// TestCatalogFilenodesRaceWithDroppedDatabase makes the race of a start
// with a test suite dropping databases deterministic: between the listing
// of the source's databases and the connections to them, one is dropped,
// one renamed, one left invalid by an interrupted DROP DATABASE. The
// dropped and the invalid ones are skipped (they are gone), the renamed one
// is read under its new name; the followed database dropped there still
// fails the start.
func TestCatalogFilenodesRaceWithDroppedDatabase(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	src := testrig.StartPostgres(t, testrig.WithSetting("autovacuum", "off"))
	for _, db := range []string{"gone_db", "renamed_db", "followed_db"} {
		src.Exec(t, "CREATE DATABASE "+db)
	}
	// A relocated catalog in the database to be renamed: it must be found
	// under the new name, with the database's OID.
	conn, err := pgx.Connect(ctx, src.DSNFor("renamed_db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "VACUUM FULL pg_class", pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	// Read on this connection, closed before the rename (which refuses a
	// database anybody is connected to).
	var renamed RelFile
	if err := conn.QueryRow(ctx, `
SELECT CASE WHEN c.reltablespace = 0 THEN d.dattablespace ELSE c.reltablespace END, d.oid, pg_relation_filenode(c.oid)
FROM pg_class c, pg_database d WHERE d.datname = current_database() AND c.oid = 'pg_class'::regclass`).Scan(&renamed.Spc, &renamed.DB, &renamed.Filenode); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	if renamed.Filenode < FirstNormalObjectID {
		t.Fatalf("VACUUM FULL left pg_class at %s", renamed)
	}
	goneOID := uint32(src.QueryInt(t, "SELECT oid::bigint FROM pg_database WHERE datname = 'gone_db'"))

	var listed []string
	afterListingDatabases = func(names []string) {
		listed = names
		afterListingDatabases = nil // once
		// The listing's connection is to postgres: none of these has a
		// session open.
		src.Exec(t, "DROP DATABASE gone_db")
		src.Exec(t, "ALTER DATABASE renamed_db RENAME TO renamed_db_2")
	}
	t.Cleanup(func() { afterListingDatabases = nil })
	rels, err := QueryRelocatedCatalogs(ctx, src.DSN(), nil)
	if err != nil {
		t.Fatalf("a database dropped or renamed during the start failed it: %v", err)
	}
	if !strings.Contains(strings.Join(listed, ","), "gone_db") {
		t.Fatalf("the hook ran before gone_db was listed: %v", listed)
	}
	set := CatalogSet(relFileSet(rels))
	if !set.Has(renamed) {
		t.Errorf("the renamed database's relocated pg_class %s is missing from %v", renamed, rels)
	}
	for _, r := range rels {
		if r.DB == goneOID {
			t.Errorf("catalog filenodes of the dropped database: %s", r)
		}
	}

	// A database an interrupted DROP DATABASE left invalid
	// (datconnlimit -2) refuses connections: it is not listed at all.
	src.Exec(t, "CREATE DATABASE invalid_db")
	src.Exec(t, "UPDATE pg_database SET datconnlimit = -2 WHERE datname = 'invalid_db'")
	if _, err := QueryRelocatedCatalogs(ctx, src.DSN(), nil); err != nil {
		t.Fatalf("an invalid database failed the start: %v", err)
	}

	// The followed database is needed: dropped there, the start fails.
	afterListingDatabases = func([]string) {
		afterListingDatabases = nil
		src.Exec(t, "DROP DATABASE followed_db")
	}
	_, err = querySource(ctx, src.DSN(), "followed_db", nil)
	if err == nil || !strings.Contains(err.Error(), `the followed database "followed_db" was dropped`) {
		t.Fatalf("the followed database dropped during the start: %v", err)
	}
}
