package clickhouse

// This file owns what walshadow reads of each node of a cluster on its
// own, beside the one connection the output writes through: the node's
// version, its macros, whether ZooKeeper answers it and how far its
// replicas of the target database are behind (ReadNodes), and the pure
// verdict on a set of those facts (JudgeNodes). Preflight and
// `walshadow status` use them; neither writes anything.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	clickhousego "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// NodeTimeout bounds the reading of one node: a node that is down, or up
// but hung, is reported as such after this long while the others are
// read beside it.
var NodeTimeout = 5 * time.Second

// nodeDialTimeout bounds the connection and the handshake (a frozen
// server accepts the TCP connection but never answers the handshake).
const nodeDialTimeout = 3 * time.Second

// NodeFacts is what one node of a cluster told a direct connection.
type NodeFacts struct {
	Node Node
	// Err: the node could not be read (not reached, no answer within
	// NodeTimeout, a query refused). The fields below are then unknown,
	// except what was read before the failure.
	Err error
	// Version is SELECT version().
	Version string
	// Macros are system.macros (macro → substitution).
	Macros map[string]string
	// ZooKeeperErr: SELECT ... FROM system.zookeeper failed on this node
	// (it cannot reach ZooKeeper, or has no <zookeeper> section): its
	// Replicated tables are read-only and it runs no DDL ON CLUSTER.
	ZooKeeperErr error
	// Tables counts the node's Replicated tables of the database
	// (system.replicas); ReadOnly those of them that are read-only (the
	// node has no ZooKeeper session).
	Tables, ReadOnly uint64
	// ReplicationQueue sums system.replicas' queue_size over the
	// database: fetches, merges and mutations this node has yet to do to
	// catch up with the other replicas.
	ReplicationQueue uint64
	// MaxDelay is the largest absolute_delay over the database: how far
	// behind the other replicas the most behind table of this node is
	// (whole seconds).
	MaxDelay time.Duration
}

// Name is the node as the report names it: host:port, shard and replica
// as system.clusters numbers them.
func (f NodeFacts) Name() string {
	return fmt.Sprintf("%s (shard %d, replica %d)", f.Node.Addr(), f.Node.Shard, f.Node.Replica)
}

// ReadNodes reads every node of topo over a connection of its own, all
// at once: the DSN's user, password, database and TLS with the address
// replaced by the node's host and port from system.clusters. A node that
// does not answer within NodeTimeout has Err set; the others are read
// regardless. database is the one whose replicas are summed ("" is the
// DSN's). Errors name the node and the user, never the password.
func ReadNodes(ctx context.Context, cfg ConnConfig, topo Topology, database string) []NodeFacts {
	facts := make([]NodeFacts, len(topo.Nodes))
	opts, err := clickhousego.ParseDSN(cfg.DSN)
	if err != nil {
		// ParseDSN redacts the password from URL errors.
		for i, n := range topo.Nodes {
			facts[i] = NodeFacts{Node: n, Err: fmt.Errorf("node %s: parsing the ClickHouse DSN: %w", n.Addr(), err)}
		}
		return facts
	}
	if database == "" {
		database = opts.Auth.Database
	}
	if database == "" {
		database = "default"
	}
	if topo.Sharded() {
		database += LocalSuffix // the Replicated tables are the local ones
	}
	var wg sync.WaitGroup
	for i, n := range topo.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			facts[i] = readNode(ctx, *opts, cfg, n, database)
		}()
	}
	wg.Wait()
	return facts
}

// nodeOptions are opts (the DSN's, TLS applied) for one connection to
// node n alone, with the short timeouts a per-node read gets.
func nodeOptions(opts clickhousego.Options, n Node) *clickhousego.Options {
	opts.Addr = []string{net.JoinHostPort(n.Host, strconv.Itoa(int(n.Port)))}
	opts.DialTimeout, opts.ReadTimeout = nodeDialTimeout, NodeTimeout
	opts.MaxOpenConns, opts.MaxIdleConns = 1, 1
	return &opts
}

// readNode reads one node; opts is the DSN's, copied.
func readNode(ctx context.Context, opts clickhousego.Options, cfg ConnConfig, n Node, database string) NodeFacts {
	f := NodeFacts{Node: n}
	ctx, cancel := context.WithTimeout(ctx, NodeTimeout)
	defer cancel()
	if cfg.TLS != nil {
		opts.TLS = cfg.TLS
	}
	who := "node " + n.Addr()
	if opts.Auth.Username != "" {
		who += " as user " + strconv.Quote(opts.Auth.Username)
	}
	native, err := clickhousego.Open(nodeOptions(opts, n))
	if err != nil {
		f.Err = fmt.Errorf("connecting to %s: %w", who, err)
		return f
	}
	defer native.Close()
	if err := native.Ping(ctx); err != nil {
		f.Err = fmt.Errorf("connecting to %s: %w", who, err)
		return f
	}
	if err := native.QueryRow(ctx, "SELECT version()").Scan(&f.Version); err != nil {
		f.Err = fmt.Errorf("reading the version of %s: %w", who, err)
		return f
	}
	if f.Macros, err = readMacros(ctx, native); err != nil {
		f.Err = fmt.Errorf("reading system.macros of %s: %w", who, err)
		return f
	}
	var delay uint64
	err = native.QueryRow(ctx, "SELECT count(), countIf(is_readonly), sum(queue_size), max(absolute_delay) FROM system.replicas WHERE database = "+
		QuoteString(database)).Scan(&f.Tables, &f.ReadOnly, &f.ReplicationQueue, &delay)
	if err != nil {
		f.Err = fmt.Errorf("reading system.replicas of %s: %w", who, err)
		return f
	}
	f.MaxDelay = time.Duration(delay) * time.Second
	var roots uint64
	if err := native.QueryRow(ctx, ZooKeeperProbe).Scan(&roots); err != nil {
		f.ZooKeeperErr = fmt.Errorf("%s cannot read ZooKeeper: %w", who, err)
	}
	return f
}

// ErrorLine is err's first line, "…" marking the rest: a ClickHouse
// exception can run over many (18.16 adds a line per ZooKeeper address
// tried), and a report gives a node one line.
func ErrorLine(err error) string {
	if err == nil {
		return ""
	}
	first, _, more := strings.Cut(strings.TrimSpace(err.Error()), "\n")
	if more {
		return strings.TrimSpace(first) + " …"
	}
	return first
}

// ZooKeeperProbe is the query that answers only when the server it runs
// on reaches its ZooKeeper.
const ZooKeeperProbe = "SELECT count() FROM system.zookeeper WHERE path = '/'"

// readMacros reads system.macros (18.16: columns macro, substitution).
func readMacros(ctx context.Context, native driver.Conn) (map[string]string, error) {
	rows, err := native.Query(ctx, "SELECT macro, substitution FROM system.macros")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	macros := map[string]string{}
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return nil, err
		}
		macros[name] = value
	}
	return macros, rows.Err()
}

// JudgeNodes is what makes a cluster unfit for walshadow in the facts of
// the nodes that answered (a node that did not is judged by nobody: its
// Err says why): CheckDialects, then CheckMacros. nil: fit.
func JudgeNodes(facts []NodeFacts) error {
	return errors.Join(CheckDialects(facts), CheckMacros(facts))
}

// CheckDialects refuses nodes whose versions differ in what they can take
// (DialectFor, the version itself aside): walshadow renders every
// statement once, for the node the DSN reaches, and every node runs it.
// The error is one line naming each node's version.
func CheckDialects(facts []NodeFacts) error {
	var first *Dialect
	differ := false
	var versions, bad []string
	for _, f := range facts {
		if f.Err != nil {
			continue
		}
		d, err := ParseDialect(f.Version)
		if err != nil {
			bad = append(bad, fmt.Sprintf("node %s: %v", f.Node.Addr(), err))
			continue
		}
		versions = append(versions, f.Node.Addr()+" "+d.Version.String())
		d.Version = Version{}
		if first == nil {
			first = &d
		} else if d != *first {
			differ = true
		}
	}
	if len(bad) > 0 {
		return errors.New(strings.Join(bad, "; "))
	}
	if differ {
		return fmt.Errorf("the cluster's nodes run ClickHouse versions that differ in what they take (%s): walshadow renders each statement once, for every node",
			strings.Join(versions, ", "))
	}
	return nil
}

// CheckMacros refuses nodes whose {shard} and {replica} macros cannot
// place a Replicated table: every node needs both (walshadow's tables
// name them in their ZooKeeper path and replica name), the replicas of a
// shard must share {shard} (else each has a table of its own, not a
// replica of one) and differ in {replica} (ZooKeeper takes a replica name
// once per table). The error is one line naming each node at fault.
func CheckMacros(facts []NodeFacts) error {
	var problems []string
	byShard := map[uint32][]NodeFacts{}
	for _, f := range facts {
		if f.Err != nil {
			continue
		}
		var missing []string
		for _, m := range []string{"shard", "replica"} {
			if f.Macros[m] == "" {
				missing = append(missing, "{"+m+"}")
			}
		}
		if len(missing) > 0 {
			problems = append(problems, fmt.Sprintf("node %s has no %s macro (<macros> in its config)", f.Node.Addr(), strings.Join(missing, " or ")))
			continue
		}
		byShard[f.Node.Shard] = append(byShard[f.Node.Shard], f)
	}
	shards := make([]uint32, 0, len(byShard))
	for s := range byShard {
		shards = append(shards, s)
	}
	sort.Slice(shards, func(i, j int) bool { return shards[i] < shards[j] })
	for _, s := range shards {
		problems = append(problems, shardMacroProblems(s, byShard[s])...)
	}
	if len(problems) == 0 {
		return nil
	}
	return errors.New(strings.Join(problems, "; "))
}

// shardMacroProblems checks the macros of the replicas of one shard.
func shardMacroProblems(shard uint32, nodes []NodeFacts) []string {
	var problems []string
	shardValues := map[string][]string{}
	replicas := map[string][]string{}
	for _, f := range nodes {
		shardValues[f.Macros["shard"]] = append(shardValues[f.Macros["shard"]], f.Node.Addr())
		replicas[f.Macros["replica"]] = append(replicas[f.Macros["replica"]], f.Node.Addr())
	}
	if len(shardValues) > 1 {
		var parts []string
		for v, addrs := range shardValues {
			parts = append(parts, fmt.Sprintf("%s on %s", strconv.Quote(v), strings.Join(addrs, ", ")))
		}
		sort.Strings(parts)
		problems = append(problems, fmt.Sprintf("the replicas of shard %d differ in {shard} (%s): each would hold a table of its own instead of a replica of one", shard, strings.Join(parts, "; ")))
	}
	var dups []string
	for v, addrs := range replicas {
		if len(addrs) > 1 {
			dups = append(dups, fmt.Sprintf("nodes %s share {replica} %s", strings.Join(addrs, " and "), strconv.Quote(v)))
		}
	}
	sort.Strings(dups)
	for _, d := range dups {
		problems = append(problems, fmt.Sprintf("%s in shard %d: ZooKeeper takes a replica name once per table", d, shard))
	}
	return problems
}
