package rowmodel

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestCanonicalValues(t *testing.T) {
	ts := time.Date(2024, 2, 29, 23, 59, 58, 500000000, time.UTC)
	for _, tc := range []struct {
		v    any
		kind valueKind
		want string // "NULL" for nil
	}{
		{nil, kindOther, "NULL"},
		{true, kindOther, "t"},
		{false, kindOther, "f"},
		{int64(-9223372036854775808), kindOther, "-9223372036854775808"},
		{json.Number("1e+3"), kindOther, "1e+3"},
		{"NaN", kindFloat8, "NaN"},
		{[]byte{0, 0xab}, kindOther, `\x00ab`},
		{[]byte{}, kindOther, `\x`},
		{ts, kindTimestamptz, "2024-02-29 23:59:58.5+00"},
		{ts, kindTimestamp, "2024-02-29 23:59:58.5"},
		{time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), kindDate, "0001-01-01"},
		{time.Date(9999, 12, 31, 0, 0, 0, 1000, time.UTC), kindTimestamp, "9999-12-31 00:00:00.000001"},
		{2.5, kindFloat4, "2.5"},
	} {
		got, err := canonical(tc.v, tc.kind)
		if err != nil {
			t.Errorf("canonical(%v): %v", tc.v, err)
			continue
		}
		s := "NULL"
		if got != nil {
			s = *got
		}
		if s != tc.want {
			t.Errorf("canonical(%#v, %d) = %q, want %q", tc.v, tc.kind, s, tc.want)
		}
	}
	if _, err := canonical(time.Date(2024, 1, 1, 1, 0, 0, 0, time.UTC), kindDate); err == nil {
		t.Error("a date that is not midnight was accepted")
	}
	if _, err := canonical(map[string]any{}, kindOther); err == nil {
		t.Error("a map value was accepted")
	}
}

func TestKindOf(t *testing.T) {
	for name, want := range map[string]valueKind{
		"real": kindFloat4, "double precision": kindFloat8, "date": kindDate,
		"timestamp without time zone": kindTimestamp, "timestamp(3) without time zone": kindTimestamp,
		"timestamp with time zone": kindTimestamptz, "timestamp(0) with time zone": kindTimestamptz,
		"timestamptz": kindTimestamptz, "text": kindOther, "time with time zone": kindOther, "numeric(10,2)": kindOther,
	} {
		if got := kindOf(name, 0); got != want {
			t.Errorf("kindOf(%q) = %d, want %d", name, got, want)
		}
	}
	if kindOf("whatever", oidTimestamptz) != kindTimestamptz {
		t.Error("type oid does not win")
	}
}

func TestJournalRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	j, err := OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Date(2024, 1, 2, 3, 4, 5, 6000, time.UTC)
	msgs := []Message{
		{Meta: map[string]string{MetaOperation: OpInsert, MetaLSN: "0/10"}, Payload: map[string]any{
			"n": nil, "b": true, "i": int64(-5), "f": 0.1, "num": json.Number("12.50"), "bytes": []byte{1, 2, 255},
			"ts": ts, "s": "x\ny", "nested": map[string]any{"list": []any{"a", int64(1)}},
		}},
		{Meta: map[string]string{MetaOperation: OpTruncate}},
	}
	if err := j.Append(msgs[:1]); err != nil {
		t.Fatal(err)
	}
	if err := j.Append(msgs[1:]); err != nil {
		t.Fatal(err)
	}
	j.Close()
	// A torn last line (the writer was killed mid-write) is ignored.
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"meta":{"walshadow_operation":"ins`)
	f.Close()
	got, err := ReadJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("%d messages, want 2", len(got))
	}
	p := got[0].Payload
	if p["n"] != nil || p["b"] != true || p["i"] != int64(-5) || p["f"] != 0.1 || p["num"] != json.Number("12.50") ||
		!bytes.Equal(p["bytes"].([]byte), []byte{1, 2, 255}) || !p["ts"].(time.Time).Equal(ts) || p["s"] != "x\ny" {
		t.Fatalf("payload %#v", p)
	}
	if l := p["nested"].(map[string]any)["list"].([]any); l[0] != "a" || l[1] != int64(1) {
		t.Fatalf("nested %#v", p["nested"])
	}
	if got[1].Meta[MetaOperation] != OpTruncate || got[1].Payload != nil {
		t.Fatalf("second message %#v", got[1])
	}
	// A bad line in the middle is an error.
	os.WriteFile(path, []byte("{bad}\n{}\n"), 0o644)
	if _, err := ReadJournal(path); err == nil {
		t.Fatal("a corrupt journal line was accepted")
	}
}

func FuzzDecodeJournalLine(f *testing.F) {
	line, _ := EncodeJournalLine(Message{Meta: map[string]string{"a": "b"}, Payload: map[string]any{"x": []any{int64(1), "s", nil}, "t": time.Unix(0, 0)}})
	f.Add(line)
	f.Add([]byte(`{"meta":{},"payload":["m",{"a":["x","AAE="]}]}`))
	f.Add([]byte(`{"payload":["i","99999999999999999999"]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		msg, err := DecodeJournalLine(b)
		if err != nil {
			return
		}
		// What decodes re-encodes and decodes the same way.
		again, err := EncodeJournalLine(msg)
		if err != nil {
			t.Fatalf("re-encoding %#v: %v", msg, err)
		}
		if _, err := DecodeJournalLine(again); err != nil {
			t.Fatalf("re-decoding %s: %v", again, err)
		}
	})
}

func FuzzParseSchemaPayload(f *testing.F) {
	f.Add([]byte(`{"columns":[{"num":1,"name":"id","type":"integer","key":true,"missing":"7"}],"diff":{"renamed":[{"num":1,"old_name":"a","new_name":"b"}],"dropped":["c"]}}`))
	f.Add([]byte(`{"columns":[{"name":"x","attnum":"3","type_oid":1184,"typmod":-1}]}`))
	f.Add([]byte(`{"diff":{"added":[{"name":"z","missing_value":1.5}]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var payload map[string]any
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		if dec.Decode(&payload) != nil {
			return
		}
		sp, err := ParseSchemaPayload(payload)
		if err != nil {
			return
		}
		// A parsed event applies to a model without panicking.
		m := New()
		msg := Message{Meta: map[string]string{MetaOperation: OpSchema, MetaEvent: EventAdded, MetaRelationOid: "1", MetaLSN: "0/1"}, Payload: payload}
		if err := m.Apply(msg); err != nil && len(sp.Columns) > 0 {
			t.Fatalf("added event with %d columns: %v", len(sp.Columns), err)
		}
		msg.Meta[MetaEvent] = EventChanged
		msg.Meta[MetaLSN] = "0/2"
		m.Apply(msg)
	})
}
