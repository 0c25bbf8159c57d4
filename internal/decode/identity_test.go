package decode

import (
	"fmt"
	"strings"
	"testing"

	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/wal"
)

var otherRfn = wal.RelFileNode{SpcOid: 1663, DbOid: testDB, RelNum: 20010}

// otherDesc: a second table (id int4 PRIMARY KEY, v text), no TOAST.
func otherDesc() *desclog.Descriptor {
	return &desclog.Descriptor{Oid: 20010, DbOid: testDB, Rfn: otherRfn, Namespace: "public", Name: "other", Kind: 'r',
		ReplIdent: 'd', KeyAttnums: []int16{1}, Columns: []desclog.Column{
			{Num: 1, Name: "id", TypeOid: OidInt4, Len: 4, Align: 'i', ByVal: true, TypeKind: 'b'},
			{Num: 2, Name: "v", TypeOid: OidText, Len: -1, Align: 'i', TypeKind: 'b'},
		}}
}

func otherTuple(id int32, v string) []byte {
	return tupleOf(otherDesc(), [][]byte{int4(id), short(v)})
}

// rowIdentity is a row's op, TIDs and filenode as text.
func rowIdentity(r RowChange) string {
	s := fmt.Sprintf("%s tid=%s filenode=%d", r.Op, r.TID, r.Filenode)
	if r.Op == OpUpdate {
		s += " old=" + r.OldTID.String()
	}
	return s
}

// TestTxTupleIdentity: every change carries the tuple WAL names, the old
// version for an update (block 1 when the update left the page), and the
// heap's filenode.
func TestTxTupleIdentity(t *testing.T) {
	tx, _ := newTestTx(TxOptions{}, mainDesc(), toastDesc())
	oldKey := func(id int32) []byte { return tupleOf(mainDesc(), [][]byte{int4(id), nil, nil}) }
	var rows []RowChange
	rows = mustAdd(t, tx, rows, insertRecordAt(t, 0x1000, mainRfn, 7, 3, itemTuple(1, short("a"), 1)))
	rows = mustAdd(t, tx, rows, multiInsertRecordAt(t, 0x1100, mainRfn, 8, []uint16{4, 9}, [][]byte{itemTuple(2, short("b"), 2), itemTuple(3, short("c"), 3)}))
	rows = mustAdd(t, tx, rows, multiInsertRecordAt(t, 0x1200, mainRfn, 4294967295, nil, [][]byte{itemTuple(4, short("d"), 4), itemTuple(5, short("e"), 5)}))
	rows = mustAdd(t, tx, rows, updateRecordAt(t, 0x1300, mainRfn, true, 7, 5, 7, 3, itemTuple(1, short("hot"), 1), nil, 0))
	rows = mustAdd(t, tx, rows, updateRecordAt(t, 0x1400, mainRfn, false, 12, 1, 8, 4, itemTuple(2, short("moved"), 2), nil, 0))
	rows = mustAdd(t, tx, rows, updateRecordAt(t, 0x1500, mainRfn, false, 12, 2, 8, 9, itemTuple(33, short("c"), 3), oldKey(3), wal.XLHUpdateContainsOldKey))
	rows = mustAdd(t, tx, rows, deleteRecordAt(t, 0x1600, mainRfn, 12, 65535, wal.XLHDeleteContainsOldKey, oldKey(2)))
	rows = mustAdd(t, tx, rows, truncateRecord(t, 0x1700, testDB, 20000))
	var got []string
	for _, r := range rows {
		got = append(got, rowIdentity(r))
	}
	want := []string{
		"insert tid=7:3 filenode=20000",
		"insert tid=8:4 filenode=20000",
		"insert tid=8:9 filenode=20000",
		"insert tid=4294967295:1 filenode=20000",
		"insert tid=4294967295:2 filenode=20000",
		"update tid=7:5 filenode=20000 old=7:3",
		"update tid=12:1 filenode=20000 old=8:4",
		// the key change: the delete half names the old version
		"delete tid=8:9 filenode=20000",
		"update tid=12:2 filenode=20000 old=8:9",
		"delete tid=12:65535 filenode=20000",
		"truncate tid=0:0 filenode=0",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestTxTupleIdentitySpeculative: a confirmed speculative insert keeps the
// tuple its INSERT named.
func TestTxTupleIdentitySpeculative(t *testing.T) {
	tx, _ := newTestTx(TxOptions{}, mainDesc())
	rows := mustAdd(t, tx, nil, insertRecord(t, 0x1000, mainRfn, 6, wal.XLHInsertIsSpeculative, itemTuple(1, short("a"), 1)))
	rows = mustAdd(t, tx, rows, confirmRecord(t, 0x1100, mainRfn, 6))
	if len(rows) != 1 || rows[0].TID != (TID{0, 6}) || rows[0].Filenode != mainRfn.RelNum {
		t.Fatalf("rows %+v", rows)
	}
}

// TestTxFailIsolation: one relation's failure is an OpFail row, its later
// changes in the transaction are dropped, and the other relations' changes
// go on.
func TestTxFailIsolation(t *testing.T) {
	tx, _ := newTestTx(TxOptions{}, mainDesc(), toastDesc(), otherDesc())
	missing := externalPointer(5004, 5000, 0, 7, 20001)
	spec := uint8(wal.XLHInsertIsSpeculative)
	var rows []RowChange
	rows = mustAdd(t, tx, rows, insertRecord(t, 0x1000, mainRfn, 1, 0, itemTuple(1, short("a"), 1)))
	rows = mustAdd(t, tx, rows, insertRecord(t, 0x1080, mainRfn, 9, spec, itemTuple(9, short("spec"), 9)))
	rows = mustAdd(t, tx, rows, insertRecord(t, 0x1100, otherRfn, 1, 0, otherTuple(1, "x")))
	// An inserted row whose TOAST chunks are not in the transaction.
	rows = mustAdd(t, tx, rows, insertRecord(t, 0x1200, mainRfn, 2, 0, itemTuple(2, missing, 2)))
	// items' later changes, all dropped; other's kept.
	rows = mustAdd(t, tx, rows, insertRecord(t, 0x1300, mainRfn, 3, 0, itemTuple(3, short("c"), 3)))
	rows = mustAdd(t, tx, rows, insertRecord(t, 0x1380, otherRfn, 2, 0, otherTuple(2, "y")))
	rows = mustAdd(t, tx, rows, multiInsertRecord(t, 0x1400, mainRfn, wal.XLHInsertLastInMulti, [][]byte{itemTuple(4, short("d"), 4)}))
	rows = mustAdd(t, tx, rows, updateRecord(t, 0x1500, mainRfn, itemTuple(1, short("z"), 1), nil, 0))
	rows = mustAdd(t, tx, rows, deleteRecord(t, 0x1600, mainRfn, 1, wal.XLHDeleteContainsOldKey, tupleOf(mainDesc(), [][]byte{int4(1), nil, nil})))
	rows = mustAdd(t, tx, rows, confirmRecord(t, 0x1680, mainRfn, 9))
	rows = mustAdd(t, tx, rows, truncateRecord(t, 0x1700, testDB, 20000, 20010))
	rows = mustAdd(t, tx, rows, updateRecord(t, 0x1800, otherRfn, otherTuple(2, "yy"), nil, 0))
	rows, err := tx.Finish(rows)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, r.Op.String()+"@"+r.LSN.String()+" "+r.Desc.Name)
	}
	want := []string{
		"insert@0/00001000 items",
		"insert@0/00001100 other",
		"fail@0/00001200 items",
		"insert@0/00001380 other",
		"truncate@0/00001700 other",
		"update@0/00001800 other",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	f := rows[2]
	for _, part := range []string{"LSN 0/00001200", "public.items (oid 20000)", `column "body"`, "TOAST value 7"} {
		if !strings.Contains(f.Err.Error(), part) {
			t.Errorf("failure %q does not say %q", f.Err, part)
		}
	}
	if f.TID != (TID{0, 2}) || f.Filenode != 20000 || f.DescFrom != 0x100 || len(f.Fields) != 0 {
		t.Errorf("failure %+v", f)
	}
	if s := tx.Stats(); s.Failures != 1 || s.DroppedAfterFailure != 6 || s.Inserts != 3 || s.Updates != 1 || s.Deletes != 0 || s.Truncates != 1 {
		t.Errorf("stats %+v", s)
	}
}

// TestTxFailMultiInsert: a multi-insert whose second tuple does not decode
// fails whole: its first tuple is not emitted either.
func TestTxFailMultiInsert(t *testing.T) {
	tx, _ := newTestTx(TxOptions{}, mainDesc(), toastDesc())
	bad := itemTuple(2, append(le32(1000<<2), "ab"...), 2) // a varlena longer than the tuple
	rows := mustAdd(t, tx, nil, insertRecord(t, 0x1000, mainRfn, 1, 0, itemTuple(1, short("a"), 1)))
	rows = mustAdd(t, tx, rows, multiInsertRecordAt(t, 0x1100, mainRfn, 3, []uint16{1, 2, 3}, [][]byte{itemTuple(2, short("b"), 2), bad, itemTuple(4, short("d"), 4)}))
	if len(rows) != 2 || rows[0].Op != OpInsert || rows[1].Op != OpFail || rows[1].TID != (TID{3, 2}) {
		t.Fatalf("rows %+v", rows)
	}
	if !strings.Contains(rows[1].Err.Error(), "LSN 0/00001100, relation public.items (oid 20000)") {
		t.Errorf("failure %v", rows[1].Err)
	}
	if s := tx.Stats(); s.Inserts != 1 || s.Failures != 1 {
		t.Errorf("stats %+v", s)
	}
}

// TestTxFailBrokenChunk: a TOAST chunk that does not read fails the row
// that points into its TOAST relation, not the transaction; a row of the
// same table without a pointer, after the reset, is fine.
func TestTxFailBrokenChunk(t *testing.T) {
	tx, _ := newTestTx(TxOptions{}, mainDesc(), toastDesc(), otherDesc())
	chunk := tupleOf(toastDesc(), [][]byte{le32(7), int4(0), plain([]byte("xyz"))})
	chunk[0] = 2 // two attributes: chunk_data missing
	rows := mustAdd(t, tx, nil, insertRecord(t, 0x1000, toastRfn, 1, wal.XLHInsertOnToastRelation, chunk))
	rows = mustAdd(t, tx, rows, insertRecord(t, 0x1100, otherRfn, 1, 0, otherTuple(1, "x")))
	if len(rows) != 1 {
		t.Fatalf("rows %+v", rows)
	}
	// The reset after other's row cleared the poison: chunks precede their row.
	tx2, _ := newTestTx(TxOptions{}, mainDesc(), toastDesc())
	mustAdd(t, tx2, nil, insertRecord(t, 0x1000, toastRfn, 1, wal.XLHInsertOnToastRelation, chunk))
	f := mustFail(t, tx2, insertRecord(t, 0x1100, mainRfn, 1, 0, itemTuple(1, externalPointer(7, 3, 0, 7, 20001), 1)))
	if !strings.Contains(f.Err.Error(), "chunk tuple at LSN 0/00001000 is not (chunk_id oid, chunk_seq int4, chunk_data bytea)") {
		t.Errorf("failure %v", f.Err)
	}
}

// TestTxFailAmbiguousTruncate: a TRUNCATE of two tables, one of which has
// no provable shape: that one fails, the other is truncated.
func TestTxFailAmbiguousTruncate(t *testing.T) {
	tx, cat := newTestTx(TxOptions{}, mainDesc(), otherDesc())
	cat.amb = []desclog.Ambiguity{{Scope: desclog.ScopeOid, Oid: 20000, From: 0x800, Through: 0x2000}}
	rows, err := tx.Add(nil, truncateRecord(t, 0x1000, testDB, 20000, 20010), true)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Op != OpFail || rows[0].Desc.Oid != 20000 || rows[1].Op != OpTruncate || rows[1].Desc.Oid != 20010 {
		t.Fatalf("rows %+v", rows)
	}
	if !strings.Contains(rows[0].Err.Error(), "no provable shape") || rows[0].TID.Valid() || rows[0].Filenode != 0 {
		t.Errorf("failure %+v", rows[0])
	}
}

// TestTxFailRelation: a relation the caller failed (after decoding) has its
// later changes dropped.
func TestTxFailRelation(t *testing.T) {
	tx, _ := newTestTx(TxOptions{}, mainDesc(), otherDesc())
	tx.FailRelation(20000)
	rows := mustAdd(t, tx, nil, insertRecord(t, 0x1000, mainRfn, 1, 0, itemTuple(1, short("a"), 1)))
	rows = mustAdd(t, tx, rows, insertRecord(t, 0x1100, otherRfn, 1, 0, otherTuple(1, "x")))
	if len(rows) != 1 || rows[0].Desc.Oid != 20010 {
		t.Fatalf("rows %+v", rows)
	}
}

func TestTIDString(t *testing.T) {
	for _, c := range []struct {
		tid  TID
		want string
	}{{TID{0, 1}, "0:1"}, {TID{4294967295, 65535}, "4294967295:65535"}, {TID{}, "0:0"}} {
		if got := c.tid.String(); got != c.want || c.tid.Valid() != (c.tid.Off != 0) {
			t.Errorf("%+v: %q", c.tid, got)
		}
	}
}
