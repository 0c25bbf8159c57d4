package output

import (
	"fmt"
	"path"
	"strings"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/walshadow/walshadow/internal/load"
)

// Fields of the clickhouse_ddl output's initial_load block.
const (
	fieldInitialLoad    = "initial_load"
	fieldLoadMode       = "mode"
	fieldLoadWorkers    = "workers"
	fieldLoadSplitBytes = "split_bytes"
	fieldLoadMaxRate    = "max_bytes_per_second"
	fieldLoadModes      = "modes"
	fieldTInitialLoad   = "initial_load" // under tables.<name>
	defaultLoadSplit    = 256 << 20
	defaultLoadWorkers  = 4
)

func initialLoadField() *service.ConfigField {
	return service.NewObjectField(fieldInitialLoad,
		service.NewStringEnumField(fieldLoadMode, string(load.ModeCopy), string(load.ModeBaseBackup), string(load.ModeNone)).
			Description("How tables in scope that this output has never written are filled with the rows they already hold: `copy` (COPY ... TO STDOUT (FORMAT binary) in one snapshot per table), `base_backup` (a page walk over a BASE_BACKUP of the source: no query load, one backup for every table loaded together; tables without a key are copied instead), `none` (only changes from now on). Tables that start being followed while ClickHouse lacks their rows are loaded the same way: back in scope after leaving it (a config change, or a rename out of and back into the `include` patterns), renamed into scope from an excluded name (one made LOGGED after being UNLOGGED is refilled from SET LOGGED's rewrite instead).").
			Default(string(load.ModeCopy)),
		service.NewIntField(fieldLoadWorkers).
			Description("Tables, and ctid ranges of large tables, loaded in parallel (each a source connection).").
			Default(defaultLoadWorkers),
		service.NewIntField(fieldLoadSplitBytes).
			Description("Tables larger than this are copied as ctid ranges of about this size, in parallel.").
			Default(defaultLoadSplit).Advanced(),
		service.NewIntField(fieldLoadMaxRate).
			Description("Throttle: bytes read from the source per second by all loads together; 0 means no limit.").
			Default(0),
		service.NewStringMapField(fieldLoadModes).
			Description("Per table or namespace: `schema.table` patterns (`*`, `?` wildcards, e.g. `archive.*`) → mode. The most specific pattern (longest, exact names first) wins over `mode`; `tables.<name>.initial_load` wins over both.").
			Default(map[string]any{}),
	).Description("The initial load of existing rows. Loaded rows carry `_lsn` = the position from which every change of the table not in the load's snapshot is streamed, so any later change outranks them; they are written to a staging table published in one step (EXCHANGE TABLES on Atomic databases, else a rename sequence) and `state_dir/loads.json` records each load, so a crash mid-load reloads the table and never leaves half of it published.")
}

// loadSettings are the parsed initial_load block.
type loadSettings struct {
	mode       load.Mode
	workers    int
	splitBytes int64
	maxRate    int64
	patterns   []modePattern // most specific first
}

type modePattern struct {
	pattern string
	mode    load.Mode
}

func parseLoadSettings(conf *service.ParsedConfig) (loadSettings, error) {
	var ls loadSettings
	sub := conf.Namespace(fieldInitialLoad)
	mode, err := sub.FieldString(fieldLoadMode)
	if err != nil {
		return ls, err
	}
	if ls.mode, err = load.ParseMode(mode); err != nil {
		return ls, fmt.Errorf("%s.%s: %w", fieldInitialLoad, fieldLoadMode, err)
	}
	if ls.workers, err = sub.FieldInt(fieldLoadWorkers); err != nil {
		return ls, err
	}
	split, err := sub.FieldInt(fieldLoadSplitBytes)
	if err != nil {
		return ls, err
	}
	rate, err := sub.FieldInt(fieldLoadMaxRate)
	if err != nil {
		return ls, err
	}
	if ls.workers < 1 || split < 8192 || rate < 0 {
		return ls, fmt.Errorf("%s: %s must be at least 1, %s at least 8192 and %s not negative", fieldInitialLoad, fieldLoadWorkers, fieldLoadSplitBytes, fieldLoadMaxRate)
	}
	ls.splitBytes, ls.maxRate = int64(split), int64(rate)
	modes, err := sub.FieldStringMap(fieldLoadModes)
	if err != nil {
		return ls, err
	}
	for p, m := range modes {
		if _, err := path.Match(p, "x.y"); err != nil || !strings.Contains(p, ".") {
			return ls, fmt.Errorf("%s.%s: pattern %q: want schema.table (wildcards allowed, e.g. archive.*)", fieldInitialLoad, fieldLoadModes, p)
		}
		lm, err := load.ParseMode(m)
		if err != nil {
			return ls, fmt.Errorf("%s.%s.%s: %w", fieldInitialLoad, fieldLoadModes, p, err)
		}
		ls.patterns = append(ls.patterns, modePattern{p, lm})
	}
	sortPatterns(ls.patterns)
	return ls, nil
}

// sortPatterns orders patterns most specific first: names without
// wildcards, then longer patterns, then by text (a stable choice when two
// equally long patterns match).
func sortPatterns(ps []modePattern) {
	wild := func(p string) bool { return strings.ContainsAny(p, "*?[") }
	less := func(a, b modePattern) bool {
		if wa, wb := wild(a.pattern), wild(b.pattern); wa != wb {
			return !wa
		}
		if len(a.pattern) != len(b.pattern) {
			return len(a.pattern) > len(b.pattern)
		}
		return a.pattern < b.pattern
	}
	for i := 1; i < len(ps); i++ {
		for j := i; j > 0 && less(ps[j], ps[j-1]); j-- {
			ps[j], ps[j-1] = ps[j-1], ps[j]
		}
	}
}

// modeFor is the initial load mode of schema.table: its table setting,
// else the most specific matching pattern, else the default.
func (ls loadSettings) modeFor(perTable load.Mode, schema, table string) load.Mode {
	if perTable != "" {
		return perTable
	}
	name := qualified(schema, table)
	for _, p := range ls.patterns {
		if ok, _ := path.Match(p.pattern, name); ok {
			return p.mode
		}
	}
	return ls.mode
}
