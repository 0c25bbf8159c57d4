package testrig

import (
	"testing"
	"time"
)

func TestParseProcStatCommandWithParentheses(t *testing.T) {
	// A command name may hold spaces and ')': fields count from the last one.
	line := "4242 (postgres: a) b (c) S 77 4242 4242 0 -1 4194560 500 0 0 0 123 45 6 7 20 0 1 0 100 1000 10\n"
	st, err := parseProcStat(4242, line)
	if err != nil {
		t.Fatal(err)
	}
	want := procStat{ppid: 77, utime: 123, stime: 45, cutime: 6, cstime: 7}
	if st != want {
		t.Errorf("parsed %+v, want %+v", st, want)
	}
	if _, err := parseProcStat(4242, "4242 (truncated) S 77 1 2"); err == nil {
		t.Error("a truncated stat line parsed without error")
	}
}

func TestParseMachineCPU(t *testing.T) {
	hz, err := clockTicks()
	if err != nil {
		t.Fatal(err)
	}
	tick := time.Second / time.Duration(hz)
	m, err := ParseMachineCPU("cpu  10 1 5 100 7 2 3 4 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n")
	if err != nil {
		t.Fatal(err)
	}
	if m.Busy != 25*tick || m.Idle != 107*tick {
		t.Errorf("busy %v idle %v, want %v and %v", m.Busy, m.Idle, 25*tick, 107*tick)
	}
	if d := m.Sub(MachineCPU{Busy: 5 * tick, Idle: 7 * tick}); d.Busy != 20*tick || d.Idle != 100*tick {
		t.Errorf("Sub = %+v", d)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4 5 6 7 8", "cpu 1 2 3", "cpu 1 2 x 4 5 6 7 8"} {
		if _, err := ParseMachineCPU(bad); err == nil {
			t.Errorf("ParseMachineCPU(%q) succeeded", bad)
		}
	}
	if _, err := ReadMachineCPU(); err != nil {
		t.Error(err)
	}
}

func TestProcessCPUsTop(t *testing.T) {
	for cmd, want := range map[string]string{
		"postgres: startup recovering 000000010000000000000003\x00": "postgres: startup",
		"/usr/bin/clickhouse-server\x00--config-file=x\x00":         "clickhouse-server",
		"": "?",
	} {
		if got := processLabel(cmd); got != want {
			t.Errorf("processLabel(%q) = %q, want %q", cmd, got, want)
		}
	}
	earlier := ProcessCPUs{1: {"a", time.Second}, 2: {"b", time.Second}, 3: {"c", 5 * time.Second}}
	now := ProcessCPUs{1: {"a", 3 * time.Second}, 2: {"b", 2 * time.Second}, 4: {"b", time.Second}, 3: {"c", 5 * time.Second}}
	top := now.Top(earlier, 5)
	if len(top) != 2 || top[0] != (LabelledCPU{"a", 2 * time.Second}) || top[1] != (LabelledCPU{"b", 2 * time.Second}) {
		t.Errorf("Top = %v", top)
	}
	if len(now.Top(earlier, 1)) != 1 {
		t.Error("Top(1) is not one entry")
	}
	if self, err := ReadProcessCPUs(); err != nil || len(self) == 0 {
		t.Errorf("ReadProcessCPUs: %d processes, %v", len(self), err)
	}
}
