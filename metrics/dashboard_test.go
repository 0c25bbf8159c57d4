package metrics

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// dashboardPath is the Grafana dashboard, relative to the module root.
const dashboardPath = "resources/grafana/walshadow.json"

// grafanaDashboard is the part of a dashboard the test checks.
type grafanaDashboard struct {
	SchemaVersion int            `json:"schemaVersion"`
	Inputs        []grafanaInput `json:"__inputs"`
	Panels        []grafanaPanel `json:"panels"`
	Templating    struct {
		List []struct {
			Name       string          `json:"name"`
			Datasource json.RawMessage `json:"datasource"`
			Definition string          `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

type grafanaInput struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	PluginID string `json:"pluginId"`
}

type grafanaPanel struct {
	ID         int             `json:"id"`
	Type       string          `json:"type"`
	Title      string          `json:"title"`
	Datasource json.RawMessage `json:"datasource"`
	GridPos    struct {
		H int `json:"h"`
		W int `json:"w"`
		X int `json:"x"`
		Y int `json:"y"`
	} `json:"gridPos"`
	Targets []struct {
		Expr       string          `json:"expr"`
		RefID      string          `json:"refId"`
		Datasource json.RawMessage `json:"datasource"`
	} `json:"targets"`
	Panels []grafanaPanel `json:"panels"` // of collapsed rows
}

// moduleRoot walks up from the test's directory to the go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatalf("getwd: %v", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("no go.mod above the test directory")
		}
		dir = parent
	}
}

// metricRegistration matches a metric registered with a literal name:
// m.NewCounter("walshadow_...", ...), NewGauge, NewTimer.
var metricRegistration = regexp.MustCompile(`\bNew(Counter|Gauge|Timer)\(\s*"(walshadow_[a-z0-9_]+)"`)

// registeredMetrics scans the module's non-test Go sources for walshadow_*
// metric registrations: name → Counter, Gauge or Timer.
func registeredMetrics(t *testing.T, root string) map[string]string {
	t.Helper()
	kinds := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			// (var/ holds what the tasks build and run, a chroot among it.)
			if path != root && (strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") ||
				d.Name() == "testdata" || d.Name() == "vendor" || path == filepath.Join(root, "var")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range metricRegistration.FindAllStringSubmatch(string(src), -1) {
			kinds[m[2]] = m[1]
		}
		return nil
	})
	if err != nil {
		t.Fatalf("scanning %s for metric registrations: %v", root, err)
	}
	return kinds
}

// timerSeriesSuffixes are the series a summary or histogram timer adds to
// its name.
var timerSeriesSuffixes = []string{"_sum", "_count", "_bucket"}

// knownMetric reports whether a series name in a query is one the code
// exports: a registered name, or a timer's _sum/_count/_bucket series.
func knownMetric(kinds map[string]string, series string) bool {
	if _, ok := kinds[series]; ok {
		return true
	}
	for _, suffix := range timerSeriesSuffixes {
		if base, ok := strings.CutSuffix(series, suffix); ok && kinds[base] == "Timer" {
			return true
		}
	}
	return false
}

var walshadowSeries = regexp.MustCompile(`walshadow_[a-z0-9_]+`)

func loadDashboard(t *testing.T, root string) grafanaDashboard {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, dashboardPath))
	if err != nil {
		t.Fatalf("reading the dashboard: %v", err)
	}
	var d grafanaDashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("parsing %s: %v", dashboardPath, err)
	}
	return d
}

func flattenPanels(panels []grafanaPanel) []grafanaPanel {
	var out []grafanaPanel
	for _, p := range panels {
		out = append(out, p)
		out = append(out, flattenPanels(p.Panels)...)
	}
	return out
}

// The dashboard must query only series the code exports, so it cannot drift
// from the code.
func TestDashboardQueriesRegisteredMetrics(t *testing.T) {
	root := moduleRoot(t)
	kinds := registeredMetrics(t, root)
	if len(kinds) < 10 {
		t.Fatalf("found only %d walshadow_* metric registrations in %s: the scan is broken", len(kinds), root)
	}
	d := loadDashboard(t, root)

	queries := map[string]string{} // query → where
	for _, p := range flattenPanels(d.Panels) {
		for _, target := range p.Targets {
			queries[target.Expr] = "panel " + p.Title + " " + target.RefID
		}
	}
	for _, v := range d.Templating.List {
		queries[v.Definition] = "variable " + v.Name
	}

	used := map[string]bool{}
	for query, where := range queries {
		for _, series := range walshadowSeries.FindAllString(query, -1) {
			used[series] = true
			if !knownMetric(kinds, series) {
				t.Errorf("%s queries %s, which no non-test Go source registers (NewCounter/NewGauge/NewTimer)", where, series)
			}
		}
	}
	if len(used) < 30 {
		t.Errorf("the dashboard queries only %d walshadow_* series", len(used))
	}
}

func TestDashboardIsImportable(t *testing.T) {
	d := loadDashboard(t, moduleRoot(t))
	if d.SchemaVersion != 39 {
		t.Errorf("schemaVersion %d, want 39", d.SchemaVersion)
	}
	if !slices.ContainsFunc(d.Inputs, func(in grafanaInput) bool {
		return in.Name == "DS_PROMETHEUS" && in.Type == "datasource" && in.PluginID == "prometheus"
	}) {
		t.Errorf("no DS_PROMETHEUS datasource input: %+v", d.Inputs)
	}

	const datasource = `{"type":"prometheus","uid":"${DS_PROMETHEUS}"}`
	sameDatasource := func(raw json.RawMessage) bool {
		var got, want any
		return json.Unmarshal(raw, &got) == nil && json.Unmarshal([]byte(datasource), &want) == nil &&
			jsonEqual(got, want)
	}
	ids := map[int]string{}
	for _, p := range flattenPanels(d.Panels) {
		if other, dup := ids[p.ID]; dup {
			t.Errorf("panels %q and %q share id %d", other, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		if p.GridPos.W <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: gridPos %+v outside the 24 columns", p.Title, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if !sameDatasource(p.Datasource) {
			t.Errorf("panel %q: datasource %s, want %s", p.Title, p.Datasource, datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no queries", p.Title)
		}
		for _, target := range p.Targets {
			if strings.TrimSpace(target.Expr) == "" {
				t.Errorf("panel %q: query %s is empty", p.Title, target.RefID)
			}
			if !sameDatasource(target.Datasource) {
				t.Errorf("panel %q query %s: datasource %s, want %s", p.Title, target.RefID, target.Datasource, datasource)
			}
		}
	}
	for _, v := range d.Templating.List {
		if !sameDatasource(v.Datasource) {
			t.Errorf("variable %s: datasource %s, want %s", v.Name, v.Datasource, datasource)
		}
	}
}

func jsonEqual(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(ja) == string(jb)
}
