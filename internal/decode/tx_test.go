package decode

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/pierrec/lz4/v4"

	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/wal"
)

const testDB = 5

var (
	mainRfn  = wal.RelFileNode{SpcOid: 1663, DbOid: testDB, RelNum: 20000}
	toastRfn = wal.RelFileNode{SpcOid: 1663, DbOid: testDB, RelNum: 20001}
)

// mainDesc: (id int4 PRIMARY KEY, body text, n int8), TOAST relation 20001.
func mainDesc() *desclog.Descriptor {
	return &desclog.Descriptor{Oid: 20000, DbOid: testDB, Rfn: mainRfn, Namespace: "public", Name: "items", Kind: 'r',
		ReplIdent: 'd', ToastOid: 20001, KeyAttnums: []int16{1}, Columns: []desclog.Column{
			{Num: 1, Name: "id", TypeOid: OidInt4, Len: 4, Align: 'i', ByVal: true, TypeKind: 'b'},
			{Num: 2, Name: "body", TypeOid: OidText, Len: -1, Align: 'i', TypeKind: 'b'},
			{Num: 3, Name: "n", TypeOid: OidInt8, Len: 8, Align: 'd', ByVal: true, TypeKind: 'b'},
		}}
}

func toastDesc() *desclog.Descriptor {
	return &desclog.Descriptor{Oid: 20001, DbOid: testDB, Rfn: toastRfn, Namespace: "pg_toast", Name: "pg_toast_20000", Kind: 't',
		ReplIdent: 'n', Columns: []desclog.Column{
			{Num: 1, Name: "chunk_id", TypeOid: OidOid, Len: 4, Align: 'i', ByVal: true},
			{Num: 2, Name: "chunk_seq", TypeOid: OidInt4, Len: 4, Align: 'i', ByVal: true},
			{Num: 3, Name: "chunk_data", TypeOid: OidBytea, Len: -1, Align: 'i'},
		}}
}

// scriptCatalog is fakeCatalog with per-LSN answers.
type scriptCatalog struct {
	*fakeCatalog
	at map[wal.LSN]desclog.Lookup
}

func (c *scriptCatalog) DescriptorAt(rfn wal.RelFileNode, lsn wal.LSN) desclog.Lookup {
	if l, ok := c.at[lsn]; ok {
		return l
	}
	return c.fakeCatalog.DescriptorAt(rfn, lsn)
}

func (c *scriptCatalog) DescriptorByOidInDBAt(db, oid uint32, lsn wal.LSN) desclog.Lookup {
	if l, ok := c.at[lsn]; ok {
		return l
	}
	return c.fakeCatalog.DescriptorByOidInDBAt(db, oid, lsn)
}

const commitNext = wal.LSN(0x7000_0000)

func newTestTx(opt TxOptions, descs ...*desclog.Descriptor) (*Tx, *scriptCatalog) {
	var ds []desclog.Descriptor
	for _, d := range descs {
		ds = append(ds, *d)
	}
	cat := &scriptCatalog{fakeCatalog: newFakeCatalog(testDB, 0x100, ds), at: map[wal.LSN]desclog.Lookup{}}
	return NewTx(cat, Commit{TopXID: 777, LSN: commitNext - 0x20, NextLSN: commitNext, DbOid: testDB}, opt), cat
}

func int4(v int32) []byte  { return le32(uint32(v)) }
func int8v(v int64) []byte { return le64(uint64(v)) }

// itemTuple is an items row.
func itemTuple(id int32, body []byte, n int64) []byte {
	return tupleOf(mainDesc(), [][]byte{int4(id), body, int8v(n)})
}

func mustAdd(t *testing.T, tx *Tx, rows []RowChange, rec *wal.Record) []RowChange {
	t.Helper()
	rows, err := tx.Add(rows, rec, false)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// mustFail feeds rec, which must fail its relation: the OpFail row it
// appends is returned.
func mustFail(t *testing.T, tx *Tx, rec *wal.Record) RowChange {
	t.Helper()
	rows, err := tx.Add(nil, rec, false)
	if err != nil {
		t.Fatalf("the relation's failure stopped the transaction: %v", err)
	}
	if len(rows) != 1 || rows[0].Op != OpFail || rows[0].Err == nil || rows[0].LSN != rec.LSN || rows[0].Desc == nil || len(rows[0].Fields) != 0 {
		t.Fatalf("rows %+v, want one OpFail at %s", rows, rec.LSN)
	}
	return rows[0]
}

// chunkRecords feeds data as TOAST chunks of value id (1996-byte chunks, as
// TOAST_MAX_CHUNK_SIZE on 8 kB pages), starting at *lsn.
func addChunks(t *testing.T, tx *Tx, lsn *wal.LSN, id uint32, data []byte) {
	t.Helper()
	td := toastDesc()
	for seq := 0; len(data) > 0; seq++ {
		n := min(1996, len(data))
		tup := tupleOf(td, [][]byte{le32(id), int4(int32(seq)), plain(data[:n])})
		if _, err := tx.Add(nil, insertRecord(t, *lsn, toastRfn, 1, wal.XLHInsertOnToastRelation, tup), false); err != nil {
			t.Fatal(err)
		}
		data = data[n:]
		*lsn += 0x800
	}
}

func TestTxInsertUpdateDelete(t *testing.T) {
	tx, _ := newTestTx(TxOptions{}, mainDesc(), toastDesc())
	var rows []RowChange
	rows = mustAdd(t, tx, rows, insertRecord(t, 0x1000, mainRfn, 1, 0, itemTuple(1, short("one"), 10)))
	rows = mustAdd(t, tx, rows, multiInsertRecord(t, 0x1100, mainRfn, wal.XLHInsertLastInMulti,
		[][]byte{itemTuple(2, short("two"), 20), tupleOf(mainDesc(), [][]byte{int4(3), nil, int8v(-1)})}))
	// non-key update: no old key logged
	rows = mustAdd(t, tx, rows, updateRecord(t, 0x1200, mainRfn, itemTuple(1, short("uno"), 11), nil, 0))
	// key change: old key logged (key columns only, the rest NULL)
	oldKey := tupleOf(mainDesc(), [][]byte{int4(2), nil, nil})
	rows = mustAdd(t, tx, rows, updateRecord(t, 0x1300, mainRfn, itemTuple(22, short("two"), 20), oldKey, wal.XLHUpdateContainsOldKey))
	rows = mustAdd(t, tx, rows, deleteRecord(t, 0x1400, mainRfn, 3, wal.XLHDeleteContainsOldKey, tupleOf(mainDesc(), [][]byte{int4(3), nil, nil})))
	rows = mustAdd(t, tx, rows, truncateRecord(t, 0x1500, testDB, 20000, 20001, 99999))
	rows, err := tx.Finish(rows)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		var parts []string
		for _, f := range r.Fields {
			parts = append(parts, f.Col.Name+"="+valueText(t, f.Col, f.Value))
		}
		got = append(got, r.Op.String()+"@"+r.LSN.String()+" "+strings.Join(parts, ","))
	}
	want := []string{
		"insert@0/00001000 id=1,body=one,n=10",
		"insert@0/00001100 id=2,body=two,n=20",
		"insert@0/00001100 id=3,body=\x00NULL,n=-1",
		"update@0/00001200 id=1,body=uno,n=11",
		"delete@0/00001300 id=2",
		"update@0/00001300 id=22,body=two,n=20",
		"delete@0/00001400 id=3",
		"truncate@0/00001500 ",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	s := tx.Stats()
	if s.Inserts != 3 || s.Updates != 2 || s.Deletes != 2 || s.KeyChangeDeletes != 1 || s.Truncates != 1 || s.SkippedKind != 1 || s.SkippedNotCovered != 1 {
		t.Errorf("stats %+v", s)
	}
	if rows[0].Desc.Name != "items" || rows[0].DescFrom != 0x100 {
		t.Errorf("descriptor %v from %s", rows[0].Desc.Name, rows[0].DescFrom)
	}
	if _, err := tx.Add(nil, insertRecord(t, 0x2000, mainRfn, 1, 0, itemTuple(9, short("x"), 1)), false); err == nil {
		t.Error("Add after Finish succeeded")
	}
}

// TestTxSharedArena: transactions decoded one after another into one
// Arena keep every earlier transaction's rows intact.
func TestTxSharedArena(t *testing.T) {
	opt := TxOptions{Arena: new(Arena)}
	var first []RowChange
	for i := int32(0); i < 3000; i++ {
		tx, _ := newTestTx(opt, mainDesc(), toastDesc())
		body := short(fmt.Sprintf("row %d", i))
		rows := mustAdd(t, tx, nil, insertRecord(t, 0x1000, mainRfn, 1, 0, itemTuple(i, body, int64(i))))
		rows, err := tx.Finish(rows)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = rows
		}
	}
	f := first[0].Fields
	if f[0].Value != int64(0) || f[1].Value != "row 0" || f[2].Value != int64(0) {
		t.Fatalf("the first transaction's row changed: %+v", f)
	}
}

func TestTxFieldsDoNotAliasRecord(t *testing.T) {
	desc := mainDesc()
	desc.Columns[1].TypeOid, desc.Columns[1].TypeKind = 3802, 'b' // jsonb: pending
	tx, _ := newTestTx(TxOptions{}, desc)
	rec := insertRecord(t, 0x1000, mainRfn, 1, 0, itemTuple(1, short("{}"), 1))
	rows := mustAdd(t, tx, nil, rec)
	for i := range rec.Raw {
		rec.Raw[i] = 0xEE
	}
	f := rows[0].Fields[1]
	if !f.Pending || string(f.Raw) != string(short("{}")) || rows[0].Fields[0].Value != int64(1) {
		t.Fatalf("fields changed with the record bytes: %+v", rows[0].Fields)
	}
}

func TestTxToast(t *testing.T) {
	for _, c := range []struct {
		name       string
		size       int
		compressed bool
	}{
		{"1MiB", 1 << 20, false},
		{"1MiB lz4", 1 << 20, true},
		{"100MiB", 100 << 20, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.size > 1<<20 && testing.Short() {
				t.Skip("100 MiB value in -short mode")
			}
			value := bytes.Repeat([]byte("0123456789abcdefghijklmnopqrstuvwxyz"), c.size/36+1)[:c.size]
			stored, method := value, CompressionPGLZ
			if c.compressed {
				comp := make([]byte, lz4.CompressBlockBound(len(value)))
				n, err := lz4.CompressBlock(value, comp, nil)
				if err != nil || n == 0 {
					t.Fatal(n, err)
				}
				method = CompressionLZ4
				stored = binary.LittleEndian.AppendUint32(nil, uint32(len(value))|uint32(CompressionLZ4)<<30)
				stored = append(stored, comp[:n]...)
			}
			tx, _ := newTestTx(TxOptions{}, mainDesc(), toastDesc())
			lsn := wal.LSN(0x1000)
			addChunks(t, tx, &lsn, 4242, stored)
			ptr := externalPointer(int32(len(value)+4), len(stored), method, 4242, 20001)
			rows := mustAdd(t, tx, nil, insertRecord(t, lsn, mainRfn, 1, 0, itemTuple(1, ptr, 1)))
			if got, ok := rows[0].Fields[1].Value.(string); !ok || got != string(value) {
				t.Fatalf("reassembled value: %T of %d bytes", rows[0].Fields[1].Value, len(got))
			}
			s := tx.Stats()
			if s.ToastValues != 1 || s.ToastChunks != int64((len(stored)+1995)/1996) {
				t.Errorf("stats %+v", s)
			}
			// The chunks are released after the row: the same pointer in a later
			// UPDATE is an unchanged value, omitted.
			rows = mustAdd(t, tx, nil, updateRecord(t, lsn+0x100, mainRfn, itemTuple(1, ptr, 2), nil, 0))
			if f := rows[0].Fields[1]; !f.Omitted || f.Value != nil {
				t.Fatalf("unchanged TOAST value: %+v", f)
			}
			if tx.Stats().ToastOmitted != 1 {
				t.Errorf("stats %+v", tx.Stats())
			}
		})
	}
}

func TestTxToastErrors(t *testing.T) {
	value := bytes.Repeat([]byte("x"), 5000)
	ptr := externalPointer(5004, 5000, 0, 7, 20001)
	cases := map[string]struct {
		opt  TxOptions
		feed func(t *testing.T, tx *Tx, lsn *wal.LSN)
		last func(t *testing.T) *wal.Record
		want string
	}{
		"insert without chunks": {
			last: func(t *testing.T) *wal.Record { return insertRecord(t, 0x9000, mainRfn, 1, 0, itemTuple(1, ptr, 1)) },
			want: `column "body": TOAST value 7 of relation 20001 is not in the transaction`,
		},
		"update with toast policy fail": {
			opt:  TxOptions{ToastPolicy: ToastFail},
			last: func(t *testing.T) *wal.Record { return updateRecord(t, 0x9000, mainRfn, itemTuple(1, ptr, 1), nil, 0) },
			want: "TOAST value 7 of relation 20001 is not in the transaction (toast policy fail)",
		},
		"chunk gap": {
			feed: func(t *testing.T, tx *Tx, lsn *wal.LSN) {
				addChunks(t, tx, lsn, 7, value[:1996])
				td := toastDesc()
				tup := tupleOf(td, [][]byte{le32(7), int4(2), plain(value[1996:])})
				mustAdd(t, tx, nil, insertRecord(t, *lsn, toastRfn, 1, wal.XLHInsertOnToastRelation, tup))
			},
			last: func(t *testing.T) *wal.Record { return insertRecord(t, 0x9000, mainRfn, 1, 0, itemTuple(1, ptr, 1)) },
			want: "chunk 2 at LSN",
		},
		"short value": {
			feed: func(t *testing.T, tx *Tx, lsn *wal.LSN) { addChunks(t, tx, lsn, 7, value[:4000]) },
			last: func(t *testing.T) *wal.Record { return insertRecord(t, 0x9000, mainRfn, 1, 0, itemTuple(1, ptr, 1)) },
			want: "chunks hold 4000 bytes, the pointer says 5000",
		},
		"too large": {
			opt:  TxOptions{MaxValueBytes: 4096},
			feed: func(t *testing.T, tx *Tx, lsn *wal.LSN) { addChunks(t, tx, lsn, 7, value) },
			last: func(t *testing.T) *wal.Record { return insertRecord(t, 0x9000, mainRfn, 1, 0, itemTuple(1, ptr, 1)) },
			want: "more than 4096 bytes",
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			tx, _ := newTestTx(c.opt, mainDesc(), toastDesc())
			lsn := wal.LSN(0x1000)
			if c.feed != nil {
				c.feed(t, tx, &lsn)
			}
			f := mustFail(t, tx, c.last(t))
			err := f.Err
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
			if !strings.Contains(err.Error(), "public.items (oid 20000)") || !strings.Contains(err.Error(), "LSN 0/00009000") {
				t.Errorf("error does not name the relation and the LSN: %v", err)
			}
			if f.Desc.Oid != 20000 || f.Filenode != mainRfn.RelNum || !f.TID.Valid() {
				t.Errorf("failure %+v", f)
			}
			// The relation's later changes in the transaction are dropped.
			if rows := mustAdd(t, tx, nil, insertRecord(t, 0x9100, mainRfn, 2, 0, itemTuple(2, short("b"), 2))); len(rows) != 0 {
				t.Errorf("a failed relation's later insert: %+v", rows)
			}
			if s := tx.Stats(); s.Failures != 1 || s.DroppedAfterFailure != 1 {
				t.Errorf("stats %+v", s)
			}
		})
	}
}

func TestTxToastFilledFromOldKey(t *testing.T) {
	// The key column itself is TOASTed and unchanged: PostgreSQL logs the old
	// key (flattened), which supplies the value the new row omits.
	desc := mainDesc()
	desc.KeyAttnums = []int16{2}
	tx, _ := newTestTx(TxOptions{}, desc, toastDesc())
	ptr := externalPointer(5004, 5000, 0, 7, 20001)
	flat := plain(bytes.Repeat([]byte("k"), 5000))
	rows := mustAdd(t, tx, nil, updateRecord(t, 0x1000, mainRfn, itemTuple(1, ptr, 2),
		tupleOf(desc, [][]byte{nil, flat, nil}), wal.XLHUpdateContainsOldKey))
	if len(rows) != 1 || rows[0].Op != OpUpdate || rows[0].Fields[1].Omitted || rows[0].Fields[1].Value != strings.Repeat("k", 5000) {
		t.Fatalf("rows %+v", rows)
	}
	if tx.Stats().ToastFilledFromOld != 1 {
		t.Errorf("stats %+v", tx.Stats())
	}
}

func TestTxSpeculative(t *testing.T) {
	tx, _ := newTestTx(TxOptions{}, mainDesc())
	var rows []RowChange
	spec := uint8(wal.XLHInsertIsSpeculative)
	rows = mustAdd(t, tx, rows, insertRecord(t, 0x1000, mainRfn, 1, spec, itemTuple(1, short("a"), 1)))
	rows = mustAdd(t, tx, rows, insertRecord(t, 0x1100, mainRfn, 2, spec, itemTuple(2, short("b"), 2)))
	rows = mustAdd(t, tx, rows, insertRecord(t, 0x1200, mainRfn, 3, spec, itemTuple(3, short("c"), 3)))
	if len(rows) != 0 {
		t.Fatalf("speculative inserts emitted before confirmation: %d", len(rows))
	}
	rows = mustAdd(t, tx, rows, confirmRecord(t, 0x1300, mainRfn, 1))
	rows = mustAdd(t, tx, rows, deleteRecord(t, 0x1400, mainRfn, 2, wal.XLHDeleteIsSuper, nil))
	rows, _ = tx.Finish(rows)
	if len(rows) != 1 || rows[0].LSN != 0x1000 || rows[0].Fields[0].Value != int64(1) {
		t.Fatalf("rows %+v", rows)
	}
	if s := tx.Stats(); s.SpeculativeDropped != 2 || s.Inserts != 1 {
		t.Errorf("stats %+v", s)
	}
}

// TestTxNoReplicaIdentity: a table without a usable replica identity
// (NOTHING, or DEFAULT without a primary key) logs no old key; its UPDATEs
// and DELETEs go out with their physical row identity instead of failing.
func TestTxNoReplicaIdentity(t *testing.T) {
	noKey := mainDesc()
	noKey.KeyAttnums = nil
	nothing := mainDesc()
	nothing.ReplIdent, nothing.KeyAttnums = 'n', nil
	for name, desc := range map[string]*desclog.Descriptor{"default without primary key": noKey, "nothing": nothing} {
		t.Run(name, func(t *testing.T) {
			tx, _ := newTestTx(TxOptions{}, desc)
			rows := mustAdd(t, tx, nil, updateRecord(t, 0x1000, mainRfn, itemTuple(1, short("a"), 1), nil, 0))
			rows = mustAdd(t, tx, rows, deleteRecord(t, 0x1100, mainRfn, 5, 0, nil))
			if len(rows) != 2 {
				t.Fatalf("rows %+v", rows)
			}
			u, d := rows[0], rows[1]
			if u.Op != OpUpdate || len(u.Fields) != 3 || u.TID != (TID{0, 2}) || u.OldTID != (TID{0, 1}) || u.Filenode != mainRfn.RelNum {
				t.Errorf("update %+v", u)
			}
			if d.Op != OpDelete || len(d.Fields) != 0 || d.TID != (TID{0, 5}) || d.Filenode != mainRfn.RelNum {
				t.Errorf("delete %+v", d)
			}
			if s := tx.Stats(); s.NoIdentity != 2 || s.Updates != 1 || s.Deletes != 1 || s.KeyChangeDeletes != 0 || s.Failures != 0 {
				t.Errorf("stats %+v", s)
			}
		})
	}
	// A table whose descriptor has a key, but whose DELETE logs none: the
	// descriptor does not match the record, so the table fails (alone).
	tx, _ := newTestTx(TxOptions{}, mainDesc())
	f := mustFail(t, tx, deleteRecord(t, 0x1000, mainRfn, 1, 0, nil))
	if !strings.Contains(f.Err.Error(), "public.items (oid 20000)") || !strings.Contains(f.Err.Error(), "LSN 0/00001000") || f.TID != (TID{0, 1}) {
		t.Errorf("failure %+v: %v", f, f.Err)
	}
}

func TestTxReplicaIdentityFull(t *testing.T) {
	desc := mainDesc()
	desc.ReplIdent, desc.KeyAttnums = 'f', nil
	tx, _ := newTestTx(TxOptions{}, desc)
	old := itemTuple(1, short("a"), 1)
	rows := mustAdd(t, tx, nil, updateRecord(t, 0x1000, mainRfn, itemTuple(1, short("b"), 1), old, wal.XLHUpdateContainsOldTuple))
	rows = mustAdd(t, tx, rows, updateRecord(t, 0x1100, mainRfn, itemTuple(1, short("b"), 1), itemTuple(1, short("b"), 1), wal.XLHUpdateContainsOldTuple))
	rows = mustAdd(t, tx, rows, deleteRecord(t, 0x1200, mainRfn, 1, wal.XLHDeleteContainsOldTuple, old))
	ops := ""
	for _, r := range rows {
		ops += r.Op.String() + fmtInt(len(r.Fields)) + " "
	}
	// Every FULL update retires its old row, even an update that changed
	// nothing: downstream the rows are a multiset.
	if ops != "delete3 update3 delete3 update3 delete3 " {
		t.Fatalf("ops %q", ops)
	}
}

func fmtInt(n int) string { return string(rune('0' + n)) }

func TestTxResolution(t *testing.T) {
	d := mainDesc()
	committed := mainDesc()
	committed.Columns = append(committed.Columns, desclog.Column{Num: 4, Name: "extra", TypeOid: OidInt4, Len: 4, Align: 'i', TypeKind: 'b'})
	ins := func(t *testing.T, lsn wal.LSN) *wal.Record {
		return insertRecord(t, lsn, mainRfn, 1, 0, itemTuple(1, short("a"), 1))
	}
	cases := []struct {
		name          string
		atRecord      desclog.Lookup
		atCommit      *desclog.Lookup
		deferCat      bool
		amb           []desclog.Ambiguity
		wantRows      int
		wantCols      int
		wantErr       string
		wantSkipField func(TxStats) int64
	}{
		{name: "present", atRecord: desclog.Lookup{Result: desclog.Present, Desc: d}, wantRows: 1, wantCols: 3},
		{name: "deferred uses the commit's shape", atRecord: desclog.Lookup{Result: desclog.Present, Desc: d}, deferCat: true,
			atCommit: &desclog.Lookup{Result: desclog.Present, Desc: committed}, wantRows: 1, wantCols: 4},
		{name: "born in the transaction", atRecord: desclog.Lookup{Result: desclog.NotCovered},
			atCommit: &desclog.Lookup{Result: desclog.Present, Desc: committed}, wantRows: 1, wantCols: 4},
		{name: "foreign db", atRecord: desclog.Lookup{Result: desclog.ForeignDb}, wantSkipField: func(s TxStats) int64 { return s.SkippedForeignDb }},
		{name: "retired", atRecord: desclog.Lookup{Result: desclog.Retired}, wantSkipField: func(s TxStats) int64 { return s.SkippedRetired }},
		{name: "dropped by the commit", atRecord: desclog.Lookup{Result: desclog.Dropped},
			atCommit: &desclog.Lookup{Result: desclog.Dropped}, wantSkipField: func(s TxStats) int64 { return s.SkippedDropped }},
		{name: "never covered", atRecord: desclog.Lookup{Result: desclog.NotCovered},
			atCommit: &desclog.Lookup{Result: desclog.NotCovered}, wantSkipField: func(s TxStats) int64 { return s.SkippedNotCovered }},
		{name: "ambiguous, fenced", atRecord: desclog.Lookup{Result: desclog.Ambiguous},
			atCommit: &desclog.Lookup{Result: desclog.Present, Desc: committed},
			amb:      []desclog.Ambiguity{{Scope: desclog.ScopeRfn, Rfn: mainRfn, From: 0x800, Through: 0x2000}},
			wantErr:  "no provable shape"},
		{name: "ambiguous, interval elsewhere", atRecord: desclog.Lookup{Result: desclog.Ambiguous},
			atCommit: &desclog.Lookup{Result: desclog.Present, Desc: committed},
			amb:      []desclog.Ambiguity{{Scope: desclog.ScopeRfn, Rfn: mainRfn, From: 0x1800, Through: 0x2000}},
			wantRows: 1, wantCols: 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tx, cat := newTestTx(TxOptions{}, d)
			cat.at[0x1000] = c.atRecord
			if c.atCommit != nil {
				cat.at[commitNext] = *c.atCommit
			}
			cat.amb = c.amb
			if c.wantErr != "" {
				f := mustFail(t, tx, ins(t, 0x1000))
				if !strings.Contains(f.Err.Error(), c.wantErr) || !strings.Contains(f.Err.Error(), "0/00001000") || f.Desc != cat.at[commitNext].Desc {
					t.Fatalf("failure %+v, want %q", f, c.wantErr)
				}
				return
			}
			rows, err := tx.Add(nil, ins(t, 0x1000), c.deferCat)
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != c.wantRows || (c.wantRows > 0 && len(rows[0].Fields) != c.wantCols) {
				t.Fatalf("rows %+v", rows)
			}
			if c.wantSkipField != nil && c.wantSkipField(tx.Stats()) != 1 {
				t.Errorf("skip not counted: %+v", tx.Stats())
			}
		})
	}
}

func TestTxNoTupleData(t *testing.T) {
	tx, _ := newTestTx(TxOptions{}, mainDesc())
	main := []byte{1, 0, 0}
	rec := buildRecord(t, 0x1000, wal.RmgrHeap, wal.XLogHeapInsert, []testBlock{{rel: mainRfn, image: true}}, main)
	_, err := tx.Add(nil, rec, false)
	if err == nil || !strings.Contains(err.Error(), "wal_level = logical") || !strings.Contains(err.Error(), "public.items") {
		t.Fatalf("error %v", err)
	}
}

func TestTxMissingAndDroppedColumns(t *testing.T) {
	missing := "42"
	desc := mainDesc()
	desc.Columns[1].Dropped = true
	desc.Columns = append(desc.Columns, desclog.Column{Num: 4, Name: "late", TypeOid: OidInt4, Len: 4, Align: 'i', TypeKind: 'b', HasMissing: true, Missing: &missing})
	tx, _ := newTestTx(TxOptions{}, desc)
	rows := mustAdd(t, tx, nil, insertRecord(t, 0x1000, mainRfn, 1, 0, tupleOf(desc, [][]byte{int4(1), short("gone"), int8v(5)})))
	var names []string
	for _, f := range rows[0].Fields {
		names = append(names, f.Col.Name+"="+valueText(t, f.Col, f.Value))
	}
	if got := strings.Join(names, ","); got != "id=1,n=5,late=42" {
		t.Fatal(got)
	}
}

// FuzzTxAdd feeds arbitrary record bytes through DecodeRecord and Tx.Add
// with fixed descriptors: nothing may panic.
func FuzzTxAdd(f *testing.F) {
	t := f
	seeds := []*wal.Record{
		insertRecord(t, 0x1000, mainRfn, 1, 0, itemTuple(1, short("a"), 1)),
		insertRecord(t, 0x1000, mainRfn, 1, wal.XLHInsertIsSpeculative, itemTuple(1, externalPointer(5004, 5000, 0, 7, 20001), 1)),
		insertRecord(t, 0x1000, toastRfn, 1, wal.XLHInsertOnToastRelation, tupleOf(toastDesc(), [][]byte{le32(7), int4(0), plain([]byte("xyz"))})),
		multiInsertRecord(t, 0x1000, mainRfn, 0, [][]byte{itemTuple(2, short("b"), 2), itemTuple(3, nil, 3)}),
		updateRecord(t, 0x1000, mainRfn, itemTuple(1, short("b"), 1), itemTuple(1, short("a"), 1), wal.XLHUpdateContainsOldKey),
		deleteRecord(t, 0x1000, mainRfn, 1, wal.XLHDeleteContainsOldKey, tupleOf(mainDesc(), [][]byte{int4(1), nil, nil})),
		truncateRecord(t, 0x1000, testDB, 20000),
		confirmRecord(t, 0x1000, mainRfn, 1),
	}
	for _, r := range seeds {
		f.Add(r.Raw, false)
	}
	f.Fuzz(func(t *testing.T, raw []byte, deferCat bool) {
		if len(raw) >= 24 {
			// Keep fuzzed records CRC-valid so the fuzzer reaches Tx.Add.
			binary.LittleEndian.PutUint32(raw[0:], uint32(len(raw)))
			binary.LittleEndian.PutUint32(raw[20:], wal.RecordCRC(raw))
		}
		var rec wal.Record
		if err := wal.DecodeRecord(raw, 0x1000, layout15, &rec); err != nil {
			return
		}
		desc := mainDesc()
		desc.Columns = append(desc.Columns, desclog.Column{Num: 4, Name: "j", TypeOid: 3802, Len: -1, Align: 'i'},
			desclog.Column{Num: 5, Name: "num", TypeOid: OidNumeric, Len: -1, Align: 'i'})
		tx, _ := newTestTx(TxOptions{MaxValueBytes: 1 << 20}, desc, toastDesc())
		rows, err := tx.Add(nil, &rec, deferCat)
		if err == nil {
			rows, _ = tx.Add(rows, &rec, deferCat) // the same record again: carried state
		}
		rows, _ = tx.Finish(rows)
		for _, r := range rows {
			switch r.Op {
			case OpFail:
				if r.Err == nil || r.Desc == nil || len(r.Fields) != 0 {
					t.Fatalf("failure without a reason or a relation: %+v", r)
				}
			case OpInsert, OpUpdate, OpDelete:
				if r.Filenode == 0 || r.Err != nil {
					t.Fatalf("row without an identity: %+v", r)
				}
			}
		}
	})
}

// TestTxRacedCatalogChangeAsOf: a writer that committed while another
// transaction was changing its relation's layout in place decodes with the
// shape before that change when it reads the log as of its own commit (what
// the processor does), although the change's capture fences the writer's
// record; against the whole log, without a horizon, it fails closed.
func TestTxRacedCatalogChangeAsOf(t *testing.T) {
	log, err := desclog.Open(t.TempDir(), desclog.Identity{PGMajor: 15, SystemID: 1, Timeline: 1, DbOid: testDB, SegmentSize: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	if _, err := log.Seed(0x1000, 0x800, []desclog.Descriptor{*mainDesc()}); err != nil {
		t.Fatal(err)
	}
	// The change: column n's type changes in place (no rewrite); its tree
	// first touched the catalogs at 0x2000 and committed after the writer.
	retyped := mainDesc()
	retyped.Columns[2].TypeOid = OidFloat8
	b, _, err := desclog.Capture(log, desclog.BoundaryInput{NextLSN: commitNext + 0x100, DrainXID: 900,
		AffectedOids: []uint32{retyped.Oid}, FirstCatalogTouch: 0x2000}, []desclog.Descriptor{*retyped})
	if err != nil {
		t.Fatal(err)
	}
	if err := log.Append(b); err != nil {
		t.Fatal(err)
	}
	if lk := log.DescriptorAt(mainRfn, 0x3000); lk.Result != desclog.Ambiguous {
		t.Fatalf("the change does not fence the writer's record: %+v", lk)
	}
	c := Commit{TopXID: 777, LSN: commitNext - 0x20, NextLSN: commitNext, DbOid: testDB}
	rec := insertRecord(t, 0x3000, mainRfn, 1, 0, itemTuple(1, short("a"), 7))

	rows, err := NewTx(log.AsOf(commitNext), c, TxOptions{}).Add(nil, rec, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || len(rows[0].Fields) != 3 || rows[0].Fields[2].Col.TypeOid != OidInt8 || rows[0].Fields[2].Value != int64(7) {
		t.Fatalf("as of the writer's commit: %+v", rows)
	}
	if _, err := NewTx(log, c, TxOptions{}).Add(nil, rec, false); err == nil || !strings.Contains(err.Error(), "0/00003000") {
		t.Fatalf("against the whole log: %v, want a fail-closed error naming the record", err)
	}
}
