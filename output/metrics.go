package output

import (
	"github.com/redpanda-data/benthos/v4/public/service"
)

// outputMetrics are the output's walshadow_clickhouse_* series (nil-safe,
// as benthos' metric types are).
type outputMetrics struct {
	rows, bytes            *service.MetricCounter // by table
	inserts, retries       *service.MetricCounter
	insertLatency          *service.MetricTimer
	ddlApplied, ddlRefused *service.MetricCounter // by kind
	toastLookups           *service.MetricCounter
	tableFailures          *service.MetricCounter // by table
	tableRefills           *service.MetricCounter // by table: rewrites refilled from the WAL instead of a reload
	superseded             *service.MetricCounter // replayed changes skipped
	lag                    *service.MetricGauge   // milliseconds, source commit → ClickHouse ack
	chRestarts             *service.MetricCounter // ClickHouse restarts seen (restart.go)
}

func newOutputMetrics(m *service.Metrics) *outputMetrics {
	if m == nil {
		return &outputMetrics{}
	}
	return &outputMetrics{
		rows:          m.NewCounter("walshadow_clickhouse_rows_written_total", "table"),
		bytes:         m.NewCounter("walshadow_clickhouse_bytes_written_total", "table"),
		inserts:       m.NewCounter("walshadow_clickhouse_inserts_total", "table"),
		retries:       m.NewCounter("walshadow_clickhouse_insert_retries_total"),
		insertLatency: m.NewTimer("walshadow_clickhouse_insert_latency_ns"),
		ddlApplied:    m.NewCounter("walshadow_clickhouse_ddl_applied_total", "kind"),
		ddlRefused:    m.NewCounter("walshadow_clickhouse_ddl_refused_total", "kind"),
		toastLookups:  m.NewCounter("walshadow_clickhouse_toast_lookups_total"),
		tableFailures: m.NewCounter("walshadow_table_failures_total", "table"),
		tableRefills:  m.NewCounter("walshadow_table_rewrite_refills_total", "table"),
		superseded:    m.NewCounter("walshadow_clickhouse_superseded_total"),
		lag:           m.NewGauge("walshadow_clickhouse_lag_milliseconds"),
		chRestarts:    m.NewCounter("walshadow_clickhouse_restarts_total"),
	}
}
