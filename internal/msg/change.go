package msg

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/walshadow/walshadow/internal/wal"
)

// Relation is the relation a change is of. Every change of one descriptor
// version shares one *Relation.
type Relation struct {
	Schema, Table string // empty on an event of a relation with no shape left (dropped)
	Oid           uint32
	// Key is the replica identity's column names (none for FULL or no key).
	Key []string
}

// Change is a change message's metadata: a row change (the payload is its
// columns), a schema event (the payload is the relation's shape) or a
// table's failure.
type Change struct {
	Op    string // Operation*
	Event string // a schema event's kind; EventTruncate on a truncate
	Rel   *Relation
	LSN   wal.LSN // the change's record; a schema event's valid-from
	Tx    *Tx
	// DescVersion is the descriptor version the change was decoded with
	// (a schema event's valid-from).
	DescVersion wal.LSN
	// TID is the tuple the change leaves live (see KeyTID), OldTID the
	// version an update replaced; Filenode the heap's relfilenode.
	TID, OldTID TID
	Filenode    uint32
	// RecordIndex is the change's position among its WAL record's
	// changes (-1: not said).
	RecordIndex int
	// KeyChanged marks both halves of a key-changing update.
	KeyChanged bool
	// Rewritten marks a changed event whose transaction rewrote every row
	// into a new file (see KeyRewritten); Filenode is that file's.
	Rewritten bool
	// UnchangedToast names the columns left out of the payload: TOAST
	// values the update did not change.
	UnchangedToast []string
	Error          string // OperationFail: why the table failed
	Epoch          uint64 // the session run that decoded it
	// Seq is the session batch (within run Epoch) the change came in; 0:
	// not said. The output writes a batch only after every earlier one
	// is acknowledged, whatever order pipeline threads deliver them in.
	Seq uint64
}

// IsRow tells a row change (insert, update, delete, truncate) from an
// event or a failure.
func (c *Change) IsRow() bool { return c.Op != OperationSchema && c.Op != OperationFail }

// ChangeOf reads m's change metadata: the typed value, or else its
// strings.
func ChangeOf(m *service.Message) (*Change, error) {
	if v, ok := m.MetaGetMut(KeyChange); ok {
		if c, ok := v.(*Change); ok {
			return c, nil
		}
	}
	return ChangeFromStrings(m.MetaGet)
}

// Routing reports whether key is one a change message always carries as a
// string: what a mapping routes or labels rows by.
func Routing(key string) bool {
	switch key {
	case KeyOperation, KeyEvent, KeySchema, KeyTable, KeyLSN, KeyCommitLSN:
		return true
	}
	return false
}

// AppendStrings renders c as its string metadata, key by key: every key,
// or (all false) only the routing ones.
func (c *Change) AppendStrings(all bool, f func(key, value string)) {
	emit := func(k, v string) {
		if all || Routing(k) {
			f(k, v)
		}
	}
	emit(KeyOperation, c.Op)
	if c.Event != "" {
		emit(KeyEvent, c.Event)
	}
	if c.Error != "" {
		emit(KeyError, c.Error)
	}
	if r := c.Rel; r != nil {
		if r.Schema != "" || r.Table != "" {
			emit(KeySchema, r.Schema)
			emit(KeyTable, r.Table)
		}
		emit(KeyRelationOid, strconv.FormatUint(uint64(r.Oid), 10))
		if r.Schema != "" || r.Table != "" {
			emit(KeyKey, strings.Join(r.Key, ","))
		}
	}
	emit(KeyLSN, c.LSN.String())
	if tx := c.Tx; tx != nil {
		emit(KeyCommitLSN, tx.CommitLSN.String())
		emit(KeyXID, strconv.FormatUint(uint64(tx.TopXID), 10))
		emit(KeyCommitTime, tx.CommitTime.Format(time.RFC3339Nano))
	}
	emit(KeyDescVersion, c.DescVersion.String())
	if c.TID.Valid() {
		emit(KeyTID, c.TID.String())
	}
	if c.OldTID.Valid() {
		emit(KeyOldTID, c.OldTID.String())
	}
	if c.Filenode != 0 {
		emit(KeyFilenode, strconv.FormatUint(uint64(c.Filenode), 10))
	}
	if c.UnchangedToast != nil {
		emit(KeyUnchangedToast, strings.Join(c.UnchangedToast, ","))
	}
	if c.RecordIndex >= 0 {
		emit(KeyRecordIndex, strconv.Itoa(c.RecordIndex))
	}
	if c.KeyChanged {
		emit(KeyKeyChanged, "true")
	}
	if c.Rewritten {
		emit(KeyRewritten, "true")
	}
	emit(KeyEpoch, strconv.FormatUint(c.Epoch, 10))
	if c.Seq != 0 {
		emit(KeySeq, strconv.FormatUint(c.Seq, 10))
	}
}

// ChangeFromStrings parses a change's string metadata (get looks a key
// up): what AppendStrings renders with all. A row change needs its
// operation, relation oid, LSN, commit LSN, descriptor version, xid and
// commit time; a schema event or failure its operation, relation oid,
// LSN and commit LSN.
func ChangeFromStrings(get func(string) (string, bool)) (*Change, error) {
	p := parser{get: get}
	c := &Change{Rel: &Relation{}, Tx: &Tx{}, RecordIndex: -1}
	c.Op, _ = p.text(KeyOperation, true)
	c.Event, _ = get(KeyEvent)
	c.Error, _ = get(KeyError)
	c.Rel.Schema, _ = get(KeySchema)
	c.Rel.Table, _ = get(KeyTable)
	c.Rel.Oid = uint32(p.uint(KeyRelationOid, 32, true))
	if s, _ := get(KeyKey); s != "" {
		c.Rel.Key = strings.Split(s, ",")
	}
	c.LSN = p.lsn(KeyLSN, true)
	c.Tx.CommitLSN = p.lsn(KeyCommitLSN, true)
	row := c.IsRow()
	c.Tx.TopXID = uint32(p.uint(KeyXID, 32, row))
	c.Tx.CommitTime = p.time(KeyCommitTime, row)
	c.DescVersion = p.lsn(KeyDescVersion, row)
	c.TID = p.tid(KeyTID)
	c.OldTID = p.tid(KeyOldTID)
	c.Filenode = uint32(p.uint(KeyFilenode, 32, false))
	if s, _ := get(KeyUnchangedToast); s != "" {
		c.UnchangedToast = strings.Split(s, ",")
	}
	if s, ok := get(KeyRecordIndex); ok {
		n, err := strconv.ParseUint(s, 10, 31)
		if err != nil {
			p.fail(KeyRecordIndex, s, err)
		}
		c.RecordIndex = int(n)
	}
	c.KeyChanged = p.flag(KeyKeyChanged)
	c.Rewritten = p.flag(KeyRewritten)
	c.Epoch = p.uint(KeyEpoch, 64, false)
	c.Seq = p.uint(KeySeq, 64, false)
	if p.err != nil {
		return nil, fmt.Errorf("%w (is walshadow_decode before this output?)", p.err)
	}
	return c, nil
}

func (p *parser) tid(key string) TID {
	s, ok := p.get(key)
	if !ok {
		return TID{}
	}
	t, err := ParseTID(s)
	if err != nil && p.err == nil {
		p.err = fmt.Errorf("metadata %s: %w", key, err)
	}
	return t
}
