package clickhouse

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// A CREATE TABLE IF NOT EXISTS ON CLUSTER creates the table on the nodes
// that lack it and leaves the others alone. When some node already holds
// the table (the reconcile healing a node that lost it, a CREATE replayed
// after a crash), the new copy must join that table's replicas: under a
// new random path it would be a table of its own that never receives the
// others' rows. So before such a CREATE runs, the nodes' system.replicas
// are read for the table and an existing walshadow path is used instead.

// replicaPathArg finds the path argument CreateTable writes.
var replicaPathArg = regexp.MustCompile(`ReplicatedReplacingMergeTree\('(/clickhouse/tables/\{shard\}/walshadow/[0-9a-f]{32})'`)

// walshadowPath reads the random part of an expanded walshadow path
// (system.replicas shows it with {shard} expanded).
var walshadowPath = regexp.MustCompile(`^/clickhouse/tables/[^/]+/walshadow/([0-9a-f]{32})$`)

// joinExisting returns sql (a distributed CREATE TABLE) with its
// ZooKeeper path replaced by the one the nodes that hold the table use,
// if any do.
func (c *Conn) joinExisting(ctx context.Context, sql string) (string, error) {
	m := replicaPathArg.FindStringSubmatchIndex(sql)
	if m == nil {
		return sql, nil
	}
	s := scanner{sql: sql}
	if !s.keywords("CREATE", "TABLE") {
		return sql, nil
	}
	s.keywords("IF", "NOT", "EXISTS")
	start := s.pos
	if !s.qualified() {
		return sql, nil
	}
	t, err := parseQualified(strings.TrimSpace(sql[start:s.pos]))
	if err != nil {
		return "", err
	}
	seen := map[string]bool{}
	var found []string
	for _, n := range c.topology.Nodes {
		// A node that does not answer is passed over: if it holds the
		// table it holds it under the path the others do.
		paths, err := c.nodePaths(ctx, n, t)
		if err != nil {
			continue
		}
		for _, path := range paths {
			if pm := walshadowPath.FindStringSubmatch(path); pm != nil && !seen[pm[1]] {
				seen[pm[1]] = true
				found = append(found, pm[1])
			}
		}
	}
	switch len(found) {
	case 0:
		return sql, nil
	case 1:
		return sql[:m[2]] + "/clickhouse/tables/{shard}/walshadow/" + found[0] + sql[m[3]:], nil
	default:
		return "", fmt.Errorf("the nodes hold %s under %d ZooKeeper paths (%s): its copies do not replicate to each other; drop the stray ones", QuoteQualified(t), len(found), strings.Join(found, ", "))
	}
}

// parseQualified reads `db`.`table` as QuoteQualified writes it.
func parseQualified(q string) (Target, error) {
	var parts []string
	for i := 0; i < len(q); i++ {
		if q[i] != '`' {
			if q[i] == '.' {
				continue
			}
			return Target{}, fmt.Errorf("%q is not a quoted qualified name", q)
		}
		name, n, err := readIdent(q[i:])
		if err != nil {
			return Target{}, err
		}
		parts = append(parts, name)
		i += n - 1
	}
	if len(parts) != 2 {
		return Target{}, fmt.Errorf("%q is not a quoted qualified name", q)
	}
	return Target{Database: parts[0], Table: parts[1]}, nil
}

// readIdent reads the backquoted identifier q begins with, undoing
// QuoteIdent's escapes; n is its length in q.
func readIdent(q string) (name string, n int, err error) {
	var b strings.Builder
	for i := 1; i < len(q); i++ {
		switch c := q[i]; c {
		case '`':
			return b.String(), i + 1, nil
		case '\\':
			if i+1 >= len(q) {
				break
			}
			i++
			if q[i] == 'x' && i+2 < len(q) {
				if v, err := strconv.ParseUint(q[i+1:i+3], 16, 8); err == nil {
					b.WriteByte(byte(v))
					i += 2
					continue
				}
			}
			b.WriteByte(q[i])
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, fmt.Errorf("unterminated identifier %q", q)
}

// nodePaths reads the ZooKeeper paths node n's system.replicas holds for
// t.
func (c *Conn) nodePaths(ctx context.Context, n Node, t Target) ([]string, error) {
	var paths []string
	err := c.onNode(ctx, n, func(ctx context.Context, native driver.Conn) error {
		rows, err := native.Query(ctx, "SELECT zookeeper_path FROM system.replicas WHERE database = "+QuoteString(t.Database)+" AND table = "+QuoteString(t.Table))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var path string
			if err := rows.Scan(&path); err != nil {
				return err
			}
			paths = append(paths, path)
		}
		return rows.Err()
	})
	return paths, err
}
