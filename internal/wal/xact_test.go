package wal

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

// xtLSNTest is the LSN of every hand-built record; errors must name it.
const xtLSNTest LSN = 0x1_2345_6780

// xtBuf builds little-endian main data.
type xtBuf []byte

func (b xtBuf) u8(v uint8) xtBuf   { return append(b, v) }
func (b xtBuf) u16(v uint16) xtBuf { return binary.LittleEndian.AppendUint16(b, v) }
func (b xtBuf) u32(v uint32) xtBuf { return binary.LittleEndian.AppendUint32(b, v) }
func (b xtBuf) i32(v int32) xtBuf  { return b.u32(uint32(v)) }
func (b xtBuf) u64(v uint64) xtBuf { return binary.LittleEndian.AppendUint64(b, v) }
func (b xtBuf) str(s string) xtBuf { return append(b, s...) }
func (b xtBuf) rel(r RelFileNode) xtBuf {
	return b.u32(r.SpcOid).u32(r.DbOid).u32(r.RelNum)
}
func (b xtBuf) zeros(n int) xtBuf { return append(b, make([]byte, n)...) }

// pad zero-fills to the next MAXALIGN boundary.
func (b xtBuf) pad() xtBuf { return b.zeros(MaxAlign(len(b)) - len(b)) }

// inval appends one 16-byte SharedInvalidationMessage {id, a@4, b@8}.
func (b xtBuf) inval(id int8, a, c uint32) xtBuf {
	return b.u8(uint8(id)).zeros(3).u32(a).u32(c).zeros(4)
}

// xtRec wraps main data in a record of the given rmgr, info and major.
func xtRec(t testing.TB, rmid RmgrID, info uint8, major int, main []byte) *Record {
	t.Helper()
	layout, err := LayoutForMajor(major)
	if err != nil {
		t.Fatal(err)
	}
	return &Record{
		LSN:      xtLSNTest,
		Header:   RecordHeader{TotLen: uint32(RecordHeaderSize + 2 + len(main)), Info: info, RmID: rmid},
		Layout:   layout,
		MainData: main,
	}
}

// xtWantErr checks that err is a *Error of kind naming xtLSNTest and
// mentioning every fragment.
func xtWantErr(t *testing.T, err error, kind ErrorKind, fragments ...string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T), want *Error", err, err)
	}
	if e.Kind != kind || e.LSN != xtLSNTest {
		t.Errorf("error %q: kind %v at %v, want %v at %v", err, e.Kind, e.LSN, kind, xtLSNTest)
	}
	for _, f := range fragments {
		if !strings.Contains(e.Error(), f) {
			t.Errorf("error %q does not mention %q", err, f)
		}
	}
}

var (
	xtRelA = RelFileNode{1663, 5, 16384}
	xtRelB = RelFileNode{1664, 0, 1262}
)

// xtCommitAllParts is a PG15 commit with every optional part; the GID's
// odd length leaves the origin unaligned.
func xtCommitAllParts(statItem func(xtBuf, int32, uint32, uint64) xtBuf) xtBuf {
	xinfo := uint32(XactXinfoHasDBInfo | XactXinfoHasSubxacts | XactXinfoHasRelFileNodes |
		XactXinfoHasDroppedStats | XactXinfoHasInvals | XactXinfoHasTwoPhase | XactXinfoHasGID |
		XactXinfoHasOrigin | XactXinfoHasAELocks | XactCompletionForceSyncCommit | XactCompletionUpdateRelcacheFile)
	b := xtBuf{}.u64(789_000_000_123).u32(xinfo).
		u32(5).u32(1663).
		i32(3).u32(901).u32(902).u32(903).
		i32(2).rel(xtRelA).rel(xtRelB)
	b = statItem(b.i32(1), 2, 5, 16384)
	b = b.i32(2).inval(55, 5, 0xDEADBEEF).inval(SharedInvalRelcacheID, 5, 16384).
		u32(900).str("g1x").u8(0).
		u64(0xABCDEF01).u64(123456)
	return b
}

func xtStat12(b xtBuf, kind int32, db uint32, obj uint64) xtBuf {
	return b.i32(kind).u32(db).u32(uint32(obj))
}

func xtStat16(b xtBuf, kind int32, db uint32, obj uint64) xtBuf {
	return b.i32(kind).u32(db).u32(uint32(obj)).u32(uint32(obj >> 32))
}

func TestXactCommitAllParts(t *testing.T) {
	rec := xtRec(t, RmgrXact, XLogXactCommitPrepared|XLogXactHasInfo, 15, xtCommitAllParts(xtStat12))
	body, err := decodeXactBody(rec)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := body.(*XactCommit)
	if !ok {
		t.Fatalf("body %T", body)
	}
	if c.Op != XLogXactCommitPrepared || !c.IsPrepared() || c.XactTime != 789_000_000_123 {
		t.Errorf("op %#x time %d", c.Op, c.XactTime)
	}
	if !c.HasInfo(XactXinfoHasAELocks) || !c.RelcacheInitFileInval() || c.Xinfo&XactCompletionForceSyncCommit == 0 {
		t.Errorf("xinfo %#x", c.Xinfo)
	}
	if c.DbOid != 5 || c.TsOid != 1663 {
		t.Errorf("dbinfo %d/%d", c.DbOid, c.TsOid)
	}
	if got := c.Subxacts.AppendTo(nil); len(got) != 3 || got[0] != 901 || got[2] != 903 || !c.Subxacts.Contains(902) || c.Subxacts.Contains(900) {
		t.Errorf("subxacts %v", got)
	}
	if c.Rels.Len() != 2 || c.Rels.At(0) != xtRelA || c.Rels.At(1) != xtRelB {
		t.Errorf("rels %d", c.Rels.Len())
	}
	if c.DroppedStats.Len() != 1 || c.DroppedStats.At(0) != (DroppedStat{2, 5, 16384}) {
		t.Errorf("stats %d", c.DroppedStats.Len())
	}
	if c.Invals.Len() != 2 || c.Invals.At(0).HashValue != 0xDEADBEEF || c.Invals.At(1).ObjOid != 16384 {
		t.Errorf("invals %d", c.Invals.Len())
	}
	if c.TwoPhaseXID != 900 || string(c.GID) != "g1x" || c.OriginLSN != 0xABCDEF01 || c.OriginTime != 123456 {
		t.Errorf("2pc %d %q origin %v %d", c.TwoPhaseXID, c.GID, c.OriginLSN, c.OriginTime)
	}
}

func TestXactCommitPG18(t *testing.T) {
	// PG18: 16-byte stats items with a 64-bit object id, and relsync
	// invalidation messages.
	main := xtBuf{}.u64(1).u32(XactXinfoHasDroppedStats|XactXinfoHasInvals).
		i32(1).i32(7).u32(5).u32(0x89ABCDEF).u32(0x01234567).
		i32(1).inval(SharedInvalRelSyncID, 5, 16390)
	var c XactCommit
	if err := c.Decode(xtRec(t, RmgrXact, XLogXactHasInfo, 18, main)); err != nil {
		t.Fatal(err)
	}
	if s := c.DroppedStats.At(0); c.DroppedStats.Len() != 1 || s != (DroppedStat{7, 5, 0x01234567_89ABCDEF}) {
		t.Errorf("stats %+v", s)
	}
	if m := c.Invals.At(0); m.Kind != InvalRelSync || m.DbOid != 5 || m.ObjOid != 16390 {
		t.Errorf("inval %+v", m)
	}
	// The same bytes on PG15 read a 12-byte item, so the messages start
	// 4 bytes early and the count lands on garbage.
	err := c.Decode(xtRec(t, RmgrXact, XLogXactHasInfo, 15, main))
	xtWantErr(t, err, KindCorrupt, "xact commit")
}

func TestXactCommitWithoutInfo(t *testing.T) {
	// Without XLOG_XACT_HAS_INFO only xact_time is read, whatever follows.
	main := xtBuf{}.u64(42).u32(0xFFFFFFFF)
	var c XactCommit
	if err := c.Decode(xtRec(t, RmgrXact, XLogXactCommit, 15, main)); err != nil {
		t.Fatal(err)
	}
	if c.XactTime != 42 || c.Xinfo != 0 || c.Subxacts.Len() != 0 {
		t.Errorf("%+v", c)
	}
}

func TestXactAbortIgnoresInvalsBit(t *testing.T) {
	// ParseAbortRecord never reads messages: with HAS_INVALS set the next
	// word is still the two-phase xid.
	main := xtBuf{}.u64(7).u32(XactXinfoHasInvals | XactXinfoHasTwoPhase | XactXinfoHasGID | XactXinfoHasSubxacts).
		i32(1).u32(77).u32(76).str("gid").u8(0)
	body, err := decodeXactBody(xtRec(t, RmgrXact, XLogXactAbortPrepared|XLogXactHasInfo, 15, main))
	if err != nil {
		t.Fatal(err)
	}
	a := body.(*XactAbort)
	if a.Op != XLogXactAbortPrepared || a.TwoPhaseXID != 76 || string(a.GID) != "gid" || a.Invals.Len() != 0 || a.Subxacts.At(0) != 77 {
		t.Errorf("%+v", a)
	}
	// A plain abort of a subtransaction.
	body, err = decodeXactBody(xtRec(t, RmgrXact, XLogXactAbort, 15, xtBuf{}.u64(8)))
	if err != nil || body.(*XactAbort).IsPrepared() {
		t.Errorf("%v %+v", err, body)
	}
}

func TestXactCommitErrors(t *testing.T) {
	head := func(xinfo uint32) xtBuf { return xtBuf{}.u64(1).u32(xinfo) }
	cases := []struct {
		name  string
		info  uint8
		major int
		main  xtBuf
		frags []string
	}{
		{"empty", XLogXactCommit, 15, nil, []string{"xact_time needs 8 bytes"}},
		{"short xinfo", XLogXactCommit | XLogXactHasInfo, 15, xtBuf{}.u64(1).u16(1), []string{"xinfo"}},
		{"short dbinfo", XLogXactCommit | XLogXactHasInfo, 15, head(XactXinfoHasDBInfo).u32(5), []string{"dbinfo"}},
		{"missing subxacts count", XLogXactCommit | XLogXactHasInfo, 15, head(XactXinfoHasSubxacts).u16(0), []string{"subxacts count"}},
		{"negative subxacts", XLogXactCommit | XLogXactHasInfo, 15, head(XactXinfoHasSubxacts).i32(-1), []string{"negative subxacts count -1"}},
		{"subxacts exceed data", XLogXactCommit | XLogXactHasInfo, 15, head(XactXinfoHasSubxacts).i32(3).u32(1).u32(2), []string{"3 subxacts"}},
		{"huge subxacts", XLogXactCommit | XLogXactHasInfo, 15, head(XactXinfoHasSubxacts).i32(0x7FFFFFFF), []string{"2147483647 subxacts"}},
		{"rels exceed data", XLogXactCommit | XLogXactHasInfo, 15, head(XactXinfoHasRelFileNodes).i32(2).rel(xtRelA), []string{"2 relfilenodes"}},
		{"stats exceed data", XLogXactCommit | XLogXactHasInfo, 15, head(XactXinfoHasDroppedStats).i32(1).zeros(8), []string{"1 dropped stats of 12 bytes"}},
		{"stats exceed data pg18", XLogXactCommit | XLogXactHasInfo, 18, head(XactXinfoHasDroppedStats).i32(1).zeros(12), []string{"of 16 bytes"}},
		{"negative invals", XLogXactCommit | XLogXactHasInfo, 15, head(XactXinfoHasInvals).i32(-5), []string{"negative invalidation messages count"}},
		{"invals exceed data", XLogXactCommit | XLogXactHasInfo, 15, head(XactXinfoHasInvals).i32(2).inval(1, 0, 0), []string{"2 invalidation messages"}},
		{"bad inval id", XLogXactCommit | XLogXactHasInfo, 15, head(XactXinfoHasInvals).i32(1).inval(-6, 0, 0), []string{"unrecognized id -6"}},
		{"bad inval id pg18", XLogXactCommit | XLogXactHasInfo, 18, head(XactXinfoHasInvals).i32(1).inval(-7, 0, 0), []string{"unrecognized id -7"}},
		{"short twophase", XLogXactCommitPrepared | XLogXactHasInfo, 15, head(XactXinfoHasTwoPhase).u16(1), []string{"twophase xid"}},
		{"gid without NUL", XLogXactCommitPrepared | XLogXactHasInfo, 15, head(XactXinfoHasTwoPhase | XactXinfoHasGID).u32(9).str("abc"), []string{"GID", "no terminating NUL"}},
		{"short origin", XLogXactCommit | XLogXactHasInfo, 15, head(XactXinfoHasOrigin).u64(1).u32(2), []string{"origin needs 16 bytes"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body, err := decodeXactBody(xtRec(t, RmgrXact, tc.info, tc.major, tc.main))
			if body != nil {
				t.Errorf("body %T returned with error", body)
			}
			xtWantErr(t, err, KindCorrupt, tc.frags...)
		})
	}
	// The same parts of an abort record.
	_, err := decodeXactBody(xtRec(t, RmgrXact, XLogXactAbort|XLogXactHasInfo, 15, head(XactXinfoHasSubxacts).i32(-1)))
	xtWantErr(t, err, KindCorrupt, "xact abort", "negative subxacts count")
}

func TestXactCommitNeedsLayout(t *testing.T) {
	rec := xtRec(t, RmgrXact, XLogXactCommit, 15, xtBuf{}.u64(1))
	rec.Layout = nil
	_, err := decodeXactBody(rec)
	xtWantErr(t, err, KindUnsupported, "no layout")
}

// xtPrepare builds a PREPARE main data: header, then each part padded.
func xtPrepare(magic uint32, gid string, gidLen int, counts [6]int32, parts ...xtBuf) xtBuf {
	b := xtBuf{}.u32(magic).u32(0).u32(815).u32(5).u64(777).u32(10)
	for _, n := range counts {
		b = b.i32(n)
	}
	b = b.u8(1).u8(0).u16(uint16(gidLen)).u64(0x1000).u64(99)
	b = b.str(gid).pad()
	for _, p := range parts {
		b = append(b, p...).pad()
	}
	return b
}

func TestXactPrepare(t *testing.T) {
	parts := []xtBuf{
		xtBuf{}.u32(816),                              // subxacts
		xtBuf{}.rel(xtRelA),                           // commit rels
		xtBuf{}.rel(xtRelB).rel(xtRelA),               // abort rels
		xtStat12(nil, 2, 5, 1),                        // commit stats
		xtStat12(xtStat12(nil, 2, 5, 2), 3, 0, 3),     // abort stats
		xtBuf{}.inval(SharedInvalRelmapID, 5, 0xFFFF), // invals
		xtBuf{}.u32(0).u8(0).u8(0).u16(0),             // 2PC end sentinel
	}
	main := xtPrepare(TwoPhaseMagic, "gid_x\x00", 6, [6]int32{1, 1, 2, 1, 2, 1}, parts...)
	binary.LittleEndian.PutUint32(main[4:], uint32(len(main)+4))
	body, err := decodeXactBody(xtRec(t, RmgrXact, XLogXactPrepare, 15, main))
	if err != nil {
		t.Fatal(err)
	}
	p := body.(*XactPrepare)
	if p.XID != 815 || p.DbOid != 5 || p.PreparedAt != 777 || p.Owner != 10 || !p.InitFileInval || string(p.GID) != "gid_x" {
		t.Errorf("header %+v", p)
	}
	if int(p.TotalLen) != len(main)+4 || p.OriginLSN != 0x1000 || p.OriginTime != 99 {
		t.Errorf("total_len %d origin %v %d", p.TotalLen, p.OriginLSN, p.OriginTime)
	}
	if p.Subxacts.Len() != 1 || p.Subxacts.At(0) != 816 {
		t.Errorf("subxacts %d", p.Subxacts.Len())
	}
	if p.CommitRels.Len() != 1 || p.CommitRels.At(0) != xtRelA || p.AbortRels.Len() != 2 || p.AbortRels.At(0) != xtRelB {
		t.Errorf("rels %d %d", p.CommitRels.Len(), p.AbortRels.Len())
	}
	if p.CommitStats.Len() != 1 || p.AbortStats.Len() != 2 || p.AbortStats.At(1) != (DroppedStat{3, 0, 3}) {
		t.Errorf("stats %d %d", p.CommitStats.Len(), p.AbortStats.Len())
	}
	if m := p.Invals.At(0); p.Invals.Len() != 1 || m.Kind != InvalRelmap || m.DbOid != 5 || m.ObjOid != 0 {
		t.Errorf("invals %+v", m)
	}
	if len(p.TwoPhaseData) != 8 {
		t.Errorf("2PC data % x", p.TwoPhaseData)
	}

	// PG18: 16-byte stats items.
	main = xtPrepare(TwoPhaseMagic, "g\x00", 2, [6]int32{0, 0, 0, 1, 0, 0}, xtStat16(nil, 9, 5, 1<<40))
	var p18 XactPrepare
	if err := p18.Decode(xtRec(t, RmgrXact, XLogXactPrepare, 18, main)); err != nil {
		t.Fatal(err)
	}
	if p18.CommitStats.At(0) != (DroppedStat{9, 5, 1 << 40}) || p18.TwoPhaseData != nil {
		t.Errorf("pg18 %+v % x", p18.CommitStats.At(0), p18.TwoPhaseData)
	}
}

func TestXactPrepareErrors(t *testing.T) {
	ok := [6]int32{}
	cases := []struct {
		name  string
		main  xtBuf
		frags []string
	}{
		{"short header", xtPrepare(TwoPhaseMagic, "g\x00", 2, ok)[:71], []string{"xl_xact_prepare needs 72 bytes"}},
		{"bad magic", xtPrepare(0x57F94535, "g\x00", 2, ok), []string{"magic 0x57F94535"}},
		{"negative count", xtPrepare(TwoPhaseMagic, "g\x00", 2, [6]int32{0, 0, -2, 0, 0, 0}), []string{"negative count -2 at offset 36"}},
		{"gid without NUL", xtPrepare(TwoPhaseMagic, "gid", 3, ok), []string{"GID of 3 bytes is not NUL-terminated"}},
		{"zero gidlen", xtPrepare(TwoPhaseMagic, "", 0, ok), []string{"GID of 0 bytes"}},
		{"gid past end", xtPrepare(TwoPhaseMagic, "g\x00", 200, ok), []string{"200 GID bytes"}},
		{"subxacts past end", xtPrepare(TwoPhaseMagic, "g\x00", 2, [6]int32{3, 0, 0, 0, 0, 0}, xtBuf{}.u32(1)), []string{"3 subxacts"}},
		{"abort rels past end", xtPrepare(TwoPhaseMagic, "g\x00", 2, [6]int32{0, 0, 1, 0, 0, 0}), []string{"1 abort relfilenodes"}},
		{"stats past end", xtPrepare(TwoPhaseMagic, "g\x00", 2, [6]int32{0, 0, 0, 0, 3, 0}, xtBuf{}.zeros(24)), []string{"3 abort dropped stats"}},
		{"invals past end", xtPrepare(TwoPhaseMagic, "g\x00", 2, [6]int32{0, 0, 0, 0, 0, 1}, xtBuf{}.zeros(8)), []string{"1 invalidation messages"}},
		{"bad inval id", xtPrepare(TwoPhaseMagic, "g\x00", 2, [6]int32{0, 0, 0, 0, 0, 1}, xtBuf{}.inval(-100, 0, 0)), []string{"unrecognized id -100"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var p XactPrepare
			xtWantErr(t, p.Decode(xtRec(t, RmgrXact, XLogXactPrepare, 15, tc.main)), KindCorrupt, tc.frags...)
		})
	}
}

func TestXactAssignment(t *testing.T) {
	body, err := decodeXactBody(xtRec(t, RmgrXact, XLogXactAssignment, 15, xtBuf{}.u32(823).i32(2).u32(824).u32(825)))
	if err != nil {
		t.Fatal(err)
	}
	a := body.(*XactAssignment)
	if a.XTop != 823 || a.Subxacts.Len() != 2 || a.Subxacts.At(1) != 825 {
		t.Errorf("%+v", a)
	}
	var x XactAssignment
	xtWantErr(t, x.Decode(xtRec(t, RmgrXact, XLogXactAssignment, 15, xtBuf{}.u16(1))), KindCorrupt, "xact assignment", "xtop")
	xtWantErr(t, x.Decode(xtRec(t, RmgrXact, XLogXactAssignment, 15, xtBuf{}.u32(1).i32(-1))), KindCorrupt, "negative subxacts count")
	xtWantErr(t, x.Decode(xtRec(t, RmgrXact, XLogXactAssignment, 15, xtBuf{}.u32(1).i32(2).u32(5))), KindCorrupt, "2 subxacts")
}

func TestXactInvalidations(t *testing.T) {
	main := xtBuf{}.i32(2).inval(SharedInvalCatalogID, 5, 2608).inval(SharedInvalSnapshotID, 5, 2608)
	body, err := decodeXactBody(xtRec(t, RmgrXact, XLogXactInvalidations, 15, main))
	if err != nil {
		t.Fatal(err)
	}
	v := body.(*XactInvalidations)
	if v.Msgs.Len() != 2 || v.Msgs.At(0).Kind != InvalCatalog || v.Msgs.At(1).Kind != InvalSnapshot || len(v.Msgs.Bytes()) != 32 {
		t.Errorf("%+v", v)
	}
	var x XactInvalidations
	xtWantErr(t, x.Decode(xtRec(t, RmgrXact, XLogXactInvalidations, 15, xtBuf{}.i32(-1))), KindCorrupt, "negative invalidation messages count")
	xtWantErr(t, x.Decode(xtRec(t, RmgrXact, XLogXactInvalidations, 15, main[:20])), KindCorrupt, "2 invalidation messages")
	xtWantErr(t, x.Decode(xtRec(t, RmgrXact, XLogXactInvalidations, 15, nil)), KindCorrupt, "count needs 4 bytes")
}

func TestXactUnknownOpcode(t *testing.T) {
	for _, info := range []uint8{0x70, 0xF0} {
		body, err := decodeXactBody(xtRec(t, RmgrXact, info, 15, xtBuf{}.u64(1)))
		if body != nil {
			t.Errorf("body %T", body)
		}
		xtWantErr(t, err, KindUnsupported, "transaction record", "unknown info 0x")
	}
}
