package output

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/walshadow/walshadow/internal/msg"
)

// asChangeBatch is b as one change batch message (walshadow_decode's
// messages: batch): every message's typed change and payload, in order.
func asChangeBatch(t *testing.T, b service.MessageBatch) service.MessageBatch {
	t.Helper()
	cs := &msg.Changes{}
	for _, m := range b {
		c, err := msg.ChangeOf(m)
		if err != nil {
			t.Fatal(err)
		}
		p, err := m.AsStructured()
		if err != nil {
			t.Fatal(err)
		}
		fields, _ := p.(map[string]any)
		cs.Changes = append(cs.Changes, *c)
		cs.Payloads = append(cs.Payloads, fields)
	}
	m := service.NewMessage(nil)
	msg.SetChanges(m, cs)
	return service.MessageBatch{m}
}

// TestWriterChangeBatchMatchesRows: batches written as change batch
// messages reach ClickHouse exactly as their row messages do: inserts,
// updates, a key change carrying an unchanged TOAST column from its
// delete half, a keyless table's physical identities, a truncate.
func TestWriterChangeBatchMatchesRows(t *testing.T) {
	keyless := keylessDescriptor().Oid
	noFiller := map[string]any{"aid": int64(22), "bid": int64(1), "abalance": int64(5)}
	batches := func() []service.MessageBatch {
		return []service.MessageBatch{
			batchOf(
				ins(0x3000100, account(1, 10, "a")),
				testChange{op: msg.OperationInsert, oid: keyless, lsn: 0x3000200, fields: map[string]any{"note": "n"}, tid: msg.TID{Block: 0, Off: 1}},
				ins(0x3000300, account(2, -20, "b")),
				ins(0x3000400, account(20, 0, "long text")),
			),
			batchOf(
				testChange{op: msg.OperationUpdate, oid: pgbenchOid, lsn: 0x4000100, fields: account(1, 11, "a2")},
				testChange{op: msg.OperationUpdate, oid: keyless, lsn: 0x4000200, fields: map[string]any{"note": "m"}, tid: msg.TID{Block: 0, Off: 2}, old: msg.TID{Block: 0, Off: 1}},
				testChange{op: msg.OperationDelete, oid: pgbenchOid, lsn: 0x4000300, fields: account(20, 0, "long text"), keyChg: true},
				testChange{op: msg.OperationUpdate, oid: pgbenchOid, lsn: 0x4000300, fields: noFiller, keyChg: true, toast: []string{"filler"}},
				testChange{op: msg.OperationDelete, oid: pgbenchOid, lsn: 0x4000400, fields: map[string]any{"aid": int64(2)}},
			),
			batchOf(
				ins(0x5000100, account(3, 0, "c")),
				testChange{op: msg.OperationTruncate, oid: pgbenchOid, lsn: 0x5000200},
				ins(0x5000300, account(4, 0, "d")),
			),
		}
	}
	run := func(batched bool) ([]string, []map[string]any, []map[string]any) {
		o, conn := newFakeOutput(t, 1000)
		var events []string
		for _, b := range batches() {
			if batched {
				b = asChangeBatch(t, b)
			}
			write(t, o, b)
			events = append(events, conn.take()...)
		}
		return events, conn.rowsOf(accountsTable), conn.rowsOf(notesTable)
	}
	rowEvents, rowAccounts, rowNotes := run(false)
	batchEvents, batchAccounts, batchNotes := run(true)
	// Per table: a flush inserts the tables' blocks in no set order.
	if got, want := perTable(batchEvents), perTable(rowEvents); !reflect.DeepEqual(got, want) {
		t.Errorf("change batches:\n%s\nrow messages:\n%s", strings.Join(batchEvents, "\n"), strings.Join(rowEvents, "\n"))
	}
	if !reflect.DeepEqual(batchAccounts, rowAccounts) || !reflect.DeepEqual(batchNotes, rowNotes) {
		t.Errorf("rows differ:\nbatches %v\n%v\nrows    %v\n%v", batchAccounts, batchNotes, rowAccounts, rowNotes)
	}
	carried := false
	for _, r := range rowAccounts {
		carried = carried || r["aid"] == int32(22) && r["filler"] == "long text"
	}
	if len(rowAccounts) < 8 || len(rowNotes) < 2 || !carried {
		t.Errorf("the scenario lost its point: %d account rows, %d note rows, TOAST carried over %v: %v", len(rowAccounts), len(rowNotes), carried, rowAccounts)
	}
}

// TestWriterChangeBatchErrors: a change batch whose payloads do not match
// its changes, that a processor after walshadow_decode wrote to, or that a
// processor flagged, is not written.
func TestWriterChangeBatchErrors(t *testing.T) {
	o, _ := newFakeOutput(t, 1000)
	b := asChangeBatch(t, batchOf(ins(0x3000100, account(1, 10, "a"))))
	cs, _, _ := msg.ChangesOf(b[0])
	cs.Payloads = append(cs.Payloads, nil)
	if err := o.WriteBatch(t.Context(), b); err == nil || !strings.Contains(err.Error(), "1 changes, 2 payloads") {
		t.Errorf("mismatched payloads: %v", err)
	}
	b = asChangeBatch(t, batchOf(ins(0x3000100, account(1, 10, "a"))))
	b[0].SetStructuredMut(map[string]any{"secret": "xxx"}) // a masking mapping after the processor
	if err := o.WriteBatch(t.Context(), b); err == nil || !strings.Contains(err.Error(), "need its messages: row") {
		t.Errorf("a change batch a mapping wrote to: %v", err)
	}
	b = asChangeBatch(t, batchOf(ins(0x3000100, account(1, 10, "a"))))
	b[0].SetError(fmt.Errorf("mapping failed"))
	if err := o.WriteBatch(t.Context(), b); err == nil || !strings.Contains(err.Error(), "processing error: mapping failed") {
		t.Errorf("a flagged batch: %v", err)
	}
}

// perTable splits a fake connection's events by the table they name
// (inserts "insert <table> <rows>", statements naming it quoted).
func perTable(events []string) map[string][]string {
	out := map[string][]string{}
	for _, e := range events {
		table := "?"
		switch f := strings.Fields(e); {
		case len(f) >= 2 && f[0] == "insert":
			table = f[1]
		case strings.Contains(e, "pgbench_accounts"):
			table = accountsTable
		case strings.Contains(e, "notes"):
			table = notesTable
		}
		out[table] = append(out[table], e)
	}
	return out
}
