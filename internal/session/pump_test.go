package session

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/wal"
)

const fixtureDir = "../wal/testdata/pg15/wal"

// fakeDecider NOOPs heap records and makes every COMMIT with invalidation
// messages a boundary: enough to drive the pump's mechanics.
type fakeDecider struct{}

func (fakeDecider) Decide(rec *wal.Record) (Decision, error) {
	switch rec.Header.RmID {
	case wal.RmgrHeap, wal.RmgrHeap2:
		return Decision{Noop: true, ToDecoder: true}, nil
	case wal.RmgrXact:
		d := Decision{ToDecoder: true}
		var c wal.XactCommit
		if rec.RmgrInfo()&0x70 == wal.XLogXactCommit && c.Decode(rec) == nil && c.Invals.Len() > 0 {
			d.Boundary = &Boundary{NextLSN: rec.Next, DrainXID: rec.Header.XID}
		}
		return d, nil
	}
	return Decision{}, nil
}

func (fakeDecider) NoopRecord(dst []byte, rec *wal.Record) ([]byte, error) {
	dst = append(dst, make([]byte, rec.Header.TotLen)...)
	binary.LittleEndian.PutUint32(dst[0:], rec.Header.TotLen)
	binary.LittleEndian.PutUint64(dst[8:], uint64(rec.Header.Prev))
	dst[16], dst[17] = 0x20, byte(wal.RmgrXLOG)
	body := int(rec.Header.TotLen) - wal.RecordHeaderSize
	if body-2 <= 255 {
		dst[24], dst[25] = 255, byte(body-2)
	} else {
		dst[24] = 254
		binary.LittleEndian.PutUint32(dst[25:], uint32(body-5))
	}
	tab := crc32.MakeTable(crc32.Castagnoli)
	c := crc32.Update(crc32.Update(0, tab, dst[24:]), tab, dst[:20])
	binary.LittleEndian.PutUint32(dst[20:], c)
	return dst, nil
}

// fakeShadow records what is published and "applies" it at once, unless
// frozen; it checks nothing is published past a held boundary.
type fakeShadow struct {
	mu        sync.Mutex
	start     wal.LSN
	wire      []byte
	holdLimit wal.LSN // while non-zero, publishing beyond it is a bug
	t         *testing.T
}

func (s *fakeShadow) Publish(start wal.LSN, b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if start != s.start+wal.LSN(len(s.wire)) {
		s.t.Errorf("publish at %s, expected %s", start, s.start+wal.LSN(len(s.wire)))
	}
	if s.holdLimit != 0 && start+wal.LSN(len(b)) > s.holdLimit {
		s.t.Errorf("published through %s during the hold at %s", start+wal.LSN(len(b)), s.holdLimit)
	}
	s.wire = append(s.wire, b...)
}

// MemoryFloor: Publish copies.
func (s *fakeShadow) MemoryFloor() wal.LSN { return wal.LSN(math.MaxUint64) }

func (s *fakeShadow) WaitApply(ctx context.Context, lsn wal.LSN) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.start+wal.LSN(len(s.wire)) < lsn-7 { // padding after the record may not have arrived
		s.t.Errorf("hold at %s but only %s published", lsn, s.start+wal.LSN(len(s.wire)))
	}
	return nil
}

type memSink struct{ segs map[wal.LSN][]byte }

func (m *memSink) WriteSegment(start wal.LSN, data []byte) error {
	m.segs[start] = append([]byte(nil), data...)
	return nil
}

func fixture(t *testing.T) ([]byte, wal.LSN) {
	files, err := wal.SegmentFiles(fixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	var all []byte
	for _, f := range files {
		b, _ := os.ReadFile(f)
		all = append(all, b...)
	}
	n, _ := wal.ParseSegmentName(filepath.Base(files[0]))
	start, _ := n.StartLSN(1 << 20)
	return all, start
}

// TestPumpFiltersHoldsAndBatches feeds the pump two ways: copied (Feed)
// and read straight into its buffer (Buffer, FeedBuffered: the session's
// spool reads, sometimes asking for the buffer again with nothing read, as
// an idle read does).
func TestPumpFiltersHoldsAndBatches(t *testing.T) {
	for _, buffered := range []bool{false, true} {
		name := "Feed"
		if buffered {
			name = "FeedBuffered"
		}
		t.Run(name, func(t *testing.T) { testPumpFiltersHoldsAndBatches(t, buffered) })
	}
}

func testPumpFiltersHoldsAndBatches(t *testing.T, buffered bool) {
	all, start := fixture(t)
	shadow := &fakeShadow{start: start, t: t}
	sink := &memSink{segs: map[wal.LSN][]byte{}}
	out := make(chan *Batch, 1)
	p, err := NewPump(start, PumpConfig{SegmentSize: 1 << 20, MaxBatchRecords: 100}, fakeDecider{}, shadow, sink, out)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var batches []*Batch
	done := make(chan struct{})
	go func() {
		defer close(done)
		for b := range out {
			if b.Boundary != nil {
				shadow.mu.Lock()
				shadow.holdLimit = b.Boundary.NextLSN
				shadow.mu.Unlock()
				time.Sleep(time.Millisecond) // the pump must stay parked meanwhile
				shadow.mu.Lock()
				shadow.holdLimit = 0
				shadow.mu.Unlock()
				b.Release()
			}
			batches = append(batches, b)
		}
	}()
	rng := rand.New(rand.NewPCG(1, 2))
	for rest := all[:validEnd(t, all, start)-start]; len(rest) > 0; {
		n := min(1+rng.IntN(200_000), len(rest))
		if buffered {
			if rng.IntN(4) == 0 {
				p.Buffer(n) // an idle read: nothing came
			}
			n = copy(p.Buffer(n), rest)
			if err := p.FeedBuffered(ctx, n); err != nil {
				t.Fatal(err)
			}
		} else if err := p.Feed(ctx, rest[:n]); err != nil {
			t.Fatal(err)
		}
		rest = rest[n:]
	}
	p.FlushIdle(ctx)
	close(out)
	<-done

	// Batches: WAL order, boundaries end batches, sizes bounded.
	var last wal.LSN
	var boundaries, items int
	for _, b := range batches {
		for i, it := range b.Items {
			if it.Record.LSN <= last {
				t.Fatalf("items out of order at %s", it.Record.LSN)
			}
			last = it.Record.LSN
			if it.Decision.Boundary != nil && i != len(b.Items)-1 {
				t.Fatalf("boundary at %s does not end its batch", it.Record.LSN)
			}
		}
		items += len(b.Items)
		if b.Boundary != nil {
			boundaries++
		}
		if len(b.Items) > 100 {
			t.Fatalf("batch of %d items", len(b.Items))
		}
	}
	if boundaries < 10 || p.Stats().Holds != int64(boundaries) {
		t.Fatalf("%d boundaries, %d holds", boundaries, p.Stats().Holds)
	}
	// The wire the shadow got re-parses, record for record, with every heap
	// record turned into a NOOP of the same length at the same LSN.
	sr, _ := wal.NewStreamReader(start, wal.StreamOptions{})
	sr.Push(shadow.wire)
	orig, _ := wal.NewStreamReader(start, wal.StreamOptions{})
	orig.Push(all)
	var noops int
	for {
		a, errA := orig.Next()
		if errA != nil {
			break
		}
		aLSN, aLen, aRm := a.LSN, a.Header.TotLen, a.Header.RmID
		b, errB := sr.Next()
		if errB != nil {
			t.Fatalf("filtered wire at %s: %v", aLSN, errB)
		}
		if b.LSN != aLSN || b.Header.TotLen != aLen {
			t.Fatalf("filtered record %s/%d, original %s/%d", b.LSN, b.Header.TotLen, aLSN, aLen)
		}
		if aRm == wal.RmgrHeap || aRm == wal.RmgrHeap2 {
			if b.Header.RmID != wal.RmgrXLOG || b.RmgrInfo() != 0x20 {
				t.Fatalf("heap record at %s not a NOOP", aLSN)
			}
			noops++
		}
	}
	if noops == 0 || int64(noops) != p.Stats().NoopRecords {
		t.Fatalf("%d NOOPs in the wire, pump counted %d", noops, p.Stats().NoopRecords)
	}
	// The batches carry the original records, not their NOOPs (the pump
	// copies a record before rewriting the wire bytes it may alias).
	origRaw := map[wal.LSN][]byte{}
	again, _ := wal.NewStreamReader(start, wal.StreamOptions{})
	again.Push(all)
	for {
		rec, err := again.Next()
		if err != nil {
			break
		}
		origRaw[rec.LSN] = append([]byte(nil), rec.Raw...)
	}
	var heapItems int
	for _, b := range batches {
		for _, it := range b.Items {
			if string(it.Record.Raw) != string(origRaw[it.Record.LSN]) {
				t.Fatalf("the batch's record at %s is not the original's bytes", it.Record.LSN)
			}
			if rm := it.Record.Header.RmID; rm == wal.RmgrHeap || rm == wal.RmgrHeap2 {
				heapItems++
			}
		}
	}
	if heapItems != noops {
		t.Fatalf("%d heap records in the batches, %d NOOPed in the wire", heapItems, noops)
	}
	// The first segment was sealed to the sink with the same filtered bytes.
	seg := sink.segs[start]
	if len(seg) != 1<<20 || string(seg) != string(shadow.wire[:1<<20]) {
		t.Fatalf("archived segment differs from the published wire (%d bytes)", len(seg))
	}
	t.Logf("%d batches, %d items, %d boundaries, %d NOOPs", len(batches), items, boundaries, noops)
}

// validEnd is where the fixture's valid WAL ends (its tail is zeros).
func validEnd(t *testing.T, all []byte, start wal.LSN) wal.LSN {
	sr, _ := wal.NewStreamReader(start, wal.StreamOptions{})
	sr.Push(all)
	var end wal.LSN
	for {
		rec, err := sr.Next()
		if err != nil {
			if !wal.IsKind(err, wal.KindEndOfWAL) {
				t.Fatal(err)
			}
			return end
		}
		end = rec.Next
	}
}

func TestPumpHoldTimeout(t *testing.T) {
	all, start := fixture(t)
	out := make(chan *Batch, 100)
	p, _ := NewPump(start, PumpConfig{SegmentSize: 1 << 20, HoldTimeout: 50 * time.Millisecond}, fakeDecider{},
		&fakeShadow{start: start, t: t}, &memSink{segs: map[wal.LSN][]byte{}}, out)
	err := p.Feed(context.Background(), all[:1<<20])
	if err == nil || !errors.Is(err, ErrHoldTimeout) {
		t.Fatalf("err = %v, want a hold timeout (nobody releases the boundary)", err)
	}
}

type failingSink struct{ calls int }

func (f *failingSink) WriteSegment(wal.LSN, []byte) error {
	f.calls++
	return errors.New("no space left on device")
}

// A segment reaches the archive before the shadow gets any byte past it:
// the shadow may remove a segment from its pg_wal once it is past it, and a
// restart whose floor is in that segment then reads the archive's copy. A
// failed archive write must leave the shadow short of the segment's end.
func TestPumpArchivesBeforeShadowPassesSegment(t *testing.T) {
	all, start := fixture(t)
	const segSize = 1 << 20
	shadow := &fakeShadow{start: start, t: t}
	sink := &failingSink{}
	p, err := NewPump(start, PumpConfig{SegmentSize: segSize, SelfRelease: true}, fakeDecider{}, shadow, sink, make(chan *Batch, 10000))
	if err != nil {
		t.Fatal(err)
	}
	err = p.Feed(context.Background(), all[:validEnd(t, all, start)-start])
	if err == nil || sink.calls == 0 {
		t.Fatalf("err = %v after %d archive writes, want the archive's error", err, sink.calls)
	}
	if got := start + wal.LSN(len(shadow.wire)); got > start+segSize {
		t.Fatalf("the shadow got WAL through %s, past the segment %s the archive could not take", got, start)
	}
}

// TestPumpHandOverOutlastsHoldTimeout: handing a boundary's batch to a
// processor backed up behind a slow destination takes as long as it
// takes: the pump reads the spool, so nothing upstream waits with it, and
// the hold timeout bounds only what the shadow does.
func TestPumpHandOverOutlastsHoldTimeout(t *testing.T) {
	all, start := fixture(t)
	out := make(chan *Batch) // nobody reads for a while
	p, _ := NewPump(start, PumpConfig{SegmentSize: 1 << 20, HoldTimeout: 50 * time.Millisecond, SelfRelease: true}, fakeDecider{},
		&fakeShadow{start: start, t: t}, &memSink{segs: map[wal.LSN][]byte{}}, out)
	done := make(chan error, 1)
	go func() { done <- p.Feed(context.Background(), all[:validEnd(t, all, start)-start]) }()
	time.Sleep(300 * time.Millisecond) // six hold timeouts
	select {
	case err := <-done:
		t.Fatalf("Feed returned (%v) while the processor took nothing", err)
	default:
	}
	for {
		select {
		case b := <-out:
			b.Release()
		case err := <-done:
			if err != nil {
				t.Fatalf("Feed = %v after a slow hand-over, want nil", err)
			}
			return
		case <-time.After(10 * time.Second):
			t.Fatal("Feed did not finish once the processor read")
		}
	}
}

// heapOnlyDecider hands heap records to the decoder and makes no boundary.
type heapOnlyDecider struct{ fakeDecider }

func (heapOnlyDecider) Decide(rec *wal.Record) (Decision, error) {
	if rec.Header.RmID == wal.RmgrHeap || rec.Header.RmID == wal.RmgrHeap2 {
		return Decision{ToDecoder: true}, nil
	}
	return Decision{}, nil
}

// TestPumpMaxBatchAge: a batch far from MaxBatchRecords is handed over at
// the end of the chunk that finds it older than MaxBatchAge, and kept
// while it is younger.
func TestPumpMaxBatchAge(t *testing.T) {
	all, start := fixture(t)
	const chunk = 64 << 10
	for _, c := range []struct {
		age  time.Duration
		want bool
	}{{time.Hour, false}, {time.Nanosecond, true}} {
		out := make(chan *Batch, 100)
		p, err := NewPump(start, PumpConfig{SegmentSize: 1 << 20, MaxBatchRecords: 1 << 30, MaxBatchAge: c.age, SelfRelease: true}, heapOnlyDecider{},
			&fakeShadow{start: start, t: t}, &memSink{segs: map[wal.LSN][]byte{}}, out)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Feed(context.Background(), all[:chunk]); err != nil {
			t.Fatal(err)
		}
		if err := p.Feed(context.Background(), all[chunk:2*chunk]); err != nil {
			t.Fatal(err)
		}
		if got := len(out) > 0; got != c.want {
			t.Errorf("MaxBatchAge %v: a batch handed over %v, want %v (%d pump records)", c.age, got, c.want, p.Stats().DecoderRecords)
		}
		if c.want && len(out) > 0 {
			if b := <-out; len(b.Items) == 0 {
				t.Errorf("MaxBatchAge %v: an empty batch", c.age)
			}
		}
	}
}
