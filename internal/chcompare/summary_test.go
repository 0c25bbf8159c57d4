package chcompare

import (
	"errors"
	"strings"
	"testing"

	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/desclog"
)

func sp(s string) *string { return &s }

var summaryColumns = []desclog.Column{
	{Name: "id", TypeOid: oidInt8},
	{Name: "qty", TypeOid: oidInt4},
	{Name: "price", TypeOid: oidNumeric},
	{Name: "label", TypeOid: 25},
	{Name: "positive", TypeOid: 90001, TypeKind: 'd', BaseTypeOid: oidInt4},
}

func TestSummarizeSumsExactly(t *testing.T) {
	huge := "9223372036854775807"
	rows := [][]*string{
		{sp("1"), sp("10"), sp("0.1"), sp("a"), sp("5")},
		{sp(huge), nil, sp("0.20"), nil, sp("7")},
		{sp(huge), sp("-3"), sp("NaN"), sp("b"), nil},
		{sp("-2"), sp("0"), sp("123456789012345678901234567890.001"), sp("c"), sp("1")},
	}
	s, err := Summarize(summaryColumns, rows)
	if err != nil {
		t.Fatal(err)
	}
	if s.Rows != 4 {
		t.Errorf("Rows = %d, want 4", s.Rows)
	}
	want := map[string]string{
		// Past int64: 2*(2^63-1) + 1 - 2.
		"id":       "18446744073709551613",
		"qty":      "7",
		"price":    "123456789012345678901234567890.301 +NaN×1",
		"positive": "13",
	}
	for name, w := range want {
		if got := s.Sums[name]; got != w {
			t.Errorf("sum(%s) = %q, want %q", name, got, w)
		}
	}
	if _, ok := s.Sums["label"]; ok {
		t.Errorf("text column label was summed: %q", s.Sums["label"])
	}
}

func TestSummarizeMD5IgnoresRowOrderButNotContent(t *testing.T) {
	a := [][]*string{{sp("1"), sp("2"), sp("3"), sp("x"), nil}, {sp("4"), nil, sp("6"), sp("y"), sp("1")}}
	reversed := [][]*string{a[1], a[0]}
	sa, err := Summarize(summaryColumns, a)
	if err != nil {
		t.Fatal(err)
	}
	sr, err := Summarize(summaryColumns, reversed)
	if err != nil {
		t.Fatal(err)
	}
	if sa.MD5 != sr.MD5 || len(DiffSummaries(sa, sr)) != 0 {
		t.Errorf("row order changed the summary: %+v vs %+v", sa, sr)
	}
	// NULL versus the text "NULL" and versus an empty text: same sums,
	// different rows.
	for _, label := range []*string{sp("NULL"), sp("")} {
		b := [][]*string{a[0], {sp("4"), nil, sp("6"), label, sp("1")}}
		a2 := [][]*string{a[0], {sp("4"), nil, sp("6"), nil, sp("1")}}
		sb, _ := Summarize(summaryColumns, b)
		sn, _ := Summarize(summaryColumns, a2)
		if sb.MD5 == sn.MD5 {
			t.Errorf("label %q and NULL give the same md5", *label)
		}
	}
	// Values moving between columns keep the texts but not the rows.
	swapped := [][]*string{{sp("x"), sp("2"), sp("3"), sp("1"), nil}}
	cols := []desclog.Column{{Name: "a", TypeOid: 25}, {Name: "b", TypeOid: 25}, {Name: "c", TypeOid: 25}, {Name: "d", TypeOid: 25}, {Name: "e", TypeOid: 25}}
	s1, _ := Summarize(cols, [][]*string{{sp("1"), sp("2"), sp("3"), sp("x"), nil}})
	s2, _ := Summarize(cols, swapped)
	if s1.MD5 == s2.MD5 {
		t.Error("swapping values between columns kept the md5")
	}
}

func TestSummarizeRefusesNonNumbers(t *testing.T) {
	_, err := Summarize(summaryColumns, [][]*string{{sp("1"), sp("1e3"), sp("1"), nil, nil}})
	if err == nil || !strings.Contains(err.Error(), `"qty"`) || !strings.Contains(err.Error(), `"1e3"`) {
		t.Fatalf("error %v, want one naming column qty and value 1e3", err)
	}
}

func TestDiffSummariesNamesWhatDiffers(t *testing.T) {
	rows := [][]*string{{sp("1"), sp("10"), sp("1.5"), sp("a"), sp("2")}, {sp("2"), sp("20"), sp("2.5"), sp("b"), sp("3")}}
	pgSum, err := Summarize(summaryColumns, rows)
	if err != nil {
		t.Fatal(err)
	}
	// ClickHouse lost the second row's qty change: 20 became 21.
	changed := [][]*string{rows[0], {sp("2"), sp("21"), sp("2.5"), sp("b"), sp("3")}}
	chSum, err := Summarize(summaryColumns, changed)
	if err != nil {
		t.Fatal(err)
	}
	diffs := DiffSummaries(pgSum, chSum)
	if len(diffs) != 2 || diffs[0] != `sum("qty"): PostgreSQL 30, ClickHouse 31` || !strings.HasPrefix(diffs[1], "md5: PostgreSQL "+pgSum.MD5+", ClickHouse "+chSum.MD5) {
		t.Errorf("diffs = %q", diffs)
	}
	missing, _ := Summarize(summaryColumns, rows[:1])
	diffs = DiffSummaries(pgSum, missing)
	if len(diffs) == 0 || diffs[0] != "count: PostgreSQL 2, ClickHouse 1" {
		t.Errorf("diffs = %q", diffs)
	}
	err = &SummaryMismatchError{Table: `"public"."t"`, Target: clickhouse.QuoteQualified(clickhouse.Target{Database: "db", Table: "public_t"}), Diffs: diffs}
	var mm *SummaryMismatchError
	if !errors.As(error(err), &mm) || !strings.Contains(err.Error(), `"public"."t"`) || !strings.Contains(err.Error(), "count: PostgreSQL 2, ClickHouse 1") {
		t.Errorf("error %q", err)
	}
}
