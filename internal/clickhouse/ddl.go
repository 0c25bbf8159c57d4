package clickhouse

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/walshadow/walshadow/internal/desclog"
)

// Names of the synthetic columns every replicated table carries.
const (
	ColLSN       = "_lsn"
	ColXID       = "_xid"
	ColCommitTS  = "_commit_ts"    // DateTime64(6,'UTC') where the server has it
	ColCommitTSu = "_commit_ts_us" // UInt64 µs since the Unix epoch otherwise
	ColIsDeleted = "_is_deleted"
	// ColSeq numbers the row images of one WAL record (a multi-insert, an
	// update's delete and insert images) in a change log.
	ColSeq = "_seq"
	// ColFilenode, ColBlock and ColOffset are a row's physical identity in
	// a table without a replica identity key (LayoutPhysical): the heap's
	// relfilenode (its storage generation) and the tuple's TID.
	ColFilenode = "_filenode"
	ColBlock    = "_block"
	ColOffset   = "_offset"
)

// Layout is how a ClickHouse table identifies the rows of its relation.
type Layout uint8

const (
	// LayoutKeyed: ordered by the replica identity key (or order_by): one
	// row per key.
	LayoutKeyed Layout = iota
	// LayoutPhysical: a relation without a replica identity key, ordered
	// by each row's physical identity (_filenode, _block, _offset): one
	// row per live tuple, duplicates included; UPDATE and DELETE name the
	// tuple they change.
	LayoutPhysical
	// LayoutChangeLog: every row image, ordered by (_lsn, _seq); the table
	// is the inserted images minus the deleted ones. What tables without a
	// key got before LayoutPhysical, kept for those tables.
	LayoutChangeLog
)

// PhysicalKey is the sorting key of a LayoutPhysical table.
var PhysicalKey = []string{ColFilenode, ColBlock, ColOffset}

// LayoutOf is the layout of a table with sorting key orderBy (as an
// agreement records it: empty for a change log).
func LayoutOf(orderBy []string) Layout {
	switch {
	case len(orderBy) == 0:
		return LayoutChangeLog
	case slices.Equal(orderBy, PhysicalKey):
		return LayoutPhysical
	}
	return LayoutKeyed
}

// ColumnSpec is one target column as rendered in DDL.
type ColumnSpec struct {
	Name     string
	Type     ColumnType
	Nullable bool
	// Default is a rendered ClickHouse expression (DefaultLiteral), "" for
	// none.
	Default string
}

// TypeSQL is the column's full type, Nullable wrapper included. A
// Nullable array has none (ClickHouse has no Nullable(Array(...))): its
// NULLs are in its NULL flag column (NullFlag).
func (c ColumnSpec) TypeSQL() string {
	switch {
	case !c.Nullable || c.Type.Repr == ReprArray:
		return c.Type.Type
	case strings.HasPrefix(c.Type.Type, lowCardinality):
		// LowCardinality(Nullable(T)): the Nullable wrapper goes inside.
		return lowCardinality + "Nullable(" + strings.TrimPrefix(c.Type.Type, lowCardinality) + ")"
	}
	return "Nullable(" + c.Type.Type + ")"
}

const lowCardinality = "LowCardinality("

// NullFlagSuffix ends the name of a Nullable array's NULL flag column.
const NullFlagSuffix = "__is_null"

// NullFlag is the name of the column that says which of c's values are
// NULL, "" when c has none. A Nullable array has one: ClickHouse arrays
// cannot be NULL, so a NULL array is written as [] with <name>__is_null =
// 1 and every other value with 0: '{}' and NULL stay apart.
func (c ColumnSpec) NullFlag() string {
	if c.Nullable && c.Type.Repr == ReprArray {
		return c.Name + NullFlagSuffix
	}
	return ""
}

// NullFlagSpec is the spec of c's NULL flag column (c.NullFlag() != "").
// Its DEFAULT is what the rows a table held before the column was added
// are: NULL (1) unless c has a DEFAULT of its own.
func (c ColumnSpec) NullFlagSpec() ColumnSpec {
	def := "1"
	if c.Default != "" {
		def = "0"
	}
	return ColumnSpec{Name: c.NullFlag(), Type: ColumnType{Type: "UInt8", Repr: ReprInt}, Default: def}
}

// Logical folds values read from Physical(cols) back into one value per
// column of cols: a Nullable array whose NULL flag is set is nil.
func Logical(cols []ColumnSpec, values []any) []any {
	if len(values) == len(cols) {
		return values
	}
	out := make([]any, len(cols))
	j := 0
	for i, c := range cols {
		out[i] = values[j]
		j++
		if c.NullFlag() != "" {
			if flag, ok := values[j].(uint8); ok && flag != 0 {
				out[i] = nil
			}
			j++
		}
	}
	return out
}

// Physical are cols as ClickHouse columns, in order: each column, and
// after a Nullable array its NULL flag column.
func Physical(cols []ColumnSpec) []ColumnSpec {
	n := len(cols)
	for _, c := range cols {
		if c.NullFlag() != "" {
			n++
		}
	}
	if n == len(cols) {
		return cols
	}
	out := make([]ColumnSpec, 0, n)
	for _, c := range cols {
		out = append(out, c)
		if c.NullFlag() != "" {
			out = append(out, c.NullFlagSpec())
		}
	}
	return out
}

func (c ColumnSpec) definition() string {
	s := QuoteIdent(c.Name) + " " + c.TypeSQL()
	if c.Default != "" {
		s += " DEFAULT " + c.Default
	}
	return s
}

// ColumnSpecFor builds the spec of source column c of relation source
// (named in errors): the mapped type, Nullable unless NOT NULL or in the
// key, and a DEFAULT from the column's missing value when it has a non-NULL
// one.
func ColumnSpecFor(d Dialect, source string, c desclog.Column, inKey bool) (ColumnSpec, error) {
	what := fmt.Sprintf("column %q of %s", c.Name, source)
	if err := ValidateName(what, c.Name); err != nil {
		return ColumnSpec{}, err
	}
	spec := ColumnSpec{Name: c.Name, Type: MapColumn(d, c, inKey), Nullable: !c.NotNull && !inKey}
	if c.HasMissing && c.Missing != nil {
		lit, err := DefaultLiteral(d, spec.Type, *c.Missing)
		if err != nil {
			return ColumnSpec{}, fmt.Errorf("%s: %w", what, err)
		}
		spec.Default = lit
	}
	return spec, nil
}

// SyntheticColumns are the columns the output adds to every table, in
// order: _lsn UInt64, _xid UInt32, the commit time and _is_deleted UInt8.
// The commit time is _commit_ts DateTime64(6,'UTC') where the server has
// DateTime64, else _commit_ts_us UInt64 (µs since 1970-01-01 UTC): the name
// says the unit, and microseconds survive on every dialect.
func SyntheticColumns(d Dialect) []ColumnSpec {
	commit := ColumnSpec{Name: ColCommitTSu, Type: ColumnType{Type: "UInt64", Repr: ReprUnixMicros}}
	if d.DateTime64 {
		commit = ColumnSpec{Name: ColCommitTS, Type: ColumnType{Type: "DateTime64(6, 'UTC')", Repr: ReprDateTime64}}
	}
	return []ColumnSpec{
		{Name: ColLSN, Type: ColumnType{Type: "UInt64", Repr: ReprInt}},
		{Name: ColXID, Type: ColumnType{Type: "UInt32", Repr: ReprUInt32}},
		commit,
		{Name: ColIsDeleted, Type: ColumnType{Type: "UInt8", Repr: ReprInt}},
	}
}

// TableSyntheticColumns are the columns the output adds to a table of
// layout l: SyntheticColumns, plus _seq UInt32 in a change log, plus
// _filenode UInt32, _block UInt32 and _offset UInt16 in a physical one.
func TableSyntheticColumns(d Dialect, l Layout) []ColumnSpec {
	cols := SyntheticColumns(d)
	switch l {
	case LayoutChangeLog:
		cols = append(cols, ColumnSpec{Name: ColSeq, Type: ColumnType{Type: "UInt32", Repr: ReprUInt32}})
	case LayoutPhysical:
		cols = append(cols,
			ColumnSpec{Name: ColFilenode, Type: ColumnType{Type: "UInt32", Repr: ReprUInt32}},
			ColumnSpec{Name: ColBlock, Type: ColumnType{Type: "UInt32", Repr: ReprUInt32}},
			ColumnSpec{Name: ColOffset, Type: ColumnType{Type: "UInt16", Repr: ReprInt}})
	}
	return cols
}

// Setting is one table-level SETTINGS entry.
type Setting struct {
	Name  string
	Value string
}

// TableOptions are the operator's per-table knobs.
type TableOptions struct {
	// OrderBy replaces the key as the sorting key (column names, quoted
	// here; they must exist and be non-Nullable).
	OrderBy []string
	// PartitionBy is a ClickHouse expression from trusted configuration,
	// rendered verbatim ("" for none).
	PartitionBy string
	// Settings are rendered as SETTINGS name = value; numeric values stay
	// bare, others become string literals.
	Settings []Setting
	// ReplicaPath is the ZooKeeper path of a Replicated table
	// (Dialect.Replicated); "" for a new random one (ReplicaPath()).
	ReplicaPath string
}

var settingName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// CreateDatabase is CREATE DATABASE IF NOT EXISTS.
func CreateDatabase(database string) (string, error) {
	if err := ValidateName("target database", database); err != nil {
		return "", err
	}
	return "CREATE DATABASE IF NOT EXISTS " + QuoteIdent(database), nil
}

// CreateTable renders CREATE TABLE IF NOT EXISTS for cols plus the
// synthetic columns.
//
// With a key (or OrderBy) the engine is ReplacingMergeTree(_lsn,
// _is_deleted) where the server takes the is_deleted argument, else
// ReplacingMergeTree(_lsn), ordered by the key: the newest change of a key
// wins and SELECT ... FINAL WHERE _is_deleted = 0 is the source table.
//
// Without any key (REPLICA IDENTITY NOTHING, or FULL without a primary key)
// no column set identifies a row, so such a table is a change log: every
// inserted image, and every deleted image with _is_deleted = 1 (an update
// is both), identified by (_lsn, _seq) — _seq numbers the images of one WAL
// record — in a ReplacingMergeTree(_lsn) ordered by them, so that a change
// replayed after a restart replaces itself instead of counting twice. The
// table is the inserted images minus the deleted ones, read with FINAL. An
// operator who knows a unique NOT NULL column set passes it as OrderBy to
// get a mirror instead.
func CreateTable(d Dialect, target Target, cols []ColumnSpec, key []string, opts TableOptions) (string, error) {
	if err := target.Validate(QuoteQualified(target)); err != nil {
		return "", err
	}
	orderBy := key
	if len(opts.OrderBy) > 0 {
		orderBy = opts.OrderBy
	}
	physical := Physical(cols)
	all := append(append([]ColumnSpec(nil), physical...), TableSyntheticColumns(d, LayoutOf(orderBy))...)
	byName := make(map[string]ColumnSpec, len(all))
	for i, c := range all {
		if err := ValidateName(fmt.Sprintf("column %q of %s", c.Name, QuoteQualified(target)), c.Name); err != nil {
			return "", err
		}
		if _, dup := byName[c.Name]; dup {
			if i >= len(physical) {
				return "", fmt.Errorf("creating %s: source column %q collides with a synthetic column; map it to another name", QuoteQualified(target), c.Name)
			}
			return "", fmt.Errorf("creating %s: column %q appears twice", QuoteQualified(target), c.Name)
		}
		byName[c.Name] = c
	}
	quotedKey := make([]string, len(orderBy))
	for i, name := range orderBy {
		c, ok := byName[name]
		switch {
		case !ok:
			return "", fmt.Errorf("creating %s: sorting key column %q is not a column of the table", QuoteQualified(target), name)
		case c.Nullable || c.NullFlag() != "":
			return "", fmt.Errorf("creating %s: sorting key column %q is Nullable", QuoteQualified(target), name)
		}
		quotedKey[i] = QuoteIdent(name)
	}

	var b strings.Builder
	b.WriteString("CREATE TABLE IF NOT EXISTS ")
	b.WriteString(QuoteQualified(target))
	b.WriteString("\n(\n")
	for i, c := range all {
		b.WriteString("    ")
		b.WriteString(c.definition())
		if i < len(all)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString(")\n")
	// Without is_deleted on every dialect for a change log: the delete
	// images count.
	args := QuoteIdent(ColLSN)
	if len(quotedKey) > 0 && d.IsDeletedEngineArg {
		args += ", " + QuoteIdent(ColIsDeleted)
	}
	if d.Replicated {
		path := opts.ReplicaPath
		if path == "" {
			path = ReplicaPath()
		}
		b.WriteString("ENGINE = " + replicatedEngine(path, args))
	} else {
		b.WriteString("ENGINE = ReplacingMergeTree(" + args + ")")
	}
	// Clause order as ClickHouse documents it: PARTITION BY, then ORDER BY.
	if opts.PartitionBy != "" {
		b.WriteString("\nPARTITION BY " + opts.PartitionBy)
	}
	if len(quotedKey) == 0 {
		b.WriteString("\nORDER BY (" + QuoteIdent(ColLSN) + ", " + QuoteIdent(ColSeq) + ")")
	} else {
		b.WriteString("\nORDER BY (" + strings.Join(quotedKey, ", ") + ")")
	}
	if len(opts.Settings) > 0 {
		parts := make([]string, len(opts.Settings))
		for i, s := range opts.Settings {
			if !settingName.MatchString(s.Name) {
				return "", fmt.Errorf("creating %s: setting name %q is not an identifier", QuoteQualified(target), s.Name)
			}
			value := QuoteString(s.Value)
			if _, err := strconv.ParseFloat(s.Value, 64); err == nil && s.Value == strings.TrimSpace(s.Value) {
				value = s.Value
			}
			parts[i] = s.Name + " = " + value
		}
		b.WriteString("\nSETTINGS " + strings.Join(parts, ", "))
	}
	return b.String(), nil
}

// AddColumn renders ALTER TABLE ... ADD COLUMN of one ClickHouse column
// (a Nullable array's NULL flag is a column of its own: NullFlagSpec).
// mustCheckExists is true on servers without IF NOT EXISTS: the caller
// checks system.columns first so a replayed event does not fail on an
// existing column.
func AddColumn(d Dialect, target Target, col ColumnSpec) (sql string, mustCheckExists bool, err error) {
	if err := ValidateName(fmt.Sprintf("column %q of %s", col.Name, QuoteQualified(target)), col.Name); err != nil {
		return "", false, err
	}
	ifNotExists := ""
	if d.IfNotExistsColumns {
		ifNotExists = "IF NOT EXISTS "
	}
	return "ALTER TABLE " + QuoteQualified(target) + " ADD COLUMN " + ifNotExists + col.definition(), !d.IfNotExistsColumns, nil
}

// ErrRenameUnsupported: the server has no RENAME COLUMN; the caller keeps
// the old ClickHouse name and remaps the source column to it.
var ErrRenameUnsupported = errors.New("server has no ALTER TABLE ... RENAME COLUMN")

// RenameColumn renders ALTER TABLE ... RENAME COLUMN, or ErrRenameUnsupported.
func RenameColumn(d Dialect, target Target, from, to string) (string, error) {
	if !d.RenameColumn {
		return "", fmt.Errorf("renaming column %q to %q of %s on ClickHouse %s: %w", from, to, QuoteQualified(target), d.Version, ErrRenameUnsupported)
	}
	if err := ValidateName(fmt.Sprintf("new name of column %q of %s", from, QuoteQualified(target)), to); err != nil {
		return "", err
	}
	ifExists := ""
	if d.IfNotExistsColumns {
		ifExists = "IF EXISTS "
	}
	return "ALTER TABLE " + QuoteQualified(target) + " RENAME COLUMN " + ifExists + QuoteIdent(from) + " TO " + QuoteIdent(to), nil
}

// DropColumn renders ALTER TABLE ... DROP COLUMN; mustCheckExists as for
// AddColumn.
func DropColumn(d Dialect, target Target, name string) (sql string, mustCheckExists bool, err error) {
	ifExists := ""
	if d.IfNotExistsColumns {
		ifExists = "IF EXISTS "
	}
	return "ALTER TABLE " + QuoteQualified(target) + " DROP COLUMN " + ifExists + QuoteIdent(name), !d.IfNotExistsColumns, nil
}

// ModifyColumn renders ALTER TABLE ... MODIFY COLUMN to col's type (and
// DEFAULT, when col has one: a MODIFY COLUMN without one would leave the
// old type's expression, or none, depending on the server). It is emitted
// only for a column ClickHouse holds with the old type, so it takes no IF
// EXISTS on servers without it; on others IF EXISTS makes a replay of a
// column dropped meanwhile harmless.
func ModifyColumn(d Dialect, target Target, col ColumnSpec) (string, error) {
	if err := ValidateName(fmt.Sprintf("column %q of %s", col.Name, QuoteQualified(target)), col.Name); err != nil {
		return "", err
	}
	ifExists := ""
	if d.IfNotExistsColumns {
		ifExists = "IF EXISTS "
	}
	return "ALTER TABLE " + QuoteQualified(target) + " MODIFY COLUMN " + ifExists + col.definition(), nil
}

// RenameTable renders RENAME TABLE, which moves a table between databases
// too (18.16 accepts it for ordinary databases).
func RenameTable(from, to Target) (string, error) {
	if err := to.Validate(QuoteQualified(from)); err != nil {
		return "", err
	}
	return "RENAME TABLE " + QuoteQualified(from) + " TO " + QuoteQualified(to), nil
}

// SwapIn renders the one RENAME that moves table old aside to retired and
// fresh into old's name (the name is without a table only between the
// two renames, inside one statement).
func SwapIn(old, fresh, retired Target) string {
	return "RENAME TABLE " + QuoteQualified(old) + " TO " + QuoteQualified(retired) + ", " + QuoteQualified(fresh) + " TO " + QuoteQualified(old)
}

// TruncateTable renders TRUNCATE TABLE IF EXISTS (18.16 accepts it).
func TruncateTable(target Target) string { return "TRUNCATE TABLE IF EXISTS " + QuoteQualified(target) }

// DropTable renders DROP TABLE IF EXISTS.
func DropTable(target Target) string { return "DROP TABLE IF EXISTS " + QuoteQualified(target) }

// ErrTypeChange marks a column type change ClickHouse cannot take in
// place: refused (RefuseTypeChange), or to be applied by reloading the
// table (a TypeChangeError with a Reason).
var ErrTypeChange = errors.New("column type changes are not replicated")

// TypeChangeError is a source column's type change no SQL applies exactly.
// With a Reason (Plan.Reload) the table is to be reloaded under its new
// shape; without one it is a refusal the caller logs and counts.
type TypeChangeError struct {
	Source, Column   string
	OldType, NewType string // ClickHouse types
	// The source's types (format_type), when known.
	OldSourceType, NewSourceType string
	// Reason says why ClickHouse's column cannot be converted in place
	// (ClassifyTypeChange); "" for a plain refusal.
	Reason string
}

func (e *TypeChangeError) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("column %q of %s changed type from %s (ClickHouse %s) to %s (ClickHouse %s): %s; the table needs a reload under its new shape",
			e.Column, e.Source, e.OldSourceType, e.OldType, e.NewSourceType, e.NewType, e.Reason)
	}
	if e.OldSourceType != "" {
		return fmt.Sprintf("column %q of %s changed type from %s (ClickHouse %s) to %s (ClickHouse %s): %v; the output stops at this change, ClickHouse keeps the column as it is",
			e.Column, e.Source, e.OldSourceType, e.OldType, e.NewSourceType, e.NewType, ErrTypeChange)
	}
	return fmt.Sprintf("column %q of %s changed type from %s to %s: %v", e.Column, e.Source, e.OldType, e.NewType, ErrTypeChange)
}

func (e *TypeChangeError) Unwrap() error { return ErrTypeChange }

// RefuseTypeChange returns the refusal for a type change of column of
// relation source.
func RefuseTypeChange(source, column, oldType, newType string) error {
	return &TypeChangeError{Source: source, Column: column, OldType: oldType, NewType: newType}
}
