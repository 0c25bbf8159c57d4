package clickhouse

// How the reconciler maps one source column: its ClickHouse name and type
// when first mapped, a rename followed or kept, a type change kept,
// modified or reloaded.

import (
	"fmt"
	"strings"

	"github.com/walshadow/walshadow/internal/desclog"
)

// chName is the name order_by and include/exclude settings know column c
// by: its configured ClickHouse name, else its source name.
func (r *reconciler) chName(c desclog.Column) string {
	if name, ok := r.cfg.ColumnNames[c.Name]; ok {
		return name
	}
	return c.Name
}

// mapType is c's ClickHouse type and nullability: the type map, or the
// configured override.
func (r *reconciler) mapType(c desclog.Column, inKey bool) (ColumnType, bool, error) {
	if override, ok := r.cfg.Types[c.Name]; ok {
		t, nullable, err := OverrideColumn(r.d, c, override)
		if err != nil {
			return ColumnType{}, false, fmt.Errorf("%s: %w", r.source, err)
		}
		if t.Repr == ReprArray {
			// An array's NULLs go to its NULL flag column.
			nullable = !c.NotNull && !inKey
		}
		return t, nullable, nil
	}
	return MapColumn(r.d, c, inKey), !c.NotNull && !inKey, nil
}

// mapColumn maps c freshly: its configured ClickHouse name, which must be
// free, else the first free name of its own (naming.go).
func (r *reconciler) mapColumn(c desclog.Column, inKey bool) (MappedColumn, error) {
	what := fmt.Sprintf("column %q of %s", c.Name, r.source)
	t, nullable, err := r.mapType(c, inKey)
	if err != nil {
		return MappedColumn{}, err
	}
	array := t.Repr == ReprArray
	name, configured := r.cfg.ColumnNames[c.Name]
	if !configured {
		name = freeColumnName(DefaultColumnName(c.Name, array), array, func(n string) bool {
			_, taken := r.taken(n, nil)
			return taken
		})
		if name != c.Name {
			r.notef("%s lands as ClickHouse column %s: ClickHouse would not read its own name back as this column (an array's dot, a name taken by another column, its NULL flag or walshadow's, or too long)",
				what, QuoteIdent(name))
		}
	}
	if err := ValidateName(what, name); err != nil {
		return MappedColumn{}, err
	}
	spec := ColumnSpec{Name: name, Type: t, Nullable: nullable}
	if configured {
		for _, n := range []string{name, spec.NullFlag()} {
			switch other, taken := r.taken(n, nil); {
			case syntheticNames()[n]:
				return MappedColumn{}, fmt.Errorf("%s is configured as ClickHouse column %q, which is walshadow's: map it to another name (column_names) or exclude it", what, n)
			case taken:
				return MappedColumn{}, fmt.Errorf("%s and column %q would both be ClickHouse column %q: map one to another name (column_names)", what, other, n)
			}
		}
		if flag := spec.NullFlag(); flag != "" {
			if err := ValidateName(what+"'s NULL flag", flag); err != nil {
				return MappedColumn{}, err
			}
		}
	}
	if c.HasMissing && c.Missing != nil {
		if spec.Default, err = DefaultLiteral(r.d, t, *c.Missing); err != nil {
			return MappedColumn{}, fmt.Errorf("default of %s: %w", what, err)
		}
	}
	return MappedColumn{Attnum: c.Num, Source: c.Name, Spec: spec, Key: inKey}, nil
}

// taken reports which mapped column other than except (nil: any) has
// ClickHouse column name as its own or as its NULL flag (an array's
// flag name is kept for it even while the array is NOT NULL: a DROP NOT
// NULL adds the flag): its source name. No column takes "".
func (r *reconciler) taken(name string, except *MappedColumn) (string, bool) {
	if name == "" {
		return "", false
	}
	for i := range r.next.Columns {
		m := &r.next.Columns[i]
		if m != except && (m.Spec.Name == name || m.Spec.Type.Repr == ReprArray && m.Spec.Name+NullFlagSuffix == name) {
			return m.Source, true
		}
	}
	return "", false
}

// rename follows a source rename of mapped column m where it can: a
// column that lands under its source name's default ClickHouse name
// (DefaultColumnName) moves to the new name's, unless that is taken.
func (r *reconciler) rename(m *MappedColumn, old, c desclog.Column) error {
	keep := func(why string) {
		r.notef("column %q of %s renamed to %q on the source: kept as %s (%s)", old.Name, r.source, c.Name, QuoteIdent(m.Spec.Name), why)
	}
	array := m.Spec.Type.Repr == ReprArray
	renamed := m.Spec
	renamed.Name = DefaultColumnName(c.Name, array)
	_, present := r.chTypes[m.Spec.Name]
	_, newNameOnCH := r.chTypes[renamed.Name]
	flag, newFlag := m.Spec.NullFlag(), renamed.NullFlag()
	_, flagPresent := r.chTypes[flag]
	_, newFlagOnCH := r.chTypes[newFlag]
	_, nameTaken := r.taken(renamed.Name, m)
	_, flagTaken := r.taken(renamed.Name+NullFlagSuffix, m)
	switch {
	case m.Spec.Name != DefaultColumnName(old.Name, array):
		keep("its ClickHouse name is not its source name's (configured, or mapped apart)")
	case m.Key:
		keep("ClickHouse cannot rename a sorting key column")
	case syntheticNames()[renamed.Name] || array && (syntheticNames()[renamed.Name+NullFlagSuffix] || flagTaken) || nameTaken:
		keep(fmt.Sprintf("the name %s is taken by another column", QuoteIdent(renamed.Name)))
	case !present && !flagPresent:
		// Nothing to rename on ClickHouse (or an earlier run renamed it
		// already): heal adds or adopts it under the new name.
		m.Spec.Name = renamed.Name
	case newNameOnCH && present || newFlag != "" && newFlagOnCH && flagPresent:
		keep(fmt.Sprintf("ClickHouse column %s already exists", QuoteIdent(renamed.Name)))
	case !r.d.RenameColumn:
		keep(fmt.Sprintf("no RENAME COLUMN on %s", r.d.Version))
	default:
		// Each present column is renamed (a NULL flag with its array); one
		// an earlier run renamed already, or never added, is healed.
		for _, p := range [][2]string{{m.Spec.Name, renamed.Name}, {flag, newFlag}} {
			if _, on := r.chTypes[p[0]]; p[0] == "" || !on {
				continue
			}
			sql, err := RenameColumn(r.d, r.next.Target, p[0], p[1])
			if err != nil {
				return err
			}
			r.plan.Statements = append(r.plan.Statements, sql)
			r.chTypes[p[1]] = r.chTypes[p[0]]
			delete(r.chTypes, p[0])
		}
		m.Spec.Name = renamed.Name
	}
	return nil
}

// retype maps a column whose source type (or nullability) changed again
// and applies ClassifyTypeChange's decision: keep, MODIFY COLUMN, or a
// reload (the column keeps its old mapping).
func (r *reconciler) retype(m *MappedColumn, old, c desclog.Column) error {
	t, nullable, err := r.mapType(c, m.Key)
	if err != nil {
		return err
	}
	// SET NOT NULL leaves a Nullable column able to hold every value.
	remapped := ColumnSpec{Name: m.Spec.Name, Type: t, Nullable: nullable || m.Spec.Nullable && !m.Key, Default: m.Spec.Default}
	change := ClassifyTypeChange(old, c, m.Spec, remapped, m.Key)
	if change.Action == TypeChangeModify && partitionMentions(r.cfg.PartitionBy, m.Spec.Name) {
		change = TypeChange{Action: TypeChangeReload, Reason: fmt.Sprintf("%s may be in the partition key (partition_by %s), which ClickHouse cannot modify", QuoteIdent(m.Spec.Name), r.cfg.PartitionBy)}
	}
	switch change.Action {
	case TypeChangeKeep:
		// Same type and representation (ClassifyTypeChange): only the
		// ColumnType's details (a fallback's Reason) may be new.
		if c.TypeName != old.TypeName {
			r.notef("column %q of %s changed type from %s to %s: ClickHouse column %s kept as %s (%s)",
				c.Name, r.source, old.TypeName, c.TypeName, QuoteIdent(m.Spec.Name), m.Spec.TypeSQL(), change.Reason)
		}
		m.Spec.Type = t
	case TypeChangeModify:
		if flag := remapped.NullFlag(); flag != "" && m.Spec.NullFlag() == "" {
			// DROP NOT NULL of an array: its NULL flag column, 0 for
			// every row the table holds.
			if _, present := r.chTypes[flag]; !present {
				spec := remapped.NullFlagSpec()
				spec.Default = "0"
				sql, _, err := AddColumn(r.d, r.next.Target, spec)
				if err != nil {
					return err
				}
				r.plan.Statements = append(r.plan.Statements, sql)
				r.chTypes[flag] = spec.TypeSQL()
			}
			r.notef("column %q of %s dropped NOT NULL: ClickHouse column %s is now %s, its NULLs in %s (%s)",
				c.Name, r.source, QuoteIdent(m.Spec.Name), remapped.TypeSQL(), QuoteIdent(flag), change.Reason)
			m.Spec = remapped
			return nil
		}
		if remapped.Default != "" {
			// The values' own conversion: the default stays the value rows
			// written before the column existed have.
			remapped.Default = "CAST(" + m.Spec.Default + " AS " + t.Type + ")"
		}
		// Only a column ClickHouse holds with the old type is modified:
		// an absent one is added by heal with the new type, one already
		// of the new type was modified by an earlier run, and heal refuses
		// one of a third type.
		if chType, present := r.chTypes[m.Spec.Name]; present && normalizeType(chType) == normalizeType(m.Spec.TypeSQL()) {
			sql, err := ModifyColumn(r.d, r.next.Target, remapped)
			if err != nil {
				return err
			}
			r.plan.Statements = append(r.plan.Statements, sql)
			r.chTypes[m.Spec.Name] = remapped.TypeSQL()
		}
		what := fmt.Sprintf("changed type from %s to %s", old.TypeName, c.TypeName)
		if old.TypeName == c.TypeName {
			what = "dropped NOT NULL"
		}
		r.notef("column %q of %s %s: ClickHouse column %s is now %s (%s)",
			c.Name, r.source, what, QuoteIdent(m.Spec.Name), remapped.TypeSQL(), change.Reason)
		m.Spec = remapped
	default:
		r.plan.Reload = append(r.plan.Reload, &TypeChangeError{Source: r.source, Column: c.Name,
			OldType: m.Spec.TypeSQL(), NewType: remapped.TypeSQL(), OldSourceType: old.TypeName, NewSourceType: c.TypeName, Reason: change.Reason})
	}
	return nil
}

// partitionMentions: the partition expression may use column name (quoted
// or bare; a false positive only costs a reload).
func partitionMentions(partitionBy, name string) bool {
	return partitionBy != "" && (strings.Contains(partitionBy, name) || strings.Contains(partitionBy, QuoteIdent(name)))
}
