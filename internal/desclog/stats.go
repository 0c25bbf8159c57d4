package desclog

import (
	"sync/atomic"
	"time"
)

// stats are updated lock-free; Stats() copies them out.
type stats struct {
	lookups     [numResults]paddedCounter
	appends     atomic.Uint64
	appendNanos atomic.Uint64
	seeded      atomic.Uint64
	tornRepairs atomic.Uint64
	compactions atomic.Uint64
	gcDropped   atomic.Uint64
	batches     atomic.Int64
	entries     atomic.Int64
	superseded  atomic.Int64
	tailBytes   atomic.Int64
}

// paddedCounter keeps each lookup counter on its own cache line: decode
// workers on several cores bump different results.
type paddedCounter struct {
	atomic.Uint64
	_ [56]byte
}

// Stats are the log's counters and gauges; the processor exports them
// under the metric names given per field.
type Stats struct {
	// Lookups counts answers by Result: walshadow_desc_lookups_total{result}.
	Lookups [numResults]uint64
	// Appends and AppendTime: walshadow_desc_log_appends_total and
	// walshadow_desc_log_append_seconds_total (encode, write, fdatasync,
	// publish).
	Appends    uint64
	AppendTime time.Duration
	// SeededEntries: walshadow_desc_log_seeded_entries_total.
	SeededEntries uint64
	// TornRepairs: walshadow_desc_log_torn_repairs_total (torn final tail
	// frames truncated at open).
	TornRepairs uint64
	// Compactions and GCDroppedEntries: walshadow_desc_log_gc_total and
	// walshadow_desc_log_gc_dropped_entries_total.
	Compactions      uint64
	GCDroppedEntries uint64
	// Gauges: walshadow_desc_log_batches, walshadow_desc_log_entries,
	// walshadow_desc_log_droppable_entries (an estimate: entries superseded
	// in their chain, plus tombstones) and walshadow_desc_log_tail_bytes.
	Batches, Entries, DroppableEntries, TailBytes int64
}

// Stats returns a copy of the counters.
func (l *Log) Stats() Stats {
	var s Stats
	for i := range s.Lookups {
		s.Lookups[i] = l.stats.lookups[i].Load()
	}
	s.Appends = l.stats.appends.Load()
	s.AppendTime = time.Duration(l.stats.appendNanos.Load())
	s.SeededEntries = l.stats.seeded.Load()
	s.TornRepairs = l.stats.tornRepairs.Load()
	s.Compactions = l.stats.compactions.Load()
	s.GCDroppedEntries = l.stats.gcDropped.Load()
	s.Batches = l.stats.batches.Load()
	s.Entries = l.stats.entries.Load()
	s.DroppableEntries = l.stats.superseded.Load()
	s.TailBytes = l.stats.tailBytes.Load()
	return s
}
