package pagewalk

import (
	"slices"
	"testing"

	"github.com/walshadow/walshadow/internal/testrig"
)

// TestWalkBaseBackupEqualsSelect loads a real table through BASE_BACKUP and
// Walk and compares with SELECT, once before and once after a reader set
// the hint bits (so once mostly through pg_xact, once mostly through hints).
// The cluster has data checksums, so every page's checksum is verified.
func TestWalkBaseBackupEqualsSelect(t *testing.T) {
	src := testrig.StartPostgres(t, testrig.WithInitDBArgs("--data-checksums"))
	src.Exec(t, scenarioSetup(20000))
	src.Exec(t, scenarioAborted)
	openScenarioTransactions(t, src)
	dbOid, tgt := scenarioTarget(t, src)

	var deferred []int64
	for _, phase := range []string{"unhinted", "hinted"} {
		if phase == "hinted" {
			// Hint bits were set by the last SELECT; the backup's checkpoint
			// writes them.
		}
		// Backup first: the SELECT sets hint bits itself. Nothing commits
		// in between, so both see the same state.
		archive := takeBackup(t, src, dbOid, tgt)
		want := selectRows(t, src)
		rows, st, err := walkAll(t, archive, dbOid, tgt, 0x1000, Config{DataChecksums: true})
		if err != nil {
			t.Fatalf("%s: %v", phase, err)
		}
		got := renderRows(t, rows)
		if !slices.Equal(got, want) {
			reportDiff(t, phase, got, want)
		}
		if st.Emitted != int64(len(want)) || st.SkippedInvisible == 0 || st.Tuples <= st.Emitted {
			t.Errorf("%s: stats %+v for %d rows", phase, st, len(want))
		}
		for _, r := range rows {
			if r.LSN != 0x1000 || r.Desc != tgt.Desc {
				t.Fatalf("%s: row tagged %s with descriptor %p, want 0/1000 and %p", phase, r.LSN, r.Desc, tgt.Desc)
			}
		}
		t.Logf("%s: %d rows, stats %+v", phase, len(got), st)
		deferred = append(deferred, st.Deferred)
	}
	if deferred[0] == 0 || deferred[1] >= deferred[0] {
		t.Errorf("deferred tuples unhinted %d, hinted %d: want some, then fewer", deferred[0], deferred[1])
	}
}

func reportDiff(t *testing.T, phase string, got, want []string) {
	t.Helper()
	gs, ws := map[string]bool{}, map[string]bool{}
	for _, g := range got {
		gs[g] = true
	}
	for _, w := range want {
		ws[w] = true
	}
	n := 0
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			t.Errorf("%s: first difference at row %d: emitted %.300q, SELECT %.300q", phase, i, got[i], want[i])
			break
		}
	}
	for _, g := range got {
		if !ws[g] && n < 10 {
			t.Errorf("%s: emitted, not in SELECT: %.200s", phase, g)
			n++
		}
	}
	for _, w := range want {
		if !gs[w] && n < 20 {
			t.Errorf("%s: in SELECT, not emitted: %.200s", phase, w)
			n++
		}
	}
	t.Fatalf("%s: %d rows emitted, SELECT has %d", phase, len(got), len(want))
}
