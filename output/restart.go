package output

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/walshadow/walshadow/internal/clickhouse"
)

// ClickHouse restarts. A TRUNCATE mirrored while a query read the table
// leaves its parts on disk for a while, and a restart of ClickHouse then
// loads them again; the truncate's mutation (clickhouse.DeleteBefore)
// removes them, but only once the restarted server has applied it to
// them. Until then they show to every reader, and whatever the output
// copies out of such a table (a rekey's INSERT ... SELECT, a load's
// publish copying its delta table) would keep them for good. So the
// output knows the server's boot time: read at start and before a batch
// is written (at most once per restartCheckEvery; always after a batch
// failed, and right before rows are copied out of a table). When the
// server restarted (or at start, when the output cannot know), it waits
// until no truncate mutation of the tables it writes is unfinished before
// it writes on. Clients connect afresh to a restarted server without an
// error (clickhouse-go replaces a dead pooled connection silently), so
// the boot time, not a failed statement, is what tells.
//
// Between a check and the next statement lie microseconds, a restart
// takes seconds: a statement that copies rows right after its check
// cannot reach a server that restarted in between. Inserts, TRUNCATE and
// lookups of unchanged TOAST values (the newest version of a key, which
// the rows a restart brings back never are) need no check of their own.

// restartCheckEvery bounds how often a batch reads the server's uptime.
const restartCheckEvery = time.Second

// restartWaitLogEvery: while the output waits for truncate mutations,
// it names them this often.
const restartWaitLogEvery = 30 * time.Second

// restartGuard is what the output knows of the server's boot (o.mu).
type restartGuard struct {
	boot    clickhouse.Boot
	known   bool      // boot was read
	checked time.Time // when
	// suspect: a batch failed since; the next check reads the boot time
	// whatever the interval.
	suspect bool
	// waiting: the server restarted (or the output started) and the
	// truncate mutations of its tables were not seen finished yet.
	waiting bool
	// every is restartCheckEvery (tests shorten it); poll the interval
	// between two looks at system.mutations while waiting.
	every, poll time.Duration
}

// guardRestart returns once ClickHouse holds no rows a restart brought
// back into a table the output writes (o.mu held). force reads the boot
// time even within restartCheckEvery of the last reading. Its errors
// concern every table (errGlobal): a lost connection makes the batch
// wait and start over.
func (o *chOutput) guardRestart(ctx context.Context, force bool) error {
	g := &o.restart
	every := g.every
	if every == 0 {
		every = restartCheckEvery
	}
	if !force && !g.suspect && !g.waiting && g.known && time.Since(g.checked) < every {
		return nil
	}
	b, err := o.conn.Boot(ctx)
	if err != nil {
		g.suspect = true
		return globalf("checking whether ClickHouse restarted: %w", err)
	}
	g.checked = time.Now()
	switch {
	case !g.known:
		// The output's start: ClickHouse may have restarted while it was
		// down (a machine's reboot restarts both).
		g.waiting = true
	case b.Host != g.boot.Host:
		// Another node of a cluster (a failover): whether it restarted
		// is not known; it is treated as if it had.
		o.log.Infof("ClickHouse: now on %s (was %s): the output first waits until it holds no rows of a truncated table a restart could have brought back", b.Host, g.boot.Host)
		g.waiting = true
	case b.After(g.boot):
		o.log.Warnf("ClickHouse restarted (up since about %s; seen up since about %s before): the output waits until ClickHouse has removed again any rows of a truncated table the restart brought back, then writes on",
			b, g.boot)
		o.m.chRestarts.Incr(1)
		g.waiting = true
	}
	g.boot, g.known = b, true
	if g.waiting {
		if err := o.awaitTruncateBarriers(ctx); err != nil {
			g.suspect = true
			return globalf("waiting for ClickHouse's truncate mutations: %w", err)
		}
		g.waiting = false
	}
	g.suspect = false
	return nil
}

// awaitTruncateBarriers waits until ClickHouse reports no unfinished
// truncate mutation (clickhouse.DeleteBefore) of a table the output writes.
// Mutations of others (a user's ALTER ... DELETE) are not waited for:
// they concern no row a restart brought back.
func (o *chOutput) awaitTruncateBarriers(ctx context.Context) error {
	var targets []clickhouse.Target
	for _, a := range o.store.All() {
		if !a.Dropped && !a.Left {
			targets = append(targets, a.Target)
		}
	}
	poll := o.restart.poll
	if poll == 0 {
		poll = 250 * time.Millisecond
	}
	start := time.Now()
	var logged time.Time
	for {
		all, err := o.conn.UnfinishedMutations(ctx, targets)
		if err != nil {
			return err
		}
		var pending []clickhouse.Mutation
		for _, m := range all {
			if m.TruncateBarrier() {
				pending = append(pending, m)
			}
		}
		if len(pending) == 0 {
			if !logged.IsZero() {
				o.log.Infof("ClickHouse finished the truncate mutations after %s: writing on", time.Since(start).Round(time.Millisecond))
			}
			return nil
		}
		if logged.IsZero() || time.Since(logged) >= restartWaitLogEvery {
			what := make([]string, 0, min(len(pending), 5))
			for _, m := range pending[:min(len(pending), 5)] {
				what = append(what, fmt.Sprintf("%s %s (%s, %d parts to do)", clickhouse.QuoteQualified(m.Target), m.ID, m.Command, m.PartsToDo))
			}
			more := ""
			if len(pending) > len(what) {
				more = fmt.Sprintf(" and %d more", len(pending)-len(what))
			}
			o.log.Warnf("waiting %s for ClickHouse to finish %d truncate mutation(s) (until they are done, the rows a restart brought back show; if one never finishes, ClickHouse's log says why): %s%s",
				time.Since(start).Round(time.Second), len(pending), strings.Join(what, "; "), more)
			logged = time.Now()
		}
		timer := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-timer.C:
		}
	}
}
