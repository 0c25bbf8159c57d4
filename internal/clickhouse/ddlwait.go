package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	clickhousego "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// A statement ON CLUSTER is queued in ZooKeeper; every node runs it from
// the queue, in queue order, and the server that took it waits up to
// distributed_ddl_task_timeout for their answers, then fails with
// TIMEOUT_EXCEEDED naming the task while the statement stays queued for
// the nodes that have not run it (a node that is down runs it when it
// returns). Issuing it again would queue it twice, and a statement of
// 18.16 without IF [NOT] EXISTS fails its second run; so walshadow waits
// on the task it queued instead, reading the task's finished/ children
// in system.zookeeper, and counts the statement applied only when every
// node of the cluster has finished it without error.

// ddlServerWait is how long the server waits on the nodes before it
// hands the wait back (distributed_ddl_task_timeout): the wait goes on
// here, and a node still missing is named each time it has.
var ddlServerWait = 20 * time.Second

// ddlPoll is how often a handed-back task's progress is read.
const ddlPoll = time.Second

// ClusterWait is called while a statement ON CLUSTER waits on nodes
// that have not run it: the statement's head, the nodes (host:port), and
// how long it has waited. Called at most once per ddlServerWait.
type ClusterWait func(statement string, missing []string, waited time.Duration)

var ddlTaskPath = regexp.MustCompile(`Watching task (/\S+/query-\d+) is executing longer than`)

// ddlTask returns the task a TIMEOUT_EXCEEDED of a distributed statement
// names.
func ddlTask(err error) (string, bool) {
	var exception *clickhousego.Exception
	if !errors.As(err, &exception) || exception.Code != 159 {
		return "", false
	}
	m := ddlTaskPath.FindStringSubmatch(exception.Message)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// execOnCluster runs a statement Distribute put ON CLUSTER and returns
// once every node has applied it (or one failed it, or ctx ends).
func (c *Conn) execOnCluster(ctx context.Context, p driver.Conn, sql string) error {
	started := time.Now()
	// Twice the seconds: 18.16 reads this setting as a signed (zigzag)
	// varint, which clickhouse-go sends unsigned (5 arrives as -3, an
	// endless wait; 2n arrives as n); servers that take settings as
	// strings read 2n, a longer wait and no harm.
	err := p.Exec(clickhousego.Context(ctx, clickhousego.WithSettings(clickhousego.Settings{
		"distributed_ddl_task_timeout": 2 * int(c.serverWait(ddlServerWait)/time.Second),
	})), sql)
	task, queued := ddlTask(err)
	if !queued {
		return err
	}
	var last time.Time
	for {
		missing, failed, err := c.ddlProgress(ctx, p, task)
		switch {
		case err != nil:
			return fmt.Errorf("reading the progress of %s in ZooKeeper: %w", task, err)
		case failed != "":
			return fmt.Errorf("a node failed it (task %s): %s", task, failed)
		case len(missing) == 0:
			return nil
		}
		if c.onWait != nil && time.Since(last) >= ddlServerWait {
			last = time.Now()
			c.onWait(StatementHead(sql), missing, time.Since(started).Round(time.Second))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not yet run on %s after %s (task %s stays queued for them): %w",
				strings.Join(missing, ", "), time.Since(started).Round(time.Second), task, ctx.Err())
		case <-time.After(ddlPoll):
		}
	}
}

// ddlProgress reads task's finished/ children: the cluster's nodes that
// have not finished it, and the first error one finished it with.
func (c *Conn) ddlProgress(ctx context.Context, p driver.Conn, task string) (missing []string, failed string, err error) {
	rows, err := p.Query(ctx, "SELECT name, value FROM system.zookeeper WHERE path = "+QuoteString(task+"/finished"))
	if err != nil {
		return nil, "", err
	}
	defer rows.Close()
	done := map[string]bool{}
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return nil, "", err
		}
		host := hostID(name)
		done[host] = true
		if code, msg, ok := ddlStatus(value); ok && code != 0 && failed == "" {
			failed = fmt.Sprintf("%s: code %d: %s", host, code, msg)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, "", err
	}
	for _, n := range c.topology.Nodes {
		if !done[n.Addr()] {
			missing = append(missing, n.Addr())
		}
	}
	slices.Sort(missing)
	return missing, failed, nil
}

// hostID reads a node's name in a task (host escaped for a file name,
// then :port) as host:port.
func hostID(name string) string {
	if s, err := url.PathUnescape(name); err == nil {
		return s
	}
	return name
}

// ddlStatus reads a finished node's status: its exception code, then
// the message on the next line.
func ddlStatus(value string) (int, string, bool) {
	first, rest, _ := strings.Cut(value, "\n")
	code, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		return 0, "", false
	}
	return code, strings.TrimSpace(rest), true
}

// serverWait is d, or less when the connection's read timeout would end
// the wait first: the server sends nothing while it waits, and a read
// timed out on the client looks like a node that hangs (failover.go).
func (c *Conn) serverWait(d time.Duration) time.Duration {
	if c.opts != nil && c.opts.ReadTimeout > 0 && d > c.opts.ReadTimeout/2 {
		d = c.opts.ReadTimeout / 2
	}
	return max(d.Truncate(time.Second), time.Second)
}
