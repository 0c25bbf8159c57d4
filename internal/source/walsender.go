package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/walshadow/walshadow/internal/wal"
)

// Walsender is the replication server the shadow's walreceiver connects to
// (primary_conninfo points at it). It serves PostgreSQL walreceivers the
// filtered WAL that Publish hands it: startup with trust authentication,
// IDENTIFY_SYSTEM with the source's identity, TIMELINE_HISTORY,
// START_REPLICATION PHYSICAL, then XLogData frames, keepalives, and the
// walreceiver's write/flush/apply reports.
//
// Access control is the socket file: it is mode 0600 and, with
// WalsenderConfig.SocketOwner, owned by the shadow's OS user, so only that
// user (and root) can connect. The socket is created under a temporary name
// and renamed into place once its mode and owner are set, so there is no
// moment at which another user could connect. The optional TCP listener is
// loopback only and has no such protection: any local user could stream the
// filtered WAL, so leave it off unless the host is single-user.
//
// XLogData frames start where the walreceiver asked (a segment start, for
// PostgreSQL) and end where a Publish call ended or, when capped at 128 KiB,
// at a page boundary: never inside a record within a page (see Publish).
//
// Memory: the published bytes of the current segment stay in memory (and
// the previous one while the archive has not caught up with it), plus
// anything a connected walreceiver has not been sent yet. A walreceiver
// that asks for older WAL is served from the archive when it holds it, and
// gets "requested WAL segment ... has already been removed" otherwise. A
// walreceiver that falls SlowThreshold bytes behind is disconnected; the
// shadow then restores from the archive (restore_command) and reconnects.
type Walsender struct {
	cfg        WalsenderConfig
	log        *slog.Logger
	unixLn     *net.UnixListener
	socketPath string
	tcpLn      net.Listener

	closeOnce sync.Once
	closed    chan struct{}
	serving   bool // guarded by mu
	wg        sync.WaitGroup

	mu        sync.Mutex
	published bool    // Publish has been called at least once
	winStart  wal.LSN // LSN of mem[0]'s first byte
	pubEnd    wal.LSN // end of everything published
	// mem holds the published bytes [winStart, pubEnd) in chunks: a
	// publication copies only its own bytes and a trim drops whole chunks
	// (one growing slice was re-copied whole as it moved). A chunk is never
	// written below its length, so a sender's slice of it stays valid.
	mem     []wsChunk
	conns   map[*wsConn]struct{}
	changed chan struct{} // closed and replaced on status reports and (dis)connections
	nextPID uint32
	stats   WalsenderStats
}

// WalsenderConfig configures NewWalsender.
type WalsenderConfig struct {
	// SocketDir holds the unix socket .s.PGSQL.<Port>; the shadow's
	// primary_conninfo says host=<SocketDir> port=<Port>. Created (0700,
	// owned by SocketOwner) when missing; an existing directory must be
	// searchable by the shadow's OS user.
	SocketDir string
	// Port names the socket file (default 5432); no TCP port is opened for it.
	Port int
	// SocketOwner is the OS user (name or uid) the shadow runs as; the
	// socket is chowned to it. Empty: the socket belongs to the current
	// user, which must then be the shadow's.
	SocketOwner string
	// TCPAddr, when set, also listens on this loopback address ("127.0.0.1:0"
	// picks a port, see TCPAddr()). Non-loopback addresses are refused.
	TCPAddr string

	// The source's identity, announced by IDENTIFY_SYSTEM.
	SystemID uint64
	Timeline uint32
	// SegmentSize is the source's WAL segment size.
	SegmentSize uint32
	// PGVersionNum is the source's PG_VERSION_NUM (e.g. 150018); it becomes
	// server_version.
	PGVersionNum int
	// TimelineHistory holds the source's timeline history files by timeline
	// (content of 0000000N.history) for TIMELINE_HISTORY; timeline 1 has
	// none and is answered with an empty file.
	TimelineHistory map[uint32][]byte

	// Archive serves walreceivers that ask for WAL older than the memory
	// window; nil serves from memory only.
	Archive *Archive
	// SlowThreshold: a walreceiver with more than this many published bytes
	// not yet sent is disconnected (default 64 MiB). What it was behind by
	// when it connected does not count.
	SlowThreshold int
	// KeepaliveInterval: a keepalive goes out after this long without a
	// message to the walreceiver (default 10 s).
	KeepaliveInterval time.Duration
	// ReceiverTimeout: a walreceiver silent for this long is disconnected,
	// as wal_sender_timeout does (default 60 s).
	ReceiverTimeout time.Duration

	// Logger receives connection events; nil discards them.
	Logger *slog.Logger
}

// Defaults of WalsenderConfig.
const (
	DefaultWalsenderPort            = 5432
	DefaultWalsenderSlowThreshold   = 64 << 20
	DefaultWalsenderKeepalive       = 10 * time.Second
	DefaultWalsenderReceiverTimeout = 60 * time.Second
)

// wsWALPageSize is XLOG_BLCKSZ.
const wsWALPageSize = 8192

// wsMaxFrame is the most WAL bytes one XLogData message carries
// (walsender.c MAX_SEND_SIZE).
const wsMaxFrame = 16 * wsWALPageSize

// wsApplyPoll is how often WaitApply prods the walreceiver for its apply
// position: walreceivers report apply progress on their own only every
// wal_receiver_status_interval (10 s).
const wsApplyPoll = 20 * time.Millisecond

// wsUnixSocketPathMax is sizeof(sockaddr_un.sun_path) minus the terminator.
const wsUnixSocketPathMax = 107

// WalsenderStats are the walsender's counters.
type WalsenderStats struct {
	Accepted         int64   // connections accepted
	Streams          int64   // START_REPLICATION sessions begun
	SlowDrops        int64   // walreceivers disconnected for falling behind
	BytesSent        int64   // WAL bytes sent, from memory and archive
	ArchiveBytesSent int64   // of which read from the archive
	PublishGaps      int64   // Publish calls that skipped ahead (memory reset)
	PublishConflicts int64   // re-published bytes that differed from the first publication
	Published        wal.LSN // end of the published bytes
	MemoryStart      wal.LSN // oldest published byte still in memory
	MemoryBytes      int     // published bytes held in memory
}

// NewWalsender validates cfg and creates the listening socket(s); Serve
// accepts connections. Close releases the sockets when Serve never runs.
func NewWalsender(cfg WalsenderConfig) (*Walsender, error) {
	if cfg.Port == 0 {
		cfg.Port = DefaultWalsenderPort
	}
	if cfg.SlowThreshold <= 0 {
		cfg.SlowThreshold = DefaultWalsenderSlowThreshold
	}
	if cfg.KeepaliveInterval <= 0 {
		cfg.KeepaliveInterval = DefaultWalsenderKeepalive
	}
	if cfg.ReceiverTimeout <= 0 {
		cfg.ReceiverTimeout = DefaultWalsenderReceiverTimeout
	}
	switch {
	case cfg.SocketDir == "":
		return nil, errors.New("walsender: no socket directory given")
	case cfg.Port < 1 || cfg.Port > 65535:
		return nil, fmt.Errorf("walsender: port %d out of range", cfg.Port)
	case cfg.SystemID == 0:
		return nil, errors.New("walsender: the source's system identifier is missing")
	case cfg.Timeline == 0:
		return nil, errors.New("walsender: the source's timeline is missing")
	case !wal.ValidSegmentSize(cfg.SegmentSize):
		return nil, fmt.Errorf("walsender: invalid WAL segment size %d", cfg.SegmentSize)
	case cfg.Archive != nil && cfg.Archive.SegmentSize() != cfg.SegmentSize:
		return nil, fmt.Errorf("walsender: archive segment size %d differs from the source's %d", cfg.Archive.SegmentSize(), cfg.SegmentSize)
	}
	if _, err := wsServerVersion(cfg.PGVersionNum); err != nil {
		return nil, fmt.Errorf("walsender: %w", err)
	}
	w := &Walsender{
		cfg:     cfg,
		log:     cfg.Logger,
		closed:  make(chan struct{}),
		conns:   map[*wsConn]struct{}{},
		changed: make(chan struct{}),
	}
	if w.log == nil {
		w.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	var err error
	if w.unixLn, w.socketPath, err = wsListenUnix(cfg.SocketDir, cfg.Port, cfg.SocketOwner); err != nil {
		return nil, fmt.Errorf("walsender: %w", err)
	}
	if cfg.TCPAddr != "" {
		if w.tcpLn, err = wsListenLoopback(cfg.TCPAddr); err != nil {
			w.closeListeners()
			return nil, fmt.Errorf("walsender: %w", err)
		}
	}
	return w, nil
}

// wsListenUnix creates dir/.s.PGSQL.<port>, mode 0600, owned by owner.
func wsListenUnix(dir string, port int, owner string) (*net.UnixListener, string, error) {
	uid, gid := -1, -1
	if owner != "" {
		var err error
		if uid, gid, err = wsLookupUser(owner); err != nil {
			return nil, "", fmt.Errorf("socket owner: %w", err)
		}
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, "", fmt.Errorf("resolving socket directory: %w", err)
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, "", fmt.Errorf("creating socket directory: %w", err)
		}
		if uid >= 0 {
			if err := os.Chown(dir, uid, gid); err != nil {
				return nil, "", fmt.Errorf("giving socket directory %s to %s: %w", dir, owner, err)
			}
		}
	}
	final := filepath.Join(dir, ".s.PGSQL."+strconv.Itoa(port))
	tmp := final + ".new"
	if len(tmp) > wsUnixSocketPathMax {
		return nil, "", fmt.Errorf("socket path %s is longer than the %d bytes a unix socket allows", tmp, wsUnixSocketPathMax)
	}
	if err := wsRemoveStaleSocket(final); err != nil {
		return nil, "", err
	}
	os.Remove(tmp) // ours, from a crash
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, "", fmt.Errorf("listening on %s: %w", tmp, err)
	}
	ln.SetUnlinkOnClose(false) // the path changes below; Close removes it
	fail := func(err error) (*net.UnixListener, string, error) {
		ln.Close()
		os.Remove(tmp)
		return nil, "", err
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		return fail(fmt.Errorf("chmod of socket %s: %w", tmp, err))
	}
	if uid >= 0 {
		if err := os.Chown(tmp, uid, gid); err != nil {
			return fail(fmt.Errorf("giving socket %s to %s: %w", tmp, owner, err))
		}
	}
	if err := os.Rename(tmp, final); err != nil {
		return fail(fmt.Errorf("moving socket into place at %s: %w", final, err))
	}
	return ln, final, nil
}

// wsRemoveStaleSocket removes a socket file nobody listens on (a crashed
// run's); a live one is an error, anything that is not a socket too.
func wsRemoveStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("checking %s: %w", path, err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("%s exists and is not a socket", path)
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("another server is listening on %s", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("probing the existing socket %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the stale socket %s: %w", path, err)
	}
	return nil
}

func wsListenLoopback(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("TCP address %q: %w", addr, err)
	}
	ip := net.ParseIP(host)
	if host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("TCP address %q is not loopback: the walsender has no authentication", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", addr, err)
	}
	return ln, nil
}

// wsLookupUser resolves a user name or numeric uid to uid and primary gid.
func wsLookupUser(name string) (uid, gid int, err error) {
	u, err := user.Lookup(name)
	if err != nil {
		if _, nerr := strconv.Atoi(name); nerr == nil {
			u, err = user.LookupId(name)
		}
		if err != nil {
			return 0, 0, err
		}
	}
	if uid, err = strconv.Atoi(u.Uid); err != nil {
		return 0, 0, fmt.Errorf("user %s: uid %q: %w", name, u.Uid, err)
	}
	if gid, err = strconv.Atoi(u.Gid); err != nil {
		return 0, 0, fmt.Errorf("user %s: gid %q: %w", name, u.Gid, err)
	}
	return uid, gid, nil
}

// SocketPath is the unix socket's path.
func (w *Walsender) SocketPath() string { return w.socketPath }

// TCPAddr is the loopback TCP listener's address, nil without one.
func (w *Walsender) TCPAddr() net.Addr {
	if w.tcpLn == nil {
		return nil
	}
	return w.tcpLn.Addr()
}

// Serve accepts walreceiver connections until ctx ends or Close is called,
// then closes every connection and the sockets. It returns nil on such a
// shutdown, or the error that stopped accepting.
func (w *Walsender) Serve(ctx context.Context) error {
	w.mu.Lock()
	if w.serving {
		w.mu.Unlock()
		return errors.New("walsender: Serve called twice")
	}
	w.serving = true
	w.mu.Unlock()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 2)
	lns := []net.Listener{w.unixLn}
	if w.tcpLn != nil {
		lns = append(lns, w.tcpLn)
	}
	var acceptors sync.WaitGroup
	for _, ln := range lns {
		acceptors.Add(1)
		go func() {
			defer acceptors.Done()
			errc <- w.acceptLoop(ctx, ln)
		}()
	}
	var err error
	select {
	case <-ctx.Done():
	case <-w.closed:
	case err = <-errc:
	}
	w.Close()
	cancel()
	acceptors.Wait()
	w.wg.Wait()
	return err
}

func (w *Walsender) acceptLoop(ctx context.Context, ln net.Listener) error {
	for {
		nc, err := ln.Accept()
		if err != nil {
			select {
			case <-w.closed:
				return nil
			case <-ctx.Done():
				return nil
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				w.log.Warn("walsender: accept failed; retrying", "err", err)
				time.Sleep(100 * time.Millisecond)
				continue
			}
			return fmt.Errorf("walsender: accepting on %s: %w", ln.Addr(), err)
		}
		c := w.newConn(nc)
		if c == nil {
			nc.Close()
			continue
		}
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			w.serveConn(ctx, c)
		}()
	}
}

// Close stops the listeners and disconnects every walreceiver. Serve
// returns once its connections are gone. Close is idempotent.
func (w *Walsender) Close() error {
	w.closeOnce.Do(func() {
		close(w.closed)
		w.closeListeners()
		w.mu.Lock()
		var ncs []net.Conn
		for c := range w.conns {
			c.closing = true
			ncs = append(ncs, c.nc)
		}
		w.mu.Unlock()
		for _, nc := range ncs {
			nc.Close()
		}
	})
	return nil
}

func (w *Walsender) closeListeners() {
	if w.unixLn != nil {
		w.unixLn.Close()
		os.Remove(w.socketPath)
	}
	if w.tcpLn != nil {
		w.tcpLn.Close()
	}
}

// Publish makes wire bytes, which start at start, available to the shadow.
// Each call continues where the previous one ended; bytes before that end
// are skipped (after checking they equal what was first published, when
// still in memory), and a start beyond it is a gap: memory restarts there
// and a walreceiver needing the missing bytes must find them in the
// archive. wire is kept, not copied, until no walreceiver needs it: the
// caller must never change it, nor reuse its memory while MemoryFloor is
// at or below its end. No byte is ever advertised before it is published.
//
// start+len(wire) must be a record end (EndRecPtr) or a page boundary, as a
// primary's flush position always is: a PostgreSQL standby handed WAL that
// stops inside a record within a page reads the rest of that page as part of
// the record, fails its CRC and reconnects, again and again. Publishing
// through each decided record's Next satisfies this.
func (w *Walsender) Publish(start wal.LSN, wire []byte) {
	if len(wire) == 0 {
		return
	}
	var drop []*wsConn
	w.mu.Lock()
	if !w.published {
		w.published = true
		w.winStart, w.pubEnd = start, start
	}
	switch {
	case start > w.pubEnd:
		w.log.Warn("walsender: published bytes skip ahead; walreceivers behind the gap need the archive",
			"published_end", w.pubEnd.String(), "start", start.String())
		w.stats.PublishGaps++
		w.mem = nil // never overwrite bytes a sender may still hold
		w.winStart, w.pubEnd = start, start
	case start < w.pubEnd:
		overlap := min(w.pubEnd-start, wal.LSN(len(wire)))
		if from := max(start, w.winStart); from < start+overlap {
			if !w.memEqualLocked(from, wire[from-start:overlap]) {
				w.stats.PublishConflicts++
				w.log.Error("walsender: re-published WAL differs from what was published before; keeping the first version",
					"from", from.String(), "to", (start + overlap).String())
			}
		}
		wire = wire[overlap:]
		start += overlap
	}
	if len(wire) > 0 {
		w.appendLocked(wire)
		drop = w.dropSlowLocked()
		w.trimLocked()
		for c := range w.conns {
			if c.streaming {
				c.wakeUp()
			}
		}
	}
	w.mu.Unlock()
	for _, c := range drop {
		c.nc.Close()
	}
}

// wsChunk is published bytes from start on: the publisher's own memory,
// one chunk per run of publications contiguous in it within a segment (the
// session's wire buffer makes one per segment), so that memory is dropped
// a segment at a time. A chunk ends where a publication ended (a record end
// or a page boundary) or at a segment's end, so a frame may end there too.
type wsChunk struct {
	start wal.LSN
	data  []byte
}

func (c *wsChunk) end() wal.LSN { return c.start + wal.LSN(len(c.data)) }

// appendLocked keeps wire, which starts at pubEnd: it extends the last
// chunk when it continues that chunk's memory within its segment.
func (w *Walsender) appendLocked(wire []byte) {
	seg := wal.LSN(w.cfg.SegmentSize)
	for len(wire) > 0 {
		n := min(len(wire), int(seg-w.pubEnd%seg))
		if last := w.lastChunkBefore(&wire[0]); last != nil && w.pubEnd%seg != 0 {
			last.data = last.data[:len(last.data)+n] // the same memory, so within its capacity
		} else {
			w.mem = append(w.mem, wsChunk{start: w.pubEnd, data: wire[:n]})
		}
		w.pubEnd += wal.LSN(n)
		wire = wire[n:]
	}
	w.winStart = w.mem[0].start
}

// lastChunkBefore is the last chunk when p is the byte right after its
// data in its own memory (a publication continuing it), else nil.
func (w *Walsender) lastChunkBefore(p *byte) *wsChunk {
	if len(w.mem) == 0 {
		return nil
	}
	last := &w.mem[len(w.mem)-1]
	if l := len(last.data); l < cap(last.data) && &last.data[:l+1][l] == p {
		return last
	}
	return nil
}

// chunkLocked is the index of the chunk holding lsn (within [winStart,
// pubEnd)).
func (w *Walsender) chunkLocked(lsn wal.LSN) int {
	i, _ := slices.BinarySearchFunc(w.mem, lsn, func(c wsChunk, lsn wal.LSN) int {
		if c.end() <= lsn {
			return -1
		}
		return 1
	})
	return i
}

// memEqualLocked tells whether memory from from on holds b.
func (w *Walsender) memEqualLocked(from wal.LSN, b []byte) bool {
	for i := w.chunkLocked(from); len(b) > 0 && i < len(w.mem); i++ {
		c := &w.mem[i]
		part := c.data[from-c.start:]
		n := min(len(part), len(b))
		if string(part[:n]) != string(b[:n]) {
			return false
		}
		b, from = b[n:], from+wal.LSN(n)
	}
	return len(b) == 0
}

// memLocked is the memory from lsn (in [winStart, pubEnd)) to the end of
// its chunk.
func (w *Walsender) memLocked(lsn wal.LSN) []byte {
	c := &w.mem[w.chunkLocked(lsn)]
	return c.data[lsn-c.start:]
}

// dropSlowLocked marks walreceivers more than SlowThreshold behind for
// disconnection and returns them.
func (w *Walsender) dropSlowLocked() []*wsConn {
	var drop []*wsConn
	for c := range w.conns {
		if !c.streaming || c.closing {
			continue
		}
		base := max(c.sentPtr, c.exemptUntil)
		if w.pubEnd > base && w.pubEnd-base > wal.LSN(w.cfg.SlowThreshold) {
			c.closing = true
			w.stats.SlowDrops++
			w.log.Warn("walsender: walreceiver too far behind; disconnecting it (it catches up from the archive)",
				"conn", c.pid, "sent", c.sentPtr.String(), "published", w.pubEnd.String(), "slow_threshold", w.cfg.SlowThreshold)
			drop = append(drop, c)
		}
	}
	return drop
}

// trimLocked drops memory no walreceiver needs: everything before the
// current segment, except the previous segment while the archive lacks it,
// and except what a connected walreceiver has yet to be sent.
func (w *Walsender) trimLocked() {
	seg := wal.LSN(w.cfg.SegmentSize)
	keep := w.pubEnd - w.pubEnd%seg
	if w.cfg.Archive != nil && keep >= seg {
		if d := w.cfg.Archive.DurableEnd(); d < keep {
			keep = max(d, keep-seg)
		}
	}
	for c := range w.conns {
		if c.streaming && !c.closing && c.sentPtr >= w.winStart && c.sentPtr < keep {
			keep = c.sentPtr
		}
	}
	// Whole chunks only; the last one stays (appends continue it).
	n := 0
	for n < len(w.mem)-1 && w.mem[n].end() <= keep {
		n++
	}
	if n > 0 {
		clear(w.mem[:n])
		w.mem = w.mem[n:]
		w.winStart = w.mem[0].start
	}
}

// MemoryFloor is the lowest LSN whose bytes the walsender may still read
// from the memory Publish was given: the oldest it keeps, or a frame a
// connection is writing from memory already dropped (a gap, a trim). A
// connection counts until its goroutine is done with it, closing or not.
func (w *Walsender) MemoryFloor() wal.LSN {
	w.mu.Lock()
	defer w.mu.Unlock()
	floor := wal.LSN(math.MaxUint64)
	if len(w.mem) > 0 {
		floor = w.mem[0].start
	}
	for c := range w.conns {
		if c.reading {
			floor = min(floor, c.readingFrom)
		}
	}
	return floor
}

// Published is the end of the published bytes (0 before the first Publish).
func (w *Walsender) Published() wal.LSN {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pubEnd
}

// ShadowApply is the highest apply LSN a connected walreceiver reported
// (0 when none is connected or none has reported).
func (w *Walsender) ShadowApply() wal.LSN {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.maxReportedLocked(func(c *wsConn) wal.LSN { return c.apply })
}

// ShadowFlush is the highest flush LSN a connected walreceiver reported.
func (w *Walsender) ShadowFlush() wal.LSN {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.maxReportedLocked(func(c *wsConn) wal.LSN { return c.flush })
}

func (w *Walsender) maxReportedLocked(field func(*wsConn) wal.LSN) wal.LSN {
	var m wal.LSN
	for c := range w.conns {
		if c.streaming && !c.closing {
			m = max(m, field(c))
		}
	}
	return m
}

// Connected is the number of walreceivers streaming now.
func (w *Walsender) Connected() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for c := range w.conns {
		if c.streaming && !c.closing {
			n++
		}
	}
	return n
}

// Stats returns a snapshot of the counters.
func (w *Walsender) Stats() WalsenderStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.stats
	s.Published, s.MemoryStart, s.MemoryBytes = w.pubEnd, w.winStart, int(w.pubEnd-w.winStart)
	return s
}

// RequestReply sends every streaming walreceiver a keepalive that asks for
// an immediate status reply, so a fresh apply position arrives.
func (w *Walsender) RequestReply() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for c := range w.conns {
		if c.streaming && !c.closing {
			c.prod = true
			c.wakeUp()
		}
	}
}

// WaitApply blocks until a walreceiver reports apply >= lsn, prodding the
// walreceivers for their position every 20 ms meanwhile. The caller bounds
// it with ctx; the error then says how far the shadow got.
func (w *Walsender) WaitApply(ctx context.Context, lsn wal.LSN) error {
	var lastProd time.Time
	timer := time.NewTimer(wsApplyPoll)
	defer timer.Stop()
	for {
		w.mu.Lock()
		applied := w.maxReportedLocked(func(c *wsConn) wal.LSN { return c.apply })
		changed := w.changed
		w.mu.Unlock()
		if applied >= lsn {
			return nil
		}
		if wait := wsApplyPoll - time.Since(lastProd); wait <= 0 {
			w.RequestReply()
			lastProd = time.Now()
			timer.Reset(wsApplyPoll)
		} else {
			timer.Reset(wait)
		}
		select {
		case <-changed:
		case <-timer.C:
		case <-ctx.Done():
			return fmt.Errorf("waiting for the shadow to apply WAL through %s (applied: %s, walreceivers: %d): %w",
				lsn, applied, w.Connected(), ctx.Err())
		case <-w.closed:
			return fmt.Errorf("waiting for the shadow to apply WAL through %s: walsender closed", lsn)
		}
	}
}

// WaitConnected blocks until at least one walreceiver is streaming.
func (w *Walsender) WaitConnected(ctx context.Context) error {
	for {
		w.mu.Lock()
		changed := w.changed
		w.mu.Unlock()
		if w.Connected() > 0 {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("waiting for the shadow's walreceiver to connect: %w", ctx.Err())
		case <-w.closed:
			return errors.New("waiting for the shadow's walreceiver to connect: walsender closed")
		}
	}
}

// DropConnections disconnects every walreceiver (they reconnect on their
// own) and returns how many there were.
func (w *Walsender) DropConnections() int {
	w.mu.Lock()
	var ncs []net.Conn
	for c := range w.conns {
		if !c.closing {
			c.closing = true
			ncs = append(ncs, c.nc)
		}
	}
	w.mu.Unlock()
	for _, nc := range ncs {
		nc.Close()
	}
	return len(ncs)
}

// notifyLocked wakes WaitApply and WaitConnected.
func (w *Walsender) notifyLocked() {
	close(w.changed)
	w.changed = make(chan struct{})
}
