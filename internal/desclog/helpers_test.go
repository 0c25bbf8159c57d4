package desclog

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/walshadow/walshadow/internal/wal"
)

const (
	testDB  = 5
	testSpc = 1663
)

var testID = Identity{PGMajor: 15, SystemID: 7300000000000000001, Timeline: 1, DbOid: testDB, SegmentSize: 16 << 20}

// Type oids the helpers know the storage of.
const (
	typBool    = 16
	typInt8    = 20
	typInt4    = 23
	typText    = 25
	typVarchar = 1043
	typNumeric = 1700
)

func col(num int16, name string, typ uint32) Column {
	c := Column{Num: num, Name: name, TypeOid: typ, TypMod: -1, TypeKind: 'b'}
	switch typ {
	case typBool:
		c.Len, c.Align, c.ByVal, c.Storage, c.TypeName = 1, 'c', true, 'p', "boolean"
	case typInt4:
		c.Len, c.Align, c.ByVal, c.Storage, c.TypeName = 4, 'i', true, 'p', "integer"
	case typInt8:
		c.Len, c.Align, c.ByVal, c.Storage, c.TypeName = 8, 'd', true, 'p', "bigint"
	case typText:
		c.Len, c.Align, c.Storage, c.TypeName = -1, 'i', 'x', "text"
	case typVarchar:
		c.Len, c.Align, c.Storage, c.TypeName = -1, 'i', 'x', "character varying"
	case typNumeric:
		c.Len, c.Align, c.Storage, c.TypeName = -1, 'i', 'm', "numeric"
	default:
		panic("helpers: unknown type")
	}
	return c
}

func notNull(c Column) Column { c.NotNull = true; return c }

func withMissing(c Column, v string) Column { c.HasMissing, c.Missing = true, &v; return c }

func droppedCol(c Column) Column {
	c.Dropped, c.TypeOid, c.Name, c.TypeName, c.NotNull = true, 0, "........pg.dropped."+string(rune('0'+c.Num))+"........", "", false
	return c
}

func rfn(relnum uint32) wal.RelFileNode {
	return wal.RelFileNode{SpcOid: testSpc, DbOid: testDB, RelNum: relnum}
}

func table(oid, relnum uint32, name string, cols ...Column) Descriptor {
	return Descriptor{
		Oid: oid, DbOid: testDB, Rfn: rfn(relnum), NamespaceOid: 2200, Namespace: "public", Name: name,
		Kind: 'r', Persistence: 'p', ReplIdent: 'd', Columns: cols,
	}
}

func toastOf(oid, relnum, owner uint32) Descriptor {
	d := table(oid, relnum, "pg_toast_"+itoa(owner), col(1, "chunk_id", typInt4), col(2, "chunk_seq", typInt4), col(3, "chunk_data", typText))
	d.Kind, d.Namespace, d.NamespaceOid, d.ReplIdent = 't', "pg_toast", 99, 'n'
	return d
}

func itoa(v uint32) string {
	var b []byte
	for {
		b = append([]byte{byte('0' + v%10)}, b...)
		v /= 10
		if v == 0 {
			return string(b)
		}
	}
}

// seededLog opens a fresh log in a temp dir seeded with descs at horizon
// 0x1000 (valid from 0x800).
func seededLog(t testing.TB, descs ...Descriptor) *Log {
	t.Helper()
	l, err := Open(t.TempDir(), testID)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if _, err := l.Seed(0x1000, 0x800, descs); err != nil {
		t.Fatal(err)
	}
	return l
}

// captureAppend captures and appends one boundary, failing the test on
// error, and checks that replaying the stored batch re-derives the same
// events.
func captureAppend(t testing.TB, l *Log, b BoundaryInput, fetched ...Descriptor) (*Batch, []Event) {
	t.Helper()
	if plan, _, err := l.PlanBoundary(b.NextLSN, b.NextLSN); err != nil || plan != PlanCapture {
		t.Fatalf("plan at %s = %s, %v; want capture", b.NextLSN, plan, err)
	}
	batch, events, err := Capture(l, b, fetched)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Append(batch); err != nil {
		t.Fatal(err)
	}
	plan, stored, err := l.PlanBoundary(b.NextLSN, b.NextLSN+0x1000)
	if err != nil || plan != PlanReplay || stored != batch {
		t.Fatalf("plan after append at %s = %s, %v", b.NextLSN, plan, err)
	}
	if replayed := l.ReplayEvents(stored); !reflect.DeepEqual(replayed, events) {
		t.Fatalf("replayed events differ:\n got %+v\nwant %+v", replayed, events)
	}
	return batch, events
}

func markers(m map[wal.RelFileNode]wal.LSN) func(wal.RelFileNode) (wal.LSN, bool) {
	return func(r wal.RelFileNode) (wal.LSN, bool) { l, ok := m[r]; return l, ok }
}

func touches(m map[uint32]wal.LSN) func(uint32) (wal.LSN, bool) {
	return func(o uint32) (wal.LSN, bool) { l, ok := m[o]; return l, ok }
}

// content is the log's batches encoded in order: what "identical content"
// compares.
func content(l *Log) []byte {
	var out []byte
	for _, b := range l.snap.Load().batches {
		out = appendFrame(out, appendBatch(nil, b))
	}
	return out
}

func sameContent(t testing.TB, want, got []byte, what string) {
	t.Helper()
	if !bytes.Equal(want, got) {
		t.Fatalf("%s: content differs (%d vs %d bytes)", what, len(want), len(got))
	}
}

func mustLookup(t testing.TB, got Lookup, want Result) Lookup {
	t.Helper()
	if got.Result != want {
		t.Fatalf("lookup = %s (valid from %s, interval %s), want %s", got.Result, got.ValidFrom, got.Interval, want)
	}
	return got
}
