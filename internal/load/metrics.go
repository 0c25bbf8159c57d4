package load

import (
	"github.com/redpanda-data/benthos/v4/public/service"
)

// loadMetrics are the initial load's walshadow_load_* series.
type loadMetrics struct {
	rows, bytes *service.MetricCounter // by table
	failures    *service.MetricCounter // by table
	loads       *service.MetricCounter // by table: load attempts, each a copy from the source
	reloads     *service.MetricCounter // by reason: followed tables loaded again (ReloadReasons)
	published   *service.MetricCounter
	running     *service.MetricGauge
	percent     *service.MetricGauge // by table, 0..100
	eta         *service.MetricGauge // by table, seconds; -1 unknown
}

func newLoadMetrics(m *service.Metrics) *loadMetrics {
	if m == nil {
		return &loadMetrics{}
	}
	return &loadMetrics{
		rows:      m.NewCounter("walshadow_load_rows_total", "table"),
		bytes:     m.NewCounter("walshadow_load_bytes_total", "table"),
		failures:  m.NewCounter("walshadow_load_failures_total", "table"),
		loads:     m.NewCounter("walshadow_loads_total", "table"),
		reloads:   m.NewCounter("walshadow_table_reloads_total", "reason"),
		published: m.NewCounter("walshadow_load_published_total"),
		running:   m.NewGauge("walshadow_loads_running"),
		percent:   m.NewGauge("walshadow_load_percent", "table"),
		eta:       m.NewGauge("walshadow_load_eta_seconds", "table"),
	}
}

func (m *loadMetrics) observe(table string, s ProgressSnapshot) {
	m.percent.Set(int64(s.Fraction*100), table)
	eta := int64(-1)
	if s.ETA >= 0 {
		eta = int64(s.ETA.Seconds())
	}
	m.eta.Set(eta, table)
}
