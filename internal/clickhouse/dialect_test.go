package clickhouse

import "testing"

func TestParseVersion(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Version
	}{
		{"18.16.1", Version{18, 16, 1}},
		{"23.8.2.7", Version{23, 8, 2}},
		{"24.3.1", Version{24, 3, 1}},
		{"24.3.1.2672", Version{24, 3, 1}},
		{" 22.8.5.29-lts\n", Version{22, 8, 5}},
		{"21.12", Version{21, 12, 0}},
	} {
		got, err := ParseVersion(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseVersion(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "18", "a.b.c", "1.2.3.4.5", "18..1", "-1.2.3", "99999999999.1"} {
		if v, err := ParseVersion(bad); err == nil {
			t.Errorf("ParseVersion(%q) = %v, want an error", bad, v)
		}
	}
}

func TestDialectCapabilities(t *testing.T) {
	none := Dialect{Version: Version{18, 16, 1}}
	if Legacy1816 != none {
		t.Errorf("Legacy1816 = %+v, want no capabilities", Legacy1816)
	}
	all := Dialect{Version: Version{23, 8, 2}, IfNotExistsColumns: true, RenameColumn: true, DateTime64: true, Bool: true,
		Date32: true, WideDateRange: true, Decimal256: true, IsDeletedEngineArg: true, NullableKey: true, LowCardinality: true}
	if Modern != all {
		t.Errorf("Modern = %+v, want every capability", Modern)
	}
	for _, s := range []string{"23.2.1", "24.3.1", "25.1.1.1"} {
		d, err := ParseDialect(s)
		if err != nil {
			t.Fatal(err)
		}
		d.Version = all.Version
		if d != all {
			t.Errorf("%s: %+v, want every capability", s, d)
		}
	}
	// Boundaries: one release before and at each threshold.
	for _, tc := range []struct {
		before, at string
		flag       func(Dialect) bool
	}{
		{"18.16.1", "19.1.6", func(d Dialect) bool { return d.IfNotExistsColumns }},
		{"20.3.9", "20.4.2", func(d Dialect) bool { return d.RenameColumn }},
		{"19.17.1", "20.1.2", func(d Dialect) bool { return d.DateTime64 }},
		{"21.11.1", "21.12.2", func(d Dialect) bool { return d.Bool }},
		{"21.8.1", "21.9.2", func(d Dialect) bool { return d.Date32 }},
		{"23.1.9", "23.2.1", func(d Dialect) bool { return d.IsDeletedEngineArg }},
		{"19.17.1", "20.1.2", func(d Dialect) bool { return d.LowCardinality }},
	} {
		before, _ := ParseDialect(tc.before)
		at, _ := ParseDialect(tc.at)
		if tc.flag(before) || !tc.flag(at) {
			t.Errorf("threshold %s..%s: before=%v at=%v", tc.before, tc.at, tc.flag(before), tc.flag(at))
		}
	}
}

func FuzzParseVersion(f *testing.F) {
	for _, s := range []string{"18.16.1", "23.8.2.7", "1.2", "x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseVersion(s)
		if err == nil {
			if again, err := ParseVersion(v.String()); err != nil || again != v {
				t.Fatalf("%q -> %v does not round-trip: %v %v", s, v, again, err)
			}
		}
	})
}
