package clickhouse

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/walshadow/walshadow/internal/desclog"
)

// DropStrategy says what happens to a relation's ClickHouse table when the
// relation is dropped on the source.
type DropStrategy string

const (
	// DropRetain keeps the table and its data; the agreement is marked
	// Dropped.
	DropRetain DropStrategy = "retain"
	// DropWarn is DropRetain plus a warning the caller logs.
	DropWarn DropStrategy = "warn"
	// DropDrop drops the ClickHouse table.
	DropDrop DropStrategy = "drop"
)

// TableConfig is the operator's per-table settings, all optional. Column
// keys are source column names.
type TableConfig struct {
	// Database is the target database ("" → the output's database).
	Database string
	// Table is the target table ("" → DefaultTableName(schema, table)).
	Table string
	// IncludeColumns pins a subset: only these columns are mapped at the
	// first agreement. Columns the source adds later are still added: they
	// are "added since", not excluded.
	IncludeColumns []string
	// ExcludeColumns are never replicated, whenever they appear.
	ExcludeColumns []string
	// ColumnNames maps a source name to its ClickHouse name, applied when a
	// column is first mapped (a later source rename does not consult it).
	ColumnNames map[string]string
	// Types overrides a column's ClickHouse type, e.g. "String",
	// "Nullable(Decimal(20, 4))", "Int64"; the override is the full type,
	// so it also decides Nullable. See OverrideColumn.
	Types map[string]string
	// OrderBy is the sorting key as ClickHouse column names; it replaces
	// the replica identity key.
	OrderBy []string
	// PartitionBy is a ClickHouse expression, rendered verbatim.
	PartitionBy string
	// Settings are the table's SETTINGS at CREATE.
	Settings []Setting
	// DropStrategy "" means the output's default.
	DropStrategy DropStrategy
	// ChangeLog: a relation without a replica identity key gets a change
	// log (LayoutChangeLog) at its first agreement instead of a table keyed
	// by physical row identity.
	ChangeLog bool
}

// Validate checks the settings that can be checked without the source
// shape or the server: the drop strategy, every name, and that type
// overrides parse. source names the relation in errors.
func (c TableConfig) Validate(source string) error {
	switch c.DropStrategy {
	case "", DropRetain, DropWarn, DropDrop:
	default:
		return fmt.Errorf("table config of %s: drop strategy %q is not one of %q, %q, %q", source, c.DropStrategy, DropRetain, DropWarn, DropDrop)
	}
	if c.Database != "" {
		if err := ValidateName(fmt.Sprintf("configured database of %s", source), c.Database); err != nil {
			return err
		}
	}
	if c.Table != "" {
		if err := ValidateName(fmt.Sprintf("configured table of %s", source), c.Table); err != nil {
			return err
		}
	}
	for _, name := range c.IncludeColumns {
		if name == "" {
			return fmt.Errorf("table config of %s: include_columns has an empty column name", source)
		}
		if slices.Contains(c.ExcludeColumns, name) {
			return fmt.Errorf("table config of %s: column %q is both included and excluded", source, name)
		}
	}
	for _, name := range c.ExcludeColumns {
		if name == "" {
			return fmt.Errorf("table config of %s: exclude_columns has an empty column name", source)
		}
	}
	synthetic := syntheticNames()
	targetOf := make(map[string]string, len(c.ColumnNames))
	for _, from := range sortedKeys(c.ColumnNames) {
		to := c.ColumnNames[from]
		if from == "" {
			return fmt.Errorf("table config of %s: column_names has an empty source column name", source)
		}
		if err := ValidateName(fmt.Sprintf("configured ClickHouse name of column %q of %s", from, source), to); err != nil {
			return err
		}
		if synthetic[to] {
			return fmt.Errorf("table config of %s: column %q is renamed to %q, a name walshadow reserves for its own column", source, from, to)
		}
		if other, dup := targetOf[to]; dup {
			return fmt.Errorf("table config of %s: columns %q and %q are both renamed to %q", source, other, from, to)
		}
		targetOf[to] = from
	}
	for _, column := range sortedKeys(c.Types) {
		if _, _, err := ParseTypeOverride(c.Types[column]); err != nil {
			return fmt.Errorf("table config of %s, column %q: %w", source, column, err)
		}
	}
	for i, name := range c.OrderBy {
		if err := ValidateName(fmt.Sprintf("order_by column of %s", source), name); err != nil {
			return err
		}
		if slices.Contains(c.OrderBy[:i], name) {
			return fmt.Errorf("table config of %s: order_by names column %q twice", source, name)
		}
	}
	for _, s := range c.Settings {
		if !settingName.MatchString(s.Name) {
			return fmt.Errorf("table config of %s: setting name %q is not an identifier", source, s.Name)
		}
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

var decimalType = regexp.MustCompile(`^Decimal\(\s*([0-9]{1,3})\s*,\s*([0-9]{1,3})\s*\)$`)

// ParseTypeOverride parses an operator's type override into the column
// type the output writes and whether it is Nullable. It accepts the types
// MapColumn produces: String, UInt8, Bool, Int16, Int32, Int64, UInt32,
// Float32, Float64, Decimal(p, s), UUID, Date, Date32, DateTime64(6, 'UTC')
// and Array(Nullable(T)) of those, each optionally inside Nullable(...)
// (arrays excepted: ClickHouse has no Nullable(Array)). The Repr is the
// one MapColumn pairs with the type; OverrideColumn refines it by the
// source column (Int32 of a date is days, Int64 of a timestamp µs).
func ParseTypeOverride(s string) (ColumnType, bool, error) {
	text := strings.TrimSpace(s)
	nullable := false
	if inner, ok := unwrapType(text, "Nullable"); ok {
		text, nullable = inner, true
	}
	t, err := parseOverrideType(text, false)
	if err != nil {
		return ColumnType{}, false, fmt.Errorf("type override %q: %w", s, err)
	}
	if nullable && t.Repr == ReprArray {
		return ColumnType{}, false, fmt.Errorf("type override %q: ClickHouse has no Nullable(Array(...))", s)
	}
	return t, nullable, nil
}

// unwrapType returns inner for s = fn(inner).
func unwrapType(s, fn string) (string, bool) {
	rest, ok := strings.CutPrefix(s, fn)
	if !ok {
		return "", false
	}
	rest = strings.TrimSpace(rest)
	if !strings.HasPrefix(rest, "(") || !strings.HasSuffix(rest, ")") {
		return "", false
	}
	return strings.TrimSpace(rest[1 : len(rest)-1]), true
}

func parseOverrideType(s string, inArray bool) (ColumnType, error) {
	switch s {
	case "String":
		return ColumnType{Type: s, Repr: ReprString}, nil
	case "UInt8", "Bool":
		return ColumnType{Type: s, Repr: ReprBool}, nil
	case "Int16", "Int32", "Int64":
		return ColumnType{Type: s, Repr: ReprInt}, nil
	case "UInt32":
		return ColumnType{Type: s, Repr: ReprUInt32}, nil
	case "Float32", "Float64":
		return ColumnType{Type: s, Repr: ReprFloat}, nil
	case "UUID":
		return ColumnType{Type: s, Repr: ReprUUID}, nil
	case "Date", "Date32":
		return ColumnType{Type: s, Repr: ReprDate}, nil
	}
	if strings.ReplaceAll(s, " ", "") == "DateTime64(6,'UTC')" {
		return ColumnType{Type: "DateTime64(6, 'UTC')", Repr: ReprDateTime64}, nil
	}
	if m := decimalType.FindStringSubmatch(s); m != nil {
		precision, _ := strconv.Atoi(m[1])
		scale, _ := strconv.Atoi(m[2])
		if precision < 1 || precision > 76 || scale > precision {
			return ColumnType{}, fmt.Errorf("Decimal(%d, %d) needs 1 <= precision <= 76 and scale <= precision", precision, scale)
		}
		return ColumnType{Type: fmt.Sprintf("Decimal(%d, %d)", precision, scale), Repr: ReprDecimal, Precision: precision, Scale: scale}, nil
	}
	if inner, ok := unwrapType(s, "Array"); ok {
		if inArray {
			return ColumnType{}, fmt.Errorf("multi-dimensional arrays are not replicated")
		}
		elemText, ok := unwrapType(inner, "Nullable")
		if !ok {
			return ColumnType{}, fmt.Errorf("array elements must be Nullable (PostgreSQL arrays hold NULLs): write Array(Nullable(%s))", inner)
		}
		elem, err := parseOverrideType(elemText, true)
		if err != nil {
			return ColumnType{}, err
		}
		return ColumnType{Type: "Array(Nullable(" + elem.Type + "))", Repr: ReprArray, Elem: &elem}, nil
	}
	return ColumnType{}, fmt.Errorf("%q is not a type the output can write (String, UInt8, Bool, Int16, Int32, Int64, UInt32, Float32, Float64, Decimal(p, s), UUID, Date, Date32, DateTime64(6, 'UTC'), Array(Nullable(T)))", s)
}

// OverrideColumn is ParseTypeOverride for source column c on dialect d:
// the Repr follows the source type where one ClickHouse type has two
// meanings (String of a bytea is its raw bytes; Int32 of a date is days
// since 1970-01-01, ReprUnixDays; Int64 of a timestamp is µs since the
// epoch, ReprUnixMicros; the same for array elements), integer widths that
// cannot hold a date or timestamp are refused, and types the server lacks
// are refused. Other pairings (say uuid → Int64) are the operator's call:
// values that do not convert fail closed at insert.
func OverrideColumn(d Dialect, c desclog.Column, override string) (ColumnType, bool, error) {
	t, nullable, err := ParseTypeOverride(override)
	if err != nil {
		return ColumnType{}, false, fmt.Errorf("column %q: %w", c.Name, err)
	}
	scalarOid := c.TypeOid
	if c.TypeKind == 'd' {
		scalarOid = c.BaseTypeOid
	}
	switch {
	case t.Repr == ReprArray && !isArray(c):
		return ColumnType{}, false, fmt.Errorf("column %q of type %s: type override %q is an array", c.Name, c.TypeName, override)
	case t.Repr == ReprArray:
		elem, err := refineRepr(*t.Elem, c.ElemTypeOid)
		if err != nil {
			return ColumnType{}, false, fmt.Errorf("column %q of type %s: type override %q: %w", c.Name, c.TypeName, override, err)
		}
		t.Elem = &elem
	case isArray(c) && t.Type != "String":
		return ColumnType{}, false, fmt.Errorf("column %q of type %s: an array can be overridden to String or Array(Nullable(T)), not %q", c.Name, c.TypeName, override)
	default:
		if t, err = refineRepr(t, scalarOid); err != nil {
			return ColumnType{}, false, fmt.Errorf("column %q of type %s: type override %q: %w", c.Name, c.TypeName, override, err)
		}
	}
	if missing := d.missingType(t); missing != "" {
		return ColumnType{}, false, fmt.Errorf("column %q: type override %q: ClickHouse %s has no %s", c.Name, override, d.Version, missing)
	}
	return t, nullable, nil
}

// refineRepr picks the Repr of a scalar override type for a source type.
func refineRepr(t ColumnType, sourceOid uint32) (ColumnType, error) {
	switch sourceOid {
	case oidBytea:
		if t.Type == "String" {
			t.Repr = ReprBytes
		}
	case oidDate:
		switch t.Type {
		case "Int32":
			t.Repr = ReprUnixDays
		case "Int16", "Int64":
			return ColumnType{}, fmt.Errorf("a date as an integer is Int32 days since 1970-01-01")
		}
	case oidTimestamp, oidTimestamptz:
		switch t.Type {
		case "Int64":
			t.Repr = ReprUnixMicros
		case "Int16", "Int32":
			return ColumnType{}, fmt.Errorf("a timestamp as an integer is Int64 microseconds since 1970-01-01 UTC")
		}
	}
	return t, nil
}

// missingType names the first part of t the server cannot store ("" when
// it has them all).
func (d Dialect) missingType(t ColumnType) string {
	switch {
	case t.Elem != nil:
		return d.missingType(*t.Elem)
	case t.Type == "Bool" && !d.Bool:
		return "Bool"
	case t.Type == "Date32" && !d.Date32:
		return "Date32"
	case t.Repr == ReprDateTime64 && !d.DateTime64:
		return "DateTime64"
	case t.Repr == ReprDecimal && t.Precision > 38 && !d.Decimal256:
		return fmt.Sprintf("Decimal with precision %d (limit 38)", t.Precision)
	}
	return ""
}
