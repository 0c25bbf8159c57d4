package clickhouse

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Topology is where walshadow's tables live: one server (the zero value),
// or a cluster named in the server's remote_servers. It decides what no
// caller spells itself: that DDL runs ON CLUSTER (Distribute), that
// tables are Replicated (Dialect.Replicated), and what a node that did
// not apply a statement is called in an error.
//
// Only clusters of one shard are taken for now: every node holds every
// row, so a read on any node is the table and an insert into any node is
// replicated to the others by ZooKeeper. Several shards need a
// Distributed table over shard-local ones and a sharding key that keeps
// every version of a row on one shard; until then they are refused.
type Topology struct {
	// Cluster is the cluster's name; "" for one server.
	Cluster string
	// Nodes are the cluster's nodes from system.clusters, by shard then
	// replica.
	Nodes []Node
}

// Node is one row of system.clusters.
type Node struct {
	Host    string
	Port    uint16
	Shard   uint32
	Replica uint32
}

// Addr is host:port as the node names itself in the cluster.
func (n Node) Addr() string { return fmt.Sprintf("%s:%d", n.Host, n.Port) }

// Shards counts the cluster's shards (1 for one server).
func (t Topology) Shards() int {
	seen := map[uint32]bool{}
	for _, n := range t.Nodes {
		seen[n.Shard] = true
	}
	return max(len(seen), 1)
}

// String describes the topology for a log line.
func (t Topology) String() string {
	if t.Cluster == "" {
		return "one server"
	}
	addrs := make([]string, len(t.Nodes))
	for i, n := range t.Nodes {
		addrs[i] = fmt.Sprintf("%s (shard %d, replica %d)", n.Addr(), n.Shard, n.Replica)
	}
	return fmt.Sprintf("cluster %s: %d shard(s), nodes %s", QuoteIdent(t.Cluster), t.Shards(), strings.Join(addrs, ", "))
}

// NewTopology checks a cluster's rows from system.clusters: the cluster
// must exist (known lists every cluster the server has, for the error)
// and have one shard or shards of one replica each.
func NewTopology(cluster string, nodes []Node, known []string) (Topology, error) {
	if cluster == "" {
		return Topology{}, nil
	}
	if len(nodes) == 0 {
		sort.Strings(known)
		list := "none"
		if len(known) > 0 {
			q := make([]string, len(known))
			for i, k := range known {
				q[i] = QuoteIdent(k)
			}
			list = strings.Join(q, ", ")
		}
		return Topology{}, fmt.Errorf("cluster %s is not in the server's system.clusters (its clusters: %s)", QuoteIdent(cluster), list)
	}
	sort.Slice(nodes, func(i, j int) bool {
		if nodes[i].Shard != nodes[j].Shard {
			return nodes[i].Shard < nodes[j].Shard
		}
		return nodes[i].Replica < nodes[j].Replica
	})
	t := Topology{Cluster: cluster, Nodes: nodes}
	if s := t.Shards(); s > 1 {
		// Two replicas of one shard would both run a local table's
		// ALTER ... ON CLUSTER, and 18.16's DDL worker races on that
		// (one runs it, the other fails and stalls the queue): on one
		// shard the ALTER runs on the node in use alone, which a
		// sharded layout cannot do.
		replicas := map[uint32]int{}
		for _, n := range nodes {
			replicas[n.Shard]++
			if replicas[n.Shard] > 1 {
				return Topology{}, fmt.Errorf("cluster %s has %d shards and shard %d has several replicas: walshadow replicates into a cluster of one shard (any number of replicas) or of several shards of one replica each", QuoteIdent(cluster), s, n.Shard)
			}
		}
	}
	return t, nil
}

// ReplicaPath is a new ZooKeeper path for one Replicated table: under
// the {shard} macro, a random name. Random, not built from the table's
// name, because a name does not identify a table over time: RENAME keeps
// a table's path, so a table created later under the old name would
// share a live table's path, and a node that missed a DROP would offer
// the dropped table's parts to a new one under the same name. Every node
// reads the same path since the CREATE is one ON CLUSTER statement;
// system.replicas maps a table to its path.
func ReplicaPath() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("reading random bytes: %v", err))
	}
	return "/clickhouse/tables/{shard}/walshadow/" + hex.EncodeToString(b[:])
}

// replicatedEngine is ReplicatedReplacingMergeTree on path with the
// {replica} macro and the version arguments args.
func replicatedEngine(path, args string) string {
	return "ReplicatedReplacingMergeTree(" + QuoteString(path) + ", '{replica}', " + args + ")"
}

// ErrNotDistributable: a DDL statement of a form Distribute does not
// know. Failing is the point: a statement run on one node of a cluster
// would leave the others behind without a word.
var ErrNotDistributable = errors.New("statement form not known to run ON CLUSTER")

// Distribute returns sql as it runs on t: unchanged on one server, for
// statements that are not DDL (INSERT, SELECT: replication carries an
// insert to the other replicas) and for an ALTER on one shard (a
// Replicated table replicates its own ALTERs), else with ON CLUSTER
// where the statement's grammar puts it. sql is one of the forms this package
// renders, with identifiers quoted by QuoteIdent.
func (t Topology) Distribute(sql string) (string, error) {
	if t.Cluster == "" {
		return sql, nil
	}
	on := " ON CLUSTER " + QuoteIdent(t.Cluster)
	s := scanner{sql: sql}
	switch {
	case s.keywords("CREATE", "DATABASE"):
		s.keywords("IF", "NOT", "EXISTS")
		if !s.ident() {
			break
		}
		return sql[:s.pos] + on + sql[s.pos:], nil
	case s.keywords("CREATE", "TABLE"):
		s.keywords("IF", "NOT", "EXISTS")
		if !s.qualified() {
			break
		}
		return sql[:s.pos] + on + sql[s.pos:], nil
	case s.keywords("ALTER", "TABLE"):
		if !s.qualified() {
			break
		}
		if !t.Sharded() {
			// One shard: an ALTER of a Replicated table (columns,
			// mutations, partitions) replicates itself, and the node that
			// runs it waits for the active replicas. ON CLUSTER, 18.16's
			// DDL worker lets one replica run it under a lock and the
			// others skip it, and that races: the other replica ran an ADD
			// COLUMN again (code 44), failed to mark the task executed
			// (node exists) and never finished that task, nor any after it
			// (randomized workload, seed 179477).
			return sql, nil
		}
		return sql[:s.pos] + on + sql[s.pos:], nil
	case s.keywords("TRUNCATE", "TABLE"):
		// ON CLUSTER, 18.16's TRUNCATE of a Replicated table deadlocks
		// (truncate_replicated.go): Conn.Exec drops its partitions.
		return "", fmt.Errorf("%w (a TRUNCATE of Replicated tables runs as partition drops): %s", ErrNotDistributable, previewSQL(sql))
	case s.keywords("DROP", "TABLE"):
		s.keywords("IF", "EXISTS")
		if !s.qualified() || !s.end() {
			break
		}
		return sql + on, nil
	case s.keywords("RENAME", "TABLE"):
		for {
			if !s.qualified() || !s.keywords("TO") || !s.qualified() {
				return "", fmt.Errorf("%w: %s", ErrNotDistributable, previewSQL(sql))
			}
			if s.end() {
				return sql + on, nil
			}
			if !s.punct(',') {
				break
			}
		}
	case s.keywords("EXCHANGE", "TABLES"):
		if !s.qualified() || !s.keywords("AND") || !s.qualified() || !s.end() {
			break
		}
		return sql + on, nil
	case s.keywords("INSERT"), s.keywords("SELECT"), s.keywords("WITH"), s.keywords("SHOW"), s.keywords("DESCRIBE"), s.keywords("EXISTS"):
		return sql, nil
	}
	return "", fmt.Errorf("%w: %s", ErrNotDistributable, previewSQL(sql))
}

// scanner reads the head of a statement rendered by this package:
// keywords, backquoted identifiers as QuoteIdent writes them, and
// whitespace.
type scanner struct {
	sql string
	pos int
	// nameStart and nameEnd bound the last name target read.
	nameStart, nameEnd int
}

func (s *scanner) space() {
	for s.pos < len(s.sql) && strings.IndexByte(" \t\n\r", s.sql[s.pos]) >= 0 {
		s.pos++
	}
}

// keywords consumes words (case-insensitive, each followed by a
// non-word byte) or, when they do not all follow, nothing.
func (s *scanner) keywords(words ...string) bool {
	start := s.pos
	for _, w := range words {
		s.space()
		end := s.pos + len(w)
		if end > len(s.sql) || !strings.EqualFold(s.sql[s.pos:end], w) || end < len(s.sql) && wordByte(s.sql[end]) {
			s.pos = start
			return false
		}
		s.pos = end
	}
	return true
}

// ident consumes one backquoted identifier.
func (s *scanner) ident() bool {
	s.space()
	if s.pos >= len(s.sql) || s.sql[s.pos] != '`' {
		return false
	}
	for i := s.pos + 1; i < len(s.sql); i++ {
		switch s.sql[i] {
		case '\\':
			i++
		case '`':
			s.pos = i + 1
			return true
		}
	}
	return false
}

// qualified consumes `db`.`table`.
func (s *scanner) qualified() bool {
	start := s.pos
	if s.ident() && s.pos < len(s.sql) && s.sql[s.pos] == '.' {
		s.pos++
		if s.ident() {
			return true
		}
	}
	s.pos = start
	return false
}

func (s *scanner) punct(c byte) bool {
	s.space()
	if s.pos < len(s.sql) && s.sql[s.pos] == c {
		s.pos++
		return true
	}
	return false
}

func (s *scanner) end() bool {
	s.space()
	return s.pos == len(s.sql)
}

// topLevel returns the offset of the first occurrence of word (a
// keyword, case-sensitive as ClickHouse prints it) in sql outside
// quotes, backquotes and parentheses, or -1.
func topLevel(sql, word string) int {
	depth := 0
	for i := 0; i < len(sql); i++ {
		switch c := sql[i]; c {
		case '\'', '`', '"':
			i = closingQuote(sql, i)
		case '(':
			depth++
		case ')':
			depth--
		default:
			if depth == 0 && strings.HasPrefix(sql[i:], word) && (i == 0 || !wordByte(sql[i-1])) &&
				(i+len(word) == len(sql) || !wordByte(sql[i+len(word)])) {
				return i
			}
		}
	}
	return -1
}

// closingQuote is the offset of the quote that closes the one at sql[i]
// (a backslash escapes the byte after it), or len(sql).
func closingQuote(sql string, i int) int {
	q := sql[i]
	for i++; i < len(sql) && sql[i] != q; i++ {
		if sql[i] == '\\' {
			i++
		}
	}
	return i
}

// CreateLikeReplicated renders the CREATE of table t with the structure
// and engine of the table whose SHOW CREATE TABLE is shown, under a new
// ZooKeeper path (a copy of a Replicated table's engine as it stands
// would name the original's path and replica, which ClickHouse refuses
// as a replica that exists). The original's engine must be one this
// package rendered: ReplicatedReplacingMergeTree('<path>', '{replica}', ...).
func CreateLikeReplicated(t, like Target, shown, path string) (string, error) {
	at := topLevel(shown, "ENGINE")
	if at < 0 {
		return "", fmt.Errorf("SHOW CREATE TABLE %s has no ENGINE clause: %s", QuoteQualified(like), previewSQL(shown))
	}
	engine := shown[at:]
	const head = "ENGINE = ReplicatedReplacingMergeTree('"
	if !strings.HasPrefix(engine, head) {
		return "", fmt.Errorf("%s is not a ReplicatedReplacingMergeTree walshadow created: %s", QuoteQualified(like), previewSQL(engine))
	}
	rest := engine[len(head):]
	end := -1
	for i := 0; i < len(rest); i++ {
		if rest[i] == '\\' {
			i++
			continue
		}
		if rest[i] == '\'' {
			end = i
			break
		}
	}
	if end < 0 {
		return "", fmt.Errorf("%s: unterminated ZooKeeper path in %s", QuoteQualified(like), previewSQL(engine))
	}
	return "CREATE TABLE " + QuoteQualified(t) + " AS " + QuoteQualified(like) + " " +
		"ENGINE = ReplicatedReplacingMergeTree(" + QuoteString(path) + rest[end+1:], nil
}
