package source

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestRedactDSN(t *testing.T) {
	t.Setenv("PGPASSWORD", "")
	t.Setenv("PGPASSFILE", "/nonexistent")
	const secret = "s3cr3t-P4ss"
	cases := []struct {
		dsn  string
		want string
	}{
		{"postgres://walshadow:" + secret + "@db.example:6543/src?sslmode=disable",
			"host=db.example:6543 user=walshadow database=src"},
		{"postgresql://walshadow@127.0.0.1/src?password=" + secret + "&sslmode=disable",
			"host=127.0.0.1:5432 user=walshadow database=src"},
		{"postgres://walshadow@127.0.0.1/src?pass%77ord=" + secret,
			"host=127.0.0.1:5432 user=walshadow database=src"},
		{"host=127.0.0.1 port=5433 user=walshadow password=" + secret + " dbname=src",
			"host=127.0.0.1:5433 user=walshadow database=src"},
		{"host=127.0.0.1 user=walshadow password='" + secret + " with space' dbname=src",
			"host=127.0.0.1:5432 user=walshadow database=src"},
		{"host=a,b port=5432,5433 user=u password=" + secret + " dbname=d",
			"host=a:5432,b:5433 user=u database=d"},
		{"host=/var/run/postgresql user=u password=" + secret + " dbname=d",
			"host=/var/run/postgresql/.s.PGSQL.5432 user=u database=d"},
		// Does not parse: nothing of it is shown.
		{"postgres://u:" + secret + "@host:notaport/db", "[connection string not shown: it does not parse]"},
		{"host=h password='" + secret, "[connection string not shown: it does not parse]"},
	}
	for _, c := range cases {
		got := RedactDSN(c.dsn)
		if got != c.want {
			t.Errorf("RedactDSN(%q) = %q, want %q", c.dsn, got, c.want)
		}
		if strings.Contains(got, secret) {
			t.Errorf("RedactDSN(%q) leaks the password: %q", c.dsn, got)
		}
	}
}

func TestConnectParseErrorHidesPassword(t *testing.T) {
	const secret = "s3cr3t-P4ss"
	for _, dsn := range []string{
		"postgres://u:" + secret + "@host:notaport/db",
		"host=h password=" + secret + " sslmode=bogus",
		"host=h password='" + secret,
	} {
		_, err := Connect(t.Context(), dsn)
		if err == nil {
			t.Fatalf("Connect(%q) succeeded", dsn)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("parse error leaks the password: %v", err)
		}
		for e := err; e != nil; e = errors.Unwrap(e) {
			if strings.Contains(e.Error(), secret) {
				t.Errorf("wrapped error leaks the password: %v", e)
			}
		}
	}
}

func TestScrub(t *testing.T) {
	base := errors.New("FATAL: password hunter2x rejected for hunter2x")
	err := clientScrub(base, "hunter2x", "abc", "")
	if got := err.Error(); got != "FATAL: password xxxxx rejected for xxxxx" {
		t.Fatalf("scrubbed = %q", got)
	}
	if !errors.Is(err, base) {
		t.Fatal("scrubbing hides the original error from errors.Is")
	}
	if clientScrub(nil, "hunter2x") != nil {
		t.Fatal("nil error scrubbed into non-nil")
	}
	if clientScrub(base, "abc") != base {
		t.Fatal("a too-short secret wrapped the error")
	}
}

func TestValidateSlotName(t *testing.T) {
	for _, ok := range []string{"walshadow", "a", "slot_1", strings.Repeat("x", 63)} {
		if err := clientValidateSlotName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "Walshadow", "with-dash", `quote"`, "sp ace", strings.Repeat("x", 64), "é"} {
		if err := clientValidateSlotName(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestSettingUnits(t *testing.T) {
	bytesCases := []struct {
		setting, unit string
		want          uint64
	}{
		{"16777216", "B", 16 << 20},
		{"2048", "8kB", 16 << 20},
		{"16", "MB", 16 << 20},
		{"1", "GB", 1 << 30},
	}
	for _, c := range bytesCases {
		got, err := clientSettingBytes(c.setting, c.unit)
		if err != nil || got != c.want {
			t.Errorf("bytes(%q, %q) = %d, %v; want %d", c.setting, c.unit, got, err, c.want)
		}
	}
	durCases := []struct {
		setting, unit string
		want          time.Duration
	}{
		{"60000", "ms", time.Minute},
		{"0", "ms", 0},
		{"30", "s", 30 * time.Second},
		{"2", "min", 2 * time.Minute},
		{"-1", "ms", -time.Millisecond},
	}
	for _, c := range durCases {
		got, err := clientSettingDuration(c.setting, c.unit)
		if err != nil || got != c.want {
			t.Errorf("duration(%q, %q) = %v, %v; want %v", c.setting, c.unit, got, err, c.want)
		}
	}
	for _, bad := range [][2]string{{"x", "B"}, {"1", ""}, {"1", "8"}, {"1", "parsecs"}, {"-1", "B"}, {"1", "0kB"}} {
		if _, err := clientSettingBytes(bad[0], bad[1]); err == nil {
			t.Errorf("bytes(%q, %q) accepted", bad[0], bad[1])
		}
	}
	if _, err := clientSettingDuration("1", "kB"); err == nil {
		t.Error("a memory unit accepted as a time unit")
	}
}

// FuzzRedactDSN checks RedactDSN never panics, never shows a string that
// does not parse, and never shows the password of one that does (unless the
// password also appears in the host, user or database it does show).
func FuzzRedactDSN(f *testing.F) {
	f.Setenv("PGPASSWORD", "")
	f.Setenv("PGPASSFILE", "/nonexistent")
	f.Setenv("PGSERVICEFILE", "/nonexistent")
	for _, seed := range []string{
		"postgres://u:pw-secret@h:5432/db?sslmode=disable",
		"postgresql://u@h/db?password=pw-secret",
		"host=h user=u password='pw secret' dbname=d",
		"host=h user=u password=pw\\ secret dbname=d",
		"postgres://u:p%40ss@h/d",
		"host=a,b port=1,2 password=pw-secret",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, dsn string) {
		got := RedactDSN(dsn)
		cfg, err := pgconn.ParseConfig(dsn)
		if err != nil {
			if got != "[connection string not shown: it does not parse]" {
				t.Fatalf("unparseable %q shown as %q", dsn, got)
			}
			return
		}
		shown := RedactDSN("") + cfg.User + cfg.Database + cfg.Host + strconv.Itoa(int(cfg.Port))
		for _, fb := range cfg.Fallbacks {
			shown += fb.Host + strconv.Itoa(int(fb.Port))
		}
		if len(cfg.Password) >= 3 && !strings.Contains(shown, cfg.Password) && strings.Contains(got, cfg.Password) {
			t.Fatalf("RedactDSN(%q) = %q shows the password %q", dsn, got, cfg.Password)
		}
	})
}
