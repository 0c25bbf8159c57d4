package metrics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	_ "github.com/redpanda-data/benthos/v4/public/components/io"
	_ "github.com/redpanda-data/benthos/v4/public/components/pure"
)

func newTestExporter(t *testing.T, opts PrometheusOptions) *PrometheusExporter {
	t.Helper()
	e, err := NewPrometheusExporter(opts, nil)
	if err != nil {
		t.Fatalf("NewPrometheusExporter(%+v): %v", opts, err)
	}
	return e
}

// scrape renders the exporter's handler as a scraper would see it.
func scrape(t *testing.T, e *PrometheusExporter) string {
	t.Helper()
	rec := httptest.NewRecorder()
	e.HandlerFunc()(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: status %d: %s", rec.Code, rec.Body.String())
	}
	return rec.Body.String()
}

// sampleValue returns the value of the exposition line whose series (name
// and labels, as rendered) is exactly series.
func sampleValue(t *testing.T, body, series string) float64 {
	t.Helper()
	for line := range strings.SplitSeq(body, "\n") {
		rest, ok := strings.CutPrefix(line, series+" ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		if err != nil {
			t.Fatalf("series %s: value %q: %v", series, rest, err)
		}
		return v
	}
	t.Fatalf("series %s not in the exposition:\n%s", series, body)
	return 0
}

func TestPrometheusRendersCounterGaugeTimerWithLabels(t *testing.T) {
	e := newTestExporter(t, PrometheusOptions{})

	e.NewCounterCtor("walshadow_rows_total", "table")("public.t").Incr(3)
	counter := e.NewCounterCtor("walshadow_rows_total", "table")("public.t").(interface{ IncrFloat64(float64) })
	counter.IncrFloat64(0.5)
	e.NewCounterCtor("walshadow_rows_total", "table")("public.u").Incr(7)

	gauge := e.NewGaugeCtor("walshadow_lag_seconds", "stage")("shadow")
	gauge.Set(4)
	gauge.(interface{ SetFloat64(float64) }).SetFloat64(2.25)

	timer := e.NewTimerCtor("walshadow_insert_latency_ns", "table")
	timer("public.t").Timing(1000)
	timer("public.t").Timing(3000)

	body := scrape(t, e)
	if got := sampleValue(t, body, `walshadow_rows_total{table="public.t"}`); got != 3.5 {
		t.Errorf("walshadow_rows_total{table=public.t} = %v, want 3.5", got)
	}
	if got := sampleValue(t, body, `walshadow_rows_total{table="public.u"}`); got != 7 {
		t.Errorf("walshadow_rows_total{table=public.u} = %v, want 7", got)
	}
	if !strings.Contains(body, "# TYPE walshadow_rows_total counter") {
		t.Errorf("walshadow_rows_total is not typed a counter:\n%s", body)
	}
	if got := sampleValue(t, body, `walshadow_lag_seconds{stage="shadow"}`); got != 2.25 {
		t.Errorf("walshadow_lag_seconds = %v, want 2.25 (floats must not be truncated)", got)
	}
	if !strings.Contains(body, "# TYPE walshadow_lag_seconds gauge") {
		t.Errorf("walshadow_lag_seconds is not typed a gauge:\n%s", body)
	}
	// Summaries keep benthos' nanoseconds.
	if !strings.Contains(body, "# TYPE walshadow_insert_latency_ns summary") {
		t.Errorf("walshadow_insert_latency_ns is not typed a summary:\n%s", body)
	}
	if got := sampleValue(t, body, `walshadow_insert_latency_ns_sum{table="public.t"}`); got != 4000 {
		t.Errorf("walshadow_insert_latency_ns_sum = %v, want 4000 (nanoseconds)", got)
	}
	if got := sampleValue(t, body, `walshadow_insert_latency_ns_count{table="public.t"}`); got != 2 {
		t.Errorf("walshadow_insert_latency_ns_count = %v, want 2", got)
	}
	if got := sampleValue(t, body, `walshadow_insert_latency_ns{table="public.t",quantile="0.99"}`); got != 3000 {
		t.Errorf("walshadow_insert_latency_ns p99 = %v, want 3000", got)
	}
	// Neither collector was asked for.
	if strings.Contains(body, "go_goroutines") || strings.Contains(body, "process_") {
		t.Errorf("Go or process metrics exported although disabled:\n%s", body)
	}
}

func TestPrometheusHistogramTimingInSeconds(t *testing.T) {
	e := newTestExporter(t, PrometheusOptions{UseHistogramTiming: true, HistogramBuckets: []float64{0.001, 0.5}})
	timer := e.NewTimerCtor("walshadow_insert_latency_ns")()
	timer.Timing(int64(200 * time.Millisecond))
	timer.Timing(int64(2 * time.Second))

	body := scrape(t, e)
	if !strings.Contains(body, "# TYPE walshadow_insert_latency_ns histogram") {
		t.Fatalf("timer is not a histogram:\n%s", body)
	}
	if got := sampleValue(t, body, `walshadow_insert_latency_ns_bucket{le="0.001"}`); got != 0 {
		t.Errorf("bucket le=0.001 = %v, want 0", got)
	}
	if got := sampleValue(t, body, `walshadow_insert_latency_ns_bucket{le="0.5"}`); got != 1 {
		t.Errorf("bucket le=0.5 = %v, want 1 (200ms)", got)
	}
	if got := sampleValue(t, body, `walshadow_insert_latency_ns_sum`); got != 2.2 {
		t.Errorf("histogram sum = %v, want 2.2 seconds", got)
	}
}

func TestPrometheusRejectsInvalidBuckets(t *testing.T) {
	for _, buckets := range [][]float64{{1, 0.5}, {0, 1}, {-1}, {0.1, 0.1}} {
		if _, err := NewPrometheusExporter(PrometheusOptions{UseHistogramTiming: true, HistogramBuckets: buckets}, nil); err == nil {
			t.Errorf("buckets %v accepted", buckets)
		}
	}
}

func TestPrometheusRepeatedCtorsShareSeries(t *testing.T) {
	e := newTestExporter(t, PrometheusOptions{})
	// benthos asks for the metric anew for every component and update.
	for range 4 {
		e.NewCounterCtor("input_received", "label", "path")("gen", "root.input").Incr(1)
		e.NewGaugeCtor("walshadow_open", "label")("a").Set(9)
		e.NewTimerCtor("walshadow_wait_ns")().Timing(10)
	}
	body := scrape(t, e)
	if got := sampleValue(t, body, `input_received{label="gen",path="root.input"}`); got != 4 {
		t.Errorf("input_received = %v, want 4 from four ctor calls", got)
	}
	if got := sampleValue(t, body, `walshadow_open{label="a"}`); got != 9 {
		t.Errorf("walshadow_open = %v, want 9", got)
	}
	if got := sampleValue(t, body, `walshadow_wait_ns_count`); got != 4 {
		t.Errorf("walshadow_wait_ns_count = %v, want 4", got)
	}
	if n := strings.Count(body, "# TYPE input_received "); n != 1 {
		t.Errorf("input_received declared %d times, want once", n)
	}
}

func TestPrometheusConflictsDoNotPanic(t *testing.T) {
	e := newTestExporter(t, PrometheusOptions{})
	e.NewCounterCtor("walshadow_x_total", "table")("t").Incr(1)

	// Other label names under the same name: dropped, warned once.
	e.NewCounterCtor("walshadow_x_total", "kind")("k").Incr(100)
	e.NewCounterCtor("walshadow_x_total")().Incr(100)
	// The same name as another kind of metric.
	e.NewGaugeCtor("walshadow_x_total", "table")("t").Set(100)
	e.NewTimerCtor("walshadow_x_total", "table")("t").Timing(100)
	// Label values not matching the label names.
	e.NewCounterCtor("walshadow_x_total", "table")("t", "extra").Incr(100)
	e.NewCounterCtor("walshadow_x_total", "table")().Incr(100)
	// Label names Prometheus refuses: duplicates (also after sanitising) and reserved ones.
	e.NewCounterCtor("walshadow_dup_total", "a-b", "a_b")("1", "2").Incr(1)
	e.NewGaugeCtor("walshadow_reserved", "__name")("1").Set(1)
	// Counters cannot go down: a negative delta is skipped.
	e.NewCounterCtor("walshadow_x_total", "table")("t").Incr(-5)
	// Invalid UTF-8 in a label value is replaced rather than refused.
	e.NewCounterCtor("walshadow_x_total", "table")("bad\xff").Incr(2)

	body := scrape(t, e)
	if got := sampleValue(t, body, `walshadow_x_total{table="t"}`); got != 1 {
		t.Errorf("walshadow_x_total{table=t} = %v, want 1: a conflicting registration leaked into it", got)
	}
	if got := sampleValue(t, body, `walshadow_x_total{table="bad`+"\uFFFD"+`"}`); got != 2 {
		t.Errorf("walshadow_x_total{table=bad\\uFFFD} = %v, want 2", got)
	}
	if strings.Contains(body, "walshadow_dup_total") || strings.Contains(body, "walshadow_reserved") {
		t.Errorf("metrics with invalid label names were exported:\n%s", body)
	}
	if strings.Contains(body, `kind="k"`) {
		t.Errorf("the conflicting label set was exported:\n%s", body)
	}
	if !e.rejected["walshadow_x_total"] {
		t.Errorf("the conflict on walshadow_x_total was not recorded as warned")
	}
}

func TestSanitizeName(t *testing.T) {
	for in, want := range map[string]string{
		"walshadow_rows_total":  "walshadow_rows_total",
		"input.received":        "input_received",
		"a:b_c9":                "a:b_c9",
		"9lives":                "_lives",
		"résumé-lsn":            "r_sum__lsn",
		"":                      "_",
		"processor-latency ns.": "processor_latency_ns_",
	} {
		if got := SanitizeName(in); got != want {
			t.Errorf("SanitizeName(%q) = %q, want %q", in, got, want)
		}
	}
	if got := sanitizeLabels([]string{"a:b", "ok", "1x"}); strings.Join(got, ",") != "a_b,ok,_x" {
		t.Errorf("sanitizeLabels = %q, want [a_b ok _x] (no colons in label names)", got)
	}

	e := newTestExporter(t, PrometheusOptions{})
	e.NewCounterCtor("walshadow.dotted.total", "the-label")("v").Incr(1)
	if got := sampleValue(t, scrape(t, e), `walshadow_dotted_total{the_label="v"}`); got != 1 {
		t.Errorf("sanitized counter = %v, want 1", got)
	}
}

func TestPrometheusGoAndProcessCollectors(t *testing.T) {
	body := scrape(t, newTestExporter(t, PrometheusOptions{AddGoMetrics: true, AddProcessMetrics: true}))
	for _, name := range []string{"go_goroutines", "go_memstats_alloc_bytes", "process_resident_memory_bytes"} {
		if !regexp.MustCompile(`(?m)^` + name + ` `).MatchString(body) {
			t.Errorf("%s missing from the exposition", name)
		}
	}
}

// freeAddr returns a loopback address nothing listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatalf("closing %s: %v", addr, err)
	}
	return addr
}

const testProcessorName = "walshadow_prometheus_test_counter"

// registerCountingProcessor adds to env a processor that counts messages in
// walshadow_test_messages_total{kind}, sets a float gauge, and holds the
// last of `hold` messages until release closes, so the stream, and with it
// the HTTP server, stays up while the test scrapes it.
func registerCountingProcessor(t *testing.T, env *service.Environment, hold int, release <-chan struct{}) {
	t.Helper()
	spec := service.NewConfigSpec().Field(service.NewStringField("kind"))
	err := env.RegisterProcessor(testProcessorName, spec, func(conf *service.ParsedConfig, res *service.Resources) (service.Processor, error) {
		kind, err := conf.FieldString("kind")
		if err != nil {
			return nil, err
		}
		m := res.Metrics()
		return &countingProcessor{
			kind:    kind,
			counter: m.NewCounter("walshadow_test_messages_total", "kind"),
			gauge:   m.NewGauge("walshadow_test_lag_seconds"),
			hold:    hold,
			release: release,
		}, nil
	})
	if err != nil {
		t.Fatalf("registering %s: %v", testProcessorName, err)
	}
}

type countingProcessor struct {
	kind    string
	counter *service.MetricCounter
	gauge   *service.MetricGauge
	seen    int
	hold    int
	release <-chan struct{}
}

func (p *countingProcessor) Process(ctx context.Context, msg *service.Message) (service.MessageBatch, error) {
	p.counter.Incr(1, p.kind)
	p.gauge.SetFloat64(1.5)
	if p.seen++; p.seen == p.hold {
		select {
		case <-p.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return service.MessageBatch{msg}, nil
}

func (p *countingProcessor) Close(context.Context) error { return nil }

func TestPrometheusExporterServesBenthosMetrics(t *testing.T) {
	env := service.NewEnvironment() // a clone: the test processor stays out of the global one
	release := make(chan struct{})
	registerCountingProcessor(t, env, 5, release)

	addr := freeAddr(t)
	builder := env.NewStreamBuilder()
	err := builder.SetYAML(fmt.Sprintf(`
http:
  enabled: true
  address: %s
metrics:
  prometheus: {}
input:
  generate:
    count: 5
    interval: ""
    mapping: root = "x"
pipeline:
  threads: 1 # one processor instance sees all five messages
  processors:
    - %s:
        kind: probe
output:
  drop: {}
logger:
  level: warn
`, addr, testProcessorName))
	if err != nil {
		t.Fatalf("SetYAML: %v", err)
	}
	stream, err := builder.Build()
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- stream.Run(ctx) }()
	released := false
	t.Cleanup(func() {
		if !released {
			close(release)
		}
		_ = stream.StopWithin(10 * time.Second)
	})

	// Scrape until all five messages went through the input and the
	// processor (the fifth one is held there).
	var body string
	deadline := time.Now().Add(30 * time.Second)
	for {
		body, err = httpGet(ctx, "http://"+addr+"/metrics")
		if err == nil && strings.Contains(body, `walshadow_test_messages_total{`) &&
			regexp.MustCompile(`(?m)^input_received\{[^}]*\} 5$`).MatchString(body) &&
			regexp.MustCompile(`(?m)^walshadow_test_messages_total\{[^}]*\} 5$`).MatchString(body) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no input_received 5 and walshadow_test_messages_total 5 at %s/metrics within 30s (last error %v):\n%s", addr, err, body)
		}
		time.Sleep(100 * time.Millisecond)
	}

	if !regexp.MustCompile(`(?m)^walshadow_test_messages_total\{[^}]*kind="probe"[^}]*\} 5$`).MatchString(body) {
		t.Errorf("walshadow_test_messages_total lacks the kind label:\n%s", grepLines(body, "walshadow_test"))
	}
	if !regexp.MustCompile(`(?m)^walshadow_test_lag_seconds(\{[^}]*\})? 1.5$`).MatchString(body) {
		t.Errorf("walshadow_test_lag_seconds is not 1.5:\n%s", grepLines(body, "walshadow_test"))
	}
	for _, name := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "process_cpu_seconds_total"} {
		if !regexp.MustCompile(`(?m)^` + name + ` `).MatchString(body) {
			t.Errorf("%s (default collectors) missing from /metrics", name)
		}
	}
	if !strings.Contains(body, "# TYPE input_received counter") {
		t.Errorf("input_received is not a counter:\n%s", grepLines(body, "input_received"))
	}

	close(release)
	released = true
	select {
	case err := <-runErr:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("stream run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("the stream did not finish after its five messages")
	}
}

func httpGet(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: status %d: %s", url, resp.StatusCode, b)
	}
	return string(b), nil
}

func grepLines(body, substr string) string {
	var out []string
	for line := range strings.SplitSeq(body, "\n") {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

func TestPrometheusConfigLints(t *testing.T) {
	schema := service.GlobalEnvironment().FullConfigSchema("test", "")
	linter := schema.NewStreamConfigLinter()

	valid := []string{
		"metrics:\n  prometheus: {}\n",
		"metrics:\n  prometheus:\n    add_go_metrics: false\n    add_process_metrics: false\n    use_histogram_timing: true\n    histogram_buckets: [0.01, 0.1, 1]\n",
	}
	for _, conf := range valid {
		lints, err := linter.LintYAML([]byte(conf))
		if err != nil {
			t.Fatalf("linting %q: %v", conf, err)
		}
		if len(lints) > 0 {
			t.Errorf("config %q: lints %v", conf, lints)
		}
		// What `walshadow run` does with it: parse and build the exporter.
		if err := service.GlobalEnvironment().NewStreamBuilder().SetYAML(conf + "input:\n  generate:\n    mapping: root = 1\noutput:\n  drop: {}\n"); err != nil {
			t.Errorf("SetYAML(%q): %v", conf, err)
		}
	}

	lints, err := linter.LintYAML([]byte("metrics:\n  prometheus:\n    no_such_field: 1\n"))
	if err != nil {
		t.Fatalf("linting an unknown field: %v", err)
	}
	if len(lints) == 0 {
		t.Errorf("an unknown prometheus field passed lint")
	}
}
