package load

// Retry economy. A table that cannot take a change is reloaded, and a load
// that fails is retried: each time a new copy of the whole table from the
// source. A failure that a reload does not cure (a value its configured
// column type cannot hold, a column name ClickHouse's driver cannot insert
// into, ClickHouse refusing the table's block for its size) comes back
// identically, and retrying it would copy the table again and again. So
// a table whose failure recurs identically is PARKED after the second
// time: it is not loaded again, and its changes are not written, until
// something that could cure it changes (Parking.Unpark):
//
//   - its shape: a schema event of the relation (the output un-parks it
//     when it applies the event), or, at a start, an agreed shape other
//     than the one it was parked under;
//   - its configuration: a start (a restart, or `run -w` reloading the
//     pipeline) under a configuration of the table other than the one it
//     was parked under (Conditions.Config, a digest the output computes);
//   - the ClickHouse server: another version, or a restart (its boot
//     time, now minus uptime(), moved);
//   - the operator's request (`walshadow reload`, RequestReload).
//
// What counts as identical (Streak.Next): the same Signature — the error
// with its volatile parts (numbers, positions, times, durations) blanked
// — at the same place: the same change (its LSN) for a failure of the
// stream, or the table's load for a failure met while it loads (an
// attempt's own failure, or a streamed change failing into its delta
// table, which the load's next attempt meets again); and a reload attempt
// started since the previous one (a batch retried before any reload
// meets its failure again without a copy, and is not counted twice).
// Transient failures (a connection refused or lost, a timeout, the
// server's memory or disk: Destination.Local says which) never count.
//
// An un-parked table keeps its streak: if its next attempt fails
// identically again, the change did not cure it and it is parked again
// at once (one more copy, not two).

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"
	"time"

	clickhousego "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/wal"
)

// ParkAfter is how many identical failures in a row park a table.
const ParkAfter = 2

// Failure is one failure of a table, as the retry economy compares them.
type Failure struct {
	// Signature is the error's Signature.
	Signature string
	// At is the change the stream failed at; 0 for a failure met while
	// the table loads (the load's own, or a change failing into its
	// delta table): they all fall on the one load.
	At wal.LSN
}

// Streak is the run of identical failures behind a table's latest one.
type Streak struct {
	Failure
	Count int
	// Attempt is the table's load attempt (Entry.Attempt) when the last
	// failure came: a failure while the same attempt runs is not a new
	// reload's.
	Attempt int
}

// Next is the streak after failure f. reloaded: a reload (a load
// attempt) started since the streak's last failure. A failure other than
// the streak's starts a new one; the same one counts again only after a
// reload.
func (s Streak) Next(f Failure, reloaded bool) Streak {
	switch {
	case s.Count == 0 || f != s.Failure:
		return Streak{Failure: f, Count: 1}
	case reloaded:
		return Streak{Failure: f, Count: s.Count + 1, Attempt: s.Attempt}
	default:
		return s
	}
}

// Parks reports whether the streak parks its table.
func (s Streak) Parks() bool { return s.Count >= ParkAfter }

// Conditions are what could cure a parked table's failure, as they
// stood when it was parked or stand now. A zero field is not known and
// never un-parks a table.
type Conditions struct {
	// Shape is the relation's agreed shape (its version).
	Shape wal.LSN
	// Config is a digest of the table's configuration (the output's).
	Config string
	// ServerVersion and ServerBoot identify the ClickHouse server run:
	// its version() and the time it started (now minus its uptime()).
	ServerVersion string
	ServerBoot    time.Time
}

// serverBootSlack is how far two readings of one server run's boot time
// may differ (uptime() has whole seconds, and the reading takes a moment).
const serverBootSlack = 5 * time.Second

// Parking is why and since when a table is parked.
type Parking struct {
	Since time.Time
	// Reason is the failure (its error, as logged).
	Reason string
	// At is the change the table failed at (0: none, a load's failure).
	At wal.LSN
	// Count is how many times the failure came identically.
	Count int
	// Remedy says what the operator can do.
	Remedy string
	// Under are the conditions it was parked under.
	Under Conditions
}

// Unpark says why the table parked by p is to be tried again under the
// conditions now (false: nothing that could cure it changed).
func (p Parking) Unpark(now Conditions) (string, bool) {
	was := p.Under
	switch {
	case now.Shape != 0 && was.Shape != 0 && now.Shape != was.Shape:
		return fmt.Sprintf("its shape changed (version %s, parked under %s)", now.Shape, was.Shape), true
	case now.Config != "" && was.Config != "" && now.Config != was.Config:
		return "its configuration changed", true
	case now.ServerVersion != "" && was.ServerVersion != "" && now.ServerVersion != was.ServerVersion:
		return fmt.Sprintf("ClickHouse's version changed (%s, parked under %s)", now.ServerVersion, was.ServerVersion), true
	case !now.ServerBoot.IsZero() && !was.ServerBoot.IsZero() &&
		(now.ServerBoot.Sub(was.ServerBoot) > serverBootSlack || was.ServerBoot.Sub(now.ServerBoot) > serverBootSlack):
		return fmt.Sprintf("ClickHouse restarted (at %s)", now.ServerBoot.UTC().Format(time.RFC3339)), true
	}
	return "", false
}

// The volatile parts of an error message, blanked by Signature.
var (
	sigTime     = regexp.MustCompile(`\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d(:?\d\d)?)?`)
	sigUUID     = regexp.MustCompile(`(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`)
	sigLSN      = regexp.MustCompile(`\b[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}\b`)
	sigDuration = regexp.MustCompile(`\b(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+\b`)
	// A number standing alone (not a part of a name such as Int8 or t1).
	sigNumber = regexp.MustCompile(`(^|[^\p{L}\p{N}_.])\d+(\.\d+)?`)
)

// maxSignature bounds a signature (errors can quote long values).
const maxSignature = 400

// Signature is err's message with its volatile parts blanked: times,
// uuids, LSNs, durations and numbers standing alone (attempt numbers,
// row numbers, values, xids, sizes). A ClickHouse exception's code and a
// PostgreSQL error's SQLSTATE lead it, as they are.
func Signature(err error) string {
	if err == nil {
		return ""
	}
	s := err.Error()
	s = sigTime.ReplaceAllString(s, "<time>")
	s = sigUUID.ReplaceAllString(s, "<uuid>")
	s = sigLSN.ReplaceAllString(s, "<lsn>")
	s = sigDuration.ReplaceAllString(s, "<duration>")
	s = sigNumber.ReplaceAllString(s, "${1}#")
	var ex *clickhousego.Exception
	if errors.As(err, &ex) {
		s = fmt.Sprintf("clickhouse %d: %s", ex.Code, s)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		s = fmt.Sprintf("sqlstate %s: %s", pe.Code, s)
	}
	if len(s) > maxSignature {
		s = truncateUTF8(s, maxSignature)
	}
	return s
}

func truncateUTF8(s string, n int) string {
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

// Transient reports whether a load's failure is one no reload cures but
// time does, on the source's side or ClickHouse's: a connection refused,
// lost or timed out, a transaction rolled back by a conflict, the
// server's resources or an operator's intervention. The output's own
// judgement of ClickHouse's errors (Destination.Local) comes on top.
func Transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || clickhouse.IsRetryable(err) {
		return true
	}
	if pgconn.Timeout(err) {
		return true
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && len(pe.Code) == 5 {
		switch pe.Code[:2] {
		case "08", // connection exception
			"40", // transaction rollback: serialization failure, deadlock
			"53", // insufficient resources
			"57", // operator intervention: admin shutdown, cancel, conflict with recovery
			"58": // system error (I/O)
			return true
		}
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	return strings.Contains(err.Error(), "conn closed") // pgconn's closed connection
}
