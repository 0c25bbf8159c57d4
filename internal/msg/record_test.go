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

// render collects what an AppendStrings call emits, failing on a key
// emitted twice.
func render(t testing.TB, appendStrings func(func(k, v string))) map[string]string {
	t.Helper()
	m := map[string]string{}
	appendStrings(func(k, v string) {
		if _, dup := m[k]; dup {
			t.Errorf("key %s rendered twice", k)
		}
		m[k] = v
	})
	return m
}

// lookup is a get function over m.
func lookup(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// metaOf collects m's metadata.
func metaOf(m *service.Message) map[string]any {
	got := map[string]any{}
	_ = m.MetaWalkMut(func(k string, v any) error { got[k] = v; return nil })
	return got
}

// namesKey tells whether err is about key's malformed value.
func namesKey(err error, key string) bool {
	s := err.Error()
	return strings.HasPrefix(s, "metadata "+key+" ") || strings.HasPrefix(s, "metadata "+key+":")
}

var commitTime = time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.UTC)

func testRecord() *Record {
	return &Record{
		LSN: 0x1_0000_0028, Next: 0x1_0000_0060, XID: 1001, TopXID: 1000,
		Rmgr: wal.RmgrHeap, Info: wal.XLogHeapInsert | wal.XLogHeapInitPage, PGMajor: 15,
		Deferred: true,
		Tx: &Tx{TopXID: 1000, CommitLSN: 0x1_0000_0100, CommitNext: 0x1_0000_0130,
			FirstLSN: 0xFF00_0000, CommitTime: commitTime},
		Last: true, Seq: 42, Epoch: 3,
	}
}

// readBack is r as RecordFromStrings gives it back: without the
// descriptive resource manager and info.
func readBack(r *Record) Record {
	w := *r
	w.Rmgr, w.Info = 0, 0
	return w
}

func TestRecordStringsGolden(t *testing.T) {
	got := render(t, testRecord().AppendStrings)
	want := map[string]string{
		KeyWALLSN:        "1/00000028",
		KeyWALNextLSN:    "1/00000060",
		KeyWALXID:        "1001",
		KeyWALTopXID:     "1000",
		KeyWALRmgr:       "Heap",
		KeyWALRecordType: "INSERT+INIT",
		KeyPGMajor:       "15",
		KeyDeferred:      "true",
		KeyCommitLSN:     "1/00000100",
		KeyCommitNextLSN: "1/00000130",
		KeyTopXID:        "1000",
		KeyCommitTime:    "2024-05-06T07:08:09.123456789Z",
		KeyTxFirstLSN:    "0/FF000000",
		KeyTxLast:        "true",
		KeySeq:           "42",
		KeyEpoch:         "3",
	}
	if !maps.Equal(got, want) {
		t.Errorf("AppendStrings rendered\n%v\nwant\n%v", got, want)
	}
}

func TestRecordStringsOptionalKeys(t *testing.T) {
	// Zero optional fields render no key; an unknown major no record type.
	r := &Record{LSN: 0x28, Next: 0x60, Rmgr: wal.RmgrHeap, PGMajor: 14, Tx: &Tx{}}
	got := slices.Sorted(maps.Keys(render(t, r.AppendStrings)))
	want := []string{KeyWALLSN, KeyWALNextLSN, KeyWALXID, KeyWALRmgr, KeyPGMajor,
		KeyCommitLSN, KeyCommitNextLSN, KeyTopXID, KeyCommitTime, KeyTxFirstLSN, KeySeq, KeyEpoch}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("keys %v, want %v", got, want)
	}
	r.Tx = nil
	for _, k := range []string{KeyCommitLSN, KeyCommitNextLSN, KeyTopXID, KeyCommitTime, KeyTxFirstLSN} {
		if v, ok := render(t, r.AppendStrings)[k]; ok {
			t.Errorf("a record without Tx renders %s=%q", k, v)
		}
	}
}

func TestRecordStringsRoundTrip(t *testing.T) {
	for name, r := range map[string]*Record{
		"full": testRecord(),
		"zero": {PGMajor: 15, Tx: &Tx{CommitTime: time.Time{}}},
	} {
		got, err := RecordFromStrings(lookup(render(t, r.AppendStrings)))
		if err != nil {
			t.Fatalf("%s: RecordFromStrings: %v", name, err)
		}
		if want := readBack(r); !reflect.DeepEqual(*got, want) {
			t.Errorf("%s: read back %+v (tx %+v)\nwant %+v (tx %+v)", name, *got, *got.Tx, want, *want.Tx)
		}
	}
}

func TestRecordFromStringsMissing(t *testing.T) {
	for _, key := range []string{KeyWALLSN, KeyWALNextLSN, KeyPGMajor, KeyCommitLSN, KeyCommitNextLSN,
		KeyTopXID, KeyCommitTime, KeySeq, KeyEpoch} {
		m := render(t, testRecord().AppendStrings)
		delete(m, key)
		r, err := RecordFromStrings(lookup(m))
		if err == nil {
			t.Errorf("without %s: got %+v, want an error", key, r)
		} else if !strings.Contains(err.Error(), "message without "+key+" metadata") {
			t.Errorf("without %s: error %q does not name the key", key, err)
		}
	}
	// The optional ones may go.
	m := render(t, testRecord().AppendStrings)
	for _, k := range []string{KeyWALXID, KeyWALTopXID, KeyWALRmgr, KeyWALRecordType, KeyDeferred, KeyTxFirstLSN, KeyTxLast} {
		delete(m, k)
	}
	if _, err := RecordFromStrings(lookup(m)); err != nil {
		t.Errorf("without the optional keys: %v", err)
	}
}

func TestRecordFromStringsMalformed(t *testing.T) {
	for key, v := range map[string]string{
		KeyWALLSN:        "1-28",
		KeyWALNextLSN:    "1/100000000",
		KeyWALXID:        "-1",
		KeyWALTopXID:     "4294967296",
		KeyPGMajor:       "fifteen",
		KeyCommitLSN:     "",
		KeyCommitNextLSN: "x/0",
		KeyTopXID:        "1e3",
		KeyCommitTime:    "2024-05-06 07:08:09",
		KeyTxFirstLSN:    "/",
		KeySeq:           "18446744073709551616",
		KeyEpoch:         " 3",
	} {
		m := render(t, testRecord().AppendStrings)
		m[key] = v
		r, err := RecordFromStrings(lookup(m))
		if err == nil {
			t.Errorf("%s=%q: got %+v, want an error", key, v, r)
		} else if !namesKey(err, key) {
			t.Errorf("%s=%q: error %q does not name the key", key, v, err)
		}
	}
}

func TestSetRecord(t *testing.T) {
	r := testRecord()
	strs := render(t, r.AppendStrings)

	m := service.NewMessage(nil)
	SetRecord(m, r, false)
	if got := metaOf(m); len(got) != 1 || got[KeyRecord] != r {
		t.Errorf("SetRecord(all=false) set %v, want only %s", got, KeyRecord)
	}
	if got, err := RecordOf(m); err != nil || got != r {
		t.Errorf("RecordOf = %p, %v; want %p, nil", got, err, r)
	}

	m = service.NewMessage(nil)
	SetRecord(m, r, true)
	got := metaOf(m)
	if len(got) != len(strs)+1 || got[KeyRecord] != r {
		t.Errorf("SetRecord(all=true) set %d keys (typed %v), want %d and the typed one", len(got), got[KeyRecord], len(strs))
	}
	for k, v := range strs {
		if s, ok := m.MetaGet(k); !ok || s != v {
			t.Errorf("SetRecord(all=true): %s=%q, %t; want %q", k, s, ok, v)
		}
	}
	if got, err := RecordOf(m); err != nil || got != r {
		t.Errorf("RecordOf = %p, %v; want %p, nil", got, err, r)
	}
}

func TestRecordOfStrings(t *testing.T) {
	r := testRecord()
	m := service.NewMessage(nil)
	for k, v := range render(t, r.AppendStrings) {
		m.MetaSet(k, v)
	}
	for _, typed := range []any{nil, "not a record", Record{}} {
		if typed != nil {
			m.MetaSetMut(KeyRecord, typed)
		}
		got, err := RecordOf(m)
		if err != nil {
			t.Fatalf("typed %#v: RecordOf: %v", typed, err)
		}
		if got == r || !reflect.DeepEqual(*got, readBack(r)) {
			t.Errorf("typed %#v: RecordOf = %+v, want a parsed %+v", typed, got, readBack(r))
		}
	}
	if got, err := RecordOf(service.NewMessage(nil)); err == nil {
		t.Errorf("RecordOf(no metadata) = %+v, want an error", got)
	}
}

func FuzzRecordStrings(f *testing.F) {
	f.Add(uint64(0x1_0000_0028), uint64(0x1_0000_0060), uint32(1001), uint32(1000), uint8(wal.RmgrHeap), uint8(0x80),
		15, true, true, uint32(1000), uint64(0x1_0000_0100), uint64(0x1_0000_0130), uint64(0xFF00_0000),
		commitTime.UnixNano(), uint64(42), uint64(3))
	f.Add(uint64(0), uint64(0), uint32(0), uint32(0), uint8(255), uint8(0xFF), 99, false, false, uint32(0),
		uint64(0), uint64(0), uint64(0), int64(-1<<63), uint64(1<<64-1), uint64(1<<64-1))
	f.Fuzz(func(t *testing.T, lsn, next uint64, xid, top uint32, rmgr, info uint8, major int, deferred, last bool,
		txTop uint32, commit, commitNext, first uint64, nanos int64, seq, epoch uint64) {
		if major < 10 || major > 99 {
			major = 10 + int(uint(major)%90)
		}
		r := &Record{
			LSN: wal.LSN(lsn), Next: wal.LSN(next), XID: xid, TopXID: top,
			Rmgr: wal.RmgrID(rmgr), Info: info, PGMajor: major, Deferred: deferred,
			Tx: &Tx{TopXID: txTop, CommitLSN: wal.LSN(commit), CommitNext: wal.LSN(commitNext),
				FirstLSN: wal.LSN(first), CommitTime: time.Unix(0, nanos).UTC()},
			Last: last, Seq: seq, Epoch: epoch,
		}
		got, err := RecordFromStrings(lookup(render(t, r.AppendStrings)))
		if err != nil {
			t.Fatalf("RecordFromStrings(%+v): %v", r, err)
		}
		if want := readBack(r); !reflect.DeepEqual(*got, want) {
			t.Errorf("read back %+v (tx %+v)\nwant %+v (tx %+v)", *got, *got.Tx, want, *want.Tx)
		}
	})
}
