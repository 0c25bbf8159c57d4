package processor

import (
	"errors"
	"testing"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/walshadow/walshadow/internal/decode"
	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/wal"
)

func TestFormatParseTID(t *testing.T) {
	for _, c := range []struct {
		block uint32
		off   uint16
		text  string
	}{{0, 1, "0:1"}, {12, 34, "12:34"}, {4294967295, 65535, "4294967295:65535"}} {
		if got := FormatTID(c.block, c.off); got != c.text {
			t.Errorf("FormatTID(%d, %d) = %q, want %q", c.block, c.off, got, c.text)
		}
		if b, o, err := ParseTID(c.text); err != nil || b != c.block || o != c.off {
			t.Errorf("ParseTID(%q) = %d, %d, %v", c.text, b, o, err)
		}
		if got := (decode.TID{Block: c.block, Off: c.off}).String(); got != c.text {
			t.Errorf("decode.TID.String = %q, want %q", got, c.text)
		}
	}
	for _, bad := range []string{"", ":", "1", "1:", ":1", "1:0", "01:1", "1:01", "+1:1", "-1:1", " 1:1", "1:1 ", "1:2:3",
		"4294967296:1", "1:65536", "99999999999:1", "1:1x", "0x1:1", "1,1"} {
		if b, o, err := ParseTID(bad); err == nil {
			t.Errorf("ParseTID(%q) = %d, %d, want an error", bad, b, o)
		}
	}
}

func FuzzTID(f *testing.F) {
	f.Add(uint32(0), uint16(1), "0:1")
	f.Add(uint32(4294967295), uint16(65535), "4294967295:65535")
	f.Add(uint32(7), uint16(0), "007:1")
	f.Fuzz(func(t *testing.T, block uint32, off uint16, s string) {
		// Formatted, then parsed: the same tuple (offset 0 names none).
		b, o, err := ParseTID(FormatTID(block, off))
		if off == 0 {
			if err == nil {
				t.Fatalf("ParseTID accepted offset 0 from %d", block)
			}
		} else if err != nil || b != block || o != off {
			t.Fatalf("round trip of %d:%d = %d, %d, %v", block, off, b, o, err)
		}
		// Parsed, then formatted: the same text (only the canonical form parses).
		if b, o, err := ParseTID(s); err == nil && FormatTID(b, o) != s {
			t.Fatalf("ParseTID(%q) = %d, %d, which formats as %q", s, b, o, FormatTID(b, o))
		}
	})
}

func testDesc(oid uint32, name string, keyed bool) *desclog.Descriptor {
	d := &desclog.Descriptor{Oid: oid, DbOid: 5, Rfn: wal.RelFileNode{SpcOid: 1663, DbOid: 5, RelNum: oid + 100},
		Namespace: "public", Name: name, Kind: 'r', Persistence: 'p', ReplIdent: 'd',
		Columns: []desclog.Column{{Num: 1, Name: "id", TypeOid: decode.OidInt4, Len: 4}, {Num: 2, Name: "v", TypeOid: decode.OidText, Len: -1}}}
	if keyed {
		d.KeyAttnums = []int16{1}
	}
	return d
}

func testTx(commit wal.LSN) *txMeta {
	return &txMeta{topXID: 900, commitLSN: commit, commitNext: commit + 0x40,
		xidText: "900", commitLSNText: commit.String(), commitTimeText: "2024-01-02T03:04:05Z"}
}

func metaOf(m *service.Message) map[string]string {
	out := map[string]string{}
	_ = m.MetaWalk(func(k, v string) error {
		out[k] = v
		return nil
	})
	return out
}

func TestRowMessageIdentity(t *testing.T) {
	p := newDecodeProcessor(nil, service.MockResources(), decode.TxOptions{})
	d := testDesc(16400, "nokey", false)
	fn := d.Rfn.RelNum
	id := func(v int64) []decode.Field { return []decode.Field{{Col: &d.Columns[0], Value: v}} }
	o := &batchOut{}
	tx := testTx(0x9000)
	for _, r := range []decode.RowChange{
		{Op: decode.OpInsert, LSN: 0x1000, Desc: d, DescFrom: 0x100, Fields: id(1), TID: decode.TID{Block: 3, Off: 7}, Filenode: fn},
		{Op: decode.OpUpdate, LSN: 0x1100, Desc: d, DescFrom: 0x100, Fields: id(1), TID: decode.TID{Block: 4, Off: 1}, OldTID: decode.TID{Block: 3, Off: 7}, Filenode: fn},
		// rewritten within the transaction: another filenode than the descriptor's
		{Op: decode.OpDelete, LSN: 0x1200, Desc: d, DescFrom: 0x100, TID: decode.TID{Block: 4, Off: 1}, Filenode: 99999},
		{Op: decode.OpTruncate, LSN: 0x1300, Desc: d, DescFrom: 0x100},
	} {
		o.rows = append(o.rows, r)
		o.rowTx = append(o.rowTx, tx)
	}
	msgs := p.messages(o)
	want := []map[string]string{
		{MetaOperation: "insert", MetaTID: "3:7", MetaFilenode: "16500"},
		{MetaOperation: "update", MetaTID: "4:1", MetaOldTID: "3:7", MetaFilenode: "16500"},
		{MetaOperation: "delete", MetaTID: "4:1", MetaFilenode: "99999"},
		{MetaOperation: "truncate"},
	}
	for i, m := range msgs {
		meta := metaOf(m)
		for _, k := range []string{MetaOperation, MetaTID, MetaOldTID, MetaFilenode} {
			if meta[k] != want[i][k] {
				t.Errorf("message %d: %s = %q, want %q (metadata %v)", i, k, meta[k], want[i][k], meta)
			}
		}
		if meta[MetaRelationOid] != "16400" || meta[MetaCommitLSN] != tx.commitLSNText {
			t.Errorf("message %d: metadata %v", i, meta)
		}
	}
	// The TID texts stay valid after many more rows (slabs are replaced,
	// never reused).
	first := metaOf(msgs[0])[MetaTID]
	for i := 0; i < 5000; i++ {
		p.text.tid(decode.TID{Block: uint32(i), Off: 9})
	}
	if v, _ := msgs[0].MetaGet(MetaTID); v != first || first != "3:7" {
		t.Errorf("an earlier message's TID changed to %q", v)
	}
}

func TestFailMessage(t *testing.T) {
	p := newDecodeProcessor(nil, service.MockResources(), decode.TxOptions{})
	d := testDesc(16400, "items", true)
	reason := errors.New(`LSN 0/00001000, relation public.items (oid 16400), column "v": TOAST value 7 of relation 16401 is not in the transaction`)
	o := &batchOut{rows: []decode.RowChange{{Op: decode.OpFail, LSN: 0x1000, Desc: d, DescFrom: 0x100, TID: decode.TID{Block: 0, Off: 2}, Filenode: d.Rfn.RelNum, Err: reason}},
		rowTx: []*txMeta{testTx(0x9000)}}
	msgs := p.messages(o)
	if len(msgs) != 1 {
		t.Fatalf("%d messages", len(msgs))
	}
	meta := metaOf(msgs[0])
	for k, v := range map[string]string{
		MetaOperation: OperationFail, MetaError: reason.Error(), MetaSchema: "public", MetaTable: "items", MetaRelationOid: "16400",
		MetaKey: "id", MetaLSN: "0/00001000", MetaCommitLSN: "0/00009000", MetaXID: "900", MetaCommitTime: "2024-01-02T03:04:05Z",
		MetaDescVersion: "0/00000100", MetaTID: "0:2", MetaFilenode: "16500", MetaRecordIndex: "0",
	} {
		if meta[k] != v {
			t.Errorf("%s = %q, want %q", k, meta[k], v)
		}
	}
	payload, err := msgs[0].AsStructured()
	if m, ok := payload.(map[string]any); err != nil || !ok || len(m) != 0 {
		t.Errorf("payload %v (%v), want {}", payload, err)
	}
}
