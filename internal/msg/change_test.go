package msg

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/walshadow/walshadow/internal/wal"
)

// changeTx is a transaction as a change carries it: ChangeFromStrings
// reads back only the top xid, commit LSN and commit time.
func changeTx() *Tx { return &Tx{TopXID: 1000, CommitLSN: 0x1_0000_0100, CommitTime: commitTime} }

func testUpdate() *Change {
	return &Change{
		Op: OperationUpdate, Rel: &Relation{Schema: "public", Table: "t", Oid: 16384, Key: []string{"id", "k"}},
		LSN: 0x1_0000_0028, Tx: changeTx(), DescVersion: 0x0100_0000,
		TID: TID{7, 3}, OldTID: TID{7, 1}, Filenode: 16390, RecordIndex: 2, KeyChanged: true,
		UnchangedToast: []string{"a", "b"}, Epoch: 7,
	}
}

func testEvent() *Change {
	return &Change{
		Op: OperationSchema, Event: "changed", Rel: &Relation{Schema: "public", Table: "t", Oid: 16384, Key: []string{"id"}},
		LSN: 0x1_0000_0028, Tx: &Tx{CommitLSN: 0x1_0000_0100}, DescVersion: 0x1_0000_0028, RecordIndex: -1,
		Rewritten: true, Filenode: 16401,
	}
}

func testFail() *Change {
	return &Change{
		Op: OperationFail, Rel: &Relation{Schema: "public", Table: "t", Oid: 16384},
		LSN: 0x1_0000_0028, Tx: &Tx{CommitLSN: 0x1_0000_0100}, RecordIndex: -1,
		Error: `at 1/00000028: relation public.t: column "c": bad numeric`,
	}
}

func renderChange(t testing.TB, c *Change, all bool) map[string]string {
	t.Helper()
	return render(t, func(f func(k, v string)) { c.AppendStrings(all, f) })
}

func TestChangeStringsGolden(t *testing.T) {
	got := renderChange(t, testUpdate(), true)
	want := map[string]string{
		KeyOperation:      "update",
		KeySchema:         "public",
		KeyTable:          "t",
		KeyRelationOid:    "16384",
		KeyKey:            "id,k",
		KeyLSN:            "1/00000028",
		KeyCommitLSN:      "1/00000100",
		KeyXID:            "1000",
		KeyCommitTime:     "2024-05-06T07:08:09.123456789Z",
		KeyDescVersion:    "0/01000000",
		KeyTID:            "7:3",
		KeyOldTID:         "7:1",
		KeyFilenode:       "16390",
		KeyUnchangedToast: "a,b",
		KeyRecordIndex:    "2",
		KeyKeyChanged:     "true",
		KeyEpoch:          "7",
	}
	if !maps.Equal(got, want) {
		t.Errorf("AppendStrings(true) rendered\n%v\nwant\n%v", got, want)
	}
}

func TestChangeStringsRoundTrip(t *testing.T) {
	noShape := testEvent()
	noShape.Event, noShape.Rel = "dropped", &Relation{Oid: 16384}
	for name, c := range map[string]*Change{
		"update":   testUpdate(),
		"insert":   {Op: OperationInsert, Rel: &Relation{Schema: "s", Table: "t", Oid: 1}, Tx: changeTx(), TID: TID{0, 1}, RecordIndex: 0},
		"truncate": {Op: OperationTruncate, Event: EventTruncate, Rel: &Relation{Schema: "s", Table: "t", Oid: 1}, Tx: changeTx(), RecordIndex: -1},
		"event":    testEvent(),
		"no shape": noShape,
		"fail":     testFail(),
	} {
		got, err := ChangeFromStrings(lookup(renderChange(t, c, true)))
		if err != nil {
			t.Errorf("%s: ChangeFromStrings: %v", name, err)
			continue
		}
		if !reflect.DeepEqual(got, c) {
			t.Errorf("%s: read back %+v (rel %+v, tx %+v)\nwant %+v (rel %+v, tx %+v)", name, *got, *got.Rel, *got.Tx, *c, *c.Rel, *c.Tx)
		}
	}
}

func TestChangeStringsRouting(t *testing.T) {
	for _, c := range []struct {
		name string
		c    *Change
		want []string
	}{
		{"update", testUpdate(), []string{KeyOperation, KeySchema, KeyTable, KeyLSN, KeyCommitLSN}},
		{"event", testEvent(), []string{KeyOperation, KeyEvent, KeySchema, KeyTable, KeyLSN, KeyCommitLSN}},
		{"fail", testFail(), []string{KeyOperation, KeySchema, KeyTable, KeyLSN, KeyCommitLSN}},
	} {
		got := slices.Sorted(maps.Keys(renderChange(t, c.c, false)))
		slices.Sort(c.want)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: AppendStrings(false) rendered %v, want %v", c.name, got, c.want)
		}
		var routing []string
		for k := range renderChange(t, c.c, true) {
			if Routing(k) {
				routing = append(routing, k)
			}
		}
		if slices.Sort(routing); !slices.Equal(got, routing) {
			t.Errorf("%s: AppendStrings(false) rendered %v, AppendStrings(true) has routing keys %v", c.name, got, routing)
		}
	}
	for _, k := range []string{KeyXID, KeyRelationOid, KeyTID, KeyError, KeyEpoch, KeyKey} {
		if Routing(k) {
			t.Errorf("Routing(%s) = true, want false", k)
		}
	}
}

func TestChangeStringsNoShape(t *testing.T) {
	c := testEvent()
	c.Event, c.Rel = "dropped", &Relation{Oid: 16384, Key: []string{"id"}}
	got := renderChange(t, c, true)
	for _, k := range []string{KeySchema, KeyTable, KeyKey} {
		if v, ok := got[k]; ok {
			t.Errorf("an event of a relation with no shape renders %s=%q", k, v)
		}
	}
	if got[KeyRelationOid] != "16384" || got[KeyEvent] != "dropped" {
		t.Errorf("rendered %v, want relation oid 16384 and event dropped", got)
	}
}

func TestChangeFromStringsEventNeedsNoTx(t *testing.T) {
	for _, c := range []*Change{testEvent(), testFail()} {
		m := renderChange(t, c, true)
		delete(m, KeyXID)
		delete(m, KeyCommitTime)
		delete(m, KeyDescVersion)
		delete(m, KeyEpoch)
		got, err := ChangeFromStrings(lookup(m))
		if err != nil {
			t.Errorf("%s without xid, commit time, descriptor version: %v", c.Op, err)
			continue
		}
		want := *c
		want.DescVersion = 0
		if !reflect.DeepEqual(*got, want) {
			t.Errorf("%s: read back %+v, want %+v", c.Op, *got, want)
		}
	}
}

func TestChangeFromStringsMissing(t *testing.T) {
	for _, c := range []struct {
		c    *Change
		keys []string
	}{
		{testUpdate(), []string{KeyOperation, KeyRelationOid, KeyLSN, KeyCommitLSN, KeyXID, KeyCommitTime, KeyDescVersion}},
		{testEvent(), []string{KeyOperation, KeyRelationOid, KeyLSN, KeyCommitLSN}},
	} {
		for _, key := range c.keys {
			m := renderChange(t, c.c, true)
			delete(m, key)
			got, err := ChangeFromStrings(lookup(m))
			if err == nil {
				t.Errorf("%s without %s: got %+v, want an error", c.c.Op, key, got)
				continue
			}
			if s := err.Error(); !strings.Contains(s, "message without "+key+" metadata") ||
				!strings.Contains(s, "is walshadow_decode before this output?") {
				t.Errorf("%s without %s: error %q", c.c.Op, key, s)
			}
		}
	}
}

func TestChangeFromStringsMalformed(t *testing.T) {
	for key, v := range map[string]string{
		KeyRelationOid: "4294967296",
		KeyLSN:         "0/",
		KeyCommitLSN:   "zz/0",
		KeyXID:         "-5",
		KeyCommitTime:  "today",
		KeyDescVersion: "1",
		KeyTID:         "7:0",
		KeyOldTID:      "07:1",
		KeyFilenode:    "x",
		KeyRecordIndex: "-1",
		KeyEpoch:       "0x7",
	} {
		m := renderChange(t, testUpdate(), true)
		m[key] = v
		got, err := ChangeFromStrings(lookup(m))
		if err == nil {
			t.Errorf("%s=%q: got %+v, want an error", key, v, got)
		} else if !namesKey(err, key) || !strings.HasSuffix(err.Error(), "(is walshadow_decode before this output?)") {
			t.Errorf("%s=%q: error %q does not name the key", key, v, err)
		}
	}
}

func TestChangeOf(t *testing.T) {
	c := testUpdate()
	m := service.NewMessage(nil)
	m.MetaSetMut(KeyChange, c)
	if got, err := ChangeOf(m); err != nil || got != c {
		t.Errorf("ChangeOf(typed) = %p, %v; want %p, nil", got, err, c)
	}

	m = service.NewMessage(nil)
	for k, v := range renderChange(t, c, true) {
		m.MetaSet(k, v)
	}
	for _, typed := range []any{nil, "not a change", Change{}} {
		if typed != nil {
			m.MetaSetMut(KeyChange, typed)
		}
		got, err := ChangeOf(m)
		if err != nil {
			t.Fatalf("typed %#v: ChangeOf: %v", typed, err)
		}
		if got == c || !reflect.DeepEqual(got, c) {
			t.Errorf("typed %#v: ChangeOf = %+v, want a parsed %+v", typed, got, c)
		}
	}
	if got, err := ChangeOf(service.NewMessage(nil)); err == nil {
		t.Errorf("ChangeOf(no metadata) = %+v, want an error", got)
	}
}

// names is up to two of a and b, nil for none; ok is false when a name
// is empty or has a comma (a comma-joined list cannot carry it).
func names(n uint8, a, b string) (l []string, ok bool) {
	l = []string{a, b}[:n%3]
	for _, s := range l {
		if s == "" || strings.Contains(s, ",") {
			return nil, false
		}
	}
	if len(l) == 0 {
		l = nil
	}
	return l, true
}

func FuzzChangeStrings(f *testing.F) {
	f.Add(uint8(1), "", "", "public", "t", uint32(16384), uint8(2), "id", "k", uint64(0x1_0000_0028),
		uint32(1000), uint64(0x1_0000_0100), commitTime.UnixNano(), uint64(0x0100_0000),
		uint32(7), uint16(3), uint32(7), uint16(1), uint32(16390), int32(2), true, uint8(2), "a", "b", uint64(7))
	f.Add(uint8(4), "changed", "", "", "", uint32(1), uint8(0), "", "", uint64(0),
		uint32(0), uint64(0), int64(0), uint64(0),
		uint32(0), uint16(0), uint32(0), uint16(0), uint32(0), int32(-1), false, uint8(0), "", "", uint64(0))
	f.Add(uint8(5), "", "boom, at 0/0", "a,b", "c d", uint32(1<<32-1), uint8(1), "x y", "", uint64(1<<64-1),
		uint32(1<<32-1), uint64(1<<64-1), int64(-1<<63), uint64(1<<64-1),
		uint32(1<<32-1), uint16(1<<16-1), uint32(1), uint16(0), uint32(1<<32-1), int32(1<<31-1), true, uint8(1), "é", "", uint64(1<<64-1))
	ops := []string{OperationInsert, OperationUpdate, OperationDelete, OperationTruncate, OperationSchema, OperationFail}
	f.Fuzz(func(t *testing.T, op uint8, event, errText, schema, table string, oid uint32, nKey uint8, key1, key2 string,
		lsn uint64, xid uint32, commit uint64, nanos int64, desc uint64,
		block uint32, off uint16, oldBlock uint32, oldOff uint16, filenode uint32, index int32, keyChanged bool,
		nToast uint8, toast1, toast2 string, epoch uint64) {
		key, ok1 := names(nKey, key1, key2)
		toast, ok2 := names(nToast, toast1, toast2)
		if !ok1 || !ok2 {
			t.Skip("a name a comma-joined list cannot carry")
		}
		c := &Change{
			Op: ops[int(op)%len(ops)], Event: event, Error: errText,
			Rel: &Relation{Schema: schema, Table: table, Oid: oid, Key: key},
			LSN: wal.LSN(lsn), Tx: &Tx{TopXID: xid, CommitLSN: wal.LSN(commit), CommitTime: time.Unix(0, nanos).UTC()},
			DescVersion: wal.LSN(desc), TID: TID{block, off}, OldTID: TID{oldBlock, oldOff}, Filenode: filenode,
			RecordIndex: int(index), KeyChanged: keyChanged, Rewritten: keyChanged && op%2 == 0, UnchangedToast: toast, Epoch: epoch,
		}
		got, err := ChangeFromStrings(lookup(renderChange(t, c, true)))
		if err != nil {
			t.Fatalf("ChangeFromStrings(%+v): %v", c, err)
		}
		// What the strings cannot carry: a key without a shape, a TID
		// without an offset, a negative index other than -1.
		want := *c
		want.Rel = &Relation{Schema: schema, Table: table, Oid: oid, Key: key}
		if schema == "" && table == "" {
			want.Rel.Key = nil
		}
		if !want.TID.Valid() {
			want.TID = TID{}
		}
		if !want.OldTID.Valid() {
			want.OldTID = TID{}
		}
		if want.RecordIndex < 0 {
			want.RecordIndex = -1
		}
		if !reflect.DeepEqual(*got, want) {
			t.Errorf("read back %+v (rel %+v, tx %+v)\nwant %+v (rel %+v, tx %+v)", *got, *got.Rel, *got.Tx, want, *want.Rel, *want.Tx)
		}
	})
}

func TestStringsPrefersSetStrings(t *testing.T) {
	m := service.NewMessage(nil)
	c := testUpdate()
	m.MetaSetMut(KeyChange, c)
	m.MetaSetMut(KeyTable, "renamed_by_a_mapping")
	got := Strings(m)
	if got[KeyTable] != "renamed_by_a_mapping" {
		t.Errorf("%s = %q: the typed value overwrote the string set", KeyTable, got[KeyTable])
	}
	if got[KeyXID] != "1000" || got[KeyTID] != "7:3" {
		t.Errorf("typed keys not rendered: %v", got)
	}
	if _, ok := got[KeyChange]; ok {
		t.Errorf("the typed value itself is in the strings: %v", got)
	}
}
