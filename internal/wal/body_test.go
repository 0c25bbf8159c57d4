package wal

import (
	"fmt"
	"testing"
)

// TestDecodeBodyWholeFixture decodes the body of every record in the PG15
// fixture: none may fail, and each rmgr with typed bodies must yield them.
func TestDecodeBodyWholeFixture(t *testing.T) {
	r, err := NewFileReader(fixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for {
		rec, err := r.Next()
		if err != nil {
			if !IsKind(err, KindEndOfWAL) {
				t.Fatal(err)
			}
			break
		}
		body, err := DecodeBody(rec)
		if err != nil {
			t.Fatalf("%s %s: %v", rec.Header.RmID, Identify(rec.Layout, rec.Header.RmID, rec.Header.Info), err)
		}
		if _, opaque := body.(Opaque); opaque {
			switch rec.Header.RmID {
			case RmgrHeap, RmgrXact, RmgrSmgr, RmgrRelMap, RmgrStandby, RmgrXLOG:
				t.Fatalf("%s record at %s decoded as opaque", rec.Header.RmID, rec.LSN)
			}
		}
		kinds[fmt.Sprintf("%T", body)]++
	}
	for _, k := range []string{"*wal.HeapInsert", "*wal.HeapUpdate", "*wal.HeapDelete", "*wal.HeapMultiInsert",
		"*wal.XactCommit", "*wal.XactAbort", "*wal.XactPrepare", "*wal.SmgrCreate", "*wal.RelMapUpdate", "*wal.RunningXacts", "*wal.Checkpoint"} {
		if kinds[k] == 0 {
			t.Errorf("no %s decoded from the fixture (saw %v)", k, kinds)
		}
	}
}
