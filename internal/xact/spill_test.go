package xact

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/walshadow/walshadow/internal/wal"
)

// TestSpillManyXids runs many interleaved xids through a 4 KiB budget:
// every record comes back exactly once, in LSN order, byte-identical with
// its flags, and every spill file goes at its transaction's end.
func TestSpillManyXids(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	b := newTestBuffer(t, Config{MemoryBudget: 4 << 10, SliceRecords: 37, SliceBytes: 16 << 10})
	const xids = 200
	want := map[uint32][]Change{}
	lsn := wal.LSN(0x1000000)
	for range 6000 {
		xid := uint32(1000 + rng.IntN(xids))
		lsn += wal.LSN(8 + rng.IntN(64)*8)
		n := 24 + rng.IntN(600)
		if rng.IntN(200) == 0 {
			n = 20000 // bigger than the budget
		}
		c := change(lsn, xid, n)
		want[xid] = append(want[xid], c)
		if err := b.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	st := b.Stats()
	if st.Spills == 0 || st.SpillFiles == 0 || st.MemoryBytes > 4<<10 {
		t.Fatalf("expected spilling within budget, got %+v", st)
	}
	if len(spillFilesIn(t, b.cfg.SpillDir)) != st.SpillFiles {
		t.Fatalf("Stats says %d spill files, dir has %v", st.SpillFiles, spillFilesIn(t, b.cfg.SpillDir))
	}
	// Commit half as trees (top + three "subxids"), abort the others.
	seen := map[wal.LSN]bool{}
	for top := uint32(1000); top < 1000+xids; top += 4 {
		subs := []uint32{top + 1, top + 2, top + 3}
		if top%8 == 4 {
			b.Abort(top, subs)
			continue
		}
		var tree []Change
		for _, x := range append([]uint32{top}, subs...) {
			tree = append(tree, want[x]...)
		}
		slices.SortFunc(tree, func(a, b Change) int { return int(a.LSN - b.LSN) })
		d, err := b.Commit(top, subs)
		if err != nil {
			t.Fatal(err)
		}
		got := drainAll(t, b, d)
		sameChanges(t, got, tree)
		for _, c := range got {
			if seen[c.LSN] {
				t.Fatalf("record %s drained twice", c.LSN)
			}
			seen[c.LSN] = true
		}
	}
	st = b.Stats()
	if st.OpenXIDs != 0 || st.MemoryBytes != 0 || st.SpillFiles != 0 || st.SpilledBytes != 0 || st.DrainingTrees != 0 {
		t.Fatalf("state left after every transaction ended: %+v", st)
	}
	mustNoSpillFiles(t, b.cfg.SpillDir)
}

// TestSpillAppends: one xid spills repeatedly into one file, then the drain
// reads the file and the in-memory tail.
func TestSpillAppends(t *testing.T) {
	b := newTestBuffer(t, Config{MemoryBudget: 2000})
	var want []Change
	for i := range 50 {
		c := change(wal.LSN(100+i*100), 77, 300)
		want = append(want, c)
		if err := b.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	st := b.Stats()
	if st.SpillFiles != 1 || st.Spills < 5 || st.MemoryBytes == 0 {
		t.Fatalf("want one file, several spills, a memory tail: %+v", st)
	}
	files := spillFilesIn(t, b.cfg.SpillDir)
	if want := spillFileName(77, 100); !strings.HasSuffix(files[0], want) {
		t.Fatalf("spill file %s, want name %s", files[0], want)
	}
	if fileSize(t, files[0]) != st.SpilledBytes {
		t.Fatalf("file is %d bytes, Stats says %d", fileSize(t, files[0]), st.SpilledBytes)
	}
	d, _ := b.Commit(77, nil)
	sameChanges(t, drainAll(t, b, d), want)
	mustNoSpillFiles(t, b.cfg.SpillDir)
}

// spilledDrain buffers records of xid 7 that all spill and commits them.
func spilledDrain(t *testing.T, records int) (*Buffer, *Drain, string) {
	t.Helper()
	b := newTestBuffer(t, Config{MemoryBudget: 1})
	for i := range records {
		if err := b.Add(change(wal.LSN(1000+i*100), 7, 50)); err != nil {
			t.Fatal(err)
		}
	}
	files := spillFilesIn(t, b.cfg.SpillDir)
	if len(files) != 1 {
		t.Fatalf("spill files %v", files)
	}
	d, err := b.Commit(7, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b, d, files[0]
}

func drainErr(d *Drain) error {
	for {
		if _, err := d.Next(); err != nil {
			return err
		}
	}
}

func TestSpillCorruption(t *testing.T) {
	const frame = frameHeaderSize + bodyFixedSize + 50
	cases := []struct {
		name      string
		damage    func(t *testing.T, path string)
		truncated bool
		offset    int64
	}{
		{"flipped magic", flipAt(1), false, 0},
		{"flipped version", flipAt(4), false, 4},
		{"flipped header xid", flipAt(6), false, 6},
		{"flipped raw byte in frame 2", flipAt(spillHeaderSize + 2*frame + 40), false, spillHeaderSize + 2*frame},
		{"flipped crc of frame 0", flipAt(spillHeaderSize + 5), false, spillHeaderSize},
		{"impossible length in frame 1", setLength(spillHeaderSize+frame, 3), false, spillHeaderSize + frame},
		{"huge length in frame 1", setLength(spillHeaderSize+frame, 0xFFFFFFFF), false, spillHeaderSize + frame},
		{"length past the end", setLength(spillHeaderSize+frame, 1<<20), true, spillHeaderSize + frame},
		{"cut inside frame 3", truncateTo(spillHeaderSize + 3*frame + 30), true, spillHeaderSize + 3*frame},
		{"cut inside frame 3 header", truncateTo(spillHeaderSize + 3*frame + 5), true, spillHeaderSize + 3*frame},
		{"cut at a frame boundary", truncateTo(spillHeaderSize + 4*frame), true, spillHeaderSize + 4*frame},
		{"cut inside the header", truncateTo(7), true, 0},
		{"bytes appended", appendBytes(10), false, spillHeaderSize + 10*frame},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, d, path := spilledDrain(t, 10)
			if fileSize(t, path) != spillHeaderSize+10*frame {
				t.Fatalf("file size %d, frame math is off", fileSize(t, path))
			}
			tc.damage(t, path)
			err := drainErr(d)
			var se *SpillError
			if !errors.As(err, &se) {
				t.Fatalf("err = %v, want a SpillError", err)
			}
			if want := ErrCorrupt; tc.truncated {
				want = ErrTruncated
				if !errors.Is(err, want) || errors.Is(err, ErrCorrupt) {
					t.Fatalf("err = %v, want truncated", err)
				}
			} else if !errors.Is(err, want) || errors.Is(err, ErrTruncated) {
				t.Fatalf("err = %v, want corrupt", err)
			}
			if se.Offset != tc.offset {
				t.Fatalf("err = %v, want offset %d", err, tc.offset)
			}
			msg := err.Error()
			kind := map[bool]string{true: "truncated", false: "corrupt"}[tc.truncated]
			if !strings.HasPrefix(msg, kind+" spill file "+path+" at offset "+fmt.Sprint(tc.offset)) {
				t.Fatalf("message %q does not name kind, file and offset", msg)
			}
			if _, err2 := d.Next(); err2 == nil {
				t.Fatal("the drain did not fail closed")
			}
			d.Close()
			mustNoSpillFiles(t, b.cfg.SpillDir)
		})
	}
}

func flipAt(off int64) func(*testing.T, string) {
	return func(t *testing.T, p string) {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		data[off] ^= 0x40
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func setLength(off int64, length uint32) func(*testing.T, string) {
	return func(t *testing.T, p string) {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		data[off], data[off+1], data[off+2], data[off+3] = byte(length), byte(length>>8), byte(length>>16), byte(length>>24)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func truncateTo(n int64) func(*testing.T, string) {
	return func(t *testing.T, p string) {
		if err := os.Truncate(p, n); err != nil {
			t.Fatal(err)
		}
	}
}

func appendBytes(n int) func(*testing.T, string) {
	return func(t *testing.T, p string) {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.Write(make([]byte, n)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSpillFileMissing(t *testing.T) {
	_, d, path := spilledDrain(t, 3)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := drainErr(d); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("err = %v, want one naming %s", err, path)
	}
	d.Close()
}

func TestReadSpillGolden(t *testing.T) {
	b, d, path := spilledDrain(t, 3)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The header and the first frame's fixed part, byte by byte.
	wantHead := []byte{
		'W', 'S', 'X', 'S', 1, 0, 7, 0, 0, 0, 0, 0, // magic, version 1, xid 7, reserved
		71, 0, 0, 0, // length 21+50
	}
	if !slices.Equal(data[:len(wantHead)], wantHead) {
		t.Fatalf("head % x, want % x", data[:len(wantHead)], wantHead)
	}
	body := data[spillHeaderSize+frameHeaderSize:]
	wantBody := []byte{0xE8, 3, 0, 0, 0, 0, 0, 0, 0x1A, 4, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0} // lsn 1000, next 1050, xid 7, flags 0
	if !slices.Equal(body[:bodyFixedSize], wantBody) {
		t.Fatalf("body % x, want % x", body[:bodyFixedSize], wantBody)
	}
	var got []Change
	xid, err := ReadSpill(path, data, func(c Change) error {
		c.Raw = slices.Clone(c.Raw)
		got = append(got, c)
		return nil
	})
	if err != nil || xid != 7 {
		t.Fatalf("ReadSpill: xid %d, %v", xid, err)
	}
	sameChanges(t, got, []Change{change(1000, 7, 50), change(1100, 7, 50), change(1200, 7, 50)})
	d.Close()
	mustNoSpillFiles(t, b.cfg.SpillDir)
}

func FuzzSpillRead(f *testing.F) {
	b, err := New(Config{SpillDir: f.TempDir(), MemoryBudget: 1})
	if err != nil {
		f.Fatal(err)
	}
	for i := range 4 {
		if err := b.Add(change(wal.LSN(1000+i*100), 7, 30+i*10)); err != nil {
			f.Fatal(err)
		}
	}
	m := spillFilesIn(f, b.cfg.SpillDir)
	valid, err := os.ReadFile(m[0])
	if err != nil {
		f.Fatal(err)
	}
	b.Close()
	f.Add(valid)
	f.Add(valid[:len(valid)-3])
	f.Add(valid[:spillHeaderSize+5])
	f.Add(valid[:spillHeaderSize])
	f.Add([]byte{})
	f.Add([]byte("WSXS\x01\x00\x07\x00\x00\x00\x00\x00\xff\xff\xff\xff\x00\x00\x00\x00"))
	flipped := slices.Clone(valid)
	flipped[40] ^= 1
	f.Add(flipped)
	f.Fuzz(func(t *testing.T, data []byte) {
		frames := 0
		var last wal.LSN
		_, err := ReadSpill("fuzz.spill", data, func(c Change) error {
			if frames > 0 && c.LSN <= last {
				t.Fatalf("frames out of order: %s after %s", c.LSN, last)
			}
			last = c.LSN
			frames++
			return nil
		})
		if err != nil {
			var se *SpillError
			if !errors.As(err, &se) || se.Path != "fuzz.spill" || se.Offset < 0 || se.Offset > int64(len(data)) {
				t.Fatalf("error %v is not a SpillError within the input", err)
			}
			return
		}
		if len(data) < spillHeaderSize {
			t.Fatalf("accepted %d bytes, shorter than a header", len(data))
		}
	})
}

// TestDrainBesideAdds drains spilled trees on one goroutine while another
// keeps adding, spilling and aborting other xids (run with -race).
func TestDrainBesideAdds(t *testing.T) {
	b := newTestBuffer(t, Config{MemoryBudget: 8 << 10, SliceRecords: 7})
	var want []Change
	for i := range 300 {
		c := change(wal.LSN(1000+i*100), 1, 200)
		want = append(want, c)
		if err := b.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	d, err := b.Commit(1, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		lsn := wal.LSN(1 << 30)
		for i := range 2000 {
			xid := uint32(10 + i%50)
			lsn += 100
			if err := b.Add(change(lsn, xid, 300)); err != nil {
				done <- err
				return
			}
			if i%97 == 0 {
				b.Abort(xid, nil)
			}
			_ = b.Floor()
		}
		done <- nil
	}()
	sameChanges(t, drainAll(t, b, d), want)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestQueuedDrainsSpill: committed trees whose drain has not started stay
// within the budget (they spill), while closes and drains race with Adds.
func TestQueuedDrainsSpill(t *testing.T) {
	b := newTestBuffer(t, Config{MemoryBudget: 16 << 10})
	type queued struct {
		d    *Drain
		want []Change
	}
	var queue []queued
	lsn := wal.LSN(1000)
	for xid := uint32(1); xid <= 40; xid++ {
		var want []Change
		for range 20 {
			lsn += 100
			c := change(lsn, xid, 400)
			want = append(want, c)
			if err := b.Add(c); err != nil {
				t.Fatal(err)
			}
		}
		d, err := b.Commit(xid, nil)
		if err != nil {
			t.Fatal(err)
		}
		queue = append(queue, queued{d, want})
		if st := b.Stats(); st.MemoryBytes > 16<<10 {
			t.Fatalf("queued committed trees hold %d bytes over the budget", st.MemoryBytes)
		}
	}
	done := make(chan error, 1)
	go func() {
		for i := range 3000 {
			lsn := wal.LSN(1<<32) + wal.LSN(i*100)
			if err := b.Add(change(lsn, uint32(1000+i%30), 300)); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for i, q := range queue {
		if i%3 == 0 {
			q.d.Close() // never started
			continue
		}
		sameChanges(t, drainAll(t, b, q.d), q.want)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := b.Stats(); st.DrainingTrees != 0 || st.PinnedBytes != 0 {
		t.Fatalf("after every drain closed: %+v", st)
	}
}
