package shadow

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/walshadow/walshadow/internal/wal"
)

// Bridge is a client of the pgext bridge worker running inside the shadow
// (see bridge_frame.go for the wire format). It holds one connection and
// sends one request at a time; it is safe for concurrent use.
//
// A transport failure (the worker restarted, the socket vanished, a broken
// connection) closes the connection; the call then redials and sends its
// request once more (every op is read-only, so a resend is harmless). A
// second failure is returned. A request the worker answers with an error
// (*BridgeError) is not retried.
type Bridge struct {
	path string

	mu    sync.Mutex
	conn  net.Conn
	rd    *bufio.Reader
	hello Hello

	stats [opReplayLSN + 1]bridgeOpCounters
	items atomic.Uint64
	itemE atomic.Uint64
}

type bridgeOpCounters struct {
	requests, errors, redials atomic.Uint64
}

// BridgeOpStats counts one op's calls: Requests (every call), Errors (calls
// that failed, whatever the cause) and Redials (connections re-established
// for the op after a transport failure).
type BridgeOpStats struct {
	Requests, Errors, Redials uint64
}

// BridgeStats are the client's counters, for the walshadow_bridge_* metrics:
// walshadow_bridge_requests_total{op}, walshadow_bridge_errors_total{op},
// walshadow_bridge_redials_total{op} (ByOp gives the op labels), and
// walshadow_bridge_decode_items_total / walshadow_bridge_decode_item_errors_total.
type BridgeStats struct {
	Hello, ReplayLSN, Decode, Scan BridgeOpStats
	// DecodeItems counts items sent in successful DECODE calls;
	// DecodeItemErrors those among them whose output function raised.
	DecodeItems, DecodeItemErrors uint64
}

// ByOp maps each op's metric label (hello, replay_lsn, decode, scan) to its
// counters.
func (s BridgeStats) ByOp() map[string]BridgeOpStats {
	return map[string]BridgeOpStats{
		opHello.String(): s.Hello, opReplayLSN.String(): s.ReplayLSN,
		opDecode.String(): s.Decode, opScan.String(): s.Scan,
	}
}

// DialBridge connects to the worker's socket and checks its protocol
// version with HELLO.
func DialBridge(ctx context.Context, socketPath string) (*Bridge, error) {
	b := &Bridge{path: socketPath}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.connect(ctx); err != nil {
		return nil, err
	}
	return b, nil
}

// Close closes the connection; a later call redials.
func (b *Bridge) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.dropConn()
}

// Stats returns a snapshot of the counters.
func (b *Bridge) Stats() BridgeStats {
	get := func(op bridgeOp) BridgeOpStats {
		c := &b.stats[op]
		return BridgeOpStats{Requests: c.requests.Load(), Errors: c.errors.Load(), Redials: c.redials.Load()}
	}
	return BridgeStats{
		Hello: get(opHello), ReplayLSN: get(opReplayLSN), Decode: get(opDecode), Scan: get(opScan),
		DecodeItems: b.items.Load(), DecodeItemErrors: b.itemE.Load(),
	}
}

// Hello asks the worker for its protocol, server version and whether the
// shadow is in recovery.
func (b *Bridge) Hello(ctx context.Context) (Hello, error) {
	var h Hello
	err := b.call(ctx, opHello, encodeHelloRequest(), func(p []byte) (err error) {
		h, err = parseHelloResponse(p)
		return err
	})
	return h, err
}

// ReplayLSN is the shadow's replay position (its insert position when it
// is not in recovery).
func (b *Bridge) ReplayLSN(ctx context.Context) (wal.LSN, error) {
	var lsn wal.LSN
	err := b.call(ctx, opReplayLSN, encodeReplayLSNRequest(), func(p []byte) (err error) {
		lsn, err = parseReplayLSNResponse(p)
		return err
	})
	return lsn, err
}

// Decode renders each item with its type's output function, with output
// settings pinned in the worker (TimeZone UTC, DateStyle ISO, MDY,
// IntervalStyle postgres, extra_float_digits 1, bytea_output hex, C
// lc_numeric/lc_time/lc_monetary). Results are in item order; an item whose
// output function raised has Err set and does not fail the others.
func (b *Bridge) Decode(ctx context.Context, items []DecodeItem) ([]DecodeResult, error) {
	req, err := encodeDecodeRequest(items)
	if err != nil {
		b.countFailure(opDecode)
		return nil, err
	}
	var out []DecodeResult
	err = b.call(ctx, opDecode, req, func(p []byte) (err error) {
		out, err = parseDecodeResponse(p, len(items))
		return err
	})
	if err != nil {
		return nil, err
	}
	b.items.Add(uint64(len(out)))
	for _, r := range out {
		if r.Err != "" {
			b.itemE.Add(1)
		}
	}
	return out, nil
}

// Scan reads one catalog projection as transaction tree topXID sees it
// (0: the committed view), limited to oids (relation oids for pg_class,
// pg_attribute and pg_index; empty: the whole catalog). A whole-catalog or
// pg_namespace/pg_type scan for a non-zero topXID fails when an in-progress
// writer cannot be attributed. Callers that need a stable view compare
// LSNStart and LSNEnd.
func (b *Bridge) Scan(ctx context.Context, catalog Catalog, topXID uint32, oids []uint32) (*ScanResult, error) {
	req, err := encodeScanRequest(catalog, topXID, oids)
	if err != nil {
		b.countFailure(opScan)
		return nil, err
	}
	var res *ScanResult
	err = b.call(ctx, opScan, req, func(p []byte) (err error) {
		if res, err = parseScanResponse(p); err != nil {
			return err
		}
		if res.Columns != catalog.Columns() {
			return fmt.Errorf("%w: scan of %s returned %d columns, want %d", ErrBridgeCorrupt, catalog, res.Columns, catalog.Columns())
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("scanning %s (top xid %d, %d oids): %w", catalog, topXID, len(oids), err)
	}
	return res, nil
}

func (b *Bridge) countFailure(op bridgeOp) {
	b.stats[op].requests.Add(1)
	b.stats[op].errors.Add(1)
}

// transportError marks a failure of the connection itself, which a redial
// may cure.
type transportError struct{ err error }

func (e *transportError) Error() string { return e.err.Error() }
func (e *transportError) Unwrap() error { return e.err }

// call sends req and hands the response payload to parse, redialling once
// after a transport failure.
func (b *Bridge) call(ctx context.Context, op bridgeOp, req []byte, parse func([]byte) error) error {
	c := &b.stats[op]
	c.requests.Add(1)
	b.mu.Lock()
	defer b.mu.Unlock()
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		if b.conn == nil {
			if attempt > 0 || b.hello.Protocol != 0 {
				c.redials.Add(1)
			}
			if err = b.connect(ctx); err != nil {
				break
			}
		}
		var payload []byte
		payload, err = b.exchange(ctx, req)
		if err == nil {
			err = parse(payload)
			// A response that does not parse leaves the stream in doubt.
			if err != nil && !isBridgeError(err) {
				b.dropConn()
			}
			break
		}
		b.dropConn()
		var te *transportError
		if ctx.Err() != nil || !errors.As(err, &te) {
			break
		}
	}
	if err != nil {
		c.errors.Add(1)
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return fmt.Errorf("shadow bridge %s at %s: %w", op, b.path, err)
	}
	return nil
}

func isBridgeError(err error) bool {
	var be *BridgeError
	return errors.As(err, &be)
}

// connect dials the socket and checks HELLO; b.mu is held.
func (b *Bridge) connect(ctx context.Context) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", b.path)
	if err != nil {
		return &transportError{fmt.Errorf("connecting to the shadow bridge: %w", err)}
	}
	b.conn, b.rd = conn, newBridgeReader(conn)
	payload, err := b.exchange(ctx, encodeHelloRequest())
	if err != nil {
		b.dropConn()
		return err
	}
	h, err := parseHelloResponse(payload)
	if err == nil && h.Protocol != BridgeProtocolVersion {
		err = fmt.Errorf("shadow bridge speaks protocol %d, this walshadow speaks %d: rebuild pgext to match", h.Protocol, BridgeProtocolVersion)
	}
	if err != nil {
		b.dropConn()
		return err
	}
	b.hello = h
	return nil
}

func newBridgeReader(conn net.Conn) *bufio.Reader { return bufio.NewReaderSize(conn, 64<<10) }

func (b *Bridge) dropConn() error {
	if b.conn == nil {
		return nil
	}
	err := b.conn.Close()
	b.conn, b.rd = nil, nil
	return err
}

// exchange writes one request frame and reads one response frame; b.mu is
// held. The context's deadline and cancellation interrupt the I/O.
func (b *Bridge) exchange(ctx context.Context, req []byte) ([]byte, error) {
	conn := b.conn
	deadline, _ := ctx.Deadline()
	if err := conn.SetDeadline(deadline); err != nil {
		return nil, &transportError{err}
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := conn.Write(req); err != nil {
		return nil, &transportError{fmt.Errorf("sending: %w", err)}
	}
	p, err := readFrame(b.rd, MaxBridgeResponse)
	if err != nil {
		if errors.Is(err, ErrBridgeCorrupt) {
			return nil, err
		}
		return nil, &transportError{fmt.Errorf("receiving: %w", err)}
	}
	return p, nil
}
