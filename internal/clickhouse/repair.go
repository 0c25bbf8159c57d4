package clickhouse

import (
	"context"
	"fmt"
	"strings"

	clickhousego "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// RepairNodes gives every node of a cluster the tables of targets that
// some node holds and another lacks (dropped there by hand, a node
// rebuilt empty): the holder's definition runs again as CREATE TABLE IF
// NOT EXISTS ON CLUSTER under the holder's ZooKeeper path
// (joinExisting), so the node that lacked the table joins its replicas
// and fetches their rows; nothing is copied from the source. The
// reconcile at start reads one node only, and would not see it. A node
// that does not answer, or a table that cannot be re-created, is passed
// over and described in skipped: it concerns that node or table alone,
// and the next start tries again. err is only ctx's. It returns what it
// re-created, a sentence each. On shards it then makes the
// Distributed tables follow the local ones (repairDistributed), which a
// crash between a statement's local and Distributed steps leaves behind.
func (c *Conn) RepairNodes(ctx context.Context, targets []Target) (repaired, skipped []string, err error) {
	if c.topology.Cluster == "" {
		return nil, nil, nil
	}
	if c.topology.Sharded() {
		repaired, skipped, err = c.repairNodes(ctx, targets)
		if err != nil {
			return repaired, skipped, err
		}
		// After the nodes' tables: a local table re-created on a node
		// that lacked it has its Distributed table made there too.
		databases := map[string]bool{c.database: true}
		for _, t := range targets {
			databases[t.Database] = true
		}
		r, s, err := c.repairDistributed(ctx, databases)
		repaired, skipped = append(repaired, r...), append(skipped, s...)
		if err != nil && ctx.Err() == nil {
			// As a node that does not answer: the next start tries again.
			return repaired, append(skipped, fmt.Sprintf("the Distributed tables are not checked against their local tables: %v", err)), nil
		}
		return repaired, skipped, ctx.Err()
	}
	return c.repairNodes(ctx, targets)
}

// repairNodes is RepairNodes' per-node repair.
func (c *Conn) repairNodes(ctx context.Context, targets []Target) (repaired, skipped []string, err error) {
	if len(targets) == 0 {
		return nil, nil, nil
	}
	if c.topology.Sharded() {
		// The local tables first: a Distributed table is created AS its
		// local table's columns.
		locals := make([]Target, 0, 2*len(targets))
		for _, t := range targets {
			locals = append(locals, LocalTarget(t))
		}
		targets = append(locals, targets...)
	}
	databases := map[string]bool{}
	for _, t := range targets {
		databases[t.Database] = true
	}
	held := make([]map[Target]bool, len(c.topology.Nodes))
	var up []int
	for i, n := range c.topology.Nodes {
		tables, err := c.nodeTables(ctx, n, databases)
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("node %s did not answer (%v): the tables it lacks, if any, are not re-created", n.Addr(), err))
			continue
		}
		held[i] = tables
		up = append(up, i)
	}
	for _, t := range targets {
		var holder = -1
		var lacking []string
		for _, i := range up {
			if held[i][t] {
				holder = i
			} else {
				lacking = append(lacking, c.topology.Nodes[i].Addr())
			}
		}
		if holder < 0 || len(lacking) == 0 {
			continue
		}
		create, err := c.definitionOn(ctx, c.topology.Nodes[holder], t)
		if err == nil {
			// As shown, not through Exec: on shards Exec would take it for
			// a statement about the Distributed table's name.
			err = c.run(ctx, c.pool(), []string{create})
		}
		if ctx.Err() != nil {
			return repaired, skipped, ctx.Err()
		}
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("%s is not re-created on %s: %v", QuoteQualified(t), strings.Join(lacking, ", "), err))
			continue
		}
		repaired = append(repaired, fmt.Sprintf("%s on %s was missing; re-created there under its replicas' ZooKeeper path, it fetches their rows", QuoteQualified(t), strings.Join(lacking, ", ")))
	}
	return repaired, skipped, nil
}

// onNode runs fn over a connection of its own to node n (the DSN's user
// and settings with the node's address).
func (c *Conn) onNode(ctx context.Context, n Node, fn func(context.Context, driver.Conn) error) error {
	native, err := clickhousego.Open(nodeOptions(*c.opts, n))
	if err != nil {
		return err
	}
	defer native.Close()
	ctx, cancel := context.WithTimeout(ctx, NodeTimeout)
	defer cancel()
	return fn(ctx, native)
}

// nodeTables lists the tables node n holds in databases.
func (c *Conn) nodeTables(ctx context.Context, n Node, databases map[string]bool) (map[Target]bool, error) {
	var quoted []string
	for db := range databases {
		quoted = append(quoted, QuoteString(db))
	}
	tables := map[Target]bool{}
	err := c.onNode(ctx, n, func(ctx context.Context, native driver.Conn) error {
		rows, err := native.Query(ctx, "SELECT database, name FROM system.tables WHERE database IN ("+strings.Join(quoted, ", ")+")")
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var t Target
			if err := rows.Scan(&t.Database, &t.Table); err != nil {
				return err
			}
			tables[t] = true
		}
		return rows.Err()
	})
	return tables, err
}

// definitionOn is t's CREATE TABLE IF NOT EXISTS as node n holds it: its
// SHOW CREATE TABLE with the head rewritten (18.16 prints names
// unquoted where it can).
func (c *Conn) definitionOn(ctx context.Context, n Node, t Target) (string, error) {
	var shown string
	err := c.onNode(ctx, n, func(ctx context.Context, native driver.Conn) error {
		return native.QueryRow(ctx, "SHOW CREATE TABLE "+QuoteQualified(t)).Scan(&shown)
	})
	if err != nil {
		return "", fmt.Errorf("reading the definition of %s on %s: %w", QuoteQualified(t), n.Addr(), err)
	}
	body := columnsStart(shown)
	if body < 0 {
		return "", fmt.Errorf("the definition of %s on %s has no column list: %s", QuoteQualified(t), n.Addr(), previewSQL(shown))
	}
	return "CREATE TABLE IF NOT EXISTS " + QuoteQualified(t) + "\n" + shown[body:], nil
}

// columnsStart is the offset of the first parenthesis of sql outside
// quotes and backquotes: a CREATE TABLE's column list.
func columnsStart(sql string) int {
	for i := 0; i < len(sql); i++ {
		switch sql[i] {
		case '\'', '`', '"':
			i = closingQuote(sql, i)
		case '(':
			return i
		}
	}
	return -1
}
