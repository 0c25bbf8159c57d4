// Package chcompare compares a PostgreSQL table with its ClickHouse
// replica value by value, for acceptance tests: both sides are rendered as
// PostgreSQL's text output under rowmodel.CompareSettings, the source by
// the server itself and ClickHouse's stored values by
// clickhouse.CanonicalText.
package chcompare

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/jackc/pgx/v5"

	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/rowmodel"
)

// Column is one compared column: the source column and its ClickHouse
// column (Spec.Name is the ClickHouse name).
type Column struct {
	Source desclog.Column
	Spec   clickhouse.ColumnSpec
}

// Table is one replicated table.
type Table struct {
	// Source is the qualified, quoted PostgreSQL name, e.g.
	// `"public"."rl_items"`.
	Source string
	Target clickhouse.Target
	// Columns are compared in this order; synthetic columns do not belong
	// here.
	Columns []Column
	// Key holds the ClickHouse names of the columns that identify a row;
	// empty matches whole rows (as a multiset).
	Key []string
	// ChangeLog says the ClickHouse table is the change log of a table
	// without a key (ordered by _lsn, _seq): every row image inserted,
	// every delete as the deleted image with _is_deleted = 1. The table it
	// holds (read with FINAL) is the multiset of inserted images minus the
	// deleted ones.
	ChangeLog bool
}

// row is one row's texts in Table.Columns order; nil is NULL.
type row []*string

// Compare reads the source table (every value in the text result format,
// i.e. its type's output function's text, under rowmodel.CompareSettings,
// which it sets on pg's session) and the ClickHouse table (SELECT ... FROM
// t FINAL WHERE _is_deleted = 0, rendered by clickhouse.CanonicalText) and
// returns one line per difference, ordered by key: rows missing from
// ClickHouse, extra rows in ClickHouse, and each differing value with its
// column, the row's key and both texts. At most maxDiffs lines are returned
// (maxDiffs <= 0: all); when there are more, the last line counts the
// unlisted ones. Both tables are read whole into memory.
//
// The source is read in the text result format rather than with col::text
// because a ::text cast is not always the output function: bool::text is
// "true", inet::text always has a mask, bpchar::text drops trailing blanks.
// It reads FROM ONLY the source: inheritance children are tables of their
// own.
func Compare(ctx context.Context, pg *pgx.Conn, ch driver.Conn, t Table, maxDiffs int) ([]string, error) {
	keyIdx, err := keyIndexes(t)
	if err != nil {
		return nil, err
	}
	src, err := readSource(ctx, pg, t)
	if err != nil {
		return nil, err
	}
	replica, err := readClickHouse(ctx, ch, t)
	if err != nil {
		return nil, err
	}
	return diffRows(t, keyIdx, src, replica, maxDiffs), nil
}

// keyIndexes maps Table.Key to column positions (every column when the key
// is empty).
func keyIndexes(t Table) ([]int, error) {
	if len(t.Key) == 0 {
		idx := make([]int, len(t.Columns))
		for i := range idx {
			idx[i] = i
		}
		return idx, nil
	}
	idx := make([]int, len(t.Key))
	for i, name := range t.Key {
		idx[i] = -1
		for j, c := range t.Columns {
			if c.Spec.Name == name {
				idx[i] = j
				break
			}
		}
		if idx[i] < 0 {
			return nil, fmt.Errorf("comparing %s: key column %q is not among the compared columns", clickhouse.QuoteQualified(t.Target), name)
		}
	}
	return idx, nil
}

func readSource(ctx context.Context, pg *pgx.Conn, t Table) ([]row, error) {
	for _, s := range rowmodel.CompareSettings {
		if _, err := pg.Exec(ctx, s); err != nil {
			return nil, fmt.Errorf("comparing %s: %s: %w", t.Source, s, err)
		}
	}
	if len(t.Columns) == 0 {
		// A table without columns (CREATE TABLE t ()): its rows are
		// empty, only their number tells.
		var n int64
		if err := pg.QueryRow(ctx, "SELECT count(*) FROM ONLY "+t.Source).Scan(&n); err != nil {
			return nil, fmt.Errorf("reading source table %s: %w", t.Source, err)
		}
		return make([]row, n), nil
	}
	exprs := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		exprs[i] = pgx.Identifier{c.Source.Name}.Sanitize()
	}
	q := "SELECT " + strings.Join(exprs, ", ") + " FROM ONLY " + t.Source
	rows, err := pg.Query(ctx, q, pgx.QueryResultFormats{pgx.TextFormatCode})
	if err != nil {
		return nil, fmt.Errorf("reading source table %s: %w", t.Source, err)
	}
	defer rows.Close()
	var out []row
	for rows.Next() {
		raw := rows.RawValues()
		r := make(row, len(raw))
		for i, b := range raw {
			if b != nil {
				s := string(b)
				r[i] = &s
			}
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading source table %s: %w", t.Source, err)
	}
	return out, nil
}

func readClickHouse(ctx context.Context, ch driver.Conn, t Table) ([]row, error) {
	target := clickhouse.QuoteQualified(t.Target)
	if len(t.Columns) == 0 {
		deleted := clickhouse.QuoteIdent(clickhouse.ColIsDeleted)
		q := "SELECT toInt64(count()) FROM " + target + " FINAL WHERE " + deleted + " = 0"
		if t.ChangeLog {
			q = "SELECT toInt64(countIf(" + deleted + " = 0)) - toInt64(countIf(" + deleted + " = 1)) FROM " + target + " FINAL"
		}
		var n int64
		if err := ch.QueryRow(ctx, q).Scan(&n); err != nil {
			return nil, fmt.Errorf("reading ClickHouse table %s: %w", target, err)
		}
		if n < 0 {
			return nil, fmt.Errorf("reading ClickHouse table %s: %d more deleted images than inserted ones", target, -n)
		}
		return make([]row, n), nil
	}
	// A Nullable array is two ClickHouse columns: the array and its NULL
	// flag (clickhouse.ColumnSpec.NullFlag).
	specs := make([]clickhouse.ColumnSpec, len(t.Columns))
	for i, c := range t.Columns {
		specs[i] = c.Spec
	}
	physical := clickhouse.Physical(specs)
	exprs := make([]string, len(physical))
	for i, c := range physical {
		exprs[i] = clickhouse.QuoteIdent(c.Name)
	}
	q := "SELECT " + strings.Join(exprs, ", ") + " FROM " + target + " FINAL WHERE " +
		clickhouse.QuoteIdent(clickhouse.ColIsDeleted) + " = 0"
	if t.ChangeLog {
		q = "SELECT " + strings.Join(exprs, ", ") + ", " + clickhouse.QuoteIdent(clickhouse.ColIsDeleted) + " FROM " + target + " FINAL"
	}
	rows, err := ch.Query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("reading ClickHouse table %s: %w", target, err)
	}
	defer rows.Close()
	types := rows.ColumnTypes()
	var deleted uint8
	if t.ChangeLog {
		types = types[:len(types)-1]
	}
	counts := map[string]int{}
	images := map[string]row{}
	if len(types) != len(physical) {
		return nil, fmt.Errorf("reading ClickHouse table %s: %d columns returned for %d selected", target, len(types), len(physical))
	}
	var out []row
	for rows.Next() {
		// Fresh destinations per row: the driver fills them with the
		// column's scan type (a pointer type for Nullable columns).
		dest := make([]any, len(types), len(types)+1)
		for i, ct := range types {
			dest[i] = reflect.New(ct.ScanType()).Interface()
		}
		scan := dest
		if t.ChangeLog {
			scan = append(dest, &deleted)
		}
		if err := rows.Scan(scan...); err != nil {
			return nil, fmt.Errorf("reading ClickHouse table %s: %w", target, err)
		}
		r := make(row, len(t.Columns))
		j := 0
		for i, c := range t.Columns {
			text, null, err := clickhouse.CanonicalText(c.Source, c.Spec, dest[j])
			if err != nil {
				return nil, fmt.Errorf("reading ClickHouse table %s: %w", target, err)
			}
			j++
			if c.Spec.NullFlag() != "" {
				flag, ok := dest[j].(*uint8)
				if !ok {
					return nil, fmt.Errorf("reading ClickHouse table %s: NULL flag %s scanned as %T", target, c.Spec.NullFlag(), dest[j])
				}
				null = *flag != 0
				j++
			}
			if !null {
				r[i] = &text
			}
		}
		if !t.ChangeLog {
			out = append(out, r)
			continue
		}
		k := encode(r)
		images[k] = r
		if deleted == 1 {
			counts[k]--
		} else {
			counts[k]++
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading ClickHouse table %s: %w", target, err)
	}
	if t.ChangeLog {
		keys := make([]string, 0, len(counts))
		for k := range counts {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if counts[k] < 0 {
				return nil, fmt.Errorf("ClickHouse change log %s deletes a row image %d more times than it inserts it: %s", target, -counts[k], describeImage(t, images[k]))
			}
			for n := 0; n < counts[k]; n++ {
				out = append(out, images[k])
			}
		}
	}
	return out, nil
}

// group holds the rows of both sides sharing one key.
type group struct {
	key      row
	src, rep []row
}

// encode is an injective text of values (NULL distinct from every text).
func encode(vals []*string) string {
	var b strings.Builder
	for _, v := range vals {
		if v == nil {
			b.WriteString("N;")
			continue
		}
		b.WriteString("V")
		b.WriteString(strconv.Itoa(len(*v)))
		b.WriteByte(':')
		b.WriteString(*v)
	}
	return b.String()
}

func pick(r row, idx []int) row {
	out := make(row, len(idx))
	for i, j := range idx {
		out[i] = r[j]
	}
	return out
}

func diffRows(t Table, keyIdx []int, src, replica []row, maxDiffs int) []string {
	groups := map[string]*group{}
	add := func(r row, fromSource bool) {
		key := pick(r, keyIdx)
		k := encode(key)
		g := groups[k]
		if g == nil {
			g = &group{key: key}
			groups[k] = g
		}
		if fromSource {
			g.src = append(g.src, r)
		} else {
			g.rep = append(g.rep, r)
		}
	}
	for _, r := range src {
		add(r, true)
	}
	for _, r := range replica {
		add(r, false)
	}
	ordered := make([]*group, 0, len(groups))
	for _, g := range groups {
		ordered = append(ordered, g)
	}
	sort.Slice(ordered, func(i, j int) bool { return lessRow(ordered[i].key, ordered[j].key) })

	var diffs []string
	for _, g := range ordered {
		diffs = append(diffs, diffGroup(t, keyIdx, g)...)
	}
	if maxDiffs > 0 && len(diffs) > maxDiffs {
		unlisted := len(diffs) - (maxDiffs - 1)
		diffs = append(diffs[:maxDiffs-1:maxDiffs-1],
			fmt.Sprintf("%s: %d more differences not listed", t.Source, unlisted))
	}
	return diffs
}

// diffGroup pairs the rows of one key: identical rows cancel out, the
// remaining ones are paired in order for value differences and the surplus
// of either side is missing or extra. With a unique key there is at most
// one row per side.
func diffGroup(t Table, keyIdx []int, g *group) []string {
	src := sortedRows(g.src)
	rep := sortedRows(g.rep)
	src, rep = dropCommon(src, rep)
	keyDesc := describeKey(t, keyIdx, g.key)
	var diffs []string
	n := min(len(src), len(rep))
	for i := 0; i < n; i++ {
		for c, col := range t.Columns {
			if !sameText(src[i][c], rep[i][c]) {
				diffs = append(diffs, fmt.Sprintf("%s: row %s: column %s: PostgreSQL %s, ClickHouse %s",
					t.Source, keyDesc, columnName(col), showText(src[i][c]), showText(rep[i][c])))
			}
		}
	}
	for range src[n:] {
		diffs = append(diffs, fmt.Sprintf("%s: row %s: missing from ClickHouse", t.Source, keyDesc))
	}
	for range rep[n:] {
		diffs = append(diffs, fmt.Sprintf("%s: row %s: only in ClickHouse", t.Source, keyDesc))
	}
	return diffs
}

func sortedRows(rows []row) []row {
	out := append([]row(nil), rows...)
	sort.Slice(out, func(i, j int) bool { return encode(out[i]) < encode(out[j]) })
	return out
}

// dropCommon removes the rows present on both sides (as multisets) from
// two sorted row lists.
func dropCommon(a, b []row) ([]row, []row) {
	var restA, restB []row
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		ea, eb := encode(a[i]), encode(b[j])
		switch {
		case ea == eb:
			i++
			j++
		case ea < eb:
			restA = append(restA, a[i])
			i++
		default:
			restB = append(restB, b[j])
			j++
		}
	}
	return append(restA, a[i:]...), append(restB, b[j:]...)
}

func sameText(a, b *string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

func showText(v *string) string {
	if v == nil {
		return "NULL"
	}
	return strconv.Quote(*v)
}

// columnName names a column by its source name, with the ClickHouse name
// when the output mapped it to another one.
func columnName(c Column) string {
	if c.Source.Name == c.Spec.Name {
		return strconv.Quote(c.Source.Name)
	}
	return fmt.Sprintf("%q (ClickHouse %q)", c.Source.Name, c.Spec.Name)
}

func describeKey(t Table, keyIdx []int, key row) string {
	parts := make([]string, len(key))
	for i, v := range key {
		parts[i] = t.Columns[keyIdx[i]].Source.Name + "=" + showText(v)
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// lessRow orders keys column by column: NULLs last, numbers numerically
// (so 2 sorts before 10), other texts bytewise.
func lessRow(a, b row) bool {
	for i := range a {
		if c := compareText(a[i], b[i]); c != 0 {
			return c < 0
		}
	}
	return false
}

func compareText(a, b *string) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return 1
	case b == nil:
		return -1
	}
	fa, errA := strconv.ParseFloat(*a, 64)
	fb, errB := strconv.ParseFloat(*b, 64)
	if errA == nil && errB == nil && !math.IsNaN(fa) && !math.IsNaN(fb) && fa != fb {
		if fa < fb {
			return -1
		}
		return 1
	}
	return strings.Compare(*a, *b)
}

// describeImage renders a row image for an error message.
func describeImage(t Table, r row) string {
	parts := make([]string, len(r))
	for i, v := range r {
		parts[i] = columnName(t.Columns[i]) + "=" + showText(v)
	}
	return "(" + strings.Join(parts, ", ") + ")"
}
