package processor

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unsafe"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/walshadow/walshadow/internal/decode"
	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/wal"
)

// Metadata keys of the messages walshadow_decode emits.
const (
	MetaOperation      = "walshadow_operation"
	MetaEvent          = "walshadow_event"
	MetaSchema         = "walshadow_schema"
	MetaTable          = "walshadow_table"
	MetaRelationOid    = "walshadow_relation_oid"
	MetaLSN            = "walshadow_lsn"
	MetaCommitLSN      = "walshadow_commit_lsn"
	MetaXID            = "walshadow_xid"
	MetaCommitTime     = "walshadow_commit_time"
	MetaDescVersion    = "walshadow_descriptor_version"
	MetaKey            = "walshadow_key"
	MetaUnchangedToast = "walshadow_unchanged_toast"
	MetaKeyChanged     = "walshadow_key_changed"
	MetaRecordIndex    = "walshadow_record_index"
	// MetaTID is the tuple a row change leaves live, "block:offset" (see
	// FormatTID): the inserted tuple, the new version of an update, the
	// deleted tuple (for the delete half of a key change, the old version).
	MetaTID = "walshadow_tid"
	// MetaOldTID is the version an update replaced, "block:offset"
	// (updates only).
	MetaOldTID = "walshadow_old_tid"
	// MetaFilenode is the relfilenode of the heap the change was written
	// to, in decimal: the table's storage generation (TRUNCATE, VACUUM
	// FULL, CLUSTER and rewrites start a new one).
	MetaFilenode = "walshadow_filenode"
	// MetaError is why a table failed (OperationFail only): it names the
	// LSN, the relation and the column at fault.
	MetaError           = "walshadow_error"
	OperationInsert     = "insert"
	OperationUpdate     = "update"
	OperationDelete     = "delete"
	OperationTruncate   = "truncate"
	OperationSchema     = "schema"
	OperationFail       = "fail"
	EventTruncate       = "truncate"
	schemaPayloadFormat = 1
)

// maxTIDLen is the longest FormatTID text: "4294967295:65535".
const maxTIDLen = 16

// AppendTID appends a tuple identity's text, "block:offset" in decimal
// (block 0..4294967295, offset 1..65535), to dst.
func AppendTID(dst []byte, block uint32, off uint16) []byte {
	dst = strconv.AppendUint(dst, uint64(block), 10)
	dst = append(dst, ':')
	return strconv.AppendUint(dst, uint64(off), 10)
}

// FormatTID is a tuple identity's metadata text (MetaTID, MetaOldTID):
// "block:offset" in decimal, e.g. "0:1".
func FormatTID(block uint32, off uint16) string {
	return string(AppendTID(make([]byte, 0, maxTIDLen), block, off))
}

// ParseTID reads FormatTID's text back. It accepts only the canonical form
// (decimal digits without sign, spaces or leading zeros) and an offset of at
// least 1, so ParseTID and FormatTID round-trip both ways.
func ParseTID(s string) (block uint32, off uint16, err error) {
	b, o, ok := strings.Cut(s, ":")
	if !ok {
		return 0, 0, fmt.Errorf("tuple identity %q: want block:offset", s)
	}
	bv, ok1 := parseCanonicalUint(b, 1<<32-1)
	ov, ok2 := parseCanonicalUint(o, 1<<16-1)
	if !ok1 || !ok2 || ov == 0 {
		return 0, 0, fmt.Errorf("tuple identity %q: want block:offset, block 0..4294967295 and offset 1..65535 in decimal", s)
	}
	return uint32(bv), uint16(ov), nil
}

// parseCanonicalUint parses decimal digits with no sign and no leading
// zero, up to max.
func parseCanonicalUint(s string, max uint64) (uint64, bool) {
	if s == "" || len(s) > 1 && s[0] == '0' || len(s) > 10 {
		return 0, false
	}
	var v uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	return v, v <= max
}

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
	case decode.OpFail:
		return OperationFail
	}
	return "unknown"
}

func (p *decodeProcessor) rowMessage(r *decode.RowChange, tx *txMeta) *service.Message {
	m := service.NewMessage(nil)
	if r.Op == decode.OpFail {
		return p.failMessage(m, r, tx)
	}
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
	p.setIdentityMeta(m, r)
	if omitted != nil {
		m.MetaSetMut(MetaUnchangedToast, strings.Join(omitted, ","))
	}
	p.m.rows.Incr(1, op)
	return m
}

// setIdentityMeta sets the change's physical identity: its tuple, the
// version an update replaced, and the heap's filenode.
func (p *decodeProcessor) setIdentityMeta(m *service.Message, r *decode.RowChange) {
	if r.TID.Valid() {
		m.MetaSetMut(MetaTID, p.text.tid(r.TID))
	}
	if r.Op == decode.OpUpdate {
		m.MetaSetMut(MetaOldTID, p.text.tid(r.OldTID))
	}
	if r.Filenode != 0 {
		m.MetaSetMut(MetaFilenode, p.text.filenode(r.Desc, r.Filenode))
	}
}

// failMessage is a table's failure: an empty payload, the reason in
// MetaError, and the relation and transaction metadata of a row change.
func (p *decodeProcessor) failMessage(m *service.Message, r *decode.RowChange, tx *txMeta) *service.Message {
	m.SetStructuredMut(map[string]any{})
	reason := "unknown failure"
	if r.Err != nil {
		reason = r.Err.Error()
	}
	m.MetaSetMut(MetaOperation, OperationFail)
	m.MetaSetMut(MetaError, reason)
	p.setRelationMeta(m, r.Desc)
	m.MetaSetMut(MetaLSN, p.text.lsn(r.LSN))
	m.MetaSetMut(MetaCommitLSN, tx.commitLSNText)
	m.MetaSetMut(MetaXID, tx.xidText)
	m.MetaSetMut(MetaCommitTime, tx.commitTimeText)
	m.MetaSetMut(MetaDescVersion, p.text.version(r.DescFrom))
	p.setIdentityMeta(m, r)
	p.log.Errorf("table %s.%s (oid %d) failed in transaction %d (commit %s); its changes from %s on are not decoded until it is reloaded: %s",
		r.Desc.Namespace, r.Desc.Name, r.Desc.Oid, tx.topXID, tx.commitLSNText, r.LSN, reason)
	p.m.rows.Incr(1, OperationFail)
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

	// TIDs differ row by row: their texts are appended to a byte slab and
	// boxed from a string slab, so a TID costs no allocation of its own.
	// Slabs are append-only and a full one is replaced, never reused: the
	// messages of earlier batches keep valid strings.
	tidBytes []byte
	tidStrs  []string
}

type relationMeta struct{ schema, table, oid, key, filenode any }

const (
	tidByteSlab = 16 << 10
	tidStrSlab  = 1024
)

// tid is t's metadata text (FormatTID).
func (c *textCache) tid(t decode.TID) any {
	if cap(c.tidBytes)-len(c.tidBytes) < maxTIDLen {
		c.tidBytes = make([]byte, 0, tidByteSlab)
	}
	start := len(c.tidBytes)
	c.tidBytes = AppendTID(c.tidBytes, t.Block, t.Off)
	if len(c.tidStrs) == cap(c.tidStrs) {
		c.tidStrs = make([]string, 0, tidStrSlab)
	}
	c.tidStrs = append(c.tidStrs, unsafe.String(&c.tidBytes[start], len(c.tidBytes)-start))
	return boxString(&c.tidStrs[len(c.tidStrs)-1])
}

// filenode is a filenode's text: the descriptor's own is formatted once.
func (c *textCache) filenode(d *desclog.Descriptor, fn uint32) any {
	if fn == d.Rfn.RelNum {
		return c.relation(d).filenode
	}
	return strconv.FormatUint(uint64(fn), 10)
}

// eface is the runtime layout of an empty interface.
type eface struct {
	typ  unsafe.Pointer
	data unsafe.Pointer
}

var stringType = func() unsafe.Pointer {
	var v any = ""
	return (*eface)(unsafe.Pointer(&v)).typ
}()

// boxString is any(*p) without the runtime's copy of the string header:
// the interface points at *p, which the caller never writes again.
func boxString(p *string) any {
	var v any
	e := (*eface)(unsafe.Pointer(&v))
	e.typ, e.data = stringType, unsafe.Pointer(p)
	return v
}

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
		oid: strconv.FormatUint(uint64(d.Oid), 10), key: strings.Join(keyNames(d), ","),
		filenode: strconv.FormatUint(uint64(d.Rfn.RelNum), 10)}
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
