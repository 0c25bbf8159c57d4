package output

import (
	"fmt"
	"path"
	"strings"

	"github.com/walshadow/walshadow/internal/clickhouse"
)

// scope decides which source relations the output replicates and with what
// per-table settings: a question of configuration only, never of what any
// cache has seen.
type scope struct {
	include []string // path.Match patterns over "schema.table"
	exclude []string
	tables  map[string]clickhouse.TableConfig // by "schema.table"
}

func newScope(include, exclude []string, tables map[string]clickhouse.TableConfig) (*scope, error) {
	for _, p := range append(append([]string(nil), include...), exclude...) {
		if _, err := path.Match(p, "x.y"); err != nil {
			return nil, fmt.Errorf("table pattern %q: %w", p, err)
		}
		if !strings.Contains(p, ".") {
			return nil, fmt.Errorf("table pattern %q: want schema.table (wildcards allowed, e.g. public.*)", p)
		}
	}
	for name, tc := range tables {
		if strings.Count(name, ".") < 1 {
			return nil, fmt.Errorf("%s: %q: name tables as schema.table", FieldTables, name)
		}
		if err := tc.Validate(name); err != nil {
			return nil, fmt.Errorf("%s.%s: %w", FieldTables, name, err)
		}
		if tc.Table != "" {
			if err := clickhouse.ValidateTableName("configured table of "+name, tc.Table); err != nil {
				return nil, fmt.Errorf("%s.%s: %w", FieldTables, name, err)
			}
		}
	}
	return &scope{include: include, exclude: exclude, tables: tables}, nil
}

// qualified is the name patterns and table settings use.
func qualified(schema, table string) string { return schema + "." + table }

// in reports whether schema.table is replicated: a table named under
// `tables` always is; otherwise it must match an include pattern and no
// exclude pattern.
func (s *scope) in(schema, table string) bool {
	name := qualified(schema, table)
	if _, ok := s.tables[name]; ok {
		return true
	}
	for _, p := range s.exclude {
		if ok, _ := path.Match(p, name); ok {
			return false
		}
	}
	for _, p := range s.include {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// config is schema.table's settings (zero when none).
func (s *scope) config(schema, table string) clickhouse.TableConfig {
	return s.tables[qualified(schema, table)]
}
