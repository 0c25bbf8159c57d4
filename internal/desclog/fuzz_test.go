package desclog

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func fuzzBatchSeeds(f *testing.F) {
	f.Add(appendBatch(nil, &Batch{CapturedAt: 1}))
	f.Add(appendBatch(nil, benchBatch(2)))
	s := newScenario(99)
	s.seed(3)
	for _, st := range s.run(20) {
		b := &Batch{CapturedAt: st.in.NextLSN}
		for i := range st.fetched {
			d := &st.fetched[i]
			b.Entries = append(b.Entries, Entry{Kind: EntryPresent, Source: SourceSeed, Oid: d.Oid, Rfn: d.Rfn, ValidFrom: 1, Desc: d})
		}
		b.Entries = append(b.Entries, Entry{Kind: EntryDropped, Source: SourceBoundary, Oid: 1, Rfn: rfn(2), ValidFrom: 3})
		b.Ambiguities = append(b.Ambiguities, Ambiguity{Scope: ScopeRfn, Reason: ReasonUnknownMutationPosition, Rfn: rfn(4), DbOid: testDB, From: 1, Through: 2})
		f.Add(appendBatch(nil, b))
	}
}

// FuzzDecodeBatch: any input decodes or errors without panicking, and what
// decodes re-encodes to a body that decodes to the same batch.
func FuzzDecodeBatch(f *testing.F) {
	fuzzBatchSeeds(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		b, err := decodeBatch(body)
		if err != nil {
			return
		}
		again := appendBatch(nil, b)
		b2, err := decodeBatch(again)
		if err != nil {
			t.Fatalf("re-encoded batch does not decode: %v", err)
		}
		if !bytes.Equal(appendBatch(nil, b2), again) {
			t.Fatal("encoding not stable")
		}
		// The index builder refuses bad batches with an error, never a panic.
		_, _ = buildIndex(testDB, meta{}, true, []*Batch{b}, nil)
	})
}

func FuzzDecodeMeta(f *testing.F) {
	f.Add(encodeMeta(meta{CoveredThrough: 1, Floor: 2, Through: 3}))
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := decodeMeta(body)
		if err == nil && !bytes.Equal(encodeMeta(m), body) {
			t.Fatal("meta not canonical")
		}
	})
}

// FuzzScanFrames: frames found lie inside the file and verify; a torn
// offset is a frame boundary; strict mode never reports a tear.
func FuzzScanFrames(f *testing.F) {
	file := encodeHeader(testID, kindTail)
	for _, body := range [][]byte{{1}, appendBatch(nil, &Batch{CapturedAt: 9}), bytes.Repeat([]byte{7}, 300)} {
		file = appendFrame(file, body)
	}
	f.Add(file[headerLen:])
	f.Add(file[headerLen : len(file)-5])
	f.Add(append(file[headerLen:], 0, 0, 0, 0, 0, 0, 0, 0, 0))
	f.Fuzz(func(t *testing.T, rest []byte) {
		data := append(encodeHeader(testID, kindTail), rest...)
		for _, strict := range []bool{false, true} {
			frames, tornAt, err := scanFrames("tail", data, strict)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("error not ErrCorrupt: %v", err)
				}
				continue
			}
			if strict && tornAt >= 0 {
				t.Fatal("strict scan reported a tear")
			}
			end := int64(headerLen)
			for _, fr := range frames {
				if fr.off != end {
					t.Fatalf("frame at %d, expected %d", fr.off, end)
				}
				end += frameHeader + int64(len(fr.body))
			}
			if tornAt >= 0 && tornAt != end || tornAt < 0 && end != int64(len(data)) {
				t.Fatalf("frames end at %d, torn at %d, file %d", end, tornAt, len(data))
			}
		}
	})
}

// FuzzOpenTail: a log directory with an arbitrary tail opens or fails with
// ErrCorrupt; it never panics, and what opens reopens identically.
func FuzzOpenTail(f *testing.F) {
	dir := f.TempDir()
	l, err := Open(dir, testID)
	if err != nil {
		f.Fatal(err)
	}
	if _, err := l.Seed(0x1000, 0x800, []Descriptor{table(16400, 16400, "t", col(1, "id", typInt4))}); err != nil {
		f.Fatal(err)
	}
	d := table(16400, 16400, "t", col(1, "id", typInt4), col(2, "x", typText))
	b, _, _ := Capture(l, BoundaryInput{NextLSN: 0x2000, AffectedOids: []uint32{16400}}, []Descriptor{d})
	l.Append(b)
	l.Append(&Batch{CapturedAt: 0x3000})
	l.Close()
	ckpt, _ := os.ReadFile(filepath.Join(dir, CheckpointFile))
	tail, _ := os.ReadFile(filepath.Join(dir, TailFile))
	f.Add(tail[headerLen:])
	f.Fuzz(func(t *testing.T, rest []byte) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, CheckpointFile), ckpt, 0o600)
		os.WriteFile(filepath.Join(dir, TailFile), append(encodeHeader(testID, kindTail), rest...), 0o600)
		l, err := Open(dir, testID)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error not ErrCorrupt: %v", err)
			}
			return
		}
		want := content(l)
		l.Close()
		r, err := Open(dir, testID)
		if err != nil {
			t.Fatalf("reopen after a successful open: %v", err)
		}
		defer r.Close()
		if r.Stats().TornRepairs != 0 || !bytes.Equal(content(r), want) {
			t.Fatal("reopen differs")
		}
	})
}
