package clickhouse

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestQuoteIdent(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"orders", "`orders`"},
		{"public.orders", "`public.orders`"},
		{"a`b", "`a\\`b`"},
		{`a\b`, "`a\\\\b`"},
		{"`", "`\\``"},
		{"x'y\"z", "`x'y\"z`"},
		{"é名", "`é名`"},
		{"", "``"},
	} {
		if got := QuoteIdent(tc.in); got != tc.want {
			t.Errorf("QuoteIdent(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestValidateName(t *testing.T) {
	for _, ok := range []string{"orders", "public.orders", "a`b\\c", "é名", strings.Repeat("a", 200), strings.Repeat(".", 66)} {
		if err := ValidateName("test", ok); err != nil {
			t.Errorf("ValidateName(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a\x00b", "a\nb", "\xff", strings.Repeat("a", 201), strings.Repeat(".", 67), strings.Repeat("é", 34)} {
		err := ValidateName(`column "x" of public.t`, bad)
		if err == nil {
			t.Errorf("ValidateName(%q) accepted", bad)
		} else if !strings.Contains(err.Error(), `column "x" of public.t`) {
			t.Errorf("ValidateName(%q) error does not name the source: %v", bad, err)
		}
	}
}

// unquoteIdent inverts QuoteIdent, strictly: it fails on an unescaped
// backtick inside or a dangling backslash.
func unquoteIdent(q string) (string, error) {
	if len(q) < 2 || q[0] != '`' || q[len(q)-1] != '`' {
		return "", errors.New("not backtick-quoted")
	}
	var b strings.Builder
	body := q[1 : len(q)-1]
	for i := 0; i < len(body); i++ {
		switch c := body[i]; c {
		case '\\':
			if i+1 == len(body) {
				return "", errors.New("dangling backslash")
			}
			i++
			b.WriteByte(body[i])
		case '`':
			return "", errors.New("unescaped backtick")
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

func FuzzQuoteIdent(f *testing.F) {
	for _, s := range []string{"", "a", "`", "\\", "\\`", "a.b", "é名", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		q := QuoteIdent(name)
		got, err := unquoteIdent(q)
		if err != nil || got != name {
			t.Fatalf("QuoteIdent(%q) = %s unquotes to %q, %v", name, q, got, err)
		}
		if err := ValidateName("fuzz", name); err == nil && !utf8.ValidString(name) {
			t.Fatalf("ValidateName accepted invalid UTF-8 %q", name)
		}
	})
}

func TestDefaultTableNameInjective(t *testing.T) {
	parts := []string{"", "a", "b", "a.b", "b.c", "a%2Eb", "%", ".", "..", "%2E", "%25", "a.", ".b", "public", "c"}
	seen := map[string][2]string{}
	for _, schema := range parts {
		for _, table := range parts {
			name := DefaultTableName(schema, table)
			if prev, dup := seen[name]; dup {
				t.Errorf("(%q, %q) and (%q, %q) both map to %q", prev[0], prev[1], schema, table, name)
			}
			seen[name] = [2]string{schema, table}
		}
	}
	if got := DefaultTableName("public", "orders"); got != "public.orders" {
		t.Errorf("public.orders -> %q", got)
	}
	if got := DefaultTableName("a.b", "c"); got != "a%2Eb.c" {
		t.Errorf("a.b / c -> %q", got)
	}
	if got := DefaultTarget("db", "public", "orders"); got != (Target{Database: "db", Table: "public.orders"}) {
		t.Errorf("DefaultTarget = %+v", got)
	}
}

func FuzzDefaultTableName(f *testing.F) {
	f.Add("a.b", "c", "a", "b.c")
	f.Add("%2E", "x", ".", "x")
	f.Fuzz(func(t *testing.T, s1, t1, s2, t2 string) {
		if (s1 != s2 || t1 != t2) && DefaultTableName(s1, t1) == DefaultTableName(s2, t2) {
			t.Fatalf("(%q, %q) and (%q, %q) collide as %q", s1, t1, s2, t2, DefaultTableName(s1, t1))
		}
	})
}
