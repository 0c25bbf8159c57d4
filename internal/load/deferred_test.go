package load

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/wal"
)

// heldLayout is a table (id, v, big) keyed by id, with _lsn and
// _is_deleted after it: rows are [id, v, big, _lsn, _is_deleted].
var heldLayout = &clickhouse.RowLayout{
	Cols: []clickhouse.ColumnSpec{
		{Name: "id", Type: clickhouse.ColumnType{Type: "Int32", Repr: clickhouse.ReprInt}},
		{Name: "v", Type: clickhouse.ColumnType{Type: "String", Repr: clickhouse.ReprString}},
		{Name: "big", Type: clickhouse.ColumnType{Type: "String", Repr: clickhouse.ReprString}, Nullable: true},
		{Name: "_lsn", Type: clickhouse.ColumnType{Type: "UInt64"}},
		{Name: "_is_deleted", Type: clickhouse.ColumnType{Type: "UInt8"}},
	},
	KeyIdx: []int{0},
	LSNIdx: 3,
	DelIdx: 4,
}

const loadLSN = 100 // the load's rows carry _lsn = S

func row(id int32, v string, big any, lsn uint64) []any { return []any{id, v, big, lsn, uint8(0)} }
func del(id int32, lsn uint64) []any                    { return []any{id, "", nil, lsn, uint8(1)} }

// heldUpdate is a held update of key from to a row of key to at lsn, its big
// column unchanged (not in the WAL).
func heldUpdate(from, to int32, v string, lsn wal.LSN) DeferredRow {
	return DeferredRow{Oid: 1, Row: row(to, v, nil, uint64(lsn)), Key: []any{from, nil, nil, nil, nil}, Want: []int{2}, LSN: lsn, Commit: lsn + 1, XID: 2000}
}

// storedOf indexes versions by their key, as completeDeferred hands them
// to completeHeld.
func storedOf(versions ...[]any) map[string][][]any {
	out := map[string][][]any{}
	for _, v := range versions {
		id := clickhouse.KeyIdentity(keyOf(heldLayout, v))
		out[id] = append(out[id], v)
	}
	return out
}

func rowsString(rows [][]any) string {
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "%v;", r)
	}
	return b.String()
}

// TestCompleteHeld: a held update takes its unchanged TOAST columns from
// the newest row of its old key strictly before its own LSN (never the
// delete half of its own key change); one superseded by a newer version
// of its own key is not written, yet a later held update still reads it.
func TestCompleteHeld(t *testing.T) {
	for _, tc := range []struct {
		name    string
		stored  map[string][][]any
		held    []DeferredRow
		want    string // the rows written
		wantErr string
		reload  bool // the error loads the table again
	}{{
		name:   "key change, its delete half at its own LSN",
		stored: storedOf(row(1, "a", "A", loadLSN), del(1, 200)),
		held:   []DeferredRow{heldUpdate(1, 2, "b", 200)},
		want:   "[2 b A 200 0];",
	}, {
		name:   "chain a->b, b->c",
		stored: storedOf(row(1, "a", "A", loadLSN), del(1, 200), del(2, 300)),
		held:   []DeferredRow{heldUpdate(1, 2, "b", 200), heldUpdate(2, 3, "c", 300)},
		want:   "[3 c A 300 0];", // b's row is superseded by b->c's delete half
	}, {
		name:   "key changed back a->b, b->a",
		stored: storedOf(row(1, "a", "A", loadLSN), del(1, 200), del(2, 300)),
		held:   []DeferredRow{heldUpdate(1, 2, "b", 200), heldUpdate(2, 1, "a again", 300)},
		want:   "[1 a again A 300 0];",
	}, {
		name:   "old key inserted again later",
		stored: storedOf(row(1, "a", "A", loadLSN), del(1, 200), row(1, "new a", "N", 400)),
		held:   []DeferredRow{heldUpdate(1, 2, "b", 200)},
		want:   "[2 b A 200 0];", // a newer version of the old key supersedes nothing
	}, {
		name:   "non-key updates, both held",
		stored: storedOf(row(1, "a", "A", loadLSN)),
		held:   []DeferredRow{heldUpdate(1, 1, "a1", 200), heldUpdate(1, 1, "a2", 300)},
		want:   "[1 a2 A 300 0];",
	}, {
		name:   "a held update of the key in between",
		stored: storedOf(row(1, "a", "A", loadLSN), row(1, "streamed", "S", 250)),
		held:   []DeferredRow{heldUpdate(1, 1, "a1", 200), heldUpdate(1, 1, "a2", 300)},
		want:   "[1 a2 S 300 0];", // the first is superseded by the streamed row
	}, {
		name:   "superseded by a streamed version",
		stored: storedOf(row(1, "a", "A", loadLSN), row(1, "full", "F", 300)),
		held:   []DeferredRow{heldUpdate(1, 1, "a1", 200)},
		want:   "",
	}, {
		name:   "superseded, its earlier row a delete",
		stored: storedOf(row(1, "a", "A", loadLSN), del(1, 150), row(1, "full", "F", 300)),
		held:   []DeferredRow{heldUpdate(1, 1, "a1", 200)},
		want:   "",
	}, {
		name:    "no earlier row",
		stored:  storedOf(del(1, 200)),
		held:    []DeferredRow{heldUpdate(1, 2, "b", 200)},
		wantErr: "neither the load nor the stream holds an earlier row of its key",
		reload:  true,
	}, {
		name:    "the newest earlier row is a delete",
		stored:  storedOf(row(1, "a", "A", loadLSN), del(1, 150)),
		held:    []DeferredRow{heldUpdate(1, 1, "a1", 200)},
		wantErr: "whose newest earlier row is a delete (at 0/00000096)",
	}, {
		name:    "the newest earlier row is a held update that could not be completed",
		stored:  storedOf(del(2, 300)),
		held:    []DeferredRow{heldUpdate(1, 2, "b", 200), heldUpdate(2, 3, "c", 300)},
		wantErr: "whose newest earlier row, the update at 0/000000C8, could not be completed",
		reload:  true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := completeHeld(heldLayout, tc.held, tc.stored)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tc.wantErr)
				}
				if errors.Is(err, errReload) != tc.reload {
					t.Errorf("error %v: reloads %v, want %v", err, errors.Is(err, errReload), tc.reload)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := rowsString(out); got != tc.want {
				t.Errorf("wrote %s, want %s", got, tc.want)
			}
		})
	}
}

// stagingConn is a staging table: rows in parts, LookupVersions reading
// every part, Insert adding one. merge collapses each key to its newest
// version, as a ReplacingMergeTree's merge does.
type stagingConn struct {
	Conn // (the rest is not used)
	rows [][]any
}

func (s *stagingConn) LookupVersions(_ context.Context, _ clickhouse.Target, key []clickhouse.ColumnSpec, keys [][]any, want []clickhouse.ColumnSpec) ([][][]any, error) {
	if len(key) != 1 || len(want) != len(heldLayout.Cols) {
		return nil, fmt.Errorf("lookup of %d key columns for %d columns", len(key), len(want))
	}
	out := make([][][]any, len(keys))
	for i, k := range keys {
		for _, r := range s.rows {
			if r[0] == k[0] {
				out[i] = append(out[i], r)
			}
		}
	}
	return out, nil
}

func (s *stagingConn) Insert(_ context.Context, _ clickhouse.Target, _ []clickhouse.ColumnSpec, rows [][]any) error {
	s.rows = append(s.rows, rows...)
	return nil
}

func (s *stagingConn) merge() {
	newest := map[any][]any{}
	var order []any
	for _, r := range s.rows {
		if n, ok := newest[r[0]]; !ok || lsnOf(heldLayout, r) > lsnOf(heldLayout, n) {
			if !ok {
				order = append(order, r[0])
			}
			newest[r[0]] = r
		}
	}
	s.rows = s.rows[:0]
	for _, k := range order {
		s.rows = append(s.rows, newest[k])
	}
}

type stagingDestination struct {
	Destination // (the rest is not used)
	conn        *stagingConn
}

func (d stagingDestination) Conn() Conn { return d.conn }

// TestCompleteDeferredAroundCopyBack: the load's row of a key changed
// during the load is read before the copy-back, so a merge that collapses
// it with the key change's delete half right after the copy-back loses
// nothing; the update the load holds is dropped, the rest written.
func TestCompleteDeferredAroundCopyBack(t *testing.T) {
	conn := &stagingConn{rows: [][]any{row(1, "a", "A", loadLSN), row(5, "e", "E", loadLSN)}}
	l := &Engine{dst: stagingDestination{conn: conn}, cfg: Config{BatchRows: 1000}}
	snap := pgSnapshot{xmin: 2000, xmax: 2000, seenBy: 150}
	inLoad := heldUpdate(5, 5, "in the load", 120)
	inLoad.XID, inLoad.Commit = 1990, 130
	held := []DeferredRow{inLoad, heldUpdate(1, 2, "b", 200), heldUpdate(2, 3, "c", 300)}
	copyBack := func() error {
		conn.rows = append(conn.rows, del(1, 200), del(2, 300))
		conn.merge() // a merge before the held updates are read
		return nil
	}
	if err := l.completeDeferred(context.Background(), "public.t", heldLayout, clickhouse.Target{}, snap, held, copyBack); err != nil {
		t.Fatal(err)
	}
	conn.merge()
	if got, want := rowsString(conn.rows), "[1  <nil> 200 1];[5 e E 100 0];[2  <nil> 300 1];[3 c A 300 0];"; got != want {
		t.Errorf("staging after the publish: %s\nwant %s", got, want)
	}
}
