package msg

import (
	"fmt"
	"strconv"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/walshadow/walshadow/internal/wal"
)

// Tx is the committed transaction a record or a change belongs to. Every
// record and change of one transaction shares one *Tx.
type Tx struct {
	TopXID     uint32
	CommitLSN  wal.LSN // the COMMIT (or COMMIT PREPARED) record
	CommitNext wal.LSN // where the record after it starts
	// FirstLSN is the transaction tree's first buffered change (the
	// commit's LSN when it changed no row).
	FirstLSN   wal.LSN
	CommitTime time.Time
}

// Record is a WAL record message's metadata: where the record is, the
// transaction it belongs to, and the session batch that carried it. The
// message's payload is the record's bytes.
type Record struct {
	LSN, Next wal.LSN // where the record starts, and the next one (EndRecPtr)
	XID       uint32  // the record's (sub)transaction
	TopXID    uint32  // the top-level transaction, when the record names it
	Rmgr      wal.RmgrID
	Info      uint8
	PGMajor   int
	// Deferred: the record's transaction changed catalogs before it.
	Deferred bool
	Tx       *Tx  // nil only outside a committed transaction
	Last     bool // the transaction's last record
	// Seq numbers the session's batches within a run, Epoch the run.
	Seq, Epoch uint64
}

// SetRecord sets r on m: the typed value, and with all the string keys.
func SetRecord(m *service.Message, r *Record, all bool) {
	m.MetaSetMut(KeyRecord, r)
	if all {
		r.AppendStrings(func(k, v string) { m.MetaSetMut(k, v) })
	}
}

// RecordOf reads m's record metadata: the typed value, or else its
// strings.
func RecordOf(m *service.Message) (*Record, error) {
	if v, ok := m.MetaGetMut(KeyRecord); ok {
		if r, ok := v.(*Record); ok {
			return r, nil
		}
	}
	return RecordFromStrings(m.MetaGet)
}

// AppendStrings renders r as its string metadata, key by key.
func (r *Record) AppendStrings(f func(key, value string)) {
	f(KeyWALLSN, r.LSN.String())
	f(KeyWALNextLSN, r.Next.String())
	f(KeyWALXID, strconv.FormatUint(uint64(r.XID), 10))
	if r.TopXID != 0 {
		f(KeyWALTopXID, strconv.FormatUint(uint64(r.TopXID), 10))
	}
	f(KeyWALRmgr, r.Rmgr.String())
	if layout, err := wal.LayoutForMajor(r.PGMajor); err == nil {
		f(KeyWALRecordType, wal.Identify(layout, r.Rmgr, r.Info))
	}
	f(KeyPGMajor, strconv.Itoa(r.PGMajor))
	if r.Deferred {
		f(KeyDeferred, "true")
	}
	if tx := r.Tx; tx != nil {
		f(KeyCommitLSN, tx.CommitLSN.String())
		f(KeyCommitNextLSN, tx.CommitNext.String())
		f(KeyTopXID, strconv.FormatUint(uint64(tx.TopXID), 10))
		f(KeyCommitTime, tx.CommitTime.Format(time.RFC3339Nano))
		f(KeyTxFirstLSN, tx.FirstLSN.String())
	}
	if r.Last {
		f(KeyTxLast, "true")
	}
	f(KeySeq, strconv.FormatUint(r.Seq, 10))
	f(KeyEpoch, strconv.FormatUint(r.Epoch, 10))
}

// RecordFromStrings parses a record's string metadata (get looks a key
// up). The resource manager and record type are descriptive only and not
// read back; the transaction is required (walshadow_decode reads only
// committed transactions' records).
func RecordFromStrings(get func(string) (string, bool)) (*Record, error) {
	p := parser{get: get}
	r := &Record{Tx: &Tx{}}
	r.LSN = p.lsn(KeyWALLSN, true)
	r.Next = p.lsn(KeyWALNextLSN, true)
	r.XID = uint32(p.uint(KeyWALXID, 32, false))
	r.TopXID = uint32(p.uint(KeyWALTopXID, 32, false))
	r.PGMajor = int(p.uint(KeyPGMajor, 16, true))
	r.Deferred = p.flag(KeyDeferred)
	r.Tx.CommitLSN = p.lsn(KeyCommitLSN, true)
	r.Tx.CommitNext = p.lsn(KeyCommitNextLSN, true)
	r.Tx.TopXID = uint32(p.uint(KeyTopXID, 32, true))
	r.Tx.CommitTime = p.time(KeyCommitTime, true)
	r.Tx.FirstLSN = p.lsn(KeyTxFirstLSN, false)
	r.Last = p.flag(KeyTxLast)
	r.Seq = p.uint(KeySeq, 64, true)
	r.Epoch = p.uint(KeyEpoch, 64, true)
	if p.err != nil {
		return nil, fmt.Errorf("%w (walshadow_decode reads the pg_physical_wal input's messages)", p.err)
	}
	return r, nil
}

// parser reads string metadata, keeping the first error.
type parser struct {
	get func(string) (string, bool)
	err error
}

func (p *parser) text(key string, required bool) (string, bool) {
	s, ok := p.get(key)
	if !ok && required && p.err == nil {
		p.err = fmt.Errorf("message without %s metadata", key)
	}
	return s, ok
}

func (p *parser) fail(key, s string, err error) {
	if p.err == nil {
		p.err = fmt.Errorf("metadata %s %q: %w", key, s, err)
	}
}

func (p *parser) lsn(key string, required bool) wal.LSN {
	s, ok := p.text(key, required)
	if !ok {
		return 0
	}
	v, err := wal.ParseLSN(s)
	if err != nil {
		p.fail(key, s, err)
	}
	return v
}

func (p *parser) uint(key string, bits int, required bool) uint64 {
	s, ok := p.text(key, required)
	if !ok {
		return 0
	}
	v, err := strconv.ParseUint(s, 10, bits)
	if err != nil {
		p.fail(key, s, err)
	}
	return v
}

func (p *parser) time(key string, required bool) time.Time {
	s, ok := p.text(key, required)
	if !ok {
		return time.Time{}
	}
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		p.fail(key, s, err)
	}
	return v
}

func (p *parser) flag(key string) bool {
	s, _ := p.get(key)
	return s == "true"
}
