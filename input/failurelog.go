package input

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// failureLog words the one line logged for each stop of the session: the
// error in full the first time it is seen in a streak of stops without
// progress, and, when the same error recurs, one short line for that
// back-off step with the count and when it started. Errors that differ only
// in run, batch or process numbers (the session numbers its runs and
// their batches, so "batch 12 of run 3" is "batch 1 of run 4" after a
// restart) are the same error. Pure: the caller logs the line.
type failureLog struct {
	seen map[string]*recurrence
}

type recurrence struct {
	since time.Time
	count int
}

// maxTrackedFailures bounds the distinct errors remembered in a streak.
const maxTrackedFailures = 32

// counters are the words whose number changes from one run to the next.
var counters = regexp.MustCompile(`(?i)\b(batch|run|epoch|seq|attempt|pid|restart)( #?)\d+\b`)

// normalizeFailure is the identity of an error's text across restarts.
func normalizeFailure(msg string) string {
	return counters.ReplaceAllString(msg, "${1}${2}N")
}

// reset forgets the errors seen: the session made progress, and an error
// seen again after it is news.
func (l *failureLog) reset() { l.seen = nil }

// line is the line reporting a stop: msg is the error, starting tells a
// start that failed from a run that stopped, streak and wait are the
// restart policy's decision.
func (l *failureLog) line(now time.Time, msg string, starting bool, streak int, wait time.Duration) string {
	key := normalizeFailure(msg)
	if r := l.seen[key]; r != nil {
		r.count++
		return fmt.Sprintf("walshadow session still failing: %s (%d times since %s; next restart in %s)",
			msg, r.count, clock(r.since, now), wait)
	}
	if l.seen == nil || len(l.seen) >= maxTrackedFailures {
		l.seen = map[string]*recurrence{}
	}
	l.seen[key] = &recurrence{since: now, count: 1}
	var b strings.Builder
	if starting {
		fmt.Fprintf(&b, "walshadow session could not start: %s; retrying in %s", msg, wait)
	} else {
		fmt.Fprintf(&b, "walshadow session stopped: %s; restarting it in %s", msg, wait)
	}
	if streak > 1 {
		fmt.Fprintf(&b, " (%d stops in a row without progress)", streak)
	}
	return b.String()
}

// clock is t as a time of day, with the date when it is not today's.
func clock(t, now time.Time) string {
	if y, m, d := t.Date(); y == now.Year() && m == now.Month() && d == now.Day() {
		return t.Format("15:04:05")
	}
	return t.Format("2006-01-02 15:04:05")
}
