package input

import (
	"fmt"
	"strings"
	"testing"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/walshadow/walshadow/internal/msg"
	"github.com/walshadow/walshadow/internal/session"
	"github.com/walshadow/walshadow/internal/wal"
)

// TestMessageForm: one message per batch unless the records are asked
// for, or every string is (which a batch message cannot carry).
func TestMessageForm(t *testing.T) {
	for _, c := range []struct {
		yaml       string
		all, batch bool
	}{
		{yaml: "session: main", batch: true},
		{yaml: "session: main\nmessages: record"},
		{yaml: "session: main\nmetadata: all", all: true},
		{yaml: "session: main\nmetadata: all\nmessages: record", all: true},
		{yaml: "session: main\nmetadata: all\nmessages: batch", all: true}, // the strings win
	} {
		conf, err := inputSpec().ParseYAML(c.yaml, nil)
		if err != nil {
			t.Fatalf("%q: %v", c.yaml, err)
		}
		all, batch, err := messageForm(conf)
		if err != nil || all != c.all || batch != c.batch {
			t.Errorf("%q: all %v batch %v (%v), want all %v batch %v", c.yaml, all, batch, err, c.all, c.batch)
		}
	}
}

// TestBatchAndRecordMessagesAgree: a session batch as one message and as
// one message per record carries the same records, bytes and boundary.
func TestBatchAndRecordMessagesAgree(t *testing.T) {
	tx := &session.TxInfo{Tx: msg.Tx{TopXID: 900, CommitLSN: 0x3000, CommitNext: 0x3040, FirstLSN: 0x1000},
		Boundary: &session.Boundary{NextLSN: 0x3040, DrainXID: 900, AffectedOids: []uint32{16400}}}
	layout, err := wal.LayoutForMajor(15)
	if err != nil {
		t.Fatal(err)
	}
	b := &session.Batch{Seq: 4, Epoch: 2}
	for i, lsn := range []wal.LSN{0x3000, 0x1000, 0x2000} {
		rec := &wal.Record{LSN: lsn, Next: lsn + 0x40, Raw: []byte(fmt.Sprintf("raw %d", i)), Layout: layout}
		rec.Header.XID = 900
		b.Items = append(b.Items, session.Item{Record: rec, Tx: tx, Last: i == 2})
	}
	read := func(form string) []string {
		t.Helper()
		batch := recordMessages(b, false)
		if form == "batch" {
			batch = service.MessageBatch{batchMessage(b)}
		}
		var out []string
		if err := msg.EachRecord(batch, func(r *msg.Record, raw []byte, boundary bool) error {
			out = append(out, fmt.Sprintf("%s %s xid %d tx %d/%s last=%v seq %d epoch %d major %d %q boundary=%v",
				r.LSN, r.Next, r.XID, r.Tx.TopXID, r.Tx.CommitLSN, r.Last, r.Seq, r.Epoch, r.PGMajor, raw, boundary))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	got, want := read("batch"), read("record")
	if strings.Join(got, "\n") != strings.Join(want, "\n") || len(got) != 3 || !strings.HasSuffix(got[0], "boundary=true") || !strings.HasSuffix(got[2], "boundary=false") {
		t.Fatalf("batch:\n%s\nrecords:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
