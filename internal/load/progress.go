package load

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Progress counts one load. Add is safe for concurrent use by the load's
// workers; Snapshot and Done may be called from any goroutine.
type Progress struct {
	estRows, estBytes int64
	start             time.Time
	rows, bytes       atomic.Int64

	mu     sync.Mutex
	done   bool
	doneAt time.Time
}

// NewProgress starts counting a load begun at start. The estimates (from
// the catalogue's reltuples and relpages, say) may be 0: unknown.
func NewProgress(estRows, estBytes int64, start time.Time) *Progress {
	return &Progress{estRows: max(estRows, 0), estBytes: max(estBytes, 0), start: start}
}

// Add counts rows and bytes loaded.
func (p *Progress) Add(rows, bytes int64) {
	p.rows.Add(rows)
	p.bytes.Add(bytes)
}

// Done marks the load finished at now: the fraction becomes 1 and the
// elapsed time and rates stop at now. Only the first call counts.
func (p *Progress) Done(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.done {
		p.done, p.doneAt = true, now
	}
}

// ProgressSnapshot is a load's progress at one moment.
type ProgressSnapshot struct {
	Rows, Bytes, EstRows, EstBytes int64
	// Fraction is the share done, 0..1: by bytes when EstBytes is known,
	// else by rows when EstRows is; 0 when neither is. Estimates are
	// approximate, so it is capped at 0.99 until Done.
	Fraction                float64
	RowsPerSec, BytesPerSec float64
	ETA                     time.Duration // time left; -1 unknown, 0 once done
	Elapsed                 time.Duration
	Done                    bool
}

// Snapshot is the progress at now.
func (p *Progress) Snapshot(now time.Time) ProgressSnapshot {
	p.mu.Lock()
	done, end := p.done, now
	if done {
		end = p.doneAt
	}
	p.mu.Unlock()
	s := ProgressSnapshot{
		Rows: p.rows.Load(), Bytes: p.bytes.Load(), EstRows: p.estRows, EstBytes: p.estBytes,
		Elapsed: max(end.Sub(p.start), 0), ETA: -1, Done: done,
	}
	if secs := s.Elapsed.Seconds(); secs > 0 {
		s.RowsPerSec, s.BytesPerSec = float64(s.Rows)/secs, float64(s.Bytes)/secs
	}
	raw := -1.0
	switch {
	case s.EstBytes > 0:
		raw = float64(s.Bytes) / float64(s.EstBytes)
	case s.EstRows > 0:
		raw = float64(s.Rows) / float64(s.EstRows)
	}
	switch {
	case done:
		s.Fraction, s.ETA = 1, 0
	case raw < 0:
		// No estimate: neither a fraction nor an ETA.
	default:
		s.Fraction = min(raw, 0.99)
		// Past the estimate, what is left is unknown.
		if raw > 0 && raw < 1 && s.Elapsed > 0 {
			s.ETA = time.Duration(float64(s.Elapsed) * (1 - raw) / raw)
		}
	}
	return s
}

// String renders the snapshot for a log line or a status page, e.g.
// "42% (1,234,567 rows, 230 MB of 548 MB, 12.3 MB/s, 98k rows/s, ETA 26s)";
// without estimates "1,234,567 rows, 230 MB, 12.3 MB/s, 98k rows/s, ETA
// unknown"; once done "100% (…, took 1m05s)".
func (s ProgressSnapshot) String() string {
	var b strings.Builder
	b.WriteString(groupThousands(s.Rows))
	if s.EstBytes == 0 && s.EstRows > 0 {
		b.WriteString(" of " + groupThousands(s.EstRows))
	}
	b.WriteString(" rows, " + formatBytes(float64(s.Bytes)))
	if s.EstBytes > 0 {
		b.WriteString(" of " + formatBytes(float64(s.EstBytes)))
	}
	b.WriteString(", " + formatBytes(s.BytesPerSec) + "/s, " + formatCount(s.RowsPerSec) + " rows/s, ")
	switch {
	case s.Done:
		b.WriteString("took " + formatDuration(s.Elapsed))
	case s.ETA < 0:
		b.WriteString("ETA unknown")
	default:
		b.WriteString("ETA " + formatDuration(s.ETA))
	}
	if !s.Done && s.EstBytes == 0 && s.EstRows == 0 {
		return b.String()
	}
	return fmt.Sprintf("%.0f%% (%s)", s.Fraction*100, b.String())
}

// groupThousands renders n with commas: 1,234,567.
func groupThousands(n int64) string {
	digits := strconv.FormatInt(n, 10)
	sign := ""
	if n < 0 {
		sign, digits = "-", digits[1:]
	}
	var b strings.Builder
	for i, d := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(d)
	}
	return sign + b.String()
}

// formatBytes renders a byte count in SI units: "512 B", "12.3 MB", "230 MB".
func formatBytes(v float64) string {
	if v < 999.5 {
		return fmt.Sprintf("%.0f B", v)
	}
	return scaled(v/1000, []string{" kB", " MB", " GB", " TB", " PB", " EB"}, 100)
}

// formatCount renders a rate compactly: "2.5", "850", "1.5k", "98k", "2.3M".
func formatCount(v float64) string {
	if v < 9.95 {
		return fmt.Sprintf("%.1f", v)
	}
	if v < 999.5 {
		return fmt.Sprintf("%.0f", v)
	}
	return scaled(v/1000, []string{"k", "M", "G", "T"}, 10)
}

// scaled renders v (already divided by 1000 once) in the first unit it
// stays below 1000 in, with one decimal below decimalsBelow.
func scaled(v float64, units []string, decimalsBelow float64) string {
	i := 0
	for ; v >= 999.5 && i < len(units)-1; i++ {
		v /= 1000
	}
	if v < decimalsBelow-0.05 {
		return fmt.Sprintf("%.1f%s", v, units[i])
	}
	return fmt.Sprintf("%.0f%s", v, units[i])
}

// formatDuration renders d to the second: "26s", "4m10s", "2h03m".
func formatDuration(d time.Duration) string {
	secs := int64(d.Round(time.Second) / time.Second)
	switch {
	case secs < 60:
		return fmt.Sprintf("%ds", secs)
	case secs < 3600:
		return fmt.Sprintf("%dm%02ds", secs/60, secs%60)
	default:
		return fmt.Sprintf("%dh%02dm", secs/3600, secs%3600/60)
	}
}
