package load

import "testing"

func TestParsePGSnapshot(t *testing.T) {
	s, err := parsePGSnapshot("1991:1997:1993,1995")
	if err != nil {
		t.Fatal(err)
	}
	if s.xmin != 1991 || s.xmax != 1997 || len(s.xip) != 2 || s.xip[0] != 1993 || s.xip[1] != 1995 {
		t.Errorf("parsed %+v", s)
	}
	if s, err := parsePGSnapshot("5:5:"); err != nil || s.xmin != 5 || s.xmax != 5 || len(s.xip) != 0 {
		t.Errorf("5:5: parsed %+v, %v", s, err)
	}
	for _, bad := range []string{"", "1:2", "x:2:", "1:y:", "1:2:z", "1:2:3,"} {
		if _, err := parsePGSnapshot(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestPGSnapshotSees(t *testing.T) {
	s := pgSnapshot{xmin: 100, xmax: 110, xip: []uint64{103, 107}}
	for xid, want := range map[uint32]bool{
		50: true, 99: true, 100: true, 102: true, 103: false, 107: false, 109: true,
		110: false, 111: false, 1 << 30: false,
		// 2^31 before xmin, modulo 2^32: long ended.
		100 + 1<<31 + 1: true,
	} {
		if got := s.sees(xid); got != want {
			t.Errorf("sees(%d) = %v, want %v", xid, got, want)
		}
	}
	// Across the 32-bit wraparound (64-bit xids of epoch 1).
	w := pgSnapshot{xmin: 1<<32 + 1<<32 - 5, xmax: 2<<32 + 3, xip: []uint64{2<<32 + 1}}
	for xid, want := range map[uint32]bool{
		1<<32 - 10: true, 1<<32 - 5: true, 1<<32 - 1: true, 0: true, 1: false, 2: true, 3: false, 4: false,
	} {
		if got := w.sees(xid); got != want {
			t.Errorf("wrapped: sees(%d) = %v, want %v", xid, got, want)
		}
	}
}
