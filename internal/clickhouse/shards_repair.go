package clickhouse

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// On shards one statement of walshadow's is several (split): the local
// tables' statement ON CLUSTER, then the Distributed tables' made again.
// A crash between them leaves the Distributed tables behind the local
// ones: a rename's old names still there over nothing and its new names
// over the wrong columns, an ALTER's new column missing from the name
// users query and the reconcile reads. repairDistributed puts them back
// in step at start, so a replay finds what one server would hold after
// the local statement alone (a RENAME, an ALTER done), and does the rest.

// shardLocal is what the repair reads of a local table.
type shardLocal struct {
	columns []string // "name type", in the table's order
	key     string   // the sharding key its ORDER BY gives; "" unknown
}

// shardDistributed is what the repair reads of a Distributed table of
// walshadow's (over the local table of its name).
type shardDistributed struct {
	columns []string
	key     string
}

// distributedFix is one mend: its statements and what it mends.
type distributedFix struct {
	stmts []string
	note  string
}

// planDistributed is what makes database's Distributed tables follow the
// local tables of database+LocalSuffix on cluster: a Distributed table
// over a local table that is gone is dropped; one that is missing, or
// whose columns or sharding key are not its local table's, is made
// again. A local table whose key cannot be read and that has no
// Distributed table is left (skipped says so).
func planDistributed(cluster, database string, locals map[string]shardLocal, dists map[string]shardDistributed) (fixes []distributedFix, skipped []string) {
	names := make([]string, 0, len(locals)+len(dists))
	for n := range locals {
		names = append(names, n)
	}
	for n := range dists {
		if _, ok := locals[n]; !ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		t := Target{Database: database, Table: name}
		local, hasLocal := locals[name]
		dist, hasDist := dists[name]
		switch {
		case !hasLocal:
			fixes = append(fixes, distributedFix{[]string{DropTable(t)}, fmt.Sprintf("%s stood over no local table: dropped", QuoteQualified(t))})
		case !hasDist && local.key == "":
			skipped = append(skipped, fmt.Sprintf("%s has no Distributed table and its sharding key cannot be read from %s's ORDER BY", QuoteQualified(t), QuoteQualified(LocalTarget(t))))
		case !hasDist:
			fixes = append(fixes, distributedFix{[]string{CreateDistributed(cluster, t, local.key)}, fmt.Sprintf("%s was missing over its local table: created", QuoteQualified(t))})
		case !slices.Equal(local.columns, dist.columns) || local.key != "" && !sameKey(local.key, dist.key):
			key := local.key
			if key == "" {
				key = dist.key
			}
			fixes = append(fixes, distributedFix{[]string{DropTable(t), CreateDistributed(cluster, t, key)},
				fmt.Sprintf("%s did not match its local table (columns or sharding key): made again", QuoteQualified(t))})
		}
	}
	return fixes, skipped
}

// sameKey compares two sharding expressions as the server prints them
// and as ShardingKey renders them: names quoted or not.
func sameKey(a, b string) bool {
	norm := func(s string) string { return strings.NewReplacer("`", "", " ", "").Replace(s) }
	return norm(a) == norm(b)
}

// orderByKey is the sharding key of a local table whose engine_full is
// engine (… ORDER BY (a, b) SETTINGS …, or ORDER BY a) with columns of
// types (by name): "" when its ORDER BY is not a list of column names.
func orderByKey(engine string, types map[string]string) string {
	at := topLevel(engine, "ORDER")
	if at < 0 {
		return ""
	}
	s := scanner{sql: engine, pos: at}
	if !s.keywords("ORDER", "BY") {
		return ""
	}
	rest := engine[s.pos:]
	for _, word := range []string{"SETTINGS", "SAMPLE", "TTL", "PRIMARY", "PARTITION"} {
		if end := topLevel(rest, word); end >= 0 {
			rest = rest[:end]
		}
	}
	rest = strings.TrimSpace(rest)
	if strings.HasPrefix(rest, "(") && closingParen(rest, 0) == len(rest)-1 {
		rest = rest[1 : len(rest)-1]
	}
	items := splitTopLevel(rest, ',')
	byItem := make(map[string]string, len(items))
	for i, item := range items {
		item = strings.TrimSpace(item)
		items[i] = item
		name := item
		if strings.HasPrefix(item, "`") {
			n, used, err := readIdent(item)
			if err != nil || used != len(item) {
				return ""
			}
			name = n
		}
		typ, ok := types[name]
		if !ok {
			return "" // an expression, not a column
		}
		byItem[item] = typ
	}
	return ShardingKey(items, byItem)
}

// repairDistributed reads the local and Distributed tables of databases
// on the node in use and runs planDistributed's statements for each.
func (c *Conn) repairDistributed(ctx context.Context, databases map[string]bool) (repaired, skipped []string, err error) {
	p := c.pool()
	var quoted []string
	for db := range databases {
		quoted = append(quoted, QuoteString(db), QuoteString(db+LocalSuffix))
	}
	in := "(" + strings.Join(quoted, ", ") + ")"
	type key struct{ db, name string }
	columns := map[key][]string{}
	rows, err := p.Query(ctx, "SELECT database, table, name, type FROM system.columns WHERE database IN "+in)
	if err != nil {
		c.noteFailure(p, err)
		return nil, nil, fmt.Errorf("reading the columns of the sharded tables on ClickHouse at %s: %w", c.hosts, err)
	}
	for rows.Next() {
		var k key
		var name, typ string
		if err := rows.Scan(&k.db, &k.name, &name, &typ); err != nil {
			rows.Close()
			return nil, nil, err
		}
		columns[k] = append(columns[k], name+" "+typ)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	locals := map[string]map[string]shardLocal{}
	dists := map[string]map[string]shardDistributed{}
	rows, err = p.Query(ctx, "SELECT database, name, engine, engine_full FROM system.tables WHERE database IN "+in)
	if err != nil {
		c.noteFailure(p, err)
		return nil, nil, fmt.Errorf("listing the sharded tables on ClickHouse at %s: %w", c.hosts, err)
	}
	for rows.Next() {
		var db, name, engine, full string
		if err := rows.Scan(&db, &name, &engine, &full); err != nil {
			rows.Close()
			return nil, nil, err
		}
		cols := columns[key{db, name}]
		switch {
		case databases[db] && engine == "Distributed":
			args, err := distributedArgs(full)
			if err != nil || args[1] != QuoteString(db+LocalSuffix) || args[2] != QuoteString(name) {
				continue // not over walshadow's local table of its name
			}
			if dists[db] == nil {
				dists[db] = map[string]shardDistributed{}
			}
			dists[db][name] = shardDistributed{columns: cols, key: args[3]}
		case strings.HasSuffix(db, LocalSuffix) && databases[strings.TrimSuffix(db, LocalSuffix)]:
			types := map[string]string{}
			for _, c := range cols {
				n, t, _ := strings.Cut(c, " ")
				types[n] = t
			}
			base := strings.TrimSuffix(db, LocalSuffix)
			if locals[base] == nil {
				locals[base] = map[string]shardLocal{}
			}
			locals[base][name] = shardLocal{columns: cols, key: orderByKey(full, types)}
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	dbs := make([]string, 0, len(databases))
	for db := range databases {
		dbs = append(dbs, db)
	}
	sort.Strings(dbs)
	for _, db := range dbs {
		fixes, skip := planDistributed(c.topology.Cluster, db, locals[db], dists[db])
		skipped = append(skipped, skip...)
		for _, f := range fixes {
			if err := c.run(ctx, p, f.stmts); err != nil {
				if ctx.Err() != nil {
					return repaired, skipped, ctx.Err()
				}
				skipped = append(skipped, fmt.Sprintf("not mended (%v): %s", err, f.note))
				continue
			}
			repaired = append(repaired, f.note)
		}
	}
	return repaired, skipped, nil
}
