package xact

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/walshadow/walshadow/internal/wal"
)

// model is the obvious reorder buffer: every record of every xid in a map.
type model struct {
	records  map[uint32][]Change
	children map[uint32][]uint32
	pending  []pendingDrain // committed, drain kept open across later ops
}

type pendingDrain struct {
	d    *Drain
	want []Change
}

func (m *model) take(x uint32, out []Change) []Change {
	recs, hasRecs := m.records[x]
	kids, hasKids := m.children[x]
	delete(m.records, x)
	delete(m.children, x)
	if hasRecs {
		out = append(out, recs...)
	}
	if hasKids {
		for _, k := range kids {
			out = m.take(k, out)
		}
	}
	return out
}

func (m *model) tree(top uint32, subs []uint32) []Change {
	out := m.take(top, nil)
	for _, s := range subs {
		out = m.take(s, out)
	}
	slices.SortFunc(out, func(a, b Change) int { return int(a.LSN - b.LSN) })
	return out
}

func (m *model) floor() wal.LSN {
	var f wal.LSN
	for _, recs := range m.records {
		if len(recs) > 0 && (f == 0 || recs[0].LSN < f) {
			f = recs[0].LSN
		}
	}
	for _, p := range m.pending {
		if len(p.want) > 0 && (f == 0 || p.want[0].LSN < f) {
			f = p.want[0].LSN
		}
	}
	return f
}

// liveTop is a transaction still running in the generator.
type liveTop struct {
	xid      uint32
	subs     []uint32 // live subxacts (some never announced)
	prepared bool
}

func TestModelRandomized(t *testing.T) {
	for seed := uint64(1); seed <= 12; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			runModel(t, seed, 3000)
		})
	}
}

func runModel(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	budgets := []int64{1, 700, 4 << 10, 64 << 10, 1 << 30}
	cfg := Config{
		MemoryBudget: budgets[rng.IntN(len(budgets))],
		SliceRecords: 1 + rng.IntN(50),
		SliceBytes:   1 + rng.IntN(20000),
	}
	b := newTestBuffer(t, cfg)
	m := &model{records: map[uint32][]Change{}, children: map[uint32][]uint32{}}
	var tops []*liveTop
	nextXID := uint32(100)
	lsn := wal.LSN(0x2000000)
	newXID := func() uint32 { nextXID++; return nextXID }
	pick := func() *liveTop {
		if len(tops) == 0 {
			return nil
		}
		return tops[rng.IntN(len(tops))]
	}
	endTop := func(tp *liveTop) {
		i := slices.Index(tops, tp)
		tops = slices.Delete(tops, i, i+1)
	}
	// listFor returns the subxids a commit/abort record would list: all
	// live ones, sometimes missing one (it then stays forever, like a
	// subxact listed nowhere).
	listFor := func(tp *liveTop) []uint32 {
		list := slices.Clone(tp.subs)
		if len(list) > 0 && rng.IntN(10) == 0 {
			list = slices.Delete(list, 0, 1)
		}
		rng.Shuffle(len(list), func(i, j int) { list[i], list[j] = list[j], list[i] })
		return list
	}
	checkDrain := func(d *Drain, want []Change) {
		t.Helper()
		sameChanges(t, drainAll(t, b, d), want)
	}

	for step := range steps {
		switch r := rng.IntN(100); {
		case r < 8 || len(tops) == 0:
			tops = append(tops, &liveTop{xid: newXID()})
		case r < 55: // a record in a top or one of its subxacts
			tp := pick()
			if tp.prepared {
				continue
			}
			xid := tp.xid
			if rng.IntN(3) == 0 {
				if len(tp.subs) == 0 || rng.IntN(4) == 0 {
					tp.subs = append(tp.subs, newXID())
				}
				xid = tp.subs[rng.IntN(len(tp.subs))]
			}
			lsn += wal.LSN(8 * (1 + rng.IntN(40)))
			n := 20 + rng.IntN(400)
			if rng.IntN(100) == 0 {
				n = 3000 + rng.IntN(30000)
			}
			c := change(lsn, xid, n)
			c.Flags = uint8(rng.IntN(4))
			if err := b.Add(c); err != nil {
				t.Fatalf("step %d: Add: %v", step, err)
			}
			m.records[xid] = append(m.records[xid], c)
		case r < 60: // ROLLBACK TO SAVEPOINT
			tp := pick()
			if tp.prepared || len(tp.subs) == 0 {
				continue
			}
			i := rng.IntN(len(tp.subs))
			x := tp.subs[i]
			tp.subs = slices.Delete(tp.subs, i, i+1)
			b.Abort(x, nil)
			m.take(x, nil)
		case r < 63: // ASSIGNMENT of the live subxacts
			tp := pick()
			if tp.prepared || len(tp.subs) == 0 {
				continue
			}
			b.Assign(tp.xid, tp.subs)
			m.children[tp.xid] = append(m.children[tp.xid], tp.subs...)
		case r < 67: // PREPARE
			tp := pick()
			if tp.prepared {
				continue
			}
			tp.prepared = true
			list := listFor(tp)
			b.Prepare(tp.xid, list)
			m.children[tp.xid] = append(m.children[tp.xid], list...)
			tp.subs = nil // COMMIT PREPARED lists none here: the buffer must remember
		case r < 87: // COMMIT (or COMMIT PREPARED)
			tp := pick()
			list := listFor(tp)
			endTop(tp)
			d, err := b.Commit(tp.xid, list)
			if err != nil {
				t.Fatalf("step %d: Commit: %v", step, err)
			}
			want := m.tree(tp.xid, list)
			if rng.IntN(4) == 0 {
				m.pending = append(m.pending, pendingDrain{d, want})
			} else {
				checkDrain(d, want)
			}
		case r < 95: // ABORT (or ROLLBACK PREPARED)
			tp := pick()
			list := listFor(tp)
			endTop(tp)
			b.Abort(tp.xid, list)
			m.tree(tp.xid, list)
		case r < 98: // finish a kept-open drain
			if len(m.pending) == 0 {
				continue
			}
			p := m.pending[0]
			m.pending = m.pending[1:]
			checkDrain(p.d, p.want)
		default:
			if rng.IntN(5) != 0 {
				continue
			}
			b.Reset()
			for _, p := range m.pending {
				if _, err := p.d.Next(); err == nil && len(p.want) > 0 {
					t.Fatalf("step %d: a drain survived Reset", step)
				}
				p.d.Close()
			}
			m = &model{records: map[uint32][]Change{}, children: map[uint32][]uint32{}}
			tops = nil
			mustNoSpillFiles(t, b.cfg.SpillDir)
		}
		if got, want := b.Floor(), m.floor(); got != want {
			t.Fatalf("step %d: Floor = %s, model %s", step, got, want)
		}
		// Kept-open drains have not started: they spill like open xids.
		if st := b.Stats(); st.MemoryBytes > cfg.MemoryBudget || st.PinnedBytes != 0 {
			t.Fatalf("step %d: %d bytes in memory (%d pinned) over a %d budget", step, st.MemoryBytes, st.PinnedBytes, cfg.MemoryBudget)
		}
	}
	for _, p := range m.pending {
		checkDrain(p.d, p.want)
	}
	for _, tp := range slices.Clone(tops) {
		b.Abort(tp.xid, tp.subs)
	}
	// What remains is the subxacts listed nowhere: Reset clears them.
	b.Reset()
	mustNoSpillFiles(t, b.cfg.SpillDir)
	if st := b.Stats(); st.MemoryBytes != 0 || st.OpenXIDs != 0 || st.SpillFiles != 0 {
		t.Fatalf("after Reset: %+v", st)
	}
}
