package shadow

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/walshadow/walshadow/internal/wal"
)

// The BASE_BACKUP exchange of PostgreSQL 15 and later
// (src/backend/backup/basebackup_copy.c), as the server sends it:
//
//	result set  recptr text, tli int8       backup start
//	result set  spcoid oid, spclocation text, size int8   one row per tablespace,
//	            the data directory last with NULL oid and location
//	CopyOutResponse
//	CopyData*   'n' archive name\0 tablespace location\0   new archive
//	            'd' bytes                                   archive (or manifest) data
//	            'p' int64                                   progress, bytes done
//	            'm'                                         manifest follows
//	CopyDone
//	result set  recptr text, tli int8       backup end
//	CommandComplete, ReadyForQuery
//
// The old protocol (one COPY per archive, before 15) is not spoken.

// backupPhase is where the exchange is.
type backupPhase int

const (
	phaseStartPosition backupPhase = iota
	phaseTablespaces
	phaseCopyResponse
	phaseCopy
	phaseEndPosition
	phaseCommandComplete
	phaseReady
	phaseDone
)

func (p backupPhase) String() string {
	return [...]string{"start position", "tablespace list", "CopyOutResponse", "COPY stream",
		"end position", "CommandComplete", "ReadyForQuery", "done"}[p]
}

// BackupTablespace is one row of BASE_BACKUP's tablespace list other than
// the data directory itself.
type BackupTablespace struct {
	OID      uint32 `json:"oid"`
	Location string `json:"location"`
}

// backupEventKind is what a server message meant to the caller.
type backupEventKind int

const (
	eventNone     backupEventKind = iota // bookkeeping only (result sets, progress, notices)
	eventArchive                         // a new archive begins: event.archive
	eventData                            // archive bytes: event.data
	eventCopyDone                        // the COPY stream has ended
	eventDone                            // ReadyForQuery: the command is over
)

type archiveStart struct {
	name     string // "base.tar" or "<oid>.tar"
	location string // the tablespace's location on the source; "" for the data directory
}

type backupEvent struct {
	kind    backupEventKind
	archive archiveStart
	data    []byte // aliases the message buffer: valid until the next receive
	notice  string
}

// backupProtocol is the pure state machine of one BASE_BACKUP exchange:
// messages in, events and positions out. It refuses anything out of order.
type backupProtocol struct {
	phase       backupPhase
	rowSeen     bool
	inArchive   bool
	inManifest  bool
	archives    int
	progress    int64
	Start, End  wal.LSN
	StartTLI    uint32
	EndTLI      uint32
	Tablespaces []BackupTablespace
}

// handle consumes one backend message.
func (p *backupProtocol) handle(msg pgproto3.BackendMessage) (backupEvent, error) {
	switch m := msg.(type) {
	case *pgproto3.ErrorResponse:
		return backupEvent{}, fmt.Errorf("BASE_BACKUP failed during the %s: %w", p.phase, pgconn.ErrorResponseToPgError(m))
	case *pgproto3.NoticeResponse:
		return backupEvent{notice: m.Severity + ": " + m.Message}, nil
	case *pgproto3.ParameterStatus:
		return backupEvent{}, nil
	}
	switch p.phase {
	case phaseStartPosition, phaseEndPosition:
		return p.handlePosition(msg)
	case phaseTablespaces:
		return p.handleTablespaces(msg)
	case phaseCopyResponse:
		if _, ok := msg.(*pgproto3.CopyOutResponse); !ok {
			return p.unexpected(msg)
		}
		p.phase = phaseCopy
		return backupEvent{}, nil
	case phaseCopy:
		switch m := msg.(type) {
		case *pgproto3.CopyData:
			return p.handleCopyData(m.Data)
		case *pgproto3.CopyDone:
			if p.archives == 0 {
				return backupEvent{}, errors.New("BASE_BACKUP: the COPY stream ended without any archive")
			}
			p.phase = phaseEndPosition
			return backupEvent{kind: eventCopyDone}, nil
		}
	case phaseCommandComplete:
		if _, ok := msg.(*pgproto3.CommandComplete); ok {
			p.phase = phaseReady
			return backupEvent{}, nil
		}
	case phaseReady:
		if _, ok := msg.(*pgproto3.ReadyForQuery); ok {
			p.phase = phaseDone
			return backupEvent{kind: eventDone}, nil
		}
	}
	return p.unexpected(msg)
}

func (p *backupProtocol) unexpected(msg pgproto3.BackendMessage) (backupEvent, error) {
	return backupEvent{}, fmt.Errorf("BASE_BACKUP: unexpected %T during the %s", msg, p.phase)
}

// handlePosition reads the start or end result set: one row (recptr, tli).
func (p *backupProtocol) handlePosition(msg pgproto3.BackendMessage) (backupEvent, error) {
	switch m := msg.(type) {
	case *pgproto3.RowDescription:
		if err := checkColumns(m, "recptr", "tli"); err != nil {
			return backupEvent{}, fmt.Errorf("BASE_BACKUP %s: %w", p.phase, err)
		}
		return backupEvent{}, nil
	case *pgproto3.DataRow:
		if p.rowSeen || len(m.Values) != 2 || m.Values[0] == nil || m.Values[1] == nil {
			return backupEvent{}, fmt.Errorf("BASE_BACKUP %s: want one row of two non-NULL values", p.phase)
		}
		lsn, err := wal.ParseLSN(string(m.Values[0]))
		if err != nil {
			return backupEvent{}, fmt.Errorf("BASE_BACKUP %s: recptr: %w", p.phase, err)
		}
		tli, err := strconv.ParseUint(string(m.Values[1]), 10, 32)
		if err != nil || tli == 0 {
			return backupEvent{}, fmt.Errorf("BASE_BACKUP %s: bad timeline %q", p.phase, m.Values[1])
		}
		if p.phase == phaseStartPosition {
			p.Start, p.StartTLI = lsn, uint32(tli)
		} else {
			p.End, p.EndTLI = lsn, uint32(tli)
		}
		p.rowSeen = true
		return backupEvent{}, nil
	case *pgproto3.CommandComplete:
		if !p.rowSeen {
			return backupEvent{}, fmt.Errorf("BASE_BACKUP %s: result set without a row", p.phase)
		}
		p.rowSeen = false
		if p.phase == phaseStartPosition {
			p.phase = phaseTablespaces
		} else {
			p.phase = phaseCommandComplete
		}
		return backupEvent{}, nil
	}
	return p.unexpected(msg)
}

func (p *backupProtocol) handleTablespaces(msg pgproto3.BackendMessage) (backupEvent, error) {
	switch m := msg.(type) {
	case *pgproto3.RowDescription:
		if err := checkColumns(m, "spcoid", "spclocation", "size"); err != nil {
			return backupEvent{}, fmt.Errorf("BASE_BACKUP tablespace list: %w", err)
		}
		return backupEvent{}, nil
	case *pgproto3.DataRow:
		if len(m.Values) != 3 {
			return backupEvent{}, fmt.Errorf("BASE_BACKUP tablespace list: %d columns, want 3", len(m.Values))
		}
		if m.Values[0] == nil {
			return backupEvent{}, nil // the data directory itself
		}
		oid, err := strconv.ParseUint(string(m.Values[0]), 10, 32)
		if err != nil || oid == 0 {
			return backupEvent{}, fmt.Errorf("BASE_BACKUP tablespace list: bad spcoid %q", m.Values[0])
		}
		p.Tablespaces = append(p.Tablespaces, BackupTablespace{OID: uint32(oid), Location: string(m.Values[1])})
		return backupEvent{}, nil
	case *pgproto3.CommandComplete:
		p.phase = phaseCopyResponse
		return backupEvent{}, nil
	}
	return p.unexpected(msg)
}

// handleCopyData decodes one CopyData payload of the archive stream.
func (p *backupProtocol) handleCopyData(data []byte) (backupEvent, error) {
	if len(data) == 0 {
		return backupEvent{}, errors.New("BASE_BACKUP: empty CopyData message")
	}
	switch data[0] {
	case 'n':
		name, location, err := parseNewArchive(data[1:])
		if err != nil {
			return backupEvent{}, err
		}
		if p.inManifest {
			return backupEvent{}, errors.New("BASE_BACKUP: new archive after the manifest")
		}
		p.archives++
		p.inArchive = true
		return backupEvent{kind: eventArchive, archive: archiveStart{name: name, location: location}}, nil
	case 'd':
		if p.inManifest {
			return backupEvent{}, nil // not requested; tolerated and dropped
		}
		if !p.inArchive {
			return backupEvent{}, errors.New("BASE_BACKUP: archive data before any archive began")
		}
		return backupEvent{kind: eventData, data: data[1:]}, nil
	case 'p':
		if len(data) != 9 {
			return backupEvent{}, fmt.Errorf("BASE_BACKUP: progress message of %d bytes, want 9", len(data))
		}
		p.progress = int64(binary.BigEndian.Uint64(data[1:]))
		return backupEvent{}, nil
	case 'm':
		if len(data) != 1 {
			return backupEvent{}, fmt.Errorf("BASE_BACKUP: manifest message of %d bytes, want 1", len(data))
		}
		p.inManifest = true
		p.inArchive = false
		return backupEvent{}, nil
	}
	return backupEvent{}, fmt.Errorf("BASE_BACKUP: unknown CopyData message type %q", data[0])
}

// parseNewArchive splits the 'n' payload: two NUL-terminated strings and
// nothing after them.
func parseNewArchive(b []byte) (name, location string, err error) {
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return "", "", errors.New("BASE_BACKUP: new-archive message without a terminated name")
	}
	name = string(b[:i])
	rest := b[i+1:]
	j := bytes.IndexByte(rest, 0)
	if j < 0 || j != len(rest)-1 {
		return "", "", errors.New("BASE_BACKUP: new-archive message with a malformed location")
	}
	if name == "" {
		return "", "", errors.New("BASE_BACKUP: new-archive message with an empty name")
	}
	return name, string(rest[:j]), nil
}

func checkColumns(m *pgproto3.RowDescription, names ...string) error {
	if len(m.Fields) != len(names) {
		return fmt.Errorf("%d columns, want %d", len(m.Fields), len(names))
	}
	for i, n := range names {
		if string(m.Fields[i].Name) != n {
			return fmt.Errorf("column %d is %q, want %q", i+1, m.Fields[i].Name, n)
		}
	}
	return nil
}

// archiveTablespaceOf maps an archive name to the tablespace it holds:
// "base.tar" is the data directory, "<oid>.tar" a tablespace listed in the
// tablespace result set.
func (p *backupProtocol) archiveTablespaceOf(a archiveStart) (archiveTablespace, error) {
	if a.name == "base.tar" && a.location == "" {
		return 0, nil
	}
	oidText, ok := strings.CutSuffix(a.name, ".tar")
	if ok && isOID(oidText) {
		oid, _ := strconv.ParseUint(oidText, 10, 32)
		for _, ts := range p.Tablespaces {
			if ts.OID == uint32(oid) {
				return archiveTablespace(oid), nil
			}
		}
	}
	return 0, fmt.Errorf("BASE_BACKUP: archive %q (location %q) is neither base.tar nor a listed tablespace", a.name, a.location)
}
