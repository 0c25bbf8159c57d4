package wal

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Golden records come from a PostgreSQL 15 cluster driven by
// testdata/heap/gen.sh and were cut out of its WAL by
// testdata/heap/extract.go. testdata/heap/waldump.txt is pg_waldump's
// listing of the same records, the independent oracle: every golden record's
// decoded body is rendered the way heap_desc/heap2_desc print it and compared
// with that listing, block references included.

// heapGolden loads testdata/heap/name.bin, the record at lsn, and decodes
// its header, block references and main data.
func heapGolden(t *testing.T, name string, lsn LSN) *Record {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "heap", name+".bin"))
	if err != nil {
		t.Fatal(err)
	}
	layout, _ := LayoutForMajor(15)
	rec := new(Record)
	if err := DecodeRecord(raw, lsn, layout, rec); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return rec
}

// heapGoldenBody decodes a golden record through the dispatchers.
func heapGoldenBody(t *testing.T, rec *Record) Body {
	t.Helper()
	var (
		b   Body
		err error
	)
	switch rec.Header.RmID {
	case RmgrHeap:
		b, err = decodeHeapBody(rec)
	case RmgrHeap2:
		b, err = decodeHeap2Body(rec)
	default:
		t.Fatalf("golden record is %s", rec.Header.RmID)
	}
	if err != nil {
		t.Fatalf("decoding %s at %s: %v", heapIdentify(rec.Header.Info), rec.LSN, err)
	}
	return b
}

var heapGoldenFiles = []struct {
	name string
	lsn  LSN
}{
	{"new_cid", 0x00611C88},
	{"insert_init", 0x00638C40},
	{"insert_nulls", 0x00638D58},
	{"multi_insert", 0x00638E08},
	{"hot_update", 0x00638F70},
	{"update_key", 0x00638FF0},
	{"hot_update_full", 0x00639270},
	{"delete_full", 0x00639308},
	{"delete_key", 0x00639540},
	{"insert_speculative", 0x006395B0},
	{"confirm", 0x00639638},
	{"lock", 0x00639698},
	{"prune", 0x0063F938},
	{"truncate", 0x00640CC0},
	{"delete_partition_move", 0x0064FB80},
	{"update_cross_page", 0x00657BD8},
	{"vacuum", 0x00657F08},
	{"freeze_page", 0x00659F98},
	{"visible", 0x0065A038},
	{"inplace", 0x0065A078},
	{"multi_insert_init", 0x0065B8E8},
	{"insert_fpi_nodata", 0x006784D8},
	{"hot_update_prefix_suffix", 0x00678600},
	{"multi_insert_replica", 0x00678670},
	{"hot_update_fpi_prefix_nodata", 0x006787A0},
	{"multi_insert_fpi_nodata", 0x00678A70},
}

// heapWaldumpEntry is one record of pg_waldump's listing.
type heapWaldumpEntry struct {
	desc    string   // after "desc: ", trailing blanks trimmed
	blkrefs []string // "blkref #0: rel 1663/5/16384 fork main blk 0", image details cut
}

func heapLoadWaldump(t *testing.T) map[LSN]heapWaldumpEntry {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "heap", "waldump.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return heapParseWaldump(t, f)
}

// heapParseWaldump reads pg_waldump --bkp-details output.
func heapParseWaldump(t *testing.T, r io.Reader) map[LSN]heapWaldumpEntry {
	t.Helper()
	out := map[LSN]heapWaldumpEntry{}
	var cur LSN
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if blk, ok := strings.CutPrefix(line, "\tblkref "); ok {
			blk, _, _ = strings.Cut(blk, " (FPW")
			e := out[cur]
			e.blkrefs = append(e.blkrefs, "blkref "+blk)
			out[cur] = e
			continue
		}
		_, rest, ok := strings.Cut(line, "lsn: ")
		if !ok {
			continue // pg_waldump's closing error line
		}
		lsnText, _, _ := strings.Cut(rest, ",")
		lsn, err := ParseLSN(lsnText)
		if err != nil {
			t.Fatal(err)
		}
		_, desc, _ := strings.Cut(rest, "desc: ")
		cur = lsn
		out[lsn] = heapWaldumpEntry{desc: strings.TrimRight(desc, " ")}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// heapInfobitsDesc is heapdesc.c's out_infobits.
func heapInfobitsDesc(bits uint8) string {
	var s string
	for _, f := range []struct {
		bit  uint8
		name string
	}{{XLHLXmaxIsMulti, "IS_MULTI "}, {XLHLXmaxLockOnly, "LOCK_ONLY "}, {XLHLXmaxExclLock, "EXCL_LOCK "},
		{XLHLXmaxKeyshrLock, "KEYSHR_LOCK "}, {XLHLKeysUpdated, "KEYS_UPDATED "}} {
		if bits&f.bit != 0 {
			s += f.name
		}
	}
	return s
}

// heapDesc renders a decoded body as pg_waldump prints it: identify, then
// heap_desc/heap2_desc. Opaque Heap2 bodies render the name only.
func heapDesc(rec *Record, body Body) string {
	var id string
	if rec.Header.RmID == RmgrHeap {
		id = heapIdentify(rec.Header.Info)
	} else {
		id = heap2Identify(rec.Layout, rec.Header.Info)
	}
	var d string
	switch b := body.(type) {
	case *HeapInsert:
		d = fmt.Sprintf("off %d flags 0x%02X", b.OffNum, b.Flags)
	case *HeapDelete:
		d = fmt.Sprintf("off %d flags 0x%02X %s", b.OffNum, b.Flags, heapInfobitsDesc(b.InfobitsSet))
	case *HeapUpdate:
		d = fmt.Sprintf("off %d xmax %d flags 0x%02X %s; new off %d xmax %d",
			b.OldOffNum, b.OldXmax, b.Flags, heapInfobitsDesc(b.OldInfobitsSet), b.NewOffNum, b.NewXmax)
	case *HeapTruncate:
		if b.Cascade() {
			d += "cascade "
		}
		if b.RestartSeqs() {
			d += "restart_seqs "
		}
		d += fmt.Sprintf("nrelids %d relids", b.NumRelIDs())
		for _, r := range b.AppendRelIDs(nil) {
			d += fmt.Sprintf(" %d", r)
		}
	case *HeapConfirm:
		d = fmt.Sprintf("off %d", b.OffNum)
	case *HeapLock:
		d = fmt.Sprintf("off %d: xid %d: flags 0x%02X %s", b.OffNum, b.LockingXID, b.Flags, heapInfobitsDesc(b.InfobitsSet))
	case *HeapInplace:
		d = fmt.Sprintf("off %d", b.OffNum)
	case *HeapMultiInsert:
		d = fmt.Sprintf("%d tuples flags 0x%02X", b.NTuples, b.Flags)
	case *HeapNewCID:
		d = fmt.Sprintf("rel %s; tid %d/%d; cmin: %d, cmax: %d, combo: %d",
			b.Target, b.TargetBlock, b.TargetOffNum, b.Cmin, b.Cmax, b.ComboCID)
	case *Heap2Opaque:
		return b.Name
	}
	return strings.TrimRight(id+" "+d, " ")
}

// heapBlkrefDescs renders the heap blocks a body names, as pg_waldump prints
// its block references.
func heapBlkrefDescs(body Body) []string {
	ref := func(id int, rel RelFileNode, blk uint32) string {
		return fmt.Sprintf("blkref #%d: rel %s fork main blk %d", id, rel, blk)
	}
	switch b := body.(type) {
	case *HeapInsert:
		return []string{ref(0, b.Rel, b.Block)}
	case *HeapDelete:
		return []string{ref(0, b.Rel, b.Block)}
	case *HeapUpdate:
		if b.OldBlock != b.NewBlock {
			return []string{ref(0, b.Rel, b.NewBlock), ref(1, b.Rel, b.OldBlock)}
		}
		return []string{ref(0, b.Rel, b.NewBlock)}
	case *HeapConfirm:
		return []string{ref(0, b.Rel, b.Block)}
	case *HeapLock:
		return []string{ref(0, b.Rel, b.Block)}
	case *HeapInplace:
		return []string{ref(0, b.Rel, b.Block)}
	case *HeapMultiInsert:
		return []string{ref(0, b.Rel, b.Block)}
	}
	return nil // TRUNCATE and NEW_CID have no block references; opaque bodies name none
}

// TestHeapGoldenMatchesWaldump decodes every golden record and compares it
// with pg_waldump's description of the same bytes.
func TestHeapGoldenMatchesWaldump(t *testing.T) {
	dump := heapLoadWaldump(t)
	if len(dump) != len(heapGoldenFiles) {
		t.Fatalf("waldump.txt lists %d records, %d golden files", len(dump), len(heapGoldenFiles))
	}
	for _, g := range heapGoldenFiles {
		t.Run(g.name, func(t *testing.T) {
			rec := heapGolden(t, g.name, g.lsn)
			body := heapGoldenBody(t, rec)
			want, ok := dump[g.lsn]
			if !ok {
				t.Fatalf("no waldump entry at %s", g.lsn)
			}
			if got := heapDesc(rec, body); got != want.desc && !(heapIsOpaque(body) && strings.HasPrefix(want.desc, got+" ")) {
				t.Errorf("desc\n got %q\nwant %q", got, want.desc)
			}
			if refs := heapBlkrefDescs(body); refs != nil && strings.Join(refs, "\n") != strings.Join(want.blkrefs, "\n") {
				t.Errorf("block references\n got %q\nwant %q", refs, want.blkrefs)
			}
		})
	}
}

// TestHeapFixtureMatchesWaldump decodes every Heap and Heap2 record of the
// shared PostgreSQL 15 fixture (testdata/pg15, written by gen_pg15.sh) and
// compares each with pg_waldump's listing of the same WAL.
func TestHeapFixtureMatchesWaldump(t *testing.T) {
	dir := filepath.Join("testdata", "pg15")
	gz, err := os.Open(filepath.Join(dir, "waldump_records.txt.gz"))
	if os.IsNotExist(err) {
		t.Skip("no testdata/pg15 fixture")
	}
	if err != nil {
		t.Fatal(err)
	}
	defer gz.Close()
	zr, err := gzip.NewReader(gz)
	if err != nil {
		t.Fatal(err)
	}
	dump := heapParseWaldump(t, zr)
	r, err := NewFileReader(filepath.Join(dir, "wal"))
	if err != nil {
		t.Fatal(err)
	}
	counts := map[RmgrID]int{}
	for {
		rec, err := r.Next()
		if err == io.EOF || IsKind(err, KindEndOfWAL) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if rec.Header.RmID != RmgrHeap && rec.Header.RmID != RmgrHeap2 {
			continue
		}
		want, ok := dump[rec.LSN]
		if !ok {
			continue // before the listing's start
		}
		body := heapGoldenBody(t, rec)
		counts[rec.Header.RmID]++
		if got := heapDesc(rec, body); got != want.desc && !(heapIsOpaque(body) && strings.HasPrefix(want.desc, got+" ")) {
			t.Errorf("%s: desc\n got %q\nwant %q", rec.LSN, got, want.desc)
		}
		if refs := heapBlkrefDescs(body); refs != nil && strings.Join(refs, "\n") != strings.Join(want.blkrefs, "\n") {
			t.Errorf("%s: block references\n got %q\nwant %q", rec.LSN, refs, want.blkrefs)
		}
	}
	if counts[RmgrHeap] == 0 || counts[RmgrHeap2] == 0 {
		t.Fatalf("decoded %d Heap and %d Heap2 records, want some of each", counts[RmgrHeap], counts[RmgrHeap2])
	}
	t.Logf("%d Heap and %d Heap2 records match pg_waldump", counts[RmgrHeap], counts[RmgrHeap2])
}

func heapIsOpaque(b Body) bool { _, ok := b.(*Heap2Opaque); return ok }

// heapTupleBytes is the Data a tuple logged from offset 23 carries: one pad
// byte up to t_hoff 24 (or the one-byte null bitmap), then the user data.
func heapTupleBytes(first byte, user ...[]byte) []byte {
	return append([]byte{first}, bytes.Join(user, nil)...)
}

// heapVarlena1B is a short (1-byte header) varlena, as text values under 127 bytes are stored.
func heapVarlena1B(s string) []byte { return append([]byte{byte((len(s)+1)<<1 | 1)}, s...) }

func heapInt4(v uint32) []byte { return heapLE(v) }

// The statements in gen.sh determine the tuples' exact bytes. Table t is
// (id int primary key, a text, b int), relfilenode 16384.
func TestHeapGoldenTuples(t *testing.T) {
	t16384 := RelFileNode{SpcOid: 1663, DbOid: 5, RelNum: 16384}
	pad4 := func(n int) []byte { return make([]byte, n) }
	const xmaxInvalidVarwidth = HeapXmaxInvalid | HeapHasVarWidth

	t.Run("insert_init", func(t *testing.T) {
		// insert into t values (1, 'one', 10)
		var b HeapInsert
		if err := b.Decode(heapGolden(t, "insert_init", 0x00638C40)); err != nil {
			t.Fatal(err)
		}
		if !b.InitPage || b.Rel != t16384 || b.Block != 0 || b.OffNum != 1 || b.Flags != XLHInsertContainsNewTuple || !b.HasTuple {
			t.Fatalf("got %+v", b)
		}
		want := HeapTupleHeader{Infomask2: 3, Infomask: xmaxInvalidVarwidth, Hoff: 24}
		if b.Tuple.Header != want || !bytes.Equal(b.Tuple.Data, heapTupleBytes(0, heapInt4(1), heapVarlena1B("one"), heapInt4(10))) {
			t.Fatalf("tuple %+v % x", b.Tuple.Header, b.Tuple.Data)
		}
		if !bytes.Equal(b.Tuple.UserData(), b.Tuple.Data[1:]) || b.Tuple.Bitmap() != nil || b.Tuple.IsNull(1) {
			t.Fatal("user data / bitmap accessors")
		}
	})
	t.Run("insert_nulls", func(t *testing.T) {
		// insert into t values (2, null, 20)
		var b HeapInsert
		if err := b.Decode(heapGolden(t, "insert_nulls", 0x00638D58)); err != nil {
			t.Fatal(err)
		}
		want := HeapTupleHeader{Infomask2: 3, Infomask: HeapXmaxInvalid | HeapHasNull, Hoff: 24}
		if b.InitPage || b.OffNum != 2 || b.Tuple.Header != want || !bytes.Equal(b.Tuple.Data, heapTupleBytes(0x05, heapInt4(2), heapInt4(20))) {
			t.Fatalf("got %+v % x", b, b.Tuple.Data)
		}
		if b.Tuple.IsNull(0) || !b.Tuple.IsNull(1) || b.Tuple.IsNull(2) || !bytes.Equal(b.Tuple.Bitmap(), []byte{5}) {
			t.Fatal("null bitmap: want only attribute 1 null")
		}
	})
	t.Run("multi_insert", func(t *testing.T) {
		// copy t from stdin: (3,'three',30) (4,'four',40) (5,NULL,50)
		var b HeapMultiInsert
		if err := b.Decode(heapGolden(t, "multi_insert", 0x00638E08)); err != nil {
			t.Fatal(err)
		}
		if b.InitPage || b.NTuples != 3 || b.Flags != XLHInsertContainsNewTuple|XLHInsertLastInMulti || !b.HasTuples || b.Rel != t16384 {
			t.Fatalf("got %+v", b)
		}
		want := []MultiInsertTuple{
			{3, HeapTuple{HeapTupleHeader{3, xmaxInvalidVarwidth, 24}, heapTupleBytes(0, heapInt4(3), heapVarlena1B("three"), pad4(2), heapInt4(30))}},
			{4, HeapTuple{HeapTupleHeader{3, xmaxInvalidVarwidth, 24}, heapTupleBytes(0, heapInt4(4), heapVarlena1B("four"), pad4(3), heapInt4(40))}},
			{5, HeapTuple{HeapTupleHeader{3, HeapXmaxInvalid | HeapHasNull, 24}, heapTupleBytes(0x05, heapInt4(5), heapInt4(50))}},
		}
		got := b.AppendTuples(nil)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("tuples\n got %v\nwant %v", got, want)
		}
	})
	t.Run("multi_insert_init", func(t *testing.T) {
		// create table m (id int); copy m from stdin: 1, 2
		var b HeapMultiInsert
		if err := b.Decode(heapGolden(t, "multi_insert_init", 0x0065B8E8)); err != nil {
			t.Fatal(err)
		}
		got := b.AppendTuples(nil)
		want := []MultiInsertTuple{
			{1, HeapTuple{HeapTupleHeader{1, HeapXmaxInvalid, 24}, heapTupleBytes(0, heapInt4(1))}},
			{2, HeapTuple{HeapTupleHeader{1, HeapXmaxInvalid, 24}, heapTupleBytes(0, heapInt4(2))}},
		}
		if !b.InitPage || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("init %t tuples %v", b.InitPage, got)
		}
	})
	t.Run("hot_update", func(t *testing.T) {
		// update t set b = b + 1 where id = 1: key unchanged, no old key
		var b HeapUpdate
		if err := b.Decode(heapGolden(t, "hot_update", 0x00638F70)); err != nil {
			t.Fatal(err)
		}
		if !b.HOT || b.HasOldTuple || !b.HasNewTuple || b.OldBlock != 0 || b.NewBlock != 0 || b.PrefixLen != 0 || b.SuffixLen != 0 {
			t.Fatalf("got %+v", b)
		}
		want := HeapTupleHeader{Infomask2: 3 | HeapOnlyTuple, Infomask: xmaxInvalidVarwidth | HeapUpdated, Hoff: 24}
		if b.NewTuple.Header != want || !bytes.Equal(b.NewTuple.UserData(), bytes.Join([][]byte{heapInt4(1), heapVarlena1B("one"), heapInt4(11)}, nil)) {
			t.Fatalf("new tuple %+v % x", b.NewTuple.Header, b.NewTuple.Data)
		}
	})
	t.Run("update_key", func(t *testing.T) {
		// update t set id = 100 where id = 2 (row 2, NULL, 20): old key logged
		var b HeapUpdate
		if err := b.Decode(heapGolden(t, "update_key", 0x00638FF0)); err != nil {
			t.Fatal(err)
		}
		if b.HOT || !b.HasOldTuple || b.Flags != XLHUpdateContainsNewTuple|XLHUpdateContainsOldKey {
			t.Fatalf("got %+v", b)
		}
		if !bytes.Equal(b.NewTuple.Data, heapTupleBytes(0x05, heapInt4(100), heapInt4(20))) {
			t.Fatalf("new tuple % x", b.NewTuple.Data)
		}
		// The key tuple has all of t's attributes, only the key not NULL.
		if b.OldTuple.Header != (HeapTupleHeader{3, HeapHasNull, 24}) || !bytes.Equal(b.OldTuple.Data, heapTupleBytes(0x01, heapInt4(2))) {
			t.Fatalf("old key %+v % x", b.OldTuple.Header, b.OldTuple.Data)
		}
	})
	t.Run("hot_update_full", func(t *testing.T) {
		// replica identity full; update t set a = 'THREE' where id = 3
		var b HeapUpdate
		if err := b.Decode(heapGolden(t, "hot_update_full", 0x00639270)); err != nil {
			t.Fatal(err)
		}
		if !b.HOT || b.Flags != XLHUpdateContainsNewTuple|XLHUpdateContainsOldTuple {
			t.Fatalf("got %+v", b)
		}
		if !bytes.Equal(b.OldTuple.UserData(), bytes.Join([][]byte{heapInt4(3), heapVarlena1B("three"), pad4(2), heapInt4(30)}, nil)) ||
			!bytes.Equal(b.NewTuple.UserData(), bytes.Join([][]byte{heapInt4(3), heapVarlena1B("THREE"), pad4(2), heapInt4(30)}, nil)) {
			t.Fatalf("old % x new % x", b.OldTuple.Data, b.NewTuple.Data)
		}
	})
	t.Run("update_cross_page", func(t *testing.T) {
		// update w set id = 6 where id = 1: page 0 is full, the new version goes to page 1
		var b HeapUpdate
		if err := b.Decode(heapGolden(t, "update_cross_page", 0x00657BD8)); err != nil {
			t.Fatal(err)
		}
		if b.HOT || b.NewBlock != 1 || b.OldBlock != 0 || b.NewOffNum != 7 || b.OldOffNum != 1 {
			t.Fatalf("got %+v", b)
		}
		ud := b.NewTuple.UserData()
		// int 6, then text of 300 'x' with a 4-byte varlena header (304 << 2).
		if !bytes.Equal(ud[:8], heapLE(uint32(6), uint32(304<<2))) || len(ud) != 308 || strings.Trim(string(ud[8:]), "x") != "" {
			t.Fatalf("new user data % x", ud[:16])
		}
	})
	t.Run("delete_full", func(t *testing.T) {
		var b HeapDelete
		if err := b.Decode(heapGolden(t, "delete_full", 0x00639308)); err != nil {
			t.Fatal(err)
		}
		if !b.HasOldTuple || b.Flags != XLHDeleteContainsOldTuple || b.Xmax != 732 ||
			!bytes.Equal(b.OldTuple.UserData(), bytes.Join([][]byte{heapInt4(4), heapVarlena1B("four"), pad4(3), heapInt4(40)}, nil)) {
			t.Fatalf("got %+v % x", b, b.OldTuple.Data)
		}
	})
	t.Run("delete_key", func(t *testing.T) {
		var b HeapDelete
		if err := b.Decode(heapGolden(t, "delete_key", 0x00639540)); err != nil {
			t.Fatal(err)
		}
		if !b.HasOldTuple || b.Flags != XLHDeleteContainsOldKey || !bytes.Equal(b.OldTuple.Data, heapTupleBytes(0x01, heapInt4(5))) || !b.OldTuple.IsNull(2) {
			t.Fatalf("got %+v % x", b, b.OldTuple.Data)
		}
	})
	t.Run("delete_partition_move", func(t *testing.T) {
		var b HeapDelete
		if err := b.Decode(heapGolden(t, "delete_partition_move", 0x0064FB80)); err != nil {
			t.Fatal(err)
		}
		if !b.IsPartitionMove() || b.IsSuper() || b.HasOldTuple {
			t.Fatalf("got %+v", b)
		}
	})
	t.Run("insert_speculative", func(t *testing.T) {
		var b HeapInsert
		if err := b.Decode(heapGolden(t, "insert_speculative", 0x006395B0)); err != nil {
			t.Fatal(err)
		}
		if !b.IsSpeculative() || !bytes.Equal(b.Tuple.UserData(), bytes.Join([][]byte{heapInt4(200), heapVarlena1B("spec"), pad4(3), heapInt4(1)}, nil)) {
			t.Fatalf("got %+v % x", b, b.Tuple.Data)
		}
	})
	t.Run("truncate", func(t *testing.T) {
		var b HeapTruncate
		if err := b.Decode(heapGolden(t, "truncate", 0x00640CC0)); err != nil {
			t.Fatal(err)
		}
		if b.DbID != 5 || fmt.Sprint(b.AppendRelIDs(nil)) != "[16384 16392]" {
			t.Fatalf("got %+v", b)
		}
	})
	t.Run("inplace", func(t *testing.T) {
		// vacuum freeze w updates its pg_class row (relfilenode 1259) in place
		var b HeapInplace
		rec := heapGolden(t, "inplace", 0x0065A078)
		if err := b.Decode(rec); err != nil {
			t.Fatal(err)
		}
		if !b.HasTuple || b.Rel.RelNum != 1259 || len(b.UserData) != len(rec.Block(0).Data) || b.NumInvalMsgs != 0 {
			t.Fatalf("got %+v", b)
		}
		// pg_class starts with oid, relname (name, 64 bytes): this is w.
		if name, _, _ := strings.Cut(string(b.UserData[4:68]), "\x00"); name != "w" {
			t.Fatalf("relname %q", name)
		}
	})
	t.Run("insert_fpi_nodata", func(t *testing.T) {
		// wal_level=replica, first change after a checkpoint: image, no tuple
		var b HeapInsert
		rec := heapGolden(t, "insert_fpi_nodata", 0x006784D8)
		if err := b.Decode(rec); err != nil {
			t.Fatal(err)
		}
		if b.HasTuple || b.OffNum != 2 || !rec.Block(0).HasImage() || b.Tuple.Data != nil {
			t.Fatalf("got %+v", b)
		}
	})
	t.Run("hot_update_prefix_suffix", func(t *testing.T) {
		// wal_level=replica: 'a'*44 + '-0-' + 'b'*40 becomes ...'-1-'...
		var b HeapUpdate
		if err := b.Decode(heapGolden(t, "hot_update_prefix_suffix", 0x00678600)); err != nil {
			t.Fatal(err)
		}
		s := func(mid string) string { return strings.Repeat("a", 44) + "-" + mid + "-" + strings.Repeat("b", 40) }
		oldUD := append(heapInt4(1), heapVarlena1B(s("0"))...)
		newUD := append(heapInt4(1), heapVarlena1B(s("1"))...)
		// The common prefix runs through the '-' after the a's, the suffix
		// from the '-' before the b's.
		if !b.HasNewTuple || b.PrefixLen != 4+1+44+1 || b.SuffixLen != 1+40 || string(b.NewTuple.UserData()) != "1" {
			t.Fatalf("got %+v % x", b, b.NewTuple.Data)
		}
		got, err := b.NewUserData(nil, oldUD)
		if err != nil || !bytes.Equal(got, newUD) {
			t.Fatalf("NewUserData = % x, %v\nwant % x", got, err, newUD)
		}
	})
	t.Run("hot_update_fpi_prefix_nodata", func(t *testing.T) {
		// The writer chose prefix compression, then XLogInsert took an image
		// after all and dropped the data: the flag stays, the tuple is gone.
		var b HeapUpdate
		if err := b.Decode(heapGolden(t, "hot_update_fpi_prefix_nodata", 0x006787A0)); err != nil {
			t.Fatal(err)
		}
		if b.HasNewTuple || b.Flags != XLHUpdatePrefixFromOld || b.PrefixLen != 0 {
			t.Fatalf("got %+v", b)
		}
		if _, err := b.NewUserData(nil, nil); err == nil {
			t.Fatal("NewUserData without a logged tuple succeeded")
		}
	})
	t.Run("multi_insert_replica", func(t *testing.T) {
		var b HeapMultiInsert
		if err := b.Decode(heapGolden(t, "multi_insert_replica", 0x00678670)); err != nil {
			t.Fatal(err)
		}
		got := b.AppendTuples(nil)
		if !b.HasTuples || len(got) != 2 || got[0].OffNum != 4 || got[1].OffNum != 5 ||
			!bytes.Equal(got[1].Tuple.UserData(), append(heapInt4(4), heapVarlena1B("d")...)) {
			t.Fatalf("got %+v %v", b, got)
		}
	})
	t.Run("multi_insert_fpi_nodata", func(t *testing.T) {
		var b HeapMultiInsert
		if err := b.Decode(heapGolden(t, "multi_insert_fpi_nodata", 0x00678A70)); err != nil {
			t.Fatal(err)
		}
		if b.HasTuples || b.NTuples != 2 || b.OffNum(0) != 7 || b.OffNum(1) != 8 || len(b.AppendTuples(nil)) != 0 {
			t.Fatalf("got %+v", b)
		}
	})
	t.Run("new_cid", func(t *testing.T) {
		var b HeapNewCID
		if err := b.Decode(heapGolden(t, "new_cid", 0x00611C88)); err != nil {
			t.Fatal(err)
		}
		if b.TopXID != 724 || b.Target != (RelFileNode{1663, 5, 1247}) || b.TargetBlock != 14 || b.TargetOffNum != 10 {
			t.Fatalf("got %+v", b)
		}
	})
}
