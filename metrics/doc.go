// Package metrics adds a Prometheus metrics exporter to benthos, which as
// built here only offers json_api, logger and none.
//
// Importing the package (the walshadow binary does) registers the exporter
// as `prometheus` in benthos' global environment; RegisterPrometheus adds it
// to another environment. To enable it, enable benthos' HTTP server and
// select the exporter:
//
//	http:
//	  enabled: true
//	  address: 0.0.0.0:4195
//	metrics:
//	  prometheus: {}
//
// and scrape http://<address>/metrics. Besides benthos' own series
// (input_received, output_sent, ...) and walshadow's walshadow_* series,
// the endpoint serves the Go runtime's go_* and the process' process_*
// metrics unless add_go_metrics / add_process_metrics are false. Names are
// kept as given, invalid characters replaced by '_'. Timers such as
// walshadow_clickhouse_insert_latency_ns are summaries in nanoseconds, or,
// with use_histogram_timing, histograms in seconds (buckets from
// histogram_buckets), as in Redpanda Connect. A Grafana dashboard for these
// series is resources/grafana/walshadow.json.
package metrics
