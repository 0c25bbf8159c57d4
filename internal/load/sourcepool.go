package load

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Source connections kept between loads.
const (
	// sourceIdleFor closes a connection no load has used for this long:
	// a walshadow done loading holds none on the source.
	sourceIdleFor = 30 * time.Second
	// sourcePingAfter: a connection idle longer is pinged before a load
	// takes it (the source may have restarted meanwhile).
	sourcePingAfter = time.Second
)

// sourcePool keeps the loads' source connections between loads. A small
// table's load spent more time connecting (a backend started and
// authenticated, its settings made: about 90 ms here, twice per table)
// than copying its rows; on a first start over thousands of small tables
// that was half the time of every load.
type sourcePool struct {
	connect func(context.Context) (*pgx.Conn, error)
	max     int // idle connections kept

	mu     sync.Mutex
	idle   []idleSource
	closed bool
}

type idleSource struct {
	conn  *pgx.Conn
	since time.Time
}

func newSourcePool(max int, connect func(context.Context) (*pgx.Conn, error)) *sourcePool {
	return &sourcePool{connect: connect, max: max}
}

// get returns an idle connection that still answers, or a new one.
func (p *sourcePool) get(ctx context.Context) (*pgx.Conn, error) {
	for {
		p.mu.Lock()
		if len(p.idle) == 0 {
			p.mu.Unlock()
			return p.connect(ctx)
		}
		c := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		p.mu.Unlock()
		idle := time.Since(c.since)
		if idle < sourceIdleFor && (idle < sourcePingAfter || c.conn.Ping(ctx) == nil) {
			return c.conn, nil
		}
		closeSource(c.conn)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
}

// put hands conn back after a load's use: kept when it is between
// transactions and healthy, else closed (a COPY cut short, a failed
// query, a transaction still open).
func (p *sourcePool) put(conn *pgx.Conn) {
	if conn == nil {
		return
	}
	p.mu.Lock()
	keep := !p.closed && len(p.idle) < p.max && !conn.IsClosed() && conn.PgConn().TxStatus() == 'I'
	if keep {
		p.idle = append(p.idle, idleSource{conn: conn, since: time.Now()})
	}
	p.mu.Unlock()
	if !keep {
		closeSource(conn)
	}
}

// closeIdle closes the connections idle for sourceIdleFor (all: every
// one).
func (p *sourcePool) closeIdle(all bool) {
	p.mu.Lock()
	var gone []*pgx.Conn
	kept := p.idle[:0]
	for _, c := range p.idle {
		if all || time.Since(c.since) >= sourceIdleFor {
			gone = append(gone, c.conn)
		} else {
			kept = append(kept, c)
		}
	}
	p.idle = kept
	p.mu.Unlock()
	for _, c := range gone {
		closeSource(c)
	}
}

// run closes idle connections until ctx ends, then every one.
func (p *sourcePool) run(ctx context.Context) {
	tick := time.NewTicker(sourceIdleFor / 3)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			p.closeIdle(false)
		case <-ctx.Done():
			p.mu.Lock()
			p.closed = true
			p.mu.Unlock()
			p.closeIdle(true)
			return
		}
	}
}

func closeSource(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}
