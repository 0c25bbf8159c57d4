package clickhouse

import (
	"errors"
	"strconv"
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
	for _, ok := range []string{"orders", "public.orders", "a`b\\c", "é名", strings.Repeat("a", 200), strings.Repeat(".", 66),
		"a\x00b", "tab\tcol", "\xff\xfe", "\x7f"} {
		if err := ValidateName("test", ok); err != nil {
			t.Errorf("ValidateName(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", strings.Repeat("a", 201), strings.Repeat(".", 67), strings.Repeat("é", 34)} {
		err := ValidateName(`column "x" of public.t`, bad)
		if err == nil {
			t.Errorf("ValidateName(%q) accepted", bad)
		} else if !strings.Contains(err.Error(), `column "x" of public.t`) {
			t.Errorf("ValidateName(%q) error does not name the source: %v", bad, err)
		}
	}
}

// unquoteIdent inverts QuoteIdent and quoteIdentOpaque the way
// ClickHouse reads a backquoted identifier, strictly: it fails on an
// unescaped backtick inside, a dangling backslash or a short \x escape.
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
			if body[i] != 'x' {
				b.WriteByte(body[i])
				continue
			}
			if i+2 >= len(body) {
				return "", errors.New(`short \x escape`)
			}
			v, err := strconv.ParseUint(body[i+1:i+3], 16, 8)
			if err != nil {
				return "", err
			}
			b.WriteByte(byte(v))
			i += 2
		case '`':
			return "", errors.New("unescaped backtick")
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

func TestQuoteIdentOpaque(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"orders", "`orders`"},
		{"public.orders", "`public\\x2eorders`"},
		{"c`)` String, x", "`c\\x60\\x29\\x60\\x20String\\x2c\\x20x`"},
		{"tab\tcol", "`tab\\x09col`"},
		{"é名", "`é名`"},
	} {
		if got := quoteIdentOpaque(tc.in); got != tc.want {
			t.Errorf("quoteIdentOpaque(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
	if got := QuoteIdent("tab\tcol\x7f"); got != "`tab\\x09col\\x7f`" {
		t.Errorf("QuoteIdent of control characters = %s", got)
	}
}

func FuzzQuoteIdent(f *testing.F) {
	for _, s := range []string{"", "a", "`", "\\", "\\`", "a.b", "é名", "\x00", "c`)` String, x", "new`col; DROP TABLE x", "tab\tcol", `\x41`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		for _, quote := range []func(string) string{QuoteIdent, quoteIdentOpaque} {
			q := quote(name)
			got, err := unquoteIdent(q)
			if err != nil || got != name {
				t.Fatalf("%s unquotes to %q, %v; want %q", q, got, err, name)
			}
		}
		// Nothing clickhouse-go's INSERT parsing reads (parentheses,
		// commas, quotes, spaces, dots) is left inside an opaque name.
		q := quoteIdentOpaque(name)
		for _, c := range []byte(q[1 : len(q)-1]) {
			if c < 0x80 && !wordByte(c) && c != '\\' {
				t.Fatalf("opaque quoting of %q writes byte %q", name, c)
			}
		}
		if err := ValidateName("fuzz", name); (err == nil) != (name != "" && escapedLen(name) <= maxEscapedNameBytes) {
			t.Fatalf("ValidateName(%q) = %v", name, err)
		}
	})
}

// deltaLikeName is the longest side table name internal/load makes.
func deltaLikeName(table string) string { return table + "__wsreplaced_4294967295" }

func TestFitName(t *testing.T) {
	long := strings.Repeat("é", 63) // 126 bytes, 378 escaped
	got := fitName(long, maxEscapedNameBytes)
	if escapedLen(got) > maxEscapedNameBytes || !strings.HasPrefix(long, got[:len(got)-10]) || !utf8.ValidString(got) {
		t.Errorf("fitName(63 × é) = %q (%d escaped)", got, escapedLen(got))
	}
	if other := fitName(long+"x", maxEscapedNameBytes); other == got {
		t.Errorf("two long names sharing a prefix fit to the same %q", got)
	}
	if fitName("short", maxEscapedNameBytes) != "short" {
		t.Error("a short name was changed")
	}
	for _, tc := range [][2]string{{long, long}, {long, "t"}, {"s", long}, {strings.Repeat(".", 63), long}} {
		n := DefaultTableName(tc[0], tc[1])
		if escapedLen(n) > maxTableNameBytes || escapedLen(deltaLikeName(n)) > maxEscapedNameBytes {
			t.Errorf("DefaultTableName(%q, %q) = %q is %d bytes escaped", tc[0], tc[1], n, escapedLen(n))
		}
		if schema, _, _ := strings.Cut(n, "."); tc[0] == long && !strings.HasPrefix(schema, "é") || tc[0] == "s" && schema != "s" {
			t.Errorf("DefaultTableName(%q, %q) = %q: the schema part is not kept readable", tc[0], tc[1], n)
		}
	}
}

func TestDefaultTableNameInjective(t *testing.T) {
	parts := []string{"", "a", "b", "a.b", "b.c", "a%2Eb", "%", ".", "..", "%2E", "%25", "a.", ".b", "public", "c", "x__ws", "x_%5Fws", "__rekey", "___ws"}
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
	// No default name is another's side table.
	for _, side := range []string{"__wsdelta_16384", "__wsload_1", "__wsrefill_7", "__rekey", "__rekey_old"} {
		if a, b := DefaultTableName("public", "orders")+side, DefaultTableName("public", "orders"+side); a == b {
			t.Errorf("public.orders%s is both a side table of public.orders and the default name of a table", side)
		}
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
		if n := DefaultTableName(s1, t1); strings.Contains(n, "__ws") || strings.Contains(n, "__rekey") {
			t.Fatalf("(%q, %q) lands as %q, which holds a side table's marker", s1, t1, n)
		}
	})
}
