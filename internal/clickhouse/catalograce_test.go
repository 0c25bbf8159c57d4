package clickhouse

import (
	"fmt"
	"testing"

	clickhousego "github.com/ClickHouse/clickhouse-go/v2"
)

func TestCatalogRace(t *testing.T) {
	// What 18.16 answered a system.tables lookup of public.rl_docs while
	// another table of the database was being dropped.
	other := &clickhousego.Exception{Code: 60, Message: "Table walshadow_test.`public.rl_full__wsload_16445` doesn't exist."}
	docs := Target{Database: "walshadow_test", Table: "public.rl_docs"}
	if !catalogRace(fmt.Errorf("looking up: %w", other), docs) {
		t.Error("another table's UNKNOWN_TABLE is not a catalog race")
	}
	if catalogRace(other, Target{Database: "walshadow_test", Table: "public.rl_full__wsload_16445"}) {
		t.Error("the looked-up table's own UNKNOWN_TABLE is a catalog race")
	}
	if catalogRace(&clickhousego.Exception{Code: 81, Message: "Database walshadow_test doesn't exist"}, docs) {
		t.Error("UNKNOWN_DATABASE is a catalog race")
	}
	if catalogRace(fmt.Errorf("plain"), docs) {
		t.Error("a non-exception is a catalog race")
	}
}
