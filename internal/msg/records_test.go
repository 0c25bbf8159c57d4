package msg

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/walshadow/walshadow/internal/wal"
)

// TestEachRecordReadsBothForms: a record batch message and the record
// messages of the same records read alike, in order, boundaries included;
// a batch whose slices disagree, and a message of neither form, are
// errors.
func TestEachRecordReadsBothForms(t *testing.T) {
	tx := &Tx{TopXID: 900, CommitLSN: 0x3000, CommitNext: 0x3040}
	rs := &Records{Epoch: 2, Seq: 7}
	var perRecord service.MessageBatch
	for i, lsn := range []uint64{0x3000, 0x1000, 0x2000} {
		r := Record{LSN: wal.LSN(lsn), Next: wal.LSN(lsn + 0x40), XID: 900, PGMajor: 15, Tx: tx, Last: i == 2, Seq: 7, Epoch: 2}
		raw := []byte(fmt.Sprintf("record %d", i))
		rs.Records = append(rs.Records, r)
		rs.Raw = append(rs.Raw, raw)
		rs.Boundary = append(rs.Boundary, i == 0)
		m := service.NewMessage(raw)
		SetRecord(m, &rs.Records[i], false)
		if i == 0 {
			m.MetaSetMut(KeyBoundary, map[string]any{"next_lsn": "0/3040"})
		}
		perRecord = append(perRecord, m)
	}
	batch := service.NewMessage(nil)
	SetRecords(batch, rs)
	if s, _ := batch.MetaGet(KeySeq); s != "7" {
		t.Errorf("%s = %q", KeySeq, s)
	}
	read := func(b service.MessageBatch) []string {
		t.Helper()
		var out []string
		if err := EachRecord(b, func(r *Record, raw []byte, boundary bool) error {
			out = append(out, fmt.Sprintf("%s %s last=%v seq=%d %q boundary=%v", r.LSN, r.Next, r.Last, r.Seq, raw, boundary))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	got, want := read(service.MessageBatch{batch}), read(perRecord)
	if strings.Join(got, "\n") != strings.Join(want, "\n") || len(want) != 3 || !strings.Contains(want[0], "boundary=true") || strings.Contains(want[1], "boundary=true") {
		t.Fatalf("batch form:\n%s\nrecord form:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	bad := service.NewMessage(nil)
	SetRecords(bad, &Records{Records: rs.Records, Raw: rs.Raw[:2], Boundary: rs.Boundary})
	if err := EachRecord(service.MessageBatch{bad}, func(*Record, []byte, bool) error { return nil }); err == nil || !strings.Contains(err.Error(), "3 records, 2 payloads") {
		t.Errorf("a batch with 2 payloads for 3 records: %v", err)
	}
	if err := EachRecord(service.MessageBatch{service.NewMessage([]byte("x"))}, func(*Record, []byte, bool) error { return nil }); !errors.Is(err, ErrNotRecords) {
		t.Errorf("a plain message: %v", err)
	}
	stop := errors.New("stop")
	if err := EachRecord(service.MessageBatch{batch}, func(*Record, []byte, bool) error { return stop }); err != stop {
		t.Errorf("f's error: %v", err)
	}
}
