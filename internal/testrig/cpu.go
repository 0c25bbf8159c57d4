package testrig

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// clockTicks is the kernel's clock ticks per second (getconf CLK_TCK), the
// unit of the CPU times in /proc/<pid>/stat.
var clockTicks = sync.OnceValues(func() (float64, error) {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err != nil {
		return 0, fmt.Errorf("getconf CLK_TCK: %w", err)
	}
	hz, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
	if err != nil || hz <= 0 {
		return 0, fmt.Errorf("getconf CLK_TCK printed %q: want a positive number", out)
	}
	return hz, nil
})

// procStat is the part of /proc/<pid>/stat CPUSeconds reads, times in
// clock ticks.
type procStat struct {
	ppid                         int
	utime, stime, cutime, cstime uint64
}

// readProcStat reads /proc/<pid>/stat; parseProcStat parses it. The command name (field 2) is in
// parentheses and may hold spaces and parentheses itself, so the fields are
// counted from the last ')'.
func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, err
	}
	return parseProcStat(pid, string(b))
}

func parseProcStat(pid int, s string) (procStat, error) {
	end := strings.LastIndexByte(s, ')')
	if end < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: no ')' after the command name: %q", pid, s)
	}
	// fields[0] is field 3 (state) of proc(5): field n is fields[n-3].
	fields := strings.Fields(s[end+1:])
	if len(fields) < 15 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %d fields after the command name, want at least 15", pid, len(fields))
	}
	var st procStat
	var err error
	if st.ppid, err = strconv.Atoi(fields[1]); err != nil {
		return procStat{}, fmt.Errorf("/proc/%d/stat: ppid %q: %w", pid, fields[1], err)
	}
	for i, dst := range []*uint64{&st.utime, &st.stime, &st.cutime, &st.cstime} {
		v, err := strconv.ParseUint(fields[11+i], 10, 64)
		if err != nil {
			return procStat{}, fmt.Errorf("/proc/%d/stat: field %d %q: %w", pid, 14+i, fields[11+i], err)
		}
		*dst = v
	}
	return st, nil
}

// postmasterPID is the first line of the cluster's postmaster.pid.
func (p *Postgres) postmasterPID() (int, error) {
	path := filepath.Join(p.dataDir, "postmaster.pid")
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("reading the postmaster's pid: %w", err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("%s: first line %q is not a pid", path, first)
	}
	return pid, nil
}

// CPUSeconds is the CPU time (user + system) the source cluster has spent
// so far: the postmaster's own and its reaped children's (cutime, cstime:
// exited backends land there once the postmaster waits for them), plus
// every live descendant's (backends, walsenders, background workers). A
// live descendant's cutime and cstime count too: its reaped children are in
// no one else's count until it exits itself. It fails the test when the
// server does not run. Only differences between two calls mean anything.
func (p *Postgres) CPUSeconds(t testing.TB) float64 {
	t.Helper()
	hz, err := clockTicks()
	if err != nil {
		t.Fatal(err)
	}
	root, err := p.postmasterPID()
	if err != nil {
		t.Fatal(err)
	}
	rootStat, err := readProcStat(root)
	if err != nil {
		t.Fatalf("the postmaster (pid %d) of %s: %v", root, p.dataDir, err)
	}
	children, err := processChildren()
	if err != nil {
		t.Fatal(err)
	}
	ticks := rootStat.utime + rootStat.stime + rootStat.cutime + rootStat.cstime
	queue := append([]int(nil), children[root]...)
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		st, err := readProcStat(pid)
		if err != nil {
			// Exited since the scan: its time is (or will be) in its
			// parent's cutime and cstime.
			continue
		}
		ticks += st.utime + st.stime + st.cutime + st.cstime
		queue = append(queue, children[pid]...)
	}
	return float64(ticks) / hz
}

// processChildren maps every live process id to its children's ids.
func processChildren() (map[int][]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("listing /proc: %w", err)
	}
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue // not a process
		}
		st, err := readProcStat(pid)
		if err != nil {
			continue // exited meanwhile
		}
		children[st.ppid] = append(children[st.ppid], pid)
	}
	return children, nil
}

// SampleBackendCPU samples, every 50 ms until stop, the CPU seconds of the
// cluster's backends whose application_name is appName (a load's COPY
// connections and walsenders, say), and returns their sum at stop. A
// backend counts as of its last sample: the CPU it spends in the 50 ms
// before it exits is missed, so the figure is a lower bound.
func (p *Postgres) SampleBackendCPU(t testing.TB, appName string) (stop func() float64) {
	t.Helper()
	hz, err := clockTicks()
	if err != nil {
		t.Fatal(err)
	}
	conn := p.Connect(t)
	ctx, cancel := context.WithCancel(context.Background())
	seen := map[int]uint64{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			rows, err := conn.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE application_name = $1", appName)
			if err == nil {
				var pids []int
				for rows.Next() {
					var pid int
					if rows.Scan(&pid) == nil {
						pids = append(pids, pid)
					}
				}
				rows.Close()
				for _, pid := range pids {
					if st, err := readProcStat(pid); err == nil {
						seen[pid] = max(seen[pid], st.utime+st.stime)
					}
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return func() float64 {
		cancel()
		<-done
		var total uint64
		for _, ticks := range seen {
			total += ticks
		}
		return float64(total) / hz
	}
}

// ProcessCPUs is every live process's own CPU time (utime + stime), with
// a label: the first two words of its command line ("postgres: startup",
// "clickhouse-server", ...).
type ProcessCPUs map[int]LabelledCPU

// LabelledCPU is one process's label and CPU time.
type LabelledCPU struct {
	Label string
	CPU   time.Duration
}

// ReadProcessCPUs reads /proc for every process it may read; processes
// that exit while it reads are skipped.
func ReadProcessCPUs() (ProcessCPUs, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("listing /proc: %w", err)
	}
	hz, err := clockTicks()
	if err != nil {
		return nil, err
	}
	out := ProcessCPUs{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		st, err := parseProcStat(pid, string(raw))
		if err != nil {
			continue
		}
		cpu, err := ticksDuration(hz, st.utime, st.stime)
		if err != nil {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		out[pid] = LabelledCPU{Label: processLabel(string(cmd)), CPU: cpu}
	}
	return out, nil
}

// processLabel is a command line's first two words, the program's
// directory dropped.
func processLabel(cmdline string) string {
	words := strings.Fields(strings.ReplaceAll(cmdline, "\x00", " "))
	if len(words) == 0 {
		return "?"
	}
	words[0] = filepath.Base(words[0])
	if len(words) > 1 && strings.HasSuffix(words[0], ":") {
		return words[0] + " " + words[1]
	}
	return words[0]
}

// Top is the CPU each label spent between earlier and p (processes alive
// at p; one that started since counts from zero), the n largest first.
func (p ProcessCPUs) Top(earlier ProcessCPUs, n int) []LabelledCPU {
	sum := map[string]time.Duration{}
	for pid, now := range p {
		d := now.CPU
		if was, ok := earlier[pid]; ok && was.Label == now.Label {
			d -= was.CPU
		}
		if d > 0 {
			sum[now.Label] += d
		}
	}
	out := make([]LabelledCPU, 0, len(sum))
	for l, d := range sum {
		out = append(out, LabelledCPU{Label: l, CPU: d})
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].CPU > out[j].CPU || out[i].CPU == out[j].CPU && out[i].Label < out[j].Label
	})
	if len(out) > n {
		out = out[:n]
	}
	return out
}
