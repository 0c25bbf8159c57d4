package source

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/walshadow/walshadow/internal/wal"
)

// wsConn is one walreceiver connection. Its reader (the connection's
// goroutine) and, while streaming, its writer share the state below the
// marker under Walsender.mu.
type wsConn struct {
	w    *Walsender
	nc   net.Conn
	pid  uint32
	wake chan struct{} // capacity 1: "look at the state again"

	// Guarded by Walsender.mu.
	closing   bool
	streaming bool
	sentPtr   wal.LSN // next byte to send
	// readingFrom is where the frame being written from published memory
	// starts (reading: one is): that memory must not be reused meanwhile.
	reading             bool
	readingFrom         wal.LSN
	exemptUntil         wal.LSN // published end when streaming began
	write, flush, apply wal.LSN // last standby status report
	prod                bool    // send a keepalive asking for a reply
	pingBack            bool    // the walreceiver asked us for a keepalive
	lastRecv            time.Time
}

func (c *wsConn) wakeUp() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// errWsClientGone ends a connection the client closed on purpose.
var errWsClientGone = errors.New("client closed the connection")

// wsStartupTimeout bounds the startup exchange, as authentication_timeout does.
const wsStartupTimeout = 10 * time.Second

// wsMaxMessage bounds inbound messages; walreceivers send only small ones.
const wsMaxMessage = 1 << 20

// newConn registers an accepted connection; nil when closing.
func (w *Walsender) newConn(nc net.Conn) *wsConn {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case <-w.closed:
		return nil
	default:
	}
	w.nextPID++
	c := &wsConn{w: w, nc: nc, pid: w.nextPID, wake: make(chan struct{}, 1)}
	w.conns[c] = struct{}{}
	w.stats.Accepted++
	return c
}

func (w *Walsender) serveConn(ctx context.Context, c *wsConn) {
	err := c.serve(ctx)
	c.nc.Close()
	w.mu.Lock()
	delete(w.conns, c)
	if c.streaming {
		w.notifyLocked()
	}
	closing := c.closing
	w.mu.Unlock()
	switch {
	case err == nil || errors.Is(err, errWsClientGone):
		w.log.Debug("walsender: connection closed", "conn", c.pid)
	case closing:
		w.log.Info("walsender: connection closed by walshadow", "conn", c.pid, "err", err)
	default:
		w.log.Warn("walsender: connection ended", "conn", c.pid, "err", err)
	}
}

// serve runs the protocol: startup, then simple queries until the client
// leaves. Replication commands are answered as walsender.c answers them.
func (c *wsConn) serve(ctx context.Context) error {
	be := pgproto3.NewBackend(c.nc, c.nc)
	be.SetMaxBodyLen(wsMaxMessage)
	c.nc.SetDeadline(time.Now().Add(wsStartupTimeout))
	if err := c.startup(be); err != nil {
		return err
	}
	c.nc.SetDeadline(time.Time{})
	for {
		msg, err := be.Receive()
		if err != nil {
			return wsReadError(err)
		}
		switch m := msg.(type) {
		case *pgproto3.Query:
			if err := c.query(ctx, be, m.String); err != nil {
				return err
			}
		case *pgproto3.Terminate:
			return errWsClientGone
		default:
			return c.fatal(be, "08P01", fmt.Sprintf("unexpected %T on a replication connection: only simple queries are served", msg))
		}
	}
}

func wsReadError(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) {
		return errWsClientGone
	}
	return fmt.Errorf("reading from the walreceiver: %w", err)
}

// startup handles SSL/GSS probes (declined: the socket is local), cancel
// requests (ignored) and the startup message, then trusts the client.
func (c *wsConn) startup(be *pgproto3.Backend) error {
	for {
		msg, err := be.ReceiveStartupMessage()
		if err != nil {
			return wsReadError(err)
		}
		switch m := msg.(type) {
		case *pgproto3.SSLRequest, *pgproto3.GSSEncRequest:
			if _, err := c.nc.Write([]byte{'N'}); err != nil {
				return fmt.Errorf("declining encryption: %w", err)
			}
		case *pgproto3.CancelRequest:
			return errWsClientGone
		case *pgproto3.StartupMessage:
			return c.acceptStartup(be, m)
		default:
			return fmt.Errorf("unexpected startup message %T", msg)
		}
	}
}

func (c *wsConn) acceptStartup(be *pgproto3.Backend, m *pgproto3.StartupMessage) error {
	repl := strings.ToLower(m.Parameters["replication"])
	switch repl {
	case "true", "on", "yes", "1", "database":
	default:
		return c.fatal(be, "08004", "walshadow's walsender serves replication connections only (replication=true)")
	}
	userName := m.Parameters["user"]
	if userName == "" {
		return c.fatal(be, "28000", "no PostgreSQL user name specified in startup packet")
	}
	if m.ProtocolVersion != pgproto3.ProtocolVersion30 {
		be.Send(&pgproto3.NegotiateProtocolVersion{NewestMinorProtocol: 0})
	}
	version, _ := wsServerVersion(c.w.cfg.PGVersionNum)
	be.Send(&pgproto3.AuthenticationOk{})
	for _, p := range [][2]string{
		{"application_name", m.Parameters["application_name"]},
		{"client_encoding", "UTF8"},
		{"DateStyle", "ISO, MDY"},
		{"default_transaction_read_only", "off"},
		{"in_hot_standby", "off"},
		{"integer_datetimes", "on"},
		{"IntervalStyle", "postgres"},
		{"is_superuser", "on"},
		{"server_encoding", "UTF8"},
		{"server_version", version},
		{"session_authorization", userName},
		{"standard_conforming_strings", "on"},
		{"TimeZone", "UTC"},
	} {
		be.Send(&pgproto3.ParameterStatus{Name: p[0], Value: p[1]})
	}
	secret := make([]byte, 4)
	rand.Read(secret)
	be.Send(&pgproto3.BackendKeyData{ProcessID: c.pid, SecretKey: secret})
	be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	if err := be.Flush(); err != nil {
		return fmt.Errorf("completing startup: %w", err)
	}
	c.w.log.Debug("walsender: walreceiver connected", "conn", c.pid, "user", userName,
		"application_name", m.Parameters["application_name"])
	return nil
}

// fatal sends a FATAL error and ends the connection.
func (c *wsConn) fatal(be *pgproto3.Backend, code, msg string) error {
	be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: code, Message: msg})
	be.Flush()
	return errors.New(msg)
}

// queryError reports a failed command; the connection stays usable.
func (c *wsConn) queryError(be *pgproto3.Backend, code, msg string) error {
	be.Send(&pgproto3.ErrorResponse{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: code, Message: msg})
	be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	return be.Flush()
}

const (
	wsTextOID = 25
	wsInt4OID = 23
)

func wsField(name string, oid uint32) pgproto3.FieldDescription {
	size := int16(-1)
	if oid == wsInt4OID {
		size = 4
	}
	return pgproto3.FieldDescription{Name: []byte(name), DataTypeOID: oid, DataTypeSize: size, TypeModifier: -1}
}

// sendRow answers a command with one row and CommandComplete.
func (c *wsConn) sendRow(be *pgproto3.Backend, tag string, fields []pgproto3.FieldDescription, values [][]byte) error {
	be.Send(&pgproto3.RowDescription{Fields: fields})
	be.Send(&pgproto3.DataRow{Values: values})
	be.Send(&pgproto3.CommandComplete{CommandTag: []byte(tag)})
	be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	return be.Flush()
}

func (c *wsConn) query(ctx context.Context, be *pgproto3.Backend, q string) error {
	cmd, err := wsParseCommand(q)
	if err != nil {
		return c.queryError(be, "42601", err.Error())
	}
	cfg := &c.w.cfg
	switch cmd.Kind {
	case wsCmdEmpty:
		be.Send(&pgproto3.EmptyQueryResponse{})
		be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
		return be.Flush()
	case wsCmdIdentifySystem:
		return c.sendRow(be, "IDENTIFY_SYSTEM",
			[]pgproto3.FieldDescription{wsField("systemid", wsTextOID), wsField("timeline", wsInt4OID),
				wsField("xlogpos", wsTextOID), wsField("dbname", wsTextOID)},
			[][]byte{[]byte(strconv.FormatUint(cfg.SystemID, 10)), []byte(strconv.FormatUint(uint64(cfg.Timeline), 10)),
				[]byte(wsFormatLSN(c.w.Published())), nil})
	case wsCmdTimelineHistory:
		content, ok := cfg.TimelineHistory[cmd.Timeline]
		if !ok && cmd.Timeline != 1 {
			return c.queryError(be, "58P01", fmt.Sprintf("walshadow has no history file for timeline %d (source timeline %d)", cmd.Timeline, cfg.Timeline))
		}
		name := fmt.Sprintf("%08X.history", cmd.Timeline)
		return c.sendRow(be, "TIMELINE_HISTORY",
			[]pgproto3.FieldDescription{wsField("filename", wsTextOID), wsField("content", wsTextOID)},
			[][]byte{[]byte(name), append([]byte{}, content...)})
	case wsCmdShow:
		value, ok := c.showValue(cmd.Name)
		if !ok {
			return c.queryError(be, "42704", fmt.Sprintf("unrecognized configuration parameter %q", cmd.Name))
		}
		return c.sendRow(be, "SHOW", []pgproto3.FieldDescription{wsField(cmd.Name, wsTextOID)}, [][]byte{[]byte(value)})
	case wsCmdSecureSearchPath:
		return c.sendRow(be, "SELECT 1", []pgproto3.FieldDescription{wsField("set_config", wsTextOID)}, [][]byte{{}})
	case wsCmdStartReplication:
		return c.startReplication(ctx, be, cmd)
	}
	return c.queryError(be, "0A000", "unsupported command")
}

func (c *wsConn) showValue(name string) (string, bool) {
	cfg := &c.w.cfg
	switch name {
	case "server_version":
		v, _ := wsServerVersion(cfg.PGVersionNum)
		return v, true
	case "server_version_num":
		return strconv.Itoa(cfg.PGVersionNum), true
	case "wal_segment_size":
		return wsSizeText(cfg.SegmentSize), true
	case "integer_datetimes", "standard_conforming_strings":
		return "on", true
	case "client_encoding", "server_encoding":
		return "UTF8", true
	case "transaction_read_only", "in_hot_standby", "default_transaction_read_only":
		return "off", true
	case "data_directory_mode":
		return "0700", true
	}
	return "", false
}

// wsSizeText renders a byte count as SHOW does for a size GUC.
func wsSizeText(n uint32) string {
	switch {
	case n%(1<<30) == 0:
		return fmt.Sprintf("%dGB", n>>30)
	case n%(1<<20) == 0:
		return fmt.Sprintf("%dMB", n>>20)
	case n%(1<<10) == 0:
		return fmt.Sprintf("%dkB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// startReplication streams from cmd.Start until the walreceiver ends the
// copy (CopyDone: back to command mode) or the connection ends.
func (c *wsConn) startReplication(ctx context.Context, be *pgproto3.Backend, cmd wsCommand) error {
	w := c.w
	if cmd.Logical {
		return c.queryError(be, "0A000", "walshadow's walsender serves physical replication only")
	}
	if cmd.Timeline != 0 && cmd.Timeline != w.cfg.Timeline {
		return c.queryError(be, "58P01", fmt.Sprintf("requested timeline %d is not the source's timeline %d", cmd.Timeline, w.cfg.Timeline))
	}
	if err := w.checkServable(cmd.Start); err != nil {
		return c.queryError(be, "58P01", err.Error())
	}
	be.Send(&pgproto3.CopyBothResponse{OverallFormat: 0})
	if err := be.Flush(); err != nil {
		return fmt.Errorf("starting the copy: %w", err)
	}

	w.mu.Lock()
	c.streaming = true
	c.sentPtr = cmd.Start
	c.exemptUntil = w.pubEnd
	c.lastRecv = time.Now()
	w.stats.Streams++
	w.notifyLocked()
	w.mu.Unlock()
	w.log.Info("walsender: walreceiver started streaming", "conn", c.pid, "start", cmd.Start.String(), "slot", cmd.Slot)

	stop := make(chan struct{})
	writerDone := make(chan error, 1)
	go func() { writerDone <- c.writeLoop(ctx, stop) }()
	stopWriter := func() error {
		close(stop)
		return <-writerDone
	}
	end := func() {
		w.mu.Lock()
		c.streaming = false
		w.notifyLocked()
		w.mu.Unlock()
	}

	for {
		msg, err := be.Receive()
		if err != nil {
			// A writer failure closes the socket: report the writer's error.
			c.nc.Close()
			if werr := stopWriter(); werr != nil {
				return werr
			}
			return wsReadError(err)
		}
		switch m := msg.(type) {
		case *pgproto3.CopyData:
			if err := c.standbyMessage(m.Data); err != nil {
				c.nc.Close()
				stopWriter()
				return err
			}
		case *pgproto3.CopyDone:
			if err := stopWriter(); err != nil {
				return err
			}
			end()
			be.Send(&pgproto3.CopyDone{})
			be.Send(&pgproto3.CommandComplete{CommandTag: []byte("START_STREAMING")})
			be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
			return be.Flush()
		case *pgproto3.Terminate:
			c.nc.Close()
			stopWriter()
			return errWsClientGone
		default:
			c.nc.Close()
			stopWriter()
			return fmt.Errorf("unexpected %T while streaming", msg)
		}
	}
}

// standbyMessage records a walreceiver's status report.
func (c *wsConn) standbyMessage(data []byte) error {
	m, err := wsParseStandbyMessage(data)
	if err != nil {
		return fmt.Errorf("from the walreceiver: %w", err)
	}
	w := c.w
	w.mu.Lock()
	defer w.mu.Unlock()
	c.lastRecv = time.Now()
	if m.Kind != wsMsgStandbyStatus {
		return nil // hot standby feedback: the shadow's xmin matters to nobody
	}
	c.write, c.flush, c.apply = m.Status.Write, m.Status.Flush, m.Status.Apply
	if m.Status.ReplyRequested {
		c.pingBack = true
		c.wakeUp()
	}
	w.notifyLocked()
	return nil
}

// wsStep is the writer's next action, decided under the lock.
type wsStep struct {
	kind   wsStepKind
	start  wal.LSN
	walEnd wal.LSN
	data   []byte // wsStepMemory: published bytes (immutable)
	n      int    // wsStepArchive: bytes to read
	reply  bool   // wsStepKeepalive: reply requested
}

type wsStepKind int

const (
	wsStepWait wsStepKind = iota
	wsStepStop
	wsStepKeepalive
	wsStepMemory
	wsStepArchive
)

func (w *Walsender) nextStep(c *wsConn) wsStep {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case c.closing:
		return wsStep{kind: wsStepStop}
	case c.prod || c.pingBack:
		s := wsStep{kind: wsStepKeepalive, walEnd: min(c.sentPtr, w.pubEnd), reply: c.prod}
		c.prod, c.pingBack = false, false
		return s
	case !w.published || c.sentPtr >= w.pubEnd:
		return wsStep{kind: wsStepWait}
	case c.sentPtr >= w.winStart:
		// A frame ends within its chunk: a chunk ends where a publication
		// ended or at a segment's end.
		mem := w.memLocked(c.sentPtr)
		n := min(int(wsFrameLen(c.sentPtr, w.pubEnd)), len(mem))
		c.reading, c.readingFrom = true, c.sentPtr
		return wsStep{kind: wsStepMemory, start: c.sentPtr, walEnd: w.pubEnd, data: mem[:n:n]}
	}
	seg := wal.LSN(w.cfg.SegmentSize)
	segEnd := c.sentPtr - c.sentPtr%seg + seg
	n := wsFrameLen(c.sentPtr, min(segEnd, w.pubEnd))
	return wsStep{kind: wsStepArchive, start: c.sentPtr, walEnd: w.pubEnd, n: int(n)}
}

// wsFrameLen is how many bytes of [from, to) the next XLogData carries: all
// of them, or when that is more than wsMaxFrame, as many as fit up to a page
// boundary. to is a publication boundary (a record end or a page boundary),
// so every frame ends at one too: a PostgreSQL walreceiver's startup process
// assumes the flushed WAL never stops inside a record within a page (a
// primary's flush position never does) and reads a partly received page as
// if its rest belonged to the record, failing its CRC.
func wsFrameLen(from, to wal.LSN) wal.LSN {
	n := to - from
	if n <= wsMaxFrame {
		return n
	}
	end := (from + wsMaxFrame) &^ (wsWALPageSize - 1)
	return end - from
}

// sent advances the connection past a frame unless something reset it.
func (w *Walsender) sent(c *wsConn, start wal.LSN, n int, fromArchive bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c.reading = false
	if c.sentPtr == start {
		c.sentPtr += wal.LSN(n)
		w.trimLocked() // this walreceiver may have been what kept old bytes
	}
	w.stats.BytesSent += int64(n)
	if fromArchive {
		w.stats.ArchiveBytesSent += int64(n)
	}
}

// checkServable refuses a start point that is neither in memory (or still
// to be published) nor in the archive.
func (w *Walsender) checkServable(start wal.LSN) error {
	w.mu.Lock()
	published, winStart := w.published, w.winStart
	w.mu.Unlock()
	if !published || start >= winStart {
		return nil
	}
	seg := wal.LSN(w.cfg.SegmentSize)
	for s := start - start%seg; s < winStart; s += seg {
		if name := archiveSegmentName(w.cfg.Timeline, uint64(s/seg), w.cfg.SegmentSize); w.cfg.Archive == nil || !w.cfg.Archive.Has(name) {
			return &wsRemovedError{fmt.Sprintf("requested WAL segment %s has already been removed (walshadow holds %s onwards in memory; it is not in the archive)", name, winStart)}
		}
	}
	return nil
}

// writeLoop sends WAL, keepalives and status prods until stopped. A failure
// is reported to the walreceiver as an ErrorResponse and closes the socket.
func (c *wsConn) writeLoop(ctx context.Context, stop <-chan struct{}) (err error) {
	w := c.w
	cfg := &w.cfg
	out := &wsFrameWriter{nc: c.nc, timeout: cfg.ReceiverTimeout}
	var seg *os.File // the archived segment being read
	var segName string
	var abuf []byte // archive read buffer
	defer func() {
		if seg != nil {
			seg.Close()
		}
		if err != nil {
			// The socket may be broken or stuck: then there is nobody to tell.
			if !errors.As(err, new(*wsWriteError)) {
				out.writeError(err)
			}
			c.nc.Close()
		}
	}()
	timer := time.NewTimer(cfg.KeepaliveInterval)
	defer timer.Stop()
	lastSend := time.Now()
	for {
		step := w.nextStep(c)
		switch step.kind {
		case wsStepStop:
			return nil
		case wsStepKeepalive:
			if err := out.keepalive(step.walEnd, step.reply); err != nil {
				return err
			}
		case wsStepMemory:
			if err := out.xlogData(step.start, step.walEnd, step.data); err != nil {
				return err
			}
			w.sent(c, step.start, len(step.data), false)
		case wsStepArchive:
			name := archiveSegmentName(cfg.Timeline, uint64(step.start)/uint64(cfg.SegmentSize), cfg.SegmentSize)
			if name != segName {
				if seg != nil {
					seg.Close()
					seg, segName = nil, ""
				}
				if cfg.Archive == nil || !cfg.Archive.Has(name) {
					return &wsRemovedError{fmt.Sprintf("requested WAL segment %s has already been removed (needed from %s; not in memory nor in the archive)", name, step.start)}
				}
				if seg, err = os.Open(cfg.Archive.Path(name)); err != nil {
					return fmt.Errorf("opening archived segment %s: %w", name, err)
				}
				segName = name
			}
			if cap(abuf) < step.n {
				abuf = make([]byte, wsMaxFrame)
			}
			buf := abuf[:step.n]
			off := int64(uint64(step.start) % uint64(cfg.SegmentSize))
			if _, err := seg.ReadAt(buf, off); err != nil {
				return fmt.Errorf("reading archived segment %s at offset %d: %w", name, off, err)
			}
			if err := out.xlogData(step.start, step.walEnd, buf); err != nil {
				return err
			}
			w.sent(c, step.start, len(buf), true)
		case wsStepWait:
			since := time.Since(lastSend)
			if since >= cfg.KeepaliveInterval {
				w.mu.Lock()
				silent := time.Since(c.lastRecv)
				walEnd := min(c.sentPtr, w.pubEnd)
				w.mu.Unlock()
				if silent > cfg.ReceiverTimeout {
					return fmt.Errorf("terminating walsender connection due to replication timeout (walreceiver silent for %s)", silent.Round(time.Second))
				}
				if err := out.keepalive(walEnd, silent > cfg.ReceiverTimeout/2); err != nil {
					return err
				}
				lastSend = time.Now()
				continue
			}
			timer.Reset(cfg.KeepaliveInterval - since)
			select {
			case <-c.wake:
			case <-timer.C:
			case <-stop:
				return nil
			case <-ctx.Done():
				return nil
			}
			continue
		}
		lastSend = time.Now()
	}
}

// wsFrameWriter writes CopyData-wrapped streaming messages straight to the
// socket (the pgproto3 backend is idle while streaming).
type wsFrameWriter struct {
	nc      net.Conn
	timeout time.Duration
	hdr     []byte
}

// wsWriteError is a failed write to the walreceiver.
type wsWriteError struct{ err error }

func (e *wsWriteError) Error() string { return "writing to the walreceiver: " + e.err.Error() }
func (e *wsWriteError) Unwrap() error { return e.err }

func (f *wsFrameWriter) write(bufs net.Buffers) error {
	f.nc.SetWriteDeadline(time.Now().Add(f.timeout))
	if _, err := bufs.WriteTo(f.nc); err != nil {
		return &wsWriteError{err}
	}
	return nil
}

func (f *wsFrameWriter) xlogData(start, walEnd wal.LSN, data []byte) error {
	f.hdr = wsAppendCopyDataHeader(f.hdr[:0], wsXLogDataHeaderLen+len(data))
	f.hdr = wsAppendXLogDataHeader(f.hdr, start, walEnd, wsPGTime(time.Now()))
	return f.write(net.Buffers{f.hdr, data})
}

func (f *wsFrameWriter) keepalive(walEnd wal.LSN, reply bool) error {
	f.hdr = wsAppendCopyDataHeader(f.hdr[:0], wsKeepaliveLen)
	f.hdr = wsAppendKeepalive(f.hdr, walEnd, wsPGTime(time.Now()), reply)
	return f.write(net.Buffers{f.hdr})
}

// wsRemovedError is WAL that is neither in memory nor in the archive; it
// carries PostgreSQL's SQLSTATE for a removed segment (58P01), which
// walreceivers and replication clients recognise.
type wsRemovedError struct{ msg string }

func (e *wsRemovedError) Error() string { return e.msg }

// writeError tells the walreceiver why the stream ends (best effort).
func (f *wsFrameWriter) writeError(err error) {
	code := "XX000"
	if errors.As(err, new(*wsRemovedError)) {
		code = "58P01"
	}
	msg, encErr := (&pgproto3.ErrorResponse{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: code, Message: err.Error()}).Encode(nil)
	if encErr == nil {
		f.write(net.Buffers{msg})
	}
}
