package source

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/walshadow/walshadow/internal/wal"
)

func wsMustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Golden bytes follow walsender.c (XLogSendPhysical, WalSndKeepalive) and
// walreceiver.c (XLogWalRcvSendReply): big-endian, type byte first.
func TestWsFrameGolden(t *testing.T) {
	const sendTime = 0x0102030405060708
	tests := []struct {
		name string
		got  []byte
		want string
	}{
		{"XLogData header", wsAppendXLogDataHeader(nil, 0x3000000, 0x1_0300_0100, sendTime),
			"77 0000000003000000 0000000103000100 0102030405060708"},
		{"keepalive, reply requested", wsAppendKeepalive(nil, 0x3000028, sendTime, true),
			"6b 0000000003000028 0102030405060708 01"},
		{"keepalive", wsAppendKeepalive(nil, 0, sendTime, false),
			"6b 0000000000000000 0102030405060708 00"},
		{"standby status", wsAppendStandbyStatus(nil, wsStandbyStatus{Write: 0x3000100, Flush: 0x3000080, Apply: 0x3000028, SendTime: sendTime}),
			"72 0000000003000100 0000000003000080 0000000003000028 0102030405060708 00"},
		{"CopyData header", wsAppendCopyDataHeader(nil, wsKeepaliveLen), "64 00000016"},
	}
	for _, tt := range tests {
		if want := wsMustHex(t, tt.want); !bytes.Equal(tt.got, want) {
			t.Errorf("%s:\n got % x\nwant % x", tt.name, tt.got, want)
		}
	}
	if n := len(wsAppendXLogDataHeader(nil, 0, 0, 0)); n != wsXLogDataHeaderLen {
		t.Errorf("XLogData header is %d bytes, want %d", n, wsXLogDataHeaderLen)
	}
}

func TestWsPGTime(t *testing.T) {
	if got := wsPGTime(time.Date(2000, 1, 1, 0, 0, 1, 500, time.UTC)); got != 1_000_000 {
		t.Errorf("one second after the PostgreSQL epoch: got %d µs", got)
	}
	if got := wsPGTime(time.Date(1999, 12, 31, 23, 59, 59, 0, time.UTC)); got != -1_000_000 {
		t.Errorf("one second before the PostgreSQL epoch: got %d µs", got)
	}
}

func TestWsParseStandbyMessage(t *testing.T) {
	status := wsMustHex(t, "72 0000000003000100 0000000003000080 0000000003000028 0102030405060708 01")
	m, err := wsParseStandbyMessage(status)
	if err != nil {
		t.Fatal(err)
	}
	want := wsStandbyStatus{Write: 0x3000100, Flush: 0x3000080, Apply: 0x3000028, SendTime: 0x0102030405060708, ReplyRequested: true}
	if m.Kind != wsMsgStandbyStatus || m.Status != want {
		t.Errorf("got %+v, want %+v", m, want)
	}
	// Trailing bytes are tolerated, as walsender.c does.
	if _, err := wsParseStandbyMessage(append(status[:len(status):len(status)], 0xff)); err != nil {
		t.Errorf("trailing byte: %v", err)
	}
	feedback := wsMustHex(t, "68 0102030405060708 000003e8 00000000 00000000 00000000")
	if m, err := wsParseStandbyMessage(feedback); err != nil || m.Kind != wsMsgHotStandbyFeedback {
		t.Errorf("hot standby feedback: %+v, %v", m, err)
	}
	for name, b := range map[string][]byte{
		"empty":           nil,
		"short status":    status[:33],
		"short feedback":  feedback[:24],
		"unknown type":    wsMustHex(t, "70 00"),
		"primary message": wsAppendKeepalive(nil, 1, 2, false),
	} {
		if _, err := wsParseStandbyMessage(b); err == nil {
			t.Errorf("%s: parsed without error", name)
		}
	}
}

func TestWsParseCommand(t *testing.T) {
	tests := []struct {
		q    string
		want wsCommand
	}{
		{"IDENTIFY_SYSTEM", wsCommand{Kind: wsCmdIdentifySystem}},
		{" identify_system ; ", wsCommand{Kind: wsCmdIdentifySystem}},
		{"", wsCommand{Kind: wsCmdEmpty}},
		{";", wsCommand{Kind: wsCmdEmpty}},
		{"TIMELINE_HISTORY 2", wsCommand{Kind: wsCmdTimelineHistory, Timeline: 2}},
		{"SHOW wal_segment_size", wsCommand{Kind: wsCmdShow, Name: "wal_segment_size"}},
		{"SHOW Server_Version", wsCommand{Kind: wsCmdShow, Name: "server_version"}},
		{"SELECT pg_catalog.set_config('search_path', '', false);", wsCommand{Kind: wsCmdSecureSearchPath}},
		// What libpqwalreceiver.c sends, with and without a slot.
		{"START_REPLICATION 0/3000000 TIMELINE 1", wsCommand{Kind: wsCmdStartReplication, Start: 0x3000000, Timeline: 1}},
		{`START_REPLICATION SLOT "shadow ""one""" 1/A0000000 TIMELINE 3`,
			wsCommand{Kind: wsCmdStartReplication, Slot: `shadow "one"`, Start: 0x1_A000_0000, Timeline: 3}},
		{"start_replication slot s physical 0/0", wsCommand{Kind: wsCmdStartReplication, Slot: "s"}},
		{"START_REPLICATION PHYSICAL 0/16B3748", wsCommand{Kind: wsCmdStartReplication, Start: 0x16B3748}},
		{"START_REPLICATION SLOT sub LOGICAL 0/0 (proto_version '1')", wsCommand{Kind: wsCmdStartReplication, Slot: "sub", Logical: true}},
	}
	for _, tt := range tests {
		got, err := wsParseCommand(tt.q)
		if err != nil {
			t.Errorf("%q: %v", tt.q, err)
			continue
		}
		if got != tt.want {
			t.Errorf("%q:\n got %+v\nwant %+v", tt.q, got, tt.want)
		}
	}
	for _, q := range []string{
		"BASE_BACKUP", "IDENTIFY_SYSTEM now", "TIMELINE_HISTORY", "TIMELINE_HISTORY 0", "TIMELINE_HISTORY x",
		"START_REPLICATION", "START_REPLICATION SLOT", "START_REPLICATION 0/x", "START_REPLICATION 0/0 TIMELINE",
		"START_REPLICATION 0/0 TIMELINE 0", "START_REPLICATION 0/0 TIMELINE 1 extra", "START_REPLICATION 0/0 NOW",
		`START_REPLICATION SLOT "open 0/0`, `"IDENTIFY_SYSTEM"`, "SHOW", "SELECT 1",
	} {
		if c, err := wsParseCommand(q); err == nil {
			t.Errorf("%q parsed as %+v", q, c)
		}
	}
}

func TestWsServerVersionAndSizes(t *testing.T) {
	if v, err := wsServerVersion(150018); err != nil || v != "15.18" {
		t.Errorf("150018: %q, %v", v, err)
	}
	if v, err := wsServerVersion(180000); err != nil || v != "18.0" {
		t.Errorf("180000: %q, %v", v, err)
	}
	for _, n := range []int{0, 90624, 1000000} {
		if _, err := wsServerVersion(n); err == nil {
			t.Errorf("%d accepted", n)
		}
	}
	for n, want := range map[uint32]string{16 << 20: "16MB", 1 << 30: "1GB", 1 << 20: "1MB"} {
		if got := wsSizeText(n); got != want {
			t.Errorf("wsSizeText(%d) = %q, want %q", n, got, want)
		}
	}
	if got := wsFormatLSN(wal.LSN(0x1_0000_00A0)); got != "1/A0" {
		t.Errorf("wsFormatLSN: %q", got)
	}
}

func FuzzWsParseStandbyMessage(f *testing.F) {
	f.Add(wsAppendStandbyStatus(nil, wsStandbyStatus{Write: 1, Flush: 2, Apply: 3, SendTime: 4, ReplyRequested: true}))
	f.Add([]byte("h0123456789012345678901234"))
	f.Add([]byte{'r'})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := wsParseStandbyMessage(b)
		if err != nil {
			return
		}
		switch m.Kind {
		case wsMsgStandbyStatus:
			// A parsed status re-encodes to the bytes it came from (the
			// reply flag normalised to 0/1).
			again := wsAppendStandbyStatus(nil, m.Status)
			if !bytes.Equal(again[:33], b[:33]) || (b[33] != 0) != (again[33] != 0) {
				t.Fatalf("round trip: % x -> %+v -> % x", b, m.Status, again)
			}
		case wsMsgHotStandbyFeedback:
			if len(b) < wsHotStandbyFeedbackLen {
				t.Fatalf("short feedback accepted: % x", b)
			}
		default:
			t.Fatalf("accepted message kind %q", m.Kind)
		}
	})
}

func FuzzWsParseCommand(f *testing.F) {
	for _, q := range []string{
		"IDENTIFY_SYSTEM", "TIMELINE_HISTORY 2", `START_REPLICATION SLOT "x""y" 0/3000000 TIMELINE 1`,
		"START_REPLICATION PHYSICAL 1/0", "SHOW wal_segment_size", `"`, "START_REPLICATION SLOT",
	} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, q string) {
		c, err := wsParseCommand(q)
		if err != nil {
			return
		}
		if c.Kind == wsCmdTimelineHistory && c.Timeline == 0 {
			t.Fatalf("%q: timeline 0 accepted", q)
		}
		if c.Kind == wsCmdStartReplication && !c.Logical {
			// The start point round-trips through PostgreSQL's text form.
			again, err := wsParseCommand("START_REPLICATION " + wsFormatLSN(c.Start))
			if err != nil || again.Start != c.Start {
				t.Fatalf("%q: start %s does not round-trip: %+v %v", q, c.Start, again, err)
			}
		}
	})
}

// wsAppendStandbyStatus appends a standby status update (what a walreceiver
// sends; the tests' receivers use it).
func wsAppendStandbyStatus(dst []byte, s wsStandbyStatus) []byte {
	dst = append(dst, wsMsgStandbyStatus)
	dst = binary.BigEndian.AppendUint64(dst, uint64(s.Write))
	dst = binary.BigEndian.AppendUint64(dst, uint64(s.Flush))
	dst = binary.BigEndian.AppendUint64(dst, uint64(s.Apply))
	dst = binary.BigEndian.AppendUint64(dst, uint64(s.SendTime))
	return append(dst, wsBool(s.ReplyRequested))
}
