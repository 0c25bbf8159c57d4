package desclog

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// The crash model: Append writes one frame and fdatasyncs it before it
// returns, so a kill leaves every earlier frame intact and any prefix of
// the frame in flight. Restarting re-reads the WAL from the floor: each
// boundary finds its batch stored (events re-derived) or missing (captured
// and appended again). The result must equal an uninterrupted run byte for
// byte, with the same events.

type reference struct {
	steps  []step
	events [][]Event
	ckpt   []byte
	tail   []byte
	ends   []int64 // tail size after each append (ends[0]: header only)
	body   []byte  // content()
}

func referenceRun(t *testing.T, seed uint64, n int) *reference {
	t.Helper()
	dir := t.TempDir()
	s := newScenario(seed)
	initial := s.seed(6)
	l, err := Open(dir, testID)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Seed(s.lsn, s.lsn-0x100, initial); err != nil {
		t.Fatal(err)
	}
	ref := &reference{steps: s.run(n), ends: []int64{headerLen}}
	for _, st := range ref.steps {
		b, events, err := Capture(l, st.in, st.fetched)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Append(b); err != nil {
			t.Fatal(err)
		}
		ref.events = append(ref.events, events)
		ref.ends = append(ref.ends, l.tailSize)
	}
	ref.ckpt, _ = os.ReadFile(filepath.Join(dir, CheckpointFile))
	ref.tail, _ = os.ReadFile(filepath.Join(dir, TailFile))
	ref.body = content(l)
	return ref
}

// restart reopens dir and re-plays every boundary as the WAL re-read would,
// checking each boundary's events against the reference.
func (ref *reference) restart(t *testing.T, dir string) *Log {
	t.Helper()
	l, err := Open(dir, testID)
	if err != nil {
		t.Fatal(err)
	}
	for i, st := range ref.steps {
		plan, b, err := l.PlanBoundary(st.in.NextLSN, st.in.NextLSN)
		if err != nil {
			t.Fatal(err)
		}
		var events []Event
		switch plan {
		case PlanReplay:
			events = l.ReplayEvents(b)
		case PlanCapture:
			if b, events, err = Capture(l, st.in, st.fetched); err != nil {
				t.Fatal(err)
			}
			if err := l.Append(b); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("boundary %d at %s: plan %s", i, st.in.NextLSN, plan)
		}
		if !reflect.DeepEqual(events, ref.events[i]) {
			t.Fatalf("boundary %d at %s (%s): events differ from the uninterrupted run", i, st.in.NextLSN, plan)
		}
	}
	return l
}

// crashAt writes the reference's files as a kill would leave them: tail
// cut to size.
func (ref *reference) crashAt(t *testing.T, dir string, size int64) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, CheckpointFile), ref.ckpt, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, TailFile), ref.tail[:size], 0o600); err != nil {
		t.Fatal(err)
	}
}

func (ref *reference) requireIdentical(t *testing.T, dir string, l *Log, what string) {
	t.Helper()
	sameContent(t, ref.body, content(l), what)
	l.Close()
	tail, _ := os.ReadFile(filepath.Join(dir, TailFile))
	ckpt, _ := os.ReadFile(filepath.Join(dir, CheckpointFile))
	if !bytes.Equal(tail, ref.tail) || !bytes.Equal(ckpt, ref.ckpt) {
		t.Fatalf("%s: files differ from the uninterrupted run", what)
	}
}

// Every byte offset of the last frame, and of the largest frame (killed
// there, the appends after it never happened).
func TestCrashAtEveryByteOfAFrame(t *testing.T) {
	ref := referenceRun(t, 21, 40)
	dir := t.TempDir()
	last, largest := len(ref.ends)-1, 1
	for k := 1; k < len(ref.ends); k++ {
		if ref.ends[k]-ref.ends[k-1] > ref.ends[largest]-ref.ends[largest-1] {
			largest = k
		}
	}
	points := 0
	for _, k := range []int{last, largest} {
		from, to := ref.ends[k-1], ref.ends[k]
		stride := int64(1)
		if testing.Short() {
			stride = 13
		}
		for size := from; size < to; size += stride {
			ref.crashAt(t, dir, size)
			l := ref.restart(t, dir)
			if size > from && l.Stats().TornRepairs != 1 {
				t.Fatalf("cut at %d: no repair counted", size)
			}
			ref.requireIdentical(t, dir, l, "cut at "+itoa(uint32(size)))
			points++
		}
	}
	t.Logf("%d kill points (final frame %d bytes, largest %d bytes)", points, ref.ends[last]-ref.ends[last-1], ref.ends[largest]-ref.ends[largest-1])
}

func TestCrashAtRandomPoints(t *testing.T) {
	ref := referenceRun(t, 22, 80)
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(22, 1))
	for range 60 {
		// Kill during append k: frames before it intact, a prefix of it.
		k := 1 + rng.IntN(len(ref.ends)-1)
		size := ref.ends[k-1] + rng.Int64N(ref.ends[k]-ref.ends[k-1])
		ref.crashAt(t, dir, size)
		ref.requireIdentical(t, dir, ref.restart(t, dir), "cut at "+itoa(uint32(size)))
	}
	// Killed between two appends, and before the first one.
	for _, size := range []int64{ref.ends[0], ref.ends[len(ref.ends)/2]} {
		ref.crashAt(t, dir, size)
		ref.requireIdentical(t, dir, ref.restart(t, dir), "between appends")
	}
}

// A compaction killed between its checkpoint rename and the tail reset
// leaves the old tail next to a checkpoint that already holds its batches.
func TestCrashDuringCompaction(t *testing.T) {
	dir := t.TempDir()
	l, steps, _ := scenarioLog(t, dir, 23, 50)
	before := content(l)
	oldTail, _ := os.ReadFile(filepath.Join(dir, TailFile))
	oldCkpt, _ := os.ReadFile(filepath.Join(dir, CheckpointFile))
	floor := steps[30].in.NextLSN
	if err := l.Compact(floor); err != nil {
		t.Fatal(err)
	}
	compacted := content(l)
	newCkpt, _ := os.ReadFile(filepath.Join(dir, CheckpointFile))
	l.Close()

	// Killed before the rename: a partial temporary checkpoint, old files.
	os.WriteFile(filepath.Join(dir, CheckpointFile), oldCkpt, 0o600)
	os.WriteFile(filepath.Join(dir, CheckpointFile+".tmp"), newCkpt[:len(newCkpt)/2], 0o600)
	os.WriteFile(filepath.Join(dir, TailFile), oldTail, 0o600)
	r, err := Open(dir, testID)
	if err != nil {
		t.Fatal(err)
	}
	sameContent(t, before, content(r), "killed before the checkpoint rename")
	r.Close()

	// Killed after the rename, before the tail reset.
	os.WriteFile(filepath.Join(dir, CheckpointFile), newCkpt, 0o600)
	os.WriteFile(filepath.Join(dir, TailFile), oldTail, 0o600)
	r, err = Open(dir, testID)
	if err != nil {
		t.Fatal(err)
	}
	sameContent(t, compacted, content(r), "checkpoint renamed, tail not reset")
	// The next append lands after the stale frames and survives a reopen.
	next := steps[len(steps)-1].in.NextLSN + 0x100
	if err := r.Append(&Batch{CapturedAt: next}); err != nil {
		t.Fatal(err)
	}
	r.Close()
	r, err = Open(dir, testID)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, ok := r.BatchAt(next); !ok || r.LastCapturedAt() != next {
		t.Fatal("append after the interrupted compaction lost")
	}
}
