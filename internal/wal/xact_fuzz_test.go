package wal

import (
	"errors"
	"testing"
)

var xtDispatchers = [...]struct {
	rmid   RmgrID
	decode func(*Record) (Body, error)
}{
	{RmgrXLOG, decodeXLOGBody},
	{RmgrXact, decodeXactBody},
	{RmgrSmgr, decodeSmgrBody},
	{RmgrRelMap, decodeRelMapBody},
	{RmgrStandby, decodeStandbyBody},
}

// xtTouch reads every lazily decoded item of a body, so that a Decode that
// accepted inconsistent counts panics here rather than in a caller.
func xtTouch(body Body) (n int) {
	xids := func(l XIDList) {
		for i := 0; i < l.Len(); i++ {
			n += int(l.At(i) & 1)
		}
		n += len(l.AppendTo(nil))
	}
	rels := func(l RelFileNodeList) {
		for i := 0; i < l.Len(); i++ {
			n += int(l.At(i).RelNum & 1)
		}
	}
	stats := func(l DroppedStatsList) {
		for i := 0; i < l.Len(); i++ {
			n += int(l.At(i).ObjID & 1)
		}
	}
	invals := func(l InvalMessages) {
		for i := 0; i < l.Len(); i++ {
			n += int(l.At(i).Kind)
		}
	}
	switch v := body.(type) {
	case *XactCommit:
		xids(v.Subxacts)
		rels(v.Rels)
		stats(v.DroppedStats)
		invals(v.Invals)
	case *XactAbort:
		xids(v.Subxacts)
		rels(v.Rels)
		stats(v.DroppedStats)
		invals(v.Invals)
	case *XactPrepare:
		xids(v.Subxacts)
		rels(v.CommitRels)
		rels(v.AbortRels)
		stats(v.CommitStats)
		stats(v.AbortStats)
		invals(v.Invals)
	case *XactAssignment:
		xids(v.Subxacts)
	case *XactInvalidations:
		invals(v.Msgs)
	case *StandbyLocks:
		for i := 0; i < v.Len(); i++ {
			n += int(v.At(i).XID & 1)
		}
	case *RunningXacts:
		xids(v.Xids)
		xids(v.Subxids)
	case *StandbyInvalidations:
		invals(v.Msgs)
	case *RelMapUpdate:
		for i := 0; i < v.Map.Len(); i++ {
			n += int(v.Map.At(i).MapOid & 1)
		}
		_, ok := v.Map.Lookup(1259)
		if ok {
			n++
		}
	}
	return n
}

// FuzzRmgrBodies feeds arbitrary main data to the five dispatchers under
// every layout: no panic, and every failure is a *Error at the record's LSN.
func FuzzRmgrBodies(f *testing.F) {
	for _, g := range xactGoldenRecords {
		rec := xtLoadGolden(f, g.name)
		for i, d := range xtDispatchers {
			if d.rmid == rec.Header.RmID {
				f.Add(uint8(i), rec.Header.Info, uint8(0), rec.MainData)
			}
		}
	}
	f.Add(uint8(1), uint8(XLogXactCommit|XLogXactHasInfo), uint8(3), []byte(xtCommitAllParts(xtStat16)))
	f.Add(uint8(1), uint8(XLogXactPrepare), uint8(0), []byte(xtPrepare(TwoPhaseMagic, "g\x00", 2, [6]int32{1, 1, 1, 1, 1, 1},
		xtBuf{}.u32(1), xtBuf{}.rel(xtRelA), xtBuf{}.rel(xtRelB), xtStat12(nil, 1, 2, 3), xtStat12(nil, 1, 2, 3), xtBuf{}.inval(1, 2, 3))))
	f.Add(uint8(3), uint8(XLogRelMapUpdate), uint8(1), []byte(append(xtBuf{}.u32(5).u32(1663).i32(528), xtRelMapFile(64, RelMapping{1, 2})...)))
	f.Add(uint8(0), uint8(XLogCheckpointRedo), uint8(2), []byte(xtBuf{}.i32(2)))
	f.Add(uint8(0), uint8(XLogEndOfRecovery), uint8(3), []byte(xtBuf{}.zeros(24)))

	f.Fuzz(func(t *testing.T, which, info, major uint8, main []byte) {
		d := xtDispatchers[int(which)%len(xtDispatchers)]
		rec := xtRec(t, d.rmid, info, 15+int(major%4), main)
		body, err := d.decode(rec)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.LSN != rec.LSN {
				t.Fatalf("error %v (%T) is not a *Error at %v", err, err, rec.LSN)
			}
			if body != nil {
				t.Fatalf("body %T returned with error", body)
			}
			return
		}
		if body == nil {
			t.Fatal("nil body without error")
		}
		xtTouch(body)
	})
}
