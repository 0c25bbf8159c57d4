package wal

import "testing"

func TestSmgrCreate(t *testing.T) {
	body, err := decodeSmgrBody(xtRec(t, RmgrSmgr, XLogSmgrCreate, 15, xtBuf{}.rel(xtRelA).i32(int32(ForkVM))))
	if err != nil {
		t.Fatal(err)
	}
	if c := body.(*SmgrCreate); c.Rel != xtRelA || c.Fork != ForkVM {
		t.Errorf("%+v", c)
	}
	var c SmgrCreate
	xtWantErr(t, c.Decode(xtRec(t, RmgrSmgr, XLogSmgrCreate, 15, xtBuf{}.rel(xtRelA))), KindCorrupt, "smgr create", "needs 16 bytes")
	xtWantErr(t, c.Decode(xtRec(t, RmgrSmgr, XLogSmgrCreate, 15, xtBuf{}.rel(xtRelA).i32(4))), KindCorrupt, "fork number 4")
	xtWantErr(t, c.Decode(xtRec(t, RmgrSmgr, XLogSmgrCreate, 15, xtBuf{}.rel(xtRelA).i32(-1))), KindCorrupt, "fork number -1")
}

func TestSmgrTruncate(t *testing.T) {
	body, err := decodeSmgrBody(xtRec(t, RmgrSmgr, XLogSmgrTruncate, 15, xtBuf{}.u32(17).rel(xtRelA).i32(SmgrTruncateHeap|SmgrTruncateFSM)))
	if err != nil {
		t.Fatal(err)
	}
	tr := body.(*SmgrTruncate)
	if tr.BlkNo != 17 || tr.Rel != xtRelA || !tr.TruncatesHeap() || tr.TruncatesVM() || !tr.TruncatesFSM() {
		t.Errorf("%+v", tr)
	}
	var x SmgrTruncate
	xtWantErr(t, x.Decode(xtRec(t, RmgrSmgr, XLogSmgrTruncate, 15, xtBuf{}.u32(17).rel(xtRelA))), KindCorrupt, "smgr truncate", "needs 20 bytes")
}

func TestSmgrUnknownOpcode(t *testing.T) {
	for _, info := range []uint8{0x00, 0x30, 0xF0} {
		_, err := decodeSmgrBody(xtRec(t, RmgrSmgr, info, 15, xtBuf{}.zeros(20)))
		xtWantErr(t, err, KindUnsupported, "storage record: unknown info")
	}
}
