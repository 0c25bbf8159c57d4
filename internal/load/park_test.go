package load

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	clickhousego "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walshadow/walshadow/internal/statefile"
)

// TestSignature: what counts as the same error. Volatile parts (attempt
// and row numbers, values, positions, times, durations) do not tell two
// failures apart; the words, names with digits in them, a ClickHouse
// exception's code and a PostgreSQL error's SQLSTATE do.
func TestSignature(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b error
		same bool
	}{
		{"attempt and row numbers, values",
			errors.New(`initial load of public.t, row 17: column "v": value 100000 does not fit Int8 (attempt 2)`),
			errors.New(`initial load of public.t, row 4031: column "v": value 70000 does not fit Int8 (attempt 5)`), true},
		{"positions and times",
			errors.New("public.t failed at 0/5A3F000 (2026-12-01T09:30:00.123Z): cannot parse"),
			errors.New("public.t failed at 1/00000010 (2026-12-02T10:00:00Z): cannot parse"), true},
		{"durations",
			errors.New("insert into `d`.`t` timed out after 1m30s: refused"),
			errors.New("insert into `d`.`t` timed out after 250ms: refused"), true},
		{"another column type",
			errors.New(`column "v": value 1 does not fit Int8`),
			errors.New(`column "v": value 1 does not fit Int16`), false},
		{"another column",
			errors.New(`column "v1": value 1 does not fit Int8`),
			errors.New(`column "v2": value 1 does not fit Int8`), false},
		{"another error",
			errors.New(`inserting into public.t: cannot parse`),
			errors.New(`inserting into public.t: too many columns`), false},
		{"ClickHouse's code",
			fmt.Errorf("inserting: %w", &clickhousego.Exception{Code: 53, Message: "Type mismatch"}),
			fmt.Errorf("inserting: %w", &clickhousego.Exception{Code: 241, Message: "Type mismatch"}), false},
		{"ClickHouse's code, the same",
			fmt.Errorf("inserting row 5: %w", &clickhousego.Exception{Code: 241, Message: "Memory limit (for query) exceeded: would use 1.86 GiB"}),
			fmt.Errorf("inserting row 9: %w", &clickhousego.Exception{Code: 241, Message: "Memory limit (for query) exceeded: would use 2.01 GiB"}), true},
		{"SQLSTATE",
			&pgconn.PgError{Code: "22003", Message: "value out of range"},
			&pgconn.PgError{Code: "22P02", Message: "value out of range"}, false},
	} {
		sa, sb := Signature(tc.a), Signature(tc.b)
		if (sa == sb) != tc.same {
			t.Errorf("%s: signatures %q and %q: same %v, want %v", tc.name, sa, sb, sa == sb, tc.same)
		}
	}
	long := errors.New(strings.Repeat("é", 1000))
	if s := Signature(long); len(s) > maxSignature || !strings.HasPrefix(s, "é") || strings.ContainsRune(s, '\uFFFD') {
		t.Errorf("a long error's signature is %d bytes (%q...)", len(s), s[:10])
	}
	if Signature(nil) != "" {
		t.Error("nil has a signature")
	}
}

// TestStreakNext: when a failure counts as a repeat, and when the streak
// parks the table.
func TestStreakNext(t *testing.T) {
	a := Failure{Signature: "value # does not fit Int8", At: 0x100}
	aLoad := Failure{Signature: a.Signature} // the same error, met by the load
	b := Failure{Signature: "cannot parse", At: 0x100}
	aLater := Failure{Signature: a.Signature, At: 0x200}
	for _, tc := range []struct {
		name     string
		steps    []Failure
		reloaded []bool
		count    int
		parks    bool
	}{
		{"the first failure", []Failure{a}, []bool{true}, 1, false},
		{"the same failure after a reload", []Failure{a, a}, []bool{true, true}, 2, true},
		{"the same failure before any reload (a batch retried)", []Failure{a, a, a}, []bool{true, false, false}, 1, false},
		{"another error at the same change", []Failure{a, b}, []bool{true, true}, 1, false},
		{"the same error at another change", []Failure{a, aLater}, []bool{true, true}, 1, false},
		{"the stream's failure, then its load's", []Failure{a, aLoad}, []bool{true, true}, 1, false},
		{"two load attempts alike", []Failure{a, aLoad, aLoad}, []bool{true, true, true}, 2, true},
		{"a different failure between", []Failure{aLoad, b, aLoad}, []bool{true, true, true}, 1, false},
		{"three alike", []Failure{aLoad, aLoad, aLoad}, []bool{true, true, true}, 3, true},
	} {
		var s Streak
		for i, f := range tc.steps {
			s = s.Next(f, tc.reloaded[i])
		}
		if s.Count != tc.count || s.Parks() != tc.parks || s.Failure != tc.steps[len(tc.steps)-1] {
			t.Errorf("%s: streak %+v (parks %v), want count %d, parks %v", tc.name, s, s.Parks(), tc.count, tc.parks)
		}
	}
}

// TestUnpark: what tries a parked table again, and what does not.
func TestUnpark(t *testing.T) {
	boot := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	under := Conditions{Shape: 0x100, Config: "c1", ServerVersion: "18.16.1.0", ServerBoot: boot}
	p := Parking{Under: under}
	with := func(edit func(*Conditions)) Conditions {
		c := under
		edit(&c)
		return c
	}
	for _, tc := range []struct {
		name string
		now  Conditions
		why  string // "": stays parked
	}{
		{"nothing changed", under, ""},
		{"the boot time read a second later", with(func(c *Conditions) { c.ServerBoot = boot.Add(time.Second) }), ""},
		{"the boot time read a second earlier", with(func(c *Conditions) { c.ServerBoot = boot.Add(-time.Second) }), ""},
		{"nothing known now", Conditions{}, ""},
		{"a new shape", with(func(c *Conditions) { c.Shape = 0x200 }), "its shape changed"},
		{"another configuration", with(func(c *Conditions) { c.Config = "c2" }), "its configuration changed"},
		{"ClickHouse upgraded", with(func(c *Conditions) { c.ServerVersion = "23.8.1.1" }), "ClickHouse's version changed"},
		{"ClickHouse restarted", with(func(c *Conditions) { c.ServerBoot = boot.Add(time.Hour) }), "ClickHouse restarted"},
		{"ClickHouse unknown now", with(func(c *Conditions) { c.ServerVersion, c.ServerBoot = "", time.Time{} }), ""},
	} {
		why, ok := p.Unpark(tc.now)
		if ok != (tc.why != "") || !strings.Contains(why, tc.why) {
			t.Errorf("%s: un-park %v (%q), want %v (%q)", tc.name, ok, why, tc.why != "", tc.why)
		}
	}
	// Parked before the conditions were known (zero): nothing un-parks
	// it but a request.
	if why, ok := (Parking{}).Unpark(under); ok {
		t.Errorf("a parking without conditions un-parked: %s", why)
	}
}

// TestTransient: the failures that never park a table.
func TestTransient(t *testing.T) {
	for _, tc := range []struct {
		name      string
		err       error
		transient bool
	}{
		{"a value", errors.New(`column "v": value 1 does not fit Int8`), false},
		{"ClickHouse's type mismatch", &clickhousego.Exception{Code: 53, Message: "Type mismatch"}, false},
		{"ClickHouse's too many parts", &clickhousego.Exception{Code: 252, Message: "Too many parts"}, true},
		{"connection refused", fmt.Errorf("connecting: %w", syscall.ECONNREFUSED), true},
		{"a lost connection", fmt.Errorf("reading: %w", io.ErrUnexpectedEOF), true},
		{"a timeout", &net.OpError{Op: "read", Err: errors.New("i/o timeout")}, true},
		{"cancelled", context.Canceled, true},
		{"the source's admin shutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"a serialization failure", &pgconn.PgError{Code: "40001"}, true},
		{"the source's value error", &pgconn.PgError{Code: "22003"}, false},
		{"an undefined column", &pgconn.PgError{Code: "42703"}, false},
	} {
		if got := Transient(tc.err); got != tc.transient {
			t.Errorf("%s (%v): transient %v, want %v", tc.name, tc.err, got, tc.transient)
		}
	}
}

// TestReloadRequests: a request is durable until it is done; one made
// again meanwhile outlives the first's Done.
func TestReloadRequests(t *testing.T) {
	dir := outputDir(t)
	if reqs, bad, err := ReloadRequests(dir); len(reqs) != 0 || bad != nil || err != nil {
		t.Fatalf("no requests yet: %v %v %v", reqs, bad, err)
	}
	for _, name := range []string{"orders", ".t", "s.", ""} {
		if _, err := RequestReload(dir, name, time.Now()); err == nil {
			t.Errorf("request for %q accepted", name)
		}
	}
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	first, err := RequestReload(dir, "public.orders", t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := RequestReload(dir, "my.schema.with.dots", t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	reqs, bad, err := ReloadRequests(dir)
	if err != nil || bad != nil || len(reqs) != 2 || reqs[0].Table != "public.orders" || !reqs[0].At.Equal(t0) || reqs[1].Table != "my.schema.with.dots" {
		t.Fatalf("requests %+v, bad %v, %v", reqs, bad, err)
	}
	// Asked again before the first is acted on: the first's Done keeps it.
	if _, err := RequestReload(dir, "public.orders", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := first.Done(); err != nil {
		t.Fatal(err)
	}
	reqs, _, _ = ReloadRequests(dir)
	if len(reqs) != 2 || !reqs[1].At.Equal(t0.Add(time.Minute)) {
		t.Fatalf("after the first's Done: %+v", reqs)
	}
	for _, r := range reqs {
		if err := r.Done(); err != nil {
			t.Fatal(err)
		}
	}
	if reqs, _, _ := ReloadRequests(dir); len(reqs) != 0 {
		t.Fatalf("after Done: %+v", reqs)
	}
	writeFile(t, dir.ReloadRequests()+"/junk.json", "{not json")
	if _, bad, err := ReloadRequests(dir); err != nil || len(bad) != 1 {
		t.Fatalf("a corrupt request: bad %v, %v", bad, err)
	}
}

func outputDir(t *testing.T) statefile.OutputDir { return statefile.OutputDir(t.TempDir()) }

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
