package source

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/walshadow/walshadow/internal/wal"
)

// Positions are the three LSNs a standby reports to its primary in a
// standby status update ('r'): what it has written, flushed, and applied.
//
// For walshadow, flush is what the source's physical slot keeps WAL for
// (restart_lsn follows it), so the caller sets it to the resume floor.
type Positions struct {
	Write wal.LSN
	Flush wal.LSN
	Apply wal.LSN
}

// Advance returns p with each position raised to the matching argument when
// the argument is higher. Each field keeps its own running maximum: a lower
// value never regresses a position (the walsender copies the reported flush
// into the slot's restart_lsn even backwards, claiming WAL the source may
// already have removed, and regressions confuse its lag tracking), and a
// shared maximum would let a high write drag flush forward past data that is
// not durable yet.
func (p Positions) Advance(write, flush, apply wal.LSN) Positions {
	return Positions{
		Write: max(p.Write, write),
		Flush: max(p.Flush, flush),
		Apply: max(p.Apply, apply),
	}
}

// String renders the positions for logs.
func (p Positions) String() string {
	return fmt.Sprintf("write %s flush %s apply %s", p.Write, p.Flush, p.Apply)
}

// Replication sub-message tags inside CopyData (protocol-replication docs).
const (
	statusMsgXLogData  = 'w'
	statusMsgKeepalive = 'k'
	statusMsgStandby   = 'r'
)

// statusXLogDataHeaderLen is the XLogData header after the tag: start LSN,
// server WAL end, server send time.
const statusXLogDataHeaderLen = 24

// statusKeepaliveLen is a primary keepalive after the tag: server WAL end,
// server time, reply-requested flag.
const statusKeepaliveLen = 17

// statusStandbyFrameLen is a whole standby status CopyData frame: 'd', the
// int32 length, then 'r', three LSNs, the client time and the reply flag.
const statusStandbyFrameLen = 1 + 4 + 1 + 8 + 8 + 8 + 8 + 1

// statusPGEpoch is PostgreSQL's timestamp epoch (2000-01-01 UTC); protocol
// timestamps are microseconds since it.
var statusPGEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// statusXLogData is a parsed 'w' message. Data aliases the message buffer.
type statusXLogData struct {
	Start        wal.LSN
	ServerWALEnd wal.LSN
	Data         []byte
}

// statusKeepalive is a parsed 'k' message.
type statusKeepalive struct {
	ServerWALEnd   wal.LSN
	ReplyRequested bool
}

// statusParseXLogData parses the body of an XLogData message (after the 'w').
func statusParseXLogData(b []byte) (statusXLogData, error) {
	if len(b) < statusXLogDataHeaderLen {
		return statusXLogData{}, fmt.Errorf("XLogData message of %d bytes is shorter than its %d-byte header", len(b), statusXLogDataHeaderLen)
	}
	return statusXLogData{
		Start:        wal.LSN(binary.BigEndian.Uint64(b[0:8])),
		ServerWALEnd: wal.LSN(binary.BigEndian.Uint64(b[8:16])),
		Data:         b[statusXLogDataHeaderLen:],
	}, nil
}

// statusParseKeepalive parses the body of a primary keepalive (after the 'k').
func statusParseKeepalive(b []byte) (statusKeepalive, error) {
	if len(b) != statusKeepaliveLen {
		return statusKeepalive{}, fmt.Errorf("primary keepalive message has %d bytes, want %d", len(b), statusKeepaliveLen)
	}
	return statusKeepalive{
		ServerWALEnd:   wal.LSN(binary.BigEndian.Uint64(b[0:8])),
		ReplyRequested: b[16] != 0,
	}, nil
}

// statusAppendStandbyFrame appends a complete CopyData frame carrying a
// standby status update with exactly the given positions. It is built by
// hand because pglogrepl's SendStandbyStatusUpdate replaces a zero flush or
// apply with write, which would report data as flushed that is not.
func statusAppendStandbyFrame(buf []byte, p Positions, now time.Time, replyRequested bool) []byte {
	buf = append(buf, 'd')
	buf = binary.BigEndian.AppendUint32(buf, statusStandbyFrameLen-1)
	buf = append(buf, statusMsgStandby)
	buf = binary.BigEndian.AppendUint64(buf, uint64(p.Write))
	buf = binary.BigEndian.AppendUint64(buf, uint64(p.Flush))
	buf = binary.BigEndian.AppendUint64(buf, uint64(p.Apply))
	buf = binary.BigEndian.AppendUint64(buf, uint64(statusPGTime(now)))
	if replyRequested {
		return append(buf, 1)
	}
	return append(buf, 0)
}

// statusPGTime converts t to microseconds since the PostgreSQL epoch.
func statusPGTime(t time.Time) int64 {
	return t.Sub(statusPGEpoch).Microseconds()
}
