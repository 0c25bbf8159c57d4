package clickhouse

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/walshadow/walshadow/internal/desclog"
)

// Plan is what brings one ClickHouse table to agree with its relation's
// source shape.
type Plan struct {
	// Statements are final SQL to run in order.
	Statements []string
	// Agreed is the new agreement, to Put once the statements succeeded.
	// Reconcile leaves ValidFrom as the previous agreement had it (0 on
	// first sight): the caller sets the descriptor version it reconciled.
	Agreed *Agreed
	// Refused are type mismatches no SQL can apply (a ClickHouse column
	// already there with another type; errors.Is ErrTypeChange): the caller
	// counts them and fails closed.
	Refused []error
	// Reload are source column type changes ClickHouse cannot apply to the
	// column exactly (each a *TypeChangeError with its Reason; errors.Is
	// ErrTypeChange): the table is to be reloaded under its new shape.
	// Statements and Agreed stay valid (every other change is applied; such
	// a column keeps its old ClickHouse type in Agreed.Columns while
	// Agreed.Shape is the new shape), but the current table cannot take the
	// relation's rows from this shape on: the caller stops writing them to
	// it and reloads the table (a load maps the new shape afresh). A change
	// is reported once: against the Agreed returned, the same shape plans
	// no reload, so the caller records the reload durably before (or with)
	// putting Agreed.
	Reload []error
	// Notes are human-readable decisions worth logging.
	Notes []string
}

// ErrTypeMismatch marks a mapped column ClickHouse already holds with
// another type.
var ErrTypeMismatch = fmt.Errorf("ClickHouse column has another type: %w", ErrTypeChange)

// TypeMismatchError is the refusal to adopt a ClickHouse column whose type
// is not the mapping's.
type TypeMismatchError struct {
	Target           Target
	Column           string
	CHType, WantType string
}

func (e *TypeMismatchError) Error() string {
	return fmt.Sprintf("column %s of %s is %s on ClickHouse but the mapping is %s: %v",
		QuoteIdent(e.Column), QuoteQualified(e.Target), e.CHType, e.WantType, ErrTypeMismatch)
}

func (e *TypeMismatchError) Unwrap() error { return ErrTypeMismatch }

// ConfiguredTarget is where the configuration puts relation schema.table:
// cfg's database and table, defaulting to defaultDB and
// DefaultTableName(schema, table).
func ConfiguredTarget(defaultDB string, cfg TableConfig, schema, table string) Target {
	t := DefaultTarget(defaultDB, schema, table)
	if cfg.Database != "" {
		t.Database = cfg.Database
	}
	if cfg.Table != "" {
		t.Table = cfg.Table
	}
	return t
}

// DescribeTarget is the table whose existence facts Reconcile expects as
// ch: the agreed target once there is an agreement (a moved target is
// renamed from there), else the configured one.
func DescribeTarget(defaultDB string, cfg TableConfig, prev *Agreed, shape *desclog.Descriptor) Target {
	if prev != nil && !prev.Dropped {
		return prev.Target
	}
	return ConfiguredTarget(defaultDB, cfg, shape.Namespace, shape.Name)
}

// syntheticNames are every synthetic column name of any dialect.
func syntheticNames() map[string]bool {
	return map[string]bool{ColLSN: true, ColXID: true, ColCommitTS: true, ColCommitTSu: true, ColIsDeleted: true, ColSeq: true,
		ColFilenode: true, ColBlock: true, ColOffset: true}
}

// Reconcile decides what brings ClickHouse to agree with source shape
// shape for one in-scope relation, as a pure function. Its inputs are
// all it reads: the dialect, the
// output's default database, the table's config, the durable previous
// agreement (nil on first sight), ClickHouse's existence facts for
// DescribeTarget, and the shape. A warm or cold cache cannot change the
// result.
//
// First agreement: every live column not excluded (IncludeColumns
// restricts) is mapped; an absent table is created, a present one adopted
// (mapped columns it lacks are added, its other columns left alone).
//
// Later agreements diff shape against prev.Shape by attnum: added columns
// are mapped unless excluded (IncludeColumns does not apply to them);
// renames follow on ClickHouse with RENAME COLUMN where the server has it
// and the ClickHouse name was the source name, else the old ClickHouse
// name stays (never DROP+ADD); dropped columns are dropped; a type change
// (or DROP NOT NULL) is classified by ClassifyTypeChange: kept as it is
// (ClickHouse type and values unchanged), applied by MODIFY COLUMN
// (ClickHouse converts every value exactly), or recorded in Plan.Reload
// with the column at its old mapping. The sorting key cannot change.
//
// Both arms then heal from ClickHouse's existence facts: an absent table
// is created, absent mapped columns added. ClickHouse alone never makes a
// column be dropped or added. Statements are final: ADD is emitted only
// for absent columns, DROP and RENAME only for present ones.
func Reconcile(d Dialect, defaultDB string, cfg TableConfig, prev *Agreed, ch CHTable, shape *desclog.Descriptor) (Plan, error) {
	if shape == nil {
		return Plan{}, errors.New("reconciling a relation: no source shape")
	}
	r := &reconciler{
		d: d, cfg: cfg, ch: ch, shape: shape,
		source:  "relation " + shape.Namespace + "." + shape.Name,
		chTypes: map[string]string{},
	}
	if err := cfg.Validate(r.source); err != nil {
		return Plan{}, err
	}
	if prev != nil && prev.Oid != shape.Oid {
		return Plan{}, fmt.Errorf("reconciling %s (oid %d) against the agreement of oid %d", r.source, shape.Oid, prev.Oid)
	}
	if ch.Exists {
		for _, c := range ch.Columns {
			r.chTypes[c.Name] = c.Type
		}
	}
	var err error
	// A retained table of a dropped relation whose oid came back is a new
	// relation's first sight.
	if prev == nil || prev.Dropped {
		err = r.first(defaultDB)
	} else {
		err = r.later(defaultDB, prev)
	}
	existed := ch.Exists
	if err == nil && r.rekey && !existed {
		_, _, err = r.applyKey() // the table is created with the new key
	}
	if err == nil {
		err = r.heal()
	}
	if err == nil && r.rekey && existed {
		err = r.rebuild()
	}
	if err != nil {
		return Plan{}, err
	}
	return r.plan, nil
}

// applyKey moves the agreement to the shape's replica identity as the
// sorting key: key columns become non-Nullable, demoted ones follow their
// NOT NULL. It returns, per ClickHouse column of the new table (Physical),
// the expression that copies it from the table under the old key, and the
// old table's columns.
func (r *reconciler) applyKey() (exprs, old []string, err error) {
	now := make(map[int16]desclog.Column, len(r.next.Shape))
	for _, c := range r.next.Shape {
		now[c.Num] = c
	}
	for i := range r.next.Columns {
		m := &r.next.Columns[i]
		before := m.Spec
		for _, p := range Physical([]ColumnSpec{before}) {
			old = append(old, QuoteIdent(p.Name))
		}
		expr := QuoteIdent(m.Spec.Name)
		if inKey := slices.Contains(r.shape.KeyAttnums, m.Attnum); inKey != m.Key {
			t, nullable, err := r.mapType(now[m.Attnum], inKey)
			if err != nil {
				return nil, nil, err
			}
			if inKey && m.Spec.Nullable && m.Spec.NullFlag() == "" {
				// PostgreSQL's key columns are NOT NULL: no NULL to lose.
				expr = "assumeNotNull(" + expr + ")"
			}
			m.Spec.Type, m.Spec.Nullable, m.Key = t, nullable, inKey
		}
		exprs = append(exprs, expr)
		switch {
		case m.Spec.NullFlag() == "":
		case before.NullFlag() != "":
			exprs = append(exprs, QuoteIdent(before.NullFlag()))
		default:
			exprs = append(exprs, "toUInt8(0)") // was a NOT NULL key column
		}
	}
	r.next.OrderBy = nil
	for _, attnum := range r.shape.KeyAttnums {
		i := slices.IndexFunc(r.next.Columns, func(m MappedColumn) bool { return m.Attnum == attnum })
		if i < 0 {
			return nil, nil, fmt.Errorf("%s: replica identity column %d is not mapped (excluded or not included); it is the sorting key, so map it or configure order_by", r.source, attnum)
		}
		r.next.OrderBy = append(r.next.OrderBy, r.next.Columns[i].Spec.Name)
	}
	return exprs, old, r.checkKey()
}

// rebuild re-creates an existing table under the new sorting key: a new
// table beside it, the current rows copied (FINAL WHERE _is_deleted = 0 of
// a ReplacingMergeTree; inserted minus deleted images of a change log),
// then swapped in by one RENAME and the old one dropped. Each step can run
// again after a crash.
func (r *reconciler) rebuild() error {
	exprs, oldCols, err := r.applyKey()
	if err != nil {
		return err
	}
	old := r.next.Target
	fresh := Target{Database: old.Database, Table: old.Table + "__rekey"}
	retired := Target{Database: old.Database, Table: old.Table + "__rekey_old"}
	if err := fresh.Validate(r.source); err != nil {
		return err
	}
	specs := make([]ColumnSpec, len(r.next.Columns))
	for i, m := range r.next.Columns {
		specs[i] = m.Spec
	}
	var cols []string
	for _, p := range Physical(specs) {
		cols = append(cols, QuoteIdent(p.Name))
	}
	create, err := CreateTable(r.d, fresh, specs, r.next.OrderBy, TableOptions{PartitionBy: r.cfg.PartitionBy, Settings: r.cfg.Settings})
	if err != nil {
		return fmt.Errorf("%s: %w", r.source, err)
	}
	toKeyless := len(r.next.OrderBy) == 0
	synth := TableSyntheticColumns(r.d, LayoutOf(r.next.OrderBy))
	lsn, xid, commit, deleted := QuoteIdent(synth[0].Name), QuoteIdent(synth[1].Name), QuoteIdent(synth[2].Name), QuoteIdent(synth[3].Name)
	for _, sc := range synth {
		cols = append(cols, QuoteIdent(sc.Name))
	}
	seq := ""
	if toKeyless {
		// Each copied row its own image: (_lsn, _seq) stays unique.
		seq = ", toUInt32(rowNumberInAllBlocks())"
	}
	var sel string
	if len(r.prevOrderBy) > 0 {
		sel = "SELECT " + strings.Join(exprs, ", ") + ", " + lsn + ", " + xid + ", " + commit + ", " + deleted + seq +
			" FROM " + QuoteQualified(old) + " FINAL WHERE " + deleted + " = 0"
	} else {
		// A change log: each row image's multiplicity is its inserts minus
		// its deletes; under a key there is one row per image.
		sel = "SELECT " + strings.Join(exprs, ", ") + ", max(" + lsn + "), any(" + xid + "), any(" + commit + "), toUInt8(0)" +
			" FROM " + QuoteQualified(old) + " FINAL GROUP BY " + strings.Join(oldCols, ", ") +
			" HAVING sum(if(" + deleted + " = 1, -1, 1)) > 0"
	}
	r.plan.Statements = append(r.plan.Statements,
		DropTable(fresh),
		create,
		"INSERT INTO "+QuoteQualified(fresh)+" ("+strings.Join(cols, ", ")+") "+sel,
		SwapIn(old, fresh, retired),
		DropTable(retired))
	r.notef("%s: replica identity changed; %s rebuilt with ORDER BY (%s), rows copied", r.source, QuoteQualified(old), strings.Join(r.next.OrderBy, ", "))
	r.plan.Agreed = r.next
	return nil
}

type reconciler struct {
	// rekey: the replica identity changed, the table gets a new sorting
	// key (prevOrderBy is the old one).
	rekey       bool
	prevOrderBy []string

	d      Dialect
	cfg    TableConfig
	ch     CHTable
	shape  *desclog.Descriptor
	source string
	next   *Agreed
	plan   Plan
	// chTypes are the ClickHouse columns (name → type) as they will be
	// once the statements planned so far ran.
	chTypes map[string]string
}

func (r *reconciler) notef(format string, args ...any) {
	r.plan.Notes = append(r.plan.Notes, fmt.Sprintf(format, args...))
}

// liveColumns are shape's non-dropped columns, copied.
func liveColumns(shape *desclog.Descriptor) []desclog.Column {
	var live []desclog.Column
	for _, c := range shape.Columns {
		if !c.Dropped {
			live = append(live, c)
		}
	}
	return cloneColumns(live)
}

func (r *reconciler) excluded(name string) bool { return slices.Contains(r.cfg.ExcludeColumns, name) }

// first maps a relation seen for the first time.
func (r *reconciler) first(defaultDB string) error {
	target := ConfiguredTarget(defaultDB, r.cfg, r.shape.Namespace, r.shape.Name)
	if err := target.Validate(r.source); err != nil {
		return err
	}
	r.next = &Agreed{
		Oid: r.shape.Oid, DbOid: r.shape.DbOid, Schema: r.shape.Namespace, Table: r.shape.Name,
		Shape: liveColumns(r.shape), KeyAttnums: cloneOrNil(r.shape.KeyAttnums), Target: target,
	}
	for _, name := range r.cfg.IncludeColumns {
		if !slices.ContainsFunc(r.next.Shape, func(c desclog.Column) bool { return c.Name == name }) {
			return fmt.Errorf("table config of %s includes column %q, which the relation does not have", r.source, name)
		}
	}
	for _, c := range r.next.Shape {
		if r.excluded(c.Name) || len(r.cfg.IncludeColumns) > 0 && !slices.Contains(r.cfg.IncludeColumns, c.Name) {
			continue
		}
		inKey := slices.Contains(r.shape.KeyAttnums, c.Num)
		if len(r.cfg.OrderBy) > 0 {
			inKey = slices.Contains(r.cfg.OrderBy, r.chName(c))
		}
		m, err := r.mapColumn(c, inKey)
		if err != nil {
			return err
		}
		r.next.Columns = append(r.next.Columns, m)
	}
	if len(r.cfg.OrderBy) > 0 {
		r.next.OrderBy = slices.Clone(r.cfg.OrderBy)
	} else {
		for _, attnum := range r.shape.KeyAttnums {
			i := slices.IndexFunc(r.next.Columns, func(m MappedColumn) bool { return m.Attnum == attnum })
			if i < 0 {
				return fmt.Errorf("%s: replica identity column %d is not mapped (excluded or not included); it is the sorting key, so map it or configure order_by", r.source, attnum)
			}
			r.next.OrderBy = append(r.next.OrderBy, r.next.Columns[i].Spec.Name)
		}
		if len(r.next.OrderBy) == 0 && !r.cfg.ChangeLog {
			// No key: rows are identified by where they live in the heap.
			r.next.OrderBy = slices.Clone(PhysicalKey)
		}
	}
	if err := r.checkKey(); err != nil {
		return err
	}
	if r.ch.Exists {
		// Adopting a table: keep its column order, columns it lacks last.
		position := map[string]int{}
		for i, c := range r.ch.Columns {
			position[c.Name] = i
		}
		slices.SortStableFunc(r.next.Columns, func(a, b MappedColumn) int {
			pa, okA := position[a.Spec.Name]
			pb, okB := position[b.Spec.Name]
			switch {
			case okA && okB:
				return pa - pb
			case okA:
				return -1
			case okB:
				return 1
			}
			return 0
		})
	}
	return nil
}

// checkKey: every sorting key name is a mapped, non-Nullable column (or
// the physical key's synthetic columns).
func (r *reconciler) checkKey() error {
	if LayoutOf(r.next.OrderBy) == LayoutPhysical {
		return nil
	}
	for _, name := range r.next.OrderBy {
		i := slices.IndexFunc(r.next.Columns, func(m MappedColumn) bool { return m.Spec.Name == name })
		switch {
		case i < 0:
			return fmt.Errorf("%s: sorting key column %q is not a mapped column", r.source, name)
		case r.next.Columns[i].Spec.Nullable:
			return fmt.Errorf("%s: sorting key column %q is Nullable (a type override made it so?)", r.source, name)
		}
	}
	return nil
}

// later diffs shape against the previous agreement by attnum.
func (r *reconciler) later(defaultDB string, prev *Agreed) error {
	r.next = prev.Clone()
	r.next.DbOid, r.next.Schema, r.next.Table = r.shape.DbOid, r.shape.Namespace, r.shape.Name
	r.next.Shape = liveColumns(r.shape)
	r.next.KeyAttnums = cloneOrNil(r.shape.KeyAttnums)

	// The sorting key of a ClickHouse table is fixed at CREATE: a changed
	// replica identity (a primary key added to a table created without
	// one, REPLICA IDENTITY USING INDEX, ...) rebuilds the table (rekey).
	r.rekey = len(r.cfg.OrderBy) == 0 && !slices.Equal(prev.KeyAttnums, r.shape.KeyAttnums)
	r.prevOrderBy = prev.OrderBy
	if r.rekey && len(r.shape.KeyAttnums) == 0 && !r.cfg.ChangeLog && LayoutOf(prev.OrderBy) != LayoutChangeLog {
		// The key is gone: rows are identified by their physical identity
		// from now on, which only the source knows (a reload).
		r.rekey = false
		r.plan.Reload = append(r.plan.Reload, fmt.Errorf("%s: its replica identity key %v is gone: its rows are keyed by their physical identity from now on", r.source, prev.OrderBy))
	}
	if len(r.cfg.OrderBy) > 0 && !slices.Equal(r.cfg.OrderBy, prev.OrderBy) {
		return fmt.Errorf("%s: order_by %v differs from the sorting key %v of %s; ClickHouse cannot change a sorting key (recreate the table)",
			r.source, r.cfg.OrderBy, prev.OrderBy, QuoteQualified(prev.Target))
	}

	target := ConfiguredTarget(defaultDB, r.cfg, r.shape.Namespace, r.shape.Name)
	if target != prev.Target {
		if err := target.Validate(r.source); err != nil {
			return err
		}
		if r.ch.Exists {
			if target.Database != prev.Target.Database {
				sql, err := CreateDatabase(target.Database)
				if err != nil {
					return err
				}
				r.plan.Statements = append(r.plan.Statements, sql)
			}
			sql, err := RenameTable(prev.Target, target)
			if err != nil {
				return err
			}
			r.plan.Statements = append(r.plan.Statements, sql)
			r.notef("%s now lands in %s: renamed from %s", r.source, QuoteQualified(target), QuoteQualified(prev.Target))
		}
		r.next.Target = target
	}

	before := make(map[int16]desclog.Column, len(prev.Shape))
	for _, c := range prev.Shape {
		before[c.Num] = c
	}
	now := make(map[int16]desclog.Column, len(r.next.Shape))
	for _, c := range r.next.Shape {
		now[c.Num] = c
	}

	// Drops first: a name they free may be taken by a rename or an add.
	kept := r.next.Columns[:0]
	for _, m := range r.next.Columns {
		if _, live := now[m.Attnum]; live {
			kept = append(kept, m)
			continue
		}
		if m.Key && (r.rekey || len(r.plan.Reload) > 0) {
			continue // the rebuilt (or reloaded) table leaves it out; the old one cannot drop a key column
		}
		if m.Key {
			return fmt.Errorf("%s: column %q was dropped on the source but %s is part of the sorting key of %s, which ClickHouse cannot change",
				r.source, m.Source, QuoteIdent(m.Spec.Name), QuoteQualified(r.next.Target))
		}
		for _, p := range Physical([]ColumnSpec{m.Spec}) {
			if _, present := r.chTypes[p.Name]; present {
				sql, _, err := DropColumn(r.d, r.next.Target, p.Name)
				if err != nil {
					return err
				}
				r.plan.Statements = append(r.plan.Statements, sql)
				delete(r.chTypes, p.Name)
			}
		}
	}
	r.next.Columns = cloneOrNil(kept)

	for i := range r.next.Columns {
		m := &r.next.Columns[i]
		old, c := before[m.Attnum], now[m.Attnum]
		if c.Name != old.Name {
			if err := r.rename(m, old, c); err != nil {
				return err
			}
		}
		if c.TypeOid != old.TypeOid || c.TypMod != old.TypMod || old.NotNull && !c.NotNull || desclog.CompositeChanged(&old, &c) {
			if err := r.retype(m, old, c); err != nil {
				return err
			}
		}
		m.Source = c.Name
	}

	for _, c := range r.next.Shape {
		if _, known := before[c.Num]; known || r.excluded(c.Name) {
			continue
		}
		// Added since the agreement: the sorting key is fixed, so an added
		// column is never in it.
		m, err := r.mapColumn(c, false)
		if err != nil {
			return err
		}
		r.next.Columns = append(r.next.Columns, m)
	}
	return nil
}

// heal brings ClickHouse's existence in line with the mapping: create an
// absent table, add absent mapped columns, refuse present ones of another
// type.
func (r *reconciler) heal() error {
	target := r.next.Target
	if !r.ch.Exists {
		dbSQL, err := CreateDatabase(target.Database)
		if err != nil {
			return err
		}
		specs := make([]ColumnSpec, len(r.next.Columns))
		for i, m := range r.next.Columns {
			specs[i] = m.Spec
		}
		tableSQL, err := CreateTable(r.d, target, specs, r.next.OrderBy, TableOptions{PartitionBy: r.cfg.PartitionBy, Settings: r.cfg.Settings})
		if err != nil {
			return fmt.Errorf("%s: %w", r.source, err)
		}
		r.plan.Statements = append(r.plan.Statements, dbSQL, tableSQL)
		r.plan.Agreed = r.next
		return nil
	}
	for _, s := range TableSyntheticColumns(r.d, LayoutOf(r.prevKeyOrNext())) {
		if _, ok := r.ch.Column(s.Name); !ok {
			return fmt.Errorf("%s: ClickHouse table %s has no column %s: it was not created by walshadow for ClickHouse %s; drop it or configure another table",
				r.source, QuoteQualified(target), QuoteIdent(s.Name), r.d.Version)
		}
	}
	for _, m := range r.next.Columns {
		for _, p := range Physical([]ColumnSpec{m.Spec}) {
			if chType, present := r.chTypes[p.Name]; present {
				if normalizeType(chType) != normalizeType(p.TypeSQL()) {
					r.plan.Refused = append(r.plan.Refused, &TypeMismatchError{Target: target, Column: p.Name, CHType: chType, WantType: p.TypeSQL()})
				}
				continue
			}
			sql, _, err := AddColumn(r.d, target, p)
			if err != nil {
				return err
			}
			r.plan.Statements = append(r.plan.Statements, sql)
			r.chTypes[p.Name] = p.TypeSQL()
		}
	}
	r.plan.Agreed = r.next
	return nil
}

// prevKeyOrNext is the sorting key the existing ClickHouse table has: the
// previous one while a rebuild is pending.
func (r *reconciler) prevKeyOrNext() []string {
	if r.rekey {
		return r.prevOrderBy
	}
	return r.next.OrderBy
}

// normalizeType drops spaces: system.columns writes "Decimal(10, 2)",
// an operator may write "Decimal(10,2)".
func normalizeType(t string) string { return strings.ReplaceAll(t, " ", "") }

// PlanDrop decides what a source DROP TABLE does to prev's ClickHouse
// table. retain (also "" and anything unknown: never lose data by
// default) and warn keep it, with next marked Dropped; warn adds a note
// the caller logs at WARN. drop drops it; next is nil and the caller
// deletes the agreement.
func PlanDrop(strategy DropStrategy, prev *Agreed) (stmts []string, next *Agreed, note string) {
	if prev == nil {
		return nil, nil, ""
	}
	switch strategy {
	case DropDrop:
		return []string{DropTable(prev.Target)}, nil, ""
	case DropWarn:
		next = prev.Clone()
		next.Dropped = true
		return nil, next, fmt.Sprintf("relation %s.%s dropped on the source: %s retained with its data", prev.Schema, prev.Table, QuoteQualified(prev.Target))
	default:
		next = prev.Clone()
		next.Dropped = true
		return nil, next, ""
	}
}

// PlanTruncate is the SQL mirroring a source TRUNCATE at position at of
// prev's relation: TRUNCATE TABLE, then the mutation that keeps a restart
// from bringing the rows back (DeleteBefore; truncate.go says why it
// removes exactly those rows). Both are the truncate: run again whole, they
// leave the same table.
func PlanTruncate(prev *Agreed, at uint64) []string {
	if prev == nil || prev.Dropped {
		return nil
	}
	return []string{TruncateTable(prev.Target), DeleteBefore(prev.Target, at)}
}
