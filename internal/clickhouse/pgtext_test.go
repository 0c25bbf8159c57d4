package clickhouse

import (
	"strings"
	"testing"
)

func TestParsePGArray(t *testing.T) {
	null := "<NULL>"
	for _, tc := range []struct {
		in   string
		want []string // null marks a NULL element; nil wants an error
	}{
		{"{}", []string{}},
		{" { } ", []string{}},
		{"{1,2,NULL}", []string{"1", "2", null}},
		{"{ 1 , 2 }", []string{"1", "2"}},
		{`{"a b","c\"d","e\\f",""}`, []string{"a b", `c"d`, `e\f`, ""}},
		{`{"NULL",null,NuLL}`, []string{"NULL", null, null}},
		{`{a\,b,c\ }`, []string{"a,b", "c "}},
		{`{\NULL}`, []string{"NULL"}},
		{`{"x" , y}`, []string{"x", "y"}},
		{`{"{}"}`, []string{"{}"}},
		{"{é,ü}", []string{"é", "ü"}},
		{"{{1,2},{3,4}}", nil},
		{"[0:1]={1,2}", nil},
		{"[1:2][1:1]={{1},{2}}", nil},
		{"1,2", nil},
		{"{1,2", nil},
		{"{1,}", nil},
		{"{,1}", nil},
		{`{"a}`, nil},
		{`{"a"b}`, nil},
		{`{a"b"}`, nil},
		{`{a\`, nil},
		{"{1} x", nil},
		{"", nil},
	} {
		got, err := parsePGArray(tc.in)
		if tc.want == nil {
			if err == nil {
				t.Errorf("parsePGArray(%q) = %v, want an error", tc.in, got)
			}
			continue
		}
		if err != nil {
			t.Errorf("parsePGArray(%q): %v", tc.in, err)
			continue
		}
		var gotText []string
		for _, e := range got {
			if e == nil {
				gotText = append(gotText, null)
			} else {
				gotText = append(gotText, *e)
			}
		}
		if strings.Join(gotText, "|") != strings.Join(tc.want, "|") || len(got) != len(tc.want) {
			t.Errorf("parsePGArray(%q) = %q, want %q", tc.in, gotText, tc.want)
		}
	}
}

// formatPGArray renders elements as array_out does: quoted when empty,
// "NULL"-like or containing delimiters, quotes, backslashes or whitespace.
func formatPGArray(elems []*string) string {
	parts := make([]string, len(elems))
	for i, e := range elems {
		switch {
		case e == nil:
			parts[i] = "NULL"
		case *e == "" || strings.EqualFold(*e, "NULL") || strings.ContainsAny(*e, "{},\"\\ \t\n\r\v\f"):
			parts[i] = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(*e) + `"`
		default:
			parts[i] = *e
		}
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// FuzzParsePGArray: the parser never panics, and whatever it accepts
// formats back (array_out's way) to text that parses to the same elements.
func FuzzParsePGArray(f *testing.F) {
	for _, seed := range []string{"{}", "{1,2,NULL}", `{"a b","c\"d",NULL,"NULL"}`, `{a\,b}`, "{{1}}", "[0:1]={1,2}", `{"\\x00ff"}`, "{ x , y }"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		elems, err := parsePGArray(text)
		if err != nil {
			return
		}
		again, err := parsePGArray(formatPGArray(elems))
		if err != nil {
			t.Fatalf("%q parsed to elements whose formatting %q does not parse: %v", text, formatPGArray(elems), err)
		}
		if len(again) != len(elems) {
			t.Fatalf("%q: %d elements, %d after formatting", text, len(elems), len(again))
		}
		for i := range elems {
			if (elems[i] == nil) != (again[i] == nil) || elems[i] != nil && *elems[i] != *again[i] {
				t.Fatalf("%q: element %d changed through formatting", text, i)
			}
		}
	})
}

func FuzzPGTimestampMicros(f *testing.F) {
	for _, seed := range []string{"2024-01-02 03:04:05.123456+00", "0044-03-15 12:00:00+00 BC", "294247-01-10 04:00:54.775806+00", "infinity", "2024-01-02 24:00:00"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		us, err := pgTimestampMicros(text)
		if err != nil || text == "infinity" || text == "-infinity" {
			return
		}
		if us == UnixMicrosInfinity || us == UnixMicrosMinusInfinity {
			t.Fatalf("%q: finite timestamp took a sentinel", text)
		}
	})
}
