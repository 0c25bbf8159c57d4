package output

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	clickhousego "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/load"
)

// TestReloadClass: every reason a followed table is reloaded for falls in
// one class of walshadow_table_reloads_total{reason}.
func TestReloadClass(t *testing.T) {
	_, valueErr := clickhouse.ConvertValue(clickhouse.ColumnSpec{Name: "v", Type: clickhouse.ColumnType{Type: "Int8", Repr: clickhouse.ReprInt}}, int64(100000))
	if valueErr == nil {
		t.Fatal("100000 converted to Int8")
	}
	for _, tc := range []struct {
		name  string
		cause error
		class string
	}{
		{"a narrowing", &reloadNeeded{cause: fmt.Errorf("public.t (event): %w", errors.Join(&clickhouse.TypeChangeError{Source: "public.t", Column: "v", Reason: "narrowing"}))}, load.ReloadTypeChange},
		{"a composite type", &reloadNeeded{cause: &clickhouse.TypeChangeError{Source: "public.t", Column: "c",
			Reason: "the composite type's attributes changed (pair to pair), which changes how every stored value reads"}}, load.ReloadCompositeType},
		{"the key dropped", &reloadNeeded{cause: errors.Join(errors.New("public.t: its replica identity key [id] is gone: its rows are keyed by their physical identity from now on"))}, load.ReloadKeyDropped},
		{"VACUUM FULL", &reloadNeeded{cause: fmt.Errorf("update of t at 0/1 is in heap generation (filenode) 5, the table's rows in 4: %w, so ...", errRewritten)}, load.ReloadRewrite},
		{"a value", fmt.Errorf("insert of t at 0/1: column v: %w", valueErr), load.ReloadValueRefused},
		{"ClickHouse refused", fmt.Errorf("inserting into t: %w", &clickhousego.Exception{Code: 53, Message: "Type mismatch"}), load.ReloadClickHouseRefused},
		{"the processor", &decodeFailure{"relation 16384: no shape at 0/1"}, load.ReloadDecodeFailed},
		{"TOAST", errors.New("update of t at 0/1: unchanged TOAST column b is not in the WAL and the table has no key to read it back by"), load.ReloadToastMissing},
		{"anything else", errors.New("insert of t at 0/1: column \"x\" is not in the relation's shape"), load.ReloadOther},
	} {
		if got := reloadClass(tc.cause); got != tc.class {
			t.Errorf("%s (%v): class %s, want %s", tc.name, tc.cause, got, tc.class)
		}
	}
	for why, class := range map[string]string{
		"returned to the configured scope":                                                                   load.ReloadScope,
		"returned to the scope at 0/1":                                                                       load.ReloadScope,
		"entered the scope (it was not followed before) at 1":                                                load.ReloadScope,
		"was made LOGGED (its rows from while it was UNLOGGED are not in the WAL) at 0/1":                    load.ReloadMadeLogged,
		"was rewritten by its ALTER TABLE (a table without a key holds its rows once only through a reload)": load.ReloadRewrite,
	} {
		if got := whyClass(why); got != class {
			t.Errorf("%q: class %s, want %s", why, got, class)
		}
	}
	for _, c := range load.ReloadReasons {
		if strings.ToLower(c) != c || strings.ContainsAny(c, " .") {
			t.Errorf("reason %q is not a label value", c)
		}
	}
}

// TestRemedy: a parked table's remedy names what to change and how to
// try again.
func TestRemedy(t *testing.T) {
	_, valueErr := clickhouse.ConvertValue(clickhouse.ColumnSpec{Name: "v", Type: clickhouse.ColumnType{Type: "Int8", Repr: clickhouse.ReprInt}}, int64(100000))
	r := remedyFor(valueErr, "public.t")
	for _, want := range []string{"tables.public.t.column_types", "walshadow reload <config.yaml> public.t", "walshadow run -w"} {
		if !strings.Contains(r, want) {
			t.Errorf("remedy %q lacks %q", r, want)
		}
	}
}
