package processor

import (
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/walshadow/walshadow/internal/decode"
)

// decodeMetrics are the processor's walshadow_decode_* series (nil-safe, as
// benthos' metric types are).
type decodeMetrics struct {
	rows, events                     *service.MetricCounter
	transactions, failures           *service.MetricCounter
	bridgeValues, boundaryWait       *service.MetricCounter
	skipped, toastValues, toastOmits *service.MetricCounter
}

func newDecodeMetrics(m *service.Metrics) *decodeMetrics {
	if m == nil {
		return &decodeMetrics{}
	}
	return &decodeMetrics{
		rows:         m.NewCounter("walshadow_decode_rows_total", "operation"),
		events:       m.NewCounter("walshadow_decode_schema_events_total", "event"),
		transactions: m.NewCounter("walshadow_decode_transactions_total"),
		failures:     m.NewCounter("walshadow_decode_failures_total"),
		bridgeValues: m.NewCounter("walshadow_decode_bridge_values_total"),
		boundaryWait: m.NewCounter("walshadow_decode_boundary_wait_nanoseconds_total"),
		skipped:      m.NewCounter("walshadow_decode_skipped_records_total", "reason"),
		toastValues:  m.NewCounter("walshadow_decode_toast_values_total"),
		toastOmits:   m.NewCounter("walshadow_decode_toast_unchanged_omitted_total"),
	}
}

// observeTx adds a finished transaction's decoder counters.
func (m *decodeMetrics) observeTx(s decode.TxStats) {
	for _, c := range []struct {
		reason string
		n      int64
	}{
		{"foreign_db", s.SkippedForeignDb}, {"not_covered", s.SkippedNotCovered},
		{"retired", s.SkippedRetired}, {"dropped", s.SkippedDropped}, {"relkind", s.SkippedKind},
		{"speculative_dropped", s.SpeculativeDropped}, {"after_failure", s.DroppedAfterFailure},
	} {
		if c.n > 0 {
			m.skipped.Incr(c.n, c.reason)
		}
	}
	if s.ToastValues > 0 {
		m.toastValues.Incr(s.ToastValues)
	}
	if s.ToastOmitted > 0 {
		m.toastOmits.Incr(s.ToastOmitted)
	}
}
