package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	clickhousego "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Failover between the replicas a cluster's DSN lists.
//
// On a cluster every replica holds every row, but not at once: an insert
// acknowledged by one replica reaches the others when they fetch its
// part. Writes may go to any replica (ReplacingMergeTree converges on
// _lsn whichever node took a version), but a read-back (an unchanged
// TOAST value, a publish's or a rekey's INSERT ... SELECT) must see
// every row walshadow was told is in. So the connection is pinned to one
// host at a time rather than spread by the driver: it moves to the next
// host of the DSN that answers only when the current one fails at the
// network level, and the first read after a move waits until the new
// node has fetched every part walshadow's tables are due (SYSTEM SYNC
// REPLICA), or fails with a retryable error naming the node and table
// (the node before it holds parts no one else has yet: the read waits
// for it to return).

// failoverPing bounds the check that a host answers before it is used.
const failoverPing = 5 * time.Second

// syncWait bounds one SYSTEM SYNC REPLICA (its receive_timeout).
const syncWait = 30 * time.Second

// Failover is called when the connection moves from one host to another
// because of err.
type Failover func(from, to string, err error)

// pool is the pool of the host in use.
func (c *Conn) pool() driver.Conn {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.native
}

// Host is the host:port the connection uses now.
func (c *Conn) Host() string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if len(c.addrs) == 0 {
		return c.hosts
	}
	return c.addrs[c.current]
}

// openPinned opens a pool to the first host of opts.Addr that answers.
func (c *Conn) openPinned(ctx context.Context, opts *clickhousego.Options) (driver.Conn, error) {
	var errs []string
	for i, addr := range c.addrs {
		native, err := c.openHost(ctx, opts, addr)
		if err == nil {
			c.current = i
			return native, nil
		}
		errs = append(errs, fmt.Sprintf("%s: %v", addr, err))
	}
	return nil, fmt.Errorf("no host answers (%s)", strings.Join(errs, "; "))
}

func (c *Conn) openHost(ctx context.Context, opts *clickhousego.Options, addr string) (driver.Conn, error) {
	one := *opts
	one.Addr = []string{addr}
	native, err := clickhousego.Open(&one)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, failoverPing)
	defer cancel()
	if err := native.Ping(pctx); err != nil {
		native.Close()
		return nil, err
	}
	return native, nil
}

// noteFailure hears of err from a call on pool p. A network failure of
// the host in use moves the connection to the next host that answers;
// the caller's retry goes there.
func (c *Conn) noteFailure(p driver.Conn, err error) {
	if err == nil || len(c.addrs) < 2 || !IsRetryable(err) || isServerException(err) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.native != p {
		return // another call moved it already
	}
	from := c.addrs[c.current]
	for i := 1; i < len(c.addrs); i++ {
		next := (c.current + i) % len(c.addrs)
		native, perr := c.openHost(context.Background(), c.opts, c.addrs[next])
		if perr != nil {
			continue
		}
		old := c.native
		c.native, c.current = native, next
		c.unsynced = true
		go old.Close()
		if c.onFailover != nil {
			c.onFailover(from, c.addrs[next], err)
		}
		return
	}
}

func isServerException(err error) bool {
	var exception *clickhousego.Exception
	return errors.As(err, &exception)
}

// readBarrier makes the first read after a move wait until the node in
// use has fetched every part of walshadow's tables (ZooKeeper paths under
// /walshadow/) its replication queue holds.
func (c *Conn) readBarrier(ctx context.Context) error {
	if len(c.addrs) == 0 {
		return nil // not pinned: one server, or the driver's choice
	}
	c.syncMu.Lock()
	defer c.syncMu.Unlock()
	c.mu.RLock()
	unsynced, p, host := c.unsynced, c.native, c.addrs[c.current]
	c.mu.RUnlock()
	if !unsynced {
		return nil
	}
	rows, err := p.Query(ctx, "SELECT database, table FROM system.replicas WHERE zookeeper_path LIKE '/clickhouse/tables/%/walshadow/%'")
	if err != nil {
		c.noteFailure(p, err)
		return fmt.Errorf("listing the replicated tables of %s: %w", host, err)
	}
	var tables []Target
	for rows.Next() {
		var t Target
		if err := rows.Scan(&t.Database, &t.Table); err != nil {
			rows.Close()
			return fmt.Errorf("listing the replicated tables of %s: %w", host, err)
		}
		tables = append(tables, t)
	}
	rows.Close()
	sctx := clickhousego.Context(ctx, clickhousego.WithSettings(clickhousego.Settings{"receive_timeout": int(c.serverWait(syncWait) / time.Second)}))
	for _, t := range tables {
		if err := p.Exec(sctx, "SYSTEM SYNC REPLICA "+QuoteQualified(t)); err != nil {
			c.noteFailure(p, err)
			return fmt.Errorf("node %s has not fetched every part of %s that another replica took (it is read only once it has): %w", host, QuoteQualified(t), err)
		}
	}
	c.mu.Lock()
	if c.native == p {
		c.unsynced = false
	}
	c.mu.Unlock()
	return nil
}
