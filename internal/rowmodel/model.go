// Package rowmodel replays the row-change and schema messages of the
// walshadow_decode processor into an in-memory model of the source's tables
// and compares the model with the source itself. It is the oracle of the
// decode acceptance tests: whatever the pipeline emitted must rebuild
// exactly what the source holds.
//
// The model applies changes the way a ReplacingMergeTree converges: every
// row (and every deletion, kept as a tombstone) remembers the LSN it was
// written at, and a change applies only when it is newer, so a suffix of the
// stream replayed after a restart is harmless.
package rowmodel

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/walshadow/walshadow/internal/wal"
)

// Metadata keys the model reads (design: "Row-change messages produced by the
// processor").
const (
	MetaOperation         = "walshadow_operation"
	MetaEvent             = "walshadow_event"
	MetaSchema            = "walshadow_schema"
	MetaTable             = "walshadow_table"
	MetaRelationOid       = "walshadow_relation_oid"
	MetaLSN               = "walshadow_lsn"
	MetaCommitLSN         = "walshadow_commit_lsn"
	MetaDescriptorVersion = "walshadow_descriptor_version"
	MetaKey               = "walshadow_key"
	MetaUnchangedToast    = "walshadow_unchanged_toast"
	MetaKeyChanged        = "walshadow_key_changed"
)

// Operations and schema events.
const (
	OpInsert   = "insert"
	OpUpdate   = "update"
	OpDelete   = "delete"
	OpTruncate = "truncate"
	OpSchema   = "schema"

	EventAdded    = "added"
	EventChanged  = "changed"
	EventDropped  = "dropped"
	EventTruncate = "truncate"
)

// Message is one processor output message: metadata and structured payload.
type Message struct {
	Meta    map[string]string
	Payload map[string]any
}

// Model is the replayed state of every table the messages described. It is
// not safe for concurrent use.
type Model struct {
	tables map[uint32]*table
	// dropped remembers when each dropped relation went, so a replayed older
	// change of it does not resurrect it.
	dropped map[uint32]wal.LSN
	stats   Stats
}

// Stats counts what the model applied.
type Stats struct {
	Messages, Ignored, Duplicates                   int
	Inserts, Updates, Deletes, Truncates, SchemaEvs int
}

// New returns an empty model.
func New() *Model {
	return &Model{tables: map[uint32]*table{}, dropped: map[uint32]wal.LSN{}}
}

// Stats reports counters of applied messages.
func (m *Model) Stats() Stats { return m.stats }

type table struct {
	oid          uint32
	schema, name string
	cols         []Column // live columns, in attnum order when known
	schemaLSN    wal.LSN
	// versions: live columns per descriptor version, to map the names a row
	// was decoded with onto today's names.
	versions map[wal.LSN][]Column
	// keyNums/keyNames: the replica identity key; empty = REPLICA IDENTITY
	// FULL, rows form a multiset.
	keyNames    []string
	rows        map[string]*keyedRow
	multi       map[string]*multiRow
	truncatedAt wal.LSN
	// carry is the row the last key-changing delete retired.
	carry carried
}

type carried struct {
	lsn  wal.LSN
	vals values
}

// values maps column name to canonical text; a nil value is NULL and an
// absent name is unknown (an unchanged TOAST value the model never saw).
type values map[string]*string

type keyedRow struct {
	vals    values
	lsn     wal.LSN
	deleted bool
}

// multiRow is one distinct whole-row value of a REPLICA IDENTITY FULL table.
// Occurrences are identified by the LSN that inserted them, so a replayed
// insert or delete is recognised.
type multiRow struct {
	vals    values
	live    map[wal.LSN]bool // insert LSNs of occurrences present now
	dead    map[wal.LSN]bool // insert LSNs of occurrences deleted since
	deletes map[wal.LSN]bool // LSNs of deletes applied
}

func (t *table) qualified() string { return t.schema + "." + t.name }

// Apply replays one message. Messages that are not row or schema messages
// (no walshadow_operation) are ignored. An error means the stream broke the
// processor's contract or disagrees with what the model holds.
func (m *Model) Apply(msg Message) error {
	m.stats.Messages++
	op := msg.Meta[MetaOperation]
	if op == "" {
		m.stats.Ignored++
		return nil
	}
	oid, err := parseOid(msg.Meta[MetaRelationOid])
	if err != nil {
		return fmt.Errorf("%s message: %w", op, err)
	}
	switch op {
	case OpSchema:
		return m.applySchema(oid, msg)
	case OpInsert, OpUpdate, OpDelete, OpTruncate:
		return m.applyRow(op, oid, msg)
	}
	return fmt.Errorf("relation %d: unknown %s %q", oid, MetaOperation, op)
}

func parseOid(s string) (uint32, error) {
	oid, err := strconv.ParseUint(s, 10, 32)
	if err != nil || oid == 0 {
		return 0, fmt.Errorf("bad %s %q", MetaRelationOid, s)
	}
	return uint32(oid), nil
}

func metaLSN(meta map[string]string, keys ...string) (wal.LSN, error) {
	for _, k := range keys {
		if s := meta[k]; s != "" {
			l, err := wal.ParseLSN(s)
			if err != nil {
				return 0, fmt.Errorf("bad %s %q: %w", k, s, err)
			}
			return l, nil
		}
	}
	return 0, fmt.Errorf("no %s metadata", strings.Join(keys, " or "))
}

func (m *Model) applySchema(oid uint32, msg Message) error {
	m.stats.SchemaEvs++
	event := msg.Meta[MetaEvent]
	lsn, err := metaLSN(msg.Meta, MetaLSN, MetaDescriptorVersion, MetaCommitLSN)
	if err != nil {
		return fmt.Errorf("schema event %s of relation %d: %w", event, oid, err)
	}
	version, err := metaLSN(msg.Meta, MetaDescriptorVersion, MetaLSN, MetaCommitLSN)
	if err != nil {
		return err
	}
	where := fmt.Sprintf("schema event %s of %s.%s (oid %d) at %s", event, msg.Meta[MetaSchema], msg.Meta[MetaTable], oid, lsn)
	if at, ok := m.dropped[oid]; ok && lsn <= at {
		m.stats.Duplicates++
		return nil
	}
	t := m.tables[oid]
	if t != nil && lsn < t.schemaLSN {
		m.stats.Duplicates++ // replayed from before the table's newest shape
		return nil
	}
	switch event {
	case EventDropped:
		if t == nil {
			return fmt.Errorf("%s: the model has no such table", where)
		}
		delete(m.tables, oid)
		m.dropped[oid] = lsn
		return nil
	case EventTruncate:
		if t == nil {
			return fmt.Errorf("%s: the model has no such table", where)
		}
		t.truncate(lsn)
		t.rename(msg.Meta)
		return nil
	case EventAdded, EventChanged:
	default:
		return fmt.Errorf("%s: unknown %s", where, MetaEvent)
	}
	sp, err := ParseSchemaPayload(msg.Payload)
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	if len(sp.Columns) == 0 && !sp.Diff.Present {
		return fmt.Errorf("%s: payload has neither columns nor a diff", where)
	}
	if t != nil && lsn == t.schemaLSN {
		m.stats.Duplicates++
		return nil
	}
	if t == nil {
		// A "changed" for a table the model never saw can only be replayed
		// history or a table created before the stream; both start it empty.
		t = &table{oid: oid, versions: map[wal.LSN][]Column{}, rows: map[string]*keyedRow{}, multi: map[string]*multiRow{}}
		m.tables[oid] = t
		t.rename(msg.Meta)
		t.cols = sp.Columns
		t.schemaLSN = lsn
		t.versions[version] = sp.Columns
		t.setKeyFromColumns()
		return nil
	}
	t.rename(msg.Meta)
	if err := t.reshape(sp, lsn); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	t.versions[version] = t.cols
	return nil
}

func (t *table) rename(meta map[string]string) {
	if s := meta[MetaSchema]; s != "" {
		t.schema = s
	}
	if s := meta[MetaTable]; s != "" {
		t.name = s
	}
}

func (t *table) setKeyFromColumns() {
	t.keyNames = t.keyNames[:0]
	for _, c := range t.cols {
		if c.Key {
			t.keyNames = append(t.keyNames, c.Name)
		}
	}
}

func (t *table) truncate(lsn wal.LSN) {
	if lsn <= t.truncatedAt {
		return
	}
	t.truncatedAt = lsn
	for k, r := range t.rows {
		if r.lsn < lsn {
			delete(t.rows, k)
		}
	}
	for k, r := range t.multi {
		for at := range r.live {
			if at < lsn {
				delete(r.live, at)
			}
		}
		if len(r.live) == 0 {
			delete(t.multi, k)
		}
	}
}

// reshape moves every row from the table's columns to the event's: renamed
// columns keep their values, dropped ones go, added ones read their missing
// value (or NULL). Columns are matched by attnum when both sides carry it,
// else through the diff's renames and by name.
func (t *table) reshape(sp SchemaPayload, lsn wal.LSN) error {
	newCols := sp.Columns
	if len(newCols) == 0 {
		newCols = applyDiffToColumns(t.cols, sp.Diff)
	}
	oldName := map[string]string{} // new name -> old name
	byNum := map[int16]string{}
	for _, c := range t.cols {
		if c.Num != 0 {
			byNum[c.Num] = c.Name
		}
	}
	renamedTo := map[string]string{}
	for _, r := range sp.Diff.Renamed {
		renamedTo[r.NewName] = r.OldName
	}
	oldHas := map[string]bool{}
	for _, c := range t.cols {
		oldHas[c.Name] = true
	}
	added := map[string]bool{}
	for _, c := range sp.Diff.Added {
		added[c.Name] = true
	}
	for _, c := range newCols {
		switch {
		case c.Num != 0 && len(byNum) > 0:
			if n, ok := byNum[c.Num]; ok {
				oldName[c.Name] = n
			}
		case renamedTo[c.Name] != "":
			oldName[c.Name] = renamedTo[c.Name]
		case oldHas[c.Name] && !added[c.Name]:
			oldName[c.Name] = c.Name
		}
	}
	move := func(old values) values {
		nv := make(values, len(newCols))
		for _, c := range newCols {
			if on, ok := oldName[c.Name]; ok {
				if v, present := old[on]; present {
					nv[c.Name] = v
				}
				continue
			}
			nv[c.Name] = c.Missing // NULL unless the column has a missing value
		}
		return nv
	}
	for _, r := range t.rows {
		if r.deleted {
			// Tombstones keep key columns only; carry what maps.
			nv := values{}
			for _, c := range newCols {
				if on, ok := oldName[c.Name]; ok {
					if v, present := r.vals[on]; present {
						nv[c.Name] = v
					}
				}
			}
			r.vals = nv
			continue
		}
		r.vals = move(r.vals)
	}
	oldMulti := t.multi
	t.multi = map[string]*multiRow{}
	t.cols = newCols
	for _, r := range oldMulti {
		r.vals = move(r.vals)
		t.mergeMulti(r)
	}
	t.schemaLSN = lsn
	if len(sp.Columns) > 0 {
		prevKey := strings.Join(t.keyNames, ",")
		t.setKeyFromColumns()
		if strings.Join(t.keyNames, ",") != prevKey {
			return t.rekey()
		}
	} else {
		for i, k := range t.keyNames {
			for _, r := range sp.Diff.Renamed {
				if r.OldName == k {
					t.keyNames[i] = r.NewName
				}
			}
		}
	}
	return nil
}

// applyDiffToColumns derives the new column list from a diff alone.
func applyDiffToColumns(cols []Column, d SchemaDiff) []Column {
	dropped := map[string]bool{}
	for _, c := range d.Dropped {
		dropped[c.Name] = true
	}
	renamed := map[string]string{}
	for _, r := range d.Renamed {
		renamed[r.OldName] = r.NewName
	}
	var out []Column
	for _, c := range cols {
		if dropped[c.Name] {
			continue
		}
		if n, ok := renamed[c.Name]; ok {
			c.Name = n
		}
		out = append(out, c)
	}
	return append(out, d.Added...)
}

// mergeMulti adds a reshaped multiset entry, merging with an equal one.
func (t *table) mergeMulti(r *multiRow) {
	k := t.wholeRowKey(r.vals)
	if have, ok := t.multi[k]; ok {
		for l := range r.live {
			have.live[l] = true
		}
		for l := range r.dead {
			have.dead[l] = true
		}
		for l := range r.deletes {
			have.deletes[l] = true
		}
		return
	}
	t.multi[k] = r
}

// rekey rebuilds the keyed rows after the key columns changed.
func (t *table) rekey() error {
	old := t.rows
	t.rows = map[string]*keyedRow{}
	for _, r := range old {
		if r.deleted && len(t.keyNames) > 0 {
			if k, ok := keyText(t.keyNames, r.vals); ok {
				t.rows[k] = r
			}
			continue
		}
		if r.deleted {
			continue
		}
		if len(t.keyNames) == 0 {
			t.mergeMulti(&multiRow{vals: r.vals, live: map[wal.LSN]bool{r.lsn: true}, dead: map[wal.LSN]bool{}, deletes: map[wal.LSN]bool{}})
			continue
		}
		k, ok := keyText(t.keyNames, r.vals)
		if !ok {
			return fmt.Errorf("rekeying on (%s): a row lacks a key column", strings.Join(t.keyNames, ", "))
		}
		t.rows[k] = r
	}
	if len(t.keyNames) > 0 {
		for _, r := range t.multi {
			for l := range r.live {
				k, ok := keyText(t.keyNames, r.vals)
				if !ok {
					return fmt.Errorf("rekeying on (%s): a row lacks a key column", strings.Join(t.keyNames, ", "))
				}
				t.rows[k] = &keyedRow{vals: r.vals, lsn: l}
			}
		}
		t.multi = map[string]*multiRow{}
	}
	return nil
}

// keyText encodes the named columns' values unambiguously; ok is false when
// one of them is unknown.
func keyText(names []string, vals values) (string, bool) {
	var b strings.Builder
	for _, n := range names {
		v, ok := vals[n]
		if !ok {
			return "", false
		}
		appendValue(&b, v)
	}
	return b.String(), true
}

func appendValue(b *strings.Builder, v *string) {
	if v == nil {
		b.WriteString("N;")
		return
	}
	b.WriteString("V")
	b.WriteString(strconv.Itoa(len(*v)))
	b.WriteByte(':')
	b.WriteString(*v)
}

// wholeRowKey encodes every live column (unknown values included) in
// column order: the identity of a row of a REPLICA IDENTITY FULL table.
func (t *table) wholeRowKey(vals values) string {
	var b strings.Builder
	for _, c := range t.cols {
		v, ok := vals[c.Name]
		if !ok {
			b.WriteString("U;")
			continue
		}
		appendValue(&b, v)
	}
	return b.String()
}

// sortedLSNs returns the set's LSNs in ascending order.
func sortedLSNs(set map[wal.LSN]bool) []wal.LSN {
	out := make([]wal.LSN, 0, len(set))
	for l := range set {
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
