package wal

import (
	"reflect"
	"testing"
)

// xtCheckpoint builds a CheckPoint whose fields hold distinct values, with
// walLevel at offset 20 (padding before PG17).
func xtCheckpoint(walLevel uint32) xtBuf {
	return xtBuf{}.u64(0x6055958).u32(3).u32(2).u8(1).zeros(3).u32(walLevel).
		u64(7<<32 | 823).u32(24602).u32(11).u32(12).u32(716).u32(1).u32(13).u32(14).zeros(4).
		u64(1_790_000_000).u32(15).u32(16).u32(819).zeros(4)
}

func TestCheckpoint(t *testing.T) {
	main := xtCheckpoint(2)
	if len(main) != 88 {
		t.Fatalf("checkpoint vector is %d bytes", len(main))
	}
	want := Checkpoint{
		Shutdown: true, Redo: 0x6055958, ThisTimeLineID: 3, PrevTimeLineID: 2, FullPageWrites: true,
		WalLevel: WalLevelUnknown, NextXID: 7<<32 | 823, NextOID: 24602, NextMulti: 11, NextMultiOffset: 12,
		OldestXID: 716, OldestXIDDB: 1, OldestMulti: 13, OldestMultiDB: 14, Time: 1_790_000_000,
		OldestCommitTs: 15, NewestCommitTs: 16, OldestActiveXID: 819,
	}
	for _, major := range []int{15, 16} {
		body, err := decodeXLOGBody(xtRec(t, RmgrXLOG, XLogCheckpointShutdown, major, main))
		if err != nil {
			t.Fatal(err)
		}
		if got := *body.(*Checkpoint); got != want {
			t.Errorf("PG%d:\n got %+v\nwant %+v", major, got, want)
		}
	}
	want.Shutdown, want.WalLevel = false, WalLevelLogical
	for _, major := range []int{17, 18} {
		body, err := decodeXLOGBody(xtRec(t, RmgrXLOG, XLogCheckpointOnline, major, main))
		if err != nil {
			t.Fatal(err)
		}
		if got := *body.(*Checkpoint); got != want || got.NextXIDEpoch() != 7 {
			t.Errorf("PG%d:\n got %+v\nwant %+v", major, got, want)
		}
	}
	var c Checkpoint
	xtWantErr(t, c.Decode(xtRec(t, RmgrXLOG, XLogCheckpointOnline, 15, main[:87])), KindCorrupt, "checkpoint", "needs 88 bytes")
	rec := xtRec(t, RmgrXLOG, XLogCheckpointOnline, 15, main)
	rec.Layout = nil
	xtWantErr(t, c.Decode(rec), KindUnsupported, "no layout")
}

func TestXLOGSmallRecords(t *testing.T) {
	restore := xtBuf{}.u64(5555).str("rp_one").zeros(64 - 6)
	cases := []struct {
		name  string
		info  uint8
		major int
		main  xtBuf
		want  Body
	}{
		{"noop", XLogNoop, 15, xtBuf{}.str("hidden!"), &Noop{TotLen: RecordHeaderSize + 2 + 7, Data: []byte("hidden!")}},
		{"noop empty", XLogNoop, 15, nil, &Noop{TotLen: RecordHeaderSize + 2}},
		{"nextoid", XLogNextOID, 15, xtBuf{}.u32(24602), &NextOID{24602}},
		{"switch", XLogSwitch, 15, nil, &Switch{}},
		{"backup end", XLogBackupEnd, 15, xtBuf{}.u64(0x7000028), &BackupEnd{0x7000028}},
		{"parameter change", XLogParameterChange, 15, xtBuf{}.i32(80).i32(8).i32(10).i32(10).i32(64).i32(2).u8(1).u8(0).zeros(2),
			&ParameterChange{80, 8, 10, 10, 64, WalLevelLogical, true, false}},
		{"restore point", XLogRestorePoint, 15, restore, &RestorePoint{5555, []byte("rp_one")}},
		{"fpw change", XLogFPWChange, 15, xtBuf{}.u8(0), &FPWChange{false}},
		{"end of recovery 15", XLogEndOfRecovery, 15, xtBuf{}.u64(99).u32(2).u32(1), &EndOfRecovery{99, 2, 1, WalLevelUnknown}},
		{"end of recovery 17", XLogEndOfRecovery, 17, xtBuf{}.u64(99).u32(2).u32(1).i32(1).zeros(4), &EndOfRecovery{99, 2, 1, WalLevelReplica}},
		{"fpi", XLogFPI, 15, nil, &FPI{}},
		{"fpi for hint", XLogFPIForHint, 15, nil, &FPI{ForHint: true}},
		{"overwrite contrecord", XLogOverwriteContrecord, 15, xtBuf{}.u64(0x5FFFF00).u64(77), &OverwriteContrecord{0x5FFFF00, 77}},
		{"checkpoint redo", XLogCheckpointRedo, 17, xtBuf{}.i32(1), &CheckpointRedo{WalLevelReplica}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeXLOGBody(xtRec(t, RmgrXLOG, tc.info, tc.major, tc.main))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestXLOGErrors(t *testing.T) {
	cases := []struct {
		name  string
		info  uint8
		major int
		main  xtBuf
		kind  ErrorKind
		frags []string
	}{
		{"nextoid short", XLogNextOID, 15, xtBuf{}.u16(1), KindCorrupt, []string{"nextoid", "needs 4 bytes"}},
		{"backup end short", XLogBackupEnd, 15, xtBuf{}.u32(1), KindCorrupt, []string{"backup end", "needs 8 bytes"}},
		{"parameter change short", XLogParameterChange, 15, xtBuf{}.zeros(25), KindCorrupt, []string{"parameter change", "needs 26 bytes"}},
		{"restore point short", XLogRestorePoint, 15, xtBuf{}.u64(1).str("x").u8(0), KindCorrupt, []string{"restore point", "needs 72 bytes"}},
		{"restore point without NUL", XLogRestorePoint, 15, xtBuf{}.u64(1).str("0123456789012345678901234567890123456789012345678901234567890123"), KindCorrupt, []string{"no terminating NUL within 64 bytes"}},
		{"fpw change empty", XLogFPWChange, 15, nil, KindCorrupt, []string{"fpw change", "needs 1 bytes"}},
		{"end of recovery short", XLogEndOfRecovery, 15, xtBuf{}.zeros(15), KindCorrupt, []string{"end of recovery", "needs 16 bytes"}},
		{"end of recovery 17 without wal_level", XLogEndOfRecovery, 17, xtBuf{}.zeros(16), KindCorrupt, []string{"needs 20 bytes"}},
		{"overwrite contrecord short", XLogOverwriteContrecord, 15, xtBuf{}.zeros(15), KindCorrupt, []string{"overwrite contrecord", "needs 16 bytes"}},
		{"checkpoint redo short", XLogCheckpointRedo, 17, xtBuf{}.u16(1), KindCorrupt, []string{"checkpoint redo", "needs 4 bytes"}},
		{"checkpoint redo on 15", XLogCheckpointRedo, 15, xtBuf{}.i32(1), KindUnsupported, []string{"XLOG record: unknown info 0xE0"}},
		{"checkpoint redo on 16", XLogCheckpointRedo, 16, xtBuf{}.i32(1), KindUnsupported, []string{"unknown info 0xE0"}},
		{"unused 0xC0", 0xC0, 17, nil, KindUnsupported, []string{"unknown info 0xC0"}},
		{"unused 0xF0", 0xF0, 18, nil, KindUnsupported, []string{"unknown info 0xF0"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body, err := decodeXLOGBody(xtRec(t, RmgrXLOG, tc.info, tc.major, tc.main))
			if body != nil {
				t.Errorf("body %T returned with error", body)
			}
			xtWantErr(t, err, tc.kind, tc.frags...)
		})
	}
	rec := xtRec(t, RmgrXLOG, XLogEndOfRecovery, 15, xtBuf{}.zeros(16))
	rec.Layout = nil
	_, err := decodeXLOGBody(rec)
	xtWantErr(t, err, KindUnsupported, "no layout")
}

func TestXLOGInfoLowBitsIgnored(t *testing.T) {
	// The generic low nibble (XLR_SPECIAL_REL_UPDATE, XLR_CHECK_CONSISTENCY)
	// must not change the opcode.
	body, err := decodeXLOGBody(xtRec(t, RmgrXLOG, XLogFPIForHint|XLRCheckConsistency, 15, nil))
	if err != nil || !body.(*FPI).ForHint {
		t.Errorf("%v %+v", err, body)
	}
	body, err = decodeSmgrBody(xtRec(t, RmgrSmgr, XLogSmgrCreate|XLRSpecialRelUpdate, 15, xtBuf{}.rel(xtRelA).i32(0)))
	if err != nil || body.(*SmgrCreate).Rel != xtRelA {
		t.Errorf("%v %+v", err, body)
	}
}

func TestWalLevelString(t *testing.T) {
	for l, s := range map[WalLevel]string{WalLevelUnknown: "unknown", WalLevelMinimal: "minimal", WalLevelReplica: "replica", WalLevelLogical: "logical", 7: "WalLevel(7)"} {
		if l.String() != s {
			t.Errorf("%d: %q, want %q", int32(l), l.String(), s)
		}
	}
}
