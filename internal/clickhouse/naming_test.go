package clickhouse

import (
	"strings"
	"testing"

	"github.com/walshadow/walshadow/internal/desclog"
)

func TestDefaultColumnName(t *testing.T) {
	for _, tc := range []struct {
		in    string
		array bool
		want  string
	}{
		{"n.a", false, "n.a"},
		{"n.a", true, "n%2Ea"},
		{"50%.x", true, "50%25%2Ex"},
		{"plain", true, "plain"},
		{"tab\tcol", false, "tab\tcol"},
	} {
		if got := DefaultColumnName(tc.in, tc.array); got != tc.want {
			t.Errorf("DefaultColumnName(%q, %v) = %q, want %q", tc.in, tc.array, got, tc.want)
		}
	}
	// A 63-byte name of 3-byte characters with the collision suffix and a
	// NULL flag still fits.
	long := strings.Repeat("名", 21)
	taken := map[string]bool{long: true}
	name := freeColumnName(DefaultColumnName(long, true), true, func(n string) bool { return taken[n] })
	if name == long || ValidateName("test", name+NullFlagSuffix) != nil {
		t.Errorf("freeColumnName(63-byte name taken) = %q (%d bytes escaped with its flag)", name, escapedLen(name+NullFlagSuffix))
	}
}

// columnsOf is the ClickHouse columns of an agreement, NULL flags
// included, in order.
func columnsOf(a *Agreed) []string {
	var names []string
	for _, m := range a.Columns {
		for _, c := range Physical([]ColumnSpec{m.Spec}) {
			names = append(names, c.Name)
		}
	}
	return names
}

// FuzzColumnNames: any set of source column names (text or array, in any
// order) is agreed on without an error, under ClickHouse names that are
// distinct (NULL flags and the synthetic columns included), storable,
// free of dots for arrays, and the source's own wherever that is one of
// them; an ADD COLUMN of any name afterwards keeps every earlier name.
func FuzzColumnNames(f *testing.F) {
	f.Add("_lsn|x|x__is_null|n.a|n.b|_lsn__pg", uint8(0b10110), "_lsn__pg")
	f.Add("a__is_null|a|_filenode|_offset", uint8(0b0010), "a__pg")
	f.Add(strings.Repeat("名", 21)+"|"+strings.Repeat("名", 21)+"x", uint8(3), "x")
	f.Fuzz(func(t *testing.T, list string, arrays uint8, added string) {
		seen := map[string]bool{}
		cols := []desclog.Column{intCol(1, "id", true)}
		for i, name := range strings.Split(list, "|") {
			if name == "" || name == "id" || seen[name] || len(name) > 63 || len(cols) > 12 {
				continue
			}
			seen[name] = true
			num := int16(len(cols) + 1)
			if arrays&(1<<(i%8)) != 0 {
				cols = append(cols, arrayCol(num, name, false))
			} else {
				cols = append(cols, textCol(num, name))
			}
		}
		shape := rel([]int16{1}, cols...)
		p, err := Reconcile(Legacy1816, "mirror", TableConfig{}, nil, CHTable{}, shape)
		if err != nil {
			t.Fatalf("agreeing on %q: %v", list, err)
		}
		check := func(a *Agreed) {
			names := map[string]bool{}
			for _, s := range TableSyntheticColumns(Legacy1816, LayoutOf(a.OrderBy)) {
				names[s.Name] = true
			}
			for _, n := range columnsOf(a) {
				if names[n] {
					t.Fatalf("ClickHouse column %q twice (or a synthetic column's name) in %q", n, columnsOf(a))
				}
				names[n] = true
				if err := ValidateName("fuzz", n); err != nil {
					t.Fatal(err)
				}
			}
			// A column lands apart from its default name only when that
			// (or its flag) is walshadow's or an earlier column's.
			earlier := map[string]bool{}
			for _, m := range a.Columns {
				array := m.Spec.Type.Repr == ReprArray
				if array && strings.Contains(m.Spec.Name, ".") {
					t.Fatalf("array column %q lands as %q, a Nested name", m.Source, m.Spec.Name)
				}
				def := DefaultColumnName(m.Source, array)
				clash := syntheticNames()[def] || earlier[def] || array && (syntheticNames()[def+NullFlagSuffix] || earlier[def+NullFlagSuffix])
				if m.Spec.Name != def && !clash {
					t.Fatalf("column %q lands as %q though %q was free: %q", m.Source, m.Spec.Name, def, columnsOf(a))
				}
				earlier[m.Spec.Name] = true
				if array {
					earlier[m.Spec.Name+NullFlagSuffix] = true
				}
			}
		}
		check(p.Agreed)
		if added == "" || added == "id" || seen[added] || len(added) > 63 {
			return
		}
		next := rel([]int16{1}, append(append([]desclog.Column(nil), cols...), arrayCol(int16(len(cols)+1), added, false))...)
		q, err := Reconcile(Legacy1816, "mirror", TableConfig{}, p.Agreed, chAfter(Legacy1816, p.Agreed), next)
		if err != nil {
			t.Fatalf("adding %q to %q: %v", added, list, err)
		}
		check(q.Agreed)
		for i, m := range p.Agreed.Columns {
			if q.Agreed.Columns[i].Spec.Name != m.Spec.Name {
				t.Fatalf("adding %q moved column %q from %q to %q", added, m.Source, m.Spec.Name, q.Agreed.Columns[i].Spec.Name)
			}
		}
	})
}
