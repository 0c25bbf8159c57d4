package clickhouse

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/walshadow/walshadow/internal/desclog"
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
// ClickHouse table agreed (pinned_ddl_baseline.md, option 3). The full
// source shape is kept, not just the mapped columns: only it tells a
// column the operator excluded from one the source added since.
type Agreed struct {
	Oid    uint32 `json:"oid"`
	DbOid  uint32 `json:"db_oid"`
	Schema string `json:"schema"`
	Table  string `json:"table"`
	// ValidFrom is the descriptor version agreed on.
	ValidFrom wal.LSN `json:"valid_from"`
	// Shape is the full source shape at agreement: every live column,
	// excluded ones too, in attnum order.
	Shape      []desclog.Column `json:"shape"`
	KeyAttnums []int16          `json:"key_attnums"`
	Target     Target           `json:"target"`
	// Columns are the mapped columns in ClickHouse column order.
	Columns []MappedColumn `json:"columns"`
	// OrderBy is the sorting key as ClickHouse names; empty for a change
	// log (MergeTree ORDER BY tuple()).
	OrderBy []string `json:"order_by"`
	// Dropped: dropped on the source, table retained on ClickHouse.
	Dropped bool `json:"dropped"`
	// Left: the relation left the output's scope (a configuration change,
	// a rename out of the include patterns, no longer a table): its
	// ClickHouse table keeps its rows but no longer follows the source. If
	// the relation returns it is loaded again (output/load_scope.go).
	Left bool `json:"left,omitempty"`
	// Filenode is the heap generation (relfilenode) whose tuples a
	// LayoutPhysical table's rows are keyed by; 0 while the table is empty
	// (new, or truncated): the next row's generation is adopted.
	Filenode uint32 `json:"filenode,omitempty"`
	// FilenodeFrom is where that generation's rows begin in the WAL (the
	// first adopted row, a load's coverage, a TRUNCATE): a replayed row of
	// another generation older than it is superseded.
	FilenodeFrom wal.LSN `json:"filenode_from,omitempty"`
}

// Store keeps every relation's Agreed durably in one file, rewritten
// whole on each change. It is safe for concurrent use.
//
// The file, dir/baseline.json, is one line of JSON:
//
//	{"format":1,"crc32c":<uint32>,"agreed":[<Agreed>,...]}
//	                      │                 └─ sorted by oid, compact JSON
//	                      └─ CRC-32C (Castagnoli) of the "agreed" array's
//	                         bytes exactly as they appear in the file
//
// A Put or Delete writes dir/baseline.json.tmp-<random>, fsyncs it,
// renames it over baseline.json and fsyncs dir: a crash leaves either the
// old or the new file, plus perhaps a temp file OpenStore deletes. Column
// types are stored with their Repr by name ("unix_micros"), so reordering
// the Repr constants cannot reinterpret a stored baseline.
type Store struct {
	mu     sync.Mutex
	dir    string
	path   string
	agreed map[uint32]*Agreed
}

const (
	baselineFileName = "baseline.json"
	baselineFormat   = 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type baselineFile struct {
	Format int             `json:"format"`
	CRC32C uint32          `json:"crc32c"`
	Agreed json.RawMessage `json:"agreed"`
}

// OpenStore opens (creating dir with mode 0700 if needed) the store in
// dir and loads its baseline file. A corrupt file is an error naming the
// path and whether it is truncated or fails its checksum; leftover temp
// files of interrupted writes are removed.
func OpenStore(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating baseline directory %s: %w", dir, err)
	}
	s := &Store{dir: dir, path: filepath.Join(dir, baselineFileName), agreed: map[uint32]*Agreed{}}
	leftovers, err := filepath.Glob(filepath.Join(dir, baselineFileName+".tmp-*"))
	if err != nil {
		return nil, fmt.Errorf("listing leftover temp files in %s: %w", dir, err)
	}
	for _, name := range leftovers {
		if err := os.Remove(name); err != nil {
			return nil, fmt.Errorf("removing leftover temp file %s: %w", name, err)
		}
	}
	data, err := os.ReadFile(s.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("reading baseline %s: %w", s.path, err)
	}
	list, err := decodeBaseline(data)
	if err != nil {
		return nil, fmt.Errorf("baseline %s: %w", s.path, err)
	}
	for _, a := range list {
		if _, dup := s.agreed[a.Oid]; dup {
			return nil, fmt.Errorf("baseline %s: corrupt: relation oid %d appears twice", s.path, a.Oid)
		}
		s.agreed[a.Oid] = a
	}
	return s, nil
}

// ReadAgreed reads the agreements of the store in dir without opening it:
// no directory is created and no temp file removed, so it is safe while a
// walshadow owns the store (walshadow status). No file: none.
func ReadAgreed(dir string) ([]*Agreed, error) {
	path := filepath.Join(dir, baselineFileName)
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading baseline %s: %w", path, err)
	}
	list, err := decodeBaseline(data)
	if err != nil {
		return nil, fmt.Errorf("baseline %s: %w", path, err)
	}
	return list, nil
}

// decodeBaseline checks and decodes a baseline file's contents.
func decodeBaseline(data []byte) ([]*Agreed, error) {
	if len(data) == 0 {
		return nil, errors.New("truncated: the file is empty")
	}
	var file baselineFile
	if err := json.Unmarshal(data, &file); err != nil {
		var syntax *json.SyntaxError
		if errors.As(err, &syntax) && syntax.Offset >= int64(len(data)) {
			return nil, fmt.Errorf("truncated after %d bytes: %w", len(data), err)
		}
		return nil, fmt.Errorf("corrupt: %w", err)
	}
	if file.Format != baselineFormat {
		return nil, fmt.Errorf("format %d is not the supported format %d", file.Format, baselineFormat)
	}
	if sum := crc32.Checksum(file.Agreed, castagnoli); sum != file.CRC32C {
		return nil, fmt.Errorf("checksum mismatch: stored crc32c %d, contents give %d", file.CRC32C, sum)
	}
	var list []*Agreed
	if err := json.Unmarshal(file.Agreed, &list); err != nil {
		return nil, fmt.Errorf("corrupt agreed array despite a matching checksum: %w", err)
	}
	for i, a := range list {
		if a == nil {
			return nil, fmt.Errorf("corrupt: entry %d is null", i)
		}
	}
	return list, nil
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

// Put records a (a copy of it) as its relation's agreement and rewrites
// the file; on error the store is unchanged.
func (s *Store) Put(a *Agreed) error {
	if a == nil {
		return errors.New("storing a baseline: nil agreement")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	next := make(map[uint32]*Agreed, len(s.agreed)+1)
	for oid, v := range s.agreed {
		next[oid] = v
	}
	next[a.Oid] = a.Clone()
	if err := s.write(next); err != nil {
		return fmt.Errorf("storing the baseline of relation %s.%s (oid %d): %w", a.Schema, a.Table, a.Oid, err)
	}
	s.agreed = next
	return nil
}

// Delete forgets oid's agreement; deleting an absent one is a no-op.
func (s *Store) Delete(oid uint32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.agreed[oid]; !ok {
		return nil
	}
	next := make(map[uint32]*Agreed, len(s.agreed))
	for k, v := range s.agreed {
		if k != oid {
			next[k] = v
		}
	}
	if err := s.write(next); err != nil {
		return fmt.Errorf("deleting the baseline of relation oid %d: %w", oid, err)
	}
	s.agreed = next
	return nil
}

// write replaces the file atomically with agreed's contents.
func (s *Store) write(agreed map[uint32]*Agreed) (err error) {
	list := make([]*Agreed, 0, len(agreed))
	for _, a := range agreed {
		list = append(list, a)
	}
	slices.SortFunc(list, func(a, b *Agreed) int { return int(int64(a.Oid) - int64(b.Oid)) })
	body, err := json.Marshal(list)
	if err != nil {
		return fmt.Errorf("encoding: %w", err)
	}
	data, err := json.Marshal(baselineFile{Format: baselineFormat, CRC32C: crc32.Checksum(body, castagnoli), Agreed: body})
	if err != nil {
		return fmt.Errorf("encoding: %w", err)
	}
	data = append(data, '\n')

	tmp, err := os.CreateTemp(s.dir, baselineFileName+".tmp-*")
	if err != nil {
		return fmt.Errorf("creating temp file in %s: %w", s.dir, err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return fmt.Errorf("writing %s: %w", tmp.Name(), err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", tmp.Name(), err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", tmp.Name(), err)
	}
	if err = os.Rename(tmp.Name(), s.path); err != nil {
		return fmt.Errorf("renaming %s to %s: %w", tmp.Name(), s.path, err)
	}
	// The rename is durable only once the directory is.
	dir, err := os.Open(s.dir)
	if err != nil {
		return fmt.Errorf("opening %s to sync it: %w", s.dir, err)
	}
	defer dir.Close()
	if err = dir.Sync(); err != nil {
		return fmt.Errorf("syncing directory %s: %w", s.dir, err)
	}
	return nil
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

type storedMappedColumn struct {
	Attnum   int16      `json:"attnum"`
	Source   string     `json:"source"`
	Name     string     `json:"name"`
	Type     storedType `json:"type"`
	Nullable bool       `json:"nullable"`
	Default  string     `json:"default,omitempty"`
	Key      bool       `json:"key"`
}

// MarshalJSON stores the column with its Repr by name.
func (m MappedColumn) MarshalJSON() ([]byte, error) {
	t, err := toStoredType(m.Spec.Type)
	if err != nil {
		return nil, fmt.Errorf("column %q: %w", m.Spec.Name, err)
	}
	return json.Marshal(storedMappedColumn{Attnum: m.Attnum, Source: m.Source, Name: m.Spec.Name, Type: t,
		Nullable: m.Spec.Nullable, Default: m.Spec.Default, Key: m.Key})
}

// UnmarshalJSON is MarshalJSON's inverse.
func (m *MappedColumn) UnmarshalJSON(data []byte) error {
	var st storedMappedColumn
	if err := json.Unmarshal(data, &st); err != nil {
		return err
	}
	t, err := fromStoredType(st.Type)
	if err != nil {
		return fmt.Errorf("column %q: %w", st.Name, err)
	}
	*m = MappedColumn{Attnum: st.Attnum, Source: st.Source, Key: st.Key,
		Spec: ColumnSpec{Name: st.Name, Type: t, Nullable: st.Nullable, Default: st.Default}}
	return nil
}
