package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
	"github.com/urfave/cli/v2"
	"gopkg.in/yaml.v3"

	"github.com/walshadow/walshadow/config"
	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/preflight"
	"github.com/walshadow/walshadow/internal/source"
	"github.com/walshadow/walshadow/output"
)

const (
	flagTimeout    = "timeout"
	exitPreflight  = 1
	outputTypeName = "clickhouse_ddl"
)

func preflightCommand() *cli.Command {
	return &cli.Command{
		Name:      "preflight",
		Usage:     "Check everything a pipeline config needs and report every problem at once",
		ArgsUsage: "<config.yaml> [resource files...]",
		Description: `Reads the pipeline config (and any resource files), with ${ENV} and
${ENV:default} interpolated as 'run' does, and checks for every walshadow
resource: the source (reachable, version, wal_level, max_wal_senders,
max_replication_slots, the role's REPLICATION, a replication connection,
the slot, the replica identity of the tables in scope), the shadow's
binaries, major version, OS user and state_dir, and the bridge module; and
for every clickhouse_ddl output: the server, its version and dialect, the
target database and the right to create, write and drop a table there.

Every check runs even when others fail. Prints one line per finding
(✓ fine, ! warning, ✗ error, with the remedy below).

Exit status: 0 when nothing is an error, 1 otherwise.

Example:
  walshadow preflight ./pipeline.yaml`,
		Flags: []cli.Flag{
			&cli.DurationFlag{Name: flagTimeout, Value: 2 * time.Minute, Usage: "give up on the checks after this long"},
		},
		Action: runPreflight,
	}
}

// sessionCheck is one walshadow resource to check.
type sessionCheck struct {
	label  string
	params preflight.SourceParams
	bad    error // the resource does not parse
}

// outputCheck is one clickhouse_ddl output to check.
type outputCheck struct {
	session  string
	conn     clickhouse.ConnConfig
	database string
	include  []string
	exclude  []string
	tables   []string
	bad      error
}

func runPreflight(c *cli.Context) error {
	if c.NArg() == 0 {
		return cli.Exit("preflight: give the pipeline config file", exitPreflight)
	}
	sessions, outputs, err := loadPreflightConfig(c.Args().Slice())
	if err != nil {
		return cli.Exit("preflight: "+err.Error(), exitPreflight)
	}
	if len(sessions) == 0 {
		return cli.Exit(fmt.Sprintf("preflight: no %s resource in %s", config.ResourceType, strings.Join(c.Args().Slice(), ", ")), exitPreflight)
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, c.Duration(flagTimeout))
	defer cancel()

	w := c.App.Writer
	var all preflight.Report
	for _, s := range sessions {
		var r preflight.Report
		if s.bad != nil {
			fmt.Fprintf(w, "%s resource %q:\n", config.ResourceType, s.label)
			r = preflight.Report{{Check: "config", Severity: preflight.Error, Detail: s.bad.Error(), Remedy: "fix the resource's fields"}}
		} else {
			p := s.params
			if o := scopeOutput(outputs, s.label, len(sessions)); o != nil {
				p.Include, p.Exclude, p.Tables = o.include, o.exclude, o.tables
			}
			fmt.Fprintf(w, "%s resource %q (source %s):\n", config.ResourceType, s.label, source.RedactDSN(p.DSN))
			r = preflight.Source(ctx, p)
		}
		fmt.Fprintln(w, r.String())
		all = append(all, r...)
	}
	for _, o := range outputs {
		fmt.Fprintf(w, "%s output of session %q:\n", outputTypeName, o.session)
		var r preflight.Report
		if o.bad != nil {
			r = preflight.Report{{Check: "config", Severity: preflight.Error, Detail: o.bad.Error(), Remedy: "fix the output's fields"}}
		} else {
			r = preflight.ClickHouse(ctx, o.conn, o.database)
		}
		fmt.Fprintln(w, r.String())
		all = append(all, r...)
	}
	if len(outputs) == 0 {
		fmt.Fprintf(w, "no %s output: ClickHouse not checked\n\n", outputTypeName)
	}
	errs, warns := all.Count(preflight.Error), all.Count(preflight.Warning)
	summary := fmt.Sprintf("preflight: %s, %s", countNoun(errs, "error"), countNoun(warns, "warning"))
	if errs > 0 {
		return cli.Exit(summary, exitPreflight)
	}
	fmt.Fprintln(w, summary)
	return nil
}

func countNoun(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// scopeOutput is the output whose include/exclude define the tables in
// scope of session label: the only one naming it (or naming no session
// when there is one session); nil when none or several do.
func scopeOutput(outputs []outputCheck, label string, sessions int) *outputCheck {
	var found *outputCheck
	for i, o := range outputs {
		if o.bad != nil || !(o.session == label || o.session == "" && sessions == 1) {
			continue
		}
		if found != nil {
			return nil
		}
		found = &outputs[i]
	}
	return found
}

// loadPreflightConfig reads the walshadow resources and clickhouse_ddl
// outputs of the files (anywhere in them: outputs may sit in brokers or
// output_resources).
func loadPreflightConfig(paths []string) (sessions []sessionCheck, outputs []outputCheck, err error) {
	for _, path := range paths {
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, nil, fmt.Errorf("reading the config: %w", err)
		}
		text, err := interpolateEnv(raw)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
		var doc map[string]any
		if err := yaml.Unmarshal(text, &doc); err != nil {
			return nil, nil, fmt.Errorf("%s: parsing YAML: %w", path, err)
		}
		ss, err := sessionChecks(path, doc[config.ResourceType])
		if err != nil {
			return nil, nil, err
		}
		sessions = append(sessions, ss...)
		collectOutputs(doc, &outputs)
	}
	return sessions, outputs, nil
}

func sessionChecks(path string, v any) ([]sessionCheck, error) {
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%s: %s is not a list of resources", path, config.ResourceType)
	}
	var out []sessionCheck
	for i, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: %s[%d] is not a mapping", path, config.ResourceType, i)
		}
		label, _ := m["label"].(string)
		if label == "" {
			label = fmt.Sprintf("%s[%d]", config.ResourceType, i)
		}
		s := sessionCheck{label: label}
		parsed, err := parseWithSpec(config.SessionSpec(), m)
		if err == nil {
			var sess config.Session
			if sess, err = config.ParseSession(parsed); err == nil {
				s.params = preflight.FromSession(sess)
			}
		}
		s.bad = err
		out = append(out, s)
	}
	return out, nil
}

// parseWithSpec parses one component's fields with spec, so defaults and
// types are benthos' own.
func parseWithSpec(spec *service.ConfigSpec, fields map[string]any) (*service.ParsedConfig, error) {
	m := make(map[string]any, len(fields))
	for k, v := range fields {
		if k != "label" {
			m[k] = v
		}
	}
	text, err := yaml.Marshal(m)
	if err != nil {
		return nil, err
	}
	return spec.ParseYAML(string(text), nil)
}

func collectOutputs(v any, out *[]outputCheck) {
	switch v := v.(type) {
	case map[string]any:
		if conf, ok := v[outputTypeName].(map[string]any); ok {
			*out = append(*out, parseOutput(conf))
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys) // a stable report order
		for _, k := range keys {
			if k != outputTypeName {
				collectOutputs(v[k], out)
			}
		}
	case []any:
		for _, item := range v {
			collectOutputs(item, out)
		}
	}
}

func parseOutput(conf map[string]any) outputCheck {
	var o outputCheck
	if tables, ok := conf[output.FieldTables].(map[string]any); ok {
		for name := range tables {
			o.tables = append(o.tables, name)
		}
		slices.Sort(o.tables)
	}
	// The output's own spec: its defaults, and the same validation.
	parsed, err := parseWithSpec(output.Spec(), conf)
	if err != nil {
		o.bad = err
		return o
	}
	str := func(name string) string {
		s, e := parsed.FieldString(name)
		err = errors.Join(err, e)
		return s
	}
	o.session = str(config.FieldSession)
	o.conn.DSN = str(output.FieldDSN)
	o.database = str(output.FieldDatabase)
	o.conn.Compression = str(output.FieldCompression)
	o.conn.Cluster = str(output.FieldCluster)
	var e1, e2, e3 error
	o.include, e1 = parsed.FieldStringList(output.FieldInclude)
	o.exclude, e2 = parsed.FieldStringList(output.FieldExclude)
	tlsConf, enabled, e3 := parsed.FieldTLSToggled(output.FieldTLS)
	if enabled {
		o.conn.TLS = tlsConf
	}
	if err = errors.Join(err, e1, e2, e3); err == nil && o.conn.DSN == "" {
		err = errors.New("dsn must name the ClickHouse server")
	}
	o.bad = err
	return o
}

// envReference and escapedEnvReference are benthos' own patterns
// (internal/config/env_vars.go): ${NAME}, ${NAME:default}, an optional
// |base64decode, and ${{NAME}} for a literal ${NAME}.
var (
	envReference        = regexp.MustCompile(`\${[0-9A-Za-z_.]+(:((\${[^}]+})|[^}])*)?(?:\|[0-9A-Za-z]+)?}`)
	escapedEnvReference = regexp.MustCompile(`\${({[0-9A-Za-z_.]+(:((\${[^}]+})|[^}])*)?})}`)
)

// interpolateEnv replaces environment references as benthos does for
// `run` and `lint`: an unset variable without a default is an error naming
// it, an empty one takes the default.
func interpolateEnv(in []byte) ([]byte, error) {
	var missing []string
	var errs []error
	out := envReference.ReplaceAllFunc(in, func(ref []byte) []byte {
		spec := string(ref[2 : len(ref)-1])
		name, def, hasDefault := strings.Cut(spec, ":")
		transform := ""
		tail := &name
		if hasDefault {
			tail = &def
		}
		if i := strings.LastIndexByte(*tail, '|'); i >= 0 {
			transform = (*tail)[i+1:]
			*tail = (*tail)[:i]
		}
		value, ok := os.LookupEnv(name)
		switch {
		case hasDefault && value == "":
			value = def
		case !hasDefault && !ok:
			missing = append(missing, name)
		}
		switch transform {
		case "":
		case "base64decode":
			decoded, err := base64.StdEncoding.DecodeString(value)
			if err != nil {
				errs = append(errs, fmt.Errorf("decoding ${%s} as base64: %w", name, err))
			}
			value = string(decoded)
		default:
			errs = append(errs, fmt.Errorf("${%s}: unknown env var decode function %q", name, transform))
		}
		return []byte(strings.ReplaceAll(value, "\n", `\n`))
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("required environment variables were not set: %s", strings.Join(missing, ", "))
	}
	return escapedEnvReference.ReplaceAll(out, []byte("$$$1")), nil
}
