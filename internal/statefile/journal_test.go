package statefile

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var journalSpec = Spec{Format: "walshadow-test", Version: 1, Remedy: "restore it"}

// kv is a journaled map in a test: the snapshot body is the map, a record
// one "key=value" (value "" deletes).
type kv struct {
	t    *testing.T
	path string
	j    *Journal
	m    map[string]string
}

func openKV(t *testing.T, path string) *kv {
	t.Helper()
	s := &kv{t: t, path: path, m: map[string]string{}}
	j, records, err := OpenJournal(path, journalSpec, func(data []byte) error {
		return journalSpec.Decode(path, data, &s.m, nil)
	})
	if err != nil {
		t.Fatalf("OpenJournal: %v", err)
	}
	s.j = j
	for _, r := range records {
		s.apply(string(r))
	}
	t.Cleanup(func() { j.Close() })
	return s
}

func (s *kv) apply(r string) {
	k, v, _ := strings.Cut(r, "=")
	if v == "" {
		delete(s.m, k)
	} else {
		s.m[k] = v
	}
}

func (s *kv) set(k, v string) {
	s.t.Helper()
	rec := k + "=" + v
	s.apply(rec)
	if err := s.j.Append([]byte(rec), func() (any, error) { return s.m, nil }); err != nil {
		s.t.Fatalf("Append(%s): %v", rec, err)
	}
}

func readKV(t *testing.T, path string) map[string]string {
	t.Helper()
	m := map[string]string{}
	records, err := ReadJournal(path, journalSpec, func(data []byte) error { return journalSpec.Decode(path, data, &m, nil) })
	if err != nil {
		t.Fatalf("ReadJournal: %v", err)
	}
	s := &kv{m: m}
	for _, r := range records {
		s.apply(string(r))
	}
	return s.m
}

func sameMap(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

func TestJournalRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	s := openKV(t, path)
	s.set("a", "1") // no journal yet: compacts, the snapshot holds it
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the first change wrote no snapshot: %v", err)
	}
	s.set("b", "2")
	s.set("a", "3")
	s.set("b", "")
	s.set("c", "4")
	want := map[string]string{"a": "3", "c": "4"}
	sameMap(t, "read while open", readKV(t, path), want)
	s.j.Close()
	again := openKV(t, path)
	sameMap(t, "reopened", again.m, want)
	again.set("d", "5")
	want["d"] = "5"
	sameMap(t, "after one more change", readKV(t, path), want)
}

// A crash can leave the last record cut short, its checksum failing or
// zeros: the journal ends before it, and the next append cuts it off.
func TestJournalTornTail(t *testing.T) {
	for name, damage := range map[string]func([]byte) []byte{
		"cut in the header":  func(b []byte) []byte { return b[:len(b)-len("x=9")-5] },
		"cut in the payload": func(b []byte) []byte { return b[:len(b)-1] },
		"checksum": func(b []byte) []byte {
			c := slices.Clone(b)
			c[len(c)-1] ^= 0xff
			return c
		},
		"zeros": func(b []byte) []byte {
			return append(b[:len(b)-len("x=9")-recordHeader:len(b)-len("x=9")-recordHeader], make([]byte, 4096)...)
		},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.json")
			s := openKV(t, path)
			s.set("a", "1")
			s.set("b", "2")
			s.set("x", "9")
			s.j.Close()
			jp := path + JournalSuffix
			b, err := os.ReadFile(jp)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(jp, damage(b), 0o600); err != nil {
				t.Fatal(err)
			}
			want := map[string]string{"a": "1", "b": "2"}
			again := openKV(t, path)
			sameMap(t, "after the damage", again.m, want)
			again.set("c", "3")
			want["c"] = "3"
			again.j.Close()
			sameMap(t, "appended after the cut", openKV(t, path).m, want)
		})
	}
}

func TestJournalDamageBeforeTheEnd(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	s := openKV(t, path)
	s.set("a", "1")
	s.set("b", "2")
	s.set("c", "3")
	s.j.Close()
	jp := path + JournalSuffix
	b, _ := os.ReadFile(jp)
	i := bytes.Index(b, []byte("b=2"))
	b[i] = 'B'
	if err := os.WriteFile(jp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := OpenJournal(path, journalSpec, func(data []byte) error { return nil })
	var se *Error
	if !errors.As(err, &se) || se.Truncated || !strings.Contains(err.Error(), "is damaged, and a whole one follows") || se.Path != jp {
		t.Fatalf("damage before the last record: got %v, want a corrupt *Error naming %s", err, jp)
	}
}

// A journal that does not follow the snapshot beside it (a compaction
// replaced the snapshot and crashed before the journal; an older walshadow
// rewrote the file whole) is ignored, and the next change compacts.
func TestJournalNotFollowingTheSnapshot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	s := openKV(t, path)
	s.set("a", "1")
	s.set("b", "2")
	s.j.Close()
	if err := journalSpec.Write(path, map[string]string{"z": "26"}); err != nil {
		t.Fatal(err)
	}
	again := openKV(t, path)
	sameMap(t, "snapshot rewritten whole", again.m, map[string]string{"z": "26"})
	again.set("y", "25")
	again.set("x", "24")
	again.j.Close()
	sameMap(t, "after changes", openKV(t, path).m, map[string]string{"x": "24", "y": "25", "z": "26"})
}

// Past its snapshot's size (and journalMinCompact) the journal is folded
// into a new snapshot.
func TestJournalCompacts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	s := openKV(t, path)
	val := strings.Repeat("v", 1000)
	want := map[string]string{}
	for i := range 3000 {
		k := fmt.Sprintf("k%03d", i%300)
		s.set(k, fmt.Sprintf("%d%s", i, val))
		want[k] = fmt.Sprintf("%d%s", i, val)
	}
	st, err := os.Stat(path + JournalSuffix)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() > journalMinCompact+2000 {
		t.Fatalf("the journal is %d bytes after 3 MB of changes: never compacted", st.Size())
	}
	s.j.Close()
	sameMap(t, "after compactions", openKV(t, path).m, want)
}

func TestSplitRecords(t *testing.T) {
	var b []byte
	for _, p := range []string{"one", "two", `{"x":3}`} {
		b = appendRecord(b, []byte(p))
	}
	got, end, err := splitRecords(b)
	if err != nil || end != int64(len(b)) || len(got) != 3 || string(got[2]) != `{"x":3}` {
		t.Fatalf("splitRecords = %q, %d, %v", got, end, err)
	}
	// The last append's pages reached the disk out of order: zeros where
	// its header is, then part of its payload. Torn, not damage.
	last := appendRecord(nil, []byte(strings.Repeat("p", 100)))
	torn := append(slices.Clone(b), make([]byte, 8)...)
	torn = append(torn, last[8:60]...)
	if got, end, err := splitRecords(torn); err != nil || len(got) != 3 || end != int64(len(b)) {
		t.Fatalf("zeros then part of a payload after 3 records: %d records, end %d, %v; want 3, %d, torn", len(got), end, err, len(b))
	}
	// A damaged record with a whole one after it is damage.
	damaged := slices.Clone(b)
	damaged[recordHeader] ^= 1 // the first record's payload
	if _, _, err := splitRecords(damaged); err == nil || !strings.Contains(err.Error(), "whole one follows at byte") {
		t.Fatalf("a damaged first record of 3: %v", err)
	}
}

func FuzzSplitRecords(f *testing.F) {
	f.Add(appendRecord(appendRecord(nil, []byte("a")), []byte(`{"b":1}`)))
	f.Add([]byte{})
	f.Add(make([]byte, 12))
	f.Fuzz(func(t *testing.T, data []byte) {
		records, end, err := splitRecords(data)
		if err != nil {
			return
		}
		if end > int64(len(data)) {
			t.Fatalf("end %d past the data's %d bytes", end, len(data))
		}
		// The whole records re-encode to the bytes they came from.
		var again []byte
		for _, r := range records {
			again = appendRecord(again, r)
		}
		if !bytes.Equal(again, data[:end]) {
			t.Fatalf("records re-encode to %x, the data up to %d is %x", again, end, data[:end])
		}
	})
}

// TestJournalCrashAnywhere replays random changes, compacting often, and
// after each one opens what a crash at that moment could leave: the files
// as they are, and the journal followed by part of the next change's
// record. Each must read as every change acknowledged so far, no more.
func TestJournalCrashAnywhere(t *testing.T) {
	saved := journalMinCompact
	journalMinCompact = 256
	defer func() { journalMinCompact = saved }()
	rng := rand.New(rand.NewPCG(7, 7))
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	s := openKV(t, path)
	model := map[string]string{}
	compactions := 0
	for step := range 400 {
		k := fmt.Sprintf("k%d", rng.IntN(20))
		v := ""
		if rng.IntN(4) != 0 {
			v = strings.Repeat(fmt.Sprint(step), 1+rng.IntN(8))
		}
		before, _ := os.ReadFile(path)
		s.set(k, v)
		if string(readFile(t, path)) != string(before) {
			compactions++
		}
		if v == "" {
			delete(model, k)
		} else {
			model[k] = v
		}
		// The files as they are.
		crash := t.TempDir()
		cpath := filepath.Join(crash, "state.json")
		copyFile(t, path, cpath)
		copyFile(t, path+JournalSuffix, cpath+JournalSuffix)
		sameMap(t, fmt.Sprintf("step %d, as written", step), readKV(t, cpath), model)
		// Part of the next record written.
		next := appendRecord(nil, []byte(fmt.Sprintf("k%d=torn", rng.IntN(20))))
		cut := rng.IntN(len(next))
		f, err := os.OpenFile(cpath+JournalSuffix, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.Write(next[:cut])
		f.Close()
		again := openKV(t, cpath)
		sameMap(t, fmt.Sprintf("step %d, the next record cut at byte %d of %d", step, cut, len(next)), again.m, model)
		// A change after the torn one lands, and the torn one never shows.
		again.set("after", "crash")
		again.j.Close()
		want := maps.Clone(model)
		want["after"] = "crash"
		sameMap(t, fmt.Sprintf("step %d, a change after the torn record", step), readKV(t, cpath), want)
	}
	if compactions < 10 {
		t.Fatalf("only %d compactions in 400 changes: the test does not exercise them", compactions)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestJournalDeferSync: appends after DeferSync write nothing until Sync
// writes them all in one compaction; after it each append is a synced
// record again.
func TestJournalDeferSync(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	s := openKV(t, path)
	s.set("a", "1")
	s.set("b", "2")
	s.j.DeferSync()
	for i := range 50 {
		s.set(fmt.Sprintf("k%d", i), "v")
	}
	if got := readKV(t, path); len(got) != 2 {
		t.Fatalf("a reader sees %d keys while deferred, want the 2 from before", len(got))
	}
	if err := s.j.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := readKV(t, path); len(got) != 52 {
		t.Fatalf("after Sync a reader sees %d keys, want 52", len(got))
	}
	jb := readFile(t, path+JournalSuffix)
	s.set("c", "3")
	if after := readFile(t, path+JournalSuffix); len(after) <= len(jb) {
		t.Fatal("an append after Sync was not written to the journal")
	}
	if err := s.j.Sync(); err != nil {
		t.Fatalf("a Sync with nothing deferred: %v", err)
	}
	s.j.Close()
	if got := openKV(t, path).m; len(got) != 53 {
		t.Fatalf("reopened: %d keys, want 53", len(got))
	}
}
