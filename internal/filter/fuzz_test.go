package filter

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"testing"

	"github.com/walshadow/walshadow/internal/wal"
)

var fixtureDir = filepath.Join("..", "wal", "testdata", "pg15", "wal")

// fuzzRecords splits fuzz input into records: each is a u16 length and that
// many bytes of a raw record, whose xl_tot_len and CRC are fixed up so that
// the fuzzer explores record layouts (rmid, info, block headers, main data)
// rather than checksums.
func fuzzRecords(data []byte, fn func(raw []byte)) {
	for len(data) >= 2 {
		n := int(binary.LittleEndian.Uint16(data))
		data = data[2:]
		n = min(n, len(data))
		raw := append([]byte(nil), data[:n]...)
		data = data[n:]
		if len(raw) < wal.RecordHeaderSize {
			continue
		}
		binary.LittleEndian.PutUint32(raw[0:], uint32(len(raw)))
		binary.LittleEndian.PutUint32(raw[20:], wal.RecordCRC(raw))
		fn(raw)
	}
}

func encodeFuzzRecords(raws ...[]byte) []byte {
	var out []byte
	for _, r := range raws {
		out = binary.LittleEndian.AppendUint16(out, uint16(len(r)))
		out = append(out, r...)
	}
	return out
}

// fixtureWindows returns runs of consecutive fixture records as fuzz seeds:
// VACUUM FULL pg_class (relmap, locks, pg_class rows), two-phase commits,
// savepoints and plain DDL.
func fixtureWindows(t testing.TB) [][]byte {
	r, err := wal.NewFileReader(fixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	windows := []struct{ from, to wal.LSN }{
		{0x700028, 0x700800}, // DDL commit, CREATE TABLE start
		{0x76AF50, 0x76DF00}, // abort, assignment, savepoints, 2PC
		{0x7A2480, 0x7A2900}, // VACUUM FULL pg_class: locks, storage, pg_class rows
		{0x7C6C00, 0x7C7800}, // relmap update and commit
	}
	out := make([][]byte, len(windows))
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) || wal.IsKind(err, wal.KindEndOfWAL) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for i, w := range windows {
			if rec.LSN >= w.from && rec.LSN < w.to && rec.Header.TotLen < 1<<15 {
				out[i] = append(out[i], encodeFuzzRecords(rec.Raw)...)
			}
		}
	}
	return out
}

// FuzzDecideRaw feeds raw records (fixture records, mutated) to one filter: it must never panic, and every error must name the LSN of the
// record that caused it.
func FuzzDecideRaw(f *testing.F) {
	for _, seed := range fixtureWindows(f) {
		f.Add(seed)
	}
	f.Add(encodeFuzzRecords(commitRec(0x100, 700, xactEnd{dbOid: followedDB, subxacts: []uint32{701}, invals: [][]byte{relcacheInval(followedDB, 0)}}).MainData))
	f.Fuzz(func(t *testing.T, data []byte) {
		flt := New(Config{DbOid: followedDB})
		lsn := wal.LSN(0x3000028)
		var rec wal.Record
		var failedAt wal.LSN // errors are sticky: later calls name the first failure
		fuzzRecords(data, func(raw []byte) {
			if err := wal.DecodeRecord(raw, lsn, pg15, &rec); err != nil {
				return
			}
			rec.End = lsn + wal.LSN(len(raw))
			rec.Next = wal.MaxAlign(rec.End)
			d, err := flt.Decide(&rec)
			if err != nil {
				if failedAt == 0 {
					failedAt = lsn
				}
				if !containsLSN(err, failedAt) {
					t.Fatalf("error does not name the LSN %s: %v", failedAt, err)
				}
			} else if d.Route == RouteNoop {
				if _, err := NoopRecord(nil, rec.Header.TotLen, rec.Header.XID, rec.Header.Prev); err != nil {
					t.Fatalf("NOOP route for a record of %d bytes: %v", rec.Header.TotLen, err)
				}
			}
			lsn = rec.Next + 8
		})
	})
}

// fuzzInput reads fields from fuzz input; past its end it yields zeros.
type fuzzInput struct{ b []byte }

func (r *fuzzInput) u8() uint8 {
	if len(r.b) == 0 {
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *fuzzInput) u16() uint16 { return uint16(r.u8()) | uint16(r.u8())<<8 }

func (r *fuzzInput) bytes(n int) []byte {
	n = min(n, len(r.b))
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// Interesting values the structured fuzzer picks from, so that records
// collide on databases, catalogs, tracked files and xids.
var (
	fuzzDBs  = [...]uint32{0, followedDB, 16390}
	fuzzRels = [...]uint32{1259, 1249, 2619, 2608, 16384, 16417, 16500, 17000}
)

// structuredRecord builds a record from fuzz input: rmid, info, xid, top-level
// xid, up to three blocks (database, relation, fork flags, data, image) and
// main data.
func structuredRecord(in *fuzzInput, lsn wal.LSN) *wal.Record {
	rm := wal.RmgrID(in.u8())
	if rm < 0xC0 {
		rm %= wal.RmgrMaxBuiltin + 1
	}
	info := in.u8()
	xid := uint32(in.u8() % 8)
	if xid != 0 {
		xid += 699
	}
	top := uint32(in.u8() % 8)
	if top != 0 {
		top += 699
	}
	var blocks []wal.BlockRef
	for i := uint8(0); i < in.u8()%4; i++ {
		sel := in.u8()
		b := wal.BlockRef{ID: i, ForkFlags: in.u8() & 0x03,
			Rel:      wal.RelFileNode{SpcOid: 1663, DbOid: fuzzDBs[int(sel)%len(fuzzDBs)], RelNum: fuzzRels[int(sel>>2)%len(fuzzRels)]},
			BlockNum: uint32(in.u8())}
		if n := int(in.u8()); n > 0 {
			b.Data = in.bytes(n)
			b.ForkFlags |= wal.BkpBlockHasData
		}
		if sel&0x80 != 0 {
			b.ForkFlags |= wal.BkpBlockHasImage
			b.Image = wal.BlockImage{Length: in.u16(), HoleOffset: in.u16(), Info: in.u8()}
			b.Image.HoleLength = wal.BlockSize - min(b.Image.Length, wal.BlockSize)
			b.ImageData = in.bytes(int(b.Image.Length))
		}
		blocks = append(blocks, b)
	}
	main := in.bytes(int(in.u16() % 1024))
	return rb{lsn: lsn, rm: rm, info: info, xid: xid, top: top, blocks: blocks, main: main}.rec()
}

// encodeStructured is structuredRecord's inverse for the seeds (xids 700..706,
// databases and relations from the tables above).
func encodeStructured(recs ...*wal.Record) []byte {
	idx := func(tab []uint32, v uint32) int {
		for i, x := range tab {
			if x == v {
				return i
			}
		}
		return 0
	}
	x := func(v uint32) uint8 {
		if v == 0 {
			return 0
		}
		return uint8(v - 699)
	}
	var out le
	for _, r := range recs {
		out = out.u8(uint8(r.Header.RmID)).u8(r.Header.Info).u8(x(r.Header.XID)).u8(x(r.TopLevelXID)).u8(uint8(len(r.Blocks)))
		for _, b := range r.Blocks {
			sel := uint8(idx(fuzzDBs[:], b.Rel.DbOid) | idx(fuzzRels[:], b.Rel.RelNum)<<2)
			out = out.u8(sel).u8(b.ForkFlags & 0x03).u8(uint8(b.BlockNum)).u8(uint8(len(b.Data)))
			out = append(out, b.Data...)
		}
		out = out.u16(uint16(len(r.MainData)))
		out = append(out, r.MainData...)
	}
	return out
}

// FuzzDecide feeds records with fuzzed rmid, info, blocks and main data to
// one filter: it must never panic, every error must name the LSN of the
// record that caused it, and a NOOP route is always rewritable.
func FuzzDecide(f *testing.F) {
	f.Add(encodeStructured(
		heapInsertRec(0, 700, rfn(followedDB, 1259), pgClassUserData(2608, 16500)),
		catalogInsert(0, 701),
		userInsert(0, 700),
		lockRec(0, 702, followedDB, 1259),
		smgrCreateRec(0, 702, rfn(followedDB, 17000), wal.ForkMain),
		fpiRec(0, 702, rfn(followedDB, 17000)),
		relmapRec(0, 702, followedDB, [2]uint32{1259, 17000}),
		commitRec(0, 702, xactEnd{dbOid: followedDB, invals: [][]byte{relcacheInval(followedDB, 16384)}}),
		assignmentRec(0, 700, 701),
		commitRec(0, 700, xactEnd{dbOid: followedDB, subxacts: []uint32{701}, invals: [][]byte{catcacheInval(36, followedDB)}}),
	))
	f.Add(encodeStructured(
		catalogInsert(0, 700),
		prepareRec(0, 700, 701),
		abortRec(0, 701, xactEnd{}),
		commitRec(0, 0, xactEnd{dbOid: followedDB, twoPhase: 700}),
		xactInvalsRec(0, 703, relcacheInval(followedDB, 0)),
		runningXactsRec(0, 705),
		heapUpdateRec(0, 704, rfn(followedDB, 1259), pgClassUserData(2608, 16417), 4, false),
		newCIDRec(0, 704, 703, rfn(followedDB, 2608)),
		abortRec(0, 703, xactEnd{subxacts: []uint32{704}, rels: []wal.RelFileNode{rfn(followedDB, 16417)}}),
	))
	f.Fuzz(func(t *testing.T, data []byte) {
		flt := New(Config{DbOid: followedDB})
		in := &fuzzInput{b: data}
		var failedAt wal.LSN
		for lsn := wal.LSN(0x5000028); len(in.b) > 0; lsn += 0x100 {
			rec := structuredRecord(in, lsn)
			d, err := flt.Decide(rec)
			if err != nil {
				if failedAt == 0 {
					failedAt = lsn
				}
				if !containsLSN(err, failedAt) {
					t.Fatalf("error does not name the LSN %s: %v", failedAt, err)
				}
				continue
			}
			if d.Route == RouteNoop {
				if _, err := NoopRecord(nil, rec.Header.TotLen, rec.Header.XID, rec.Header.Prev); err != nil {
					t.Fatalf("NOOP route for a record of %d bytes: %v", rec.Header.TotLen, err)
				}
			}
			if b := d.Boundary; b != nil && (b.NextLSN != rec.Next || b.DrainXID == 0) {
				t.Fatalf("boundary %+v for record at %s", *b, lsn)
			}
			if err := flt.trees.checkCounts(); err != nil {
				t.Fatalf("after the record at %s: %v", lsn, err)
			}
		}
	})
}

// checkCounts verifies that no tree undercounts its dirty or rewriting
// members, the direction that would lose a boundary or a catalog file.
// (Contradictory input, e.g. a commit listing another tree's subxact, may
// leave a count too high, which only costs a spurious boundary.)
func (t *xactTrees) checkCounts() error {
	dirty := map[uint32]int{}
	rewrite := map[uint32]int{}
	for x, s := range t.m {
		root := x
		if s.top != 0 {
			if s.dirtyCount != 0 || s.rewriteCount != 0 || len(s.subs) != 0 {
				return fmt.Errorf("subxact %d carries root state %+v", x, *s)
			}
			root = s.top
		}
		if s.dirty {
			dirty[root]++
		}
		if s.rewrite {
			rewrite[root]++
		}
	}
	for x, s := range t.m {
		if s.top != 0 {
			continue
		}
		if s.dirtyCount < dirty[x] || s.rewriteCount < rewrite[x] {
			return fmt.Errorf("root %d counts %d dirty / %d rewriting members, has %d / %d", x, s.dirtyCount, s.rewriteCount, dirty[x], rewrite[x])
		}
	}
	return nil
}
