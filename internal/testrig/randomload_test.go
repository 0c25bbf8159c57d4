package testrig

import (
	"testing"
)

func TestCopyFieldEscapes(t *testing.T) {
	for in, want := range map[string]string{"a\tb": `a\tb`, "x\ny\r": `x\ny\r`, `back\slash`: `back\\slash`} {
		if got := copyField(in, false); got != want {
			t.Errorf("copyField(%q) = %q, want %q", in, got, want)
		}
	}
	if copyField("", true) != `\N` {
		t.Error("NULL is not \\N")
	}
}
