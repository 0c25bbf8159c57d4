package session

import (
	"time"

	"github.com/walshadow/walshadow/internal/wal"
)

// lagClock turns positions into lag: bytes behind the source's WAL end, and
// seconds since the source's WAL first passed the position (so an idle
// source shows no lag however far its WAL end moved long ago, and a
// consumer stuck behind a busy source shows how long it has been stuck).
// It keeps samples of the source's WAL end with the time they were seen,
// ascending; samples every consumer has passed are pruned. Pure: the
// caller passes the time.
type lagClock struct {
	samples []lagSample
	end     wal.LSN
}

type lagSample struct {
	lsn wal.LSN
	at  time.Time
}

// lagMaxSamples bounds memory; past it every other sample is dropped,
// halving the time resolution of old samples only.
const lagMaxSamples = 4096

// lagMinInterval spaces samples: seconds of lag need no finer grain.
const lagMinInterval = 100 * time.Millisecond

// observe records the source's WAL end as seen at now.
func (c *lagClock) observe(end wal.LSN, now time.Time) {
	if end <= c.end {
		return
	}
	c.end = end
	if n := len(c.samples); n > 0 && now.Sub(c.samples[n-1].at) < lagMinInterval {
		c.samples[n-1].lsn = end // same moment: keep the first time, the newest end
		return
	}
	if len(c.samples) >= lagMaxSamples {
		kept := c.samples[:0]
		for i := 0; i < len(c.samples); i += 2 {
			kept = append(kept, c.samples[i])
		}
		c.samples = kept
	}
	c.samples = append(c.samples, lagSample{lsn: end, at: now})
}

// lag is how far pos is behind the source: bytes to the newest WAL end
// seen, and the time since the source first had WAL past pos.
func (c *lagClock) lag(pos wal.LSN, now time.Time) (bytes int64, seconds float64) {
	if pos >= c.end {
		return 0, 0
	}
	bytes = int64(c.end - pos)
	for _, s := range c.samples {
		if s.lsn > pos {
			return bytes, max(now.Sub(s.at).Seconds(), 0)
		}
	}
	return bytes, 0
}

// prune drops samples every consumer has passed, keeping the newest one
// at or below pos (it dates the stretch that begins there).
func (c *lagClock) prune(pos wal.LSN) {
	i := 0
	for i+1 < len(c.samples) && c.samples[i+1].lsn <= pos {
		i++
	}
	if i > 0 {
		c.samples = append(c.samples[:0], c.samples[i:]...)
	}
}
