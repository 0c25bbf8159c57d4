package chcompare

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/walshadow/walshadow/internal/clickhouse"
)

// AgreedTable is the comparison of source (the qualified, quoted
// PostgreSQL name) with the ClickHouse table the output's agreement a maps
// it to: its mapped columns in ClickHouse order, its sorting key, a change
// log when it has none.
func AgreedTable(source string, a *clickhouse.Agreed) (Table, error) {
	t := Table{Source: source, Target: a.Target, Key: a.OrderBy, ChangeLog: len(a.OrderBy) == 0}
	shape := map[int16]int{}
	for i, c := range a.Shape {
		shape[c.Num] = i
	}
	for _, mc := range a.Columns {
		i, ok := shape[mc.Attnum]
		if !ok {
			return Table{}, fmt.Errorf("%s: mapped attnum %d is not in the agreed shape", source, mc.Attnum)
		}
		t.Columns = append(t.Columns, Column{Source: a.Shape[i], Spec: mc.Spec})
	}
	return t, nil
}

// CopyStore opens a copy of the baseline store in outputStateDir (the
// clickhouse_ddl output's state directory) under scratch: opening the
// store itself removes temporary files, which would break a write a
// running output is making.
func CopyStore(outputStateDir, scratch string) (*clickhouse.Store, error) {
	b, err := os.ReadFile(filepath.Join(outputStateDir, "baseline.json"))
	if err != nil {
		return nil, fmt.Errorf("reading the output's baseline store: %w", err)
	}
	if err := os.WriteFile(filepath.Join(scratch, "baseline.json"), b, 0o600); err != nil {
		return nil, err
	}
	return clickhouse.OpenStore(scratch)
}
