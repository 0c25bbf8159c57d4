package clickhouse

import (
	"testing"
	"time"
)

func TestDeleteBefore(t *testing.T) {
	got := DeleteBefore(Target{Database: "db", Table: "public.t`x"}, 0x3000200)
	if want := "ALTER TABLE `db`.`public.t\\`x` DELETE WHERE `_lsn` < 50332160"; got != want {
		t.Errorf("DeleteBefore = %q, want %q", got, want)
	}
}

func TestTruncateBarrier(t *testing.T) {
	for cmd, want := range map[string]bool{
		"DELETE WHERE _lsn < 50332160":   true, // 18.16's and 23.8's form
		"DELETE WHERE `_lsn` < 50332160": true,
		"DELETE WHERE _lsn <= 5":         false,
		"DELETE WHERE abalance < 0":      false,
		"UPDATE _lsn = 0 WHERE 1":        false,
		"MODIFY COLUMN x Int64":          false,
	} {
		if got := (Mutation{Command: cmd}).TruncateBarrier(); got != want {
			t.Errorf("TruncateBarrier(%q) = %v, want %v", cmd, got, want)
		}
	}
}

// TestBootAfter: readings of one server overlap (whole-second uptime, the
// round trip) and tell no restart, however far apart; a server started
// after the last reading of the previous one is after it.
func TestBootAfter(t *testing.T) {
	base := time.Now()
	// read builds the window SELECT uptime() gives at base+at, answered
	// after rtt, for a server started at base+started.
	read := func(at, rtt, started time.Duration) Boot {
		sent := base.Add(at)
		up := (at + rtt/2 - started).Truncate(time.Second)
		return Boot{Earliest: sent.Add(-up - time.Second), Latest: sent.Add(rtt).Add(-up), Read: sent.Add(rtt)}
	}
	first := read(10*time.Second, time.Millisecond, 0)
	for _, tc := range []struct {
		name string
		b    Boot
		want bool
	}{
		{"a second later", read(11*time.Second, time.Millisecond, 0), false},
		{"a slow answer", read(11*time.Second+400*time.Millisecond, 900*time.Millisecond, 0), false},
		{"a day later", read(24*time.Hour, time.Millisecond, 0), false},
		{"a day later, the server's clock 50 ppm slow", func() Boot {
			b := read(24*time.Hour, time.Millisecond, 0)
			d := 24 * time.Hour / 20000
			return Boot{Earliest: b.Earliest.Add(d), Latest: b.Latest.Add(d), Read: b.Read}
		}(), false},
		{"restarted 2 s after the reading, up 1 s", read(13*time.Second, time.Millisecond, 12*time.Second), true},
		{"restarted an hour later", read(time.Hour+5*time.Second, time.Millisecond, time.Hour), true},
	} {
		if got := tc.b.After(first); got != tc.want {
			t.Errorf("%s: After = %v, want %v (first %v..%v, now %v..%v)", tc.name, got, tc.want,
				first.Earliest.Sub(base), first.Latest.Sub(base), tc.b.Earliest.Sub(base), tc.b.Latest.Sub(base))
		}
	}
}
