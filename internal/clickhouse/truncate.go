package clickhouse

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// A source TRUNCATE and ClickHouse restarts (see "Restarts" in the package
// documentation for why DROP TABLE and RENAME need nothing of this).
//
// ClickHouse 18.16's TRUNCATE TABLE of a MergeTree table takes its parts
// out of the table at once, but not every part directory off the disk:
// the parts a merge replaced stay for old_parts_lifetime (8 minutes), and
// parts a query holds until the background cleanup finds them free
// (measured: 20 inserts of 640 rows, merged as they came, then TRUNCATE,
// with or without a reader). A restart before they are gone (a crash, an
// OOM kill) loads them again, nothing covering them any more: the rows of
// the table before the TRUNCATE are back, and stay. So a TRUNCATE is
// mirrored by two statements (PlanTruncate): the
// TRUNCATE TABLE, then DeleteBefore's mutation, ALTER TABLE ... DELETE
// WHERE _lsn < X, X being the TRUNCATE's own WAL position. The mutation is
// durable (a mutation_N.txt file in the table's directory) and applies to
// every part whose data version is below N: the table is empty when it is
// made, so it is done at once, and after a restart the server applies it
// to the parts the restart brought back, which are all older than it.
//
// Why _lsn < X removes exactly the rows the TRUNCATE removed, no more:
//
//   - Every row the table holds when the TRUNCATE is applied has _lsn < X.
//     Changes are applied in commit order, whole transactions at a time,
//     each row carrying its own record's position. A transaction applied
//     before the TRUNCATE committed before the TRUNCATE's transaction did;
//     if it wrote the table it held a ROW EXCLUSIVE lock on it until its
//     commit (COMMIT PREPARED for a prepared one), and the TRUNCATE needs
//     ACCESS EXCLUSIVE: the TRUNCATE was logged after that commit, so
//     after every record of that transaction. Rows the TRUNCATE's own
//     transaction wrote before it precede it in the WAL. Rows of an
//     initial load carry S, just below the WAL position read before the
//     load's xid; a TRUNCATE applied to a published load is one the
//     load's snapshot did not see, whose transaction got its xid after
//     the load's, so its records follow that position: X > S. (A TRUNCATE
//     the load did see is not applied; one during the load is applied to
//     the delta table, which then holds only streamed changes, and starts
//     the load over with a new S past X.) Change-log tables (ordered by
//     (_lsn, _seq)), delete markers of keyless tables and rows a rekey
//     copied keep their change's own _lsn too.
//   - Every row written after the TRUNCATE has _lsn > X: rows of the
//     TRUNCATE's transaction after it follow it in the WAL; another
//     transaction can write the table only once the TRUNCATE's
//     transaction released its lock, at its commit, after X; a load that
//     starts over because of the TRUNCATE reads its position after X.
//     Those rows also land in parts newer than the mutation, which never
//     applies to them; the predicate would spare them anyway.
//
// Only a restart between the TRUNCATE and the server finishing the
// mutation on the parts it brought back shows those rows: the output
// reads the server's boot time (Conn.Boot) before it writes and, when
// the server restarted, waits until no truncate barrier of its tables is
// unfinished (Conn.UnfinishedMutations, Mutation.TruncateBarrier) before
// it writes on, so that nothing it copies out of a table (a rekey, a
// load's publish) carries those rows along.

// DeleteBefore is the mutation that keeps a TRUNCATE at position lsn from
// being undone by a restart: ALTER TABLE t DELETE WHERE _lsn < lsn.
func DeleteBefore(t Target, lsn uint64) string {
	return fmt.Sprintf("ALTER TABLE %s DELETE WHERE %s < %d", QuoteQualified(t), QuoteIdent(ColLSN), lsn)
}

// truncateBarrierHead is how ClickHouse lists DeleteBefore's mutation in
// system.mutations (command, backticks taken out).
const truncateBarrierHead = "DELETE WHERE " + ColLSN + " < "

// Boot is when a ClickHouse server started, as one SELECT uptime() tells
// it: between Earliest and Latest, on this process's monotonic clock.
// uptime() counts whole seconds, so the window is the query's round trip
// plus one second wide. Read is when the answer came.
type Boot struct {
	Earliest, Latest, Read time.Time
	// Host is the server read: on a cluster the connection can move to
	// another node (failover.go), whose boot time says nothing of this
	// one's.
	Host string
}

// After reports whether b is of a server started after a's was last seen
// up: a restart in between. The windows of one server overlap, give or
// take the two clocks' rates: 1 ms per second between the two readings
// is allowed (50 times a poor crystal's drift). A server that started
// after a was read is after it by its own start-up and the time it had
// been up at a's reading, at least.
func (b Boot) After(a Boot) bool {
	slack := max(b.Read.Sub(a.Read), 0) / 1000
	return b.Earliest.After(a.Latest.Add(slack))
}

// String is the window's middle, to the second, in UTC.
func (b Boot) String() string {
	mid := b.Earliest.Add(b.Latest.Sub(b.Earliest) / 2)
	return mid.UTC().Round(time.Second).Format(time.DateTime) + " UTC"
}

// Boot reads the server's uptime and makes it a boot time window.
func (c *Conn) Boot(ctx context.Context) (Boot, error) {
	sent := time.Now()
	var up uint64
	p := c.pool()
	if err := p.QueryRow(ctx, "SELECT toUInt64(uptime())").Scan(&up); err != nil {
		c.noteFailure(p, err)
		return Boot{}, fmt.Errorf("reading the uptime of ClickHouse at %s: %w", c.hosts, err)
	}
	got := time.Now()
	u := time.Duration(up) * time.Second
	return Boot{Earliest: sent.Add(-u - time.Second), Latest: got.Add(-u), Read: got, Host: c.Host()}, nil
}

// Mutation is a mutation of a table (system.mutations).
type Mutation struct {
	Target    Target
	ID        string // mutation_id: mutation_N.txt
	Command   string // as the server formats it
	PartsToDo int64
}

// TruncateBarrier reports whether m is DeleteBefore's mutation.
func (m Mutation) TruncateBarrier() bool {
	return strings.HasPrefix(strings.ReplaceAll(m.Command, "`", ""), truncateBarrierHead)
}

// UnfinishedMutations lists the mutations of the tables in targets the
// server has not finished (is_done = 0).
func (c *Conn) UnfinishedMutations(ctx context.Context, targets []Target) ([]Mutation, error) {
	if len(targets) == 0 {
		return nil, nil
	}
	// On shards the mutations are the local tables' (read here on the
	// node in use, so of its shard only).
	want := make(map[Target]Target, len(targets))
	dbs := map[string]bool{}
	var quoted []string
	for _, t := range targets {
		if c.topology.Sharded() {
			want[LocalTarget(t)] = t
			t = LocalTarget(t)
		} else {
			want[t] = t
		}
		if !dbs[t.Database] {
			dbs[t.Database] = true
			quoted = append(quoted, QuoteString(t.Database))
		}
	}
	rows, err := c.pool().Query(ctx, "SELECT database, table, mutation_id, command, parts_to_do FROM system.mutations"+
		" WHERE is_done = 0 AND database IN ("+strings.Join(quoted, ", ")+")")
	if err != nil {
		return nil, fmt.Errorf("reading system.mutations of ClickHouse at %s: %w", c.hosts, err)
	}
	defer rows.Close()
	var out []Mutation
	for rows.Next() {
		var m Mutation
		if err := rows.Scan(&m.Target.Database, &m.Target.Table, &m.ID, &m.Command, &m.PartsToDo); err != nil {
			return nil, fmt.Errorf("reading system.mutations of ClickHouse at %s: %w", c.hosts, err)
		}
		if t, ok := want[m.Target]; ok {
			m.Target = t
			out = append(out, m)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading system.mutations of ClickHouse at %s: %w", c.hosts, err)
	}
	return out, nil
}
