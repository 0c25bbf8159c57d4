package testrig

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walshadow/walshadow/internal/wal"
)

// This file is the PostgreSQL-native reference the benchmarks measure
// walshadow against: logical decoding with pgoutput, consumed by
// pg_recvlogical (RunPgoutput), and the /proc readings both sides are
// measured with (ReadProcCPU, ReadPeakRSS, CPUSampler, SlotSenderPID).

// CPUSampleInterval is how often a CPUSampler reads its process's CPU: a
// process that exits between two samples has at most this much CPU
// unaccounted for.
const CPUSampleInterval = 10 * time.Millisecond

// pgoutputTimeout bounds one RunPgoutput.
const pgoutputTimeout = 10 * time.Minute

// RequirePgRecvlogical skips t when pg_recvlogical is not in the
// PostgreSQL bin dir (PGBinDir), which RunPgoutput runs.
func RequirePgRecvlogical(t testing.TB) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(PGBinDir(t), "pg_recvlogical")); err != nil {
		t.Skipf("pg_recvlogical is not in the PostgreSQL bin dir (%v): install postgresql-client-15", err)
	}
}

// PgoutputResult is what one RunPgoutput observed.
type PgoutputResult struct {
	// Wall is pg_recvlogical's launch until its exit.
	Wall time.Duration
	// FirstByte is the launch until the first output byte (the first
	// BEGIN message); Replay is that byte until the exit. Wall minus
	// Replay is connecting, then reading and buffering WAL up to the
	// first commit.
	FirstByte, Replay time.Duration
	// Bytes is the size of pg_recvlogical's output.
	Bytes int64
	// WalsenderPID is the source's logical walsender that served the run,
	// WalsenderCPU its user plus system CPU over its whole life (connection
	// setup, decoding, sending) up to its last sample.
	WalsenderPID int
	WalsenderCPU time.Duration
	// ReapedCPU is the rise of the postmaster's reaped-children CPU
	// (cutime + cstime) over the run and until the walsender was gone: a
	// cross-check of WalsenderCPU when nothing else on the source exits
	// meanwhile (autovacuum off).
	ReapedCPU time.Duration
	// ClientCPU is pg_recvlogical's own user plus system CPU.
	ClientCPU time.Duration
}

// RunPgoutput streams the logical slot (made with the pgoutput plugin)
// with pg_recvlogical, proto_version 1 and publication, from the slot's
// position up to endpos (--endpos: pg_recvlogical stops at the first
// message past it), and measures the run. pgoutput gets its cheapest
// consumer: pg_recvlogical writing to a file in tmpfs (FastTempDir)
// without fsync (-F 0; a pipe to this process cost it seconds of CPU in
// write wakeups). The file's first byte marks the first BEGIN message, so
// the replay phase can be told from reading and buffering the WAL. The
// walsender serving the run is sampled every CPUSampleInterval while it
// lives. Any failure fails t.
func (p *Postgres) RunPgoutput(t testing.TB, slot, publication string, endpos wal.LSN) *PgoutputResult {
	t.Helper()
	res := &PgoutputResult{}
	ctx, cancel := context.WithTimeout(context.Background(), pgoutputTimeout)
	defer cancel()
	poll := p.Connect(t)
	postmaster, err := p.postmasterPID()
	if err != nil {
		t.Fatal(err)
	}
	reapedBefore, err := ReadProcCPU(postmaster)
	if err != nil {
		t.Fatal(err)
	}

	outDir, err := os.MkdirTemp(FastTempDir(), "walshadow-pgoutput-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(outDir)
	outFile := filepath.Join(outDir, "pgoutput.out")
	cmd := exec.CommandContext(ctx, filepath.Join(p.bindir, "pg_recvlogical"), "--start", "--no-loop", "-S", slot, "-d", p.DSN(),
		"--plugin=pgoutput", "-o", "proto_version=1", "-o", "publication_names="+publication,
		"--endpos="+endpos.String(), "-F", "0", "-f", outFile)
	cmd.Env = CleanPGEnv()
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting pg_recvlogical: %v", err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	// The watcher owns firstAt until watchDone closes.
	var firstAt time.Time
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		for {
			if st, err := os.Stat(outFile); err == nil && st.Size() > 0 {
				firstAt = time.Now()
				return
			}
			select {
			case <-exited:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()

	// The walsender appears once pg_recvlogical has run START_REPLICATION.
	findCtx, findCancel := context.WithTimeout(ctx, time.Minute)
	res.WalsenderPID, err = SlotSenderPID(findCtx, poll, slot, 2*time.Millisecond, exited)
	findCancel()
	switch {
	case errors.Is(err, ErrSenderClientGone):
		<-exited
		t.Fatalf("pg_recvlogical finished before its walsender was seen (the CPU would be unmeasured): %v\n%s", waitErr, stderr.String())
	case errors.Is(err, context.DeadlineExceeded):
		t.Fatalf("pg_recvlogical's walsender did not show up within a minute: %s", stderr.String())
	case err != nil:
		t.Fatalf("looking for the logical walsender: %v", err)
	}
	sampler := StartCPUSampler(res.WalsenderPID)
	<-exited
	end := time.Now()
	<-watchDone
	if waitErr != nil {
		t.Fatalf("pg_recvlogical: %v\n%s", waitErr, stderr.String())
	}
	st, err := os.Stat(outFile)
	if err != nil {
		t.Fatalf("pg_recvlogical's output: %v", err)
	}
	res.Bytes = st.Size()
	// The walsender exits after its client: its whole life is sampled.
	cpu, err := sampler.StopAfterExit(2 * time.Second)
	if err != nil {
		t.Fatalf("sampling the logical walsender's CPU: %v", err)
	}
	res.WalsenderCPU = cpu
	res.ClientCPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	// Once the walsender is reaped the postmaster adds its CPU to cutime
	// and cstime; the poll connection stays open, so it is not among what
	// exits meanwhile.
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := os.Stat("/proc/" + strconv.Itoa(res.WalsenderPID)); errors.Is(err, os.ErrNotExist) || time.Now().After(deadline) {
			break
		}
		time.Sleep(CPUSampleInterval)
	}
	if reapedAfter, err := ReadProcCPU(postmaster); err == nil {
		res.ReapedCPU = reapedAfter.Children - reapedBefore.Children
	}
	res.Wall = end.Sub(start)
	if firstAt.IsZero() {
		t.Fatalf("pg_recvlogical exited without output\n%s", stderr.String())
	}
	res.FirstByte = firstAt.Sub(start)
	res.Replay = end.Sub(firstAt)
	return res
}

// ErrSenderClientGone is SlotSenderPID's error when the replication client
// exited before its walsender was seen.
var ErrSenderClientGone = errors.New("the replication client exited before its walsender was seen")

// SlotSenderPID polls pg_replication_slots on conn every interval until
// slot has an active walsender and returns its pid (active_pid). It
// returns ErrSenderClientGone once clientDone is closed (the client that
// was to connect exited) and ctx's error once it ends. conn must not be
// used by anyone else meanwhile.
func SlotSenderPID(ctx context.Context, conn *pgx.Conn, slot string, interval time.Duration, clientDone <-chan struct{}) (int, error) {
	for {
		var pid *int32
		err := conn.QueryRow(ctx, "SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&pid)
		switch {
		case ctx.Err() != nil:
			return 0, ctx.Err()
		case err != nil && !errors.Is(err, pgx.ErrNoRows):
			return 0, fmt.Errorf("reading the active walsender of slot %s: %w", slot, err)
		case pid != nil:
			return int(*pid), nil
		}
		select {
		case <-clientDone:
			return 0, ErrSenderClientGone
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(interval):
		}
	}
}

// FastTempDir is a directory for scratch output that should cost no disk
// I/O: /dev/shm (tmpfs) when there is one, else os.TempDir().
func FastTempDir() string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		return "/dev/shm"
	}
	return os.TempDir()
}

// ProcCPU is a process's CPU time from /proc/<pid>/stat.
type ProcCPU struct {
	// Own is its user plus system time (utime + stime).
	Own time.Duration
	// Children is the user plus system time of its exited children it
	// has reaped (cutime + cstime).
	Children time.Duration
}

// ReadProcCPU reads the CPU time of the live process pid (os.Getpid() for
// this one).
func ReadProcCPU(pid int) (ProcCPU, error) {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return ProcCPU{}, fmt.Errorf("reading CPU of process %d: %w", pid, err)
	}
	return ParseProcCPU(pid, string(raw))
}

// ParseProcCPU parses utime, stime, cutime and cstime (fields 14-17) of
// the /proc/<pid>/stat line stat (pid only names the process in errors).
// Times too large for a time.Duration sum are an error.
func ParseProcCPU(pid int, stat string) (ProcCPU, error) {
	st, err := parseProcStat(pid, stat)
	if err != nil {
		return ProcCPU{}, err
	}
	hz, err := clockTicks()
	if err != nil {
		return ProcCPU{}, err
	}
	own, err := ticksDuration(hz, st.utime, st.stime)
	if err != nil {
		return ProcCPU{}, fmt.Errorf("/proc/%d/stat: utime, stime: %w", pid, err)
	}
	children, err := ticksDuration(hz, st.cutime, st.cstime)
	if err != nil {
		return ProcCPU{}, fmt.Errorf("/proc/%d/stat: cutime, cstime: %w", pid, err)
	}
	return ProcCPU{Own: own, Children: children}, nil
}

// ticksDuration is a+b clock ticks at hz ticks per second.
func ticksDuration(hz float64, a, b uint64) (time.Duration, error) {
	const limit = math.MaxInt64 / uint64(time.Second) / 2
	if a > limit || b > limit {
		return 0, fmt.Errorf("%d + %d clock ticks is out of range", a, b)
	}
	return time.Duration(a+b) * time.Second / time.Duration(hz), nil
}

// ReadPeakRSS is the live process pid's peak resident set size in bytes
// (VmHWM in /proc/<pid>/status).
func ReadPeakRSS(pid int) (int64, error) {
	path := filepath.Join("/proc", strconv.Itoa(pid), "status")
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("reading the peak RSS of process %d: %w", pid, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:")
		if !ok {
			continue
		}
		kb, ok := strings.CutSuffix(strings.TrimSpace(rest), " kB")
		n, err := strconv.ParseInt(strings.TrimSpace(kb), 10, 64)
		if !ok || err != nil || n < 0 {
			return 0, fmt.Errorf("%s: VmHWM %q: want a size in kB", path, strings.TrimSpace(rest))
		}
		return n << 10, nil
	}
	return 0, fmt.Errorf("%s: no VmHWM line", path)
}

// CPUSampler reads a process's CPU every CPUSampleInterval until it is
// stopped or the process is gone, keeping the last reading: for a process
// that exits on its own (a walsender whose client left) the CPU of its
// whole life but at most the last interval.
type CPUSampler struct {
	pid      int
	done     chan struct{}
	quit     chan struct{}
	quitOnce sync.Once
	mu       sync.Mutex
	last     ProcCPU
	err      error
}

// StartCPUSampler takes a first reading of pid's CPU and samples it in
// the background.
func StartCPUSampler(pid int) *CPUSampler {
	s := &CPUSampler{pid: pid, done: make(chan struct{}), quit: make(chan struct{})}
	s.last, s.err = ReadProcCPU(pid)
	go func() {
		defer close(s.done)
		if s.err != nil {
			return
		}
		for {
			select {
			case <-s.quit:
				return
			case <-time.After(CPUSampleInterval):
			}
			c, err := ReadProcCPU(pid)
			if err != nil {
				return // exited: the last reading stands
			}
			s.mu.Lock()
			s.last = c
			s.mu.Unlock()
		}
	}()
	return s
}

// Stop ends the sampling now and returns the process's own CPU (user plus
// system) as of a reading taken now when it still runs, else as of its
// last sample. The error is the first reading's: the process was not
// there to sample.
func (s *CPUSampler) Stop() (time.Duration, error) {
	s.halt()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return 0, s.err
	}
	if c, err := ReadProcCPU(s.pid); err == nil {
		s.last = c
	}
	return s.last.Own, nil
}

// StopAfterExit waits up to timeout for the process to exit, then ends
// the sampling and returns its own CPU (user plus system) as of the last
// sample.
func (s *CPUSampler) StopAfterExit(timeout time.Duration) (time.Duration, error) {
	select {
	case <-s.done:
	case <-time.After(timeout):
	}
	s.halt()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return 0, s.err
	}
	return s.last.Own, nil
}

// halt stops the sampling goroutine and waits for it.
func (s *CPUSampler) halt() {
	s.quitOnce.Do(func() { close(s.quit) })
	<-s.done
}

// MachineCPU is the machine's CPU time so far, all cores summed: Busy
// (user, nice, system, irq, softirq, steal) and Idle (idle, iowait).
type MachineCPU struct{ Busy, Idle time.Duration }

// ReadMachineCPU reads the first line of /proc/stat.
func ReadMachineCPU() (MachineCPU, error) {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return MachineCPU{}, fmt.Errorf("reading machine CPU: %w", err)
	}
	return ParseMachineCPU(string(raw))
}

// ParseMachineCPU parses the aggregate "cpu" line of a /proc/stat text.
func ParseMachineCPU(stat string) (MachineCPU, error) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return MachineCPU{}, fmt.Errorf("/proc/stat: first line %q is not the aggregate cpu line", line)
	}
	var v [8]uint64
	for i := range v {
		n, err := strconv.ParseUint(f[i+1], 10, 64)
		if err != nil {
			return MachineCPU{}, fmt.Errorf("/proc/stat: cpu field %d %q: %w", i+1, f[i+1], err)
		}
		v[i] = n
	}
	hz, err := clockTicks()
	if err != nil {
		return MachineCPU{}, err
	}
	busy, err := ticksDuration(hz, v[0]+v[1]+v[2]+v[5]+v[6], v[7])
	if err != nil {
		return MachineCPU{}, fmt.Errorf("/proc/stat: %w", err)
	}
	idle, err := ticksDuration(hz, v[3], v[4])
	if err != nil {
		return MachineCPU{}, fmt.Errorf("/proc/stat: %w", err)
	}
	return MachineCPU{Busy: busy, Idle: idle}, nil
}

// Sub is the CPU time spent between earlier and m.
func (m MachineCPU) Sub(earlier MachineCPU) MachineCPU {
	return MachineCPU{Busy: m.Busy - earlier.Busy, Idle: m.Idle - earlier.Idle}
}
