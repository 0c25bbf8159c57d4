package load

import (
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC)

func TestProgressByBytes(t *testing.T) {
	p := NewProgress(2_939_000, 548_000_000, t0)
	p.Add(1_234_567, 230_000_000)
	s := p.Snapshot(t0.Add(20 * time.Second))
	if s.Rows != 1_234_567 || s.Bytes != 230_000_000 || s.Elapsed != 20*time.Second || s.Done {
		t.Fatalf("snapshot %+v", s)
	}
	if want := 230.0 / 548; abs(s.Fraction-want) > 1e-9 {
		t.Fatalf("fraction %v, want %v (by bytes)", s.Fraction, want)
	}
	// 230 of 548 MB in 20 s: 318 MB left at 11.5 MB/s, 27.652173913 s.
	if want := time.Duration(27652173913); absDur(s.ETA-want) > time.Millisecond {
		t.Fatalf("ETA %v, want %v", s.ETA, want)
	}
	if s.BytesPerSec != 11_500_000 || abs(s.RowsPerSec-61_728.35) > 0.01 {
		t.Fatalf("rates %v B/s %v rows/s", s.BytesPerSec, s.RowsPerSec)
	}
	if got, want := s.String(), "42% (1,234,567 rows, 230 MB of 548 MB, 11.5 MB/s, 62k rows/s, ETA 28s)"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
}

func TestProgressByRowsWhenBytesUnknown(t *testing.T) {
	p := NewProgress(1000, 0, t0)
	p.Add(250, 4_000_000)
	s := p.Snapshot(t0.Add(10 * time.Second))
	if s.Fraction != 0.25 || s.ETA != 30*time.Second {
		t.Fatalf("fraction %v ETA %v, want 0.25 and 30s", s.Fraction, s.ETA)
	}
	if got, want := s.String(), "25% (250 of 1,000 rows, 4.0 MB, 400 kB/s, 25 rows/s, ETA 30s)"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
}

func TestProgressUnknownEstimates(t *testing.T) {
	p := NewProgress(0, 0, t0)
	if s := p.Snapshot(t0); s.Fraction != 0 || s.ETA != -1 || s.RowsPerSec != 0 {
		t.Fatalf("empty snapshot at start %+v", s)
	}
	p.Add(98_300, 12_300_000)
	s := p.Snapshot(t0.Add(time.Second))
	if s.Fraction != 0 || s.ETA != -1 {
		t.Fatalf("fraction %v ETA %v without estimates, want 0 and -1", s.Fraction, s.ETA)
	}
	if got, want := s.String(), "98,300 rows, 12.3 MB, 12.3 MB/s, 98k rows/s, ETA unknown"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
}

func TestProgressCapsUntilDone(t *testing.T) {
	p := NewProgress(100, 1000, t0)
	p.Add(150, 1500) // the estimate was low
	s := p.Snapshot(t0.Add(time.Minute))
	if s.Fraction != 0.99 || s.ETA != -1 {
		t.Fatalf("past the estimate: fraction %v ETA %v, want 0.99 and unknown", s.Fraction, s.ETA)
	}
	p.Add(0, 0)
	if s := p.Snapshot(t0.Add(time.Minute)); s.String() != "99% (150 rows, 1.5 kB of 1.0 kB, 25 B/s, 2.5 rows/s, ETA unknown)" {
		t.Fatalf("String() = %q", s.String())
	}
	p.Done(t0.Add(65 * time.Second))
	p.Done(t0.Add(time.Hour)) // only the first counts
	s = p.Snapshot(t0.Add(2 * time.Hour))
	if !s.Done || s.Fraction != 1 || s.ETA != 0 || s.Elapsed != 65*time.Second {
		t.Fatalf("done: %+v", s)
	}
	if got, want := s.String(), "100% (150 rows, 1.5 kB of 1.0 kB, 23 B/s, 2.3 rows/s, took 1m05s)"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
}

func TestProgressConcurrentAdd(t *testing.T) {
	p := NewProgress(0, 0, t0)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				p.Add(1, 100)
				_ = p.Snapshot(t0.Add(time.Second))
			}
		})
	}
	wg.Wait()
	if s := p.Snapshot(t0.Add(time.Second)); s.Rows != 8000 || s.Bytes != 800_000 {
		t.Fatalf("after concurrent adds %d rows %d bytes, want 8000 and 800000", s.Rows, s.Bytes)
	}
}

func TestProgressFormatting(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{groupThousands(0), "0"}, {groupThousands(999), "999"}, {groupThousands(1000), "1,000"},
		{groupThousands(-1234567), "-1,234,567"},
		{formatBytes(0), "0 B"}, {formatBytes(999), "999 B"}, {formatBytes(999.6), "1.0 kB"},
		{formatBytes(99_960_000), "100 MB"}, {formatBytes(999_600_000), "1.0 GB"}, {formatBytes(2.5e15), "2.5 PB"},
		{formatCount(0.4), "0.4"}, {formatCount(850.2), "850"}, {formatCount(1500), "1.5k"}, {formatCount(9_960), "10k"}, {formatCount(2_300_000), "2.3M"},
		{formatDuration(400 * time.Millisecond), "0s"}, {formatDuration(59 * time.Second), "59s"},
		{formatDuration(250 * time.Second), "4m10s"}, {formatDuration(2*time.Hour + 3*time.Minute + 59*time.Second), "2h03m"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func abs(f float64) float64 { return max(f, -f) }

func absDur(d time.Duration) time.Duration { return max(d, -d) }
