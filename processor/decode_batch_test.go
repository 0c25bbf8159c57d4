package processor

import (
	"strings"
	"testing"

	"github.com/walshadow/walshadow/internal/desclog"
)

func TestIdentityNote(t *testing.T) {
	noKey := testDesc(16400, "nokey", false)
	note, ok := identityNote(noKey)
	if !ok || !strings.Contains(note, "public.nokey (oid 16400)") || !strings.Contains(note, "replicated by physical row identity") || strings.Contains(note, "stop") {
		t.Errorf("note %q, %v", note, ok)
	}
	nothing := testDesc(16401, "nothing", false)
	nothing.ReplIdent = 'n'
	if note, ok := identityNote(nothing); !ok || !strings.Contains(note, "REPLICA IDENTITY NOTHING") {
		t.Errorf("note %q, %v", note, ok)
	}
	temp := testDesc(16402, "scratch", false)
	temp.Persistence = 't'
	unlogged := testDesc(16403, "cache", false)
	unlogged.Persistence = 'u'
	full := testDesc(16404, "full", false)
	full.ReplIdent = 'f'
	toast := testDesc(16405, "pg_toast_1", false)
	toast.Kind = 't'
	for _, d := range []*desclog.Descriptor{temp, unlogged, full, testDesc(16406, "keyed", true), toast, nil} {
		if note, ok := identityNote(d); ok {
			t.Errorf("a note for %+v: %q", d, note)
		}
	}
}
