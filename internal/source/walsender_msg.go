package source

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/walshadow/walshadow/internal/wal"
)

// The streaming-replication sub-protocol carried in CopyData messages
// (walsender.c, walreceiver.c). Integers are big-endian; times are
// microseconds since 2000-01-01 UTC.
const (
	wsMsgXLogData           = 'w' // walsender -> walreceiver: WAL bytes
	wsMsgKeepalive          = 'k' // walsender -> walreceiver
	wsMsgStandbyStatus      = 'r' // walreceiver -> walsender: write/flush/apply
	wsMsgHotStandbyFeedback = 'h' // walreceiver -> walsender: xmin (ignored)

	wsXLogDataHeaderLen     = 1 + 8 + 8 + 8 // then the WAL bytes
	wsKeepaliveLen          = 1 + 8 + 8 + 1
	wsStandbyStatusLen      = 1 + 8 + 8 + 8 + 8 + 1
	wsHotStandbyFeedbackLen = 1 + 8 + 4 + 4 + 4 + 4
)

// wsPostgresEpoch is 2000-01-01 00:00:00 UTC in Unix microseconds.
const wsPostgresEpochMicros = 946684800 * 1_000_000

// wsPGTime converts t to PostgreSQL's TimestampTz.
func wsPGTime(t time.Time) int64 { return t.UnixMicro() - wsPostgresEpochMicros }

// wsAppendCopyDataHeader appends the CopyData message header ('d', length)
// for a payload of n bytes.
func wsAppendCopyDataHeader(dst []byte, n int) []byte {
	dst = append(dst, 'd')
	return binary.BigEndian.AppendUint32(dst, uint32(4+n))
}

// wsAppendXLogDataHeader appends the header of an XLogData message; the
// WAL bytes starting at start follow it. walEnd is the end of the WAL the
// sender has (never beyond what was published).
func wsAppendXLogDataHeader(dst []byte, start, walEnd wal.LSN, sendTime int64) []byte {
	dst = append(dst, wsMsgXLogData)
	dst = binary.BigEndian.AppendUint64(dst, uint64(start))
	dst = binary.BigEndian.AppendUint64(dst, uint64(walEnd))
	return binary.BigEndian.AppendUint64(dst, uint64(sendTime))
}

// wsAppendKeepalive appends a primary keepalive message.
func wsAppendKeepalive(dst []byte, walEnd wal.LSN, sendTime int64, replyRequested bool) []byte {
	dst = append(dst, wsMsgKeepalive)
	dst = binary.BigEndian.AppendUint64(dst, uint64(walEnd))
	dst = binary.BigEndian.AppendUint64(dst, uint64(sendTime))
	return append(dst, wsBool(replyRequested))
}

// wsStandbyStatus is a walreceiver's standby status update.
type wsStandbyStatus struct {
	Write, Flush, Apply wal.LSN
	SendTime            int64
	ReplyRequested      bool
}

func wsBool(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// wsStandbyMessage is one parsed message from a walreceiver.
type wsStandbyMessage struct {
	Kind   byte            // wsMsgStandbyStatus or wsMsgHotStandbyFeedback
	Status wsStandbyStatus // for wsMsgStandbyStatus
}

// wsParseStandbyMessage parses the payload of a CopyData message a
// walreceiver sent. Trailing bytes after the known fields are tolerated, as
// PostgreSQL's walsender does, so a later minor field does not break us.
func wsParseStandbyMessage(b []byte) (wsStandbyMessage, error) {
	if len(b) == 0 {
		return wsStandbyMessage{}, errors.New("empty standby message")
	}
	m := wsStandbyMessage{Kind: b[0]}
	switch b[0] {
	case wsMsgStandbyStatus:
		if len(b) < wsStandbyStatusLen {
			return m, fmt.Errorf("standby status update of %d bytes, want %d", len(b), wsStandbyStatusLen)
		}
		m.Status = wsStandbyStatus{
			Write:          wal.LSN(binary.BigEndian.Uint64(b[1:])),
			Flush:          wal.LSN(binary.BigEndian.Uint64(b[9:])),
			Apply:          wal.LSN(binary.BigEndian.Uint64(b[17:])),
			SendTime:       int64(binary.BigEndian.Uint64(b[25:])),
			ReplyRequested: b[33] != 0,
		}
	case wsMsgHotStandbyFeedback:
		if len(b) < wsHotStandbyFeedbackLen {
			return m, fmt.Errorf("hot standby feedback of %d bytes, want %d", len(b), wsHotStandbyFeedbackLen)
		}
	default:
		return m, fmt.Errorf("unexpected standby message type %q", b[0])
	}
	return m, nil
}

// wsCommand is a replication command a walreceiver sends as a simple query.
type wsCommand struct {
	Kind     wsCommandKind
	Slot     string  // START_REPLICATION SLOT (accepted, not used)
	Logical  bool    // START_REPLICATION ... LOGICAL
	Start    wal.LSN // START_REPLICATION start point
	Timeline uint32  // START_REPLICATION TIMELINE, TIMELINE_HISTORY; 0 when absent
	Name     string  // SHOW parameter, lower case
}

type wsCommandKind int

const (
	wsCmdEmpty wsCommandKind = iota
	wsCmdIdentifySystem
	wsCmdTimelineHistory
	wsCmdStartReplication
	wsCmdShow
	wsCmdSecureSearchPath // libpq's ALWAYS_SECURE_SEARCH_PATH_SQL
)

// wsSecureSearchPathSQL is what a logical walreceiver runs right after
// connecting (libpqwalreceiver.c); answered so such a client gets a clear
// START_REPLICATION error instead of a confusing one.
const wsSecureSearchPathSQL = "select pg_catalog.set_config('search_path', '', false)"

// wsParseCommand parses the replication commands a PostgreSQL walreceiver
// sends (repl_gram.y, for the subset we serve). Keywords are case-insensitive;
// a slot name may be a double-quoted identifier.
func wsParseCommand(q string) (wsCommand, error) {
	q = strings.TrimSpace(q)
	q = strings.TrimSpace(strings.TrimSuffix(q, ";"))
	if q == "" {
		return wsCommand{Kind: wsCmdEmpty}, nil
	}
	if strings.EqualFold(q, wsSecureSearchPathSQL) {
		return wsCommand{Kind: wsCmdSecureSearchPath}, nil
	}
	toks, err := wsTokens(q)
	if err != nil {
		return wsCommand{}, err
	}
	kw := strings.ToUpper(toks[0].text)
	if toks[0].quoted {
		kw = ""
	}
	args := toks[1:]
	switch kw {
	case "IDENTIFY_SYSTEM":
		if len(args) != 0 {
			return wsCommand{}, errors.New("IDENTIFY_SYSTEM takes no arguments")
		}
		return wsCommand{Kind: wsCmdIdentifySystem}, nil
	case "TIMELINE_HISTORY":
		if len(args) != 1 {
			return wsCommand{}, errors.New("TIMELINE_HISTORY takes one timeline number")
		}
		tli, err := wsParseTimeline(args[0].text)
		if err != nil {
			return wsCommand{}, err
		}
		return wsCommand{Kind: wsCmdTimelineHistory, Timeline: tli}, nil
	case "SHOW":
		if len(args) != 1 {
			return wsCommand{}, errors.New("SHOW takes one parameter name")
		}
		name := args[0].text
		if !args[0].quoted {
			name = strings.ToLower(name)
		}
		return wsCommand{Kind: wsCmdShow, Name: name}, nil
	case "START_REPLICATION":
		return wsParseStartReplication(args)
	}
	return wsCommand{}, fmt.Errorf("unsupported replication command %q", wsAbbreviate(q))
}

// wsParseStartReplication parses
// START_REPLICATION [SLOT name] [PHYSICAL | LOGICAL] X/X [TIMELINE n] [(options)].
func wsParseStartReplication(args []wsToken) (wsCommand, error) {
	c := wsCommand{Kind: wsCmdStartReplication}
	next := func() (wsToken, bool) {
		if len(args) == 0 {
			return wsToken{}, false
		}
		t := args[0]
		args = args[1:]
		return t, true
	}
	t, ok := next()
	if ok && !t.quoted && strings.EqualFold(t.text, "SLOT") {
		// (Not ok: the ok after the slot name is the one below decides.)
		slot, found := next()
		if !found || slot.text == "" {
			return c, errors.New("START_REPLICATION SLOT needs a slot name")
		}
		c.Slot = slot.text
		t, ok = next()
	}
	if ok && !t.quoted {
		switch strings.ToUpper(t.text) {
		case "PHYSICAL":
			t, ok = next()
		case "LOGICAL":
			c.Logical = true
			t, ok = next()
		}
	}
	if !ok {
		return c, errors.New("START_REPLICATION needs a start point")
	}
	lsn, err := wal.ParseLSN(t.text)
	if err != nil || t.quoted {
		return c, fmt.Errorf("START_REPLICATION: bad start point %q", t.text)
	}
	c.Start = lsn
	if c.Logical {
		return c, nil // options follow; the caller refuses logical anyway
	}
	if t, ok = next(); ok {
		if t.quoted || !strings.EqualFold(t.text, "TIMELINE") {
			return c, fmt.Errorf("START_REPLICATION: unexpected %q after the start point", t.text)
		}
		t, ok = next()
		if !ok {
			return c, errors.New("START_REPLICATION TIMELINE needs a timeline number")
		}
		if c.Timeline, err = wsParseTimeline(t.text); err != nil {
			return c, err
		}
	}
	if len(args) != 0 {
		return c, fmt.Errorf("START_REPLICATION: unexpected %q at the end", args[0].text)
	}
	return c, nil
}

func wsParseTimeline(s string) (uint32, error) {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("bad timeline %q", s)
	}
	return uint32(n), nil
}

type wsToken struct {
	text   string
	quoted bool
}

// wsTokens splits a command into words; "..." is one word with "" standing
// for a quote, as in SQL identifiers.
func wsTokens(q string) ([]wsToken, error) {
	var toks []wsToken
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '"':
			var b strings.Builder
			i++
			for {
				if i >= len(q) {
					return nil, errors.New("unterminated quoted identifier")
				}
				if q[i] == '"' {
					if i+1 < len(q) && q[i+1] == '"' {
						b.WriteByte('"')
						i += 2
						continue
					}
					i++
					break
				}
				b.WriteByte(q[i])
				i++
			}
			toks = append(toks, wsToken{text: b.String(), quoted: true})
		default:
			j := i
			for j < len(q) && !strings.ContainsRune(" \t\n\r\"", rune(q[j])) {
				j++
			}
			toks = append(toks, wsToken{text: q[i:j]})
			i = j
		}
	}
	if len(toks) == 0 {
		return nil, errors.New("empty command")
	}
	return toks, nil
}

func wsAbbreviate(q string) string {
	const max = 80
	if len(q) > max {
		return q[:max] + "..."
	}
	return q
}

// wsFormatLSN renders an LSN as PostgreSQL 15's LSN_FORMAT_ARGS does (%X/%X).
func wsFormatLSN(l wal.LSN) string { return fmt.Sprintf("%X/%X", uint32(l>>32), uint32(l)) }

// wsServerVersion renders PG_VERSION_NUM (e.g. 150018) as server_version
// ("15.18"); versions before 10 are not served.
func wsServerVersion(num int) (string, error) {
	if num < 100000 || num >= 1000000 {
		return "", fmt.Errorf("PostgreSQL version number %d is not a supported PG_VERSION_NUM (10 and later)", num)
	}
	return fmt.Sprintf("%d.%d", num/10000, num%10000), nil
}
