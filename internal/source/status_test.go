package source

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/wal"
)

func TestPositionsAdvanceKeepsEachMaximum(t *testing.T) {
	steps := []struct {
		name                string
		write, flush, apply wal.LSN
		want                Positions
	}{
		{"first report", 300, 200, 100, Positions{300, 200, 100}},
		{"all lower: nothing regresses", 10, 10, 10, Positions{300, 200, 100}},
		{"write jumps, flush and apply lower", 900, 150, 0, Positions{900, 200, 100}},
		{"flush alone advances", 0, 250, 0, Positions{900, 250, 100}},
		{"apply alone advances past flush", 0, 0, 400, Positions{900, 250, 400}},
		{"equal values are kept", 900, 250, 400, Positions{900, 250, 400}},
	}
	var p Positions
	for _, s := range steps {
		p = p.Advance(s.write, s.flush, s.apply)
		if p != s.want {
			t.Fatalf("%s: got %+v, want %+v", s.name, p, s.want)
		}
	}
}

func TestStandbyFrameLayout(t *testing.T) {
	now := statusPGEpoch.Add(1500 * time.Millisecond)
	p := Positions{Write: 0x0000000100000028, Flush: 0x10, Apply: 0}
	got := statusAppendStandbyFrame([]byte("prefix"), p, now, true)
	want, _ := hex.DecodeString("" +
		"64" + "00000026" + // 'd', length 38 (itself + 34)
		"72" + // 'r'
		"0000000100000028" + "0000000000000010" + "0000000000000000" + // write, flush, apply: zero apply stays zero
		"000000000016e360" + // 1.5 s in microseconds since 2000-01-01
		"01")
	if !bytes.Equal(got[:6], []byte("prefix")) || !bytes.Equal(got[6:], want) {
		t.Fatalf("frame\n got %x\nwant %x", got[6:], want)
	}
	if len(got[6:]) != statusStandbyFrameLen {
		t.Fatalf("frame length %d, want %d", len(got[6:]), statusStandbyFrameLen)
	}
	if got := statusAppendStandbyFrame(nil, p, now, false); got[len(got)-1] != 0 {
		t.Fatalf("reply flag = %d, want 0", got[len(got)-1])
	}
}

func TestParseXLogData(t *testing.T) {
	b := binary.BigEndian.AppendUint64(nil, 0x1_0000_2000)
	b = binary.BigEndian.AppendUint64(b, 0x1_0000_9000)
	b = binary.BigEndian.AppendUint64(b, 12345)
	b = append(b, "wal bytes"...)
	x, err := statusParseXLogData(b)
	if err != nil {
		t.Fatal(err)
	}
	if x.Start != 0x1_0000_2000 || x.ServerWALEnd != 0x1_0000_9000 || string(x.Data) != "wal bytes" {
		t.Fatalf("parsed %+v", x)
	}
	if _, err := statusParseXLogData(b[:23]); err == nil {
		t.Fatal("a 23-byte XLogData parsed")
	}
	x, err = statusParseXLogData(b[:24])
	if err != nil || len(x.Data) != 0 {
		t.Fatalf("header-only XLogData: %+v, %v", x, err)
	}
}

func TestParseKeepalive(t *testing.T) {
	b := binary.BigEndian.AppendUint64(nil, 0x2_0000_0000)
	b = binary.BigEndian.AppendUint64(b, 777)
	for _, reply := range []byte{0, 1} {
		k, err := statusParseKeepalive(append(b, reply))
		if err != nil {
			t.Fatal(err)
		}
		if k.ServerWALEnd != 0x2_0000_0000 || k.ReplyRequested != (reply == 1) {
			t.Fatalf("parsed %+v from reply byte %d", k, reply)
		}
	}
	for _, n := range []int{0, 16, 18} {
		if _, err := statusParseKeepalive(make([]byte, n)); err == nil {
			t.Fatalf("a %d-byte keepalive parsed", n)
		}
	}
}

// FuzzParseReplicationMessage feeds arbitrary CopyData payloads to the
// replication message parsers: they must never panic, and a parsed XLogData
// must alias exactly the bytes after its header.
func FuzzParseReplicationMessage(f *testing.F) {
	f.Add([]byte{'k', 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1})
	f.Add(append([]byte{'w'}, make([]byte, 30)...))
	f.Add([]byte{'w', 1, 2})
	f.Fuzz(func(t *testing.T, msg []byte) {
		if len(msg) == 0 {
			return
		}
		switch msg[0] {
		case statusMsgXLogData:
			x, err := statusParseXLogData(msg[1:])
			if err == nil && len(x.Data) != len(msg)-1-statusXLogDataHeaderLen {
				t.Fatalf("data length %d from a %d-byte message", len(x.Data), len(msg))
			}
		case statusMsgKeepalive:
			_, err := statusParseKeepalive(msg[1:])
			if (err == nil) != (len(msg) == 1+statusKeepaliveLen) {
				t.Fatalf("keepalive of %d bytes: err %v", len(msg), err)
			}
		}
	})
}
