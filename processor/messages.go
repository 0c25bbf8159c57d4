package processor

import (
	"errors"
	"strconv"
	"strings"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/walshadow/walshadow/internal/decode"
	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/wal"
)

// Metadata keys of the messages walshadow_decode emits.
const (
	MetaOperation       = "walshadow_operation"
	MetaEvent           = "walshadow_event"
	MetaSchema          = "walshadow_schema"
	MetaTable           = "walshadow_table"
	MetaRelationOid     = "walshadow_relation_oid"
	MetaLSN             = "walshadow_lsn"
	MetaCommitLSN       = "walshadow_commit_lsn"
	MetaXID             = "walshadow_xid"
	MetaCommitTime      = "walshadow_commit_time"
	MetaDescVersion     = "walshadow_descriptor_version"
	MetaKey             = "walshadow_key"
	MetaUnchangedToast  = "walshadow_unchanged_toast"
	MetaKeyChanged      = "walshadow_key_changed"
	MetaRecordIndex     = "walshadow_record_index"
	OperationInsert     = "insert"
	OperationUpdate     = "update"
	OperationDelete     = "delete"
	OperationTruncate   = "truncate"
	OperationSchema     = "schema"
	EventTruncate       = "truncate"
	schemaPayloadFormat = 1
)

// messages builds the output of one batch, events placed before the rows
// decoded after them.
func (p *decodeProcessor) messages(o *batchOut) service.MessageBatch {
	out := make(service.MessageBatch, 0, len(o.rows)+len(o.events))
	ev, index := 0, 0
	for i := range o.rows {
		for ev < len(o.events) && o.events[ev].before <= i {
			out = append(out, o.events[ev].msg)
			ev++
		}
		m := p.rowMessage(&o.rows[i], o.rowTx[i])
		// The change's position among the changes of its WAL record (a
		// multi-insert's tuples, an update's delete and insert halves): a
		// record is decoded whole within one batch, so a replay numbers
		// them the same.
		if i > 0 && o.rows[i-1].LSN == o.rows[i].LSN {
			index++
		} else {
			index = 0
		}
		m.MetaSetMut(MetaRecordIndex, p.text.index(index))
		if keyChange(o.rows, i) {
			// The delete of the old key and the update that follows it: a
			// consumer carries the update's unchanged TOAST columns over
			// from the deleted row (PostgreSQL logged only the old key).
			m.MetaSetMut(MetaKeyChanged, "true")
		}
		out = append(out, m)
	}
	for ; ev < len(o.events); ev++ {
		out = append(out, o.events[ev].msg)
	}
	return out
}

// keyChange tells the two halves of a key-changing update: a delete and an
// update of one relation at one LSN.
func keyChange(rows []decode.RowChange, i int) bool {
	pair := func(d, u *decode.RowChange) bool {
		return d.Op == decode.OpDelete && u.Op == decode.OpUpdate && d.LSN == u.LSN && d.Desc == u.Desc
	}
	return i+1 < len(rows) && pair(&rows[i], &rows[i+1]) || i > 0 && pair(&rows[i-1], &rows[i])
}

func opName(op decode.Op) string {
	switch op {
	case decode.OpInsert:
		return OperationInsert
	case decode.OpUpdate:
		return OperationUpdate
	case decode.OpDelete:
		return OperationDelete
	case decode.OpTruncate:
		return OperationTruncate
	}
	return "unknown"
}

func (p *decodeProcessor) rowMessage(r *decode.RowChange, tx *txMeta) *service.Message {
	m := service.NewMessage(nil)
	payload := make(map[string]any, len(r.Fields))
	var omitted []string
	for i := range r.Fields {
		f := &r.Fields[i]
		switch {
		case f.Omitted:
			omitted = append(omitted, f.Col.Name)
		case f.Null:
			payload[f.Col.Name] = nil
		default:
			payload[f.Col.Name] = f.Value
		}
	}
	m.SetStructuredMut(payload)
	op := opName(r.Op)
	m.MetaSetMut(MetaOperation, op)
	if r.Op == decode.OpTruncate {
		m.MetaSetMut(MetaEvent, EventTruncate)
	}
	p.setRelationMeta(m, r.Desc)
	m.MetaSetMut(MetaLSN, p.text.lsn(r.LSN))
	m.MetaSetMut(MetaCommitLSN, tx.commitLSNText)
	m.MetaSetMut(MetaXID, tx.xidText)
	m.MetaSetMut(MetaCommitTime, tx.commitTimeText)
	m.MetaSetMut(MetaDescVersion, p.text.version(r.DescFrom))
	if omitted != nil {
		m.MetaSetMut(MetaUnchangedToast, strings.Join(omitted, ","))
	}
	p.m.rows.Incr(1, op)
	return m
}

// setRelationMeta sets the relation's schema, name, oid and key.
func (p *decodeProcessor) setRelationMeta(m *service.Message, d *desclog.Descriptor) {
	rm := p.text.relation(d)
	m.MetaSetMut(MetaSchema, rm.schema)
	m.MetaSetMut(MetaTable, rm.table)
	m.MetaSetMut(MetaRelationOid, rm.oid)
	m.MetaSetMut(MetaKey, rm.key)
}

// textCache keeps the metadata values consecutive rows share (the rows of
// one multi-insert have one LSN; a relation's rows one descriptor version,
// schema, name and key), formatted and boxed into an interface once: each
// MetaSetMut of a fresh string would allocate.
type textCache struct {
	lastLSN, lastVersion wal.LSN
	lsnText, versionText any
	relations            map[*desclog.Descriptor]*relationMeta
}

type relationMeta struct{ schema, table, oid, key any }

func (c *textCache) lsn(l wal.LSN) any {
	if l != c.lastLSN || c.lsnText == nil {
		c.lastLSN, c.lsnText = l, l.String()
	}
	return c.lsnText
}

func (c *textCache) version(l wal.LSN) any {
	if l != c.lastVersion || c.versionText == nil {
		c.lastVersion, c.versionText = l, l.String()
	}
	return c.versionText
}

// index is the text of a record index (small ones shared).
func (c *textCache) index(i int) any {
	if i < len(smallIndexes) {
		return smallIndexes[i]
	}
	return strconv.Itoa(i)
}

var smallIndexes = func() []any {
	out := make([]any, 64)
	for i := range out {
		out[i] = strconv.Itoa(i)
	}
	return out
}()

// relation is d's metadata values. Descriptors are immutable and shared by
// the log, so the pointer is the key; the map is dropped when it grows
// large (a long run with many schema changes).
func (c *textCache) relation(d *desclog.Descriptor) *relationMeta {
	if rm, ok := c.relations[d]; ok {
		return rm
	}
	if c.relations == nil || len(c.relations) >= 4096 {
		c.relations = map[*desclog.Descriptor]*relationMeta{}
	}
	rm := &relationMeta{schema: d.Namespace, table: d.Name,
		oid: strconv.FormatUint(uint64(d.Oid), 10), key: strings.Join(keyNames(d), ",")}
	c.relations[d] = rm
	return rm
}

// keyNames are the replica identity's column names (none for FULL).
func keyNames(d *desclog.Descriptor) []string {
	names := make([]string, 0, len(d.KeyAttnums))
	for _, n := range d.KeyAttnums {
		if c := columnByNum(d, n); c != nil {
			names = append(names, c.Name)
		}
	}
	return names
}

func columnByNum(d *desclog.Descriptor, num int16) *desclog.Column {
	if i := int(num) - 1; i >= 0 && i < len(d.Columns) && d.Columns[i].Num == num {
		return &d.Columns[i]
	}
	for i := range d.Columns {
		if d.Columns[i].Num == num {
			return &d.Columns[i]
		}
	}
	return nil
}

// eventMessage is a schema event: the relation's shape (and, for a change,
// the previous shape and the difference) as a structured payload.
func (p *decodeProcessor) eventMessage(ev *desclog.Event) *service.Message {
	m := service.NewMessage(nil)
	kind := ev.Kind.String()
	payload := map[string]any{
		"format":       schemaPayloadFormat,
		"event":        kind,
		"relation_oid": int64(ev.Oid),
		"valid_from":   ev.ValidFrom.String(),
	}
	if ev.Desc != nil {
		for k, v := range relationPayload(ev.Desc) {
			payload[k] = v
		}
		p.setRelationMeta(m, ev.Desc)
	} else {
		m.MetaSetMut(MetaRelationOid, strconv.FormatUint(uint64(ev.Oid), 10))
	}
	if ev.Kind == desclog.EventChanged && ev.Prev != nil {
		payload["previous"] = relationPayload(ev.Prev)
		payload["diff"] = diffPayload(ev.Diff, ev.Desc, ev.Prev)
	}
	m.SetStructuredMut(payload)
	m.MetaSetMut(MetaOperation, OperationSchema)
	m.MetaSetMut(MetaEvent, kind)
	m.MetaSetMut(MetaLSN, ev.ValidFrom.String())
	m.MetaSetMut(MetaCommitLSN, p.txMeta.commitLSNText)
	m.MetaSetMut(MetaXID, p.txMeta.xidText)
	m.MetaSetMut(MetaCommitTime, p.txMeta.commitTimeText)
	m.MetaSetMut(MetaDescVersion, ev.ValidFrom.String())
	p.m.events.Incr(1, kind)
	return m
}

func relationPayload(d *desclog.Descriptor) map[string]any {
	cols := make([]any, 0, len(d.Columns))
	for i := range d.Columns {
		c := &d.Columns[i]
		if c.Dropped {
			continue
		}
		cols = append(cols, columnPayload(c, d))
	}
	keys := make([]any, 0, len(d.KeyAttnums))
	for _, n := range keyNames(d) {
		keys = append(keys, n)
	}
	return map[string]any{
		"schema":           d.Namespace,
		"table":            d.Name,
		"relation_oid":     int64(d.Oid),
		"relkind":          string(d.Kind),
		"replica_identity": string(d.ReplIdent),
		"columns":          cols,
		"key":              keys,
	}
}

func columnPayload(c *desclog.Column, d *desclog.Descriptor) map[string]any {
	key := false
	for _, n := range d.KeyAttnums {
		key = key || n == c.Num
	}
	col := map[string]any{
		"name":     c.Name,
		"attnum":   int64(c.Num),
		"type":     c.TypeName,
		"type_oid": int64(c.TypeOid),
		"typmod":   int64(c.TypMod),
		"not_null": c.NotNull,
		"key":      key,
	}
	if c.BaseTypeOid != 0 {
		col["base_type_oid"] = int64(c.BaseTypeOid)
	}
	if c.ElemTypeOid != 0 {
		col["element_type_oid"] = int64(c.ElemTypeOid)
	}
	col["has_missing"] = c.HasMissing
	if c.HasMissing {
		if c.Missing != nil {
			col["missing"] = *c.Missing
		} else {
			col["missing"] = nil
		}
	}
	return col
}

// persistenceName is relpersistence as a word.
func persistenceName(p byte) string {
	switch p {
	case 'p':
		return "logged"
	case 'u':
		return "unlogged"
	case 't':
		return "temporary"
	}
	return string(p)
}

func diffPayload(d desclog.SchemaDiff, now, prev *desclog.Descriptor) map[string]any {
	added := make([]any, 0, len(d.Added))
	for i := range d.Added {
		added = append(added, columnPayload(&d.Added[i], now))
	}
	dropped := make([]any, 0, len(d.Dropped))
	for i := range d.Dropped {
		dropped = append(dropped, columnPayload(&d.Dropped[i], prev))
	}
	renamed := make([]any, 0, len(d.Renamed))
	for _, r := range d.Renamed {
		renamed = append(renamed, map[string]any{"attnum": int64(r.Num), "from": r.OldName, "to": r.NewName})
	}
	retyped := make([]any, 0, len(d.Retyped))
	for _, r := range d.Retyped {
		retyped = append(retyped, map[string]any{"attnum": int64(r.Num), "column": r.New.Name, "from": r.Old.TypeName, "to": r.New.TypeName})
	}
	out := map[string]any{"added": added, "dropped": dropped, "renamed": renamed, "retyped": retyped, "key_changed": d.Key}
	if d.Moved && prev != nil {
		out["relation_renamed"] = map[string]any{"from": map[string]any{"schema": prev.Namespace, "table": prev.Name},
			"to": map[string]any{"schema": now.Namespace, "table": now.Name}}
	}
	if d.Persistence && prev != nil {
		out["persistence_changed"] = map[string]any{"from": persistenceName(prev.Persistence), "to": persistenceName(now.Persistence)}
	}
	return out
}

var errNoBridge = errors.New("this type is rendered by the shadow's bridge, which is not configured: set shadow.bridge_library_dir on the walshadow resource (build it with make -C pgext)")
