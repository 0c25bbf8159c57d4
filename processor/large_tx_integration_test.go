package processor_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/walshadow/walshadow/internal/msg"
	"github.com/walshadow/walshadow/internal/testrig"
	"github.com/walshadow/walshadow/internal/wal"
	"github.com/walshadow/walshadow/processor"
)

// The large-transaction tests drive one transaction far larger than the
// session's reorder buffer through the real pipeline (pg_physical_wal ->
// walshadow_decode) and check that it spills, that every row arrives
// exactly, and how much memory the process needed meanwhile. The consumer
// digests rows as they arrive instead of keeping them, so the peak RSS it
// reports is the pipeline's.

// largePipelineYAML is pipelineYAML with a chosen transaction_buffer_bytes
// (bridgeDir may be empty: the tables here need no bridge-rendered type).
func largePipelineYAML(src *testrig.Postgres, stateDir, bridgeDir string, shadowPort int, slot string, bufferBytes int64) string {
	return testrig.Pipeline{
		Source: src, StateDir: stateDir, Slot: slot, ShadowPort: shadowPort, BridgeDir: bridgeDir, LogLevel: "warn",
		Session: fmt.Sprintf("transaction_buffer_bytes: %d", bufferBytes),
	}.YAML()
}

// startLargeStream builds and runs the pipeline with handler as the
// consumer, waits until the slot streams, and stops the stream when the
// test ends. The returned channel carries Run's result.
func startLargeStream(tb testing.TB, src *testrig.Postgres, stateDir, slot string, bufferBytes int64, handler service.MessageBatchHandlerFunc) <-chan error {
	tb.Helper()
	yaml := largePipelineYAML(src, stateDir, "", testrig.FreePort(tb), slot, bufferBytes)
	b := service.NewStreamBuilder()
	b.SetSchema(service.GlobalEnvironment().FullConfigSchema("", ""))
	if err := b.SetYAML(yaml); err != nil {
		tb.Fatalf("pipeline config: %v\n%s", err, yaml)
	}
	if err := b.AddBatchConsumerFunc(handler); err != nil {
		tb.Fatal(err)
	}
	stream, err := b.Build()
	if err != nil {
		tb.Fatalf("building the stream: %v", err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- stream.Run(context.Background()) }()
	tb.Cleanup(func() {
		if err := stream.StopWithin(time.Minute); err != nil {
			tb.Logf("stopping the stream: %v", err)
		}
	})
	deadline := time.Now().Add(2 * time.Minute)
	for src.QueryInt(tb, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1 AND active", slot) != 1 {
		select {
		case err := <-runErr:
			tb.Fatalf("the stream stopped before streaming: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			tb.Fatalf("slot %s not active after 2 minutes", slot)
		}
	}
	return runErr
}

// accountsCopy generates pgbench_accounts-like COPY text for aids
// next..last, a few hundred rows at a time, so the client holds no more
// than one chunk.
type accountsCopy struct {
	next, last int64
	buf        []byte
	off        int
}

func (s *accountsCopy) Read(p []byte) (int, error) {
	for s.off >= len(s.buf) {
		if s.next > s.last {
			return 0, io.EOF
		}
		s.buf, s.off = s.buf[:0], 0
		for i := 0; i < 512 && s.next <= s.last; i++ {
			s.buf = appendAccountLine(s.buf, s.next)
			s.next++
		}
	}
	n := copy(p, s.buf[s.off:])
	s.off += n
	return n, nil
}

// appendAccountLine is one COPY line: aid, bid, abalance, and a filler that
// differs per row (char(84) pads it).
func appendAccountLine(b []byte, aid int64) []byte {
	b = strconv.AppendInt(b, aid, 10)
	b = append(b, '\t')
	b = strconv.AppendInt(b, (aid-1)/100000+1, 10)
	b = append(b, '\t')
	b = strconv.AppendInt(b, aid*7919%20001-10000, 10)
	b = append(b, "\tacct "...)
	b = strconv.AppendInt(b, aid, 10)
	b = append(b, ' ')
	b = strconv.AppendUint(b, uint64(aid)*0x9E3779B97F4A7C15, 16)
	return append(b, '\n')
}

// copyDigest consumes the pipeline's output: inserts into the accounts
// table are counted, summed and hashed in arrival order (the COPY wrote
// them in aid order and a transaction's rows come out in LSN order); the
// marker table's insert says everything committed before it arrived.
type copyDigest struct {
	mu          sync.Mutex
	table       string
	markerTable string
	rows        int64
	sumAid      int64
	lastAid     int64
	h           hash.Hash
	line        []byte
	markerSeen  bool
	batches     int
	maxBatch    int
	firstRowAt  time.Time
	lastRowAt   time.Time
	errs        []error
}

func newCopyDigest(table, markerTable string) *copyDigest {
	return &copyDigest{table: table, markerTable: markerTable, h: md5.New()}
}

func (c *copyDigest) consume(_ context.Context, batch service.MessageBatch) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.batches++
	c.maxBatch = max(c.maxBatch, len(batch))
	for _, m := range batch {
		op, _ := m.MetaGet(processor.MetaOperation)
		table, _ := m.MetaGet(processor.MetaTable)
		switch {
		case op == processor.OperationInsert && table == c.markerTable:
			c.markerSeen = true
		case table == c.table && op != processor.OperationSchema:
			if err := c.row(m, op); err != nil && len(c.errs) < maxModelErrors {
				c.errs = append(c.errs, err)
			}
		}
	}
	return nil
}

func (c *copyDigest) row(m *service.Message, op string) error {
	lsn, _ := m.MetaGet(processor.MetaLSN)
	if op != processor.OperationInsert {
		return fmt.Errorf("%s at %s on %s: only inserts were made", op, lsn, c.table)
	}
	raw, err := m.AsStructured()
	if err != nil {
		return fmt.Errorf("insert at %s: %w", lsn, err)
	}
	p, ok := raw.(map[string]any)
	if !ok || len(p) != 4 {
		return fmt.Errorf("insert at %s: payload %T with %d fields, want 4 columns", lsn, raw, len(p))
	}
	aid, ok1 := p["aid"].(int64)
	bid, ok2 := p["bid"].(int64)
	bal, ok3 := p["abalance"].(int64)
	filler, ok4 := p["filler"].(string)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return fmt.Errorf("insert at %s: column types %T %T %T %T, want int64 int64 int64 string", lsn, p["aid"], p["bid"], p["abalance"], p["filler"])
	}
	now := time.Now()
	if c.rows == 0 {
		c.firstRowAt = now
	}
	c.lastRowAt = now
	if aid <= c.lastAid {
		return fmt.Errorf("insert at %s: aid %d after aid %d (COPY order is LSN order)", lsn, aid, c.lastAid)
	}
	c.lastAid = aid
	c.rows++
	c.sumAid += aid
	// The canonical row: what format('%s|%s|%s|%s', ...) prints on the source.
	c.line = strconv.AppendInt(c.line[:0], aid, 10)
	c.line = append(c.line, '|')
	c.line = strconv.AppendInt(c.line, bid, 10)
	c.line = append(c.line, '|')
	c.line = strconv.AppendInt(c.line, bal, 10)
	c.line = append(c.line, '|')
	c.line = append(c.line, filler...)
	c.line = append(c.line, '\n')
	c.h.Write(c.line)
	return nil
}

// largeCopyOptions configure runLargeCopy.
type largeCopyOptions struct {
	rows        int64
	bufferBytes int64
	slot        string
	// measureStart and measureEnd bracket the measured part (a benchmark's
	// timer): from just before BEGIN until the last row arrived.
	measureStart, measureEnd func()
}

// largeCopyResult is what one run observed.
type largeCopyResult struct {
	digest *copyDigest
	// txWALBytes is all WAL from before BEGIN to the end of the COPY
	// (heap, index, full-page images); rowWALBytes its Heap and Heap2
	// records (pg_waldump), the part the reorder buffer holds.
	txWALBytes, rowWALBytes int64
	// copyTime: BEGIN through the end of COPY; spillWait: COPY end until a
	// spill file showed; decodeTime: COMMIT until the last row arrived;
	// total: BEGIN until the last row arrived.
	copyTime, spillWait, decodeTime, total time.Duration
	spillDir                               string
	spillFiles                             int
	spillBytes                             int64 // largest spill dir size seen before COMMIT
	spillEmptyAfter                        bool
	memBefore                              memStatus // before the peak reset
	rssAtReset                             int64
	memAfter                               memStatus
	sourceRows, sourceSum                  int64
	sourceMD5                              string
}

// peakDelta is how far the peak RSS rose above the RSS at the start.
func (r *largeCopyResult) peakDelta() int64 { return r.memAfter.hwm - r.rssAtReset }

// runLargeCopy streams a source through the pipeline, COPYs opts.rows rows
// in one transaction, waits with the transaction open until the session
// spilled it, commits, and waits for every row.
func runLargeCopy(tb testing.TB, opts largeCopyOptions) *largeCopyResult {
	tb.Helper()
	src := testrig.StartPostgres(tb, testrig.WithSetting("log_min_error_statement", "panic"))
	stateDir := newStateDir(tb, src)
	spillDir := filepath.Join(stateDir, "spill")
	digest := newCopyDigest("lt_accounts", "lt_marker")
	runErr := startLargeStream(tb, src, stateDir, opts.slot, opts.bufferBytes, digest.consume)
	src.Exec(tb, `CREATE TABLE lt_accounts (aid int PRIMARY KEY, bid int NOT NULL, abalance int NOT NULL, filler char(84));
		CREATE TABLE lt_marker (id int PRIMARY KEY, token text)`)

	res := &largeCopyResult{digest: digest, spillDir: spillDir}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	conn := src.Connect(tb)
	// Return what setup left to the OS, so the peak is the run's.
	debug.FreeOSMemory()
	var err error
	if res.memBefore, err = readMemStatus(); err != nil {
		tb.Fatal(err)
	}
	if err := resetPeakRSS(); err != nil {
		tb.Logf("cannot reset the peak RSS (%v): the peak below includes the setup", err)
	}
	ms, err := readMemStatus()
	if err != nil {
		tb.Fatal(err)
	}
	res.rssAtReset = ms.rss
	if opts.measureStart != nil {
		opts.measureStart()
	}
	start := time.Now()
	before := src.CurrentInsertLSN(tb)
	tx, err := conn.Begin(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	tag, err := conn.PgConn().CopyFrom(ctx, &accountsCopy{next: 1, last: opts.rows}, "COPY lt_accounts (aid, bid, abalance, filler) FROM STDIN")
	if err != nil {
		tb.Fatalf("COPY: %v", err)
	}
	if tag.RowsAffected() != opts.rows {
		tb.Fatalf("COPY wrote %d rows, want %d", tag.RowsAffected(), opts.rows)
	}
	after := src.CurrentInsertLSN(tb)
	res.copyTime = time.Since(start)
	res.txWALBytes = int64(after - before)

	// The transaction stays open until its changes are on disk in the
	// session's spill directory.
	copied := time.Now()
	for {
		n, size, err := spillUsage(spillDir)
		if err != nil {
			tb.Fatal(err)
		}
		res.spillBytes = max(res.spillBytes, size)
		if n > 0 && res.spillFiles == 0 {
			res.spillFiles = n
			res.spillWait = time.Since(copied)
		}
		// Keep watching a moment past the first file: the spill grows as
		// the session catches up with the COPY's WAL.
		if res.spillFiles > 0 && (time.Since(copied) > 2*time.Second || size*2 > res.txWALBytes) {
			break
		}
		select {
		case err := <-runErr:
			tb.Fatalf("the stream stopped with the transaction open: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Since(copied) > 2*time.Minute {
			tb.Fatalf("no spill file in %s within 2 minutes of a %.1f MiB transaction (buffer %d bytes)", spillDir, mib(res.txWALBytes), opts.bufferBytes)
		}
	}
	committing := time.Now()
	if err := tx.Commit(ctx); err != nil {
		tb.Fatalf("COMMIT: %v", err)
	}
	src.Exec(tb, "INSERT INTO lt_marker VALUES (1, 'after the copy')")
	waitDigest(tb, digest, runErr, 10*time.Minute)
	if opts.measureEnd != nil {
		opts.measureEnd()
	}
	digest.mu.Lock()
	res.total = digest.lastRowAt.Sub(start)
	res.decodeTime = digest.lastRowAt.Sub(committing)
	digest.mu.Unlock()
	if res.memAfter, err = readMemStatus(); err != nil {
		tb.Fatal(err)
	}

	// Spill files go when the transaction is drained.
	for deadline := time.Now().Add(30 * time.Second); ; {
		n, _, err := spillUsage(spillDir)
		if err != nil {
			tb.Fatal(err)
		}
		if n == 0 {
			res.spillEmptyAfter = true
			break
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}

	res.rowWALBytes = rowWAL(tb, src, before, after)
	err = src.QueryRow(tb, `SELECT count(*), coalesce(sum(aid), 0),
			coalesce(md5(string_agg(format('%s|%s|%s|%s', aid, bid, abalance, filler) || E'\n', '' ORDER BY aid)), '')
		FROM lt_accounts`).Scan(&res.sourceRows, &res.sourceSum, &res.sourceMD5)
	if err != nil {
		tb.Fatalf("reading the source's digest: %v", err)
	}
	return res
}

// waitDigest waits for the marker row, failing if the stream stops first.
func waitDigest(tb testing.TB, c *copyDigest, runErr <-chan error, timeout time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		c.mu.Lock()
		seen, rows := c.markerSeen, c.rows
		c.mu.Unlock()
		if seen {
			return
		}
		select {
		case err := <-runErr:
			tb.Fatalf("the stream stopped before the marker arrived (%d rows so far): %v", rows, err)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			tb.Fatalf("the marker did not arrive within %v (%d rows so far)", timeout, rows)
		}
	}
}

// spillUsage counts the *.spill files in dir and their bytes (a missing
// dir holds none).
func spillUsage(dir string) (files int, bytes int64, err error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("listing spill dir %s: %w", dir, err)
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".spill") {
			continue
		}
		info, err := e.Info()
		if errors.Is(err, os.ErrNotExist) {
			continue // removed between the listing and the stat
		}
		if err != nil {
			return 0, 0, fmt.Errorf("stat of spill file %s: %w", e.Name(), err)
		}
		files++
		bytes += info.Size()
	}
	return files, bytes, nil
}

// rowWAL is the Heap and Heap2 WAL (records and images) between two
// positions, from pg_waldump --stats=record.
func rowWAL(tb testing.TB, src *testrig.Postgres, from, to wal.LSN) int64 {
	tb.Helper()
	cmd := exec.Command(filepath.Join(src.BinDir(), "pg_waldump"), "--stats=record", "-p", src.WALDir(), "-s", from.String(), "-e", to.String())
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		tb.Fatalf("pg_waldump %s..%s: %v\n%s", from, to, err, stderr.String())
	}
	report, err := testrig.ParseWaldumpStats(stdout.Bytes())
	if err != nil {
		tb.Fatalf("pg_waldump %s..%s: %v", from, to, err)
	}
	return int64(report.Rmgr("Heap").CombinedBytes + report.Rmgr("Heap2").CombinedBytes)
}

// TestDecodeLargeTransactionSpills: one COPY of 500k rows (over ten times
// the 4 MiB buffer in row WAL alone) committed while walshadow streams
// arrives whole and exact, spilled while open and cleaned up after.
func TestDecodeLargeTransactionSpills(t *testing.T) {
	const budget = 4 << 20
	res := runLargeCopy(t, largeCopyOptions{rows: 500_000, bufferBytes: budget, slot: "walshadow_largetx"})
	d := res.digest
	d.mu.Lock()
	defer d.mu.Unlock()

	t.Logf("transaction: %d rows, %.1f MiB of WAL (%.1f MiB Heap/Heap2, %.1fx the %d MiB buffer); COPY took %v",
		res.sourceRows, mib(res.txWALBytes), mib(res.rowWALBytes), float64(res.rowWALBytes)/budget, budget>>20, res.copyTime.Round(time.Millisecond))
	t.Logf("spill: %d file(s) %v after the COPY ended, up to %.1f MiB before COMMIT; empty after: %v",
		res.spillFiles, res.spillWait.Round(time.Millisecond), mib(res.spillBytes), res.spillEmptyAfter)
	t.Logf("decode: %d rows in %v after COMMIT (%.0f rows/s); BEGIN to last row %v (%.0f rows/s, %.1f MB/s of transaction WAL)",
		d.rows, res.decodeTime.Round(time.Millisecond), float64(d.rows)/res.decodeTime.Seconds(),
		res.total.Round(time.Millisecond), float64(d.rows)/res.total.Seconds(), float64(res.txWALBytes)/1e6/res.total.Seconds())
	t.Logf("output: %d batches to the consumer, the largest %d messages", d.batches, d.maxBatch)
	t.Logf("memory: VmHWM %.1f MiB and VmRSS %.1f MiB before; peak reset at RSS %.1f MiB; VmHWM %.1f MiB after (peak rise %.1f MiB = %.2fx the buffer), VmRSS %.1f MiB",
		mib(res.memBefore.hwm), mib(res.memBefore.rss), mib(res.rssAtReset), mib(res.memAfter.hwm),
		mib(res.peakDelta()), float64(res.peakDelta())/budget, mib(res.memAfter.rss))

	if res.rowWALBytes < 10*budget {
		t.Errorf("the transaction wrote %d bytes of row WAL, want at least 10x the %d-byte buffer", res.rowWALBytes, budget)
	}
	if !res.spillEmptyAfter {
		n, size, _ := spillUsage(res.spillDir)
		t.Errorf("spill files remain in %s 30s after the transaction was delivered (%d, %d bytes)", res.spillDir, n, size)
	}
	for _, err := range d.errs {
		t.Errorf("row: %v", err)
	}
	if d.rows != res.sourceRows || d.sumAid != res.sourceSum {
		t.Errorf("received %d rows (sum of aid %d), the source has %d (sum %d)", d.rows, d.sumAid, res.sourceRows, res.sourceSum)
	}
	if got := hex.EncodeToString(d.h.Sum(nil)); got != res.sourceMD5 {
		t.Errorf("md5 of the received rows %s, of the source's %s", got, res.sourceMD5)
	}
}

// toastRecorder keeps, per row change of one table, the big column's md5
// and length (not the value) and what the update left out.
type toastRecorder struct {
	mu      sync.Mutex
	table   string
	changes map[int64][]toastChange
	marker  bool
	errs    []error
}

type toastChange struct {
	op        string
	lsn       string
	note      any
	hasBig    bool
	bigLen    int
	bigMD5    string
	unchanged string
}

func (r *toastRecorder) consume(_ context.Context, batch service.MessageBatch) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range batch {
		op, _ := m.MetaGet(processor.MetaOperation)
		table, _ := m.MetaGet(processor.MetaTable)
		if op == processor.OperationInsert && table == "lt_marker" {
			r.marker = true
			continue
		}
		if table != r.table || op == processor.OperationSchema {
			continue
		}
		c := toastChange{op: op}
		c.lsn, _ = m.MetaGet(processor.MetaLSN)
		c.unchanged = msg.Strings(m)[processor.MetaUnchangedToast]
		raw, err := m.AsStructured()
		if err != nil {
			r.errs = append(r.errs, fmt.Errorf("%s at %s: %w", op, c.lsn, err))
			continue
		}
		p, _ := raw.(map[string]any)
		id, ok := p["id"].(int64)
		if !ok {
			r.errs = append(r.errs, fmt.Errorf("%s at %s: id is %T, want int64", op, c.lsn, p["id"]))
			continue
		}
		c.note = p["note"]
		if v, present := p["big"]; present {
			s, ok := v.(string)
			if !ok {
				r.errs = append(r.errs, fmt.Errorf("%s at %s: big is %T, want string", op, c.lsn, v))
				continue
			}
			// No copy of a value of up to 100 MiB: md5 only reads it.
			sum := md5.Sum(unsafe.Slice(unsafe.StringData(s), len(s)))
			c.hasBig, c.bigLen, c.bigMD5 = true, len(s), hex.EncodeToString(sum[:])
		}
		r.changes[id] = append(r.changes[id], c)
	}
	return nil
}

type sourceToast struct {
	md5, compression string
	length, stored   int64
}

func readSourceToast(t *testing.T, src *testrig.Postgres) map[int64]sourceToast {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn := src.Connect(t)
	rows, err := conn.Query(ctx, `SELECT id, md5(big), length(big), pg_column_size(big), coalesce(pg_column_compression(big), 'none') FROM lt_toast`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int64]sourceToast{}
	for rows.Next() {
		var id int64
		var s sourceToast
		if err := rows.Scan(&id, &s.md5, &s.length, &s.stored, &s.compression); err != nil {
			t.Fatal(err)
		}
		out[id] = s
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDecodeToastRoundTrip: TOASTed text of 1 MiB and 100 MiB (random, so
// stored uncompressed) and 100 MiB compressible (pglz) survives insert and
// update byte for byte, and an update of another column leaves it out and
// names it in walshadow_unchanged_toast.
func TestDecodeToastRoundTrip(t *testing.T) {
	src := testrig.StartPostgres(t, testrig.WithSetting("log_min_error_statement", "panic"))
	stateDir := newStateDir(t, src)
	rec := &toastRecorder{table: "lt_toast", changes: map[int64][]toastChange{}}
	runErr := startLargeStream(t, src, stateDir, "walshadow_toast", 64<<20, rec.consume)
	src.Exec(t, `CREATE TABLE lt_toast (id int PRIMARY KEY, note text, big text);
		CREATE TABLE lt_marker (id int PRIMARY KEY, token text)`)

	debug.FreeOSMemory()
	if err := resetPeakRSS(); err != nil {
		t.Logf("cannot reset the peak RSS (%v): the peak below includes the setup", err)
	}
	memStart, err := readMemStatus()
	if err != nil {
		t.Fatal(err)
	}
	const small, large = 1 << 20, 100 << 20
	// Both made on the server, so the test process holds no value and the
	// peak RSS is the pipeline's. Random: base64 of a SHA-512 per piece, which
	// neither pglz nor lz4 can shrink. Compressible: a short cycle pglz
	// folds to about 1% (still hundreds of chunks).
	const random = `(SELECT left(string_agg(encode(sha512(($1::text || g)::bytea), 'base64'), ''), $2::int) FROM generate_series(1, $2::int / 80) g)`
	const compressible = `repeat('walshadow compressible value ' || $1::text || ' ', $2::int / 32)`
	start := time.Now()
	src.Exec(t, "INSERT INTO lt_toast VALUES (1, 'n1', "+random+")", "r1", small)
	src.Exec(t, "INSERT INTO lt_toast VALUES (2, 'n2', "+random+")", "r2", large)
	src.Exec(t, "INSERT INTO lt_toast VALUES (3, 'n3', "+compressible+")", "c1", large)
	inserted := readSourceToast(t, src)
	src.Exec(t, "UPDATE lt_toast SET big = "+random+" WHERE id = 1", "r11", small)
	src.Exec(t, "UPDATE lt_toast SET big = "+random+" WHERE id = 2", "r12", large)
	src.Exec(t, "UPDATE lt_toast SET big = "+compressible+" WHERE id = 3", "c2", large)
	updated := readSourceToast(t, src)
	src.Exec(t, "UPDATE lt_toast SET note = 'changed' WHERE id IN (1, 2, 3)")
	src.Exec(t, "INSERT INTO lt_marker VALUES (1, 'toast done')")

	deadline := time.Now().Add(10 * time.Minute)
	for {
		rec.mu.Lock()
		done := rec.marker
		rec.mu.Unlock()
		if done {
			break
		}
		select {
		case err := <-runErr:
			t.Fatalf("the stream stopped before the marker arrived: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the marker did not arrive within 10 minutes")
		}
	}
	t.Logf("workload through the pipeline in %v", time.Since(start).Round(time.Millisecond))
	if memEnd, err := readMemStatus(); err == nil {
		// The test itself holds each random value and pgx's copy of it.
		t.Logf("memory: RSS %.1f MiB at the start, peak %.1f MiB (rise %.1f MiB), RSS %.1f MiB at the end",
			mib(memStart.rss), mib(memEnd.hwm), mib(memEnd.hwm-memStart.rss), mib(memEnd.rss))
	}

	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, err := range rec.errs {
		t.Errorf("row: %v", err)
	}
	for id := int64(1); id <= 3; id++ {
		ins, upd := inserted[id], updated[id]
		t.Logf("id %d: inserted %d bytes stored in %d (%s), updated %d bytes stored in %d (%s)",
			id, ins.length, ins.stored, ins.compression, upd.length, upd.stored, upd.compression)
		got := rec.changes[id]
		if len(got) != 3 {
			t.Errorf("id %d: %d changes arrived, want insert, update, update: %+v", id, len(got), got)
			continue
		}
		checkBig := func(step string, c toastChange, want sourceToast) {
			if !c.hasBig {
				t.Errorf("id %d %s at %s: no big column (unchanged toast %q)", id, step, c.lsn, c.unchanged)
				return
			}
			if c.bigMD5 != want.md5 || int64(c.bigLen) != want.length {
				t.Errorf("id %d %s at %s: big is %d bytes md5 %s, the source had %d bytes md5 %s", id, step, c.lsn, c.bigLen, c.bigMD5, want.length, want.md5)
			}
			if c.unchanged != "" {
				t.Errorf("id %d %s at %s: walshadow_unchanged_toast %q on a change that carries every column", id, step, c.lsn, c.unchanged)
			}
		}
		if got[0].op != processor.OperationInsert {
			t.Errorf("id %d: first change is %s, want insert", id, got[0].op)
		}
		checkBig("insert", got[0], ins)
		if got[1].op != processor.OperationUpdate {
			t.Errorf("id %d: second change is %s, want update", id, got[1].op)
		}
		checkBig("update of big", got[1], upd)
		if want := fmt.Sprintf("n%d", id); got[1].note != want {
			t.Errorf("id %d update of big: note %v, want %s", id, got[1].note, want)
		}
		last := got[2]
		if last.op != processor.OperationUpdate || last.note != "changed" {
			t.Errorf("id %d: third change is %s with note %v, want an update to 'changed'", id, last.op, last.note)
		}
		if last.hasBig {
			t.Errorf("id %d update of note at %s: big (%d bytes) is in the payload; its TOAST chunks are not in the transaction, it must be left out", id, last.lsn, last.bigLen)
		}
		if !containsName(last.unchanged, "big") {
			t.Errorf("id %d update of note at %s: walshadow_unchanged_toast %q does not name big", id, last.lsn, last.unchanged)
		}
	}
	if c := inserted[3].compression; c == "none" {
		t.Errorf("the compressible value was stored uncompressed: the test lost its compressed case")
	}
	if inserted[2].stored < large {
		t.Errorf("the random 100 MiB value was stored in %d bytes: it compressed, the test lost its incompressible case", inserted[2].stored)
	}
}

func containsName(list, name string) bool {
	for _, n := range strings.Split(list, ",") {
		if n == name {
			return true
		}
	}
	return false
}
