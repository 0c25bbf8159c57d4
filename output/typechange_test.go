package output_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestTypeChangeRefused: ALTER COLUMN TYPE is not replicated. The output
// stops at the change with an error naming the table, the column and both
// types, ClickHouse keeps the old column type, and rows after the change
// are not written with values of another type.
func TestTypeChangeRefused(t *testing.T) {
	r := newRig(t)
	var logs logLines
	run := r.startLogged(t, "", &logs)
	r.src.Exec(t, "CREATE TABLE typed (id int PRIMARY KEY, v int4); INSERT INTO typed VALUES (1, 10)")
	target := chTable("public", "typed")
	r.waitCH(t, run, "SELECT sum(v) FROM "+target+" FINAL WHERE _is_deleted = 0", "10", time.Minute)

	r.src.Exec(t, "ALTER TABLE typed ALTER COLUMN v TYPE int8; INSERT INTO typed VALUES (2, 5000000000)")
	logs.waitLog(t, `v\" of relation public.typed changed type from integer (ClickHouse Nullable(Int32)) to bigint (ClickHouse Nullable(Int64))`, time.Minute)
	run.stop(t)
	if got := strings.TrimSpace(r.ch.HTTPQuery(t, "SELECT type FROM system.columns WHERE database = 'walshadow_test' AND table = 'public.typed' AND name = 'v'")); got != "Nullable(Int32)" {
		t.Errorf("ClickHouse column v is %q after the refused change, want Nullable(Int32)", got)
	}
	if got := strings.TrimSpace(r.ch.HTTPQuery(t, fmt.Sprintf("SELECT count() FROM %s FINAL WHERE id = 2", target))); got != "0" {
		t.Errorf("the row after the refused change reached ClickHouse (%s rows)", got)
	}
	if !strings.Contains(logs.String(), "column type changes are not replicated") {
		t.Errorf("the refusal does not say why; log tail:\n%s", tail(logs.String(), 2000))
	}
}
