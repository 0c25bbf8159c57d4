package filter

import (
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/walshadow/walshadow/internal/wal"
)

// Hand-built records for unit tests. wal's own test builder is unexported,
// so these build wal.Record values directly: the body decoders only read
// the header, blocks, main data and layout.

const followedDB = 5

var pg15 = func() *wal.Layout {
	l, err := wal.LayoutForMajor(15)
	if err != nil {
		panic(err)
	}
	return l
}()

func rfn(db, rel uint32) wal.RelFileNode {
	return wal.RelFileNode{SpcOid: 1663, DbOid: db, RelNum: rel}
}

// rb builds one record.
type rb struct {
	lsn    wal.LSN
	rm     wal.RmgrID
	info   uint8
	xid    uint32
	top    uint32 // XLR_BLOCK_ID_TOPLEVEL_XID
	blocks []wal.BlockRef
	main   []byte
}

func (b rb) rec() *wal.Record {
	if b.lsn == 0 {
		b.lsn = 0x1000028
	}
	// xl_tot_len as XLogRecordAssemble would compute it.
	tot := uint32(wal.RecordHeaderSize + len(b.main))
	for i := range b.blocks {
		tot += 1 + 1 + 2 + 12 + 4 + uint32(len(b.blocks[i].Data)+len(b.blocks[i].ImageData))
		if b.blocks[i].HasImage() {
			tot += 5
		}
	}
	if b.top != 0 {
		tot += 5
	}
	switch {
	case len(b.main) > 255:
		tot += 5
	case len(b.main) > 0:
		tot += 2
	}
	return &wal.Record{
		LSN:         b.lsn,
		End:         b.lsn + wal.LSN(tot),
		Next:        wal.MaxAlign(b.lsn + wal.LSN(tot)),
		Header:      wal.RecordHeader{TotLen: tot, XID: b.xid, Info: b.info, RmID: b.rm},
		Layout:      pg15,
		Blocks:      b.blocks,
		MainData:    b.main,
		TopLevelXID: b.top,
	}
}

func block(id uint8, r wal.RelFileNode, data []byte) wal.BlockRef {
	fl := uint8(0)
	if len(data) > 0 {
		fl |= wal.BkpBlockHasData
	}
	return wal.BlockRef{ID: id, ForkFlags: fl, Rel: r, Data: data}
}

type le []byte

func (b le) u8(v uint8) le   { return append(b, v) }
func (b le) u16(v uint16) le { return binary.LittleEndian.AppendUint16(b, v) }
func (b le) u32(v uint32) le { return binary.LittleEndian.AppendUint32(b, v) }
func (b le) u64(v uint64) le { return binary.LittleEndian.AppendUint64(b, v) }
func (b le) pad(n int) le    { return append(b, make([]byte, n)...) }
func (b le) rel(r wal.RelFileNode) le {
	return b.u32(r.SpcOid).u32(r.DbOid).u32(r.RelNum)
}
func (b le) alignTo(n int) le {
	for len(b)%n != 0 {
		b = append(b, 0)
	}
	return b
}

// Invalidation messages (SharedInvalidationMessage, 16 bytes).
func relcacheInval(db, rel uint32) []byte {
	return le{}.u8(0xFE).pad(3).u32(db).u32(rel).pad(4)
}
func catcacheInval(id int8, db uint32) []byte {
	return le{}.u8(uint8(id)).pad(3).u32(db).u32(0xDEADBEEF).pad(4)
}
func catalogInval(db, cat uint32) []byte {
	return le{}.u8(0xFF).pad(3).u32(db).u32(cat).pad(4)
}
func snapshotInval(db, cat uint32) []byte {
	return le{}.u8(0xFB).pad(3).u32(db).u32(cat).pad(4)
}

// xactEnd describes a commit or abort record body.
type xactEnd struct {
	dbOid    uint32 // with DBINFO when non-zero
	subxacts []uint32
	rels     []wal.RelFileNode
	invals   [][]byte
	twoPhase uint32
}

func (e xactEnd) body(withInvals bool) (info uint8, main []byte) {
	var xinfo uint32
	if e.dbOid != 0 {
		xinfo |= wal.XactXinfoHasDBInfo
	}
	if len(e.subxacts) > 0 {
		xinfo |= wal.XactXinfoHasSubxacts
	}
	if len(e.rels) > 0 {
		xinfo |= wal.XactXinfoHasRelFileNodes
	}
	if withInvals && len(e.invals) > 0 {
		xinfo |= wal.XactXinfoHasInvals
	}
	if e.twoPhase != 0 {
		xinfo |= wal.XactXinfoHasTwoPhase
	}
	b := le{}.u64(123456).u32(xinfo)
	if e.dbOid != 0 {
		b = b.u32(e.dbOid).u32(1663)
	}
	if len(e.subxacts) > 0 {
		b = b.u32(uint32(len(e.subxacts)))
		for _, x := range e.subxacts {
			b = b.u32(x)
		}
	}
	if len(e.rels) > 0 {
		b = b.u32(uint32(len(e.rels)))
		for _, r := range e.rels {
			b = b.rel(r)
		}
	}
	if withInvals && len(e.invals) > 0 {
		b = b.u32(uint32(len(e.invals)))
		for _, m := range e.invals {
			b = append(b, m...)
		}
	}
	if e.twoPhase != 0 {
		b = b.u32(e.twoPhase)
	}
	return wal.XLogXactHasInfo, b
}

func commitRec(lsn wal.LSN, xid uint32, e xactEnd) *wal.Record {
	info, main := e.body(true)
	op := uint8(wal.XLogXactCommit)
	if e.twoPhase != 0 {
		op = wal.XLogXactCommitPrepared
	}
	return rb{lsn: lsn, rm: wal.RmgrXact, info: info | op, xid: xid, main: main}.rec()
}

func abortRec(lsn wal.LSN, xid uint32, e xactEnd) *wal.Record {
	info, main := e.body(false)
	op := uint8(wal.XLogXactAbort)
	if e.twoPhase != 0 {
		op = wal.XLogXactAbortPrepared
	}
	return rb{lsn: lsn, rm: wal.RmgrXact, info: info | op, xid: xid, main: main}.rec()
}

func assignmentRec(lsn wal.LSN, top uint32, subs ...uint32) *wal.Record {
	b := le{}.u32(top).u32(uint32(len(subs)))
	for _, s := range subs {
		b = b.u32(s)
	}
	return rb{lsn: lsn, rm: wal.RmgrXact, info: wal.XLogXactAssignment, xid: top, main: b}.rec()
}

func xactInvalsRec(lsn wal.LSN, xid uint32, msgs ...[]byte) *wal.Record {
	b := le{}.u32(uint32(len(msgs)))
	for _, m := range msgs {
		b = append(b, m...)
	}
	return rb{lsn: lsn, rm: wal.RmgrXact, info: wal.XLogXactInvalidations, xid: xid, main: b}.rec()
}

// prepareRec builds a PREPARE of xid with subxacts (xl_xact_prepare, 72
// bytes, then MAXALIGNed parts).
func prepareRec(lsn wal.LSN, xid uint32, subs ...uint32) *wal.Record {
	gid := []byte("g1\x00")
	b := le{}.u32(wal.TwoPhaseMagic).u32(0).u32(xid).u32(followedDB).u64(1).u32(10)
	b = b.u32(uint32(len(subs))).u32(0).u32(0).u32(0).u32(0).u32(0)
	b = b.u8(0).u8(0).u16(uint16(len(gid))).u64(0).u64(0)
	b = append(b, gid...).alignTo(8)
	for _, s := range subs {
		b = b.u32(s)
	}
	b = b.alignTo(8)
	return rb{lsn: lsn, rm: wal.RmgrXact, info: wal.XLogXactPrepare, xid: xid, main: b}.rec()
}

// pgClassUserData is a pg_class row prefix long enough for the filter.
func pgClassUserData(oid, relfilenode uint32) []byte {
	b := le{}.u32(oid)
	name := make([]byte, 64)
	copy(name, "rel")
	b = append(b, name...)
	b = b.u32(2200).u32(0).u32(0).u32(10).u32(2) // relnamespace .. relam
	b = b.u32(relfilenode)
	return b.pad(48) // the rest of the row, whatever it is
}

// heapTupleData is block data of an insert: xl_heap_header, then the tuple
// from offset 23 (one byte of padding to t_hoff 24), then the user data.
func heapTupleData(natts int, ud []byte) []byte {
	return append(le{}.u16(uint16(natts)).u16(0).u8(24).pad(1), ud...)
}

func heapInsertRec(lsn wal.LSN, xid uint32, r wal.RelFileNode, ud []byte) *wal.Record {
	return rb{lsn: lsn, rm: wal.RmgrHeap, info: wal.XLogHeapInsert, xid: xid,
		blocks: []wal.BlockRef{block(0, r, heapTupleData(33, ud))},
		main:   le{}.u16(1).u8(0)}.rec()
}

// heapUpdateRec builds an UPDATE on one page; prefix > 0 compresses the new
// tuple as PostgreSQL does for catalogs.
func heapUpdateRec(lsn wal.LSN, xid uint32, r wal.RelFileNode, ud []byte, prefix uint16, hot bool) *wal.Record {
	flags := uint8(0)
	var data le
	if prefix > 0 {
		flags |= wal.XLHUpdatePrefixFromOld
		data = data.u16(prefix)
		ud = ud[prefix:]
	}
	data = append(data, heapTupleData(33, ud)...)
	info := uint8(wal.XLogHeapUpdate)
	if hot {
		info = wal.XLogHeapHotUpdate
	}
	return rb{lsn: lsn, rm: wal.RmgrHeap, info: info, xid: xid,
		blocks: []wal.BlockRef{block(0, r, data)},
		main:   le{}.u32(0).u16(1).u8(0).u8(flags).u32(0).u16(2)}.rec()
}

func heapDeleteRec(lsn wal.LSN, xid uint32, r wal.RelFileNode) *wal.Record {
	return rb{lsn: lsn, rm: wal.RmgrHeap, info: wal.XLogHeapDelete, xid: xid,
		blocks: []wal.BlockRef{block(0, r, nil)},
		main:   le{}.u32(xid).u16(1).u8(0).u8(0)}.rec()
}

func relmapRec(lsn wal.LSN, xid, db uint32, maps ...[2]uint32) *wal.Record {
	file := le{}.u32(wal.RelMapperFileMagic).u32(uint32(len(maps)))
	for _, m := range maps {
		file = file.u32(m[0]).u32(m[1])
	}
	file = file.pad(8 + 62*8 - len(file))
	file = file.u32(crc32.Checksum(file, crc32.MakeTable(crc32.Castagnoli))).pad(4)
	b := append(le{}.u32(db).u32(1663).u32(uint32(len(file))), file...)
	return rb{lsn: lsn, rm: wal.RmgrRelMap, info: wal.XLogRelMapUpdate, xid: xid, main: b}.rec()
}

func lockRec(lsn wal.LSN, xid, db uint32, rels ...uint32) *wal.Record {
	b := le{}.u32(uint32(len(rels)))
	for _, r := range rels {
		b = b.u32(xid).u32(db).u32(r)
	}
	return rb{lsn: lsn, rm: wal.RmgrStandby, info: wal.XLogStandbyLock, xid: xid, main: b}.rec()
}

func smgrCreateRec(lsn wal.LSN, xid uint32, r wal.RelFileNode, fork wal.ForkNumber) *wal.Record {
	return rb{lsn: lsn, rm: wal.RmgrSmgr, info: wal.XLogSmgrCreate, xid: xid, main: le{}.rel(r).u32(uint32(fork))}.rec()
}

func runningXactsRec(lsn wal.LSN, oldest uint32) *wal.Record {
	b := le{}.u32(0).u32(0).u8(0).pad(3).u32(oldest + 10).u32(oldest).u32(oldest - 1)
	return rb{lsn: lsn, rm: wal.RmgrStandby, info: wal.XLogRunningXacts, main: b}.rec()
}

func fpiRec(lsn wal.LSN, xid uint32, rels ...wal.RelFileNode) *wal.Record {
	var blocks []wal.BlockRef
	for i, r := range rels {
		b := block(uint8(i), r, nil)
		b.ForkFlags |= wal.BkpBlockHasImage
		blocks = append(blocks, b)
	}
	return rb{lsn: lsn, rm: wal.RmgrXLOG, info: wal.XLogFPI, xid: xid, blocks: blocks}.rec()
}

func newCIDRec(lsn wal.LSN, xid, top uint32, target wal.RelFileNode) *wal.Record {
	b := le{}.u32(top).u32(0).u32(0).u32(0).rel(target).u16(0).u16(1).u16(1)
	return rb{lsn: lsn, rm: wal.RmgrHeap2, info: wal.XLogHeap2NewCID, xid: xid, main: b}.rec()
}

// mustDecide feeds rec and fails the test on error.
func mustDecide(t *testing.T, f *Filter, rec *wal.Record) Decision {
	t.Helper()
	d, err := f.Decide(rec)
	if err != nil {
		t.Fatalf("Decide(%s %s info 0x%02X): %v", rec.LSN, rec.Header.RmID, rec.Header.Info, err)
	}
	return d
}
