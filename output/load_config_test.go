package output

import (
	"testing"

	"github.com/walshadow/walshadow/internal/load"
)

func TestLoadModeFor(t *testing.T) {
	ls := loadSettings{mode: load.ModeCopy, patterns: []modePattern{
		{"archive.*", load.ModeNone}, {"public.big", load.ModeBaseBackup}, {"public.b*", load.ModeNone}, {"*.*", load.ModeCopy},
	}}
	sortPatterns(ls.patterns)
	for _, c := range []struct {
		perTable      load.Mode
		schema, table string
		want          load.Mode
	}{
		{"", "archive", "x", load.ModeNone},
		{"", "public", "big", load.ModeBaseBackup},     // the exact name over public.b*
		{"", "public", "bag", load.ModeNone},           // public.b* over *.*
		{"", "other", "t", load.ModeCopy},              // *.*
		{load.ModeCopy, "archive", "x", load.ModeCopy}, // tables.<name>.initial_load wins
	} {
		if got := ls.modeFor(c.perTable, c.schema, c.table); got != c.want {
			t.Errorf("%s.%s (table setting %q): %s, want %s", c.schema, c.table, c.perTable, got, c.want)
		}
	}
}
