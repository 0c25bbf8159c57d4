package wal

import "testing"

func TestStandbyLocks(t *testing.T) {
	main := xtBuf{}.i32(2).u32(809).u32(5).u32(16410).u32(810).u32(0).u32(1262)
	body, err := decodeStandbyBody(xtRec(t, RmgrStandby, XLogStandbyLock, 15, main))
	if err != nil {
		t.Fatal(err)
	}
	l := body.(*StandbyLocks)
	if l.Len() != 2 || l.At(0) != (StandbyLock{809, 5, 16410}) || l.At(1) != (StandbyLock{810, 0, 1262}) {
		t.Errorf("locks %d %+v", l.Len(), l.At(0))
	}
	var x StandbyLocks
	xtWantErr(t, x.Decode(xtRec(t, RmgrStandby, XLogStandbyLock, 15, xtBuf{}.i32(-3))), KindCorrupt, "standby lock", "negative locks count -3")
	xtWantErr(t, x.Decode(xtRec(t, RmgrStandby, XLogStandbyLock, 15, main[:20])), KindCorrupt, "2 locks")
	xtWantErr(t, x.Decode(xtRec(t, RmgrStandby, XLogStandbyLock, 15, nil)), KindCorrupt, "locks count needs 4 bytes")
}

func xtRunningXacts(xcnt, subxcnt int32, overflow uint8, xids ...uint32) xtBuf {
	b := xtBuf{}.i32(xcnt).i32(subxcnt).u8(overflow).zeros(3).u32(900).u32(819).u32(899)
	for _, x := range xids {
		b = b.u32(x)
	}
	return b
}

func TestRunningXacts(t *testing.T) {
	body, err := decodeStandbyBody(xtRec(t, RmgrStandby, XLogRunningXacts, 15, xtRunningXacts(2, 3, 0, 819, 830, 820, 822, 831)))
	if err != nil {
		t.Fatal(err)
	}
	r := body.(*RunningXacts)
	if r.NextXID != 900 || r.OldestRunningXID != 819 || r.LatestCompletedXID != 899 || r.SubxidOverflow {
		t.Errorf("%+v", r)
	}
	xids, subxids := r.Xids.AppendTo(nil), r.Subxids.AppendTo(nil)
	if len(xids) != 2 || xids[1] != 830 || len(subxids) != 3 || subxids[0] != 820 || subxids[2] != 831 {
		t.Errorf("xids %v subxids %v", xids, subxids)
	}
	var x RunningXacts
	if err := x.Decode(xtRec(t, RmgrStandby, XLogRunningXacts, 15, xtRunningXacts(1, 0, 1, 823))); err != nil || !x.SubxidOverflow || x.Subxids.Len() != 0 {
		t.Errorf("overflow: %v %+v", err, x)
	}
	xtWantErr(t, x.Decode(xtRec(t, RmgrStandby, XLogRunningXacts, 15, xtRunningXacts(1, 0, 0)[:23])), KindCorrupt, "running xacts", "needs 24 bytes")
	xtWantErr(t, x.Decode(xtRec(t, RmgrStandby, XLogRunningXacts, 15, xtRunningXacts(-1, 0, 0))), KindCorrupt, "negative count (xcnt -1")
	xtWantErr(t, x.Decode(xtRec(t, RmgrStandby, XLogRunningXacts, 15, xtRunningXacts(0, -2, 0))), KindCorrupt, "subxcnt -2")
	xtWantErr(t, x.Decode(xtRec(t, RmgrStandby, XLogRunningXacts, 15, xtRunningXacts(2, 0, 0, 1))), KindCorrupt, "2 xids")
	xtWantErr(t, x.Decode(xtRec(t, RmgrStandby, XLogRunningXacts, 15, xtRunningXacts(1, 2, 0, 1, 2))), KindCorrupt, "2 subxids")
}

func TestStandbyInvalidations(t *testing.T) {
	main := xtBuf{}.u32(5).u32(1663).u8(1).zeros(3).i32(1).inval(SharedInvalRelcacheID, 5, 16413)
	body, err := decodeStandbyBody(xtRec(t, RmgrStandby, XLogInvalidations, 15, main))
	if err != nil {
		t.Fatal(err)
	}
	v := body.(*StandbyInvalidations)
	if v.DbOid != 5 || v.TsOid != 1663 || !v.RelcacheInitFileInval || v.Msgs.Len() != 1 || v.Msgs.At(0).ObjOid != 16413 {
		t.Errorf("%+v", v)
	}
	var x StandbyInvalidations
	xtWantErr(t, x.Decode(xtRec(t, RmgrStandby, XLogInvalidations, 15, main[:11])), KindCorrupt, "standby invalidations", "needs 12 bytes")
	xtWantErr(t, x.Decode(xtRec(t, RmgrStandby, XLogInvalidations, 15, main[:14])), KindCorrupt, "count needs 4 bytes")
	xtWantErr(t, x.Decode(xtRec(t, RmgrStandby, XLogInvalidations, 15, main[:31])), KindCorrupt, "1 invalidation messages")
	xtWantErr(t, x.Decode(xtRec(t, RmgrStandby, XLogInvalidations, 15, xtBuf{}.zeros(12).i32(-1))), KindCorrupt, "negative invalidation messages count")
}

func TestStandbyUnknownOpcode(t *testing.T) {
	_, err := decodeStandbyBody(xtRec(t, RmgrStandby, 0x30, 15, xtBuf{}.zeros(24)))
	xtWantErr(t, err, KindUnsupported, "standby record: unknown info 0x30")
}
