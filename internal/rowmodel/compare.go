package rowmodel

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
)

// MaxRowDiffs bounds how many differing rows Compare reports per table.
const MaxRowDiffs = 10

// CompareSettings are the session settings under which PostgreSQL's text
// output equals the processor's contract.
var CompareSettings = []string{
	"SET TimeZone = 'UTC'",
	"SET DateStyle = 'ISO, MDY'",
	"SET IntervalStyle = 'postgres'",
	"SET extra_float_digits = 1",
	"SET bytea_output = 'hex'",
	"SET lc_monetary = 'C'",
}

// Tables lists the model's live tables as schema.table, sorted.
func (m *Model) Tables() []string {
	var out []string
	for _, t := range m.tables {
		out = append(out, t.qualified())
	}
	sort.Strings(out)
	return out
}

func (m *Model) byName(qualified string) *table {
	for _, t := range m.tables {
		if t.qualified() == qualified {
			return t
		}
	}
	return nil
}

// RowCount is the number of live rows of a table (-1 when the model has no
// such table).
func (m *Model) RowCount(qualified string) int {
	t := m.byName(qualified)
	if t == nil {
		return -1
	}
	n := 0
	for _, r := range t.rows {
		if !r.deleted {
			n++
		}
	}
	for _, r := range t.multi {
		n += len(r.live)
	}
	return n
}

// Lookup returns the row of a keyed table whose key columns have the given
// texts (in key column order; nil for NULL): column name -> text, nil is
// NULL, an absent column is unknown.
func (m *Model) Lookup(qualified string, key ...*string) (map[string]*string, bool) {
	t := m.byName(qualified)
	if t == nil || len(t.keyNames) != len(key) {
		return nil, false
	}
	kv := values{}
	for i, n := range t.keyNames {
		kv[n] = key[i]
	}
	k, _ := keyText(t.keyNames, kv)
	r, ok := t.rows[k]
	if !ok || r.deleted {
		return nil, false
	}
	out := make(map[string]*string, len(r.vals))
	for n, v := range r.vals {
		out[n] = v
	}
	return out, true
}

// sourceTable is a user table of the source.
type sourceTable struct {
	oid          uint32
	schema, name string
	cols         []string
	key          []string // replica identity columns; empty = whole row
}

// Compare reads every table of the model and every permanent user table of
// the source through conn (every value as its type's output function's
// text) (it changes the session's settings to
// CompareSettings) and returns an error listing every difference: missing
// and extra tables, column lists, row counts and the first MaxRowDiffs
// differing rows of each table, with column names and both values.
// Tables are matched by oid.
func (m *Model) Compare(ctx context.Context, conn *pgx.Conn) error {
	for _, s := range CompareSettings {
		if _, err := conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	src, err := sourceTables(ctx, conn)
	if err != nil {
		return err
	}
	var diffs []string
	seen := map[uint32]bool{}
	for _, st := range src {
		seen[st.oid] = true
		t := m.tables[st.oid]
		qn := st.schema + "." + st.name
		if t == nil {
			diffs = append(diffs, fmt.Sprintf("table %s (oid %d) is in the source but not in the model", qn, st.oid))
			continue
		}
		if t.qualified() != qn {
			diffs = append(diffs, fmt.Sprintf("table oid %d is %s in the source but %s in the model", st.oid, qn, t.qualified()))
		}
		d, err := compareTable(ctx, conn, st, t)
		if err != nil {
			return fmt.Errorf("comparing %s: %w", qn, err)
		}
		diffs = append(diffs, d...)
	}
	for oid, t := range m.tables {
		if !seen[oid] {
			diffs = append(diffs, fmt.Sprintf("table %s (oid %d) is in the model but not in the source", t.qualified(), oid))
		}
	}
	if len(diffs) == 0 {
		return nil
	}
	return errors.New(fmt.Sprintf("%d differences between the model and the source:\n  ", len(diffs)) + strings.Join(diffs, "\n  "))
}

func sourceTables(ctx context.Context, conn *pgx.Conn) ([]*sourceTable, error) {
	rows, err := conn.Query(ctx, `
SELECT c.oid, n.nspname, c.relname,
       ARRAY(SELECT a.attname::text FROM pg_attribute a
             WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum),
       ARRAY(SELECT a.attname::text FROM pg_index i
             CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
             JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum
             WHERE i.indrelid = c.oid AND k.ord <= i.indnkeyatts
               AND ((c.relreplident = 'd' AND i.indisprimary) OR (c.relreplident = 'i' AND i.indisreplident))
             ORDER BY k.ord)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') AND c.relpersistence = 'p'
  AND n.nspname NOT IN ('pg_catalog', 'information_schema')
  AND n.nspname NOT LIKE 'pg\_toast%' AND n.nspname NOT LIKE 'pg\_temp%'
ORDER BY n.nspname, c.relname`)
	if err != nil {
		return nil, fmt.Errorf("listing the source's tables: %w", err)
	}
	defer rows.Close()
	var out []*sourceTable
	for rows.Next() {
		st := &sourceTable{}
		if err := rows.Scan(&st.oid, &st.schema, &st.name, &st.cols, &st.key); err != nil {
			return nil, fmt.Errorf("listing the source's tables: %w", err)
		}
		out = append(out, st)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing the source's tables: %w", err)
	}
	return out, nil
}

// compareTable compares one table's columns and rows, keyed by the source's
// replica identity (whole rows for FULL).
func compareTable(ctx context.Context, conn *pgx.Conn, st *sourceTable, t *table) ([]string, error) {
	qn := st.schema + "." + st.name
	var diffs []string
	modelCols := make([]string, len(t.cols))
	for i, c := range t.cols {
		modelCols[i] = c.Name
	}
	if strings.Join(modelCols, ",") != strings.Join(st.cols, ",") {
		diffs = append(diffs, fmt.Sprintf("%s: columns differ: source (%s), model (%s)", qn, strings.Join(st.cols, ", "), strings.Join(modelCols, ", ")))
	}
	// Compare the columns both sides have, in the source's order.
	inModel := map[string]bool{}
	for _, n := range modelCols {
		inModel[n] = true
	}
	var cols []string
	for _, n := range st.cols {
		if inModel[n] {
			cols = append(cols, n)
		}
	}
	key := st.key
	for _, k := range key {
		if !inModel[k] {
			key = nil // the model cannot key by it; fall back to whole rows
		}
	}
	if len(key) == 0 {
		key = cols
	}

	srcRows, err := readSource(ctx, conn, st, cols)
	if err != nil {
		return nil, err
	}
	srcByKey := map[string][]values{}
	for _, r := range srcRows {
		k, _ := keyText(key, r)
		srcByKey[k] = append(srcByKey[k], r)
	}
	modelByKey := map[string][]values{}
	modelCount := 0
	addModel := func(v values) {
		k, ok := keyText(key, v)
		if !ok {
			k = "unknown key: " + t.wholeRowKey(v)
		}
		modelByKey[k] = append(modelByKey[k], v)
		modelCount++
	}
	for _, r := range t.rows {
		if !r.deleted {
			addModel(r.vals)
		}
	}
	for _, r := range t.multi {
		for range r.live {
			addModel(r.vals)
		}
	}
	if modelCount != len(srcRows) {
		diffs = append(diffs, fmt.Sprintf("%s: %d rows in the source, %d in the model", qn, len(srcRows), modelCount))
	}

	keys := make([]string, 0, len(srcByKey)+len(modelByKey))
	for k := range srcByKey {
		keys = append(keys, k)
	}
	for k := range modelByKey {
		if _, ok := srcByKey[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	shown, total := 0, 0
	for _, k := range keys {
		s, mo := srcByKey[k], modelByKey[k]
		d := diffRowGroup(cols, key, s, mo)
		if d == "" {
			continue
		}
		total++
		if shown < MaxRowDiffs {
			diffs = append(diffs, qn+": "+d)
			shown++
		}
	}
	if total > shown {
		diffs = append(diffs, fmt.Sprintf("%s: ... and %d more differing keys", qn, total-shown))
	}
	return diffs, nil
}

// readSource reads the columns in the text result format: each value is
// its type's output function's text (a ::text cast is not always that:
// bool, bpchar, inet and cidr have their own casts).
func readSource(ctx context.Context, conn *pgx.Conn, st *sourceTable, cols []string) ([]values, error) {
	exprs := make([]string, len(cols))
	for i, c := range cols {
		exprs[i] = pgx.Identifier{c}.Sanitize()
	}
	if len(exprs) == 0 {
		exprs = []string{"NULL::text"} // still count rows of a table without columns
	}
	q := "SELECT " + strings.Join(exprs, ", ") + " FROM ONLY " + pgx.Identifier{st.schema, st.name}.Sanitize()
	rows, err := conn.Query(ctx, q, pgx.QueryResultFormats{pgx.TextFormatCode})
	if err != nil {
		return nil, fmt.Errorf("reading the source: %w", err)
	}
	defer rows.Close()
	var out []values
	for rows.Next() {
		raw := rows.RawValues()
		v := make(values, len(cols))
		for i, c := range cols {
			if raw[i] != nil {
				s := string(raw[i])
				v[c] = &s
			} else {
				v[c] = nil
			}
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading the source: %w", err)
	}
	return out, nil
}

// diffRowGroup describes how the rows sharing one key differ ("" if equal).
func diffRowGroup(cols, key []string, src, model []values) string {
	keyDesc := func(v values) string {
		parts := make([]string, len(key))
		for i, k := range key {
			parts[i] = k + "=" + show(v, k)
		}
		return "(" + strings.Join(parts, ", ") + ")"
	}
	switch {
	case len(src) == 1 && len(model) == 1:
		var cd []string
		for _, c := range cols {
			if !sameValue(src[0], model[0], c) {
				cd = append(cd, fmt.Sprintf("%s: source %s, model %s", c, abbreviate(show(src[0], c)), abbreviate(show(model[0], c))))
			}
		}
		if len(cd) == 0 {
			return ""
		}
		return "row " + keyDesc(src[0]) + " differs: " + strings.Join(cd, "; ")
	case len(src) == len(model):
		// Multiset of whole rows: same key means same row.
		return ""
	case len(model) == 0:
		return "row " + keyDesc(src[0]) + fmt.Sprintf(" is in the source (x%d) but not in the model", len(src))
	case len(src) == 0:
		return "row " + keyDesc(model[0]) + fmt.Sprintf(" is in the model (x%d) but not in the source", len(model))
	}
	return "row " + keyDesc(src[0]) + fmt.Sprintf(" occurs %d times in the source, %d in the model", len(src), len(model))
}

func sameValue(a, b values, c string) bool {
	av, aok := a[c]
	bv, bok := b[c]
	if !aok || !bok {
		return false
	}
	if av == nil || bv == nil {
		return av == nil && bv == nil
	}
	return *av == *bv
}

func show(v values, c string) string {
	x, ok := v[c]
	switch {
	case !ok:
		return "<unknown>"
	case x == nil:
		return "NULL"
	}
	return fmt.Sprintf("%q", *x)
}

func abbreviate(s string) string {
	const max = 120
	if len(s) <= max {
		return s
	}
	return fmt.Sprintf("%s...(%d bytes)", s[:max], len(s))
}
