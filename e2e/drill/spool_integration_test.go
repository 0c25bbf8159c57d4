package drill_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walshadow/walshadow/internal/spool"
	"github.com/walshadow/walshadow/internal/testrig"
	"github.com/walshadow/walshadow/internal/wal"
)

// spoolOutage is how long ClickHouse stays down in TestSpoolReleasesSlot
// (WALSHADOW_SPOOL_OUTAGE overrides it, e.g. 30s for a quick look).
const (
	spoolOutage      = 120 * time.Second
	spoolSlotCeiling = 64 << 20 // what the slot may retain meanwhile
)

// TestSpoolReleasesSlot stops ClickHouse for two minutes under pgbench
// with spool.release_slot: spooled. The source's slot must retain less
// than 64 MB throughout (the spool holds the WAL, not the source), the
// session must not restart, and once ClickHouse is back every transaction
// arrives: every table equals the source.
func TestSpoolReleasesSlot(t *testing.T) {
	testrig.SkipIfShort(t, "ClickHouse is down for minutes")
	outage := spoolOutage
	if v := os.Getenv("WALSHADOW_SPOOL_OUTAGE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("WALSHADOW_SPOOL_OUTAGE=%q: %v", v, err)
		}
		outage = d
	}
	d := newDrill(t, "", "spool:\n  release_slot: spooled\n")
	c := d.start(t)
	d.waitStreaming(t, c, 3*time.Minute)
	d.createDrillTables(t)
	d.src.PGBench(t, 1, testrig.PGBenchOptions{})
	d.waitCaughtUp(t, c, 3*time.Minute)

	// The slot's retention, sampled every second from before the outage
	// until the pipeline has caught up after it.
	var (
		mu          sync.Mutex
		maxRetained int64
		samples     int
	)
	sampleCtx, stopSampling := context.WithCancel(context.Background())
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		conn, err := pgx.Connect(sampleCtx, d.src.DSN())
		if err != nil {
			t.Errorf("sampling the slot: %v", err)
			return
		}
		defer conn.Close(context.Background())
		for sampleCtx.Err() == nil {
			var n int64
			err := conn.QueryRow(sampleCtx, "SELECT (pg_current_wal_lsn() - restart_lsn)::bigint FROM pg_replication_slots WHERE slot_name = $1", d.slot).Scan(&n)
			if err == nil {
				mu.Lock()
				maxRetained = max(maxRetained, n)
				samples++
				mu.Unlock()
			}
			select {
			case <-sampleCtx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	defer func() { stopSampling(); sampler.Wait() }()

	load := d.startFaultLoad()
	defer func() { load.cancel(); load.wg.Wait() }()
	time.Sleep(3 * time.Second)
	startLSN := d.src.CurrentLSN(t)
	d.ch.StopServer(t)
	stopped := time.Now()
	time.Sleep(outage)
	if c.Exited() {
		t.Fatalf("the pipeline exited while ClickHouse was down (%v):\n%s", c.Wait(), c.LogTail(60))
	}
	spooledWAL := d.src.CurrentLSN(t) - startLSN
	d.ch.StartServer(t)
	t.Logf("ClickHouse was down %v; the source wrote %.1f MB meanwhile", time.Since(stopped).Round(time.Second), float64(spooledWAL)/(1<<20))
	load.stop(t)
	lag := d.waitCaughtUp(t, c, 5*time.Minute)
	stopSampling()
	sampler.Wait()
	n, differing := d.compareAll(t, "after ClickHouse came back")
	mu.Lock()
	retained, count := maxRetained, samples
	mu.Unlock()
	starts := strings.Count(c.Log(), "session started")
	t.Logf("caught up %v after ClickHouse returned; %d of %d tables equal; the slot retained at most %.1f MB (%d samples); %d session start(s)",
		lag.Round(time.Millisecond), n-differing, n, float64(retained)/(1<<20), count, starts)
	if count == 0 {
		t.Fatal("the slot's retention was never sampled")
	}
	if retained >= spoolSlotCeiling {
		t.Errorf("the slot retained %.1f MB with release_slot spooled: want under %d MB", float64(retained)/(1<<20), spoolSlotCeiling>>20)
	}
	if float64(spooledWAL) < 1.5*spoolSlotCeiling {
		t.Logf("note: only %.1f MB of WAL was written during the outage, so the retention bound proves little here", float64(spooledWAL)/(1<<20))
	}
	if starts != 1 {
		t.Errorf("the session started %d times in one run: the outage restarted it", starts)
	}
}

// TestSpoolInteriorCorruption flips a byte inside a spool segment, in WAL
// the pipeline has not delivered yet (ClickHouse was down while it was
// written), then starts the pipeline again. Reading it back fails the
// record's CRC: the error names the spool file; with release_slot
// delivered the source still holds that WAL, so the next start empties
// the spool and streams it again, and every table ends equal to the
// source. (A torn tail, by contrast, is cut quietly: internal/spool's
// tests.)
func TestSpoolInteriorCorruption(t *testing.T) {
	testrig.SkipIfShort(t, "starts PostgreSQL, ClickHouse and the pipeline")
	d := newDrill(t, "", "")
	c := d.start(t)
	d.waitStreaming(t, c, 3*time.Minute)
	d.createDrillTables(t)
	d.src.PGBench(t, 1, testrig.PGBenchOptions{})
	d.waitCaughtUp(t, c, 3*time.Minute)

	// WAL the pipeline spools but cannot deliver.
	d.ch.StopServer(t)
	from := d.src.CurrentLSN(t)
	d.src.PGBench(t, 1, testrig.PGBenchOptions{NoInit: true, Clients: 2, Jobs: 1, Duration: 5 * time.Second})
	to := d.src.CurrentLSN(t)
	dir := filepath.Join(d.stateDir, "spool")
	deadline := time.Now().Add(time.Minute)
	for {
		st, found, err := spool.ReadState(dir)
		if err == nil && found && st.End >= to {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the spool did not become durable through %s within a minute (state %+v, %v, %v)", to, st, found, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.Kill()

	// One byte in the middle of the undelivered WAL, past the page header.
	segSize := uint32(d.src.QueryInt(t, "SELECT setting::int8 * (CASE unit WHEN 'MB' THEN 1048576 WHEN '8kB' THEN 8192 ELSE 1 END) FROM pg_settings WHERE name = 'wal_segment_size'"))
	sp, err := spool.Open(dir, 1, segSize)
	if err != nil {
		t.Fatal(err)
	}
	at := from + (to-from)/2
	if at%wal.BlockSize < 512 {
		at += 512
	}
	path := sp.SegmentPath(at)
	if err := sp.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	off := int64(uint64(at) % uint64(segSize))
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x5a
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("flipped the byte at %s (offset %d of %s), between %s and %s", at, off, filepath.Base(path), from, to)

	d.ch.StartServer(t)
	c = d.start(t)
	if !c.WaitLog(t, filepath.Base(path), 3*time.Minute) {
		t.Fatalf("no error named the corrupted spool file %s:\n%s", filepath.Base(path), c.LogTail(80))
	}
	d.waitCaughtUp(t, c, 5*time.Minute)
	if n, differing := d.compareAll(t, "after the corrupted spool was streamed again"); differing > 0 {
		t.Errorf("%d of %d tables differ", differing, n)
	}
	for _, line := range strings.Split(c.Log(), "\n") {
		if strings.Contains(line, filepath.Base(path)) {
			t.Logf("the error: %s", line)
			break
		}
	}
}
