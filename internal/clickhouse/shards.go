package clickhouse

import (
	"fmt"
	"strings"
)

// A cluster of several shards holds each table twice over. The rows live
// in a shard-local Replicated table in a database of its own, the user's
// database name with LocalSuffix (walshadow_local.`public.orders`); the
// name users query (walshadow.`public.orders`) is a Distributed table over
// those, on every node. The Distributed table sends each inserted row to
// one shard by its sharding key, a hash of the table's ORDER BY columns:
// ReplacingMergeTree collapses the versions of a row only within one
// table, so every version of a row identity (the replica identity key, or
// a keyless table's physical identity or change-log position, which is
// what ORDER BY holds) must land on one shard, and the sorting key is
// exactly that identity. A sorting key column's type never changes in
// place (ClassifyTypeChange reloads the table instead), so a row's shard
// never moves under it.
//
// Topology.Statements turns each statement this package renders for one
// server into the statements that do the same on such a cluster (a
// TRUNCATE is Conn's: truncate_replicated.go); a
// Distributed table it makes again (a RENAME, a change of columns) keeps
// the sharding key read from the server. Conn.CreateLike copies a table.
// Not every form is covered yet (ErrNotDistributable names the rest),
// and NewTopology still refuses clusters of several shards.

// LocalSuffix is appended to a database's name to name the database of
// its shard-local tables on a sharded cluster.
const LocalSuffix = "_local"

// LocalTarget is the shard-local table behind the Distributed table t.
func LocalTarget(t Target) Target {
	return Target{Database: t.Database + LocalSuffix, Table: t.Table}
}

// Sharded reports whether t spreads rows over several shards.
func (t Topology) Sharded() bool { return t.Cluster != "" && t.Shards() > 1 }

// ShardingKey is the Distributed engine's sharding expression for a
// table sorted by orderBy (rendered ORDER BY items): sipHash64 of each
// item's text (toString), since 18.16's sipHash64 refuses some key types
// (UUID: code 43) and the text of a value identifies it within its type.
// Arrays are hashed as they are (sipHash64 takes them; toString does
// not). types maps a quoted column name to its type.
func ShardingKey(orderBy []string, types map[string]string) string {
	args := make([]string, len(orderBy))
	for i, item := range orderBy {
		if strings.HasPrefix(types[item], "Array(") {
			args[i] = item
		} else {
			args[i] = "toString(" + item + ")"
		}
	}
	return "sipHash64(" + strings.Join(args, ", ") + ")"
}

// columnTypes reads the column list of a CREATE TABLE this package
// rendered (rest follows the table's name): each quoted name's type.
func columnTypes(rest string) map[string]string {
	open := strings.IndexByte(rest, '(')
	if open < 0 {
		return nil
	}
	end := closingParen(rest, open)
	if end < 0 {
		return nil
	}
	types := map[string]string{}
	for _, def := range splitTopLevel(rest[open+1:end], ',') {
		def = strings.TrimSpace(def)
		s := scanner{sql: def}
		if !s.ident() {
			continue
		}
		typ := strings.TrimSpace(def[s.pos:])
		if at := topLevel(typ, "DEFAULT"); at >= 0 {
			typ = strings.TrimSpace(typ[:at])
		}
		types[def[:s.pos]] = typ
	}
	return types
}

// CreateDistributed renders the Distributed table t over its local table,
// on cluster, sharded by key (ShardingKey), with the local table's
// columns (CREATE ... AS copies them on each node, where the local table
// exists by then).
func CreateDistributed(cluster string, t Target, key string) string {
	local := LocalTarget(t)
	return "CREATE TABLE IF NOT EXISTS " + QuoteQualified(t) + " AS " + QuoteQualified(local) +
		" ENGINE = Distributed(" + QuoteString(cluster) + ", " + QuoteString(local.Database) + ", " +
		QuoteString(local.Table) + ", " + key + ")"
}

// DistributedKey reads the sharding expression of a Distributed table's
// engine_full (system.tables), as the server prints it.
func DistributedKey(engineFull string) (string, error) {
	args, err := distributedArgs(engineFull)
	if err != nil {
		return "", err
	}
	return args[3], nil
}

// distributedArgs reads the four arguments of a Distributed engine's
// engine_full (cluster, database and table literals, sharding key), each
// trimmed.
func distributedArgs(engineFull string) ([]string, error) {
	const head = "Distributed("
	if !strings.HasPrefix(engineFull, head) || !strings.HasSuffix(engineFull, ")") {
		return nil, fmt.Errorf("not a Distributed engine: %s", previewSQL(engineFull))
	}
	args := splitTopLevel(engineFull[len(head):len(engineFull)-1], ',')
	if len(args) != 4 {
		return nil, fmt.Errorf("a Distributed engine without a sharding key: %s", previewSQL(engineFull))
	}
	for i := range args {
		args[i] = strings.TrimSpace(args[i])
	}
	return args, nil
}

// Rename is one move of a RENAME TABLE.
type Rename struct{ From, To Target }

// ShardedRenames renders, for renames already applied to the local
// tables, the statements that leave one Distributed table per new name
// over the local table of that name, sharded by the key of the table it
// came from (keys holds each From's). Every new name's Distributed table
// is made again, even where one stood (the swap of a load's publish):
// a Distributed table keeps the columns it was created with, and the
// incoming table's may differ. Readers miss the name for a moment.
func ShardedRenames(cluster string, renames []Rename, keys map[Target]string) []string {
	targets := map[Target]bool{}
	for _, r := range renames {
		targets[r.To] = true
	}
	var stmts []string
	for _, r := range renames {
		if !targets[r.From] {
			stmts = append(stmts, DropTable(r.From))
		}
	}
	for _, r := range renames {
		stmts = append(stmts, DropTable(r.To), CreateDistributed(cluster, r.To, keys[r.From]))
	}
	return stmts
}

// renames reads the moves of a RENAME TABLE a TO b[, c TO d ...] this
// package rendered.
func renames(sql string) ([]Rename, bool) {
	s := scanner{sql: sql}
	if !s.keywords("RENAME", "TABLE") {
		return nil, false
	}
	var out []Rename
	for {
		from, _, ok := s.target(sql)
		if !ok || !s.keywords("TO") {
			return nil, false
		}
		to, _, ok := s.target(sql)
		if !ok {
			return nil, false
		}
		out = append(out, Rename{From: from, To: to})
		if s.end() {
			return out, true
		}
		if !s.punct(',') {
			return nil, false
		}
	}
}

// localRenames renders RENAME TABLE of the local tables behind renames.
func localRenames(renames []Rename) string {
	moves := make([]string, len(renames))
	for i, r := range renames {
		moves[i] = QuoteQualified(LocalTarget(r.From)) + " TO " + QuoteQualified(LocalTarget(r.To))
	}
	return "RENAME TABLE " + strings.Join(moves, ", ")
}

// KeyFunc reads the sharding key of an existing Distributed table.
type KeyFunc func(Target) (string, error)

// Statements returns what runs for sql (a statement this package renders
// for one server) on t, in order: sql as Distribute has it run, and on a
// sharded cluster the statements for the local tables and the
// Distributed ones, each ON CLUSTER. key reads the sharding key of a Distributed table
// that is re-created (a RENAME, a change of columns); only a sharded
// topology calls it.
func (t Topology) Statements(sql string, key KeyFunc) ([]string, error) {
	stmts, err := t.split(sql, key)
	if err != nil {
		return nil, err
	}
	for i, s := range stmts {
		if stmts[i], err = t.Distribute(s); err != nil {
			return nil, err
		}
	}
	return stmts, nil
}

// split is sql as the statements for one server that do its work on t:
// sql itself, except on a sharded cluster (shardedStatements).
func (t Topology) split(sql string, key KeyFunc) ([]string, error) {
	if !t.Sharded() {
		return []string{sql}, nil
	}
	return t.shardedStatements(sql, key)
}

// shardedStatements splits sql into its statements for the local and the
// Distributed tables, before ON CLUSTER is added.
func (t Topology) shardedStatements(sql string, key KeyFunc) ([]string, error) {
	refuse := func() ([]string, error) {
		return nil, fmt.Errorf("%w on a sharded cluster: %s", ErrNotDistributable, previewSQL(sql))
	}
	if moves, ok := renames(sql); ok {
		keys := make(map[Target]string, len(moves))
		for _, m := range moves {
			k, err := key(m.From)
			if err != nil {
				return nil, err
			}
			keys[m.From] = k
		}
		return append([]string{localRenames(moves)}, ShardedRenames(t.Cluster, moves, keys)...), nil
	}
	s := scanner{sql: sql}
	switch {
	case s.keywords("CREATE", "DATABASE"):
		s.keywords("IF", "NOT", "EXISTS")
		start := s.pos
		if !s.ident() || !s.end() {
			return refuse()
		}
		name, _, err := readIdent(strings.TrimSpace(sql[start:s.pos]))
		if err != nil {
			return refuse()
		}
		local, err := CreateDatabase(name + LocalSuffix)
		if err != nil {
			return nil, err
		}
		return []string{sql, local}, nil
	case s.keywords("CREATE", "TABLE"):
		s.keywords("IF", "NOT", "EXISTS")
		target, rest, ok := s.target(sql)
		if !ok || !strings.HasPrefix(strings.TrimLeft(rest, " \n"), "(") {
			return refuse() // CREATE ... AS: Conn.CreateLike
		}
		orderBy, ok := orderByList(rest)
		if !ok {
			return refuse()
		}
		items := splitTopLevel(orderBy, ',')
		for i := range items {
			items[i] = strings.TrimSpace(items[i])
		}
		return []string{s.localized(sql, target), CreateDistributed(t.Cluster, target, ShardingKey(items, columnTypes(rest)))}, nil
	case s.keywords("ALTER", "TABLE"):
		target, rest, ok := s.target(sql)
		if !ok {
			return refuse()
		}
		local := s.localized(sql, target)
		switch alterKind(rest) {
		case alterColumns:
			// 18.16 runs no ALTER ON CLUSTER of a table that is not
			// replicated in a cluster whose shards are (code 371), so the
			// Distributed table is made again over the altered local
			// tables: absent for a moment on each node, never wrong.
			k, err := key(target)
			if err != nil {
				return nil, err
			}
			return []string{local, DropTable(target), CreateDistributed(t.Cluster, target, k)}, nil
		case alterData:
			return []string{local}, nil
		}
	case s.keywords("DROP", "TABLE"):
		s.keywords("IF", "EXISTS")
		target, rest, ok := s.target(sql)
		if !ok || strings.TrimSpace(rest) != "" {
			return refuse()
		}
		// The Distributed table first: nothing reads a local table that is gone.
		return []string{sql, DropTable(LocalTarget(target))}, nil
	case s.keywords("INSERT"), s.keywords("SELECT"), s.keywords("WITH"), s.keywords("SHOW"), s.keywords("DESCRIBE"), s.keywords("EXISTS"):
		return []string{sql}, nil
	}
	return refuse()
}

// target reads the qualified name at the scanner's position; rest is what
// follows it. The scanner stays after the name.
func (s *scanner) target(sql string) (t Target, rest string, ok bool) {
	s.space()
	start := s.pos
	if !s.qualified() {
		return Target{}, "", false
	}
	t, err := parseQualified(sql[start:s.pos])
	if err != nil {
		return Target{}, "", false
	}
	s.nameStart, s.nameEnd = start, s.pos
	return t, sql[s.pos:], true
}

// localized is sql with the name target just read replaced by its local
// table's.
func (s *scanner) localized(sql string, t Target) string {
	return sql[:s.nameStart] + QuoteQualified(LocalTarget(t)) + sql[s.nameEnd:]
}

// orderByList is the list inside the top-level ORDER BY (...) of a
// CREATE TABLE this package rendered.
func orderByList(rest string) (string, bool) {
	at := topLevel(rest, "ORDER")
	if at < 0 {
		return "", false
	}
	s := scanner{sql: rest, pos: at}
	if !s.keywords("ORDER", "BY") || !s.punct('(') {
		return "", false
	}
	end := closingParen(rest, s.pos-1)
	if end < 0 {
		return "", false
	}
	list := strings.TrimSpace(rest[s.pos:end])
	return list, list != ""
}

// closingParen is the offset of the parenthesis that closes the one at
// sql[open], outside quotes, or -1.
func closingParen(sql string, open int) int {
	depth := 0
	for i := open; i < len(sql); i++ {
		switch sql[i] {
		case '\'', '`', '"':
			i = closingQuote(sql, i)
		case '(':
			depth++
		case ')':
			if depth--; depth == 0 {
				return i
			}
		}
	}
	return -1
}

type alterClass int

const (
	alterUnknown alterClass = iota
	alterColumns            // the table's columns: local and Distributed tables
	alterData               // its rows (mutations, partitions): local tables only
)

// alterKind classifies the commands of an ALTER TABLE (rest follows the
// table's name); commands of both classes in one ALTER are unknown.
func alterKind(rest string) alterClass {
	kind := alterUnknown
	for _, cmd := range splitTopLevel(rest, ',') {
		s := scanner{sql: cmd}
		var k alterClass
		switch {
		case s.keywords("ADD", "COLUMN"), s.keywords("DROP", "COLUMN"), s.keywords("MODIFY", "COLUMN"),
			s.keywords("RENAME", "COLUMN"), s.keywords("COMMENT", "COLUMN"):
			k = alterColumns
		case s.keywords("DELETE", "WHERE"), s.keywords("UPDATE"), s.keywords("DROP", "PARTITION"):
			k = alterData
		default:
			return alterUnknown
		}
		if kind != alterUnknown && kind != k {
			return alterUnknown
		}
		kind = k
	}
	return kind
}

// splitTopLevel splits sql at sep outside quotes and parentheses.
func splitTopLevel(sql string, sep byte) []string {
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(sql); i++ {
		switch c := sql[i]; {
		case c == '\'' || c == '`' || c == '"':
			i = closingQuote(sql, i)
		case c == '(':
			depth++
		case c == ')':
			depth--
		case c == sep && depth == 0:
			parts = append(parts, sql[start:i])
			start = i + 1
		}
	}
	return append(parts, sql[start:])
}
