package input

import (
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/wal"
)

func TestRestartPolicy(t *testing.T) {
	const s = time.Second
	type step struct {
		pos      wal.LSN
		wait     time.Duration
		streak   int
		progress bool
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{{
		name: "the same record fails every time: doubling to the cap, then the cap",
		steps: []step{
			{100, 1 * s, 1, false}, {100, 2 * s, 2, false}, {100, 4 * s, 3, false}, {100, 8 * s, 4, false},
			{100, 16 * s, 5, false}, {100, 30 * s, 6, false}, {100, 30 * s, 7, false}, {100, 30 * s, 8, false},
		},
	}, {
		name: "progress restarts the back-off at 1 s",
		steps: []step{
			{100, 1 * s, 1, false}, {100, 2 * s, 2, false}, {100, 4 * s, 3, false},
			{200, 1 * s, 1, true}, {200, 2 * s, 2, false}, {300, 1 * s, 1, true},
		},
	}, {
		// The restart re-reads from the resume point: the position may be
		// back below where the previous run stopped (acknowledgements after
		// the last manifest write), and a run that gets back to it, not
		// past it, is no progress.
		name: "a position back at or below the highest seen is no progress",
		steps: []step{
			{500, 1 * s, 1, false}, {400, 2 * s, 2, false}, {500, 4 * s, 3, false}, {450, 8 * s, 4, false},
			{501, 1 * s, 1, true},
		},
	}, {
		name: "stops that never start (nothing delivered ever) back off",
		steps: []step{
			{0, 1 * s, 1, false}, {0, 2 * s, 2, false}, {0, 4 * s, 3, false}, {0, 8 * s, 4, false},
			{0, 16 * s, 5, false}, {0, 30 * s, 6, false}, {0, 30 * s, 7, false},
		},
	}, {
		name: "a long streak stays at the cap",
		steps: func() []step {
			var out []step
			for i := 1; i <= 200; i++ {
				out = append(out, step{7, min(time.Second<<min(i-1, 10), 30*s), i, false})
			}
			return out
		}(),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			p := newRestartPolicy()
			for i, st := range tc.steps {
				d := p.stopped(st.pos)
				if d.Wait != st.wait || d.Streak != st.streak || d.Progress != st.progress {
					t.Fatalf("stop %d at %d: %+v, want wait %s streak %d progress %v", i+1, st.pos, d, st.wait, st.streak, st.progress)
				}
			}
		})
	}
}
