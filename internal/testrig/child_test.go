package testrig

import (
	"testing"
)

// TestChildKillHookWithoutKillPoint: without the variable, or with another
// point named, no hook is installed.
func TestChildKillHookWithoutKillPoint(t *testing.T) {
	t.Setenv(DrillKillAtEnv, "")
	if ChildKillHook("capture") != nil {
		t.Error("a hook without " + DrillKillAtEnv)
	}
	t.Setenv(DrillKillAtEnv, "spill:2")
	if ChildKillHook("capture") != nil {
		t.Error("a capture hook for spill:2")
	}
	if ChildKillHook("spill") == nil {
		t.Error("no spill hook for spill:2")
	}
}
