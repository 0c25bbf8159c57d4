package clickhouse

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/walshadow/walshadow/internal/statefile"
)

// sampleAgreed is an agreement with every kind of field set.
func sampleAgreed(t *testing.T, oid uint32) *Agreed {
	t.Helper()
	shape := users()
	shape.Oid = oid
	missing := "2020-01-02"
	tags := col(5, "tags", 1009, -1, "text[]", true)
	tags.ElemTypeOid = oidText
	born := col(6, "born", oidDate, -1, "date", false)
	born.HasMissing, born.Missing = true, &missing
	shape.Columns = append(shape.Columns, tags, born, col(7, "blob", oidBytea, -1, "bytea", false))
	p, err := Reconcile(Legacy1816, "mirror", TableConfig{ExcludeColumns: []string{"internal_notes"}, Types: map[string]string{"blob": "String"}}, nil, CHTable{}, shape)
	if err != nil {
		t.Fatal(err)
	}
	p.Agreed.ValidFrom = 0x16B3748
	return p.Agreed
}

func TestStoreRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "baseline")
	s, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(dir); err != nil || info.Mode().Perm() != 0o700 {
		t.Fatalf("store directory: %v, %v", info, err)
	}
	if s.Get(1) != nil || len(s.All()) != 0 {
		t.Fatal("a new store is not empty")
	}
	a, b := sampleAgreed(t, 20000), sampleAgreed(t, 100)
	for _, x := range []*Agreed{a, b} {
		if err := s.Put(x); err != nil {
			t.Fatal(err)
		}
	}
	// Get returns a copy: changing it changes neither the store nor a.
	got := s.Get(a.Oid)
	got.Columns[0].Spec.Name = "changed"
	*got.Shape[5].Missing = "changed"
	if again := s.Get(a.Oid); !reflect.DeepEqual(again, a) {
		t.Fatalf("Get after changing a copy:\n%+v\nwant\n%+v", again, a)
	}

	reopened, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	all := reopened.All()
	if len(all) != 2 || !reflect.DeepEqual(all[0], b) || !reflect.DeepEqual(all[1], a) {
		t.Fatalf("reopened All:\n%+v\nwant\n%+v\n%+v", all, b, a)
	}
	reprs := []Repr{}
	for _, m := range all[1].Columns {
		reprs = append(reprs, m.Spec.Type.Repr)
	}
	if !reflect.DeepEqual(reprs, []Repr{ReprInt, ReprString, ReprString, ReprArray, ReprUnixDays, ReprBytes}) || all[1].Columns[3].Spec.Type.Elem == nil {
		t.Errorf("stored representations %v", reprs)
	}

	if err := reopened.Delete(b.Oid); err != nil {
		t.Fatal(err)
	}
	if err := reopened.Delete(12345); err != nil {
		t.Fatalf("deleting an absent oid: %v", err)
	}
	third, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if third.Get(b.Oid) != nil || third.Get(a.Oid) == nil {
		t.Error("Delete did not persist")
	}
	raw := snapshotFile(t, third)
	if !bytes.HasPrefix(raw, []byte("{\n  \"format\": \"walshadow-baseline\",\n  \"version\": 3,\n")) || !bytes.Contains(raw, []byte(`"repr": "unix_days"`)) {
		t.Errorf("file layout: %.200s", raw)
	}
}

func TestStoreIgnoresLeftoverTempFile(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	a := sampleAgreed(t, 7)
	if err := s.Put(a); err != nil {
		t.Fatal(err)
	}
	// A crash of an older walshadow's writer, in the middle of a write,
	// leaves a partial temp file of its own name beside the old baseline.
	leftover := statefile.OutputDir(dir).Baseline() + ".tmp-123456"
	if err := os.WriteFile(leftover, []byte(`{"format":1,"crc32c":0,"agr`), 0o600); err != nil {
		t.Fatal(err)
	}
	reopened, err := OpenStore(dir)
	if err != nil {
		t.Fatalf("a leftover temp file broke OpenStore: %v", err)
	}
	if !reflect.DeepEqual(reopened.Get(7), a) {
		t.Error("the baseline changed")
	}
	if _, err := os.Stat(leftover); !os.IsNotExist(err) {
		t.Errorf("leftover temp file not removed: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("directory holds %d entries, want the baseline and its journal only", len(entries))
	}
}

func TestStoreDetectsCorruption(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(sampleAgreed(t, 7)); err != nil {
		t.Fatal(err)
	}
	path := statefile.OutputDir(dir).Baseline()
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Replace(good, []byte(`"schema": "demo"`), []byte(`"schema": "demO"`), 1)
	if bytes.Equal(flipped, good) {
		t.Fatal("test data lacks the schema")
	}
	// Bodies that pass the envelope's checks but not the store's.
	var body struct {
		Agreed []json.RawMessage `json:"agreed"`
	}
	if err := baselineSpec.Decode(path, good, &body, nil); err != nil || len(body.Agreed) != 1 {
		t.Fatalf("decoding the body: %v, %d entries", err, len(body.Agreed))
	}
	encode := func(agreed ...json.RawMessage) []byte {
		b, err := baselineSpec.Encode(map[string][]json.RawMessage{"agreed": agreed})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	badRepr := bytes.Replace(body.Agreed[0], []byte(`"repr": "int"`), []byte(`"repr": "integer"`), 1)
	if bytes.Equal(badRepr, body.Agreed[0]) {
		t.Fatal("test data lacks an int column")
	}
	for _, tc := range []struct {
		name      string
		data      []byte
		truncated bool
		want      string
	}{
		{"bit flip", flipped, false, "checksum mismatch"},
		{"truncated", good[:len(good)/2], true, "unexpected end of JSON input"},
		{"empty", nil, true, "the file is empty"},
		{"garbage", []byte("not json at all\n"), false, "invalid character"},
		{"future version", bytes.Replace(good, []byte(`"version": 3`), []byte(`"version": 4`), 1), false, "version 4, this walshadow reads version 3"},
		{"another format", bytes.Replace(good, []byte(`"walshadow-baseline"`), []byte(`"walshadow-loads"`), 1), false, `format "walshadow-loads"`},
		{"null entry", encode(body.Agreed[0], json.RawMessage("null")), false, "entry 1 is null"},
		{"duplicate oid", encode(body.Agreed[0], body.Agreed[0]), false, "relation oid 7 appears twice"},
		{"unknown field", encode(append(json.RawMessage(`{"extra":1,`), body.Agreed[0][1:]...)), false, `unknown field "extra"`},
		{"unknown repr", encode(badRepr), false, `unknown representation "integer"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(path, tc.data, 0o600); err != nil {
				t.Fatal(err)
			}
			_, openErr := OpenStore(dir)
			_, readErr := ReadAgreed(dir)
			for _, err := range []error{openErr, readErr} {
				var se *statefile.Error
				if !errors.As(err, &se) || se.Truncated != tc.truncated || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
					t.Fatalf("err = %v, want a *statefile.Error (truncated: %v) naming %s and containing %q", err, tc.truncated, path, tc.want)
				}
				what := "is corrupt"
				if tc.truncated {
					what = "is truncated"
				}
				if !strings.Contains(err.Error(), what) || !strings.HasSuffix(err.Error(), baselineSpec.Remedy) {
					t.Fatalf("err = %v, want it to say %q and end with the remedy", err, what)
				}
			}
		})
	}
}

func TestReadAgreedWithoutFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "absent")
	list, err := ReadAgreed(dir)
	if err != nil || list != nil {
		t.Fatalf("ReadAgreed of no store: %v, %v", list, err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("ReadAgreed created the directory: %v", err)
	}
}

// TestStoreOnTarget: the agreements on a target follow every Put and
// Delete, and a reopened store (its snapshot and journal) indexes them
// the same.
func TestStoreOnTarget(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	x, y := Target{Database: "shop", Table: "x"}, Target{Database: "shop", Table: "y"}
	oids := func(list []*Agreed) []uint32 {
		var out []uint32
		for _, a := range list {
			out = append(out, a.Oid)
		}
		return out
	}
	put := func(oid uint32, target Target) {
		a := sampleAgreed(t, oid)
		a.Target = target
		if err := s.Put(a); err != nil {
			t.Fatal(err)
		}
	}
	put(7, x)
	put(5, x)
	put(9, y)
	if got := oids(s.OnTarget(x)); !reflect.DeepEqual(got, []uint32{5, 7}) {
		t.Fatalf("OnTarget(x) = %v, want [5 7]", got)
	}
	put(7, y) // moved
	if err := s.Delete(5); err != nil {
		t.Fatal(err)
	}
	if got := s.OnTarget(x); len(got) != 0 {
		t.Fatalf("OnTarget(x) after the move and the delete = %v, want none", oids(got))
	}
	for name, open := range map[string]func(string) (*Store, error){"OpenStore": OpenStore, "ReadStore": ReadStore} {
		if name == "OpenStore" {
			s.j.Close()
		}
		again, err := open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if got := oids(again.OnTarget(y)); !reflect.DeepEqual(got, []uint32{7, 9}) {
			t.Fatalf("%s: OnTarget(y) = %v, want [7 9]", name, got)
		}
	}
}

// TestStoreReadSnapshotAgain: a snapshot read again (ReadJournal does when
// a compaction raced it) replaces what the first read gave: an agreement
// gone from the newer snapshot is gone from the store and its index.
func TestStoreReadSnapshotAgain(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	seven, nine := sampleAgreed(t, 7), sampleAgreed(t, 9)
	nine.Target = Target{Database: "shop", Table: "nine"}
	for _, a := range []*Agreed{seven, nine} {
		if err := s.Put(a); err != nil {
			t.Fatal(err)
		}
	}
	both := snapshotFile(t, s)
	if err := s.Delete(9); err != nil {
		t.Fatal(err)
	}
	one := snapshotFile(t, s)
	r := newStore(dir)
	for _, snap := range [][]byte{both, one} {
		if err := r.readSnapshot(snap); err != nil {
			t.Fatal(err)
		}
	}
	if r.Get(9) != nil || len(r.OnTarget(nine.Target)) != 0 || r.Get(7) == nil {
		t.Fatalf("after reading the newer snapshot: oid 9 %v, on its target %d, oid 7 %v", r.Get(9) != nil, len(r.OnTarget(nine.Target)), r.Get(7) != nil)
	}
}
