package bench_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	// The none buffer and the other core components a full config names.
	_ "github.com/redpanda-data/benthos/v4/public/components/io"
	_ "github.com/redpanda-data/benthos/v4/public/components/pure"

	_ "github.com/walshadow/walshadow/input"
	_ "github.com/walshadow/walshadow/output"
	_ "github.com/walshadow/walshadow/processor"

	"github.com/jackc/pgx/v5"

	"github.com/walshadow/walshadow/e2e/internal/catchup"
	"github.com/walshadow/walshadow/internal/chcompare"
	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/load"
	"github.com/walshadow/walshadow/internal/testrig"
	"github.com/walshadow/walshadow/internal/wal"
)

func TestMain(m *testing.M) {
	if path := os.Getenv(childProfileEnv); path != "" {
		profileChild(path)
	}
	// A child started by testrig.StartChild runs the pipeline and exits.
	testrig.RunChildIfRequested()
	os.Exit(m.Run())
}

// childProfileEnv names the file a child writes its CPU profile to; the
// profile ends at SIGUSR1 (measureWalshadow sends it at completion), after
// which the file path+".done" exists.
const childProfileEnv = "WALSHADOW_BENCH_CHILD_CPUPROFILE"

// profileChild profiles this (child) process until SIGUSR1.
func profileChild(path string) {
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", childProfileEnv, err)
		os.Exit(2)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", childProfileEnv, err)
		os.Exit(2)
	}
	stop := make(chan struct{})
	go heapAtPeak(strings.TrimSuffix(path, ".cpu.pprof")+".heap.pprof", stop)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	go func() {
		<-sig
		close(stop)
		pprof.StopCPUProfile()
		f.Close()
		_ = os.WriteFile(path+".done", nil, 0o600)
	}()
}

// childProfile is the environment that makes a child profile itself
// into WALSHADOW_BENCH_PPROF (none when unset), and the CPU profile's
// path there (walshadow-<name>.cpu.pprof, "" when unset).
func childProfile(b *testing.B, name string) (env []string, profile string) {
	b.Helper()
	dir := os.Getenv("WALSHADOW_BENCH_PPROF")
	if dir == "" {
		return nil, ""
	}
	abs, err := filepath.Abs(dir)
	if err == nil {
		err = os.MkdirAll(abs, 0o755)
	}
	if err != nil {
		b.Fatalf("WALSHADOW_BENCH_PPROF=%q: %v", dir, err)
	}
	profile = filepath.Join(abs, "walshadow-"+name+".cpu.pprof")
	os.Remove(profile + ".done")
	return []string{childProfileEnv + "=" + profile}, profile
}

// endChildProfile ends the CPU profile childProfile started in c (none:
// nothing) and says where it and the heap profile at the peak are.
func endChildProfile(b *testing.B, c *testrig.Child, profile string) {
	b.Helper()
	if profile == "" {
		return
	}
	if err := syscall.Kill(c.Pid(), syscall.SIGUSR1); err != nil {
		b.Errorf("ending the child's CPU profile: %v", err)
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(profile + ".done"); err == nil {
			b.Logf("walshadow's CPU profile: %s (go tool pprof -top %s); its heap at the peak resident set: %s", profile, profile, strings.TrimSuffix(profile, ".cpu.pprof")+".heap.pprof")
			return
		}
	}
	b.Errorf("the child's CPU profile %s did not end within 30 s", profile)
}

// heapAtPeak writes this process's heap profile to path each time its
// resident set reaches a new high (sampled every 100 ms), so the file
// left says what held the memory at the peak.
func heapAtPeak(path string, stop <-chan struct{}) {
	var peak int64
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		b, err := os.ReadFile("/proc/self/statm")
		if err != nil {
			return
		}
		f := strings.Fields(string(b))
		if len(f) < 2 {
			return
		}
		pages, _ := strconv.ParseInt(f[1], 10, 64)
		if rss := pages * int64(os.Getpagesize()); rss > peak+peak/20 {
			peak = rss
			if out, err := os.Create(path); err == nil {
				_ = pprof.Lookup("heap").WriteTo(out, 0)
				out.Close()
			}
		}
	}
}

const (
	// chDatabase is the ClickHouse database the pipeline writes to.
	chDatabase = "walshadow_bench"
	// physicalSlot is walshadow's slot; logicalSlot and publication are
	// pgoutput's.
	physicalSlot = "walshadow_bench"
	logicalSlot  = "bench_pgoutput"
	publication  = "bench"
)

// pgbenchTables are the tables pgbench -i makes, compared at the end.
var pgbenchTables = []string{"pgbench_accounts", "pgbench_branches", "pgbench_history", "pgbench_tellers"}

// countedTables are the tables whose row counts the summary shows:
// pgbench's tpcb-like script appends to the history and updates the rest.
var countedTables = map[string]bool{"pgbench_accounts": true, "pgbench_history": true}

// BenchmarkBacklogVsPgoutput times walshadow catching up a pgbench backlog
// into ClickHouse against pgoutput decoding the same WAL (see the package
// doc for the steps). Skipped under -short and without pg_recvlogical.
func BenchmarkBacklogVsPgoutput(b *testing.B) {
	testrig.SkipIfShort(b, "PostgreSQL and ClickHouse to replay a pgbench backlog")
	testrig.RequirePgRecvlogical(b)
	scale := envInt(b, "WALSHADOW_BENCH_SCALE", 10)
	seconds := envInt(b, "WALSHADOW_BENCH_SECONDS", 45)
	r := newBacklogRig(b)
	src := r.src

	// Bootstrap: the pgbench tables loaded, then walshadow stopped.
	src.PGBench(b, scale, testrig.PGBenchOptions{})
	src.Exec(b, `CREATE TABLE public.bench_marker (id int PRIMARY KEY, seq int NOT NULL);
		INSERT INTO public.bench_marker VALUES (1, 0)`)
	oids := map[string]uint32{}
	for _, name := range append([]string{"bench_marker"}, pgbenchTables...) {
		oids[name] = uint32(src.QueryInt(b, "SELECT oid::int8 FROM pg_class WHERE oid = to_regclass($1)", "public."+name))
	}
	bootstrapTimeout := 10*time.Minute + time.Duration(scale)*30*time.Second
	bootstrapStart := time.Now()
	c := r.start(b)
	r.waitLoaded(b, c, oids, bootstrapTimeout)
	r.waitCaughtUp(b, c, bootstrapTimeout)
	bootstrapTime := time.Since(bootstrapStart)
	c.Kill()
	r.waitSlotIdle(b, r.slot)
	// The same for a second walshadow into a cluster of two replicas, on
	// a slot of its own, when asked for: the same backlog is then
	// replayed into both.
	var cl *backlogRig
	if os.Getenv("WALSHADOW_BENCH_CLUSTER") != "0" {
		cl = r.clusterTarget(b)
		cc := cl.start(b)
		cl.waitLoaded(b, cc, oids, bootstrapTimeout)
		cl.waitCaughtUp(b, cc, bootstrapTimeout)
		cc.Kill()
		cl.waitSlotIdle(b, cl.slot)
	}

	// The backlog, with walshadow stopped, both consumers' slots behind it.
	src.Exec(b, "CREATE PUBLICATION "+publication+" FOR ALL TABLES")
	src.Exec(b, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", logicalSlot)
	// Every run's backlog alike: a checkpoint just before it and none
	// during it, so each page's first change carries its full image. (A
	// checkpoint falling inside the backlog or not made the WAL's share of
	// page images, and so what pgoutput spends per MB of it, vary twofold
	// between runs.)
	src.Exec(b, "ALTER SYSTEM SET max_wal_size = '8GB'")
	src.Exec(b, "ALTER SYSTEM SET checkpoint_timeout = '1h'")
	src.Exec(b, "SELECT pg_reload_conf()")
	src.Exec(b, "CHECKPOINT")
	historyBefore := src.QueryInt(b, "SELECT count(*) FROM public.pgbench_history")
	walBefore := src.CurrentLSN(b)
	out := src.PGBench(b, scale, testrig.PGBenchOptions{NoInit: true, Clients: 4, Jobs: 2, Duration: time.Duration(seconds) * time.Second})
	walAfter := src.CurrentLSN(b)
	transactions := pgbenchTransactions(b, out)
	historyRows := src.QueryInt(b, "SELECT count(*) FROM public.pgbench_history") - historyBefore
	marker := r.commitMarker(b)
	walBytes := int64(walAfter - walBefore)
	walMB := float64(walBytes) / 1e6

	ws := r.measureWalshadow(b, marker, 10*time.Minute+time.Duration(seconds)*20*time.Second)
	r.waitSlotIdle(b, r.slot)
	var wsCluster walshadowRun
	if cl != nil {
		wsCluster = cl.measureWalshadow(b, marker, 10*time.Minute+time.Duration(seconds)*20*time.Second)
		cl.waitSlotIdle(b, cl.slot)
	}
	pgMachineStart, pgProcsStart := readMachineCPU(b), readProcessCPUs(b)
	pg := src.RunPgoutput(b, logicalSlot, publication, marker)
	pgMachine := readMachineCPU(b).Sub(pgMachineStart)
	pgTop := readProcessCPUs(b).Top(pgProcsStart, 6)
	if pg.Bytes == 0 {
		b.Errorf("pg_recvlogical wrote nothing for a backlog of %d transactions", transactions)
	}
	counts, compared := r.compareEnd(b, oids)
	if cl != nil {
		for i, node := range cl.nodes {
			clCounts, clCompared := cl.compareEndOn(b, oids, node.DSN("default"))
			b.Logf("cluster node %c: %s in ClickHouse/source; %d of %d pgbench tables compared equal", 'A'+i, clCounts, clCompared, len(pgbenchTables))
		}
		clusterRatio := wsCluster.wall.Seconds() / ws.wall.Seconds()
		b.ReportMetric(wsCluster.wall.Seconds(), "walshadow-cluster-s")
		b.ReportMetric(clusterRatio, "cluster/single")
		b.Logf(`the same backlog into a cluster of two replicas of one shard (ReplicatedReplacingMergeTree, DDL ON CLUSTER), another walshadow on its own slot:
  walshadow into the cluster: start to ClickHouse-complete %v; process CPU %.2fs, peak RSS %.0f MiB; machine busy %.2fs
  ClickHouse part log of node A over that run: %s
  ratio cluster/single server: %.2f`,
			wsCluster.wall.Round(time.Millisecond), wsCluster.cpu.Seconds(), float64(wsCluster.peakRSS)/(1<<20), wsCluster.machine.Busy.Seconds(),
			wsCluster.parts, clusterRatio)
	}

	ratio := ws.wall.Seconds() / pg.Wall.Seconds()
	b.SetBytes(walBytes)
	b.ReportMetric(ws.wall.Seconds(), "walshadow-s")
	b.ReportMetric(pg.Wall.Seconds(), "pgoutput-s")
	b.ReportMetric(ratio, "ratio")
	b.ReportMetric(ws.cpu.Seconds(), "walshadow-cpu-s")
	b.ReportMetric(ws.cpu.Seconds()/walMB, "walshadow-cpu-s/WAL-MB")
	b.ReportMetric(float64(ws.peakRSS)/(1<<20), "walshadow-peak-rss-MiB")
	b.ReportMetric(ws.senderCPU.Seconds(), "walshadow-walsender-cpu-s")
	b.ReportMetric(pg.WalsenderCPU.Seconds(), "pgoutput-walsender-cpu-s")
	b.ReportMetric(ws.machine.Busy.Seconds(), "walshadow-machine-busy-s")
	b.ReportMetric(pgMachine.Busy.Seconds(), "pgoutput-machine-busy-s")
	b.ReportMetric(walMB, "WAL-MB")
	b.ReportMetric(float64(transactions), "backlog-tx")

	goal := "met"
	if ratio > 0.5 {
		goal = "not met"
	}
	b.Logf(`backlog vs pgoutput, pgbench scale %d (walshadow's first start loaded it and caught up in %v):
  backlog:   pgbench -c 4 -j 2 -T %d with walshadow stopped: %d transactions (pgbench_history +%d), %.1f MB of WAL (%s to %s), marker at %s
  walshadow: start to ClickHouse-complete %v; process CPU %.2fs (%.4f s per MB of WAL), peak RSS %.0f MiB; source walsender (pid %d) CPU %.2fs; machine busy %.2fs, idle %.2fs
  pgoutput:  pg_recvlogical launch to exit %v (first byte after %v, replay %v, %.1f MB written); source walsender (pid %d) CPU %.2fs; pg_recvlogical CPU %.2fs; machine busy %.2fs, idle %.2fs
  busiest processes (own CPU, alive at the end): walshadow run %s; pgoutput run %s
  ClickHouse part log over the walshadow run: %s
  ratio walshadow/pgoutput: %.2f (goal <= 0.5: %s)
  end state: %s in ClickHouse/source; %d of %d pgbench tables compared equal by count, sums and md5`,
		scale, bootstrapTime.Round(time.Second),
		seconds, transactions, historyRows, walMB, walBefore, walAfter, marker,
		ws.wall.Round(time.Millisecond), ws.cpu.Seconds(), ws.cpu.Seconds()/walMB, float64(ws.peakRSS)/(1<<20), ws.senderPID, ws.senderCPU.Seconds(), ws.machine.Busy.Seconds(), ws.machine.Idle.Seconds(),
		pg.Wall.Round(time.Millisecond), pg.FirstByte.Round(time.Millisecond), pg.Replay.Round(time.Millisecond), float64(pg.Bytes)/1e6,
		pg.WalsenderPID, pg.WalsenderCPU.Seconds(), pg.ClientCPU.Seconds(), pgMachine.Busy.Seconds(), pgMachine.Idle.Seconds(),
		cpuList(ws.top), cpuList(pgTop), ws.parts,
		ratio, goal, counts, compared, len(pgbenchTables))
}

// backlogRig is the benchmark's servers, walshadow's state directory,
// pipeline config and child runs.
type backlogRig struct {
	*testrig.ChildRuns
	src *testrig.Postgres
	// ch is the server written to (a cluster's node A), nodes every
	// server that holds the tables, chDSN the output's DSN.
	ch        *testrig.ClickHouse
	nodes     []*testrig.ClickHouse
	chDSN     string
	stateDir  string
	slot      string
	markerSeq *int
	bridgeDir string
}

// newBacklogRig starts the source and ClickHouse, builds the bridge module
// and writes the pipeline config, as the drills do. The source's defaults
// (max_wal_senders and max_replication_slots 10) hold walshadow's physical
// slot and pgoutput's logical one; autovacuum is off so that no vacuum
// shares the CPUs with either measured run or adds to the backlog's WAL.
func newBacklogRig(b *testing.B) *backlogRig {
	b.Helper()
	src := testrig.StartPostgres(b,
		testrig.WithSetting("wal_level", "logical"),
		testrig.WithSetting("log_min_error_statement", "panic"),
		testrig.WithSetting("autovacuum", "off"))
	ch := testrig.StartClickHouse(b)
	r := &backlogRig{src: src, ch: ch, nodes: []*testrig.ClickHouse{ch}, chDSN: ch.DSN("default"), stateDir: testrig.NewStateDir(b, src),
		slot: physicalSlot, markerSeq: new(int), bridgeDir: testrig.BuildPgext(b, src.BinDir())}
	r.ChildRuns = testrig.NewChildRuns(b, "walshadow-bench-", r.pipeline(b, os.Getenv("WALSHADOW_BENCH_OUTPUT_YAML")))
	return r
}

// clusterTarget is a second walshadow on the same source, on a slot and
// state of its own, writing into a cluster of two replicas of one shard.
func (r *backlogRig) clusterTarget(b *testing.B) *backlogRig {
	b.Helper()
	cluster := testrig.StartClickHouseCluster(b, testrig.TwoReplicas)
	c := &backlogRig{src: r.src, ch: cluster.Nodes[0], nodes: cluster.Nodes, chDSN: cluster.NodeDSN(0, "default"),
		stateDir: testrig.NewStateDir(b, r.src), slot: physicalSlot + "_cluster", markerSeq: r.markerSeq, bridgeDir: r.bridgeDir}
	c.ChildRuns = testrig.NewChildRuns(b, "walshadow-bench-cluster-", c.pipeline(b,
		strings.TrimSpace("cluster: "+testrig.ClusterName+"\n"+os.Getenv("WALSHADOW_BENCH_OUTPUT_YAML"))))
	return c
}

// pipeline is the child's config, with outputYAML added to the output.
func (r *backlogRig) pipeline(b *testing.B, outputYAML string) string {
	return testrig.Pipeline{
		Source: r.src, StateDir: r.stateDir, Slot: r.slot, ShadowPort: testrig.FreePort(b), BridgeDir: r.bridgeDir,
		LogLevel: "info", LogFormat: "logfmt", Session: os.Getenv("WALSHADOW_BENCH_SESSION_YAML"),
		Output: testrig.ClickHouseOutput(r.chDSN, chDatabase, outputYAML),
	}.YAML()
}

// start starts the next child run of the pipeline; extraEnv goes to its
// environment.
func (r *backlogRig) start(b *testing.B, extraEnv ...string) *testrig.Child {
	b.Helper()
	return r.Start(b, extraEnv...)
}

// commitMarker commits the next marker update and returns a position its
// commit record comes after (catchup.CommitMarker).
func (r *backlogRig) commitMarker(b *testing.B) wal.LSN {
	b.Helper()
	*r.markerSeq++
	return catchup.CommitMarker(b, r.src.DSN(), fmt.Sprintf("UPDATE public.bench_marker SET seq = %d WHERE id = 1", *r.markerSeq))
}

// waitLoaded waits until the output's load ledger holds every table of
// oids as loaded (the first start loads every table already there).
func (r *backlogRig) waitLoaded(b *testing.B, c *testrig.Child, oids map[string]uint32, timeout time.Duration) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var pending []string
		ledger, err := load.ReadLedger(filepath.Join(r.stateDir, "clickhouse"))
		for name, oid := range oids {
			if err != nil {
				pending = append(pending, name)
			} else if e, ok := ledger.Get(oid); !ok {
				pending = append(pending, name+" (not in the ledger yet)")
			} else if e.Phase != load.PhaseDone {
				pending = append(pending, fmt.Sprintf("%s (%s)", name, e.Phase))
			}
		}
		if len(pending) == 0 {
			return
		}
		if c.Exited() {
			b.Fatalf("run %d exited (%v) before loading %v (%v):\n%s", c.Run, c.Wait(), pending, err, c.LogTail(80))
		}
		if time.Now().After(deadline) {
			b.Fatalf("run %d: %v not loaded within %v (%v):\n%s", c.Run, pending, timeout, err, catchup.Stalled(c))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitCaughtUp commits a marker and waits until the manifest's delivered
// position is past it with no load pending: every earlier transaction is
// in ClickHouse.
func (r *backlogRig) waitCaughtUp(b *testing.B, c *testrig.Child, timeout time.Duration) {
	b.Helper()
	target := r.commitMarker(b)
	catchup.WaitDelivered(b, c, r.stateDir, target, timeout, fmt.Sprintf("run %d: catching up to the marker at %s", c.Run, target))
	catchup.WaitLoads(b, c, r.stateDir, timeout)
}

// waitSlotIdle waits until no walsender serves slot (a killed client's
// walsender has exited), so the next client can take the slot and the
// exit does not land in a later measurement.
func (r *backlogRig) waitSlotIdle(b *testing.B, slot string) {
	b.Helper()
	deadline := time.Now().Add(time.Minute)
	for r.src.QueryInt(b, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1 AND active", slot) != 0 {
		if time.Now().After(deadline) {
			b.Fatalf("slot %s still active a minute after its client was killed", slot)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// walshadowRun is what the measured walshadow run observed.
type walshadowRun struct {
	wall      time.Duration // the child's start until ClickHouse-complete
	cpu       time.Duration // the child's own user + system CPU, then
	peakRSS   int64         // the child's VmHWM, then, in bytes
	senderPID int
	senderCPU time.Duration         // its physical walsender's CPU, sampled
	machine   testrig.MachineCPU    // every process's, over the run (shadow, ClickHouse, source included)
	top       []testrig.LabelledCPU // the processes that spent most of it
	parts     string                // ClickHouse's part log over the run: inserts and merges
}

// senderSample is the physical walsender a run's watcher found and samples.
type senderSample struct {
	pid     int
	sampler *testrig.CPUSampler
	err     error
}

// measureWalshadow starts walshadow on the backlog and times it from the
// start until the manifest's delivered position is past marker and no
// load is pending (ClickHouse holds every backlog transaction). At that
// moment it reads the child's CPU (utime + stime) and peak RSS (VmHWM)
// from /proc and ends the sampling of its source-side walsender (the
// physical slot's active_pid once the child has connected, read every
// testrig.CPUSampleInterval, the last reading kept); then it kills the
// child. The benchmark timer runs over the same span.
func (r *backlogRig) measureWalshadow(b *testing.B, marker wal.LSN, timeout time.Duration) walshadowRun {
	b.Helper()
	poll := r.src.Connect(b)
	ctx, cancel := context.WithCancel(context.Background())
	found := make(chan senderSample, 1)

	env, profile := childProfile(b, "backlog")
	b.ResetTimer()
	machineStart, procsStart := readMachineCPU(b), readProcessCPUs(b)
	chStart := strings.TrimSpace(r.ch.HTTPQuery(b, "SELECT toString(now())"))
	start := time.Now()
	c := r.start(b, env...)
	go func() {
		pid, err := testrig.SlotSenderPID(ctx, poll, r.slot, testrig.CPUSampleInterval, c.Done())
		if err != nil {
			found <- senderSample{err: err}
			return
		}
		found <- senderSample{pid: pid, sampler: testrig.StartCPUSampler(pid)}
	}()
	// collect ends the watcher (when the walsender never showed up) and
	// returns what it found; a failed wait below still ends it.
	collect := sync.OnceValue(func() senderSample {
		cancel()
		return <-found
	})
	defer func() {
		if s := collect(); s.sampler != nil {
			s.sampler.Stop()
		}
	}()
	catchup.WaitDelivered(b, c, r.stateDir, marker, timeout, fmt.Sprintf("run %d: replaying the backlog up to the marker at %s", c.Run, marker))
	catchup.WaitLoads(b, c, r.stateDir, timeout)
	run := walshadowRun{wall: time.Since(start), machine: readMachineCPU(b).Sub(machineStart),
		top: readProcessCPUs(b).Top(procsStart, 6)}
	b.StopTimer()

	cpu, err := testrig.ReadProcCPU(c.Pid())
	if err != nil {
		b.Errorf("walshadow's CPU at completion: %v", err)
	}
	run.cpu = cpu.Own
	if run.peakRSS, err = testrig.ReadPeakRSS(c.Pid()); err != nil {
		b.Errorf("walshadow's peak RSS at completion: %v", err)
	}
	sender := collect()
	switch {
	case sender.err != nil:
		b.Errorf("walshadow's physical walsender was not seen before completion: %v", sender.err)
	default:
		run.senderPID = sender.pid
		if run.senderCPU, err = sender.sampler.Stop(); err != nil {
			b.Errorf("sampling walshadow's physical walsender (pid %d): %v", sender.pid, err)
		}
		if now := r.src.QueryInt(b, "SELECT coalesce(active_pid, 0) FROM pg_replication_slots WHERE slot_name = $1", r.slot); int(now) != sender.pid {
			b.Logf("warning: slot %s is served by pid %d at completion, the sampled walsender was pid %d: walshadow reconnected and its walsender CPU is only the first connection's", r.slot, now, sender.pid)
		}
	}
	endChildProfile(b, c, profile) // at completion, then the child is killed
	c.Kill()
	run.parts = r.partLog(b, chStart)
	return run
}

// partLog sums ClickHouse's part log since from (a server time): parts
// written by inserts and by merges, with their rows and the merges' time.
func (r *backlogRig) partLog(b *testing.B, from string) string {
	b.Helper()
	r.ch.HTTPQuery(b, "SYSTEM FLUSH LOGS")
	out := r.ch.HTTPQuery(b, `SELECT event_type, count(), sum(rows), round(sum(size_in_bytes) / 1e6, 1), round(sum(duration_ms) / 1e3, 2)
		FROM system.part_log WHERE event_time >= toDateTime('`+from+`') AND toString(event_type) IN ('NewPart', 'NEW_PART', 'MergeParts', 'MERGE_PARTS')
		GROUP BY event_type ORDER BY event_type FORMAT TSV`)
	var parts []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 5 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %s parts, %s rows, %s MB, %s s", f[0], f[1], f[2], f[3], f[4]))
	}
	return strings.Join(parts, "; ")
}

// compareEnd compares the pgbench tables in ClickHouse with the source:
// row counts of countedTables (FINAL, _is_deleted = 0) for the summary,
// then every table by chcompare (its agreed columns, count, exact sums and
// md5 of the canonical rows). Each difference fails the benchmark; it
// returns the counts as text and how many tables compared equal.
func (r *backlogRig) compareEnd(b *testing.B, oids map[string]uint32) (counts string, equal int) {
	b.Helper()
	return r.compareEndOn(b, oids, r.chDSN)
}

// compareEndOn is compareEnd reading ClickHouse at dsn.
func (r *backlogRig) compareEndOn(b *testing.B, oids map[string]uint32, dsn string) (counts string, equal int) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	store, err := clickhouse.ReadStore(filepath.Join(r.stateDir, "clickhouse"))
	if err != nil {
		b.Fatalf("opening a copy of the baseline store: %v", err)
	}
	ch, err := clickhouse.Open(ctx, clickhouse.ConnConfig{DSN: dsn})
	if err != nil {
		b.Fatalf("connecting to ClickHouse: %v", err)
	}
	defer ch.Close()
	pg, err := pgx.Connect(ctx, r.src.DSN())
	if err != nil {
		b.Fatalf("connecting to the source: %v", err)
	}
	defer pg.Close(context.Background())
	var shown []string
	for _, name := range pgbenchTables {
		oid := oids[name]
		a := store.Get(oid)
		if a == nil {
			b.Errorf("public.%s (oid %d) has no ClickHouse table", name, oid)
			continue
		}
		if countedTables[name] {
			var srcRows, chRows int64
			if err := pg.QueryRow(ctx, "SELECT count(*) FROM public."+name).Scan(&srcRows); err != nil {
				b.Fatalf("counting public.%s: %v", name, err)
			}
			target := clickhouse.QuoteQualified(a.Target)
			q := "SELECT toInt64(count()) FROM " + target + " FINAL WHERE " + clickhouse.QuoteIdent(clickhouse.ColIsDeleted) + " = 0"
			if err := ch.Native().QueryRow(ctx, q).Scan(&chRows); err != nil {
				b.Fatalf("counting %s: %v", target, err)
			}
			if chRows != srcRows {
				b.Errorf("%s holds %d rows, public.%s %d", target, chRows, name, srcRows)
			}
			shown = append(shown, fmt.Sprintf("%s %d/%d rows", name, chRows, srcRows))
		}
		if err := chcompare.CompareAgreed(ctx, pg, ch.Native(), store, "public", name, oid); err != nil {
			b.Errorf("after the backlog: %v", err)
			continue
		}
		equal++
	}
	return strings.Join(shown, ", "), equal
}

// transactionsLine is pgbench's count of the transactions it ran.
var transactionsLine = regexp.MustCompile(`number of transactions actually processed: (\d+)`)

// pgbenchTransactions reads the transaction count from pgbench's output.
func pgbenchTransactions(b *testing.B, out string) int64 {
	b.Helper()
	m := transactionsLine.FindStringSubmatch(out)
	if m == nil {
		b.Fatalf("no transaction count in pgbench's output:\n%s", out)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		b.Fatalf("pgbench's transaction count %q: %v", m[1], err)
	}
	return n
}

// envInt is the positive integer in the environment variable name, def
// when it is unset.
func envInt(b *testing.B, name string, def int) int {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// readMachineCPU is the machine's CPU time so far (every core, every
// process): what a run costs beyond walshadow's own process, the shadow's
// replay and ClickHouse's merges included.
func readMachineCPU(b *testing.B) testrig.MachineCPU {
	b.Helper()
	m, err := testrig.ReadMachineCPU()
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// readProcessCPUs is every live process's CPU time so far.
func readProcessCPUs(b *testing.B) testrig.ProcessCPUs {
	b.Helper()
	p, err := testrig.ReadProcessCPUs()
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// cpuList is "label 1.23s, ..." of top.
func cpuList(top []testrig.LabelledCPU) string {
	parts := make([]string, len(top))
	for i, t := range top {
		parts[i] = fmt.Sprintf("%s %.2fs", t.Label, t.CPU.Seconds())
	}
	return strings.Join(parts, ", ")
}
