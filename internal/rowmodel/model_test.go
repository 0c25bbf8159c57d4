package rowmodel

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/wal"
)

const testOid = 16384

func col(num int, name, typ string, key bool) map[string]any {
	return map[string]any{"num": int64(num), "name": name, "type": typ, "typmod": int64(-1), "not_null": key, "key": key}
}

func schemaMsg(event string, lsn wal.LSN, payload map[string]any) Message {
	return Message{Meta: map[string]string{
		MetaOperation: OpSchema, MetaEvent: event, MetaSchema: "public", MetaTable: "t",
		MetaRelationOid: strconv.Itoa(testOid), MetaLSN: lsn.String(), MetaDescriptorVersion: lsn.String(),
	}, Payload: payload}
}

func rowMsg(op string, lsn, version wal.LSN, key string, payload map[string]any) Message {
	return Message{Meta: map[string]string{
		MetaOperation: op, MetaSchema: "public", MetaTable: "t", MetaRelationOid: strconv.Itoa(testOid),
		MetaLSN: lsn.String(), MetaCommitLSN: (lsn + 1000).String(), MetaDescriptorVersion: version.String(), MetaKey: key,
	}, Payload: payload}
}

func withToast(m Message, cols string) Message {
	m.Meta[MetaUnchangedToast] = cols
	return m
}

func applyAll(t *testing.T, m *Model, msgs []Message) {
	t.Helper()
	for i, msg := range msgs {
		if err := m.Apply(msg); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
}

func str(s string) *string { return &s }

// row returns the row of key id of public.t as column -> text ("NULL",
// "<unknown>" for absent).
func row(t *testing.T, m *Model, id string) map[string]string {
	t.Helper()
	r, ok := m.Lookup("public.t", str(id))
	if !ok {
		return nil
	}
	out := map[string]string{}
	for k, v := range r {
		if v == nil {
			out[k] = "NULL"
		} else {
			out[k] = *v
		}
	}
	return out
}

func equalRow(t *testing.T, got map[string]string, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("row %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("row %v, want %v (column %s)", got, want, k)
		}
	}
}

// keyedStream: create, insert, update with omitted TOAST, key change as
// delete+update, delete, add/rename/drop column, more rows.
func keyedStream() []Message {
	v1 := wal.LSN(0x100)
	created := schemaMsg(EventAdded, v1, map[string]any{"columns": []any{
		col(1, "id", "integer", true), col(2, "name", "text", false), col(3, "doc", "text", false),
		col(4, "f4", "real", false), col(5, "at", "timestamp with time zone", false),
	}})
	at := time.Date(2024, 5, 6, 7, 8, 9, 123000, time.UTC)
	v2 := wal.LSN(0x900)
	return []Message{
		created,
		rowMsg(OpInsert, 0x200, v1, "id", map[string]any{"id": int64(1), "name": "one", "doc": "big doc", "f4": float64(float32(0.1)), "at": at}),
		rowMsg(OpInsert, 0x210, v1, "id", map[string]any{"id": int64(2), "name": "two", "doc": nil, "f4": 1e20, "at": "infinity"}),
		withToast(rowMsg(OpUpdate, 0x300, v1, "id", map[string]any{"id": int64(1), "name": "uno", "f4": 1.5e-7, "at": at}), "doc"),
		// Key change 2 -> 3: delete of the old key and update with the new row.
		rowMsg(OpDelete, 0x400, v1, "id", map[string]any{"id": int64(2)}),
		rowMsg(OpUpdate, 0x400, v1, "id", map[string]any{"id": int64(3), "name": "three", "doc": "d3", "f4": -0.0, "at": nil}),
		rowMsg(OpInsert, 0x500, v1, "id", map[string]any{"id": int64(4), "name": "four", "doc": "d4", "f4": 2.0, "at": nil}),
		rowMsg(OpDelete, 0x600, v1, "id", map[string]any{"id": int64(4)}),
		// ADD COLUMN n DEFAULT 7, RENAME name -> title, DROP f4.
		schemaMsg(EventChanged, v2, map[string]any{
			"columns": []any{col(1, "id", "integer", true), col(2, "title", "text", false), col(3, "doc", "text", false),
				col(5, "at", "timestamp with time zone", false),
				map[string]any{"num": int64(6), "name": "n", "type": "integer", "has_missing": true, "missing": "7"}},
			"diff": map[string]any{
				"added":   []any{map[string]any{"num": int64(6), "name": "n", "type": "integer", "missing": "7"}},
				"dropped": []any{col(4, "f4", "real", false)},
				"renamed": []any{map[string]any{"num": int64(2), "old_name": "name", "new_name": "title"}},
			}}),
		rowMsg(OpInsert, 0xa00, v2, "id", map[string]any{"id": int64(5), "title": "five", "doc": "d5", "at": nil, "n": int64(8)}),
		withToast(rowMsg(OpUpdate, 0xb00, v2, "id", map[string]any{"id": int64(3), "title": "tres", "at": nil, "n": json.Number("9")}), "doc"),
	}
}

func checkKeyedStream(t *testing.T, m *Model) {
	t.Helper()
	if n := m.RowCount("public.t"); n != 3 {
		t.Fatalf("%d rows, want 3", n)
	}
	equalRow(t, row(t, m, "1"), map[string]string{"id": "1", "title": "uno", "doc": "big doc", "at": "2024-05-06 07:08:09.000123+00", "n": "7"})
	equalRow(t, row(t, m, "3"), map[string]string{"id": "3", "title": "tres", "doc": "d3", "at": "NULL", "n": "9"})
	equalRow(t, row(t, m, "5"), map[string]string{"id": "5", "title": "five", "doc": "d5", "at": "NULL", "n": "8"})
	if row(t, m, "2") != nil || row(t, m, "4") != nil {
		t.Fatal("deleted keys are still there")
	}
}

func TestModelKeyedTable(t *testing.T) {
	m := New()
	applyAll(t, m, keyedStream())
	checkKeyedStream(t, m)
	if s := m.Stats(); s.Inserts != 4 || s.Updates != 3 || s.Deletes != 2 || s.SchemaEvs != 2 {
		t.Fatalf("stats %+v", s)
	}
}

func TestModelReplayIsHarmless(t *testing.T) {
	stream := keyedStream()
	for from := range stream {
		m := New()
		applyAll(t, m, stream)
		// A restart re-reads a suffix of the stream.
		applyAll(t, m, stream[from:])
		checkKeyedStream(t, m)
	}
}

func TestModelRowDecodedWithOldShape(t *testing.T) {
	// A row of an older descriptor version (same transaction as the ALTER,
	// emitted after the event) uses the old names: they map by attnum.
	stream := keyedStream()
	m := New()
	applyAll(t, m, stream)
	applyAll(t, m, []Message{rowMsg(OpInsert, 0xc00, 0x100, "id", map[string]any{"id": int64(6), "name": "six", "doc": "d6", "f4": 1.0, "at": nil})})
	// n did not exist in version 0x100: it reads its missing value 7.
	equalRow(t, row(t, m, "6"), map[string]string{"id": "6", "title": "six", "doc": "d6", "at": "NULL", "n": "7"})
}

func TestModelOmittedColumnMustBeListed(t *testing.T) {
	stream := keyedStream()
	m := New()
	applyAll(t, m, stream)
	err := m.Apply(rowMsg(OpUpdate, 0xd00, 0x900, "id", map[string]any{"id": int64(5), "title": "x", "at": nil, "n": int64(1)}))
	if err == nil || !strings.Contains(err.Error(), `"doc" is missing`) {
		t.Fatalf("update without doc and without %s: %v", MetaUnchangedToast, err)
	}
}

func TestModelUnchangedToastWithoutStoredRowIsUnknown(t *testing.T) {
	m := New()
	applyAll(t, m, keyedStream()[:1])
	applyAll(t, m, []Message{withToast(rowMsg(OpUpdate, 0x200, 0x100, "id", map[string]any{"id": int64(9), "name": "n", "f4": 1.0, "at": nil}), "doc")})
	if r := row(t, m, "9"); r["doc"] != "" {
		t.Fatalf("doc = %q, want unknown", r["doc"])
	}
}

func TestModelErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		msgs []Message
		want string
	}{
		{"rows before schema", []Message{rowMsg(OpInsert, 0x200, 0x100, "id", map[string]any{"id": int64(1)})}, "no schema event"},
		{"unknown column", append(keyedStream()[:1], rowMsg(OpInsert, 0x200, 0x100, "id", map[string]any{"id": int64(1), "nope": "x"})), `"nope" is not a column`},
		{"unknown operation", []Message{{Meta: map[string]string{MetaOperation: "upsert", MetaRelationOid: "1"}}}, "unknown"},
		{"bad oid", []Message{{Meta: map[string]string{MetaOperation: OpInsert, MetaRelationOid: "x"}}}, "bad walshadow_relation_oid"},
		{"bad lsn", append(keyedStream()[:1], Message{Meta: map[string]string{MetaOperation: OpInsert, MetaRelationOid: strconv.Itoa(testOid), MetaLSN: "zz"}}), "bad walshadow_lsn"},
		{"missing key column", append(keyedStream()[:1], rowMsg(OpDelete, 0x200, 0x100, "id", map[string]any{})), "lacks a key column"},
		{"time for a text column", append(keyedStream()[:1], rowMsg(OpInsert, 0x200, 0x100, "id", map[string]any{"id": int64(1), "name": time.Now(), "doc": nil, "f4": nil, "at": nil})), "not date, timestamp or timestamptz"},
		{"drop unknown table", []Message{schemaMsg(EventDropped, 0x100, nil)}, "no such table"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := New()
			var err error
			for _, msg := range tc.msgs {
				if err = m.Apply(msg); err != nil {
					break
				}
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestModelTruncateAndDrop(t *testing.T) {
	v1 := wal.LSN(0x100)
	created := schemaMsg(EventAdded, v1, map[string]any{"columns": []any{col(1, "id", "integer", true), col(2, "v", "text", false)}})
	ins := func(lsn wal.LSN, id int64) Message {
		return rowMsg(OpInsert, lsn, v1, "id", map[string]any{"id": id, "v": "x"})
	}
	truncOp := rowMsg(OpTruncate, 0x400, v1, "", nil)
	truncEvent := schemaMsg(EventTruncate, 0x600, nil)
	stream := []Message{created, ins(0x200, 1), ins(0x300, 2), truncOp, ins(0x500, 3), truncEvent, ins(0x700, 4)}
	for from := range stream {
		m := New()
		applyAll(t, m, stream)
		applyAll(t, m, stream[from:])
		if n := m.RowCount("public.t"); n != 1 || row(t, m, "4") == nil {
			t.Fatalf("replay from %d: %d rows, want only id 4", from, n)
		}
	}
	m := New()
	drop := schemaMsg(EventDropped, 0x800, nil)
	applyAll(t, m, append(stream, drop))
	if n := m.RowCount("public.t"); n != -1 {
		t.Fatalf("dropped table still has %d rows", n)
	}
	// Replaying the table's history after the drop does not resurrect it.
	applyAll(t, m, stream)
	if len(m.Tables()) != 0 {
		t.Fatalf("tables %v after a replay past the drop", m.Tables())
	}
}

func TestModelReplicaIdentityFull(t *testing.T) {
	v1 := wal.LSN(0x100)
	created := schemaMsg(EventAdded, v1, map[string]any{"columns": []any{col(1, "a", "integer", false), col(2, "b", "text", false)}})
	r := func(op string, lsn wal.LSN, a int64, b string) Message {
		return rowMsg(op, lsn, v1, "", map[string]any{"a": a, "b": b})
	}
	stream := []Message{
		created,
		r(OpInsert, 0x200, 1, "x"),
		r(OpInsert, 0x300, 1, "x"), // an equal row: the multiset holds two
		r(OpInsert, 0x400, 2, "y"),
		r(OpDelete, 0x500, 1, "x"),
		// UPDATE 2,y -> 2,z under FULL: delete of the old row, update with the new.
		r(OpDelete, 0x600, 2, "y"),
		r(OpUpdate, 0x600, 2, "z"),
	}
	for from := range stream {
		m := New()
		applyAll(t, m, stream)
		applyAll(t, m, stream[from:])
		if n := m.RowCount("public.t"); n != 2 {
			t.Fatalf("replay from %d: %d rows, want 2", from, n)
		}
		distinct := 0
		for _, r := range m.tables[testOid].multi {
			if len(r.live) > 0 {
				distinct++
			}
		}
		if distinct != 2 {
			t.Fatalf("replay from %d: %d distinct rows, want 2", from, distinct)
		}
	}
	m := New()
	applyAll(t, m, stream)
	if err := m.Apply(r(OpDelete, 0x700, 9, "nope")); err == nil {
		t.Fatal("deleting a row the model does not hold was accepted")
	}
}

func TestModelKeyChangeOfColumnRenamedKey(t *testing.T) {
	// Renaming the key column keeps rows addressable under the new name.
	created := schemaMsg(EventAdded, 0x100, map[string]any{"columns": []any{col(1, "id", "integer", true), col(2, "v", "text", false)}})
	renamed := schemaMsg(EventChanged, 0x300, map[string]any{"columns": []any{col(1, "ident", "integer", true), col(2, "v", "text", false)}})
	m := New()
	applyAll(t, m, []Message{created, rowMsg(OpInsert, 0x200, 0x100, "id", map[string]any{"id": int64(1), "v": "a"}), renamed,
		rowMsg(OpUpdate, 0x400, 0x300, "ident", map[string]any{"ident": int64(1), "v": "b"})})
	equalRow(t, row(t, m, "1"), map[string]string{"ident": "1", "v": "b"})
	if m.RowCount("public.t") != 1 {
		t.Fatal("rename duplicated the row")
	}
}

func TestModelChangedWithDiffOnly(t *testing.T) {
	// Without column attnums and without a full column list, the diff alone
	// drives the change.
	created := schemaMsg(EventAdded, 0x100, map[string]any{"columns": []any{
		map[string]any{"name": "id", "type": "integer", "key": true}, map[string]any{"name": "a", "type": "text"}, map[string]any{"name": "b", "type": "text"}}})
	changed := schemaMsg(EventChanged, 0x300, map[string]any{"diff": map[string]any{
		"renamed": []any{map[string]any{"from": "a", "to": "c"}},
		"dropped": []any{"b"},
		"added":   []any{map[string]any{"name": "d", "type": "integer"}},
	}})
	m := New()
	applyAll(t, m, []Message{created, rowMsg(OpInsert, 0x200, 0x100, "id", map[string]any{"id": int64(1), "a": "x", "b": "y"}), changed})
	equalRow(t, row(t, m, "1"), map[string]string{"id": "1", "c": "x", "d": "NULL"})
}

func BenchmarkApplyInsert(b *testing.B) {
	m := New()
	if err := m.Apply(keyedStream()[0]); err != nil {
		b.Fatal(err)
	}
	msg := rowMsg(OpInsert, 0x200, 0x100, "id", map[string]any{"id": int64(1), "name": "one", "doc": "some document text", "f4": 0.5, "at": time.Now()})
	b.SetBytes(int64(len("one") + len("some document text") + 8 + 4 + 8))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		msg.Payload["id"] = int64(i)
		msg.Meta[MetaLSN] = wal.LSN(0x200 + i).String()
		if err := m.Apply(msg); err != nil {
			b.Fatal(err)
		}
	}
}
