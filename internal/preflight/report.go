// Package preflight checks, before walshadow starts, everything a session
// and its ClickHouse output need from the world around them — the source's
// settings, role, slot and tables, the shadow's binaries and OS user, the
// bridge module, the ClickHouse server — and reports every finding at once,
// so one run tells the operator all there is to fix instead of one problem
// per restart.
//
// Source and ClickHouse never stop at the first failure: every check runs
// and becomes a Finding; a failed connection is one Error finding that names
// the checks it made impossible. Report.Err turns the Errors (and the
// Warnings beside them) into one error for a start-up path; Report.String
// is the table `walshadow preflight` prints.
package preflight

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Severity grades a Finding; higher is worse.
type Severity int

const (
	// Info is a fact worth knowing, or a check that passed.
	Info Severity = iota
	// Warning is something that works but will surprise (data that will not
	// replicate the way the operator may expect, untested versions).
	Warning
	// Error is something that makes the session or the output fail.
	Error
)

func (s Severity) String() string {
	switch s {
	case Info:
		return "info"
	case Warning:
		return "warning"
	case Error:
		return "error"
	}
	return fmt.Sprintf("severity(%d)", int(s))
}

// mark is the one-character symbol of String's table.
func (s Severity) mark() string {
	switch s {
	case Warning:
		return "!"
	case Error:
		return "✗"
	}
	return "✓"
}

// Finding is the outcome of one check.
type Finding struct {
	// Check is a short stable id: "wal_level", "replication_role", "slot",
	// "replica_identity", "shadow_major", "bridge_module", "clickhouse", ...
	Check    string
	Severity Severity
	// Detail says what was found, naming the setting, table or file.
	Detail string
	// Remedy says what the operator does about it; "" for Info.
	Remedy string
}

// line is the finding as one line of Err's message.
func (f Finding) line() string {
	if f.Remedy == "" {
		return f.Detail
	}
	return f.Detail + ": " + f.Remedy
}

// Report is the findings of one or more checks, in the order they ran.
type Report []Finding

// Count is the number of findings of severity s.
func (r Report) Count(s Severity) int { return len(r.Of(s)) }

// Of returns the findings of severity s, e.g. the Warnings to log when Err
// is nil.
func (r Report) Of(s Severity) Report {
	var out Report
	for _, f := range r {
		if f.Severity == s {
			out = append(out, f)
		}
	}
	return out
}

// Find returns the findings of check.
func (r Report) Find(check string) Report {
	var out Report
	for _, f := range r {
		if f.Check == check {
			out = append(out, f)
		}
	}
	return out
}

// Err is nil unless the report holds an Error. Otherwise it is one error
// listing every Error, then every Warning (prefixed "warning: "), one per
// line as "detail: remedy", so a start-up failure shows everything to fix.
func (r Report) Err() error {
	errs, warns := r.Of(Error), r.Of(Warning)
	if len(errs) == 0 {
		return nil
	}
	n := len(errs) + len(warns)
	var b strings.Builder
	if n == 1 {
		b.WriteString("preflight: 1 problem:")
	} else {
		fmt.Fprintf(&b, "preflight: %d problems:", n)
	}
	for _, f := range errs {
		b.WriteString("\n  - " + f.line())
	}
	for _, f := range warns {
		b.WriteString("\n  - warning: " + f.line())
	}
	return &reportError{msg: b.String(), report: r}
}

// reportError carries the report behind Err, for callers that want the
// findings (errors.As).
type reportError struct {
	msg    string
	report Report
}

func (e *reportError) Error() string { return e.msg }

// ReportOf returns the report behind an error from Report.Err, if err is
// (or wraps) one.
func ReportOf(err error) (Report, bool) {
	var re *reportError
	if errors.As(err, &re) {
		return re.report, true
	}
	return nil, false
}

// String renders the report as the CLI's table: a mark (✓ info, ! warning,
// ✗ error), the check id, the detail, and the remedy on its own indented
// line.
func (r Report) String() string {
	width := 0
	for _, f := range r {
		width = max(width, utf8.RuneCountInString(f.Check))
	}
	var b strings.Builder
	for _, f := range r {
		pad := strings.Repeat(" ", width-utf8.RuneCountInString(f.Check))
		fmt.Fprintf(&b, "%s %s%s  %s\n", f.Severity.mark(), f.Check, pad, f.Detail)
		if f.Remedy != "" {
			fmt.Fprintf(&b, "  %s  → %s\n", strings.Repeat(" ", width), f.Remedy)
		}
	}
	return b.String()
}

// findings accumulates a Report.
type findings struct{ r Report }

func (fs *findings) add(check string, sev Severity, detail, remedy string) {
	fs.r = append(fs.r, Finding{Check: check, Severity: sev, Detail: detail, Remedy: remedy})
}

func (fs *findings) info(check, detail string) { fs.add(check, Info, detail, "") }

func (fs *findings) warn(check, detail, remedy string) { fs.add(check, Warning, detail, remedy) }

func (fs *findings) fail(check, detail, remedy string) { fs.add(check, Error, detail, remedy) }

// listNames renders up to limit names and how many more there are.
func listNames(names []string, limit int) string {
	if len(names) <= limit {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s (and %d more)", strings.Join(names[:limit], ", "), len(names)-limit)
}

// plural is "1 table" / "3 tables".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
