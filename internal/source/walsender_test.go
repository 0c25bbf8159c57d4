package source

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/walshadow/walshadow/internal/wal"
)

// The session pump's ShadowFeed and SegmentSink, restated (importing the
// session package here could make a cycle).
var (
	_ interface {
		Publish(start wal.LSN, wire []byte)
		WaitApply(ctx context.Context, lsn wal.LSN) error
	} = (*Walsender)(nil)
	_ interface {
		WriteSegment(start wal.LSN, data []byte) error
	} = (*ArchiveLSNSink)(nil)
)

const (
	wsTestSegSize  = 1 << 20
	wsTestSystemID = 7212345678901234567
)

// wsStart starts a walsender on a private socket directory; it is closed
// and its Serve goroutine awaited when the test ends.
func wsStart(t *testing.T, mod func(*WalsenderConfig)) *Walsender {
	t.Helper()
	cfg := WalsenderConfig{
		SocketDir:    t.TempDir(),
		Port:         5433,
		SystemID:     wsTestSystemID,
		Timeline:     1,
		SegmentSize:  wsTestSegSize,
		PGVersionNum: 150018,
	}
	if mod != nil {
		mod(&cfg)
	}
	w, err := NewWalsender(cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Serve(context.Background()) }()
	t.Cleanup(func() {
		w.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return after Close")
		}
	})
	return w
}

// wsTestReceiver is a minimal walreceiver speaking the protocol by hand.
type wsTestReceiver struct {
	t  *testing.T
	nc net.Conn
	fe *pgproto3.Frontend
	ps map[string]string
}

func wsDial(t *testing.T, w *Walsender, params map[string]string) (*wsTestReceiver, *pgproto3.ErrorResponse) {
	t.Helper()
	nc, err := net.Dial("unix", w.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	r := &wsTestReceiver{t: t, nc: nc, fe: pgproto3.NewFrontend(nc, nc), ps: map[string]string{}}
	if params == nil {
		params = map[string]string{"user": "postgres", "database": "replication", "replication": "true"}
	}
	r.fe.Send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30, Parameters: params})
	if err := r.fe.Flush(); err != nil {
		t.Fatal(err)
	}
	for {
		msg := r.receive()
		switch m := msg.(type) {
		case *pgproto3.ParameterStatus:
			r.ps[m.Name] = m.Value
		case *pgproto3.ReadyForQuery:
			return r, nil
		case *pgproto3.ErrorResponse:
			return r, m
		}
	}
}

func (r *wsTestReceiver) receive() pgproto3.BackendMessage {
	r.t.Helper()
	r.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	msg, err := r.fe.Receive()
	if err != nil {
		r.t.Fatalf("receiving: %v", err)
	}
	return msg
}

// query runs a simple query and returns its rows or its error.
func (r *wsTestReceiver) query(q string) ([][][]byte, *pgproto3.ErrorResponse) {
	r.t.Helper()
	r.fe.Send(&pgproto3.Query{String: q})
	if err := r.fe.Flush(); err != nil {
		r.t.Fatal(err)
	}
	var rows [][][]byte
	var qerr *pgproto3.ErrorResponse
	for {
		switch m := r.receive().(type) {
		case *pgproto3.DataRow:
			row := make([][]byte, len(m.Values))
			for i, v := range m.Values {
				if v != nil {
					row[i] = append([]byte{}, v...)
				}
			}
			rows = append(rows, row)
		case *pgproto3.ErrorResponse:
			e := *m
			qerr = &e
		case *pgproto3.ReadyForQuery:
			return rows, qerr
		}
	}
}

// startReplication enters CopyBoth mode, or returns the error.
func (r *wsTestReceiver) startReplication(q string) *pgproto3.ErrorResponse {
	r.t.Helper()
	r.fe.Send(&pgproto3.Query{String: q})
	if err := r.fe.Flush(); err != nil {
		r.t.Fatal(err)
	}
	switch m := r.receive().(type) {
	case *pgproto3.CopyBothResponse:
		return nil
	case *pgproto3.ErrorResponse:
		e := *m
		r.receive() // ReadyForQuery
		return &e
	default:
		r.t.Fatalf("START_REPLICATION answered with %T", m)
		return nil
	}
}

// wsTestFrame is one parsed message from the walsender.
type wsTestFrame struct {
	kind           byte
	start, walEnd  wal.LSN
	data           []byte
	replyRequested bool
}

func (r *wsTestReceiver) frame() wsTestFrame {
	r.t.Helper()
	for {
		switch m := r.receive().(type) {
		case *pgproto3.CopyData:
			d := m.Data
			switch d[0] {
			case wsMsgXLogData:
				return wsTestFrame{kind: 'w', start: wal.LSN(binary.BigEndian.Uint64(d[1:])),
					walEnd: wal.LSN(binary.BigEndian.Uint64(d[9:])), data: append([]byte{}, d[25:]...)}
			case wsMsgKeepalive:
				if len(d) != wsKeepaliveLen {
					r.t.Fatalf("keepalive of %d bytes", len(d))
				}
				return wsTestFrame{kind: 'k', walEnd: wal.LSN(binary.BigEndian.Uint64(d[1:])), replyRequested: d[17] == 1}
			default:
				r.t.Fatalf("unknown streaming message %q", d[0])
			}
		case *pgproto3.ErrorResponse:
			r.t.Fatalf("walsender error while streaming: %s (%s)", m.Message, m.Code)
		default:
			r.t.Fatalf("unexpected %T while streaming", m)
		}
	}
}

// wal reads XLogData until through, skipping keepalives, and checks the
// frames are contiguous from start and never advertise unpublished bytes.
func (r *wsTestReceiver) wal(start, through wal.LSN, published wal.LSN) []byte {
	r.t.Helper()
	var got []byte
	next := start
	for next < through {
		f := r.frame()
		if f.kind != 'w' {
			continue
		}
		end := f.start + wal.LSN(len(f.data))
		switch {
		case f.start != next:
			r.t.Fatalf("frame starts at %s, want %s", f.start, next)
		case len(f.data) == 0 || len(f.data) > wsMaxFrame:
			r.t.Fatalf("frame of %d bytes", len(f.data))
		case f.walEnd < end || f.walEnd > published:
			r.t.Fatalf("frame [%s, %s) advertises WAL end %s (published %s)", f.start, end, f.walEnd, published)
		case f.walEnd > end && end%wsWALPageSize != 0:
			// Cut short of what was published: only at a page boundary.
			r.t.Fatalf("frame [%s, %s) stops short of %s inside a page", f.start, end, f.walEnd)
		}
		got = append(got, f.data...)
		next = end
	}
	return got
}

func (r *wsTestReceiver) status(s wsStandbyStatus) {
	r.t.Helper()
	r.fe.Send(&pgproto3.CopyData{Data: wsAppendStandbyStatus(nil, s)})
	if err := r.fe.Flush(); err != nil {
		r.t.Fatal(err)
	}
}

func wsTestBytes(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// wsPublishChunks publishes b (starting at start) in uneven pieces.
func wsPublishChunks(w *Walsender, start wal.LSN, b []byte) {
	for i, n := 0, 0; i < len(b); i += n {
		n = min(len(b)-i, 1000+(i*7)%70000)
		w.Publish(start+wal.LSN(i), b[i:i+n])
	}
}

func wsEventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestWalsenderStartupAndCommands(t *testing.T) {
	w := wsStart(t, func(c *WalsenderConfig) {
		c.TimelineHistory = map[uint32][]byte{2: []byte("1\t0/3000000\tno recovery target specified\n")}
	})
	if fi, err := os.Stat(w.SocketPath()); err != nil || fi.Mode().Perm() != 0o600 || filepath.Base(w.SocketPath()) != ".s.PGSQL.5433" {
		t.Fatalf("socket %s: %v, %v", w.SocketPath(), fi.Mode(), err)
	}
	r, ferr := wsDial(t, w, nil)
	if ferr != nil {
		t.Fatalf("startup refused: %s", ferr.Message)
	}
	if r.ps["server_version"] != "15.18" || r.ps["integer_datetimes"] != "on" || r.ps["standard_conforming_strings"] != "on" || r.ps["client_encoding"] != "UTF8" {
		t.Errorf("parameter status: %v", r.ps)
	}
	w.Publish(0x3000000, []byte("0123456789"))
	rows, qerr := r.query("IDENTIFY_SYSTEM")
	if qerr != nil || len(rows) != 1 {
		t.Fatalf("IDENTIFY_SYSTEM: %v %v", rows, qerr)
	}
	if got := fmt.Sprintf("%s|%s|%s|%v", rows[0][0], rows[0][1], rows[0][2], rows[0][3] == nil); got != strconv.FormatUint(wsTestSystemID, 10)+"|1|0/300000A|true" {
		t.Errorf("IDENTIFY_SYSTEM row %s", got)
	}
	if rows, qerr := r.query("TIMELINE_HISTORY 1"); qerr != nil || string(rows[0][0]) != "00000001.history" || len(rows[0][1]) != 0 {
		t.Errorf("TIMELINE_HISTORY 1: %q %v", rows, qerr)
	}
	if rows, qerr := r.query("TIMELINE_HISTORY 2"); qerr != nil || string(rows[0][0]) != "00000002.history" || !strings.HasPrefix(string(rows[0][1]), "1\t0/3000000") {
		t.Errorf("TIMELINE_HISTORY 2: %q %v", rows, qerr)
	}
	if _, qerr := r.query("TIMELINE_HISTORY 3"); qerr == nil || qerr.Code != "58P01" {
		t.Errorf("TIMELINE_HISTORY 3: %v", qerr)
	}
	if rows, qerr := r.query("SHOW wal_segment_size"); qerr != nil || string(rows[0][0]) != "1MB" {
		t.Errorf("SHOW wal_segment_size: %q %v", rows, qerr)
	}
	if _, qerr := r.query("SHOW work_mem"); qerr == nil || qerr.Code != "42704" {
		t.Errorf("SHOW work_mem: %v", qerr)
	}
	if _, qerr := r.query("BASE_BACKUP"); qerr == nil {
		t.Error("BASE_BACKUP accepted")
	}
	if qerr := r.startReplication("START_REPLICATION SLOT x LOGICAL 0/0"); qerr == nil || qerr.Code != "0A000" {
		t.Errorf("logical replication: %v", qerr)
	}
	if qerr := r.startReplication("START_REPLICATION 0/3000000 TIMELINE 2"); qerr == nil {
		t.Error("foreign timeline accepted")
	}
	// The connection is still usable after errors.
	if _, qerr := r.query("IDENTIFY_SYSTEM"); qerr != nil {
		t.Errorf("IDENTIFY_SYSTEM after errors: %v", qerr)
	}

	// A normal (non-replication) connection is refused.
	if _, ferr := wsDial(t, w, map[string]string{"user": "postgres", "database": "postgres"}); ferr == nil || ferr.Severity != "FATAL" {
		t.Errorf("non-replication connection: %v", ferr)
	}
}

// pgconn is a libpq-compatible client: it must accept our startup and
// results as a walreceiver's libpq does.
func TestWalsenderPgconnClient(t *testing.T) {
	w := wsStart(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgconn.Connect(ctx, fmt.Sprintf("host=%s port=5433 user=postgres replication=true sslmode=disable", filepath.Dir(w.SocketPath())))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if v := conn.ParameterStatus("server_version"); v != "15.18" {
		t.Errorf("server_version %q", v)
	}
	res, err := conn.Exec(ctx, "IDENTIFY_SYSTEM").ReadAll()
	if err != nil || len(res) != 1 || len(res[0].Rows) != 1 {
		t.Fatalf("IDENTIFY_SYSTEM: %v %v", res, err)
	}
	if got := string(res[0].Rows[0][0]); got != strconv.FormatUint(wsTestSystemID, 10) {
		t.Errorf("systemid %s", got)
	}
	if names := res[0].FieldDescriptions[0].Name + "," + res[0].FieldDescriptions[3].Name; names != "systemid,dbname" {
		t.Errorf("columns %s", names)
	}
}

func TestWalsenderStreamsAndReports(t *testing.T) {
	w := wsStart(t, func(c *WalsenderConfig) { c.KeepaliveInterval = 100 * time.Millisecond })
	start := wal.LSN(5 * wsTestSegSize)
	data := wsTestBytes(3*wsTestSegSize/2, 1)
	half := len(data) / 3

	// Connect before anything is published: the stream waits.
	r, _ := wsDial(t, w, nil)
	if qerr := r.startReplication("START_REPLICATION SLOT \"shadow\" " + wsFormatLSN(start) + " TIMELINE 1"); qerr != nil {
		t.Fatal(qerr.Message)
	}
	wsEventually(t, "the stream to register", func() bool { return w.Connected() == 1 })
	if f := r.frame(); f.kind != 'k' || f.walEnd != 0 {
		t.Fatalf("idle stream before publication: %+v, want a keepalive with WAL end 0", f)
	}
	wsPublishChunks(w, start, data[:half])
	if got := r.wal(start, start+wal.LSN(half), start+wal.LSN(half)); !bytes.Equal(got, data[:half]) {
		t.Fatal("streamed bytes differ from the published ones")
	}
	wsPublishChunks(w, start+wal.LSN(half), data[half:])
	end := start + wal.LSN(len(data))
	if got := r.wal(start+wal.LSN(half), end, end); !bytes.Equal(got, data[half:]) {
		t.Fatal("streamed bytes differ from the published ones (second part)")
	}
	if st := w.Stats(); st.BytesSent != int64(len(data)) || st.ArchiveBytesSent != 0 || st.Published != end {
		t.Errorf("stats %+v", st)
	}
	// Memory keeps the current segment only (no archive, nobody behind).
	if st := w.Stats(); st.MemoryStart != end-end%wsTestSegSize {
		t.Errorf("memory starts at %s, want the current segment's start", st.MemoryStart)
	}

	// Idle: keepalives carry the sent position.
	if f := r.frame(); f.kind != 'k' || f.walEnd != end || f.replyRequested {
		t.Errorf("idle keepalive %+v", f)
	}

	// Status reports feed ShadowFlush/ShadowApply and WaitApply.
	if w.ShadowApply() != 0 {
		t.Errorf("apply before any report: %s", w.ShadowApply())
	}
	r.status(wsStandbyStatus{Write: end, Flush: end, Apply: start + 100})
	wsEventually(t, "the status report", func() bool { return w.ShadowFlush() == end })
	if w.ShadowApply() != start+100 {
		t.Errorf("ShadowApply %s", w.ShadowApply())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.WaitApply(ctx, start+100); err != nil {
		t.Errorf("WaitApply of a reported position: %v", err)
	}

	// WaitApply prods with reply-requested keepalives until apply arrives.
	waitErr := make(chan error, 1)
	go func() { waitErr <- w.WaitApply(ctx, end) }()
	for {
		if f := r.frame(); f.kind == 'k' && f.replyRequested {
			break
		}
	}
	r.status(wsStandbyStatus{Write: end, Flush: end, Apply: end})
	if err := <-waitErr; err != nil {
		t.Errorf("WaitApply: %v", err)
	}
	short, cancelShort := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelShort()
	if err := w.WaitApply(short, end+1); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), end.String()) {
		t.Errorf("WaitApply beyond the shadow: %v", err)
	}

	// A walreceiver asking for a reply gets a keepalive at once.
	r.status(wsStandbyStatus{Write: end, Flush: end, Apply: end, ReplyRequested: true})
	if f := r.frame(); f.kind != 'k' {
		t.Errorf("answer to a reply request: %+v", f)
	}

	// CopyDone ends streaming and returns to command mode.
	r.fe.Send(&pgproto3.CopyDone{})
	r.fe.Flush()
	sawCopyDone := false
	for {
		msg := r.receive()
		if _, ok := msg.(*pgproto3.CopyDone); ok {
			sawCopyDone = true
		}
		if cc, ok := msg.(*pgproto3.CommandComplete); ok && string(cc.CommandTag) != "START_STREAMING" {
			t.Errorf("command tag %q", cc.CommandTag)
		}
		if _, ok := msg.(*pgproto3.ReadyForQuery); ok {
			break
		}
	}
	if !sawCopyDone {
		t.Error("no CopyDone after the walreceiver's CopyDone")
	}
	if w.Connected() != 0 || w.ShadowApply() != 0 {
		t.Errorf("after CopyDone: connected %d, apply %s", w.Connected(), w.ShadowApply())
	}
	if _, qerr := r.query("IDENTIFY_SYSTEM"); qerr != nil {
		t.Errorf("command after streaming: %v", qerr.Message)
	}
}

func TestWalsenderServesFromArchive(t *testing.T) {
	archive := archiveOpen(t, t.TempDir())
	w := wsStart(t, func(c *WalsenderConfig) { c.Archive = archive })
	start := wal.LSN(2 * wsTestSegSize)
	all := wsTestBytes(3*wsTestSegSize+12345+4, 2)
	data := all[:len(all)-4]
	// The first two segments are archived as the pump would, then published
	// on: memory keeps the current segment only.
	wsPublishChunks(w, start, data)
	for i := 0; i < 3; i++ {
		seg := data[i*wsTestSegSize : (i+1)*wsTestSegSize]
		if err := archive.WriteSegment(archiveSegmentName(1, uint64(2+i), wsTestSegSize), seg); err != nil {
			t.Fatal(err)
		}
	}
	// Published from the same buffer, as the pump publishes a segment: a
	// frame may end where an earlier publication from another buffer ended
	// (a record end), which this receiver's page check would not know.
	w.Publish(start+wal.LSN(len(data)), all[len(data):])
	data = all
	end := start + wal.LSN(len(data))
	if st := w.Stats(); st.MemoryStart != 5*wsTestSegSize {
		t.Fatalf("memory starts at %s, want 0/500000 (the current segment)", st.MemoryStart)
	}

	r, _ := wsDial(t, w, nil)
	if qerr := r.startReplication("START_REPLICATION " + wsFormatLSN(start) + " TIMELINE 1"); qerr != nil {
		t.Fatal(qerr.Message)
	}
	if got := r.wal(start, end, end); !bytes.Equal(got, data) {
		t.Fatal("bytes served from archive and memory differ from the published ones")
	}
	if st := w.Stats(); st.ArchiveBytesSent != 3*wsTestSegSize {
		t.Errorf("archive bytes sent %d, want %d", st.ArchiveBytesSent, 3*wsTestSegSize)
	}

	// Older than the archive: refused before streaming, with PostgreSQL's code.
	r2, _ := wsDial(t, w, nil)
	qerr := r2.startReplication("START_REPLICATION " + wsFormatLSN(start-1) + " TIMELINE 1")
	if qerr == nil || qerr.Code != "58P01" || !strings.Contains(qerr.Message, "000000010000000000000001") {
		t.Fatalf("start before the archive: %+v", qerr)
	}
	// Swept while needed: the stream ends with an error naming the segment.
	if _, err := archive.Sweep(3 * wsTestSegSize); err != nil {
		t.Fatal(err)
	}
	if qerr := r2.startReplication("START_REPLICATION " + wsFormatLSN(start) + " TIMELINE 1"); qerr == nil {
		t.Fatal("start in a swept segment accepted")
	}
}

func TestWalsenderDropsSlowReceiver(t *testing.T) {
	w := wsStart(t, func(c *WalsenderConfig) { c.SlowThreshold = 256 << 10 })
	start := wal.LSN(wsTestSegSize)
	w.Publish(start, wsTestBytes(100<<10, 3)) // backlog before connecting: exempt

	r, _ := wsDial(t, w, nil)
	if qerr := r.startReplication("START_REPLICATION " + wsFormatLSN(start) + " TIMELINE 1"); qerr != nil {
		t.Fatal(qerr.Message)
	}
	wsEventually(t, "the stream to register", func() bool { return w.Connected() == 1 })
	// The receiver reads nothing: socket buffers fill, then the queue grows.
	next := start + 100<<10
	for i := 0; i < 64 && w.Stats().SlowDrops == 0; i++ {
		chunk := wsTestBytes(64<<10, uint64(i))
		w.Publish(next, chunk)
		next += wal.LSN(len(chunk))
		time.Sleep(time.Millisecond)
	}
	if st := w.Stats(); st.SlowDrops != 1 {
		t.Fatalf("slow receiver not dropped after %d published bytes: %+v", next-start, st)
	}
	wsEventually(t, "the dropped stream to go", func() bool { return w.Connected() == 0 })
	// The dropped receiver sees its stream end.
	r.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		if _, err := r.fe.Receive(); err != nil {
			break
		}
	}
}

func TestWalsenderPublishOverlapAndGap(t *testing.T) {
	w := wsStart(t, nil)
	w.Publish(0x1000000, []byte("abcdef"))
	w.Publish(0x1000002, []byte("cdefgh")) // re-publishes "cdef", adds "gh"
	if w.Published() != 0x1000008 {
		t.Fatalf("published end %s", w.Published())
	}
	w.Publish(0x1000004, []byte("XX")) // conflicting re-publication: ignored, counted
	w.Publish(0x1000010, []byte("after a gap"))
	st := w.Stats()
	if st.PublishConflicts != 1 || st.PublishGaps != 1 || st.Published != 0x1000010+11 || st.MemoryStart != 0x1000010 {
		t.Fatalf("stats %+v", st)
	}
	r, _ := wsDial(t, w, nil)
	if qerr := r.startReplication("START_REPLICATION 0/1000010 TIMELINE 1"); qerr != nil {
		t.Fatal(qerr.Message)
	}
	if got := r.wal(0x1000010, 0x1000010+11, st.Published); string(got) != "after a gap" {
		t.Errorf("after the gap: %q", got)
	}
	// Before the gap is neither in memory nor in an archive.
	r2, _ := wsDial(t, w, nil)
	if qerr := r2.startReplication("START_REPLICATION 0/1000000 TIMELINE 1"); qerr == nil || qerr.Code != "58P01" {
		t.Errorf("start before the gap: %v", qerr)
	}
}

func TestWalsenderSocketSetup(t *testing.T) {
	dir := t.TempDir()
	// A stale socket left by a crash is replaced.
	stale := filepath.Join(dir, ".s.PGSQL.5999")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	cfg := WalsenderConfig{SocketDir: dir, Port: 5999, SystemID: 1, Timeline: 1, SegmentSize: wsTestSegSize, PGVersionNum: 150018}
	w, err := NewWalsender(cfg)
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	// A live one is not.
	if _, err := NewWalsender(cfg); err == nil || !strings.Contains(err.Error(), "another server") {
		t.Errorf("second walsender on a live socket: %v", err)
	}
	w.Close()
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("socket left after Close: %v", err)
	}
	for name, mod := range map[string]func(*WalsenderConfig){
		"no system id":     func(c *WalsenderConfig) { c.SystemID = 0 },
		"bad segment size": func(c *WalsenderConfig) { c.SegmentSize = 12345 },
		"old version":      func(c *WalsenderConfig) { c.PGVersionNum = 90600 },
		"non-loopback TCP": func(c *WalsenderConfig) { c.TCPAddr = "0.0.0.0:0" },
		"unknown owner":    func(c *WalsenderConfig) { c.SocketOwner = "no-such-user-walshadow" },
		"path too long":    func(c *WalsenderConfig) { c.SocketDir = filepath.Join(dir, strings.Repeat("d", 100)) },
		"archive segment size": func(c *WalsenderConfig) {
			c.Archive, _ = OpenArchive(ArchiveConfig{Dir: t.TempDir(), SegmentSize: 16 << 20})
		},
	} {
		c := cfg
		mod(&c)
		if w, err := NewWalsender(c); err == nil {
			w.Close()
			t.Errorf("%s: accepted", name)
		}
	}

	// Owned by the shadow's OS user when we are root.
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Skip("no postgres user")
		}
		c := cfg
		c.SocketDir = filepath.Join(t.TempDir(), "sock")
		c.SocketOwner = "postgres"
		w, err := NewWalsender(c)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		for _, p := range []string{w.SocketPath(), c.SocketDir} {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if uid := fi.Sys().(*syscall.Stat_t).Uid; strconv.Itoa(int(uid)) != u.Uid || fi.Mode().Perm() != 0o600 && fi.Mode().Perm() != 0o700 {
				t.Errorf("%s: uid %d, mode %v; want %s and owner-only", p, uid, fi.Mode().Perm(), u.Uid)
			}
		}
	}
}

func TestWalsenderTCPAndShutdown(t *testing.T) {
	w := wsStart(t, func(c *WalsenderConfig) { c.TCPAddr = "127.0.0.1:0" })
	nc, err := net.Dial("tcp", w.TCPAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	fe := pgproto3.NewFrontend(nc, nc)
	// libpq probes SSL first on TCP; we decline with 'N'.
	fe.Send(&pgproto3.SSLRequest{})
	fe.Flush()
	b := make([]byte, 1)
	if _, err := nc.Read(b); err != nil || b[0] != 'N' {
		t.Fatalf("SSL request answered %q, %v", b, err)
	}
	fe.Send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30,
		Parameters: map[string]string{"user": "postgres", "replication": "true"}})
	fe.Flush()
	for {
		msg, err := fe.Receive()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := msg.(*pgproto3.ReadyForQuery); ok {
			break
		}
	}
	// Close disconnects live clients.
	w.Close()
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := fe.Receive(); err == nil {
		t.Error("connection survived Close")
	}
}

func TestWalsenderConcurrentPublishStress(t *testing.T) {
	archive := archiveOpen(t, t.TempDir())
	w := wsStart(t, func(c *WalsenderConfig) { c.Archive = archive })
	start := wal.LSN(3 * wsTestSegSize)
	data := wsTestBytes(5*wsTestSegSize+777, 9)
	r, _ := wsDial(t, w, nil)
	if qerr := r.startReplication("START_REPLICATION " + wsFormatLSN(start) + " TIMELINE 1"); qerr != nil {
		t.Fatal(qerr.Message)
	}
	wsEventually(t, "the stream to register", func() bool { return w.Connected() == 1 })
	published := make(chan struct{})
	defer func() { <-published }()
	go func() {
		defer close(published)
		for i, n := 0, 0; i < len(data); i += n {
			n = min(len(data)-i, 1+(i*13)%9000)
			w.Publish(start+wal.LSN(i), data[i:i+n])
			if end := i + n; end%wsTestSegSize < n && end >= wsTestSegSize {
				segNo := uint64(start)/wsTestSegSize + uint64(end/wsTestSegSize) - 1
				seg := data[(end/wsTestSegSize-1)*wsTestSegSize : end/wsTestSegSize*wsTestSegSize]
				if err := archive.WriteSegment(archiveSegmentName(1, segNo, wsTestSegSize), seg); err != nil {
					t.Error(err)
				}
			}
		}
	}()
	end := start + wal.LSN(len(data))
	got := r.wal(start, end, end)
	if !bytes.Equal(got, data) {
		for i := range got {
			if got[i] != data[i] {
				t.Fatalf("streamed bytes differ from published at offset %d (LSN %s)", i, start+wal.LSN(i))
			}
		}
	}
}
