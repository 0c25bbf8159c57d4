package desclog

import (
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/walshadow/walshadow/internal/wal"
)

// scenario plays a random but deterministic DDL history against a model
// catalog, producing per boundary what the filter and the shadow would
// hand to Capture, and the catalog the source had after it.
type scenario struct {
	rng     *rand.Rand
	lsn     wal.LSN
	nextOid uint32
	live    map[uint32]Descriptor // relations (toast included) by oid
	steps   []step
}

type step struct {
	in         BoundaryInput
	fetched    []Descriptor
	after      map[uint32]Descriptor // the catalog after the boundary
	physical   []uint32              // relations changed physically in place
	retired    []wal.RelFileNode     // filenodes rotated away
	dropped    []uint32
	firstTouch wal.LSN
}

func newScenario(seed uint64) *scenario {
	return &scenario{rng: rand.New(rand.NewPCG(seed, 7)), lsn: 0x10000, nextOid: 16400, live: map[uint32]Descriptor{}}
}

// seed creates n tables before the seed horizon and returns them.
func (s *scenario) seed(n int) []Descriptor {
	for range n {
		s.create(nil, nil, nil)
	}
	return slices.Collect(maps.Values(s.live))
}

func (s *scenario) oid() uint32 { s.nextOid++; return s.nextOid }

var scenarioTypes = []uint32{typInt4, typInt8, typText, typBool, typNumeric, typVarchar}

// create adds a table (and maybe its toast table) and returns its oid.
func (s *scenario) create(markers map[wal.RelFileNode]wal.LSN, touch map[uint32]wal.LSN, affected *[]uint32) uint32 {
	oid := s.oid()
	d := table(oid, oid, "t"+itoa(oid))
	for i := range 1 + s.rng.IntN(4) {
		d.Columns = append(d.Columns, col(int16(i+1), "c"+itoa(uint32(i)), scenarioTypes[s.rng.IntN(len(scenarioTypes))]))
	}
	if s.rng.IntN(3) == 0 {
		toast := toastOf(s.oid(), 0, oid)
		toast.Rfn = rfn(toast.Oid)
		d.ToastOid = toast.Oid
		s.live[toast.Oid] = toast
		s.touched(toast.Oid, true, markers, touch, affected)
	}
	s.live[oid] = d
	s.touched(oid, true, markers, touch, affected)
	return oid
}

// touched records an op on a relation at the current position.
func (s *scenario) touched(oid uint32, newFilenode bool, markers map[wal.RelFileNode]wal.LSN, touch map[uint32]wal.LSN, affected *[]uint32) {
	s.lsn += wal.LSN(0x40 + s.rng.IntN(0x100))
	if newFilenode && markers != nil {
		markers[s.live[oid].Rfn] = s.lsn
	}
	if touch != nil {
		if _, ok := touch[oid]; !ok {
			touch[oid] = s.lsn + 8
		}
	}
	if affected != nil {
		*affected = append(*affected, oid)
	}
}

func (s *scenario) pick() (Descriptor, bool) {
	var oids []uint32
	for oid, d := range s.live {
		if d.Kind == 'r' {
			oids = append(oids, oid)
		}
	}
	if len(oids) == 0 {
		return Descriptor{}, false
	}
	slices.Sort(oids)
	return s.live[oids[s.rng.IntN(len(oids))]], true
}

func (s *scenario) liveColumn(d *Descriptor) int {
	var idx []int
	for i, c := range d.Columns {
		if !c.Dropped {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return -1
	}
	return idx[s.rng.IntN(len(idx))]
}

// next plays one boundary: zero to three DDL operations in one transaction.
func (s *scenario) next() step {
	s.lsn += wal.LSN(0x1000 + s.rng.IntN(0x1000))
	var st step
	st.firstTouch = s.lsn + 1
	marks, touch := map[wal.RelFileNode]wal.LSN{}, map[uint32]wal.LSN{}
	var affected []uint32
	touchedOids := map[uint32]bool{}
	for range s.rng.IntN(4) {
		d, ok := s.pick()
		if !ok || touchedOids[d.Oid] {
			touchedOids[s.create(marks, touch, &affected)] = true
			continue
		}
		touchedOids[d.Oid] = true
		d = *cloneDescriptor(&d)
		switch op := s.rng.IntN(100); {
		case op < 15:
			touchedOids[s.create(marks, touch, &affected)] = true
			continue
		case op < 30: // ADD COLUMN, nullable or with a default
			c := col(int16(len(d.Columns)+1), "a"+itoa(uint32(len(d.Columns))), scenarioTypes[s.rng.IntN(len(scenarioTypes))])
			if s.rng.IntN(2) == 0 {
				c = withMissing(notNull(c), "1")
			}
			d.Columns = append(d.Columns, c)
		case op < 40: // DROP COLUMN
			if i := s.liveColumn(&d); i >= 0 {
				d.Columns[i] = droppedCol(d.Columns[i])
			}
		case op < 50: // RENAME COLUMN
			if i := s.liveColumn(&d); i >= 0 {
				d.Columns[i].Name += "_r"
			}
		case op < 55: // RENAME TABLE
			d.Name += "_r"
		case op < 60: // typmod only (benign)
			if i := s.liveColumn(&d); i >= 0 {
				d.Columns[i].TypMod += 4
			}
		case op < 70: // ALTER TYPE with a rewrite: new filenode, new toast
			if i := s.liveColumn(&d); i >= 0 {
				c := col(d.Columns[i].Num, d.Columns[i].Name, scenarioTypes[s.rng.IntN(len(scenarioTypes))])
				d.Columns[i] = c
			}
			st.retired = append(st.retired, d.Rfn)
			d.Rfn = rfn(s.oid())
			if d.ToastOid != 0 {
				old := d.ToastOid
				st.retired = append(st.retired, s.live[old].Rfn)
				delete(s.live, old)
				st.dropped = append(st.dropped, old)
				s.touched(old, false, nil, touch, &affected)
				nt := toastOf(s.oid(), 0, d.Oid)
				nt.Rfn = rfn(nt.Oid)
				d.ToastOid = nt.Oid
				s.live[nt.Oid] = nt
				s.touched(nt.Oid, true, marks, touch, &affected)
			}
			s.live[d.Oid] = d
			s.touched(d.Oid, true, marks, touch, &affected)
			continue
		case op < 78: // TRUNCATE: new filenodes, same oids
			st.retired = append(st.retired, d.Rfn)
			d.Rfn = rfn(s.oid())
			if d.ToastOid != 0 {
				tt := s.live[d.ToastOid]
				st.retired = append(st.retired, tt.Rfn)
				tt.Rfn = rfn(s.oid())
				s.live[tt.Oid] = tt
				s.touched(tt.Oid, true, marks, touch, &affected)
			}
			s.live[d.Oid] = d
			s.touched(d.Oid, true, marks, touch, &affected)
			continue
		case op < 88: // DROP TABLE
			delete(s.live, d.Oid)
			st.dropped = append(st.dropped, d.Oid)
			s.touched(d.Oid, false, nil, touch, &affected)
			if d.ToastOid != 0 {
				delete(s.live, d.ToastOid)
				st.dropped = append(st.dropped, d.ToastOid)
				s.touched(d.ToastOid, false, nil, touch, &affected)
			}
			continue
		case op < 92: // a physical change in place (no rewrite)
			if i := s.liveColumn(&d); i >= 0 {
				c := &d.Columns[i]
				c.Len, c.Align = -c.Len, 'd'
				if c.Len == 0 {
					c.Len = 2
				}
				st.physical = append(st.physical, d.Oid)
			}
		default: // GRANT, COMMENT: catalog writes, same shape
		}
		s.live[d.Oid] = d
		s.touched(d.Oid, false, nil, touch, &affected)
	}
	s.lsn += 0x100
	st.in = BoundaryInput{NextLSN: s.lsn, DrainXID: uint32(1000 + len(s.steps)), AffectedOids: affected,
		SmgrCreates: markers(marks), PgClassTouch: touches(touch)}
	if len(affected) > 0 {
		st.in.FirstCatalogTouch = st.firstTouch
	}
	if s.rng.IntN(10) == 0 {
		st.in.CaptureAll = true
	}
	for oid, d := range s.live {
		if st.in.CaptureAll || slices.Contains(affected, oid) {
			st.fetched = append(st.fetched, *cloneDescriptor(&d))
		}
	}
	slices.SortFunc(st.fetched, func(a, b Descriptor) int { return cmpUint32(a.Oid, b.Oid) })
	if st.in.CaptureAll { // an index in the fetch, to be ignored
		idx := table(s.oid(), 0, "idx")
		idx.Kind = 'i'
		st.fetched = append(st.fetched, idx)
	}
	st.after = maps.Clone(s.live)
	s.steps = append(s.steps, st)
	return st
}

func (s *scenario) run(n int) []step {
	for range n {
		s.next()
	}
	return s.steps
}

// TestScenarioLookupsMatchCatalog replays a DDL history and checks that at
// every boundary, and just before the next one's first catalog touch, each
// relation's lookup equals the model catalog there.
func TestScenarioLookupsMatchCatalog(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4} {
		s := newScenario(seed)
		initial := s.seed(8)
		l, err := Open(t.TempDir(), testID)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Seed(s.lsn, s.lsn-0x100, initial); err != nil {
			t.Fatal(err)
		}
		steps := s.run(150)
		var stubs, all, physical, dropped, retired, changed int
		for _, st := range steps {
			b, events := captureAppend(t, l, st.in, st.fetched...)
			if b.IsStub() {
				stubs++
			}
			if st.in.CaptureAll {
				all++
			}
			physical, dropped, retired = physical+len(st.physical), dropped+len(st.dropped), retired+len(st.retired)
			for _, e := range events {
				if e.Kind == EventChanged {
					changed++
				}
			}
		}
		// The history exercises every rule.
		if stubs == 0 || all == 0 || physical == 0 || dropped == 0 || retired == 0 || changed == 0 {
			t.Fatalf("seed %d: thin scenario: %d stubs, %d capture-all, %d physical, %d dropped, %d retired, %d changed",
				seed, stubs, all, physical, dropped, retired, changed)
		}
		checkScenario(t, l, steps)
		l.Close()
	}
}

func checkScenario(t *testing.T, l *Log, steps []step) {
	t.Helper()
	for i, st := range steps {
		probes := []wal.LSN{st.in.NextLSN}
		if i+1 < len(steps) {
			probes = append(probes, steps[i+1].firstTouch-1)
		}
		for _, at := range probes {
			for oid, want := range st.after {
				byRfn := l.DescriptorAt(want.Rfn, at)
				byOid := l.DescriptorByOidInDBAt(testDB, oid, at)
				if byRfn.Result != Present || byOid.Result != Present || !byRfn.Desc.Equal(&want) || byOid.Desc != byRfn.Desc {
					t.Fatalf("step %d at %s: relation %d: by rfn %s, by oid %s; want %+v", i, at, oid, byRfn.Result, byOid.Result, want)
				}
			}
			for _, oid := range st.dropped {
				if got := l.DescriptorByOidInDBAt(testDB, oid, at); got.Result != Dropped {
					t.Fatalf("step %d at %s: dropped relation %d is %s", i, at, oid, got.Result)
				}
			}
			for _, r := range st.retired {
				if got := l.DescriptorAt(r, at); got.Result != Retired && got.Result != Dropped {
					t.Fatalf("step %d at %s: rotated filenode %s is %s", i, at, r, got.Result)
				}
			}
		}
		for _, oid := range st.physical {
			if _, still := st.after[oid]; !still {
				continue
			}
			if got := l.DescriptorByOidInDBAt(testDB, oid, st.in.NextLSN-1); got.Result != Ambiguous {
				t.Fatalf("step %d: physical change of %d not fenced: %s", i, oid, got.Result)
			}
		}
	}
}
