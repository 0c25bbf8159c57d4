// Package source talks to the source PostgreSQL: the physical replication
// client (IDENTIFY_SYSTEM, physical slot, START_REPLICATION PHYSICAL,
// keepalives, standby status), its reconnecting wrapper, the segment archive
// and the walsender that feeds the shadow.
package source

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/walshadow/walshadow/internal/wal"
)

// DefaultStatusInterval is how often a streaming Client sends a standby
// status update when nothing else prompts one.
const DefaultStatusInterval = 10 * time.Second

// clientWriteTimeout bounds a status write, and a close write when the context has no
// deadline, so a wedged socket cannot block the caller forever.
const clientWriteTimeout = 30 * time.Second

// clientApplicationName is set when the DSN names none, so the source's
// pg_stat_replication shows who is streaming.
const clientApplicationName = "walshadow"

// Chunk is one XLogData message: WAL bytes [Start, Start+len(Data)).
type Chunk struct {
	// Start is the LSN of Data[0].
	Start wal.LSN
	// Data is valid only until the next Receive: it aliases the
	// connection's read buffer. Copy what must outlive that.
	Data []byte
	// ServerWALEnd is the source's WAL end when it sent the message.
	ServerWALEnd wal.LSN
}

// End is the LSN just past the chunk's last byte.
func (c Chunk) End() wal.LSN { return c.Start + wal.LSN(len(c.Data)) }

// EndOfTimelineError reports that the source stopped streaming because the
// requested timeline ended (it is historic on the source: the source was
// promoted or restored onto NextTimeline at SwitchLSN). Every byte before
// SwitchLSN has been delivered.
type EndOfTimelineError struct {
	Timeline     uint32
	NextTimeline uint32
	SwitchLSN    wal.LSN
}

func (e *EndOfTimelineError) Error() string {
	return fmt.Sprintf("source ended timeline %d at %s and continues on timeline %d: "+
		"walshadow does not follow timeline switches; start from a fresh state directory",
		e.Timeline, e.SwitchLSN, e.NextTimeline)
}

// errClientStreamEnded is the walsender finishing the COPY with
// CommandComplete, which it does when the server shuts down.
var errClientStreamEnded = errors.New("source ended the replication stream (server shutting down)")

// errClientSourceStopping reports a walsender stuck in its shutdown wait.
var errClientSourceStopping = errors.New("source is shutting down and waits for our flush position to reach what it sent")

// A shutting-down walsender (WalSndDone) has sent everything and waits for
// the standby's flush position (write when flush is 0) to reach its sent
// position, pinging for a reply in a tight loop; it never times out since
// each reply resets its timer. walshadow's flush is its resume floor, which
// may lag for a long time (a hold, ClickHouse down), so a source would never
// finish a fast shutdown. That loop is recognised as clientStoppingPings
// reply-requested keepalives in a row, each within clientStoppingGap of the
// last and with no WAL in between, while our flush is behind the server's
// end: Receive then drops the connection (a transient error: everything sent
// was received, and reconnecting resumes at the next byte). Ordinary pings
// come at most every wal_sender_timeout/2.
const (
	clientStoppingPings = 10
	clientStoppingGap   = 50 * time.Millisecond
)

// Client is one source session: a physical replication connection
// (replication=true) plus a plain SQL connection for helper queries.
//
// Receive, StartReplication, IdentifySystem, EnsureSlot, the helper queries
// and Close belong to one goroutine. SetPositions, SendStatus, Positions and
// ServerWALEnd may be called from any goroutine, e.g. a status loop that
// keeps the connection alive while the reader is holding.
type Client struct {
	repl    *pgconn.PgConn
	sql     *pgx.Conn
	target  string   // redacted description, for errors
	secrets []string // scrubbed from error texts

	// StatusInterval is how often Receive sends a standby status update;
	// zero means DefaultStatusInterval. Set it before StartReplication.
	StatusInterval time.Duration

	streaming atomic.Bool

	writeMu sync.Mutex // serialises frames written while streaming
	frame   []byte     // guarded by writeMu

	mu           sync.Mutex
	positions    Positions
	lastStatus   time.Time
	serverWALEnd wal.LSN

	// Owned by the receiving goroutine.
	timeline   uint32
	next       wal.LSN
	failed     error
	pingStreak int
	lastPing   time.Time
}

// Connect opens the replication connection (dsn with replication=true,
// i.e. physical replication) and the SQL connection (dsn without it). TLS
// modes and password/SCRAM authentication come from the DSN as pgconn
// parses it. Errors name the target without its password.
func Connect(ctx context.Context, dsn string) (*Client, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, clientParseError(dsn, err)
	}
	c := &Client{target: clientDescribeConfig(&cfg.Config), secrets: []string{cfg.Password}}
	if _, ok := cfg.RuntimeParams["application_name"]; !ok {
		cfg.RuntimeParams["application_name"] = clientApplicationName
	}
	replCfg := cfg.Config.Copy()
	replCfg.RuntimeParams["replication"] = "true"
	// Reads are cancelled by read deadlines only, so a status update written
	// from another goroutine is never cut by the receiver's context.
	replCfg.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
		return &clientReadDeadlineHandler{conn: pc.Conn()}
	}
	delete(cfg.RuntimeParams, "replication")

	if c.repl, err = pgconn.ConnectConfig(ctx, replCfg); err != nil {
		return nil, clientScrub(fmt.Errorf("opening the replication connection to %s: %w", c.target, err), c.secrets...)
	}
	if c.sql, err = pgx.ConnectConfig(ctx, cfg); err != nil {
		c.repl.Close(ctx)
		return nil, clientScrub(fmt.Errorf("opening the SQL connection to %s: %w", c.target, err), c.secrets...)
	}
	return c, nil
}

// clientReadDeadlineHandler cancels a blocked read by expiring the read
// deadline, leaving the write side to SendStatus.
type clientReadDeadlineHandler struct{ conn net.Conn }

func (h *clientReadDeadlineHandler) HandleCancel(context.Context) {
	h.conn.SetReadDeadline(time.Now())
}

func (h *clientReadDeadlineHandler) HandleUnwatchAfterCancel() {
	h.conn.SetReadDeadline(time.Time{})
}

// Target is the redacted description of the source (no password).
func (c *Client) Target() string { return c.target }

// SQL is the plain SQL connection, for helper queries. It is not safe for
// concurrent use.
func (c *Client) SQL() *pgx.Conn { return c.sql }

// ReplicationPID is the backend PID of the walsender serving this client.
func (c *Client) ReplicationPID() uint32 { return c.repl.PID() }

// Close closes both connections. It must not run concurrently with Receive
// (cancel Receive's context first).
func (c *Client) Close(ctx context.Context) error {
	c.streaming.Store(false)
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(clientWriteTimeout)
	}
	c.writeMu.Lock()
	c.repl.Conn().SetWriteDeadline(deadline)
	c.writeMu.Unlock()
	return errors.Join(c.repl.Close(ctx), c.sql.Close(ctx))
}

func (c *Client) wrap(err error, format string, args ...any) error {
	return clientScrub(fmt.Errorf(format+": %w", append(args, err)...), c.secrets...)
}

func (c *Client) idle(what string) error {
	if c.streaming.Load() {
		return fmt.Errorf("%s: the replication connection to %s is streaming", what, c.target)
	}
	if c.failed != nil {
		return fmt.Errorf("%s: the replication connection to %s has failed: %w", what, c.target, c.failed)
	}
	return nil
}

// IdentifySystem runs IDENTIFY_SYSTEM.
func (c *Client) IdentifySystem(ctx context.Context) (Identity, error) {
	if err := c.idle("IDENTIFY_SYSTEM"); err != nil {
		return Identity{}, err
	}
	results, err := c.repl.Exec(ctx, "IDENTIFY_SYSTEM").ReadAll()
	if err != nil {
		return Identity{}, c.wrap(err, "IDENTIFY_SYSTEM on %s", c.target)
	}
	if len(results) != 1 || len(results[0].Rows) != 1 {
		return Identity{}, fmt.Errorf("IDENTIFY_SYSTEM on %s: expected one row", c.target)
	}
	id, err := identityParseRow(results[0].Rows[0])
	if err != nil {
		return Identity{}, fmt.Errorf("on %s: %w", c.target, err)
	}
	return id, nil
}

// ServerVersion is the source's server_version_num, e.g. 150018.
func (c *Client) ServerVersion(ctx context.Context) (int, error) {
	var s string
	if err := c.sql.QueryRow(ctx, "SHOW server_version_num").Scan(&s); err != nil {
		return 0, c.wrap(err, "reading server_version_num from %s", c.target)
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("server_version_num %q from %s: %w", s, c.target, err)
	}
	return v, nil
}

// WALSegmentSize is the source's wal_segment_size in bytes.
func (c *Client) WALSegmentSize(ctx context.Context) (uint64, error) {
	setting, unit, err := c.setting(ctx, "wal_segment_size")
	if err != nil {
		return 0, err
	}
	n, err := clientSettingBytes(setting, unit)
	if err != nil {
		return 0, fmt.Errorf("wal_segment_size of %s: %w", c.target, err)
	}
	return n, nil
}

// WALSenderTimeout is the source's wal_sender_timeout (0: disabled). The
// walsender drops a standby that stays silent that long, so anything that
// stops sending status (a publication hold) must time out below it.
func (c *Client) WALSenderTimeout(ctx context.Context) (time.Duration, error) {
	setting, unit, err := c.setting(ctx, "wal_sender_timeout")
	if err != nil {
		return 0, err
	}
	d, err := clientSettingDuration(setting, unit)
	if err != nil {
		return 0, fmt.Errorf("wal_sender_timeout of %s: %w", c.target, err)
	}
	return d, nil
}

func (c *Client) setting(ctx context.Context, name string) (setting, unit string, err error) {
	err = c.sql.QueryRow(ctx, "SELECT setting, coalesce(unit, '') FROM pg_settings WHERE name = $1", name).Scan(&setting, &unit)
	if err != nil {
		return "", "", c.wrap(err, "reading %s from %s", name, c.target)
	}
	return setting, unit, nil
}

// EnsureSlot creates the physical replication slot name with RESERVE_WAL,
// so the source keeps WAL from now on. An existing physical slot of that
// name is accepted (created reports false); an existing logical slot is an
// error, as is a name PostgreSQL would reject.
func (c *Client) EnsureSlot(ctx context.Context, name string) (created bool, err error) {
	if err := clientValidateSlotName(name); err != nil {
		return false, err
	}
	if err := c.idle("creating replication slot"); err != nil {
		return false, err
	}
	_, err = c.repl.Exec(ctx, "CREATE_REPLICATION_SLOT "+pgx.Identifier{name}.Sanitize()+" PHYSICAL RESERVE_WAL").ReadAll()
	if err == nil {
		return true, nil
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42710" { // duplicate_object
		return false, c.wrap(err, "creating physical replication slot %q on %s", name, c.target)
	}
	var slotType string
	var plugin *string
	err = c.sql.QueryRow(ctx, "SELECT slot_type, plugin FROM pg_replication_slots WHERE slot_name = $1", name).Scan(&slotType, &plugin)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, fmt.Errorf("replication slot %q on %s: reported as existing but absent from pg_replication_slots (dropped concurrently?)", name, c.target)
	}
	if err != nil {
		return false, c.wrap(err, "checking existing replication slot %q on %s", name, c.target)
	}
	if slotType != "physical" {
		p := ""
		if plugin != nil {
			p = " (plugin " + *plugin + ")"
		}
		return false, fmt.Errorf("replication slot %q on %s already exists as a %s slot%s: walshadow needs a physical slot; drop it or configure another slot name",
			name, c.target, slotType, p)
	}
	return false, nil
}

// StartReplication runs START_REPLICATION [SLOT slot] PHYSICAL start
// [TIMELINE timeline] and enters streaming; slot "" streams without a slot
// (then only wal_keep_size protects the WAL not yet read) and timeline 0
// means the server's current one. The walsender starts at exactly start, any
// byte; walshadow starts a fresh stream at a segment boundary (the WAL
// reader needs one) and resumes at the reader's next byte. A status update
// with the current positions is sent at once.
//
// A historic timeline that ends at or before start returns an
// *EndOfTimelineError without streaming.
func (c *Client) StartReplication(ctx context.Context, slot string, start wal.LSN, timeline uint32) error {
	if err := c.idle("START_REPLICATION"); err != nil {
		return err
	}
	var q strings.Builder
	q.WriteString("START_REPLICATION ")
	if slot != "" {
		if err := clientValidateSlotName(slot); err != nil {
			return err
		}
		q.WriteString("SLOT " + pgx.Identifier{slot}.Sanitize() + " ")
	}
	q.WriteString("PHYSICAL " + start.String())
	if timeline != 0 {
		q.WriteString(" TIMELINE " + strconv.FormatUint(uint64(timeline), 10))
	}
	c.repl.Frontend().Send(&pgproto3.Query{String: q.String()})
	if err := c.repl.Frontend().Flush(); err != nil {
		return c.wrap(err, "sending START_REPLICATION to %s", c.target)
	}
	for {
		msg, err := c.repl.ReceiveMessage(ctx)
		if err != nil {
			return c.wrap(err, "starting replication at %s on %s", start, c.target)
		}
		switch m := msg.(type) {
		case *pgproto3.CopyBothResponse:
			c.timeline, c.next = timeline, start
			c.mu.Lock()
			c.serverWALEnd = 0
			c.mu.Unlock()
			c.streaming.Store(true)
			if err := c.SendStatus(ctx, false); err != nil {
				return c.fail(err)
			}
			return nil
		case *pgproto3.ErrorResponse:
			err := c.wrap(pgconn.ErrorResponseToPgError(m), "starting replication at %s on %s", start, c.target)
			c.drainToReady(ctx)
			return err
		case *pgproto3.RowDescription, *pgproto3.DataRow:
			// No COPY at all: the requested timeline ended before start.
			return c.readTimelineResult(ctx, msg, timeline)
		case *pgproto3.NoticeResponse, *pgproto3.ParameterStatus:
		default:
			return c.fail(fmt.Errorf("starting replication on %s: unexpected %T", c.target, msg))
		}
	}
}

// drainToReady consumes messages up to ReadyForQuery after an error, so the
// connection can run another command.
func (c *Client) drainToReady(ctx context.Context) {
	for {
		msg, err := c.repl.ReceiveMessage(ctx)
		if err != nil {
			return
		}
		if _, ok := msg.(*pgproto3.ReadyForQuery); ok {
			return
		}
	}
}

// readTimelineResult reads the result set a walsender sends after streaming
// a historic timeline, (next_tli, next_tli_startpos), through ReadyForQuery,
// starting with first (nil: nothing read yet). It returns the
// *EndOfTimelineError describing it; the connection is idle afterwards.
func (c *Client) readTimelineResult(ctx context.Context, first pgproto3.BackendMessage, timeline uint32) error {
	end := &EndOfTimelineError{Timeline: timeline}
	msg := first
	for {
		if msg == nil {
			var err error
			if msg, err = c.repl.ReceiveMessage(ctx); err != nil {
				return c.fail(c.wrap(err, "reading the end of timeline %d from %s", timeline, c.target))
			}
		}
		switch m := msg.(type) {
		case *pgproto3.DataRow:
			if len(m.Values) != 2 {
				return c.fail(fmt.Errorf("end of timeline %d on %s: result row has %d columns, want 2", timeline, c.target, len(m.Values)))
			}
			tli, err := strconv.ParseUint(string(m.Values[0]), 10, 32)
			if err != nil {
				return c.fail(fmt.Errorf("end of timeline %d on %s: next_tli %q: %w", timeline, c.target, m.Values[0], err))
			}
			lsn, err := wal.ParseLSN(string(m.Values[1]))
			if err != nil {
				return c.fail(fmt.Errorf("end of timeline %d on %s: next_tli_startpos: %w", timeline, c.target, err))
			}
			end.NextTimeline, end.SwitchLSN = uint32(tli), lsn
		case *pgproto3.ErrorResponse:
			err := c.wrap(pgconn.ErrorResponseToPgError(m), "end of timeline %d on %s", timeline, c.target)
			c.drainToReady(ctx)
			return err
		case *pgproto3.ReadyForQuery:
			if end.NextTimeline == 0 {
				return fmt.Errorf("source %s ended the stream of timeline %d without naming the next timeline", c.target, timeline)
			}
			return end
		}
		msg = nil
	}
}

// fail records a broken stream: the connection is unusable afterwards.
func (c *Client) fail(err error) error {
	c.streaming.Store(false)
	if c.failed == nil {
		c.failed = err
	}
	return err
}

// Next is the LSN of the next byte the stream will deliver.
func (c *Client) Next() wal.LSN { return c.next }

// Receive returns the next XLogData chunk. While waiting it answers
// keepalives that request a reply and sends a standby status update every
// StatusInterval. Chunks are contiguous: each starts where the previous
// ended. Cancelling ctx returns ctx.Err() and leaves the stream usable; any
// other error ends the stream (the Client must be closed), including
// *EndOfTimelineError when the source finishes a historic timeline.
func (c *Client) Receive(ctx context.Context) (Chunk, error) {
	if c.failed != nil {
		return Chunk{}, c.failed
	}
	if !c.streaming.Load() {
		return Chunk{}, fmt.Errorf("receiving from %s: not streaming (call StartReplication)", c.target)
	}
	for {
		if err := ctx.Err(); err != nil {
			return Chunk{}, err
		}
		interval := c.StatusInterval
		if interval <= 0 {
			interval = DefaultStatusInterval
		}
		c.mu.Lock()
		due := c.lastStatus.Add(interval)
		c.mu.Unlock()
		if !time.Now().Before(due) {
			if err := c.SendStatus(ctx, false); err != nil {
				return Chunk{}, c.fail(err)
			}
			continue
		}
		waitCtx, cancel := context.WithDeadline(ctx, due)
		msg, err := c.repl.ReceiveMessage(waitCtx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return Chunk{}, ctx.Err()
			}
			if pgconn.Timeout(err) && !c.repl.IsClosed() {
				continue // status due
			}
			return Chunk{}, c.fail(c.wrap(err, "receiving WAL at %s from %s", c.next, c.target))
		}
		chunk, ok, err := c.handle(ctx, msg)
		if err != nil {
			return Chunk{}, err
		}
		if ok {
			return chunk, nil
		}
	}
}

// handle processes one message while streaming; ok reports a chunk to
// deliver.
func (c *Client) handle(ctx context.Context, msg pgproto3.BackendMessage) (chunk Chunk, ok bool, err error) {
	switch m := msg.(type) {
	case *pgproto3.CopyData:
		if len(m.Data) == 0 {
			return Chunk{}, false, c.fail(fmt.Errorf("receiving WAL at %s from %s: empty CopyData message", c.next, c.target))
		}
		switch m.Data[0] {
		case statusMsgXLogData:
			x, err := statusParseXLogData(m.Data[1:])
			if err != nil {
				return Chunk{}, false, c.fail(fmt.Errorf("receiving WAL at %s from %s: %w", c.next, c.target, err))
			}
			if x.Start != c.next {
				return Chunk{}, false, c.fail(fmt.Errorf("receiving WAL from %s: XLogData starts at %s, expected the next byte %s", c.target, x.Start, c.next))
			}
			c.next += wal.LSN(len(x.Data))
			c.pingStreak = 0
			c.mu.Lock()
			c.serverWALEnd = max(c.serverWALEnd, x.ServerWALEnd)
			c.mu.Unlock()
			if len(x.Data) == 0 {
				return Chunk{}, false, nil
			}
			return Chunk{Start: x.Start, Data: x.Data, ServerWALEnd: x.ServerWALEnd}, true, nil
		case statusMsgKeepalive:
			k, err := statusParseKeepalive(m.Data[1:])
			if err != nil {
				return Chunk{}, false, c.fail(fmt.Errorf("receiving WAL at %s from %s: %w", c.next, c.target, err))
			}
			c.mu.Lock()
			c.serverWALEnd = max(c.serverWALEnd, k.ServerWALEnd)
			p := c.positions
			c.mu.Unlock()
			if !k.ReplyRequested {
				return Chunk{}, false, nil
			}
			now := time.Now()
			if now.Sub(c.lastPing) < clientStoppingGap {
				c.pingStreak++
			} else {
				c.pingStreak = 1
			}
			c.lastPing = now
			replicated := p.Flush
			if replicated == 0 {
				replicated = p.Write
			}
			if c.pingStreak >= clientStoppingPings && replicated < k.ServerWALEnd {
				// Close now: the walsender only exits when it sees us go.
				c.streaming.Store(false)
				c.writeMu.Lock()
				closeCtx, cancel := context.WithTimeout(ctx, time.Second)
				c.repl.Close(closeCtx)
				cancel()
				c.writeMu.Unlock()
				return Chunk{}, false, c.fail(fmt.Errorf("receiving WAL at %s from %s: %w (reported %s, sent %s); disconnecting so it can stop",
					c.next, c.target, errClientSourceStopping, replicated, k.ServerWALEnd))
			}
			if err := c.SendStatus(ctx, false); err != nil {
				return Chunk{}, false, c.fail(err)
			}
			return Chunk{}, false, nil
		default:
			return Chunk{}, false, c.fail(fmt.Errorf("receiving WAL at %s from %s: unknown replication message %q", c.next, c.target, m.Data[0]))
		}
	case *pgproto3.CopyDone:
		// The timeline became historic: acknowledge and read where the
		// next one starts.
		c.streaming.Store(false)
		c.writeMu.Lock()
		c.repl.Frontend().Send(&pgproto3.CopyDone{})
		err := c.repl.Frontend().Flush()
		c.writeMu.Unlock()
		if err != nil {
			return Chunk{}, false, c.fail(c.wrap(err, "ending the COPY of timeline %d with %s", c.timeline, c.target))
		}
		return Chunk{}, false, c.fail(c.readTimelineResult(ctx, nil, c.timeline))
	case *pgproto3.ErrorResponse:
		return Chunk{}, false, c.fail(c.wrap(pgconn.ErrorResponseToPgError(m), "receiving WAL at %s from %s", c.next, c.target))
	case *pgproto3.CommandComplete:
		return Chunk{}, false, c.fail(fmt.Errorf("receiving WAL at %s from %s: %w", c.next, c.target, errClientStreamEnded))
	case *pgproto3.NoticeResponse, *pgproto3.ParameterStatus:
		return Chunk{}, false, nil
	default:
		return Chunk{}, false, c.fail(fmt.Errorf("receiving WAL at %s from %s: unexpected %T", c.next, c.target, msg))
	}
}

// SetPositions raises the reported write, flush and apply positions, each
// to its own running maximum (see Positions.Advance); lower values are
// ignored. The next status update carries them.
func (c *Client) SetPositions(write, flush, apply wal.LSN) {
	c.mu.Lock()
	c.positions = c.positions.Advance(write, flush, apply)
	c.mu.Unlock()
}

// Positions returns the positions the next status update will report.
func (c *Client) Positions() Positions {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.positions
}

// ServerWALEnd is the highest WAL end the source has announced.
func (c *Client) ServerWALEnd() wal.LSN {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.serverWALEnd
}

// SendStatus sends a standby status update with the current positions now;
// replyRequested asks the source to answer with a keepalive. Safe to call
// from any goroutine while another one is in Receive.
func (c *Client) SendStatus(ctx context.Context, replyRequested bool) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if !c.streaming.Load() {
		return fmt.Errorf("sending standby status to %s: not streaming", c.target)
	}
	now := time.Now()
	c.mu.Lock()
	p := c.positions
	c.lastStatus = now
	c.mu.Unlock()

	// The write deadline is the write's own, not ctx's: Receive answers
	// keepalives with the caller's (often short) receive context, and a
	// status frame cut off by that deadline would break the stream.
	conn := c.repl.Conn()
	conn.SetWriteDeadline(now.Add(clientWriteTimeout))
	defer conn.SetWriteDeadline(time.Time{})
	c.frame = statusAppendStandbyFrame(c.frame[:0], p, now, replyRequested)
	if err := c.repl.Frontend().SendUnbufferedEncodedCopyData(c.frame); err != nil {
		return c.wrap(err, "sending standby status (%s) to %s", p, c.target)
	}
	return nil
}
