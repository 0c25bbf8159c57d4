package session

import (
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/walshadow/walshadow/internal/wal"
)

// sessionMetrics are the walshadow_* series a session exports. Every
// method is nil-safe, as benthos' metric types are.
type sessionMetrics struct {
	receivedLSN, publishedLSN, shadowReplayLSN, resumeLSN *service.MetricGauge
	records                                               *service.MetricCounter
	holds, holdSeconds, shadowRestarts                    *service.MetricCounter
	applyLagBytes                                         *service.MetricGauge
	// Lag behind the source's WAL end: of the shadow's replay, and of
	// delivery (acknowledged by the output: durable in ClickHouse).
	shadowLagBytes, shadowLagSeconds     *service.MetricGauge
	deliveryLagBytes, deliveryLagSeconds *service.MetricGauge
	// The transaction buffer and the reorderer.
	xactMemory, xactSpilled, xactOpen      *service.MetricGauge
	xactSpills, xactCommitted, xactAborted *service.MetricCounter
	xactOtherDB, xactSkippedDelivered      *service.MetricCounter
	lastXact                               xactSnapshot

	// The spool: its size, and how far the pump reads behind its end.
	spoolBytes, spoolSegments, spoolReaderLag, spoolFull *service.MetricGauge

	last         PumpStats
	lastRestarts int64
}

func newSessionMetrics(m *service.Metrics) *sessionMetrics {
	if m == nil {
		return &sessionMetrics{}
	}
	return &sessionMetrics{
		receivedLSN:     m.NewGauge("walshadow_source_received_lsn"),
		publishedLSN:    m.NewGauge("walshadow_published_lsn"),
		shadowReplayLSN: m.NewGauge("walshadow_shadow_replay_lsn"),
		resumeLSN:       m.NewGauge("walshadow_resume_lsn"),
		applyLagBytes:   m.NewGauge("walshadow_shadow_apply_lag_bytes"),
		records:         m.NewCounter("walshadow_filter_records_total", "route"),
		holds:           m.NewCounter("walshadow_catalog_boundary_holds_total"),
		holdSeconds:     m.NewCounter("walshadow_catalog_boundary_hold_seconds_total"),
		shadowRestarts:  m.NewCounter("walshadow_shadow_restarts_total"),

		shadowLagBytes:     m.NewGauge("walshadow_shadow_lag_bytes"),
		shadowLagSeconds:   m.NewGauge("walshadow_shadow_lag_seconds"),
		deliveryLagBytes:   m.NewGauge("walshadow_delivery_lag_bytes"),
		deliveryLagSeconds: m.NewGauge("walshadow_delivery_lag_seconds"),

		xactMemory:           m.NewGauge("walshadow_xact_buffer_memory_bytes"),
		xactSpilled:          m.NewGauge("walshadow_xact_buffer_spilled_bytes"),
		xactOpen:             m.NewGauge("walshadow_xact_open_transactions"),
		xactSpills:           m.NewCounter("walshadow_xact_spills_total"),
		xactCommitted:        m.NewCounter("walshadow_xact_committed_total"),
		xactAborted:          m.NewCounter("walshadow_xact_aborted_total"),
		xactOtherDB:          m.NewCounter("walshadow_xact_other_database_records_total"),
		xactSkippedDelivered: m.NewCounter("walshadow_xact_skipped_delivered_total"),

		spoolBytes:     m.NewGauge("walshadow_spool_bytes"),
		spoolSegments:  m.NewGauge("walshadow_spool_segments"),
		spoolReaderLag: m.NewGauge("walshadow_spool_reader_lag_bytes", "reader"),
		spoolFull:      m.NewGauge("walshadow_spool_full"),
	}
}

// xactSnapshot is what the reorderer and its buffer reported last.
type xactSnapshot struct {
	memory, spilled, spills int64
	open                    int
	reorder                 reorderStats
}

// observeXact publishes the transaction buffer's state (gauges) and the
// reorderer's counters as deltas since the last call.
func (sm *sessionMetrics) observeXact(now xactSnapshot) {
	if sm.xactMemory == nil {
		sm.lastXact = now
		return
	}
	sm.xactMemory.Set(now.memory)
	sm.xactSpilled.Set(now.spilled)
	sm.xactOpen.Set(int64(now.open))
	last := sm.lastXact
	if now.reorder.Committed < last.reorder.Committed || now.spills < last.spills {
		last = xactSnapshot{} // a new run: its reorderer counts from zero
	}
	sm.xactSpills.Incr(now.spills - last.spills)
	sm.xactCommitted.Incr(now.reorder.Committed - last.reorder.Committed)
	sm.xactAborted.Incr(now.reorder.Aborted - last.reorder.Aborted)
	sm.xactOtherDB.Incr(now.reorder.OtherDB - last.reorder.OtherDB)
	sm.xactSkippedDelivered.Incr(now.reorder.Skipped - last.reorder.Skipped)
	sm.lastXact = now
}

// observe publishes the pump's counters as deltas since the last call.
func (sm *sessionMetrics) observe(st PumpStats, received, published, shadowApply wal.LSN) {
	if sm.records == nil {
		sm.last = st
		return
	}
	sm.records.Incr(st.NoopRecords-sm.last.NoopRecords, "user")
	sm.records.Incr((st.Records-st.NoopRecords)-(sm.last.Records-sm.last.NoopRecords), "shadow")
	sm.holds.Incr(st.Holds - sm.last.Holds)
	// Whole seconds of the running total, so short holds are not rounded away.
	sm.holdSeconds.Incr(int64(st.HoldTime/time.Second) - int64(sm.last.HoldTime/time.Second))
	sm.receivedLSN.Set(int64(received)) // the spool's end: what the source sent
	sm.publishedLSN.Set(int64(published))
	sm.shadowReplayLSN.Set(int64(shadowApply))
	if published >= shadowApply && shadowApply != 0 {
		sm.applyLagBytes.Set(int64(published - shadowApply))
	}
	sm.last = st
}

// observeLag publishes the shadow's lag behind the source.
func (sm *sessionMetrics) observeLag(bytes int64, seconds float64) {
	sm.shadowLagBytes.Set(bytes)
	sm.shadowLagSeconds.SetFloat64(seconds)
}

// observeDeliveryLag publishes delivery's lag behind the source.
func (sm *sessionMetrics) observeDeliveryLag(bytes int64, seconds float64) {
	sm.deliveryLagBytes.Set(bytes)
	sm.deliveryLagSeconds.SetFloat64(seconds)
}

// observeSpool publishes the spool's size and the pump's lag behind its
// end (the pump is the spool's one reader: the shadow and the decoder are
// fed through it).
func (sm *sessionMetrics) observeSpool(bytes int64, segments int, pumpLag wal.LSN, full bool) {
	if sm.spoolBytes == nil {
		return
	}
	sm.spoolBytes.Set(bytes)
	sm.spoolSegments.Set(int64(segments))
	sm.spoolReaderLag.Set(int64(pumpLag), "pump")
	f := int64(0)
	if full {
		f = 1
	}
	sm.spoolFull.Set(f)
}
