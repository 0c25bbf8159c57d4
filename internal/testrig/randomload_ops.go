package testrig

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// rlClient is one connection of the random workload, with its own seeded
// generator and its own row ids: rid = k*clients + id + 1, so clients never
// insert the same key and a client finds its own rows again.
type rlClient struct {
	id, clients int
	conn        *pgx.Conn
	opt         RandomLoadOptions
	schema      *rlSchema
	r           *rand.Rand
	nextRid     map[string]int64 // per table: next k
	stats       RandomLoadStats
	gids        int
	inTx        bool
}

// errSkip wraps an expected error that ended the operation.
type errSkip struct{ code string }

func (e errSkip) Error() string { return "skipped: " + e.code }

// opNeeds names the option an operation kind needs.
type opNeeds int

const (
	always opNeeds = iota
	needsDDL
	needsTwoPhase
	needsKeyless
	needsTypeChanges // and DDL
	needsTempTables
)

func (o RandomLoadOptions) allows(n opNeeds) bool {
	switch n {
	case needsDDL:
		return o.DDL
	case needsTwoPhase:
		return o.TwoPhase
	case needsKeyless:
		return o.Keyless
	case needsTypeChanges:
		return o.DDL && o.TypeChanges
	case needsTempTables:
		return o.TempTables
	}
	return true
}

// operation kinds and their weights.
var rlOps = []struct {
	name   string
	weight int
	needs  opNeeds
}{
	{"insert", 18, always},
	{"insert_multi", 8, always},
	{"copy", 5, always},
	{"update", 18, always},
	{"update_key", 5, always},
	{"delete", 7, always},
	{"upsert_nothing", 3, always},
	{"upsert_update", 4, always},
	{"update_delete_tx", 3, always},
	{"update_then_delete", 2, always},
	{"tx_mixed", 10, always},
	{"tx_savepoint", 6, always},
	{"tx_rollback", 4, always},
	{"two_phase_commit", 3, needsTwoPhase},
	{"two_phase_rollback", 2, needsTwoPhase},
	{"truncate", 1, always},
	{"insert_duplicate", 4, needsKeyless},
	{"truncate_keyless", 1, needsKeyless},
	{"vacuum_full", 1, needsKeyless},
	{"cluster", 1, needsKeyless},
	{"temp_table", 3, needsTempTables},
	{"ddl_add_column", 2, needsDDL},
	{"ddl_add_column_default", 2, needsDDL},
	{"ddl_rename_column", 2, needsDDL},
	{"ddl_drop_column", 1, needsDDL},
	{"ddl_create_table", 1, needsDDL},
	{"ddl_drop_table", 1, needsDDL},
	{"ddl_alter_type_exact", 1, needsTypeChanges},
	{"ddl_alter_type_reload", 1, needsTypeChanges},
}

func (c *rlClient) chooseOp() string {
	total := 0
	for _, o := range rlOps {
		if c.opt.allows(o.needs) {
			total += o.weight
		}
	}
	x := c.r.Intn(total)
	for _, o := range rlOps {
		if !c.opt.allows(o.needs) {
			continue
		}
		if x < o.weight {
			return o.name
		}
		x -= o.weight
	}
	panic("unreachable")
}

func (c *rlClient) run(ctx context.Context, ops int) error {
	for i := 0; i < ops; i++ {
		op := c.chooseOp()
		c.stats.Ops[op]++
		ended := c.stats.Committed + c.stats.RolledBack
		err := c.do(ctx, op)
		if err == nil && c.stats.Committed+c.stats.RolledBack == ended {
			c.stats.Committed++ // an autocommit statement
		}
		if c.inTx {
			// Whatever failed inside a transaction: end it.
			if _, rerr := c.conn.Exec(ctx, "ROLLBACK"); rerr != nil {
				return fmt.Errorf("client %d: rolling back after %v: %w", c.id, err, rerr)
			}
			c.inTx = false
		}
		var skip errSkip
		switch {
		case err == nil:
		case errors.As(err, &skip):
			c.stats.Skipped[skip.code]++
			c.stats.RolledBack++
		default:
			return fmt.Errorf("client %d, op %d (%s): %w", c.id, i, op, err)
		}
	}
	return nil
}

// exec runs one statement; an expected error becomes errSkip.
func (c *rlClient) exec(ctx context.Context, sql string) error {
	_, err := c.conn.Exec(ctx, sql)
	return c.classify(err, sql)
}

func (c *rlClient) classify(err error, sql string) error {
	if err == nil {
		return nil
	}
	if code, ok := skippable(err); ok {
		return errSkip{code}
	}
	// A value made for a column a concurrent ALTER COLUMN ... TYPE just
	// narrowed or retyped (the operation took the shape before the change
	// committed): out of range, too long, of the old type (an expression,
	// or COPY's text of it).
	var pe *pgconn.PgError
	if c.opt.TypeChanges && errors.As(err, &pe) && (pe.Code == "22003" || pe.Code == "22001" || pe.Code == "42804" || pe.Code == "22P02") {
		return errSkip{pe.Code}
	}
	return fmt.Errorf("%w\nstatement: %s", err, abbreviate(sql))
}

func (c *rlClient) begin(ctx context.Context) error {
	if err := c.exec(ctx, "BEGIN"); err != nil {
		return err
	}
	c.inTx = true
	return nil
}

func (c *rlClient) end(ctx context.Context, sql string) error {
	err := c.exec(ctx, sql)
	if err == nil {
		c.inTx = false
		if sql == "ROLLBACK" {
			c.stats.RolledBack++
		} else {
			c.stats.Committed++
		}
	}
	return err
}

func (c *rlClient) pickTable(tables []*rlTable) *rlTable { return tables[c.r.Intn(len(tables))] }

// newRid allocates a fresh row id of table t for this client.
func (c *rlClient) newRid(t *rlTable) int64 {
	k := c.nextRid[t.name]
	c.nextRid[t.name] = k + 1
	return k*int64(c.clients) + int64(c.id) + 1
}

// someRid is a row id that probably exists: mostly this client's own, some
// of another client's (so clients contend for rows).
func (c *rlClient) someRid(t *rlTable) int64 {
	k := c.nextRid[t.name]
	if k == 0 {
		k = 1
	}
	owner := int64(c.id)
	if c.r.Intn(5) == 0 {
		owner = int64(c.r.Intn(c.clients))
	}
	return c.r.Int63n(k)*int64(c.clients) + owner + 1
}

// rowValues generates the values of every non-key column.
func (c *rlClient) rowValues(t *rlTable) []string {
	vals := make([]string, len(t.cols))
	for i, col := range t.cols {
		text, null := c.gen(col.gen)
		vals[i] = sqlLiteral(text, null, col.sqlType)
	}
	return vals
}

func columnList(t *rlTable) string {
	names := t.keyColumns()
	for _, col := range t.cols {
		names = append(names, pgx.Identifier{col.name}.Sanitize())
	}
	return strings.Join(names, ", ")
}

func (c *rlClient) valuesTuple(t *rlTable, rid int64) string {
	return "(" + strings.Join(append(t.keyValues(rid), c.rowValues(t)...), ", ") + ")"
}

func (c *rlClient) insertSQL(t *rlTable, rows int) string {
	tuples := make([]string, rows)
	for i := range tuples {
		tuples[i] = c.valuesTuple(t, c.newRid(t))
	}
	return fmt.Sprintf("INSERT INTO %s (%s) VALUES %s", t.name, columnList(t), strings.Join(tuples, ", "))
}

// updateSQL sets a random non-empty subset of non-key columns; TOAST-able
// columns are mostly left alone so their values stay unchanged TOAST.
func (c *rlClient) updateSQL(t *rlTable) string {
	var sets []string
	for _, col := range t.cols {
		if (col.big && c.r.Intn(4) != 0) || c.r.Intn(2) == 0 {
			continue
		}
		text, null := c.gen(col.gen)
		sets = append(sets, pgx.Identifier{col.name}.Sanitize()+" = "+sqlLiteral(text, null, col.sqlType))
	}
	if len(sets) == 0 {
		col := t.cols[0]
		text, null := c.gen(col.gen)
		sets = append(sets, pgx.Identifier{col.name}.Sanitize()+" = "+sqlLiteral(text, null, col.sqlType))
	}
	return fmt.Sprintf("UPDATE %s SET %s WHERE %s", t.name, strings.Join(sets, ", "), t.where(c.someRid(t)))
}

// updateKeySQL moves a row to a fresh key. Its TOAST-able columns are set
// too: a key-changing UPDATE that leaves an out-of-line value unchanged logs
// neither the value nor (without REPLICA IDENTITY FULL) the old row, so no
// WAL reader can rebuild it.
func (c *rlClient) updateKeySQL(t *rlTable) string {
	cols, vals := t.keyColumns(), t.keyValues(c.newRid(t))
	var sets []string
	for i := range cols {
		sets = append(sets, cols[i]+" = "+vals[i])
	}
	for _, col := range t.cols {
		if col.big || c.r.Intn(3) == 0 {
			text, null := c.gen(col.gen)
			sets = append(sets, pgx.Identifier{col.name}.Sanitize()+" = "+sqlLiteral(text, null, col.sqlType))
		}
	}
	return fmt.Sprintf("UPDATE %s SET %s WHERE %s", t.name, strings.Join(sets, ", "), t.where(c.someRid(t)))
}

func (c *rlClient) deleteSQL(t *rlTable) string {
	return fmt.Sprintf("DELETE FROM %s WHERE %s", t.name, t.where(c.someRid(t)))
}

func (c *rlClient) upsertSQL(t *rlTable, doUpdate bool) string {
	rid := c.someRid(t)
	if c.r.Intn(3) == 0 {
		rid = c.newRid(t)
	}
	s := fmt.Sprintf("INSERT INTO %s (%s) VALUES %s ON CONFLICT", t.name, columnList(t), c.valuesTuple(t, rid))
	if t.key.keyless() || !doUpdate {
		return s + " DO NOTHING"
	}
	var sets []string
	for _, col := range t.cols {
		if !col.big || c.r.Intn(2) == 0 {
			id := pgx.Identifier{col.name}.Sanitize()
			sets = append(sets, id+" = EXCLUDED."+id)
		}
	}
	if len(sets) == 0 {
		return s + " DO NOTHING"
	}
	return fmt.Sprintf("%s (%s) DO UPDATE SET %s", s, strings.Join(t.keyColumns(), ", "), strings.Join(sets, ", "))
}

// randomDML is one random row statement on a random table.
func (c *rlClient) randomDML(tables []*rlTable) string {
	t := c.pickTable(tables)
	switch c.r.Intn(10) {
	case 0, 1, 2, 3:
		return c.insertSQL(t, 1+c.r.Intn(3))
	case 4, 5, 6:
		return c.updateSQL(t)
	case 7:
		if !t.key.keyless() {
			return c.updateKeySQL(t)
		}
		return c.updateSQL(t)
	case 8:
		return c.deleteSQL(t)
	}
	return c.upsertSQL(t, true)
}

func (c *rlClient) dmlBatch(ctx context.Context, tables []*rlTable, n int) error {
	for i := 0; i < n; i++ {
		if err := c.exec(ctx, c.randomDML(tables)); err != nil {
			return err
		}
	}
	return nil
}

func (c *rlClient) do(ctx context.Context, op string) error {
	tables := c.schema.snapshot()
	t := c.pickTable(tables)
	switch op {
	case "insert":
		return c.exec(ctx, c.insertSQL(t, 1))
	case "insert_multi":
		return c.exec(ctx, c.insertSQL(t, 2+c.r.Intn(8)))
	case "copy":
		return c.copy(ctx, t, 2+c.r.Intn(40))
	case "update":
		return c.exec(ctx, c.updateSQL(t))
	case "update_key":
		if t.key.keyless() {
			return c.exec(ctx, c.updateSQL(t))
		}
		return c.exec(ctx, c.updateKeySQL(t))
	case "delete":
		return c.exec(ctx, c.deleteSQL(t))
	case "upsert_nothing":
		return c.exec(ctx, c.upsertSQL(t, false))
	case "upsert_update":
		return c.exec(ctx, c.upsertSQL(t, true))
	case "tx_mixed":
		if err := c.begin(ctx); err != nil {
			return err
		}
		if err := c.dmlBatch(ctx, tables, 2+c.r.Intn(5)); err != nil {
			return err
		}
		return c.end(ctx, "COMMIT")
	case "tx_savepoint":
		return c.savepoints(ctx, tables)
	case "tx_rollback":
		if err := c.begin(ctx); err != nil {
			return err
		}
		if err := c.dmlBatch(ctx, tables, 1+c.r.Intn(4)); err != nil {
			return err
		}
		return c.end(ctx, "ROLLBACK")
	case "two_phase_commit", "two_phase_rollback":
		return c.twoPhase(ctx, tables, op == "two_phase_commit")
	case "truncate":
		return c.exec(ctx, "TRUNCATE "+t.name)
	case "update_delete_tx", "update_then_delete":
		return c.updateThenDelete(ctx, tables, op == "update_delete_tx")
	case "insert_duplicate":
		return c.insertDuplicate(ctx, c.pickKeyless(tables))
	case "truncate_keyless":
		return c.exec(ctx, "TRUNCATE "+c.pickKeyless(tables).name)
	case "vacuum_full", "cluster":
		return c.rewrite(ctx, tables, op)
	case "temp_table":
		return c.tempTable(ctx)
	}
	return c.ddl(ctx, op)
}

// pickKeyless picks a table without a replica identity key (any table if
// there is none).
func (c *rlClient) pickKeyless(tables []*rlTable) *rlTable {
	var keyless []*rlTable
	for _, t := range tables {
		if t.key.keyless() {
			keyless = append(keyless, t)
		}
	}
	if len(keyless) == 0 {
		return c.pickTable(tables)
	}
	return c.pickTable(keyless)
}

// updateThenDelete updates a row of a table with TOASTed columns, leaving
// them unchanged (so the update logs them as unchanged TOAST), and then
// deletes the same row: in one transaction or in two.
func (c *rlClient) updateThenDelete(ctx context.Context, tables []*rlTable, oneTx bool) error {
	var big []*rlTable
	for _, t := range tables {
		if t.hasBig() {
			big = append(big, t)
		}
	}
	t := c.pickTable(tables)
	if len(big) > 0 {
		t = c.pickTable(big)
	}
	rid := c.someRid(t)
	var sets []string
	for _, col := range t.cols {
		if !col.big && (len(sets) == 0 || c.r.Intn(2) == 0) {
			text, null := c.gen(col.gen)
			sets = append(sets, pgx.Identifier{col.name}.Sanitize()+" = "+sqlLiteral(text, null, col.sqlType))
		}
	}
	if len(sets) == 0 {
		return c.exec(ctx, c.deleteSQL(t))
	}
	update := fmt.Sprintf("UPDATE %s SET %s WHERE %s", t.name, strings.Join(sets, ", "), t.where(rid))
	del := fmt.Sprintf("DELETE FROM %s WHERE %s", t.name, t.where(rid))
	if !oneTx {
		if err := c.exec(ctx, update); err != nil {
			return err
		}
		c.stats.Committed++ // the update's; run counts none once the count moved
		if err := c.exec(ctx, del); err != nil {
			return err
		}
		c.stats.Committed++
		return nil
	}
	if err := c.begin(ctx); err != nil {
		return err
	}
	for _, stmt := range []string{update, update, del} {
		if stmt == update && c.r.Intn(2) == 0 {
			continue // the same key updated once or twice before its delete
		}
		if err := c.exec(ctx, stmt); err != nil {
			return err
		}
	}
	return c.end(ctx, "COMMIT")
}

// insertDuplicate inserts one row two or three times: a keyless table
// holds identical rows, which only their physical identity tells apart.
func (c *rlClient) insertDuplicate(ctx context.Context, t *rlTable) error {
	tuple := c.valuesTuple(t, c.newRid(t))
	n := 2 + c.r.Intn(2)
	tuples := make([]string, n)
	for i := range tuples {
		tuples[i] = tuple
	}
	return c.exec(ctx, fmt.Sprintf("INSERT INTO %s (%s) VALUES %s", t.name, columnList(t), strings.Join(tuples, ", ")))
}

// rewrite runs VACUUM FULL or CLUSTER: every tuple moves to a new heap
// without a row record. Mostly a keyless table's, sometimes any table's.
func (c *rlClient) rewrite(ctx context.Context, tables []*rlTable, op string) error {
	t := c.pickKeyless(tables)
	if c.r.Intn(3) == 0 {
		t = c.pickTable(tables)
	}
	stmt := "VACUUM FULL " + t.name
	if op == "cluster" {
		stmt = "CLUSTER " + t.name
		switch {
		case t.key.keyless():
			stmt += " USING " + t.name + "_seq"
		case t.key == keyIdentity:
			stmt += " USING " + t.name + "_key"
		default:
			stmt += " USING " + t.name + "_pkey"
		}
	}
	// Neither runs in a transaction block: the lock timeout is the
	// session's for the statement.
	if err := c.exec(ctx, "SET lock_timeout = '3s'"); err != nil {
		return err
	}
	err := c.exec(ctx, stmt)
	if _, rerr := c.conn.Exec(ctx, "RESET lock_timeout"); rerr != nil && err == nil {
		err = rerr
	}
	return err
}

// tempTable creates a temporary table, writes it and drops it (at commit,
// or by a DROP, or sometimes not at all: the session's end drops it).
func (c *rlClient) tempTable(ctx context.Context) error {
	c.gids++
	name := fmt.Sprintf("rl_temp_%d_%d", c.id, c.gids)
	onCommitDrop := c.r.Intn(3) == 0
	create := "CREATE TEMP TABLE " + name + " (id int8 PRIMARY KEY, v text, n numeric)"
	if onCommitDrop {
		create += " ON COMMIT DROP"
	}
	stmts := []string{create,
		"INSERT INTO " + name + " SELECT g, md5(g::text), g / 7.0 FROM generate_series(1, " + strconv.Itoa(1+c.r.Intn(50)) + ") g",
		"UPDATE " + name + " SET v = v || 'x' WHERE id % 3 = 0",
		"DELETE FROM " + name + " WHERE id % 5 = 0"}
	if !onCommitDrop && c.r.Intn(4) != 0 {
		stmts = append(stmts, "DROP TABLE "+name)
	}
	if err := c.begin(ctx); err != nil {
		return err
	}
	for _, stmt := range stmts {
		if err := c.exec(ctx, stmt); err != nil {
			return err
		}
	}
	return c.end(ctx, "COMMIT")
}

// savepoints: work kept, work rolled back to a savepoint, work released.
func (c *rlClient) savepoints(ctx context.Context, tables []*rlTable) error {
	if err := c.begin(ctx); err != nil {
		return err
	}
	steps := []string{"SAVEPOINT s1", "", "ROLLBACK TO SAVEPOINT s1", "", "SAVEPOINT s2", "", "RELEASE SAVEPOINT s2", ""}
	for _, s := range steps {
		var err error
		if s == "" {
			err = c.dmlBatch(ctx, tables, 1+c.r.Intn(2))
		} else {
			err = c.exec(ctx, s)
		}
		if err != nil {
			return err
		}
	}
	return c.end(ctx, "COMMIT")
}

func (c *rlClient) twoPhase(ctx context.Context, tables []*rlTable, commit bool) error {
	if err := c.begin(ctx); err != nil {
		return err
	}
	if err := c.dmlBatch(ctx, tables, 1+c.r.Intn(4)); err != nil {
		return err
	}
	c.gids++
	gid := fmt.Sprintf("rl_%d_%d_%d", c.opt.Seed, c.id, c.gids)
	if err := c.exec(ctx, "PREPARE TRANSACTION '"+gid+"'"); err != nil {
		return err
	}
	c.inTx = false
	finish := "ROLLBACK PREPARED '" + gid + "'"
	if commit {
		finish = "COMMIT PREPARED '" + gid + "'"
	}
	// Must not be skipped: a prepared transaction left behind holds its
	// locks forever.
	if _, err := c.conn.Exec(ctx, finish); err != nil {
		return fmt.Errorf("%s: %w", finish, err)
	}
	if commit {
		c.stats.Committed++
	} else {
		c.stats.RolledBack++
	}
	return nil
}

// copy inserts rows with COPY FROM STDIN (text format), which PostgreSQL
// logs as multi-insert records.
func (c *rlClient) copy(ctx context.Context, t *rlTable, rows int) error {
	var b strings.Builder
	for i := 0; i < rows; i++ {
		rid := c.newRid(t)
		var fields []string
		switch t.key {
		case keyID, keyFull, keyNone, keyNothing:
			fields = append(fields, strconv.FormatInt(rid, 10))
		case keyIdentity:
			fields = append(fields, "c"+strconv.FormatInt(rid, 10), strconv.FormatInt(rid%7, 10))
		case keyPair:
			fields = append(fields, strconv.FormatInt(rid%5, 10), uuidFor(rid))
		}
		for _, col := range t.cols {
			fields = append(fields, copyField(c.gen(col.gen)))
		}
		b.WriteString(strings.Join(fields, "\t"))
		b.WriteByte('\n')
	}
	sql := fmt.Sprintf("COPY %s (%s) FROM STDIN", t.name, columnList(t))
	_, err := c.conn.PgConn().CopyFrom(ctx, strings.NewReader(b.String()), sql)
	if err == nil {
		c.stats.Committed++
	}
	return c.classify(err, sql)
}

// gen draws a value, applying the options that restrict values.
func (c *rlClient) gen(g valueGen) (string, bool) {
	text, null := g(c.r)
	if c.opt.NoFarFutureTimestamps && strings.HasPrefix(text, "294276-") {
		text = "294246-01-01 00:00:00"
	}
	return text, null
}
