package preflight

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// tablesQuery lists the ordinary tables of the followed database (the
// DSN's) that can carry rows: what walshadow_decode turns into row changes.
// Partitioned parents have no rows of their own (their partitions are
// listed); temporary tables are never replicated.
const tablesQuery = `
SELECT n.nspname, c.relname, c.relreplident::text, c.relpersistence::text,
       EXISTS (SELECT 1 FROM pg_catalog.pg_index i
                WHERE i.indrelid = c.oid
                  AND ((c.relreplident = 'd' AND i.indisprimary) OR (c.relreplident = 'i' AND i.indisreplident)))
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind = 'r' AND c.relpersistence <> 't'
  AND n.nspname NOT IN ('pg_catalog', 'information_schema')
  AND n.nspname NOT LIKE 'pg\_toast%' AND n.nspname NOT LIKE 'pg\_temp\_%'
ORDER BY 1, 2`

// listLimit bounds the table names one finding lists.
const listLimit = 10

// scope mirrors the clickhouse_ddl output's: a table named in tables is in;
// otherwise it must match an include pattern (none: every table) and no
// exclude pattern.
type scope struct{ include, exclude, tables []string }

func newScope(p SourceParams) (scope, error) {
	for _, pat := range append(slices.Clone(p.Include), p.Exclude...) {
		if _, err := path.Match(pat, "x.y"); err != nil {
			return scope{}, fmt.Errorf("table pattern %q: %w", pat, err)
		}
		if !strings.Contains(pat, ".") {
			return scope{}, fmt.Errorf("table pattern %q: want schema.table (wildcards allowed, e.g. public.*)", pat)
		}
	}
	return scope{include: p.Include, exclude: p.Exclude, tables: p.Tables}, nil
}

func (s scope) in(name string) bool {
	if slices.Contains(s.tables, name) {
		return true
	}
	for _, pat := range s.exclude {
		if ok, _ := path.Match(pat, name); ok {
			return false
		}
	}
	if len(s.include) == 0 {
		return true
	}
	for _, pat := range s.include {
		if ok, _ := path.Match(pat, name); ok {
			return true
		}
	}
	return false
}

// identityGroup is one kind of replica identity and what walshadow makes of
// it; tables of a group are reported in one finding.
type identityGroup struct {
	check    string // "" = replica_identity
	severity Severity
	what     string // "REPLICA IDENTITY NOTHING", after "N tables with"
	effect   string
	remedy   string
	names    []string
}

const noIdentityEffect = "they are keyed in ClickHouse by each row's physical identity (ORDER BY _filenode, _block, _offset, which the WAL names for every change): " +
	"UPDATEs and DELETEs apply exactly, duplicate rows included; VACUUM FULL, CLUSTER and table rewrites reload them"

const noIdentityRemedy = "nothing is needed; a primary key or REPLICA IDENTITY USING INDEX makes the ClickHouse table keyed by it instead"

// checkReplicaIdentity reports the tables in scope by what their replica
// identity lets walshadow do with them, one finding per kind.
func (fs *findings) checkReplicaIdentity(ctx context.Context, conn *pgx.Conn, database string, p SourceParams) {
	sc, err := newScope(p)
	if err != nil {
		fs.fail("replica_identity", "cannot tell the tables in scope: "+err.Error(), "fix the output's include / exclude patterns")
		return
	}
	rows, err := conn.Query(ctx, tablesQuery)
	if err != nil {
		fs.fail("replica_identity", fmt.Sprintf("listing the tables of database %q: %v", database, err), "")
		return
	}
	var (
		nothing = identityGroup{severity: Info, what: "REPLICA IDENTITY NOTHING", effect: noIdentityEffect, remedy: noIdentityRemedy}
		noPK    = identityGroup{severity: Info, what: "no primary key (REPLICA IDENTITY DEFAULT)", effect: noIdentityEffect, remedy: noIdentityRemedy}
		noIndex = identityGroup{severity: Warning, what: "REPLICA IDENTITY USING INDEX but no usable index", effect: noIdentityEffect, remedy: "check the index the replica identity names (unique, not partial, on NOT NULL columns)"}
		full    = identityGroup{severity: Info, what: "REPLICA IDENTITY FULL, so no key",
			effect: noIdentityEffect + " (REPLICA IDENTITY FULL is not needed), unless tables.<name>.order_by names columns that identify their rows"}
		unlogged = identityGroup{check: "unlogged_tables", severity: Warning, what: "UNLOGGED storage", effect: "their rows are not in the WAL and never replicate",
			remedy: "ALTER TABLE ... SET LOGGED, or exclude them"}
		keyed, total, all int
	)
	for rows.Next() {
		var schema, table, ident, persistence string
		var hasIndex bool
		if err := rows.Scan(&schema, &table, &ident, &persistence, &hasIndex); err != nil {
			rows.Close()
			fs.fail("replica_identity", fmt.Sprintf("listing the tables of database %q: %v", database, err), "")
			return
		}
		all++
		name := schema + "." + table
		if !sc.in(name) {
			continue
		}
		total++
		switch {
		case persistence == "u":
			unlogged.names = append(unlogged.names, name)
		case ident == "n":
			nothing.names = append(nothing.names, name)
		case ident == "f":
			full.names = append(full.names, name)
		case hasIndex:
			keyed++
		case ident == "d":
			noPK.names = append(noPK.names, name)
		default:
			noIndex.names = append(noIndex.names, name)
		}
	}
	if err := rows.Err(); err != nil {
		fs.fail("replica_identity", fmt.Sprintf("listing the tables of database %q: %v", database, err), "")
		return
	}
	switch {
	case all == 0:
		fs.info("replica_identity", fmt.Sprintf("database %q has no tables yet", database))
		return
	case total == 0:
		fs.warn("replica_identity", fmt.Sprintf("none of the %s of database %q is in scope (include %q, exclude %q)", plural(all, "table", "tables"), database, p.Include, p.Exclude),
			"check the output's include / exclude patterns (schema.table)")
		return
	}
	fs.info("replica_identity", fmt.Sprintf("%s of database %q in scope, %d keyed by a primary key or replica identity index", plural(total, "table", "tables"), database, keyed))
	for _, g := range []identityGroup{nothing, noPK, noIndex, full, unlogged} {
		if len(g.names) == 0 {
			continue
		}
		check := g.check
		if check == "" {
			check = "replica_identity"
		}
		fs.add(check, g.severity, fmt.Sprintf("%s with %s: %s; %s", plural(len(g.names), "table", "tables"), g.what, listNames(g.names, listLimit), g.effect), g.remedy)
	}
}
