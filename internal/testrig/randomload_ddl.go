package testrig

import (
	"context"
	"fmt"
	"math/rand"
	"regexp"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// addedColumnTypes are the types DDL adds columns with, each with a
// generator for values and constant defaults.
var addedColumnTypes = []struct {
	sqlType string
	gen     valueGen
}{
	{"int4", notNull(func(r *rand.Rand) string { return strconv.Itoa(r.Intn(100000) - 50000) })},
	{"text", notNull(func(r *rand.Rand) string { return randText(r, 20) })},
	{"numeric", notNull(randNumeric)},
	{"timestamptz", notNull(func(r *rand.Rand) string { return randTimestamp(r, true) })},
	{"jsonb", notNull(func(r *rand.Rand) string { return randJSON(r, 0) })},
	{"bool", notNull(func(r *rand.Rand) string { return pick(r, "t", "f") })},
	{"float8", notNull(func(r *rand.Rand) string { return randFloat(r, 64) })},
	{"date", notNull(randDate)},
}

// typeChanges are the ALTER COLUMN ... TYPE the workload makes, by the
// column's type: exact ones ClickHouse can follow with MODIFY COLUMN, the
// others (a USING expression, a narrowing) reload the table. using is a
// format with %[1]s for the column; gen makes values of the new type.
var typeChanges = []struct {
	from, to string
	exact    bool
	using    string
	gen      valueGen
}{
	{"int2", "int4", true, "", notNull(func(r *rand.Rand) string { return strconv.FormatInt(int64(int32(r.Uint32())), 10) })},
	{"int4", "int8", true, "", notNull(func(r *rand.Rand) string { return strconv.FormatInt(int64(r.Uint64()), 10) })},
	{"float4", "float8", true, "", notNull(func(r *rand.Rand) string { return randFloat(r, 64) })},
	{"varchar(40)", "text", true, "", notNull(func(r *rand.Rand) string { return randText(r, 60) })},
	{"varchar(100)", "varchar(200)", true, "", notNull(func(r *rand.Rand) string { return randText(r, 200) })},
	{"numeric(10,2)", "numeric(14,4)", true, "", notNull(randNumeric10x2)},
	{"int8", "int4", false, "(%[1]s %% 1000000)::int4", notNull(func(r *rand.Rand) string { return strconv.Itoa(r.Intn(2000000) - 1000000) })},
	{"int4", "text", false, "", notNull(func(r *rand.Rand) string { return randText(r, 20) })},
	{"text", "varchar(12)", false, "left(%[1]s, 12)", notNull(func(r *rand.Rand) string { return randText(r, 12) })},
	{"bool", "int4", false, "%[1]s::int4", notNull(func(r *rand.Rand) string { return strconv.Itoa(r.Intn(3)) })},
	{"numeric(10,2)", "numeric(8,1)", false, "round(%[1]s / 100, 1)", notNull(func(r *rand.Rand) string {
		return fmt.Sprintf("%s%d.%d", pick(r, "", "-"), r.Intn(10000000), r.Intn(10))
	})},
}

var renameSuffix = regexp.MustCompile(`_r[0-9]+$`)

// ddl runs one schema change. It holds the schema lock while the statement
// runs, so no client starts an operation on a shape that is about to go;
// clients already running one get 42703/42P01 and skip. A lock_timeout
// keeps the DDL from queueing behind long transactions.
func (c *rlClient) ddl(ctx context.Context, op string) error {
	s := c.schema
	s.mu.Lock()
	defer s.mu.Unlock()
	s.renames++
	seq := s.renames
	// Column changes apply to a copy that replaces the table once committed.
	idx := c.r.Intn(len(s.tables))
	t := s.tables[idx].clone()
	var sql string
	var apply func()
	switch op {
	case "ddl_add_column", "ddl_add_column_default":
		typ := addedColumnTypes[c.r.Intn(len(addedColumnTypes))]
		name := fmt.Sprintf("a%d_%d", c.id, seq)
		sql = fmt.Sprintf("ALTER TABLE %s ADD COLUMN %s %s", t.name, name, typ.sqlType)
		if op == "ddl_add_column_default" {
			// A constant default: old rows read it from attmissingval,
			// nothing is rewritten.
			text, _ := c.gen(typ.gen)
			sql += " DEFAULT " + sqlLiteral(text, false, typ.sqlType)
		}
		apply = func() {
			t.cols = append(t.cols, &rlColumn{name: name, sqlType: typ.sqlType, gen: nullable(typ.gen), added: true})
		}
	case "ddl_rename_column":
		col := t.cols[c.r.Intn(len(t.cols))]
		name := renameSuffix.ReplaceAllString(col.name, "") + fmt.Sprintf("_r%d", seq)
		sql = fmt.Sprintf("ALTER TABLE %s RENAME COLUMN %s TO %s", t.name, pgx.Identifier{col.name}.Sanitize(), name)
		apply = func() { col.name = name }
	case "ddl_drop_column":
		// Only columns the workload added: the built-in ones keep every
		// type covered, and key columns are never dropped.
		var candidates []int
		for i, col := range t.cols {
			if col.added {
				candidates = append(candidates, i)
			}
		}
		if len(candidates) == 0 || len(t.cols) < 2 {
			return nil
		}
		i := candidates[c.r.Intn(len(candidates))]
		sql = fmt.Sprintf("ALTER TABLE %s DROP COLUMN %s", t.name, pgx.Identifier{t.cols[i].name}.Sanitize())
		apply = func() { t.cols = append(t.cols[:i:i], t.cols[i+1:]...) }
	case "ddl_alter_type_exact", "ddl_alter_type_reload":
		exact := op == "ddl_alter_type_exact"
		type candidate struct{ col, change int }
		var candidates []candidate
		for i, col := range t.cols {
			for j, ch := range typeChanges {
				if ch.exact == exact && ch.from == col.sqlType && !col.big {
					candidates = append(candidates, candidate{i, j})
				}
			}
		}
		if len(candidates) == 0 {
			return nil
		}
		pick := candidates[c.r.Intn(len(candidates))]
		col, ch := t.cols[pick.col], typeChanges[pick.change]
		id := pgx.Identifier{col.name}.Sanitize()
		// A default of the old type may not cast to the new one.
		sql = fmt.Sprintf("ALTER TABLE %s ALTER COLUMN %s DROP DEFAULT, ALTER COLUMN %s TYPE %s", t.name, id, id, ch.to)
		if ch.using != "" {
			sql += " USING " + fmt.Sprintf(ch.using, id)
		}
		apply = func() { col.sqlType, col.gen = ch.to, nullable(ch.gen) }
	case "ddl_create_table":
		nt := extraTable(fmt.Sprintf("rl_ddl_%d_%d", c.id, seq))
		nt.created = true
		if err := c.begin(ctx); err != nil {
			return err
		}
		for _, stmt := range []string{"SET LOCAL lock_timeout = '3s'", nt.createSQL(), c.insertSQL(nt, 1+c.r.Intn(5))} {
			if err := c.exec(ctx, stmt); err != nil {
				return err
			}
		}
		if err := c.end(ctx, "COMMIT"); err != nil {
			return err
		}
		s.tables = append(s.tables, nt)
		return nil
	case "ddl_drop_table":
		var candidates []int
		for i, tb := range s.tables {
			if tb.created {
				candidates = append(candidates, i)
			}
		}
		if len(candidates) == 0 {
			return nil
		}
		i := candidates[c.r.Intn(len(candidates))]
		sql = "DROP TABLE " + s.tables[i].name
		apply = func() { s.tables = append(s.tables[:i:i], s.tables[i+1:]...) }
	default:
		return fmt.Errorf("unknown operation %q", op)
	}
	if err := c.begin(ctx); err != nil {
		return err
	}
	if err := c.exec(ctx, "SET LOCAL lock_timeout = '3s'"); err != nil {
		return err
	}
	if err := c.exec(ctx, sql); err != nil {
		return err
	}
	// Sometimes write rows of the new shape in the same transaction.
	if c.r.Intn(2) == 0 && op != "ddl_drop_table" {
		apply()
		apply = func() {}
		if err := c.exec(ctx, c.insertSQL(t, 1)); err != nil {
			return err
		}
	}
	if err := c.end(ctx, "COMMIT"); err != nil {
		return err
	}
	if op == "ddl_alter_type_exact" || op == "ddl_alter_type_reload" {
		c.stats.TypeChanges++
	}
	apply()
	if op != "ddl_drop_table" {
		s.tables[idx] = t
	}
	return nil
}
