package filter

import "github.com/walshadow/walshadow/internal/wal"

// Counter counts records and their bytes (xl_tot_len).
type Counter struct {
	Records, Bytes uint64
}

func (c *Counter) add(n uint32) {
	c.Records++
	c.Bytes += uint64(n)
}

// Stats are the filter's counters, for walshadow_* metrics.
type Stats struct {
	// ByRmgr counts records per route and resource manager id.
	ByRmgr [numRoutes][256]Counter
	// ByClass counts records per class (index: Class).
	ByClass [numClasses]Counter

	Deferred           uint64 // user records flagged DeferCatalogDecode
	Boundaries         uint64
	CaptureAll         uint64 // boundaries with CaptureAll
	Aborts             uint64 // abort records (top-level, subxact, prepared)
	AbortedXIDs        uint64
	PgClassRows        uint64 // pg_class rows read
	PgClassUndecodable uint64 // pg_class writes whose row could not be read from the record
	TrackedRelMap      uint64 // catalog files learned from RELMAP_UPDATE
	TrackedPgClass     uint64 // ... from pg_class rows
	TrackedRewrite     uint64 // ... from storage created by catalog-rewriting transactions
	PrunedXIDs         uint64 // xid states dropped at RUNNING_XACTS
}

// Route returns the totals of one route over all resource managers.
func (s *Stats) Route(r Route) Counter {
	var c Counter
	if int(r) >= numRoutes {
		return c
	}
	for _, x := range s.ByRmgr[r] {
		c.Records += x.Records
		c.Bytes += x.Bytes
	}
	return c
}

// Rmgr returns one resource manager's counts on a route.
func (s *Stats) Rmgr(r Route, id wal.RmgrID) Counter {
	if int(r) >= numRoutes {
		return Counter{}
	}
	return s.ByRmgr[r][id]
}

func (s *Stats) count(rec *wal.Record, d *Decision) {
	n := rec.Header.TotLen
	s.ByRmgr[d.Route][rec.Header.RmID].add(n)
	if int(d.Class) < numClasses {
		s.ByClass[d.Class].add(n)
	}
	if d.DeferCatalogDecode {
		s.Deferred++
	}
}
