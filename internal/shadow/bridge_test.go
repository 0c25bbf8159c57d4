package shadow

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/wal"
)

// fakeWorker speaks the bridge protocol on a unix socket; answer decides
// each response (nil: close the connection without answering).
type fakeWorker struct {
	path   string
	ln     net.Listener
	conns  atomic.Int32
	served atomic.Int32
	answer func(conn int, req []byte) []byte
	wg     sync.WaitGroup
}

func startFakeWorker(t *testing.T, answer func(conn int, req []byte) []byte) *fakeWorker {
	t.Helper()
	dir, err := os.MkdirTemp("", "wsb-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	w := &fakeWorker{path: filepath.Join(dir, "b.sock"), answer: answer}
	if w.ln, err = net.Listen("unix", w.path); err != nil {
		t.Fatal(err)
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		for {
			c, err := w.ln.Accept()
			if err != nil {
				return
			}
			n := int(w.conns.Add(1))
			w.wg.Add(1)
			go func() { defer w.wg.Done(); w.serve(n, c) }()
		}
	}()
	t.Cleanup(func() { w.ln.Close(); w.wg.Wait() })
	return w
}

func (w *fakeWorker) serve(n int, c net.Conn) {
	defer c.Close()
	for {
		req, err := readFrame(c, 1<<20)
		if err != nil {
			return
		}
		var resp []byte
		if bridgeOp(req[0]) == opHello {
			resp = encodeHelloResponse(Hello{Protocol: 1, PGVersionNum: 150018, InRecovery: true})
		} else {
			w.served.Add(1)
			resp = w.answer(n, req)
		}
		if resp == nil {
			return
		}
		if _, err := c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(resp))), resp...)); err != nil {
			return
		}
	}
}

func lsnResponse(l wal.LSN) []byte {
	return binary.BigEndian.AppendUint64([]byte{bridgeStatusOK}, uint64(l))
}

func TestBridgeClientRedialsOnce(t *testing.T) {
	// The first connection dies on its first request; the second answers.
	w := startFakeWorker(t, func(conn int, req []byte) []byte {
		if conn == 1 {
			return nil
		}
		return lsnResponse(0x1234)
	})
	ctx := context.Background()
	b, err := DialBridge(ctx, w.path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	lsn, err := b.ReplayLSN(ctx)
	if err != nil || lsn != 0x1234 {
		t.Fatalf("ReplayLSN after a broken connection: %s, %v", lsn, err)
	}
	if got := b.Stats().ReplayLSN; got != (BridgeOpStats{Requests: 1, Redials: 1}) {
		t.Errorf("stats %+v", got)
	}
	if w.conns.Load() != 2 {
		t.Errorf("%d connections, want 2", w.conns.Load())
	}
}

func TestBridgeClientGivesUpAfterOneRetry(t *testing.T) {
	w := startFakeWorker(t, func(int, []byte) []byte { return nil })
	ctx := context.Background()
	b, err := DialBridge(ctx, w.path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.ReplayLSN(ctx); err == nil {
		t.Fatal("ReplayLSN succeeded against a worker that never answers")
	}
	if got := b.Stats().ReplayLSN; got != (BridgeOpStats{Requests: 1, Errors: 1, Redials: 1}) {
		t.Errorf("stats %+v", got)
	}
	if w.served.Load() != 2 {
		t.Errorf("the request was sent %d times, want 2", w.served.Load())
	}
}

func TestBridgeClientServerErrorIsNotRetried(t *testing.T) {
	w := startFakeWorker(t, func(int, []byte) []byte {
		return encodeErrorResponse(&BridgeError{SQLState: "55000", Message: "inconclusive"})
	})
	ctx := context.Background()
	b, err := DialBridge(ctx, w.path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for i := 0; i < 2; i++ {
		_, err = b.Scan(ctx, CatalogAttribute, 7, nil)
		var be *BridgeError
		if !errors.As(err, &be) || be.SQLState != "55000" || be.Message != "inconclusive" || be.Op != "scan" {
			t.Fatalf("scan: %v", err)
		}
	}
	if got := b.Stats().Scan; got != (BridgeOpStats{Requests: 2, Errors: 2}) {
		t.Errorf("stats %+v", got)
	}
	if w.conns.Load() != 1 || w.served.Load() != 2 {
		t.Errorf("%d connections, %d requests; want 1 and 2", w.conns.Load(), w.served.Load())
	}
}

func TestBridgeClientResponseCap(t *testing.T) {
	w := startFakeWorker(t, nil)
	w.answer = func(int, []byte) []byte { return lsnResponse(1) }
	ctx := context.Background()
	b, err := DialBridge(ctx, w.path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// A raw server answering with a frame over the cap: swap the connection
	// for one end of a pipe.
	client, server := net.Pipe()
	b.mu.Lock()
	b.dropConn()
	b.conn, b.rd = client, newBridgeReader(client)
	b.hello = Hello{Protocol: 1}
	b.mu.Unlock()
	go func() {
		readFrame(server, 1<<20)
		server.Write(binary.BigEndian.AppendUint32(nil, MaxBridgeResponse+1))
		server.Close()
	}()
	if _, err := b.ReplayLSN(ctx); !errors.Is(err, ErrBridgeCorrupt) {
		t.Fatalf("oversized response: %v", err)
	}
	if got := b.Stats().ReplayLSN; got != (BridgeOpStats{Requests: 1, Errors: 1}) {
		t.Errorf("stats %+v (a corrupt response is not retried)", got)
	}
	// The connection was dropped; the next call redials the real socket.
	if lsn, err := b.ReplayLSN(ctx); err != nil || lsn != 1 {
		t.Errorf("after the oversized response: %s, %v", lsn, err)
	}
}

func TestBridgeClientContext(t *testing.T) {
	block := make(chan struct{})
	w := startFakeWorker(t, func(int, []byte) []byte { <-block; return nil })
	t.Cleanup(func() { close(block) }) // runs before the worker's cleanup waits
	b, err := DialBridge(context.Background(), w.path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = b.Decode(ctx, []DecodeItem{{TypeOid: 23, Data: []byte{1, 0, 0, 0}}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("decode past the deadline: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the deadline took %v to act", d)
	}
	if w.served.Load() != 1 {
		t.Errorf("the request was sent %d times after its context ended", w.served.Load())
	}
}

func TestBridgeClientProtocolMismatch(t *testing.T) {
	dir, err := os.MkdirTemp("", "wsb-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "b.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		readFrame(c, 1<<20)
		resp := encodeHelloResponse(Hello{Protocol: 2, PGVersionNum: 150018})
		c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(resp))), resp...))
	}()
	if _, err := DialBridge(context.Background(), path); err == nil {
		t.Fatal("a protocol 2 worker was accepted")
	}
	if _, err := DialBridge(context.Background(), filepath.Join(dir, "missing.sock")); err == nil {
		t.Fatal("dialling a missing socket succeeded")
	}
}

func TestBridgeSettings(t *testing.T) {
	preload, extra := BridgeSettings("/run/ws/walshadow-bridge.sock", "app", "/opt/walshadow/lib")
	if len(preload) != 1 || preload[0] != "walshadow" {
		t.Errorf("preload %v", preload)
	}
	want := map[string]string{
		"walshadow.socket_path": "/run/ws/walshadow-bridge.sock", "walshadow.database": "app",
		"walshadow.io_timeout_ms": "30000", "walshadow.lock_timeout_ms": "1000",
		"dynamic_library_path": "/opt/walshadow/lib:$libdir",
	}
	if len(extra) != len(want) {
		t.Errorf("extra %v", extra)
	}
	for k, v := range want {
		if extra[k] != v {
			t.Errorf("%s = %q, want %q", k, extra[k], v)
		}
	}
	// What BridgeSettings returns passes ShadowConfig's checks and renders.
	for k := range extra {
		if !settingNamePattern.MatchString(k) || managedSettings[k] {
			t.Errorf("ShadowConfig refuses extra setting %q", k)
		}
	}
	conf, err := renderPostgresqlConf(ShadowConfig{PreloadLibraries: preload, ExtraSettings: extra}, Floors{})
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"shared_preload_libraries = 'walshadow'\n", "dynamic_library_path = '/opt/walshadow/lib:$libdir'\n",
		"walshadow.socket_path = '/run/ws/walshadow-bridge.sock'\n"} {
		if !strings.Contains(conf, line) {
			t.Errorf("postgresql.conf lacks %q:\n%s", line, conf)
		}
	}
	if _, extra := BridgeSettings("/s", "", ""); len(extra) != 3 {
		t.Errorf("no database and no libDir: %v", extra)
	}
	if got := DefaultBridgeSocketPath("/run/ws"); got != "/run/ws/walshadow-bridge.sock" {
		t.Errorf("default socket %s", got)
	}
}
