package clickhouse

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/statefile"
)

// The golden baseline files: baseline_v3.json is the snapshot the store
// writes for goldenAgreements (go test ./internal/clickhouse -run
// TestBaselineGolden -update rewrites it); baseline_v2.json and
// baseline_v1.json are what the store wrote for them before the journal
// and before the statefile envelope, and are never rewritten.
const (
	goldenV3 = "testdata/baseline_v3.json"
	goldenV2 = "testdata/baseline_v2.json"
	goldenV1 = "testdata/baseline_v1.json"
)

// snapshotFile compacts s's journal into its file and returns the file.
func snapshotFile(t testing.TB, s *Store) []byte {
	t.Helper()
	s.mu.Lock()
	body, err := s.snapshotBody()
	if err == nil {
		err = s.j.Compact(body)
	}
	s.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(s.path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func strPtr(s string) *string { return &s }

// goldenAgreements are the two agreements of the golden baseline files:
// between them every field of Agreed, desclog.Column, MappedColumn,
// ColumnSpec, ColumnType and Target is set (TestGoldenAgreementsCoverEveryField).
func goldenAgreements() []*Agreed {
	keyed := &Agreed{
		Oid: 16384, DbOid: 5, Schema: "public", Table: "orders", ValidFrom: 0x16B3748,
		Shape: []desclog.Column{
			{Num: 1, Name: "id", TypeOid: 20, TypMod: -1, TypeName: "bigint", TypeKind: 'b', NotNull: true, ByVal: true, Len: 8, Align: 'd', Storage: 'p'},
			{Num: 2, Name: "price", TypeOid: 1700, TypMod: 655366, TypeName: "numeric(10,2)", TypeKind: 'b', Len: -1, Align: 'i', Storage: 'm'},
			{Num: 3, Name: "........pg.dropped.3........", TypeOid: 0, TypMod: -1, Dropped: true, Len: 4, Align: 'i', Storage: 'p'},
			{Num: 4, Name: "tags", TypeOid: 1009, TypMod: -1, TypeName: "text[]", TypeKind: 'b', ElemTypeOid: 25, Len: -1, Align: 'i', Storage: 'x'},
			{Num: 5, Name: "born", TypeOid: 1082, TypMod: -1, TypeName: "date", TypeKind: 'b', ByVal: true, Len: 4, Align: 'i', Storage: 'p', HasMissing: true, Missing: strPtr("2020-01-02")},
			{Num: 6, Name: "note", TypeOid: 25, TypMod: -1, TypeName: "text", TypeKind: 'b', Len: -1, Align: 'i', Storage: 'x', HasMissing: true, Missing: strPtr("")},
			{Num: 7, Name: "gone", TypeOid: 25, TypMod: -1, TypeName: "text", TypeKind: 'b', Len: -1, Align: 'i', Storage: 'x', HasMissing: true},
			{Num: 8, Name: "email", TypeOid: 16500, TypMod: -1, TypeName: "email_address", TypeKind: 'd', BaseTypeOid: 25, Len: -1, Align: 'i', Storage: 'x'},
		},
		KeyAttnums: []int16{1},
		Target:     Target{Database: "shop", Table: "public.orders"},
		Columns: []MappedColumn{
			{Attnum: 1, Source: "id", Key: true, Spec: ColumnSpec{Name: "id", Type: ColumnType{Type: "Int64", Repr: ReprInt}}},
			{Attnum: 2, Source: "price", Spec: ColumnSpec{Name: "price", Nullable: true, Type: ColumnType{Type: "Decimal(10, 2)", Repr: ReprDecimal, Precision: 10, Scale: 2}}},
			{Attnum: 4, Source: "tags", Spec: ColumnSpec{Name: "labels", Type: ColumnType{Type: "Array(Nullable(String))", Repr: ReprArray, Elem: &ColumnType{Type: "String", Repr: ReprString}}}},
			{Attnum: 5, Source: "born", Spec: ColumnSpec{Name: "born", Default: "-18262", Type: ColumnType{Type: "Int32", Repr: ReprUnixDays}}},
			{Attnum: 6, Source: "note", Spec: ColumnSpec{Name: "note", Nullable: true, Default: "''", Type: ColumnType{Type: "String", Repr: ReprString}}},
			{Attnum: 8, Source: "email", Spec: ColumnSpec{Name: "email", Nullable: true, Type: ColumnType{Type: "String", Repr: ReprString, Reason: "domain email_address over an unmapped type"}}},
		},
		OrderBy:      []string{"id"},
		Left:         true,
		Filenode:     16391,
		FilenodeFrom: 0x16B0000, RefilledFile: 16403, RefilledBefore: 0x16B8000,
	}
	dropped := &Agreed{
		Oid: 16400, DbOid: 5, Schema: "audit", Table: "events", ValidFrom: 0x2000028,
		Shape: []desclog.Column{
			{Num: 1, Name: "at", TypeOid: 1184, TypMod: -1, TypeName: "timestamp with time zone", TypeKind: 'b', NotNull: true, ByVal: true, Len: 8, Align: 'd', Storage: 'p'},
			{Num: 2, Name: "payload", TypeOid: 17, TypMod: -1, TypeName: "bytea", TypeKind: 'b', Len: -1, Align: 'i', Storage: 'x'},
		},
		Target: Target{Database: "shop", Table: "audit.events"},
		Columns: []MappedColumn{
			{Attnum: 1, Source: "at", Spec: ColumnSpec{Name: "at", Type: ColumnType{Type: "Int64", Repr: ReprUnixMicros}}},
			{Attnum: 2, Source: "payload", Spec: ColumnSpec{Name: "payload", Nullable: true, Type: ColumnType{Type: "String", Repr: ReprBytes}}},
		},
		Dropped: true,
	}
	return []*Agreed{keyed, dropped}
}

// TestGoldenAgreementsCoverEveryField checks that every field of the
// types a baseline stores is set somewhere in goldenAgreements, so that the
// round trip and golden tests below cover a field added later.
func TestGoldenAgreementsCoverEveryField(t *testing.T) {
	tracked := map[reflect.Type]map[string]bool{}
	for _, v := range []any{Agreed{}, desclog.Column{}, MappedColumn{}, ColumnSpec{}, ColumnType{}, Target{}} {
		tracked[reflect.TypeOf(v)] = map[string]bool{}
	}
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Slice:
			for i := 0; i < v.Len(); i++ {
				walk(v.Index(i))
			}
		case reflect.Struct:
			set, ok := tracked[v.Type()]
			for i := 0; i < v.NumField(); i++ {
				if ok && !v.Field(i).IsZero() {
					set[v.Type().Field(i).Name] = true
				}
				walk(v.Field(i))
			}
		}
	}
	golden := goldenAgreements()
	walk(reflect.ValueOf(golden))
	for typ, set := range tracked {
		for i := 0; i < typ.NumField(); i++ {
			if name := typ.Field(i).Name; !set[name] {
				t.Errorf("no golden agreement sets %s.%s: set it in goldenAgreements and run TestBaselineGolden with -update", typ, name)
			}
		}
	}
	// Missing's three cases: a value, an empty string, NULL (nil).
	shape := golden[0].Shape
	if c := shape[4]; !c.HasMissing || c.Missing == nil || *c.Missing == "" {
		t.Errorf("column %d: want a missing value", c.Num)
	}
	if c := shape[5]; !c.HasMissing || c.Missing == nil || *c.Missing != "" {
		t.Errorf("column %d: want an empty missing value", c.Num)
	}
	if c := shape[6]; !c.HasMissing || c.Missing != nil {
		t.Errorf("column %d: want a NULL missing value", c.Num)
	}
}

func TestStoreRoundTripEveryField(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := goldenAgreements()
	for i := len(want) - 1; i >= 0; i-- {
		if err := s.Put(want[i]); err != nil {
			t.Fatal(err)
		}
	}
	reopened, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := reopened.All(); !reflect.DeepEqual(got, want) {
		t.Fatalf("reopened All:\n%s\nwant\n%s", dump(got), dump(want))
	}
	got, err := ReadAgreed(dir)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("ReadAgreed: %v\n%s\nwant\n%s", err, dump(got), dump(want))
	}
	// Deleting every agreement leaves an empty store, not a broken file.
	for _, a := range want {
		if err := reopened.Delete(a.Oid); err != nil {
			t.Fatal(err)
		}
	}
	empty, err := OpenStore(dir)
	if err != nil || len(empty.All()) != 0 {
		t.Fatalf("store with every agreement deleted: %v, %d agreements", err, len(empty.All()))
	}
}

func TestBaselineGolden(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := goldenAgreements()
	for _, a := range want {
		if err := s.Put(a); err != nil {
			t.Fatal(err)
		}
	}
	got := snapshotFile(t, s)
	if *update {
		if err := os.WriteFile(goldenV3, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	golden, err := os.ReadFile(goldenV3)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, golden) {
		t.Fatalf("the store writes\n%s\nwant %s (rerun with -update if the change is intended, and bump the version if it is not one this walshadow's readers accept)", got, goldenV3)
	}
	// Version 2, the file an older walshadow rewrote whole on every
	// change, reads as the same agreements, and its next change rewrites it
	// as version 3.
	v2, err := os.ReadFile(goldenV2)
	if err != nil {
		t.Fatal(err)
	}
	old := t.TempDir()
	if err := os.WriteFile(statefile.OutputDir(old).Baseline(), v2, 0o600); err != nil {
		t.Fatal(err)
	}
	upgraded, err := OpenStore(old)
	if err != nil {
		t.Fatal(err)
	}
	if all := upgraded.All(); !reflect.DeepEqual(all, want) {
		t.Fatalf("%s reads as\n%s\nwant\n%s", goldenV2, dump(all), dump(want))
	}
	if err := upgraded.Put(want[0]); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(statefile.OutputDir(old).Baseline()); !bytes.Equal(after, golden) {
		t.Fatalf("a changed %s is not rewritten as %s:\n%s", goldenV2, goldenV3, after)
	}
	// The golden file, read by itself, gives back the agreements.
	again := t.TempDir()
	if err := os.WriteFile(statefile.OutputDir(again).Baseline(), golden, 0o600); err != nil {
		t.Fatal(err)
	}
	reopened, err := OpenStore(again)
	if err != nil {
		t.Fatal(err)
	}
	if all := reopened.All(); !reflect.DeepEqual(all, want) {
		t.Fatalf("%s reads as\n%s\nwant\n%s", goldenV3, dump(all), dump(want))
	}
}

func TestBaselineReadsV1(t *testing.T) {
	v1, err := os.ReadFile(goldenV1)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(v1, []byte(`{"format":1,"crc32c":`)) || bytes.Count(v1, []byte("\n")) != 1 {
		t.Fatalf("%s is not in the version 1 form: %.80s", goldenV1, v1)
	}
	dir := t.TempDir()
	path := statefile.OutputDir(dir).Baseline()
	if err := os.WriteFile(path, v1, 0o600); err != nil {
		t.Fatal(err)
	}
	want := goldenAgreements()
	for _, a := range want {
		// Fields added to version 2 after version 1 was left behind.
		a.RefilledFile, a.RefilledBefore = 0, 0
	}
	got, err := ReadAgreed(dir)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("ReadAgreed of version 1: %v\n%s\nwant\n%s", err, dump(got), dump(want))
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, v1) {
		t.Fatal("ReadAgreed rewrote the file")
	}
	s, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if all := s.All(); !reflect.DeepEqual(all, want) {
		t.Fatalf("OpenStore of version 1:\n%s\nwant\n%s", dump(all), dump(want))
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, v1) {
		t.Fatal("OpenStore rewrote the file")
	}

	// The next Put writes the envelope.
	changed := want[1].Clone()
	changed.Left, changed.ValidFrom = true, 0x3000000
	if err := s.Put(changed); err != nil {
		t.Fatal(err)
	}
	want[1] = changed
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var body baselineBody
	if err := baselineSpec.Decode(path, data, &body, nil); err != nil {
		t.Fatalf("after a Put the file is not in the envelope: %v\n%.200s", err, data)
	}
	if len(body.Agreed) != 2 || body.Agreed[0].Shape[0].Name != "id" || body.Agreed[0].Target.Database != "shop" {
		t.Fatalf("envelope body: %s", data)
	}
	reopened, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if all := reopened.All(); !reflect.DeepEqual(all, want) {
		t.Fatalf("reopened after the upgrade:\n%s\nwant\n%s", dump(all), dump(want))
	}
}

func TestBaselineV1Corruption(t *testing.T) {
	v1, err := os.ReadFile(goldenV1)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Format int             `json:"format"`
		CRC32C uint32          `json:"crc32c"`
		Agreed json.RawMessage `json:"agreed"`
	}
	var entries []json.RawMessage
	if err := json.Unmarshal(v1, &file); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(file.Agreed, &entries); err != nil || len(entries) != 2 {
		t.Fatalf("%s: %v, %d entries", goldenV1, err, len(entries))
	}
	// encode writes agreed as the version 1 writer did.
	encode := func(agreed ...json.RawMessage) []byte {
		raw := []byte("[" + string(bytes.Join(toBytes(agreed), []byte(","))) + "]")
		return []byte(fmt.Sprintf(`{"format":1,"crc32c":%d,"agreed":%s}`+"\n", statefile.CRC(raw), raw))
	}
	if !bytes.Equal(encode(entries...), v1) {
		t.Fatalf("encode does not reproduce %s", goldenV1)
	}
	flipped := bytes.Replace(v1, []byte(`"schema":"audit"`), []byte(`"schema":"audiT"`), 1)
	if bytes.Equal(flipped, v1) {
		t.Fatal("test data lacks the schema")
	}
	dir := t.TempDir()
	path := statefile.OutputDir(dir).Baseline()
	// A field an older walshadow wrote inside an agreement, checksummed
	// right, is read past as the version 1 reader did.
	if err := os.WriteFile(path, encode(append(json.RawMessage(`{"extra":1,`), entries[0][1:]...)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadAgreed(dir); err != nil {
		t.Errorf("version 1 agreement with a field this walshadow does not know: %v", err)
	}
	for _, tc := range []struct {
		name      string
		data      []byte
		truncated bool
		want      string
	}{
		{"bit flip", flipped, false, "checksum mismatch"},
		{"truncated", v1[:len(v1)/2], true, "unexpected end of JSON input"},
		{"future format", bytes.Replace(v1, []byte(`{"format":1,`), []byte(`{"format":2,`), 1), false, "format 2, this walshadow reads format 1"},
		{"null entry", encode(entries[0], json.RawMessage("null")), false, "entry 1 is null"},
		{"duplicate oid", encode(entries[0], entries[0]), false, "relation oid 16384 appears twice"},
		{"trailing field", bytes.Replace(v1, []byte("}\n"), []byte(`,"more":1}`+"\n"), 1), false, `unknown field "more"`},
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
			}
		})
	}
}

func toBytes(raw []json.RawMessage) [][]byte {
	out := make([][]byte, len(raw))
	for i, r := range raw {
		out[i] = r
	}
	return out
}

// dump is agreements as JSON, for failure messages.
func dump(list []*Agreed) string {
	b, _ := json.MarshalIndent(list, "", "  ")
	return string(b)
}
