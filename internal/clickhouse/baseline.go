package clickhouse

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/statefile"
	"github.com/walshadow/walshadow/internal/wal"
)

// MappedColumn is a source column that has a ClickHouse column.
type MappedColumn struct {
	Attnum int16
	// Source is the column's source name at the last agreement.
	Source string
	// Spec is the ClickHouse column: name, type, nullability, default.
	Spec ColumnSpec
	// Key: part of the sorting key.
	Key bool
}

// Agreed is the last point where a relation's source shape and its
// ClickHouse table agreed: the durable baseline each change is planned
// against, so the DDL never depends on what a cache has seen. The full
// source shape is kept, not just the mapped columns: only it tells a
// column the operator excluded from one the source added since.
//
// Agreed has no JSON form of its own: Store keeps it in agreedJSON, whose
// field names are the file's.
type Agreed struct {
	Oid    uint32
	DbOid  uint32
	Schema string
	Table  string
	// ValidFrom is the descriptor version agreed on.
	ValidFrom wal.LSN
	// Shape is the full source shape at agreement: every live column,
	// excluded ones too, in attnum order.
	Shape      []desclog.Column
	KeyAttnums []int16
	Target     Target
	// Columns are the mapped columns in ClickHouse column order.
	Columns []MappedColumn
	// OrderBy is the sorting key as ClickHouse names; empty for a change
	// log (MergeTree ORDER BY tuple()).
	OrderBy []string
	// Dropped: dropped on the source, table retained on ClickHouse.
	Dropped bool
	// Left: the relation left the output's scope (a configuration change,
	// a rename out of the include patterns, no longer a table): its
	// ClickHouse table keeps its rows but no longer follows the source. If
	// the relation returns it is loaded again (output/load_scope.go).
	Left bool
	// Filenode is the heap generation (relfilenode) whose tuples a
	// LayoutPhysical table's rows are keyed by; 0 while the table is empty
	// (new, or truncated): the next row's generation is adopted.
	Filenode uint32
	// FilenodeFrom is where that generation's rows begin in the WAL (the
	// first adopted row, a load's coverage, a TRUNCATE): a replayed row of
	// another generation older than it is superseded.
	FilenodeFrom wal.LSN
	// RefilledFile and RefilledBefore, when set, say the table was
	// rebuilt empty at a rewrite (output/refill.go): its rows are the ones
	// the rewriting transaction, which committed at RefilledBefore, wrote
	// into the new file RefilledFile, and everything after. A row change
	// before RefilledBefore in any other file (the transaction's own
	// changes before the rewrite, or a replay) is reflected in the
	// rewrite's rows already, and is skipped.
	RefilledFile   uint32
	RefilledBefore wal.LSN
}

// Store keeps every relation's Agreed durably in a journaled state file
// (internal/statefile, "Journaled files"): dir/baseline.json
// (statefile.OutputDir.Baseline), the snapshot, and baseline.json.journal,
// the changes since, each appended and synced before the call making it
// returns, so a change costs one record however many tables there are. It
// is safe for concurrent use. The snapshot, in the statefile envelope:
//
//	"format": "walshadow-baseline", "version": 3,
//	"body": {"agreed": [               sorted by oid
//	  {"oid": 16384, "db_oid": 5, "schema": "public", "table": "orders",
//	   "valid_from": 23803720,         an LSN, as a number
//	   "shape": [{"num": 1, "name": "id", "type_oid": 20, "typmod": -1,
//	     "type_name": "bigint", "type_kind": 98, "base_type_oid": 0,
//	     "elem_type_oid": 0, "not_null": true, "dropped": false,
//	     "by_val": true, "len": 8, "align": 100, "storage": 112,
//	     "has_missing": false, "missing": null}, ...],
//	   "key_attnums": [1],
//	   "target": {"database": "shop", "table": "public.orders"},
//	   "columns": [{"attnum": 1, "source": "id", "name": "id",
//	     "type": {"type": "Int64", "repr": "int"},
//	     "nullable": false, "default": "", "key": true}, ...],
//	   "order_by": ["id"], "dropped": false, "left": false,
//	   "filenode": 0, "filenode_from": 0,
//	   "refilled_file": 16402, "refilled_before": 23803720}, left out when zero
//	  ...]}
//
// Bytes (type_kind, align, storage) are numbers. A column type is stored
// with its Repr by name ("unix_micros"), so reordering the Repr constants
// cannot reinterpret a stored baseline; "elem", "precision", "scale" and
// "reason" are left out when zero. A journal record is one JSON document:
//
//	{"put": {<an agreement, as above>}}      the agreement of its oid, whole
//	{"delete": 16384}                        the agreement of that oid forgotten
//
// Version 2 was the same body, the file rewritten whole on every change
// with no journal: it is read as it is and rewritten as version 3 at the
// next change (a walshadow that reads version 2 at most refuses version 3
// rather than miss the journal's changes).
//
// Version 1, before the envelope, was one line of compact JSON:
//
//	{"format":1,"crc32c":<uint32>,"agreed":[<agreement>,...]}
//
// its crc32c CRC-32C of the "agreed" array's bytes exactly as they are in
// the file, the agreements named as above but for the shape's columns and
// the target, named by their Go fields ("Num", "TypeOid", "Database",
// ...), and "left", "filenode" and "filenode_from", left out when zero. It
// is read once, for the upgrade: the next Put or Delete rewrites the file
// in the envelope.
type Store struct {
	mu     sync.Mutex
	dir    string
	path   string
	j      *statefile.Journal // nil: read-only (ReadStore)
	agreed map[uint32]*Agreed
	// byTarget indexes agreed by target: a new relation's agreement asks
	// who else writes to its table, which must not cost every agreement.
	byTarget map[Target]map[uint32]bool
}

// baselineSpec is the baseline file's envelope; version 2, the same body
// in a file an older walshadow rewrote whole on every change, is read as
// it is.
var baselineSpec = statefile.Spec{Format: "walshadow-baseline", Version: 3, Reads: []int{2},
	Remedy: "restore it from a backup of the state directory; without it the output follows every table as if for the first time"}

// OpenStore opens (creating dir with mode 0700 if needed) the store in
// dir and loads its baseline file. A file that cannot be trusted is a
// *statefile.Error naming the path and whether it is truncated or corrupt.
func OpenStore(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating baseline directory %s: %w", dir, err)
	}
	s := newStore(dir)
	// Before the statefile envelope the store wrote its own temp files,
	// baseline.json.tmp-<random>, which a crash of an older walshadow can
	// have left behind; nothing else removes them. (statefile.Spec.Write's
	// own temp file has a fixed name and is overwritten by the next write.)
	leftovers, err := filepath.Glob(s.path + ".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("listing leftover temp files in %s: %w", dir, err)
	}
	for _, name := range leftovers {
		if err := os.Remove(name); err != nil {
			return nil, fmt.Errorf("removing leftover temp file %s: %w", name, err)
		}
	}
	j, records, err := statefile.OpenJournal(s.path, baselineSpec, s.readSnapshot)
	if err != nil {
		return nil, err
	}
	s.j = j
	return s, s.replay(records)
}

func newStore(dir string) *Store {
	return &Store{dir: dir, path: statefile.OutputDir(dir).Baseline(), agreed: map[uint32]*Agreed{}, byTarget: map[Target]map[uint32]bool{}}
}

// set makes a the agreement of its oid in memory, nil forgetting oid's.
func (s *Store) set(oid uint32, a *Agreed) {
	if old := s.agreed[oid]; old != nil {
		delete(s.byTarget[old.Target], oid)
		if len(s.byTarget[old.Target]) == 0 {
			delete(s.byTarget, old.Target)
		}
	}
	if a == nil {
		delete(s.agreed, oid)
		return
	}
	s.agreed[oid] = a
	if s.byTarget[a.Target] == nil {
		s.byTarget[a.Target] = map[uint32]bool{}
	}
	s.byTarget[a.Target][oid] = true
}

// OnTarget returns copies of the agreements on target, by oid.
func (s *Store) OnTarget(target Target) []*Agreed {
	s.mu.Lock()
	defer s.mu.Unlock()
	var on []*Agreed
	for oid := range s.byTarget[target] {
		on = append(on, s.agreed[oid].Clone())
	}
	slices.SortFunc(on, func(a, b *Agreed) int { return cmp.Compare(a.Oid, b.Oid) })
	return on
}

// ReadStore reads the store in dir while its owner may be changing it
// (walshadow status, comparisons in tests): nothing is created or removed,
// and every change is refused.
func ReadStore(dir string) (*Store, error) {
	s := newStore(dir)
	records, err := statefile.ReadJournal(s.path, baselineSpec, s.readSnapshot)
	if err != nil {
		return nil, err
	}
	return s, s.replay(records)
}

// ReadAgreed reads the agreements of the store in dir, sorted by oid
// (ReadStore). No file: none.
func ReadAgreed(dir string) ([]*Agreed, error) {
	s, err := ReadStore(dir)
	if err != nil || len(s.agreed) == 0 {
		return nil, err
	}
	return s.All(), nil
}

// readSnapshot decodes the baseline file's snapshot into s.
func (s *Store) readSnapshot(data []byte) error {
	list, err := decodeBaseline(s.path, data)
	if err != nil {
		return err
	}
	// (ReadJournal reads again when a compaction raced it: start over.)
	s.agreed, s.byTarget = map[uint32]*Agreed{}, map[Target]map[uint32]bool{}
	for _, a := range list {
		s.set(a.Oid, a)
	}
	return nil
}

// baselineRecord is one change in the store's journal.
type baselineRecord struct {
	Put    *agreedJSON `json:"put,omitempty"`
	Delete uint32      `json:"delete,omitempty"`
}

// replay applies the journal's records after the snapshot.
func (s *Store) replay(records [][]byte) error {
	for i, b := range records {
		var r baselineRecord
		err := statefile.DecodeStrict(b, &r)
		switch {
		case err != nil:
		case r.Put != nil && r.Delete == 0:
			var a *Agreed
			if a, err = r.Put.agreed(); err == nil {
				s.set(a.Oid, a)
			}
		case r.Put == nil && r.Delete != 0:
			s.set(r.Delete, nil)
		default:
			err = errors.New("not exactly one of put and delete")
		}
		if err != nil {
			return baselineSpec.Corrupt(s.path+statefile.JournalSuffix, fmt.Errorf("change %d: %w", i+1, err))
		}
	}
	return nil
}

// decodeBaseline decodes a baseline file's snapshot (version 3 or 2 in the
// envelope, or version 1); path names it in errors. What cannot be
// trusted is a *statefile.Error.
func decodeBaseline(path string, data []byte) ([]*Agreed, error) {
	var body baselineBody
	if err := baselineSpec.Decode(path, data, &body, func(data []byte) error { return readBaselineV1(data, &body) }); err != nil {
		return nil, err
	}
	corrupt := func(err error) error {
		return baselineSpec.Corrupt(path, err)
	}
	list := make([]*Agreed, 0, len(body.Agreed))
	seen := make(map[uint32]bool, len(body.Agreed))
	for i, j := range body.Agreed {
		if j == nil {
			return nil, corrupt(fmt.Errorf("entry %d is null", i))
		}
		if seen[j.Oid] {
			return nil, corrupt(fmt.Errorf("relation oid %d appears twice", j.Oid))
		}
		seen[j.Oid] = true
		a, err := j.agreed()
		if err != nil {
			return nil, corrupt(fmt.Errorf("relation oid %d: %w", j.Oid, err))
		}
		list = append(list, a)
	}
	return list, nil
}

// readBaselineV1 reads the baseline file's form before the envelope into
// body.
func readBaselineV1(data []byte, body *baselineBody) error {
	var v1 struct {
		Format int             `json:"format"`
		CRC32C uint32          `json:"crc32c"`
		Agreed json.RawMessage `json:"agreed"`
	}
	if err := statefile.DecodeStrict(data, &v1); err != nil {
		return fmt.Errorf("not a baseline: %w", err)
	}
	if v1.Format != 1 {
		return fmt.Errorf("format %d, this walshadow reads format 1 or the %s envelope", v1.Format, baselineSpec.Format)
	}
	if sum := statefile.CRC(v1.Agreed); sum != v1.CRC32C {
		return fmt.Errorf("checksum mismatch: stored crc32c %d, contents give %d", v1.CRC32C, sum)
	}
	// Leniently, as the code that wrote it read it: a field an older
	// walshadow wrote and this one no longer has is not damage (the
	// checksum vouches for the bytes).
	var list []*agreedV1
	if err := json.Unmarshal(v1.Agreed, &list); err != nil {
		return fmt.Errorf("agreed array despite a matching checksum: %w", err)
	}
	body.Agreed = make([]*agreedJSON, len(list))
	for i, a := range list {
		if a != nil {
			body.Agreed[i] = a.current()
		}
	}
	return nil
}

// baselineBody is the envelope's body.
type baselineBody struct {
	Agreed []*agreedJSON `json:"agreed"`
}

// agreedJSON is an Agreed on disk.
type agreedJSON struct {
	Oid            uint32             `json:"oid"`
	DbOid          uint32             `json:"db_oid"`
	Schema         string             `json:"schema"`
	Table          string             `json:"table"`
	ValidFrom      wal.LSN            `json:"valid_from"`
	Shape          []shapeColumnJSON  `json:"shape"`
	KeyAttnums     []int16            `json:"key_attnums"`
	Target         targetJSON         `json:"target"`
	Columns        []mappedColumnJSON `json:"columns"`
	OrderBy        []string           `json:"order_by"`
	Dropped        bool               `json:"dropped"`
	Left           bool               `json:"left"`
	Filenode       uint32             `json:"filenode"`
	FilenodeFrom   wal.LSN            `json:"filenode_from"`
	RefilledFile   uint32             `json:"refilled_file,omitempty"`
	RefilledBefore wal.LSN            `json:"refilled_before,omitempty"`
}

// shapeColumnJSON is a desclog.Column on disk: the same fields (a Go
// conversion goes both ways, and stops compiling when desclog.Column
// changes), with names of their own.
type shapeColumnJSON struct {
	Num         int16   `json:"num"`
	Name        string  `json:"name"`
	TypeOid     uint32  `json:"type_oid"`
	TypMod      int32   `json:"typmod"`
	TypeName    string  `json:"type_name"`
	TypeKind    byte    `json:"type_kind"`
	BaseTypeOid uint32  `json:"base_type_oid"`
	ElemTypeOid uint32  `json:"elem_type_oid"`
	NotNull     bool    `json:"not_null"`
	Dropped     bool    `json:"dropped"`
	ByVal       bool    `json:"by_val"`
	Len         int16   `json:"len"`
	Align       byte    `json:"align"`
	Storage     byte    `json:"storage"`
	HasMissing  bool    `json:"has_missing"`
	Missing     *string `json:"missing"`
}

// targetJSON is a Target on disk.
type targetJSON struct {
	Database string `json:"database"`
	Table    string `json:"table"`
}

// mappedColumnJSON is a MappedColumn on disk, its ColumnSpec flattened
// into it (the same in version 1).
type mappedColumnJSON struct {
	Attnum   int16      `json:"attnum"`
	Source   string     `json:"source"`
	Name     string     `json:"name"`
	Type     storedType `json:"type"`
	Nullable bool       `json:"nullable"`
	Default  string     `json:"default"`
	Key      bool       `json:"key"`
}

// agreedV1 is an Agreed in version 1: agreedJSON's names but for the
// shape and the target, which had no JSON names of their own (their Go
// field names, which desclog.Column and Target decode as they are), and
// "left", "filenode" and "filenode_from", which were left out when zero.
type agreedV1 struct {
	agreedJSON
	Shape  []desclog.Column `json:"shape"`
	Target Target           `json:"target"`
}

// current is a version 1 agreement in the current form.
func (a *agreedV1) current() *agreedJSON {
	j := a.agreedJSON
	j.Target, j.Shape = targetJSON(a.Target), nil
	if a.Shape != nil {
		j.Shape = make([]shapeColumnJSON, len(a.Shape))
		for i, c := range a.Shape {
			j.Shape[i] = shapeColumnJSON(c)
		}
	}
	return &j
}

// toJSON is a on disk.
func (a *Agreed) toJSON() (*agreedJSON, error) {
	j := &agreedJSON{Oid: a.Oid, DbOid: a.DbOid, Schema: a.Schema, Table: a.Table, ValidFrom: a.ValidFrom,
		KeyAttnums: a.KeyAttnums, Target: targetJSON(a.Target), OrderBy: a.OrderBy,
		Dropped: a.Dropped, Left: a.Left, Filenode: a.Filenode, FilenodeFrom: a.FilenodeFrom,
		RefilledFile: a.RefilledFile, RefilledBefore: a.RefilledBefore}
	for _, c := range a.Shape {
		j.Shape = append(j.Shape, shapeColumnJSON(c))
	}
	for _, m := range a.Columns {
		t, err := toStoredType(m.Spec.Type)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", m.Spec.Name, err)
		}
		j.Columns = append(j.Columns, mappedColumnJSON{Attnum: m.Attnum, Source: m.Source, Name: m.Spec.Name, Type: t,
			Nullable: m.Spec.Nullable, Default: m.Spec.Default, Key: m.Key})
	}
	return j, nil
}

// agreed is toJSON's inverse. Empty slices come back nil, as Clone makes
// them.
func (j *agreedJSON) agreed() (*Agreed, error) {
	a := &Agreed{Oid: j.Oid, DbOid: j.DbOid, Schema: j.Schema, Table: j.Table, ValidFrom: j.ValidFrom,
		KeyAttnums: cloneOrNil(j.KeyAttnums), Target: Target(j.Target), OrderBy: cloneOrNil(j.OrderBy),
		Dropped: j.Dropped, Left: j.Left, Filenode: j.Filenode, FilenodeFrom: j.FilenodeFrom,
		RefilledFile: j.RefilledFile, RefilledBefore: j.RefilledBefore}
	for _, c := range j.Shape {
		a.Shape = append(a.Shape, desclog.Column(c))
	}
	for _, m := range j.Columns {
		t, err := fromStoredType(m.Type)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", m.Name, err)
		}
		a.Columns = append(a.Columns, MappedColumn{Attnum: m.Attnum, Source: m.Source, Key: m.Key,
			Spec: ColumnSpec{Name: m.Name, Type: t, Nullable: m.Nullable, Default: m.Default}})
	}
	return a, nil
}

// Get returns a copy of oid's agreement, nil if there is none.
func (s *Store) Get(oid uint32) *Agreed {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.agreed[oid].Clone()
}

// All returns copies of every agreement, by oid.
func (s *Store) All() []*Agreed {
	s.mu.Lock()
	defer s.mu.Unlock()
	all := make([]*Agreed, 0, len(s.agreed))
	for _, a := range s.agreed {
		all = append(all, a.Clone())
	}
	slices.SortFunc(all, func(a, b *Agreed) int { return int(int64(a.Oid) - int64(b.Oid)) })
	return all
}

// Put records a (a copy of it) as its relation's agreement and returns
// once it is on disk; on error the store is unchanged.
func (s *Store) Put(a *Agreed) error {
	if a == nil {
		return errors.New("storing a baseline: nil agreement")
	}
	j, err := a.toJSON()
	if err != nil {
		return fmt.Errorf("storing the baseline of relation %s.%s (oid %d): %w", a.Schema, a.Table, a.Oid, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.agreed[a.Oid]
	s.set(a.Oid, a.Clone())
	if err := s.commit(baselineRecord{Put: j}); err != nil {
		s.set(a.Oid, old)
		return fmt.Errorf("storing the baseline of relation %s.%s (oid %d): %w", a.Schema, a.Table, a.Oid, err)
	}
	return nil
}

// Delete forgets oid's agreement; deleting an absent one is a no-op.
func (s *Store) Delete(oid uint32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.agreed[oid]
	if !ok {
		return nil
	}
	s.set(oid, nil)
	if err := s.commit(baselineRecord{Delete: oid}); err != nil {
		s.set(oid, old)
		return fmt.Errorf("deleting the baseline of relation oid %d: %w", oid, err)
	}
	return nil
}

// DeferSync makes the next changes return before they are on disk, until
// Sync (statefile.Journal.DeferSync): for many made together, where
// nothing depends on their durability before Sync.
func (s *Store) DeferSync() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.j != nil {
		s.j.DeferSync()
	}
}

// Sync makes the changes since DeferSync durable.
func (s *Store) Sync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.j == nil {
		return nil
	}
	return s.j.Sync()
}

// commit appends r, a change already made to s.agreed, to the journal
// (s.mu held).
func (s *Store) commit(r baselineRecord) error {
	if s.j == nil {
		return fmt.Errorf("the baseline store %s is open read-only", s.path)
	}
	payload, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return s.j.Append(payload, s.snapshotBody)
}

// snapshotBody is the snapshot of every agreement (s.mu held).
func (s *Store) snapshotBody() (any, error) {
	body := baselineBody{Agreed: make([]*agreedJSON, 0, len(s.agreed))}
	for _, a := range s.agreed {
		j, err := a.toJSON()
		if err != nil {
			return nil, fmt.Errorf("relation oid %d: %w", a.Oid, err)
		}
		body.Agreed = append(body.Agreed, j)
	}
	slices.SortFunc(body.Agreed, func(a, b *agreedJSON) int { return cmp.Compare(a.Oid, b.Oid) })
	return body, nil
}

// Clone is a deep copy (nil for nil). Empty slices come back nil, as they
// do from the store, so a copy and a stored round trip compare equal.
func (a *Agreed) Clone() *Agreed {
	if a == nil {
		return nil
	}
	c := *a
	c.Shape = cloneColumns(a.Shape)
	c.KeyAttnums = cloneOrNil(a.KeyAttnums)
	c.OrderBy = cloneOrNil(a.OrderBy)
	c.Columns = nil
	for _, m := range a.Columns {
		m.Spec.Type = cloneType(m.Spec.Type)
		c.Columns = append(c.Columns, m)
	}
	return &c
}

func cloneOrNil[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return slices.Clone(s)
}

func cloneColumns(cols []desclog.Column) []desclog.Column {
	if len(cols) == 0 {
		return nil
	}
	out := slices.Clone(cols)
	for i := range out {
		if out[i].Missing != nil {
			v := *out[i].Missing
			out[i].Missing = &v
		}
	}
	return out
}

func cloneType(t ColumnType) ColumnType {
	if t.Elem != nil {
		elem := cloneType(*t.Elem)
		t.Elem = &elem
	}
	return t
}

// reprNames are the stored names of the Reprs: stable across reorderings
// of the constants.
var reprNames = map[Repr]string{
	ReprString:     "string",
	ReprBytes:      "bytes",
	ReprBool:       "bool",
	ReprInt:        "int",
	ReprUInt32:     "uint32",
	ReprFloat:      "float",
	ReprDecimal:    "decimal",
	ReprUUID:       "uuid",
	ReprDate:       "date",
	ReprDateTime64: "datetime64",
	ReprUnixMicros: "unix_micros",
	ReprUnixDays:   "unix_days",
	ReprArray:      "array",
}

type storedType struct {
	Type      string      `json:"type"`
	Repr      string      `json:"repr"`
	Elem      *storedType `json:"elem,omitempty"`
	Precision int         `json:"precision,omitempty"`
	Scale     int         `json:"scale,omitempty"`
	Reason    string      `json:"reason,omitempty"`
}

func toStoredType(t ColumnType) (storedType, error) {
	name, ok := reprNames[t.Repr]
	if !ok {
		return storedType{}, fmt.Errorf("type %s has unknown representation %d", t.Type, t.Repr)
	}
	st := storedType{Type: t.Type, Repr: name, Precision: t.Precision, Scale: t.Scale, Reason: t.Reason}
	if t.Elem != nil {
		elem, err := toStoredType(*t.Elem)
		if err != nil {
			return storedType{}, err
		}
		st.Elem = &elem
	}
	return st, nil
}

func fromStoredType(st storedType) (ColumnType, error) {
	t := ColumnType{Type: st.Type, Precision: st.Precision, Scale: st.Scale, Reason: st.Reason}
	found := false
	for repr, name := range reprNames {
		if name == st.Repr {
			t.Repr, found = repr, true
			break
		}
	}
	if !found {
		return ColumnType{}, fmt.Errorf("type %s has unknown representation %q", st.Type, st.Repr)
	}
	if st.Elem != nil {
		elem, err := fromStoredType(*st.Elem)
		if err != nil {
			return ColumnType{}, err
		}
		t.Elem = &elem
	}
	return t, nil
}
