package processor_test

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// memStatus is the process's resident set now and at its peak, in bytes.
type memStatus struct{ rss, hwm int64 }

func readMemStatus() (memStatus, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return memStatus{}, fmt.Errorf("reading /proc/self/status: %w", err)
	}
	return parseMemStatus(b)
}

// parseMemStatus reads VmRSS and VmHWM ("VmHWM:\t  123456 kB") from a
// /proc/<pid>/status text.
func parseMemStatus(b []byte) (memStatus, error) {
	var ms memStatus
	var seen int
	for _, line := range strings.Split(string(b), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok || name != "VmRSS" && name != "VmHWM" {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return memStatus{}, fmt.Errorf("unexpected %s line %q", name, line)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return memStatus{}, fmt.Errorf("%s line %q: %w", name, line, err)
		}
		if kb < 0 || kb > 1<<40 {
			return memStatus{}, fmt.Errorf("%s line %q: size out of range", name, line)
		}
		if name == "VmRSS" {
			ms.rss = kb << 10
		} else {
			ms.hwm = kb << 10
		}
		seen++
	}
	if seen != 2 {
		return memStatus{}, errors.New("no VmRSS and VmHWM lines in /proc/self/status")
	}
	return ms, nil
}

// resetPeakRSS makes VmHWM restart from the current RSS (Linux clear_refs
// 5), so the peak measured after is the run's own, not the setup's.
func resetPeakRSS() error {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

func TestParseMemStatus(t *testing.T) {
	const status = "Name:\tprocessor.test\nVmPeak:\t  2000 kB\nVmHWM:\t   1536 kB\nVmRSS:\t    1024 kB\nThreads:\t9\n"
	tests := []struct {
		name, in string
		want     memStatus
		wantErr  bool
	}{
		{name: "proc status", in: status, want: memStatus{rss: 1024 << 10, hwm: 1536 << 10}},
		{name: "no VmHWM", in: "VmRSS:\t1 kB\n", wantErr: true},
		{name: "empty", in: "", wantErr: true},
		{name: "unit", in: "VmRSS:\t1 MB\nVmHWM:\t1 kB\n", wantErr: true},
		{name: "not a number", in: "VmRSS:\tx kB\nVmHWM:\t1 kB\n", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseMemStatus([]byte(tc.in))
			if (err != nil) != tc.wantErr || got != tc.want && !tc.wantErr {
				t.Fatalf("parseMemStatus = %+v, %v; want %+v (error %v)", got, err, tc.want, tc.wantErr)
			}
		})
	}
	if _, err := readMemStatus(); err != nil {
		t.Logf("this system's /proc/self/status: %v", err)
	}
}

func FuzzParseMemStatus(f *testing.F) {
	f.Add([]byte("VmHWM:\t 10 kB\nVmRSS:\t 5 kB\n"))
	f.Add([]byte("VmRSS:: kB\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ms, err := parseMemStatus(b)
		if err == nil && (ms.rss < 0 || ms.hwm < 0) {
			t.Fatalf("negative sizes %+v from %q", ms, b)
		}
	})
}
