package preflight

import (
	"fmt"
	"strings"
	"testing"
)

func TestReportErrListsEveryProblem(t *testing.T) {
	r := Report{
		{Check: "source", Severity: Info, Detail: "connected"},
		{Check: "wal_level", Severity: Error, Detail: "wal_level is minimal", Remedy: "set wal_level = logical and restart the source"},
		{Check: "slot", Severity: Warning, Detail: "no replication slot", Remedy: "set slot.name"},
		{Check: "replication_role", Severity: Error, Detail: `role "app" has neither REPLICATION nor SUPERUSER`, Remedy: `ALTER ROLE "app" REPLICATION`},
	}
	err := r.Err()
	if err == nil {
		t.Fatal("Err is nil with two Error findings")
	}
	want := "preflight: 3 problems:\n" +
		"  - wal_level is minimal: set wal_level = logical and restart the source\n" +
		`  - role "app" has neither REPLICATION nor SUPERUSER: ALTER ROLE "app" REPLICATION` + "\n" +
		"  - warning: no replication slot: set slot.name"
	if err.Error() != want {
		t.Fatalf("Err:\n%s\nwant:\n%s", err, want)
	}
	back, ok := ReportOf(fmt.Errorf("starting session: %w", err))
	if !ok || len(back) != len(r) {
		t.Fatalf("ReportOf: %v %v", back, ok)
	}
}

func TestReportErrNilWithoutErrors(t *testing.T) {
	r := Report{
		{Check: "slot", Severity: Warning, Detail: "no replication slot", Remedy: "set slot.name"},
		{Check: "source", Severity: Info, Detail: "connected"},
	}
	if err := r.Err(); err != nil {
		t.Fatalf("Err = %v with warnings only", err)
	}
	one := Report{{Check: "clickhouse", Severity: Error, Detail: "connection refused"}}
	if got := one.Err().Error(); got != "preflight: 1 problem:\n  - connection refused" {
		t.Fatalf("Err = %q", got)
	}
}

func TestReportString(t *testing.T) {
	r := Report{
		{Check: "wal_level", Severity: Info, Detail: "wal_level = logical"},
		{Check: "slot", Severity: Warning, Detail: "no replication slot", Remedy: "set slot.name"},
		{Check: "clickhouse", Severity: Error, Detail: "refused", Remedy: "check dsn"},
	}
	want := "✓ wal_level   wal_level = logical\n" +
		"! slot        no replication slot\n" +
		"              → set slot.name\n" +
		"✗ clickhouse  refused\n" +
		"              → check dsn\n"
	if got := r.String(); got != want {
		t.Fatalf("String:\n%s\nwant:\n%s", got, want)
	}
}

func TestListNamesLimits(t *testing.T) {
	names := make([]string, 12)
	for i := range names {
		names[i] = fmt.Sprintf("public.t%d", i)
	}
	got := listNames(names, 10)
	if !strings.HasPrefix(got, "public.t0, public.t1,") || !strings.HasSuffix(got, "public.t9 (and 2 more)") {
		t.Fatalf("listNames = %q", got)
	}
}

func TestScopeMirrorsOutput(t *testing.T) {
	sc, err := newScope(SourceParams{Include: []string{"public.*"}, Exclude: []string{"public.tmp_*"}, Tables: []string{"audit.log"}})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"public.a": true, "public.tmp_x": false, "audit.log": true, "audit.other": false} {
		if sc.in(name) != want {
			t.Errorf("in(%s) = %v, want %v", name, !want, want)
		}
	}
	all, _ := newScope(SourceParams{})
	if !all.in("any.table") {
		t.Error("empty include does not take every table")
	}
	if _, err := newScope(SourceParams{Include: []string{"orders"}}); err == nil || !strings.Contains(err.Error(), `"orders"`) {
		t.Errorf("pattern without a dot: %v", err)
	}
}

// TestCheckVersion: 15 to 18 are taken (16 with a warning: untested), 14
// and 19 refused with one line naming the source's version.
func TestCheckVersion(t *testing.T) {
	for _, c := range []struct {
		num  int
		sev  Severity
		part string
	}{
		{140012, Error, "source is PostgreSQL 14.12 (server_version_num 140012): walshadow supports PostgreSQL 15 to 18"},
		{150020, Info, "PostgreSQL 15.20 (server_version_num 150020): supported and tested"},
		{160010, Warning, "not tested against a real server"},
		{170012, Info, "supported and tested"},
		{180006, Info, "supported and tested"},
		{190000, Error, "walshadow supports PostgreSQL 15 to 18; it cannot read this major's WAL"},
	} {
		var fs findings
		fs.checkVersion(sourceSettings{versionNum: c.num, version: fmt.Sprintf("%d.%d", c.num/10000, c.num%10000)})
		want(t, fs.r, "server_version", c.sev, c.part)
		if strings.Contains(fs.r[0].Detail, "\n") {
			t.Errorf("%d: a finding of more than one line: %q", c.num, fs.r[0].Detail)
		}
	}
}

func TestCheckWALSenders(t *testing.T) {
	for _, c := range []struct {
		max, used int
		sev       Severity
		part      string
	}{
		{0, 0, Error, "max_wal_senders is 0"},
		{3, 3, Error, "all 3 wal senders"},
		{3, 2, Warning, "needs one more"},
		{10, 1, Info, "1 more while a base_backup initial load runs"},
	} {
		var fs findings
		fs.checkWALSenders(sourceSettings{maxWALSenders: c.max, walSendersUsed: c.used})
		want(t, fs.r, "max_wal_senders", c.sev, c.part)
	}
}
