package chcompare

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"math/big"
	"sort"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/jackc/pgx/v5"

	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/desclog"
)

// Summary is a table's fingerprint for crash drills: cheap to print, and
// equal on both sides exactly when the tables hold the same rows (up to an
// md5 collision).
type Summary struct {
	// Rows is the number of rows.
	Rows int64
	// Sums is the exact decimal sum of every integer or numeric column
	// (domains over them included), by source column name. Non-finite
	// numeric values (NaN, ±Infinity) are not added; they are counted
	// after the sum, e.g. "12.50 +NaN×2".
	Sums map[string]string
	// MD5 is the hex md5 of the rows' canonical lines (each row's texts,
	// length-prefixed, NULL distinct from every text), sorted and joined
	// by newlines.
	MD5 string
}

// PostgreSQL type oids of the columns Summary sums.
const (
	oidInt8    = 20
	oidInt2    = 21
	oidInt4    = 23
	oidOid     = 26
	oidNumeric = 1700
)

// summable reports whether a column's values are integers or decimals
// whose exact sum is meaningful.
func summable(c desclog.Column) bool {
	typ := c.TypeOid
	if c.TypeKind == 'd' {
		typ = c.BaseTypeOid
	}
	switch typ {
	case oidInt2, oidInt4, oidInt8, oidOid, oidNumeric:
		return true
	}
	return false
}

// Summarize fingerprints rows: each row holds the texts of columns (in that
// order, nil for NULL) as PostgreSQL's output functions write them. A
// value of a summed column that is not a decimal number is an error naming
// the column and the value.
func Summarize(columns []desclog.Column, rows [][]*string) (Summary, error) {
	s := Summary{Rows: int64(len(rows)), Sums: map[string]string{}}
	for i, c := range columns {
		if !summable(c) {
			continue
		}
		var sum decimalSum
		for _, r := range rows {
			if r[i] == nil {
				continue
			}
			if err := sum.add(*r[i]); err != nil {
				return Summary{}, fmt.Errorf("summing column %q: %w", c.Name, err)
			}
		}
		s.Sums[c.Name] = sum.String()
	}
	lines := make([]string, len(rows))
	for i, r := range rows {
		lines[i] = encode(r)
	}
	sort.Strings(lines)
	h := md5.New()
	for i, l := range lines {
		if i > 0 {
			h.Write([]byte{'\n'})
		}
		h.Write([]byte(l))
	}
	s.MD5 = hex.EncodeToString(h.Sum(nil))
	return s, nil
}

// decimalSum adds decimal texts exactly.
type decimalSum struct {
	total big.Rat
	// scale is the most fractional digits seen: the sum is rendered with
	// that many, which is exact since every addend has at most as many.
	scale    int
	specials map[string]int // NaN, Infinity, -Infinity
}

func (d *decimalSum) add(text string) error {
	switch text {
	case "NaN", "Infinity", "-Infinity":
		if d.specials == nil {
			d.specials = map[string]int{}
		}
		d.specials[text]++
		return nil
	}
	if strings.ContainsAny(text, "eE/") || text == "" {
		// PostgreSQL writes numeric and integers in plain notation; an
		// exponent or a fraction is not a value of a summed type.
		return fmt.Errorf("value %q is not a plain decimal number", text)
	}
	var v big.Rat
	if _, ok := v.SetString(text); !ok {
		return fmt.Errorf("value %q is not a decimal number", text)
	}
	if dot := strings.IndexByte(text, '.'); dot >= 0 {
		d.scale = max(d.scale, len(text)-dot-1)
	}
	d.total.Add(&d.total, &v)
	return nil
}

func (d *decimalSum) String() string {
	s := d.total.FloatString(d.scale)
	for _, k := range []string{"NaN", "Infinity", "-Infinity"} {
		if n := d.specials[k]; n > 0 {
			s += fmt.Sprintf(" +%s×%d", k, n)
		}
	}
	return s
}

// SummaryMismatchError is two summaries of one table that differ.
type SummaryMismatchError struct {
	// Table is the source table (as in Table.Source) and its ClickHouse
	// table.
	Table, Target string
	// Diffs name what differs with both values, e.g.
	// `sum("qty"): PostgreSQL 120, ClickHouse 118`.
	Diffs []string
}

func (e *SummaryMismatchError) Error() string {
	return fmt.Sprintf("%s and ClickHouse %s differ: %s", e.Table, e.Target, strings.Join(e.Diffs, "; "))
}

// DiffSummaries lists what differs between a source summary and a
// ClickHouse summary: count, each sum(column), md5.
func DiffSummaries(pgSum, chSum Summary) []string {
	var diffs []string
	if pgSum.Rows != chSum.Rows {
		diffs = append(diffs, fmt.Sprintf("count: PostgreSQL %d, ClickHouse %d", pgSum.Rows, chSum.Rows))
	}
	names := make([]string, 0, len(pgSum.Sums))
	for name := range pgSum.Sums {
		names = append(names, name)
	}
	for name := range chSum.Sums {
		if _, ok := pgSum.Sums[name]; !ok {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		a, okA := pgSum.Sums[name]
		b, okB := chSum.Sums[name]
		if a != b || okA != okB {
			diffs = append(diffs, fmt.Sprintf("sum(%q): PostgreSQL %s, ClickHouse %s", name, showSum(a, okA), showSum(b, okB)))
		}
	}
	if pgSum.MD5 != chSum.MD5 {
		diffs = append(diffs, fmt.Sprintf("md5: PostgreSQL %s, ClickHouse %s", pgSum.MD5, chSum.MD5))
	}
	return diffs
}

func showSum(s string, ok bool) string {
	if !ok {
		return "(not summed)"
	}
	return s
}

// CompareSummaries reads the source table and its ClickHouse table as
// Compare does (the same canonical texts) and summarizes both. When the
// summaries differ the error is a *SummaryMismatchError naming the table
// and every differing count, sum and md5 with both values; any other error
// is a failure to read.
func CompareSummaries(ctx context.Context, pg *pgx.Conn, ch driver.Conn, t Table) (pgSum, chSum Summary, err error) {
	target := clickhouse.QuoteQualified(t.Target)
	src, err := readSource(ctx, pg, t)
	if err != nil {
		return Summary{}, Summary{}, err
	}
	replica, err := readClickHouse(ctx, ch, t)
	if err != nil {
		return Summary{}, Summary{}, err
	}
	columns := make([]desclog.Column, len(t.Columns))
	for i, c := range t.Columns {
		columns[i] = c.Source
	}
	if pgSum, err = Summarize(columns, rowsOf(src)); err != nil {
		return Summary{}, Summary{}, fmt.Errorf("summarizing source table %s: %w", t.Source, err)
	}
	if chSum, err = Summarize(columns, rowsOf(replica)); err != nil {
		return Summary{}, Summary{}, fmt.Errorf("summarizing ClickHouse table %s: %w", target, err)
	}
	if diffs := DiffSummaries(pgSum, chSum); len(diffs) > 0 {
		return pgSum, chSum, &SummaryMismatchError{Table: t.Source, Target: target, Diffs: diffs}
	}
	return pgSum, chSum, nil
}

func rowsOf(rows []row) [][]*string {
	out := make([][]*string, len(rows))
	for i, r := range rows {
		out[i] = r
	}
	return out
}
