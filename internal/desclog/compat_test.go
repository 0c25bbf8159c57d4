package desclog

import (
	"strings"
	"testing"
)

func TestCompatibleReaderToastReplaced(t *testing.T) {
	old := table(16400, 16400, "t", notNull(col(1, "id", typInt4)), col(2, "name", typText))
	old.ToastOid = 16403
	n := cloneDescriptor(&old)
	n.ToastOid = 16999
	if v := CompatibleReader(&old, n); v.Class != Physical || !strings.Contains(v.Reason, "toast relation 16403 -> 16999") {
		t.Fatalf("verdict %v %q", v.Class, v.Reason)
	}
}

func TestCompatibleReader(t *testing.T) {
	base := table(16400, 16400, "t", notNull(col(1, "id", typInt4)), col(2, "name", typText), col(3, "amount", typNumeric))
	mut := func(f func(d *Descriptor)) *Descriptor {
		d := cloneDescriptor(&base)
		f(d)
		return d
	}
	cases := []struct {
		name   string
		new    *Descriptor
		class  Compatibility
		reason string // substring
	}{
		{"identical", mut(func(d *Descriptor) {}), Proven, ""},
		{"table rename", mut(func(d *Descriptor) { d.Name = "u" }), Proven, ""},
		{"namespace move", mut(func(d *Descriptor) { d.Namespace, d.NamespaceOid = "s", 17000 }), Proven, ""},
		{"column rename", mut(func(d *Descriptor) { d.Columns[1].Name = "label" }), Proven, ""},
		{"set not null on existing column", mut(func(d *Descriptor) { d.Columns[1].NotNull = true }), Proven, ""},
		{"replica identity", mut(func(d *Descriptor) { d.ReplIdent, d.KeyAttnums = 'f', nil }), Proven, ""},
		{"append nullable", mut(func(d *Descriptor) { d.Columns = append(d.Columns, col(4, "x", typInt8)) }), Proven, ""},
		{"append with missing value", mut(func(d *Descriptor) {
			d.Columns = append(d.Columns, withMissing(notNull(col(4, "x", typInt8)), "7"))
		}), Proven, ""},
		{"append dropped", mut(func(d *Descriptor) { d.Columns = append(d.Columns, droppedCol(col(4, "x", typInt8))) }), Proven, ""},
		{"drop column keeps slot", mut(func(d *Descriptor) { d.Columns[1] = droppedCol(d.Columns[1]) }), Proven, ""},
		{"typmod", mut(func(d *Descriptor) { d.Columns[2].TypMod = 655366 }), Benign, "typmod"},
		{"attstorage", mut(func(d *Descriptor) { d.Columns[1].Storage = 'e' }), Benign, "attstorage"},
		{"type oid", mut(func(d *Descriptor) { d.Columns[1].TypeOid = typVarchar }), Physical, "type 25 -> 1043"},
		{"attlen", mut(func(d *Descriptor) { d.Columns[0] = notNull(col(1, "id", typInt8)) }), Physical, "attlen 4 -> 8"},
		{"alignment", mut(func(d *Descriptor) { d.Columns[1].Align = 'd' }), Physical, "attalign"},
		{"byval", mut(func(d *Descriptor) { d.Columns[0].ByVal = false }), Physical, "attbyval"},
		{"missing value edit", mut(func(d *Descriptor) { d.Columns[2] = withMissing(d.Columns[2], "1") }), Physical, "missing value"},
		{"append not null without missing", mut(func(d *Descriptor) { d.Columns = append(d.Columns, notNull(col(4, "x", typInt8))) }), Physical, "NOT NULL"},
		{"relkind", mut(func(d *Descriptor) { d.Kind = 'm' }), Physical, "relkind"},
		{"persistence", mut(func(d *Descriptor) { d.Persistence = 'u' }), Physical, "relpersistence"},
		{"toast relation created in place", mut(func(d *Descriptor) { d.ToastOid = 16999 }), Proven, ""},
		{"column vanished", mut(func(d *Descriptor) { d.Columns = d.Columns[:2] }), Physical, "vanished"},
		{"physical beats benign", mut(func(d *Descriptor) { d.Columns[2].TypMod = 5; d.Kind = 'm' }), Physical, "relkind"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := CompatibleReader(&base, c.new)
			if v.Class != c.class || !strings.Contains(v.Reason, c.reason) {
				t.Fatalf("verdict %s %q, want %s containing %q", v.Class, v.Reason, c.class, c.reason)
			}
		})
	}
	t.Run("dropped column live again", func(t *testing.T) {
		old := mut(func(d *Descriptor) { d.Columns[1] = droppedCol(d.Columns[1]) })
		if v := CompatibleReader(old, &base); v.Class != Physical || !strings.Contains(v.Reason, "reused") {
			t.Fatalf("verdict %+v", v)
		}
	})
	t.Run("gap filled", func(t *testing.T) {
		old := mut(func(d *Descriptor) { d.Columns = []Column{d.Columns[0], d.Columns[2]} })
		if v := CompatibleReader(old, &base); v.Class != Physical || !strings.Contains(v.Reason, "attnum 2 reused") {
			t.Fatalf("verdict %+v", v)
		}
	})
	t.Run("nil predecessor", func(t *testing.T) {
		if v := CompatibleReader(nil, &base); v.Class != Proven {
			t.Fatalf("verdict %+v", v)
		}
	})
}

func TestDiff(t *testing.T) {
	old := table(16400, 16400, "t", col(1, "id", typInt4), col(2, "name", typText), col(3, "gone", typInt8), col(4, "n", typNumeric))
	new := table(16400, 16400, "t2", col(1, "id", typInt4), col(2, "label", typText), droppedCol(col(3, "gone", typInt8)), col(4, "n", typNumeric), col(5, "added", typBool))
	new.Columns[3].TypMod = 655366
	d := Diff(&old, &new)
	if len(d.Added) != 1 || d.Added[0].Num != 5 || d.Added[0].Name != "added" {
		t.Errorf("added %+v", d.Added)
	}
	if len(d.Dropped) != 1 || d.Dropped[0].Num != 3 || d.Dropped[0].Name != "gone" {
		t.Errorf("dropped %+v", d.Dropped)
	}
	if len(d.Renamed) != 1 || d.Renamed[0] != (ColumnRename{Num: 2, OldName: "name", NewName: "label"}) {
		t.Errorf("renamed %+v", d.Renamed)
	}
	if len(d.Retyped) != 1 || d.Retyped[0].Num != 4 || d.Retyped[0].New.TypMod != 655366 || d.Retyped[0].Old.TypMod != -1 {
		t.Errorf("retyped %+v", d.Retyped)
	}
	if !Diff(&old, &old).Empty() {
		t.Error("self diff not empty")
	}
	// A table rename alone is no attribute change: it is Moved.
	renamed := old
	renamed.Name = "other"
	if d := Diff(&old, &renamed); d.Empty() || !d.Moved || len(d.Added)+len(d.Dropped)+len(d.Renamed)+len(d.Retyped) != 0 || d.Key || d.Persistence {
		t.Errorf("table rename: %+v, want Moved only", d)
	}
	unlogged := old
	unlogged.Persistence = 'u'
	if d := Diff(&old, &unlogged); !d.Persistence || d.Moved || len(d.Added)+len(d.Dropped) != 0 {
		t.Errorf("SET UNLOGGED: %+v, want Persistence only", d)
	}
	if a := Diff(nil, &old); len(a.Added) != 4 {
		t.Errorf("diff from nothing: %+v", a)
	}
	// A column of a composite type whose attributes changed (ALTER TYPE):
	// same type oid, its TypeName names other attributes.
	composite := func(name string) Descriptor {
		c := Column{Num: 1, Name: "c", TypeOid: 40001, TypMod: -1, TypeKind: 'c', TypeName: name, Len: -1, Align: 'd', Storage: 'x'}
		return table(16410, 16410, "uses_pair", c)
	}
	before, after := composite("pair (a integer)"), composite("pair (b integer)")
	if r := Diff(&before, &after).Retyped; len(r) != 1 || r[0].Old.TypeName != "pair (a integer)" || r[0].New.TypeName != "pair (b integer)" {
		t.Errorf("composite type's attributes changed: retyped %+v, want the column", r)
	}
	if !Diff(&before, &before).Empty() {
		t.Error("an unchanged composite column diffs")
	}
	// A column retyped by a rewrite keeps its attnum.
	retyped := table(16400, 16401, "t", col(1, "id", typInt8))
	if r := Diff(&old, &retyped).Retyped; len(r) != 1 || r[0].Old.TypeOid != typInt4 || r[0].New.TypeOid != typInt8 {
		t.Errorf("rewrite retype: %+v", r)
	}
}

func TestDescriptorEqual(t *testing.T) {
	a := table(16400, 16400, "t", withMissing(col(1, "id", typInt4), "1"))
	b := *cloneDescriptor(&a)
	if !a.Equal(&b) {
		t.Fatal("clone not equal")
	}
	b.Columns[0].Missing = new("2")
	if a.Equal(&b) {
		t.Fatal("missing value ignored")
	}
	c := *cloneDescriptor(&a)
	c.KeyAttnums = []int16{}
	if !a.Equal(&c) {
		t.Fatal("nil vs empty key attnums differ")
	}
	c.KeyAttnums = []int16{1}
	if a.Equal(&c) {
		t.Fatal("key attnums ignored")
	}
	var nilDesc *Descriptor
	if !nilDesc.Equal(nil) || a.Equal(nil) {
		t.Fatal("nil handling")
	}
}
