package main

import (
	"strings"
	"testing"
)

func TestFailureDigestStopsAtTheServerLogs(t *testing.T) {
	out := []string{
		"=== RUN   TestDrill\n",
		"    drill_test.go:10: cycle 1 ok\n",
		"    drill_test.go:20: table public.t differs: 3 rows, want 4\n",
		"    rig.go:210: kept server dir /tmp/x\n",
		"    rig.go:212: last 40 lines of /tmp/x/stdout.log:\n",
		"        Logging errors to /tmp/x/err.log\n",
		"--- FAIL: TestDrill (1.00s)\n",
	}
	got := strings.Join(failureDigest("example/drill", "TestDrill", out), "")
	want := "TestDrill (example/drill):\n" +
		"=== RUN   TestDrill\n" +
		"    drill_test.go:10: cycle 1 ok\n" +
		"    drill_test.go:20: table public.t differs: 3 rows, want 4\n"
	if got != want {
		t.Fatalf("digest:\n%s\nwant:\n%s", got, want)
	}
}

func TestFailureDigestKeepsTheLastLines(t *testing.T) {
	var out []string
	for i := 0; i < 30; i++ {
		out = append(out, strings.Repeat("x", i)+"\n")
	}
	out = append(out, "no newline at the end "+strings.Repeat("y", 2*digestWidth))
	d := failureDigest("p", "T", out)
	if len(d) != 1+digestLines {
		t.Fatalf("%d lines, want %d", len(d), 1+digestLines)
	}
	if last := d[len(d)-1]; len(last) > digestWidth+5 || !strings.HasSuffix(last, " ...\n") {
		t.Fatalf("last line not cut: %q", last)
	}
	if d[1] != strings.Repeat("x", 19)+"\n" {
		t.Fatalf("first kept line %q", d[1])
	}
}
