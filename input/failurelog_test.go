package input

import (
	"strconv"
	"testing"
	"time"
)

func TestNormalizeFailure(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"batch 12 of run 3 was not delivered: insert failed", "batch 1 of run 4 was not delivered: insert failed", true},
		{"a batch of walshadow session run 3, which has stopped, is not written", "a batch of walshadow session run 17, which has stopped, is not written", true},
		{"the shadow exited (pid 4242)", "the shadow exited (pid 977)", true},
		{"batch 12 of run 3 was not delivered: insert failed", "batch 12 of run 3 was not delivered: table t is gone", false},
		{"decoding the record at 0/3000028", "decoding the record at 0/3000110", false},
		{"relation 16384 has no descriptor", "relation 16390 has no descriptor", false},
		{"rerun 3", "rerun 4", false},
	} {
		if got := normalizeFailure(tc.a) == normalizeFailure(tc.b); got != tc.same {
			t.Errorf("%q vs %q: same %v (%q, %q), want %v", tc.a, tc.b, got, normalizeFailure(tc.a), normalizeFailure(tc.b), tc.same)
		}
	}
}

func TestFailureLog(t *testing.T) {
	t0 := time.Date(2025, 6, 3, 21, 7, 3, 0, time.Local)
	type stop struct {
		after    time.Duration // since t0
		msg      string
		starting bool
		progress bool // the restart policy saw progress before this stop
		streak   int
		wait     time.Duration
		want     string
	}
	const s = time.Second
	nack := func(seq, run int) string {
		return "batch " + strconv.Itoa(seq) + " of run " + strconv.Itoa(run) + " was not delivered: code 241: memory limit exceeded"
	}
	for _, tc := range []struct {
		name  string
		stops []stop
	}{{
		name: "the same failure: once in full, then one line per back-off step with the count",
		stops: []stop{
			{0, nack(12, 3), false, false, 1, 1 * s, "walshadow session stopped: " + nack(12, 3) + "; restarting it in 1s"},
			{2 * s, nack(1, 4), false, false, 2, 2 * s, "walshadow session still failing: " + nack(1, 4) + " (2 times since 21:07:03; next restart in 2s)"},
			{5 * s, nack(1, 5), false, false, 3, 4 * s, "walshadow session still failing: " + nack(1, 5) + " (3 times since 21:07:03; next restart in 4s)"},
			{70 * s, nack(2, 9), false, false, 7, 30 * s, "walshadow session still failing: " + nack(2, 9) + " (4 times since 21:07:03; next restart in 30s)"},
		},
	}, {
		name: "a different error is news, in full; the first one still counts on",
		stops: []stop{
			{0, nack(12, 3), false, false, 1, 1 * s, "walshadow session stopped: " + nack(12, 3) + "; restarting it in 1s"},
			{2 * s, "connecting to the source: connection refused", true, false, 2, 2 * s,
				"walshadow session could not start: connecting to the source: connection refused; retrying in 2s (2 stops in a row without progress)"},
			{5 * s, "connecting to the source: connection refused", true, false, 3, 4 * s,
				"walshadow session still failing: connecting to the source: connection refused (2 times since 21:07:05; next restart in 4s)"},
			{10 * s, nack(1, 4), false, false, 4, 8 * s, "walshadow session still failing: " + nack(1, 4) + " (2 times since 21:07:03; next restart in 8s)"},
		},
	}, {
		name: "after progress the same error is news again",
		stops: []stop{
			{0, nack(12, 3), false, false, 1, 1 * s, "walshadow session stopped: " + nack(12, 3) + "; restarting it in 1s"},
			{2 * s, nack(1, 4), false, false, 2, 2 * s, "walshadow session still failing: " + nack(1, 4) + " (2 times since 21:07:03; next restart in 2s)"},
			{600 * s, nack(80, 5), false, true, 1, 1 * s, "walshadow session stopped: " + nack(80, 5) + "; restarting it in 1s"},
		},
	}, {
		name: "a streak across midnight names the day",
		stops: []stop{
			{0, "the shadow exited", false, false, 1, 1 * s, "walshadow session stopped: the shadow exited; restarting it in 1s"},
			{3 * time.Hour, "the shadow exited", false, false, 9, 30 * s, "walshadow session still failing: the shadow exited (2 times since 2025-06-03 21:07:03; next restart in 30s)"},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var l failureLog
			for i, st := range tc.stops {
				if st.progress {
					l.reset()
				}
				if got := l.line(t0.Add(st.after), st.msg, st.starting, st.streak, st.wait); got != st.want {
					t.Errorf("stop %d:\n got %s\nwant %s", i+1, got, st.want)
				}
			}
		})
	}
}
