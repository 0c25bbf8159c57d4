package metrics

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redpanda-data/benthos/v4/public/service"
)

// ExporterName is the key of the exporter under `metrics:` in a config.
const ExporterName = "prometheus"

// Field names of the prometheus metrics exporter.
const (
	fieldAddProcessMetrics  = "add_process_metrics"
	fieldAddGoMetrics       = "add_go_metrics"
	fieldUseHistogramTiming = "use_histogram_timing"
	fieldHistogramBuckets   = "histogram_buckets"
)

// summaryObjectives are the quantiles (and their allowed error) of timers
// exported as summaries: those of Redpanda Connect's prometheus exporter.
var summaryObjectives = map[float64]float64{0.5: 0.05, 0.9: 0.01, 0.99: 0.001}

func init() {
	if err := RegisterPrometheus(service.GlobalEnvironment()); err != nil {
		panic(fmt.Sprintf("registering the %s metrics exporter: %v", ExporterName, err))
	}
}

// RegisterPrometheus registers the prometheus metrics exporter in env. The
// package's init registers it in benthos' global environment.
func RegisterPrometheus(env *service.Environment) error {
	return env.RegisterMetricsExporter(ExporterName, prometheusSpec(), newPrometheusExporterFromConfig)
}

func prometheusSpec() *service.ConfigSpec {
	return service.NewConfigSpec().
		Stable().
		Summary("Serves metrics in the Prometheus text format at the `/metrics` endpoint of the HTTP server.").
		Description("Metric and label names are kept as given, with characters Prometheus does not allow replaced by `_`. "+
			"Counters become counters and gauges gauges. Timers (nanoseconds) become summaries in nanoseconds with the 0.5, 0.9 and 0.99 quantiles "+
			"or, with `use_histogram_timing`, histograms in seconds, as in Redpanda Connect's prometheus exporter. "+
			"The endpoint is served on the address of the `http` section, which must be enabled.").
		Fields(
			service.NewBoolField(fieldAddProcessMetrics).
				Description("Also export the process' CPU, memory and file descriptor metrics (`process_*`).").
				Default(true),
			service.NewBoolField(fieldAddGoMetrics).
				Description("Also export the Go runtime's metrics (`go_*`).").
				Default(true),
			service.NewBoolField(fieldUseHistogramTiming).
				Description("Export timers as histograms, their observations converted from nanoseconds into seconds to fit the buckets, instead of summaries in nanoseconds.").
				Default(false).
				Advanced(),
			service.NewFloatListField(fieldHistogramBuckets).
				Description("Upper bounds, in seconds, of the histogram buckets of timers when `use_histogram_timing` is set. Empty means Prometheus' default buckets (5ms to 10s).").
				Default([]any{}).
				Advanced(),
		)
}

func newPrometheusExporterFromConfig(conf *service.ParsedConfig, log *service.Logger) (service.MetricsExporter, error) {
	var opts PrometheusOptions
	var err error
	if opts.AddProcessMetrics, err = conf.FieldBool(fieldAddProcessMetrics); err != nil {
		return nil, err
	}
	if opts.AddGoMetrics, err = conf.FieldBool(fieldAddGoMetrics); err != nil {
		return nil, err
	}
	if opts.UseHistogramTiming, err = conf.FieldBool(fieldUseHistogramTiming); err != nil {
		return nil, err
	}
	if opts.HistogramBuckets, err = conf.FieldFloatList(fieldHistogramBuckets); err != nil {
		return nil, err
	}
	return NewPrometheusExporter(opts, log)
}

// PrometheusOptions configure a PrometheusExporter; the fields mirror the
// exporter's config fields.
type PrometheusOptions struct {
	AddProcessMetrics  bool
	AddGoMetrics       bool
	UseHistogramTiming bool
	// HistogramBuckets are in seconds; empty means prometheus.DefBuckets.
	HistogramBuckets []float64
}

// PrometheusExporter is a benthos metrics exporter that keeps its metrics
// in its own Prometheus registry and serves them from HandlerFunc.
type PrometheusExporter struct {
	opts     PrometheusOptions
	log      *service.Logger
	registry *prometheus.Registry

	mu         sync.Mutex
	counters   map[string]*registeredVec[*prometheus.CounterVec]
	gauges     map[string]*registeredVec[*prometheus.GaugeVec]
	timers     map[string]*registeredVec[prometheus.ObserverVec]
	rejected   map[string]bool   // names already warned about
	registered map[string]string // name → kind of metric, across kinds
}

// registeredVec is a vector and the label names it was created with, which
// later registrations of the same name must repeat.
type registeredVec[V any] struct {
	vec    V
	labels []string
}

// NewPrometheusExporter returns an exporter with a fresh registry; log
// (which may be nil) receives warnings about metrics it cannot export.
func NewPrometheusExporter(opts PrometheusOptions, log *service.Logger) (*PrometheusExporter, error) {
	if slices.ContainsFunc(opts.HistogramBuckets, func(b float64) bool { return b <= 0 }) {
		return nil, fmt.Errorf("%s: every bucket must be positive, got %v", fieldHistogramBuckets, opts.HistogramBuckets)
	}
	// Prometheus panics on buckets not strictly increasing.
	for i := 1; i < len(opts.HistogramBuckets); i++ {
		if opts.HistogramBuckets[i] <= opts.HistogramBuckets[i-1] {
			return nil, fmt.Errorf("%s: buckets must be strictly increasing, got %v", fieldHistogramBuckets, opts.HistogramBuckets)
		}
	}
	e := &PrometheusExporter{
		opts:       opts,
		log:        log,
		registry:   prometheus.NewRegistry(),
		counters:   map[string]*registeredVec[*prometheus.CounterVec]{},
		gauges:     map[string]*registeredVec[*prometheus.GaugeVec]{},
		timers:     map[string]*registeredVec[prometheus.ObserverVec]{},
		rejected:   map[string]bool{},
		registered: map[string]string{},
	}
	if opts.AddProcessMetrics {
		if err := e.registry.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
			return nil, fmt.Errorf("registering the process collector: %w", err)
		}
	}
	if opts.AddGoMetrics {
		if err := e.registry.Register(collectors.NewGoCollector()); err != nil {
			return nil, fmt.Errorf("registering the Go collector: %w", err)
		}
	}
	return e, nil
}

// Registry is the exporter's own registry, e.g. to add collectors.
func (e *PrometheusExporter) Registry() *prometheus.Registry { return e.registry }

// HandlerFunc serves the registry in the Prometheus text format; benthos
// mounts it at /metrics (and /stats) of its HTTP server.
func (e *PrometheusExporter) HandlerFunc() http.HandlerFunc {
	return promhttp.HandlerFor(e.registry, promhttp.HandlerOpts{
		// A metric failing to collect must not hide all the others.
		ErrorHandling: promhttp.ContinueOnError,
	}).ServeHTTP
}

// Close does nothing: the registry holds no resources.
func (e *PrometheusExporter) Close(context.Context) error { return nil }

// NewCounterCtor implements service.MetricsExporter.
func (e *PrometheusExporter) NewCounterCtor(name string, labelKeys ...string) service.MetricsExporterCounterCtor {
	name, labelKeys = SanitizeName(name), sanitizeLabels(labelKeys)
	vec, ok := lookupOrRegister(e, e.counters, "counter", name, labelKeys, func() *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: "Benthos counter " + name}, labelKeys)
	})
	if !ok {
		return func(...string) service.MetricsExporterCounter { return noopMetric{} }
	}
	return func(labelValues ...string) service.MetricsExporterCounter {
		c, err := vec.GetMetricWithLabelValues(validUTF8(labelValues)...)
		if err != nil {
			e.warnOnce(name, fmt.Sprintf("counter %s with label values %q: %v", name, labelValues, err))
			return noopMetric{}
		}
		return promCounter{c}
	}
}

// NewGaugeCtor implements service.MetricsExporter.
func (e *PrometheusExporter) NewGaugeCtor(name string, labelKeys ...string) service.MetricsExporterGaugeCtor {
	name, labelKeys = SanitizeName(name), sanitizeLabels(labelKeys)
	vec, ok := lookupOrRegister(e, e.gauges, "gauge", name, labelKeys, func() *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: "Benthos gauge " + name}, labelKeys)
	})
	if !ok {
		return func(...string) service.MetricsExporterGauge { return noopMetric{} }
	}
	return func(labelValues ...string) service.MetricsExporterGauge {
		g, err := vec.GetMetricWithLabelValues(validUTF8(labelValues)...)
		if err != nil {
			e.warnOnce(name, fmt.Sprintf("gauge %s with label values %q: %v", name, labelValues, err))
			return noopMetric{}
		}
		return promGauge{g}
	}
}

// NewTimerCtor implements service.MetricsExporter.
func (e *PrometheusExporter) NewTimerCtor(name string, labelKeys ...string) service.MetricsExporterTimerCtor {
	name, labelKeys = SanitizeName(name), sanitizeLabels(labelKeys)
	vec, ok := lookupOrRegister(e, e.timers, "timer", name, labelKeys, func() prometheus.ObserverVec {
		if e.opts.UseHistogramTiming {
			buckets := e.opts.HistogramBuckets
			if len(buckets) == 0 {
				buckets = prometheus.DefBuckets
			}
			return prometheus.NewHistogramVec(prometheus.HistogramOpts{
				Name: name, Help: "Benthos timer " + name + " in seconds", Buckets: buckets,
			}, labelKeys)
		}
		return prometheus.NewSummaryVec(prometheus.SummaryOpts{
			Name: name, Help: "Benthos timer " + name + " in nanoseconds", Objectives: summaryObjectives,
		}, labelKeys)
	})
	if !ok {
		return func(...string) service.MetricsExporterTimer { return noopMetric{} }
	}
	inSeconds := e.opts.UseHistogramTiming
	return func(labelValues ...string) service.MetricsExporterTimer {
		o, err := vec.GetMetricWithLabelValues(validUTF8(labelValues)...)
		if err != nil {
			e.warnOnce(name, fmt.Sprintf("timer %s with label values %q: %v", name, labelValues, err))
			return noopMetric{}
		}
		return promTimer{observer: o, inSeconds: inSeconds}
	}
}

// lookupOrRegister returns the vector registered under name, creating and
// registering it on first use. benthos asks for the same metric again for
// every component using it: the same label names share the vector. Other
// label names, or a name taken by another kind of metric, cannot be
// exported under that name: ok is false and the conflict is logged once.
func lookupOrRegister[V prometheus.Collector](e *PrometheusExporter, vecs map[string]*registeredVec[V], kind, name string, labelKeys []string, newVec func() V) (vec V, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if existing, found := vecs[name]; found {
		if slices.Equal(existing.labels, labelKeys) {
			return existing.vec, true
		}
		e.warnOnceLocked(name, fmt.Sprintf("%s %s with labels %q not exported: already registered with labels %q", kind, name, labelKeys, existing.labels))
		return vec, false
	}
	if otherKind, taken := e.registered[name]; taken {
		e.warnOnceLocked(name, fmt.Sprintf("%s %s not exported: the name is already a %s", kind, name, otherKind))
		return vec, false
	}
	vec = newVec()
	if err := e.registry.Register(vec); err != nil {
		e.warnOnceLocked(name, fmt.Sprintf("%s %s with labels %q not exported: %v", kind, name, labelKeys, err))
		return vec, false
	}
	vecs[name] = &registeredVec[V]{vec: vec, labels: slices.Clone(labelKeys)}
	e.registered[name] = kind
	return vec, true
}

func (e *PrometheusExporter) warnOnce(name, msg string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.warnOnceLocked(name, msg)
}

// warnOnceLocked logs msg unless name was already warned about: the
// constructors run on every metric update, which must not flood the log.
func (e *PrometheusExporter) warnOnceLocked(name, msg string) {
	if e.rejected[name] {
		return
	}
	e.rejected[name] = true
	if e.log != nil {
		e.log.Warn("prometheus metrics: " + msg)
	}
}

// SanitizeName makes name a valid classic Prometheus metric name,
// [a-zA-Z_:][a-zA-Z0-9_:]*, by replacing every other character (such as the
// dots of dotted metric paths) with '_'.
func SanitizeName(name string) string {
	return sanitize(name, true)
}

// sanitizeLabels makes label names valid, [a-zA-Z_][a-zA-Z0-9_]*.
func sanitizeLabels(labels []string) []string {
	out := make([]string, len(labels))
	for i, l := range labels {
		out[i] = sanitize(l, false)
	}
	return out
}

func sanitize(name string, allowColon bool) string {
	if name == "" {
		return "_"
	}
	var b strings.Builder
	b.Grow(len(name))
	for i, r := range name {
		valid := r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') ||
			(r == ':' && allowColon) || (i > 0 && r >= '0' && r <= '9')
		if valid {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// validUTF8 replaces invalid UTF-8 in label values, which Prometheus refuses.
func validUTF8(values []string) []string {
	if !slices.ContainsFunc(values, func(v string) bool { return !utf8.ValidString(v) }) {
		return values
	}
	fixed := make([]string, len(values))
	for i, v := range values {
		fixed[i] = strings.ToValidUTF8(v, "\uFFFD")
	}
	return fixed
}

type promCounter struct{ c prometheus.Counter }

// Incr skips negative deltas: a Prometheus counter only goes up, and
// panics otherwise.
func (p promCounter) Incr(n int64) {
	if n > 0 {
		p.c.Add(float64(n))
	}
}

func (p promCounter) IncrFloat64(n float64) {
	if n > 0 {
		p.c.Add(n)
	}
}

type promGauge struct{ g prometheus.Gauge }

func (p promGauge) Set(v int64)          { p.g.Set(float64(v)) }
func (p promGauge) SetFloat64(v float64) { p.g.Set(v) }

type promTimer struct {
	observer  prometheus.Observer
	inSeconds bool // histograms' buckets are in seconds
}

func (p promTimer) Timing(nanoseconds int64) {
	if p.inSeconds {
		p.observer.Observe(float64(nanoseconds) / 1e9)
		return
	}
	p.observer.Observe(float64(nanoseconds))
}

// noopMetric stands in for a metric that cannot be exported.
type noopMetric struct{}

func (noopMetric) Incr(int64)          {}
func (noopMetric) IncrFloat64(float64) {}
func (noopMetric) Set(int64)           {}
func (noopMetric) SetFloat64(float64)  {}
func (noopMetric) Timing(int64)        {}
