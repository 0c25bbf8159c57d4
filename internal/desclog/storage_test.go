package desclog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// scenarioLog runs n scenario boundaries into a fresh log under dir and
// returns it with the steps and each append's tail end offset.
func scenarioLog(t testing.TB, dir string, seed uint64, n int) (*Log, []step, []int64) {
	t.Helper()
	s := newScenario(seed)
	initial := s.seed(6)
	l, err := Open(dir, testID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Seed(s.lsn, s.lsn-0x100, initial); err != nil {
		t.Fatal(err)
	}
	ends := []int64{headerLen}
	steps := s.run(n)
	for _, st := range steps {
		b, _, err := Capture(l, st.in, st.fetched)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Append(b); err != nil {
			t.Fatal(err)
		}
		ends = append(ends, l.tailSize)
	}
	return l, steps, ends
}

func TestStorageRoundTrip(t *testing.T) {
	dir := t.TempDir()
	l, steps, _ := scenarioLog(t, dir, 11, 60)
	want := content(l)
	l.Close()
	r, err := Open(dir, testID)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	sameContent(t, want, content(r), "reopened")
	checkScenario(t, r, steps)
	if r.CoveredThrough() != l.CoveredThrough() || r.LastCapturedAt() != steps[len(steps)-1].in.NextLSN {
		t.Fatalf("meta: %s %s", r.CoveredThrough(), r.LastCapturedAt())
	}
	// Reopened, the log keeps appending where it stopped.
	if err := r.Append(&Batch{CapturedAt: r.LastCapturedAt() + 0x100}); err != nil {
		t.Fatal(err)
	}
}

func TestStorageBatchCodecRoundTrip(t *testing.T) {
	missing := "it's 'quoted'"
	d := table(16400, 16400, "ta\x00ble", withMissing(notNull(col(1, "id", typInt4)), missing), droppedCol(col(2, "x", typText)))
	d.KeyAttnums, d.IdentityIndexOid, d.ToastOid = []int16{1, -3}, 16401, 16402
	d.Columns = append(d.Columns, Column{Num: 3, Name: "m", TypeOid: 16500, HasMissing: true}) // missing NULL
	b := &Batch{CapturedAt: 0x5000, DrainXID: 4242,
		Entries: []Entry{
			{Kind: EntryRetired, Source: SourceSmgrCreate, Oid: 16400, Rfn: rfn(16300), ValidFrom: 0x4000},
			{Kind: EntryDropped, Source: SourceBoundary, Oid: 16401, Rfn: rfn(16401), ValidFrom: 0x5000},
			{Kind: EntryPresent, Source: SourcePgClassTouch, Oid: d.Oid, Rfn: d.Rfn, ValidFrom: 0x4800, Desc: &d},
		},
		Ambiguities: []Ambiguity{{Scope: ScopeDatabase, Reason: ReasonUnknownMutationPosition, DbOid: testDB, From: 1, Through: 2}},
	}
	body := appendBatch(nil, b)
	got, err := decodeBatch(body)
	if err != nil {
		t.Fatal(err)
	}
	if again := appendBatch(nil, got); string(again) != string(body) {
		t.Fatal("re-encoding differs")
	}
	if !got.Entries[2].Desc.Equal(&d) || got.Entries[2].Desc.Columns[2].Missing != nil || *got.Entries[2].Desc.Columns[0].Missing != missing {
		t.Fatalf("descriptor %+v", got.Entries[2].Desc)
	}
	if got.Entries[0] != b.Entries[0] || got.Entries[1] != b.Entries[1] || got.Ambiguities[0] != b.Ambiguities[0] || got.DrainXID != 4242 {
		t.Fatalf("batch %+v", got)
	}
	// Every strict prefix fails to decode, as does any trailing byte.
	for n := range len(body) {
		if _, err := decodeBatch(body[:n]); err == nil {
			t.Fatalf("prefix of %d bytes decoded", n)
		}
	}
	if _, err := decodeBatch(append(body, 0)); err == nil || !strings.Contains(err.Error(), "trailing") {
		t.Fatalf("trailing byte: %v", err)
	}
	if _, err := decodeBatch(append([]byte{2}, body[1:]...)); err == nil || !strings.Contains(err.Error(), "version 2") {
		t.Fatalf("future version: %v", err)
	}
}

func TestIdentityMismatchIsFatal(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, testID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Seed(0x1000, 0x800, nil); err != nil {
		t.Fatal(err)
	}
	l.Close()
	cases := []struct {
		mut  func(*Identity)
		want string
	}{
		{func(id *Identity) { id.PGMajor = 16 }, "pg major 15 on disk, 16 expected"},
		{func(id *Identity) { id.SystemID++ }, fmt.Sprintf("system id %d on disk, %d expected", testID.SystemID, testID.SystemID+1)},
		{func(id *Identity) { id.Timeline = 2 }, "timeline 1 on disk, 2 expected"},
		{func(id *Identity) { id.DbOid = 6 }, "database oid 5 on disk, 6 expected"},
		{func(id *Identity) { id.SegmentSize = 64 << 20 }, "wal segment size 16777216 on disk, 67108864 expected"},
	}
	for _, c := range cases {
		id := testID
		c.mut(&id)
		_, err := Open(dir, id)
		if !errors.Is(err, ErrIdentityMismatch) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), CheckpointFile) {
			t.Errorf("open with %+v: %v, want %q", id, err, c.want)
		}
	}
	// A header that does not verify is corruption, not another source.
	path := filepath.Join(dir, TailFile)
	data, _ := os.ReadFile(path)
	data[20] ^= 1
	os.WriteFile(path, data, 0o600)
	if _, err := Open(dir, testID); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "header crc") {
		t.Fatalf("flipped header: %v", err)
	}
}

func TestTornFinalFrameIsRepairedDurably(t *testing.T) {
	cases := []struct {
		name string
		cut  func(tail []byte, ends []int64) []byte
	}{
		{"short frame", func(tail []byte, ends []int64) []byte { return tail[:ends[len(ends)-2]+11] }},
		{"short frame header", func(tail []byte, ends []int64) []byte { return tail[:ends[len(ends)-2]+3] }},
		{"crc mismatch at the end", func(tail []byte, ends []int64) []byte {
			tail[len(tail)-1] ^= 0xff
			return tail
		}},
		{"zero-filled end", func(tail []byte, ends []int64) []byte {
			return append(tail[:ends[len(ends)-2]], make([]byte, 4096)...)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			l, steps, ends := scenarioLog(t, dir, 3, 10)
			l.Close()
			path := filepath.Join(dir, TailFile)
			tail, _ := os.ReadFile(path)
			if err := os.WriteFile(path, c.cut(tail, ends), 0o600); err != nil {
				t.Fatal(err)
			}
			r, err := Open(dir, testID)
			if err != nil {
				t.Fatal(err)
			}
			if r.Stats().TornRepairs != 1 || r.LastCapturedAt() != steps[len(steps)-2].in.NextLSN {
				t.Fatalf("repairs %d, last %s", r.Stats().TornRepairs, r.LastCapturedAt())
			}
			r.Close()
			// The repair reached the disk: the file ends at the last good frame
			// and the next open finds nothing to repair.
			if st, _ := os.Stat(path); st.Size() != ends[len(ends)-2] {
				t.Fatalf("tail is %d bytes, want %d", st.Size(), ends[len(ends)-2])
			}
			r, err = Open(dir, testID)
			if err != nil || r.Stats().TornRepairs != 0 {
				t.Fatalf("second open: %v, repairs %d", err, r.Stats().TornRepairs)
			}
			r.Close()
		})
	}
}

func TestInteriorDamageIsFatal(t *testing.T) {
	dir := t.TempDir()
	l, steps, ends := scenarioLog(t, dir, 5, 6)
	l.Close()
	path := filepath.Join(dir, TailFile)
	pristine, _ := os.ReadFile(path)
	// Flip every byte of the second frame (an interior one).
	frameOff, frameEnd := ends[1], ends[2]
	for off := frameOff; off < frameEnd; off++ {
		data := append([]byte(nil), pristine...)
		data[off] ^= 0x40
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := Open(dir, testID)
		if off-frameOff < 4 && err == nil {
			// A length grown past the end of the file reads as a torn write:
			// the later batches are gone, and the boundary check refuses to
			// go on once the shadow is past them.
			if r.LastCapturedAt() >= steps[1].in.NextLSN {
				t.Fatalf("flip at %d: the damaged frame was kept", off)
			}
			if _, _, err := r.PlanBoundary(steps[1].in.NextLSN, steps[len(steps)-1].in.NextLSN); !errors.Is(err, ErrCoverageLost) {
				t.Fatalf("flip at %d: lost batches not detected: %v", off, err)
			}
			r.Close()
			continue
		}
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
			t.Fatalf("flip at %d: %v", off, err)
		}
		if want := fmt.Sprintf("offset %d", frameOff); !strings.Contains(err.Error(), want) {
			t.Fatalf("flip at %d: %v does not name %s", off, err, want)
		}
	}
}

func TestCheckpointDamageIsFatal(t *testing.T) {
	dir := t.TempDir()
	l, _, _ := scenarioLog(t, dir, 9, 3)
	l.Close()
	path := filepath.Join(dir, CheckpointFile)
	pristine, _ := os.ReadFile(path)
	for _, off := range []int{headerLen, headerLen + 5, headerLen + 30, len(pristine) / 2, len(pristine) - 1} {
		data := append([]byte(nil), pristine...)
		data[off] ^= 0x01
		os.WriteFile(path, data, 0o600)
		if _, err := Open(dir, testID); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("flip at %d: %v", off, err)
		}
	}
	// Truncated: the checkpoint is written atomically, so short is corrupt.
	os.WriteFile(path, pristine[:len(pristine)-3], 0o600)
	if _, err := Open(dir, testID); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("truncated checkpoint: %v", err)
	}
	os.WriteFile(path, pristine, 0o600)
	// A tail whose checkpoint is gone cannot be trusted.
	os.Remove(path)
	if _, err := Open(dir, testID); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("tail without checkpoint: %v", err)
	}
}

func TestOpenEmptyAndLeftovers(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, testID)
	if err != nil {
		t.Fatal(err)
	}
	if l.Seeded() {
		t.Fatal("empty log seeded")
	}
	if err := l.Append(&Batch{CapturedAt: 5}); err == nil || !strings.Contains(err.Error(), "seeded") {
		t.Fatalf("append before seed: %v", err)
	}
	if _, _, err := l.PlanBoundary(5, 5); err == nil {
		t.Fatal("plan before seed")
	}
	l.Close()
	// An empty tail alone (a crash right after creating it) is still empty;
	// a stale temporary file from an interrupted rewrite is removed.
	os.WriteFile(filepath.Join(dir, CheckpointFile+".tmp"), []byte("junk"), 0o600)
	l, err = Open(dir, testID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, CheckpointFile+".tmp")); !os.IsNotExist(err) {
		t.Fatal("temporary file kept")
	}
	if _, err := l.Seed(0x1000, 0x800, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Seed(0x2000, 0x800, nil); err == nil {
		t.Fatal("seeded twice")
	}
	l.Close()
	// Seed crashed after the checkpoint, before the tail: the tail is made.
	os.Remove(filepath.Join(dir, TailFile))
	l, err = Open(dir, testID)
	if err != nil || !l.Seeded() {
		t.Fatalf("%v", err)
	}
	l.Close()
}

func TestWriteFailurePoisonsTheLog(t *testing.T) {
	l := seededLog(t)
	l.tail.Close() // the next write fails underneath the log
	err := l.Append(&Batch{CapturedAt: 0x2000})
	if err == nil {
		t.Fatal("append on a closed file")
	}
	if err2 := l.Append(&Batch{CapturedAt: 0x3000}); err2 != err {
		t.Fatalf("second append: %v, want the first failure %v", err2, err)
	}
	if _, ok := l.BatchAt(0x2000); ok {
		t.Fatal("a failed append was published")
	}
	if err2 := l.Compact(0x2000); err2 != err {
		t.Fatalf("compact after failure: %v", err)
	}
}

func TestSeedFiltersAndValidates(t *testing.T) {
	idx := table(16401, 16401, "i", col(1, "a", typInt4))
	idx.Kind = 'i'
	cat := table(1259, 1259, "pg_class")
	view := table(16402, 0, "v")
	view.Kind = 'v'
	d := table(16400, 16400, "t", col(1, "id", typInt4))
	l := seededLog(t, d, idx, cat, view)
	if s := l.Stats(); s.SeededEntries != 1 || s.Entries != 1 {
		t.Fatalf("%+v", s)
	}
	mustLookup(t, l.DescriptorByOidInDBAt(testDB, idx.Oid, 0x1000), NotCovered)
	l2, _ := Open(t.TempDir(), testID)
	defer l2.Close()
	foreign := d
	foreign.DbOid = 9
	if _, err := l2.Seed(0x1000, 0x800, []Descriptor{foreign}); err == nil {
		t.Fatal("foreign relation seeded")
	}
	if _, err := l2.Seed(0x1000, 0x800, []Descriptor{d, d}); err == nil {
		t.Fatal("duplicate seeded")
	}
	if _, err := l2.Seed(0x800, 0x1000, nil); err == nil {
		t.Fatal("valid from after horizon")
	}
	if l2.Seeded() {
		t.Fatal("failed seeds left a checkpoint")
	}
}
