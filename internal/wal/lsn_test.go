package wal

import (
	"fmt"
	"testing"
)

func TestLSNStringMatchesPrintf(t *testing.T) {
	for _, l := range []LSN{0, 1, 0x16B3748, 0xFFFFFFFF, 0x1_00000000, 0xABCDEF01_23456789, ^LSN(0), 0x10_0000000F} {
		want := fmt.Sprintf("%X/%08X", uint32(l>>32), uint32(l))
		if got := l.String(); got != want {
			t.Errorf("%#x: %q, want %q", uint64(l), got, want)
		}
		if back, err := ParseLSN(l.String()); err != nil || back != l {
			t.Errorf("%#x: round trip %v %v", uint64(l), back, err)
		}
	}
}
