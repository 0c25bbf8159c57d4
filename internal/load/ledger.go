package load

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/walshadow/walshadow/internal/statefile"
	"github.com/walshadow/walshadow/internal/wal"
)

// Mode is how a table's existing rows are loaded.
type Mode string

const (
	ModeNone       Mode = "none"        // no initial load: only changes from now on
	ModeCopy       Mode = "copy"        // COPY from the source in ctid ranges
	ModeBaseBackup Mode = "base_backup" // read from the heap pages of a base backup
)

var modes = []Mode{ModeNone, ModeCopy, ModeBaseBackup}

// ParseMode parses a configured load mode.
func ParseMode(s string) (Mode, error) {
	if m := Mode(s); slices.Contains(modes, m) {
		return m, nil
	}
	return "", fmt.Errorf("unknown initial load mode %q: valid modes are none, copy and base_backup", s)
}

// Phase is how far a table's load has got.
type Phase string

const (
	PhaseLoading    Phase = "loading"    // rows are being copied into the staging table
	PhasePublishing Phase = "publishing" // the staging table is being swapped in for the target
	PhaseDone       Phase = "done"       // the target holds the loaded rows
)

var phases = []Phase{PhaseLoading, PhasePublishing, PhaseDone}

// Entry is one table's load.
type Entry struct {
	Oid           uint32
	Schema, Table string  // source relation
	Mode          Mode    // never empty
	Phase         Phase   // never empty
	Coverage      wal.LSN // S: loaded rows carry _lsn = S
	Database      string  // ClickHouse target database
	Target        string  // ClickHouse target table
	Staging       string  // staging table name (same database)
	Old           string  // where the previous target goes during a rename-sequence publish
	StagingUUID   string  // Atomic databases: the staging table's uuid before EXCHANGE
	// StaleDatabase.Stale is this output's earlier table of the relation,
	// which stopped following it (it left the scope, or was UNLOGGED): a
	// reload supersedes it, so it is dropped once the load is published.
	// Empty for a first load.
	StaleDatabase, Stale string
	// Snapshot is the load's snapshot as pg_current_snapshot() shows it
	// ("xmin:xmax:xip,..."): the copy's, or for a base backup the one taken
	// just before it. SeenBy: every transaction the load reflects
	// committed before it. Together they
	// tell which streamed transactions the load already holds.
	Snapshot    string
	SeenBy      wal.LSN
	Attempt     int
	Rows, Bytes int64
	// Times are kept in UTC without a monotonic reading, as the file holds
	// them; the zero time means not set.
	StartedAt, FinishedAt time.Time
	LastError             string
	// Reason says why a table already followed is loaded again (empty
	// for a first load): it left and returned to the scope, or it failed
	// (FailedAt, nonzero, is the position of the change it could not
	// take) and this load repairs it.
	Reason   string
	FailedAt wal.LSN
	// Loads counts the load attempts of the relation since this output
	// first loaded it (each a copy of the table from the source; carried
	// over from one reload's entry to the next).
	Loads int
	// Streak is the run of identical failures behind the table's latest
	// (park.go); Parked, when set, parks the table: it is not loaded, nor
	// are its changes written, until something that could cure it
	// changes or the operator asks for a reload.
	Streak Streak
	Parked *Parking
}

// LedgerFile is the ledger's name in the state directory; the format is
// drawn in the package documentation.
const LedgerFile = statefile.LoadsName

// ledgerSpec is the ledger's state-file envelope. Version 4 is version
// 3's body as the snapshot of a journaled file, which a walshadow reading
// version 3 at most refuses rather than miss the journal's changes;
// version 3 added the retry economy's fields (loads, streak, parked, the
// reloads by reason); versions 2 (the same body without them: its entries
// have none) and 3 are read as they are and rewritten as version 4 at the
// next change; version 1, the entries in a flat document of its own, is
// read once for upgrade.
var ledgerSpec = statefile.Spec{Format: "walshadow-loads", Version: 4, Reads: []int{2, 3},
	Remedy: "restore it from a backup of the state directory, or remove it to reload every table whose load is not done"}

const ledgerV1Version = 1

// Ledger is the durable record of the state directory's loads, by source
// oid. It is safe for concurrent use; every change is on disk before the
// call that makes it returns (a record appended to the file's journal:
// internal/statefile, "Journaled files").
type Ledger struct {
	path    string
	mu      sync.Mutex
	j       *statefile.Journal // nil: read-only (ReadLedger)
	entries map[uint32]Entry
	// reloads counts the reloads of followed tables by reason (the
	// classes of walshadow_table_reloads_total), since the state
	// directory's first.
	reloads map[string]int64
}

// OpenLedger reads dir's ledger for its owner (the output), which alone
// changes it. A directory without one gives an empty ledger; a file that
// cannot be trusted gives a *statefile.Error (truncated or corrupt).
// Opening writes nothing.
func OpenLedger(dir string) (*Ledger, error) {
	l := &Ledger{path: statefile.OutputDir(dir).Loads()}
	j, records, err := statefile.OpenJournal(l.path, ledgerSpec, l.readSnapshot)
	if err != nil {
		return nil, err
	}
	l.j = j
	return l, l.replay(records)
}

// ReadLedger reads dir's ledger while its owner may be changing it
// (walshadow status, tests): a ledger that refuses every change.
func ReadLedger(dir string) (*Ledger, error) {
	l := &Ledger{path: statefile.OutputDir(dir).Loads()}
	records, err := statefile.ReadJournal(l.path, ledgerSpec, l.readSnapshot)
	if err != nil {
		return nil, err
	}
	return l, l.replay(records)
}

// readSnapshot decodes the ledger file's snapshot into l.
func (l *Ledger) readSnapshot(data []byte) (err error) {
	l.entries, l.reloads, err = decodeLedger(l.path, data)
	return err
}

// replay applies the journal's records after the snapshot.
func (l *Ledger) replay(records [][]byte) error {
	if l.entries == nil {
		l.entries, l.reloads = map[uint32]Entry{}, map[string]int64{}
	}
	for i, b := range records {
		if err := l.applyRecord(b); err != nil {
			return ledgerSpec.Corrupt(l.path+statefile.JournalSuffix, fmt.Errorf("change %d: %w", i+1, err))
		}
	}
	return nil
}

// ledgerRecord is one change in the ledger's journal: an entry recorded
// whole, an entry forgotten, or the reload counts whole.
type ledgerRecord struct {
	Put     *entryJSON       `json:"put,omitempty"`
	Delete  uint32           `json:"delete,omitempty"`
	Reloads map[string]int64 `json:"reloads,omitempty"`
}

// applyRecord applies one journal record to l.
func (l *Ledger) applyRecord(b []byte) error {
	var r ledgerRecord
	if err := statefile.DecodeStrict(b, &r); err != nil {
		return err
	}
	switch {
	case r.Put != nil && r.Delete == 0 && r.Reloads == nil:
		got, err := entriesOf([]entryJSON{*r.Put})
		if err != nil {
			return err
		}
		l.entries[r.Put.Oid] = got[r.Put.Oid]
	case r.Put == nil && r.Delete != 0 && r.Reloads == nil:
		delete(l.entries, r.Delete)
	case r.Put == nil && r.Delete == 0 && r.Reloads != nil:
		reloads, err := reloadsOf(r.Reloads)
		if err != nil {
			return err
		}
		l.reloads = reloads
	default:
		return errors.New("not exactly one of put, delete and reloads")
	}
	return nil
}

// commit makes one change durable: r is its record, and apply makes it in
// memory and returns what undoes it (a change that did not reach the disk
// is not seen).
func (l *Ledger) commit(r ledgerRecord, apply func() (undo func())) error {
	if l.j == nil {
		return fmt.Errorf("the load ledger %s is open read-only", l.path)
	}
	payload, err := json.Marshal(r)
	if err != nil {
		return err
	}
	undo := apply()
	if err := l.j.Append(payload, func() (any, error) { return ledgerBodyOf(l.entries, l.reloads), nil }); err != nil {
		undo()
		return err
	}
	return nil
}

// putLocked records e in memory and on disk (l.mu held).
func (l *Ledger) putLocked(e Entry) error {
	j := entryJSONOf(e)
	return l.commit(ledgerRecord{Put: &j}, func() func() {
		old, had := l.entries[e.Oid]
		l.entries[e.Oid] = e
		return func() {
			if had {
				l.entries[e.Oid] = old
			} else {
				delete(l.entries, e.Oid)
			}
		}
	})
}

// Get returns the load of the relation oid, if there is one.
func (l *Ledger) Get(oid uint32) (Entry, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.entries[oid]
	return e, ok
}

// Put records e, replacing the entry with its oid, and returns once the
// file holds it. On error the ledger is unchanged.
func (l *Ledger) Put(e Entry) error { return l.put(e, false) }

func (l *Ledger) put(e Entry, keepFailures bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if old, ok := l.entries[e.Oid]; ok && keepFailures {
		e.Streak, e.Parked = old.Streak, old.Parked
	}
	e.StartedAt, e.FinishedAt = e.StartedAt.UTC(), e.FinishedAt.UTC()
	if err := e.validate(); err != nil {
		return fmt.Errorf("recording the load of %s.%s in %s: %w", e.Schema, e.Table, l.path, err)
	}
	if err := l.putLocked(e); err != nil {
		return fmt.Errorf("recording the load of %s.%s: %w", e.Schema, e.Table, err)
	}
	return nil
}

// putLoad is Put of the engine's record of a load in progress (its
// phase, snapshot, progress): the failures' record, which the output may
// have changed meanwhile (Streak, Parked), stays as stored.
func (l *Ledger) putLoad(e Entry) error { return l.put(e, true) }

// Update changes the entry of oid in place with fn, under the ledger's
// lock (a read, change and write no other Put comes between), and
// returns the entry as it is after. fn returns false to leave it as it
// was; no entry: (zero, false, nil).
func (l *Ledger) Update(oid uint32, fn func(e *Entry) bool) (Entry, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.entries[oid]
	if !ok {
		return Entry{}, false, nil
	}
	if e.Parked != nil {
		p := *e.Parked
		e.Parked = &p // fn's changes must not reach the stored entry before it is written
	}
	if !fn(&e) {
		return l.entries[oid], true, nil
	}
	e.StartedAt, e.FinishedAt = e.StartedAt.UTC(), e.FinishedAt.UTC()
	if err := e.validate(); err != nil {
		return Entry{}, true, fmt.Errorf("recording the load of %s.%s in %s: %w", e.Schema, e.Table, l.path, err)
	}
	if err := l.putLocked(e); err != nil {
		return Entry{}, true, fmt.Errorf("recording the load of %s.%s: %w", e.Schema, e.Table, err)
	}
	return e, true, nil
}

// CountReload adds one reload for reason (a class of
// walshadow_table_reloads_total) and returns once the file holds it.
func (l *Ledger) CountReload(reason string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	next := make(map[string]int64, len(l.reloads)+1)
	for k, v := range l.reloads {
		next[k] = v
	}
	next[reason]++
	err := l.commit(ledgerRecord{Reloads: next}, func() func() {
		old := l.reloads
		l.reloads = next
		return func() { l.reloads = old }
	})
	if err != nil {
		return fmt.Errorf("counting a reload (%s): %w", reason, err)
	}
	return nil
}

// Reloads are the reloads of followed tables by reason.
func (l *Ledger) Reloads() map[string]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]int64, len(l.reloads))
	for k, v := range l.reloads {
		out[k] = v
	}
	return out
}

// Delete forgets the load of the relation oid (none is fine) and returns
// once the file no longer holds it. On error the ledger is unchanged.
func (l *Ledger) Delete(oid uint32) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.entries[oid]
	if !ok {
		return nil
	}
	err := l.commit(ledgerRecord{Delete: oid}, func() func() {
		delete(l.entries, oid)
		return func() { l.entries[oid] = e }
	})
	if err != nil {
		return fmt.Errorf("forgetting the load of %s.%s: %w", e.Schema, e.Table, err)
	}
	return nil
}

// All returns every entry, sorted by Schema, Table (then Oid).
func (l *Ledger) All() []Entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return sortedEntries(l.entries)
}

// Close closes the ledger's journal (changes after it fail).
func (l *Ledger) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.j.Close()
	l.j = nil
	return err
}

// ledgerBody is the envelope's body.
type ledgerBody struct {
	Entries []entryJSON `json:"entries"`
	// Reloads: version 3.
	Reloads map[string]int64 `json:"reloads,omitempty"`
}

func sortedEntries(entries map[uint32]Entry) []Entry {
	all := make([]Entry, 0, len(entries))
	for _, e := range entries {
		all = append(all, e)
	}
	slices.SortFunc(all, func(a, b Entry) int {
		return cmp.Or(strings.Compare(a.Schema, b.Schema), strings.Compare(a.Table, b.Table), cmp.Compare(a.Oid, b.Oid))
	})
	return all
}

// validate refuses what the file could not hold faithfully, so that every
// entry Put accepts is read back equal.
func (e Entry) validate() error {
	switch {
	case e.Oid == 0:
		return errors.New("oid 0")
	case e.Schema == "" || e.Table == "":
		return fmt.Errorf("oid %d: empty schema or table name", e.Oid)
	case !slices.Contains(modes, e.Mode):
		return fmt.Errorf("oid %d: mode %q is not none, copy or base_backup", e.Oid, e.Mode)
	case !slices.Contains(phases, e.Phase):
		return fmt.Errorf("oid %d: phase %q is not loading, publishing or done", e.Oid, e.Phase)
	case e.Attempt < 0 || e.Rows < 0 || e.Bytes < 0:
		return fmt.Errorf("oid %d: negative attempt %d, rows %d or bytes %d", e.Oid, e.Attempt, e.Rows, e.Bytes)
	case e.Loads < 0 || e.Streak.Count < 0 || e.Streak.Attempt < 0:
		return fmt.Errorf("oid %d: negative loads %d, streak count %d or attempt %d", e.Oid, e.Loads, e.Streak.Count, e.Streak.Attempt)
	case e.Streak.Count == 0 && e.Streak != (Streak{}):
		return fmt.Errorf("oid %d: a streak of no failure", e.Oid)
	case e.Parked != nil && (e.Parked.Since.IsZero() || e.Parked.Count < 1):
		return fmt.Errorf("oid %d: parked without a time or a count", e.Oid)
	}
	texts := []string{e.Schema, e.Table, e.Database, e.Target, e.Staging, e.Old, e.StagingUUID, e.StaleDatabase, e.Stale, e.LastError, e.Reason, e.Streak.Signature}
	times := []time.Time{e.StartedAt, e.FinishedAt}
	if p := e.Parked; p != nil {
		texts = append(texts, p.Reason, p.Remedy, p.Under.Config, p.Under.ServerVersion)
		times = append(times, p.Since, p.Under.ServerBoot)
	}
	for _, s := range texts {
		if !utf8.ValidString(s) {
			return fmt.Errorf("oid %d: %q is not valid UTF-8", e.Oid, s)
		}
	}
	for _, t := range times {
		// RFC 3339 has four-digit years only.
		if !t.IsZero() && (t.Year() < 1 || t.Year() > 9999) {
			return fmt.Errorf("oid %d: time %s is outside years 1 to 9999", e.Oid, t)
		}
	}
	return nil
}

// ledgerV1 is the ledger's form before the envelope: crc32c is CRC-32C
// of the compact JSON encoding of the document with crc32c set to 0.
type ledgerV1 struct {
	Format  string      `json:"format"`
	Version int         `json:"version"`
	Entries []entryJSON `json:"entries"`
	CRC     uint32      `json:"crc32c"`
}

// entryJSON is one entry on disk (both versions).
type entryJSON struct {
	Oid         uint32 `json:"oid"`
	Schema      string `json:"schema"`
	Table       string `json:"table"`
	Mode        string `json:"mode"`
	Phase       string `json:"phase"`
	Coverage    string `json:"coverage_lsn"`
	Database    string `json:"database"`
	Target      string `json:"target"`
	Staging     string `json:"staging"`
	Old         string `json:"old,omitempty"`
	StagingUUID string `json:"staging_uuid,omitempty"`
	StaleDB     string `json:"stale_database,omitempty"`
	Stale       string `json:"stale,omitempty"`
	Snapshot    string `json:"snapshot,omitempty"`
	SeenBy      string `json:"seen_by_lsn,omitempty"`
	Attempt     int    `json:"attempt"`
	Rows        int64  `json:"rows"`
	Bytes       int64  `json:"bytes"`
	StartedAt   string `json:"started_at,omitempty"`
	FinishedAt  string `json:"finished_at,omitempty"`
	LastError   string `json:"last_error,omitempty"`
	Reason      string `json:"reason,omitempty"`
	FailedAt    string `json:"failed_at_lsn,omitempty"`
	// Version 3.
	Loads  int         `json:"loads,omitempty"`
	Streak *streakJSON `json:"streak,omitempty"`
	Parked *parkedJSON `json:"parked,omitempty"`
}

// streakJSON is Entry.Streak on disk (version 3).
type streakJSON struct {
	Signature string `json:"signature"`
	At        string `json:"at_lsn,omitempty"`
	Count     int    `json:"count"`
	Attempt   int    `json:"attempt,omitempty"`
}

// parkedJSON is Entry.Parked on disk (version 3).
type parkedJSON struct {
	Since         string `json:"since"`
	Reason        string `json:"reason"`
	At            string `json:"at_lsn,omitempty"`
	Count         int    `json:"count"`
	Remedy        string `json:"remedy,omitempty"`
	Shape         string `json:"shape_lsn,omitempty"`
	Config        string `json:"config,omitempty"`
	ServerVersion string `json:"server_version,omitempty"`
	ServerBoot    string `json:"server_boot,omitempty"`
}

func (j ledgerV1) checksum() uint32 {
	j.CRC = 0
	b, _ := json.Marshal(j)
	return statefile.CRC(b)
}

func seenBy(l wal.LSN) string {
	if l == 0 {
		return ""
	}
	return l.String()
}

func encodeTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func decodeTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, err
	}
	return t.UTC(), nil
}

func encodeLedger(entries map[uint32]Entry, reloads map[string]int64) []byte {
	b, err := ledgerSpec.Encode(ledgerBodyOf(entries, reloads))
	if err != nil {
		// Only strings and integers: encoding cannot fail.
		panic(fmt.Sprintf("encoding the load ledger: %v", err))
	}
	return b
}

// ledgerBodyOf is the snapshot's body.
func ledgerBodyOf(entries map[uint32]Entry, reloads map[string]int64) ledgerBody {
	body := ledgerBody{Entries: []entryJSON{}}
	if len(reloads) > 0 {
		body.Reloads = reloads
	}
	for _, e := range sortedEntries(entries) {
		body.Entries = append(body.Entries, entryJSONOf(e))
	}
	return body
}

// entryJSONOf is e on disk.
func entryJSONOf(e Entry) entryJSON {
	j := entryJSON{
		Oid: e.Oid, Schema: e.Schema, Table: e.Table, Mode: string(e.Mode), Phase: string(e.Phase),
		Coverage: e.Coverage.String(), Database: e.Database, Target: e.Target, Staging: e.Staging,
		Old: e.Old, StagingUUID: e.StagingUUID, StaleDB: e.StaleDatabase, Stale: e.Stale, Snapshot: e.Snapshot, SeenBy: seenBy(e.SeenBy), Attempt: e.Attempt, Rows: e.Rows, Bytes: e.Bytes,
		StartedAt: encodeTime(e.StartedAt), FinishedAt: encodeTime(e.FinishedAt), LastError: e.LastError,
		Reason: e.Reason, FailedAt: seenBy(e.FailedAt), Loads: e.Loads,
	}
	if e.Streak.Count > 0 {
		j.Streak = &streakJSON{Signature: e.Streak.Signature, At: seenBy(e.Streak.At), Count: e.Streak.Count, Attempt: e.Streak.Attempt}
	}
	if p := e.Parked; p != nil {
		j.Parked = &parkedJSON{Since: encodeTime(p.Since), Reason: p.Reason, At: seenBy(p.At), Count: p.Count, Remedy: p.Remedy,
			Shape: seenBy(p.Under.Shape), Config: p.Under.Config, ServerVersion: p.Under.ServerVersion, ServerBoot: encodeTime(p.Under.ServerBoot)}
	}
	return j
}

// decodeLedger parses a ledger file (path names it in errors): the
// envelope (version 3, or 2), or version 1. What cannot be trusted is a
// *statefile.Error.
func decodeLedger(path string, b []byte) (map[uint32]Entry, map[string]int64, error) {
	var body ledgerBody
	if err := ledgerSpec.Decode(path, b, &body, func(data []byte) error { return decodeLedgerV1(data, &body) }); err != nil {
		return nil, nil, err
	}
	entries, err := entriesOf(body.Entries)
	if err != nil {
		return nil, nil, ledgerSpec.Corrupt(path, err)
	}
	reloads, err := reloadsOf(body.Reloads)
	if err != nil {
		return nil, nil, ledgerSpec.Corrupt(path, err)
	}
	return entries, reloads, nil
}

// reloadsOf checks the file's reload counts.
func reloadsOf(in map[string]int64) (map[string]int64, error) {
	reloads := make(map[string]int64, len(in))
	for k, v := range in {
		if v < 0 || !utf8.ValidString(k) || k == "" {
			return nil, fmt.Errorf("reloads: %q: %d", k, v)
		}
		reloads[k] = v
	}
	return reloads, nil
}

// decodeLedgerV1 reads the ledger's form before the envelope.
func decodeLedgerV1(b []byte, body *ledgerBody) error {
	var j ledgerV1
	if err := statefile.DecodeStrict(b, &j); err != nil {
		return fmt.Errorf("not a load ledger: %w", err)
	}
	if j.Format != ledgerSpec.Format {
		return fmt.Errorf("format %q, want %q", j.Format, ledgerSpec.Format)
	}
	if j.Version != ledgerV1Version {
		return fmt.Errorf("version %d, this walshadow reads version %d (or %d, before the envelope)", j.Version, ledgerSpec.Version, ledgerV1Version)
	}
	if sum := j.checksum(); sum != j.CRC {
		return fmt.Errorf("checksum %d, contents sum to %d", j.CRC, sum)
	}
	body.Entries = j.Entries
	return nil
}

// entriesOf checks and converts the file's entries.
func entriesOf(list []entryJSON) (entries map[uint32]Entry, err error) {
	entries = make(map[uint32]Entry, len(list))
	for i, je := range list {
		e := Entry{
			Oid: je.Oid, Schema: je.Schema, Table: je.Table, Mode: Mode(je.Mode), Phase: Phase(je.Phase),
			Database: je.Database, Target: je.Target, Staging: je.Staging, Old: je.Old,
			StagingUUID: je.StagingUUID, StaleDatabase: je.StaleDB, Stale: je.Stale, Snapshot: je.Snapshot, Attempt: je.Attempt, Rows: je.Rows, Bytes: je.Bytes, LastError: je.LastError,
			Reason: je.Reason, Loads: je.Loads,
		}
		lsn := func(field, s string) (wal.LSN, error) {
			if s == "" {
				return 0, nil
			}
			v, err := wal.ParseLSN(s)
			if err != nil {
				return 0, fmt.Errorf("entry %d (oid %d): %s %q: %w", i, je.Oid, field, s, err)
			}
			return v, nil
		}
		if js := je.Streak; js != nil {
			e.Streak = Streak{Failure: Failure{Signature: js.Signature}, Count: js.Count, Attempt: js.Attempt}
			if e.Streak.At, err = lsn("streak.at_lsn", js.At); err != nil {
				return nil, err
			}
			if js.Count < 1 {
				return nil, fmt.Errorf("entry %d (oid %d): streak count %d", i, je.Oid, js.Count)
			}
		}
		if jp := je.Parked; jp != nil {
			p := &Parking{Reason: jp.Reason, Count: jp.Count, Remedy: jp.Remedy}
			p.Under.Config, p.Under.ServerVersion = jp.Config, jp.ServerVersion
			if p.At, err = lsn("parked.at_lsn", jp.At); err != nil {
				return nil, err
			}
			if p.Under.Shape, err = lsn("parked.shape_lsn", jp.Shape); err != nil {
				return nil, err
			}
			if p.Since, err = decodeTime(jp.Since); err != nil {
				return nil, fmt.Errorf("entry %d (oid %d): parked.since %q: %w", i, je.Oid, jp.Since, err)
			}
			if p.Under.ServerBoot, err = decodeTime(jp.ServerBoot); err != nil {
				return nil, fmt.Errorf("entry %d (oid %d): parked.server_boot %q: %w", i, je.Oid, jp.ServerBoot, err)
			}
			e.Parked = p
		}
		if je.SeenBy != "" {
			if e.SeenBy, err = wal.ParseLSN(je.SeenBy); err != nil {
				return nil, fmt.Errorf("entry %d (oid %d): seen_by_lsn %q: %w", i, je.Oid, je.SeenBy, err)
			}
		}
		if je.FailedAt != "" {
			if e.FailedAt, err = wal.ParseLSN(je.FailedAt); err != nil {
				return nil, fmt.Errorf("entry %d (oid %d): failed_at_lsn %q: %w", i, je.Oid, je.FailedAt, err)
			}
		}
		if e.Coverage, err = wal.ParseLSN(je.Coverage); err != nil {
			return nil, fmt.Errorf("entry %d (oid %d): coverage_lsn %q: %w", i, je.Oid, je.Coverage, err)
		}
		if e.StartedAt, err = decodeTime(je.StartedAt); err != nil {
			return nil, fmt.Errorf("entry %d (oid %d): started_at %q: %w", i, je.Oid, je.StartedAt, err)
		}
		if e.FinishedAt, err = decodeTime(je.FinishedAt); err != nil {
			return nil, fmt.Errorf("entry %d (oid %d): finished_at %q: %w", i, je.Oid, je.FinishedAt, err)
		}
		if err := e.validate(); err != nil {
			return nil, fmt.Errorf("entry %d: %w", i, err)
		}
		if _, dup := entries[e.Oid]; dup {
			return nil, fmt.Errorf("entry %d: oid %d appears twice", i, e.Oid)
		}
		entries[e.Oid] = e
	}
	return entries, nil
}
