package load

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/walshadow/walshadow/internal/statefile"
)

// FuzzLedgerDecode checks that decoding never panics and that whatever it
// accepts encodes to a file that decodes to the same ledger.
func FuzzLedgerDecode(f *testing.F) {
	full := sampleEntry(16384, "orders")
	bare := Entry{Oid: 9, Schema: "s", Table: "t", Mode: ModeBaseBackup, Phase: PhaseDone}
	good := encodeLedger(map[uint32]Entry{16384: full, 9: bare}, map[string]int64{ReloadTypeChange: 2})
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add(encodeLedger(nil, nil))
	f.Add(encodeLedger(map[uint32]Entry{16384: parkedEntry(16384, "orders")}, nil))
	f.Add([]byte(`{"format":"walshadow-loads","version":1,"entries":null,"crc32c":0}`))
	f.Add([]byte(`{"format":"walshadow-loads","version":2,"crc32c":0,"body":{"entries":null}}`))
	f.Add([]byte(`{"format":"walshadow-loads","version":1,"entries":[{"oid":7,"schema":"s","table":"t","mode":"copy","phase":"done","coverage_lsn":"a/1f","started_at":"2026-11-30T15:02:03.25+01:00"}],"crc32c":0}`))
	f.Add([]byte(""))
	f.Add([]byte("[1,2"))
	f.Fuzz(func(t *testing.T, b []byte) {
		// The checksum would reject nearly every mutation before the
		// interesting checks; re-sign what parses so they are reached too.
		for _, in := range [][]byte{b, resign(b)} {
			entries, reloads, err := decodeLedger("loads.json", in)
			if err != nil {
				var se *statefile.Error
				if entries != nil || reloads != nil || !errors.As(err, &se) {
					t.Fatalf("error %v (%T) with entries %+v", err, err, entries)
				}
				continue
			}
			again, againReloads, err := decodeLedger("loads.json", encodeLedger(entries, reloads))
			if err != nil {
				t.Fatalf("re-encoding of an accepted ledger refused: %v\ninput %q", err, in)
			}
			if !reflect.DeepEqual(again, entries) || !reflect.DeepEqual(againReloads, reloads) {
				t.Fatalf("round trip changed the ledger:\n%+v %v\n%+v %v", entries, reloads, again, againReloads)
			}
		}
	})
}

// resign returns b with its checksum made to match: an envelope's over
// its body, a version 1 document's over its contents; b itself when it is
// neither.
func resign(b []byte) []byte {
	var env struct {
		Format  json.RawMessage `json:"format"`
		Version json.RawMessage `json:"version"`
		CRC     json.RawMessage `json:"crc32c"`
		Body    json.RawMessage `json:"body"`
	}
	if json.Unmarshal(b, &env) == nil && env.Body != nil {
		out, err := json.Marshal(map[string]any{"format": env.Format, "version": env.Version,
			"crc32c": statefile.CRC(env.Body), "body": env.Body})
		if err != nil {
			return b
		}
		return out
	}
	var j ledgerV1
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return b
	}
	j.CRC = j.checksum()
	out, err := json.Marshal(j)
	if err != nil {
		return b
	}
	return out
}
