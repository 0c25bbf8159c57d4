package shadow

import (
	"os"
	"strings"
	"testing"

	"github.com/walshadow/walshadow/internal/wal"
)

// testdata/pg_controldata_15.txt is `LC_ALL=C pg_controldata` of a fresh
// PostgreSQL 15 cluster.
func TestParseControlData(t *testing.T) {
	out, err := os.ReadFile("testdata/pg_controldata_15.txt")
	if err != nil {
		t.Fatal(err)
	}
	cd, err := ParseControlData(string(out))
	if err != nil {
		t.Fatal(err)
	}
	want := ControlData{
		ControlVersion: 1300, CatalogVersion: 202209061, SystemID: 7713836679048065568,
		ClusterState: "shut down", CheckpointLSN: wal.LSN(0x1511A88), RedoLSN: wal.LSN(0x1511A88), TimeLineID: 1,
		WALLevel: "replica",
		Floors: Floors{MaxConnections: 100, MaxWorkerProcesses: 8, MaxWALSenders: 10,
			MaxPreparedTransactions: 0, MaxLocksPerTransaction: 64},
		BlockSize: 8192, WALBlockSize: 8192, WALSegmentSize: 16 << 20,
	}
	if *cd != want {
		t.Errorf("got  %+v\nwant %+v", *cd, want)
	}
}

func TestParseControlDataRefusesMissingAndMalformedFields(t *testing.T) {
	out, err := os.ReadFile("testdata/pg_controldata_15.txt")
	if err != nil {
		t.Fatal(err)
	}
	text := string(out)
	cases := map[string]string{
		// A translated pg_controldata (LC_ALL not C) has other labels.
		"translated":     strings.ReplaceAll(text, "max_connections setting", "max_connections-Einstellung"),
		"missing floor":  strings.ReplaceAll(text, "max_locks_per_xact setting:           64\n", ""),
		"negative floor": strings.ReplaceAll(text, "max_wal_senders setting:              10", "max_wal_senders setting: -1"),
		"bad lsn":        strings.ReplaceAll(text, "Latest checkpoint location:           0/1511A88", "Latest checkpoint location: 1511A88"),
		"bad system id":  strings.ReplaceAll(text, "7713836679048065568", "77138366790480655680"),
		"empty":          "",
	}
	for name, in := range cases {
		if in == text {
			t.Fatalf("%s: the replacement did not apply", name)
		}
		if _, err := ParseControlData(in); err == nil {
			t.Errorf("%s: accepted", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

func TestFloorsRaisedAbove(t *testing.T) {
	base := Floors{100, 8, 10, 0, 64}
	if base.raisedAbove(base) {
		t.Error("equal floors count as raised")
	}
	lower := base
	lower.MaxConnections = 50
	if lower.raisedAbove(base) {
		t.Error("a lowered floor counts as raised")
	}
	for i := 0; i < 5; i++ {
		f := base
		switch i {
		case 0:
			f.MaxConnections++
		case 1:
			f.MaxWorkerProcesses++
		case 2:
			f.MaxWALSenders++
		case 3:
			f.MaxPreparedTransactions++
		case 4:
			f.MaxLocksPerTransaction++
		}
		if !f.raisedAbove(base) {
			t.Errorf("floor %d raised but not detected", i)
		}
	}
}
