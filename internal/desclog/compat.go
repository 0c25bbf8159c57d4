package desclog

import (
	"fmt"
	"slices"
)

// Compatibility classifies whether a later descriptor reads tuples written
// under an earlier one, by physical consequence.
type Compatibility uint8

const (
	// Proven: metadata-only changes (names, defaults, NOT NULL on an
	// existing column, identity) and appended nullable or missing-value
	// columns; the new descriptor reads every old tuple.
	Proven Compatibility = iota
	// Benign: the declared shape drifted but every byte reads the same
	// (typmod, attstorage): decoding reads attlen/attalign/attbyval only and
	// varlena and numeric datums describe themselves.
	Benign
	// Physical: no descriptor reads both formats (type oid, attlen, alignment,
	// byval, attnum reuse, missing-value edit, NOT NULL column appended
	// without a missing value, relkind, persistence or toast relation change).
	Physical
)

func (c Compatibility) String() string {
	switch c {
	case Proven:
		return "proven"
	case Benign:
		return "benign"
	case Physical:
		return "physical"
	}
	return fmt.Sprintf("compatibility(%d)", uint8(c))
}

// Verdict is CompatibleReader's answer: the strongest consequence found and
// the first reason for it.
type Verdict struct {
	Class  Compatibility
	Reason string
}

// CompatibleReader decides whether new (the shape captured at a boundary)
// reads every tuple written under old, i.e. whether biasing new's ValidFrom
// before the boundary is sound. Columns are matched by attnum; both
// descriptors are expected in attnum order (Capture checks).
func CompatibleReader(old, new *Descriptor) Verdict {
	v := Verdict{Class: Proven}
	if old == nil || new == nil {
		return v
	}
	raise := func(c Compatibility, format string, args ...any) {
		if c > v.Class {
			v = Verdict{Class: c, Reason: fmt.Sprintf(format, args...)}
		}
	}
	if old.Kind != new.Kind {
		raise(Physical, "relkind %q -> %q", old.Kind, new.Kind)
	}
	if old.Persistence != new.Persistence {
		raise(Physical, "relpersistence %q -> %q", old.Persistence, new.Persistence)
	}
	// A toast relation created in place (ADD COLUMN of the table's first
	// toastable type) changes nothing for old tuples: none can point into a
	// relation that did not exist. Any other change of it is physical.
	if old.ToastOid != new.ToastOid && old.ToastOid != 0 {
		raise(Physical, "toast relation %d -> %d", old.ToastOid, new.ToastOid)
	}
	var maxOld int16
	if n := len(old.Columns); n > 0 {
		maxOld = old.Columns[n-1].Num
	}
	mergeColumns(old.Columns, new.Columns, func(o, n *Column) {
		switch {
		case n == nil:
			raise(Physical, "column %d (%q) vanished", o.Num, o.Name)
		case o == nil:
			switch {
			case n.Num < maxOld:
				raise(Physical, "attnum %d reused", n.Num)
			case n.Dropped, n.HasMissing, !n.NotNull:
				// Old tuples are shorter: they read the missing value or NULL.
			default:
				raise(Physical, "column %d (%q) appended NOT NULL without a missing value", n.Num, n.Name)
			}
		default:
			compareColumn(o, n, raise)
		}
	})
	return v
}

func compareColumn(o, n *Column, raise func(Compatibility, string, ...any)) {
	if o.Dropped && !n.Dropped {
		raise(Physical, "attnum %d reused (dropped column live again)", n.Num)
	}
	// A dropped column keeps attlen/attalign/attbyval (its slot), so these
	// compare whatever the dropped state.
	if o.Len != n.Len {
		raise(Physical, "column %d (%q) attlen %d -> %d", n.Num, n.Name, o.Len, n.Len)
	}
	if o.Align != n.Align {
		raise(Physical, "column %d (%q) attalign %q -> %q", n.Num, n.Name, o.Align, n.Align)
	}
	if o.ByVal != n.ByVal {
		raise(Physical, "column %d (%q) attbyval %t -> %t", n.Num, n.Name, o.ByVal, n.ByVal)
	}
	if o.Dropped || n.Dropped {
		return // dropping keeps the slot; nothing else is read
	}
	if o.TypeOid != n.TypeOid {
		raise(Physical, "column %d (%q) type %d -> %d", n.Num, n.Name, o.TypeOid, n.TypeOid)
	}
	if o.HasMissing != n.HasMissing || !equalStringPtr(o.Missing, n.Missing) {
		raise(Physical, "column %d (%q) missing value edited", n.Num, n.Name)
	}
	if o.TypMod != n.TypMod {
		raise(Benign, "column %d (%q) typmod %d -> %d", n.Num, n.Name, o.TypMod, n.TypMod)
	}
	if o.Storage != n.Storage {
		raise(Benign, "column %d (%q) attstorage %q -> %q", n.Num, n.Name, o.Storage, n.Storage)
	}
}

// Diff is the attribute-based schema difference from old to new, matched by
// attnum: a live column that is new is Added, one that was live and is now
// dropped or gone is Dropped, and a column live in both is Renamed when its
// name changed and Retyped when its type or typmod did (or, of a
// composite type, its attributes). A nil old diffs
// against no columns.
func Diff(old, new *Descriptor) SchemaDiff {
	var d SchemaDiff
	var oldCols, newCols []Column
	if old != nil {
		oldCols = old.Columns
	}
	if new != nil {
		newCols = new.Columns
	}
	mergeColumns(oldCols, newCols, func(o, n *Column) {
		oldLive := o != nil && !o.Dropped
		newLive := n != nil && !n.Dropped
		switch {
		case newLive && !oldLive:
			d.Added = append(d.Added, *n)
		case oldLive && !newLive:
			d.Dropped = append(d.Dropped, *o)
		case oldLive && newLive:
			if o.Name != n.Name {
				d.Renamed = append(d.Renamed, ColumnRename{Num: n.Num, OldName: o.Name, NewName: n.Name})
			}
			if o.TypeOid != n.TypeOid || o.TypMod != n.TypMod || CompositeChanged(o, n) {
				d.Retyped = append(d.Retyped, ColumnRetype{Num: n.Num, Old: *o, New: *n})
			}
		}
	})
	if old != nil && new != nil {
		d.Key = old.ReplIdent != new.ReplIdent || !slices.Equal(old.KeyAttnums, new.KeyAttnums)
		d.Moved = old.Namespace != new.Namespace || old.Name != new.Name
		d.Persistence = old.Persistence != new.Persistence
	}
	return d
}

// CompositeChanged reports a column of one composite type whose attributes
// changed (ALTER TYPE ... ADD/DROP/ALTER ATTRIBUTE, or ALTER TABLE of a
// table used as a row type): TypeName names them.
func CompositeChanged(o, n *Column) bool {
	return o.TypeOid == n.TypeOid && o.TypeKind == 'c' && n.TypeKind == 'c' && o.TypeName != n.TypeName
}

// mergeColumns walks two attnum-ordered column lists together, calling f
// with the pair sharing an attnum (either side nil when absent).
func mergeColumns(old, new []Column, f func(o, n *Column)) {
	i, j := 0, 0
	for i < len(old) || j < len(new) {
		switch {
		case j == len(new) || (i < len(old) && old[i].Num < new[j].Num):
			f(&old[i], nil)
			i++
		case i == len(old) || new[j].Num < old[i].Num:
			f(nil, &new[j])
			j++
		default:
			f(&old[i], &new[j])
			i++
			j++
		}
	}
}

// Equal reports whether two descriptors are identical in every field (nil
// and empty slices compare equal). Capture records a new entry only for a
// descriptor that is not Equal to its predecessor.
func (d *Descriptor) Equal(o *Descriptor) bool {
	if d == nil || o == nil {
		return d == o
	}
	if d.Oid != o.Oid || d.DbOid != o.DbOid || d.Rfn != o.Rfn || d.NamespaceOid != o.NamespaceOid ||
		d.Namespace != o.Namespace || d.Name != o.Name || d.Kind != o.Kind || d.Persistence != o.Persistence ||
		d.ReplIdent != o.ReplIdent || d.ToastOid != o.ToastOid || d.IdentityIndexOid != o.IdentityIndexOid ||
		!slices.Equal(d.KeyAttnums, o.KeyAttnums) || len(d.Columns) != len(o.Columns) {
		return false
	}
	for i := range d.Columns {
		if !columnEqual(&d.Columns[i], &o.Columns[i]) {
			return false
		}
	}
	return true
}

func columnEqual(a, b *Column) bool {
	return a.Num == b.Num && a.Name == b.Name && a.TypeOid == b.TypeOid && a.TypMod == b.TypMod &&
		a.TypeName == b.TypeName && a.TypeKind == b.TypeKind && a.BaseTypeOid == b.BaseTypeOid &&
		a.ElemTypeOid == b.ElemTypeOid && a.NotNull == b.NotNull && a.Dropped == b.Dropped &&
		a.ByVal == b.ByVal && a.Len == b.Len && a.Align == b.Align && a.Storage == b.Storage &&
		a.HasMissing == b.HasMissing && equalStringPtr(a.Missing, b.Missing)
}

func equalStringPtr(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// cloneDescriptor deep-copies a descriptor so the log never shares memory
// with its caller.
func cloneDescriptor(d *Descriptor) *Descriptor {
	c := *d
	c.KeyAttnums = slices.Clone(d.KeyAttnums)
	if len(c.KeyAttnums) == 0 {
		c.KeyAttnums = nil
	}
	c.Columns = nil
	if len(d.Columns) > 0 {
		c.Columns = make([]Column, len(d.Columns))
		copy(c.Columns, d.Columns)
		for i := range c.Columns {
			if m := c.Columns[i].Missing; m != nil {
				s := *m
				c.Columns[i].Missing = &s
			}
		}
	}
	return &c
}

// validateDescriptor checks what the log relies on: a user relation of a
// captured kind, in the log's database, with columns in strictly increasing
// attnum order starting at 1.
func validateDescriptor(d *Descriptor, db uint32) error {
	if d.Oid < firstNormalObjectID {
		return fmt.Errorf("relation %d: oid below %d is a catalog", d.Oid, firstNormalObjectID)
	}
	if !capturedKind(d.Kind) {
		return fmt.Errorf("relation %d: relkind %q is not captured", d.Oid, d.Kind)
	}
	if d.DbOid != db {
		return fmt.Errorf("relation %d: database %d, the log's is %d", d.Oid, d.DbOid, db)
	}
	if d.Rfn.DbOid != db && hasStorage(d.Rfn) {
		return fmt.Errorf("relation %d: filenode %s outside database %d", d.Oid, d.Rfn, db)
	}
	var prev int16
	for i := range d.Columns {
		if n := d.Columns[i].Num; n <= prev {
			return fmt.Errorf("relation %d: column %q attnum %d out of order (after %d)", d.Oid, d.Columns[i].Name, n, prev)
		}
		prev = d.Columns[i].Num
	}
	return nil
}

// firstNormalObjectID is PostgreSQL's FirstNormalObjectId: user objects
// start here.
const firstNormalObjectID = 16384

// capturedKind reports whether the log records relations of a relkind:
// tables, partitioned tables, materialized views and toast tables. Indexes,
// sequences, views and foreign tables never.
func capturedKind(k byte) bool { return k == 'r' || k == 'p' || k == 'm' || k == 't' }
