package load

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walshadow/walshadow/internal/testrig"
)

// TestSourcePool: a connection handed back between transactions is the
// next load's; one in a transaction, closed, or past the pool's size is
// closed; one the source ended while idle is replaced; closing the pool
// closes every idle one.
func TestSourcePool(t *testing.T) {
	pg := testrig.StartPostgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	connects := 0
	p := newSourcePool(2, func(ctx context.Context) (*pgx.Conn, error) {
		connects++
		return pgx.Connect(ctx, pg.DSN())
	})
	pid := func(c *pgx.Conn) uint32 { return c.PgConn().PID() }

	a, err := p.get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p.put(a)
	again, err := p.get(ctx)
	if err != nil || again != a || connects != 1 {
		t.Fatalf("a connection handed back was not reused: %v, %d connects", err, connects)
	}

	// In a transaction: closed, not kept.
	if _, err := again.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	p.put(again)
	if !again.IsClosed() {
		t.Fatal("a connection handed back in a transaction was kept open")
	}

	// The pool keeps at most 2.
	var held []*pgx.Conn
	for range 3 {
		c, err := p.get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	for _, c := range held {
		p.put(c)
	}
	if len(p.idle) != 2 || !held[2].IsClosed() {
		t.Fatalf("%d idle after handing back 3 to a pool of 2 (the third closed: %v)", len(p.idle), held[2].IsClosed())
	}

	// One the source ended while it was idle is not handed out.
	victim := p.idle[len(p.idle)-1]
	victim.since = time.Now().Add(-2 * sourcePingAfter)
	p.idle[len(p.idle)-1] = victim
	pg.Exec(t, "SELECT pg_terminate_backend($1)", int(pid(victim.conn)))
	c, err := p.get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c == victim.conn {
		t.Fatal("a connection the source terminated was handed out")
	}
	var one int
	if err := c.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Fatalf("the connection handed out instead: %v", err)
	}
	p.put(c)

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { p.run(runCtx); close(done) }()
	stop()
	<-done
	if len(p.idle) != 0 || !c.IsClosed() {
		t.Fatalf("after the pool stopped: %d idle, the last one closed: %v", len(p.idle), c.IsClosed())
	}
	late, err := p.get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p.put(late)
	if !late.IsClosed() {
		t.Fatal("a stopped pool kept a connection")
	}
}
