package processor

import (
	"sync"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/walshadow/walshadow/internal/batchdecode"
	"github.com/walshadow/walshadow/internal/decode"
	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/msg"
	"github.com/walshadow/walshadow/internal/wal"
)

// Metadata keys of the messages walshadow_decode emits: what internal/msg
// names, under the processor's historical Go names.
const (
	MetaChange         = msg.KeyChange
	MetaOperation      = msg.KeyOperation
	MetaEvent          = msg.KeyEvent
	MetaSchema         = msg.KeySchema
	MetaTable          = msg.KeyTable
	MetaRelationOid    = msg.KeyRelationOid
	MetaLSN            = msg.KeyLSN
	MetaCommitLSN      = msg.KeyCommitLSN
	MetaXID            = msg.KeyXID
	MetaCommitTime     = msg.KeyCommitTime
	MetaDescVersion    = msg.KeyDescVersion
	MetaKey            = msg.KeyKey
	MetaUnchangedToast = msg.KeyUnchangedToast
	MetaKeyChanged     = msg.KeyKeyChanged
	MetaRecordIndex    = msg.KeyRecordIndex
	MetaTID            = msg.KeyTID
	MetaOldTID         = msg.KeyOldTID
	MetaFilenode       = msg.KeyFilenode
	MetaError          = msg.KeyError
	OperationInsert    = msg.OperationInsert
	OperationUpdate    = msg.OperationUpdate
	OperationDelete    = msg.OperationDelete
	OperationTruncate  = msg.OperationTruncate
	OperationSchema    = msg.OperationSchema
	OperationFail      = msg.OperationFail
	EventTruncate      = msg.EventTruncate

	schemaPayloadFormat = 1
)

// messages builds the output of one batch, events placed before the rows
// decoded after them. The rows' messages are built on the pool's workers,
// each over a contiguous run of rows with its own text cache.
func (p *decodeProcessor) messages(b *batchdecode.Batch) service.MessageBatch {
	p.countRows(b.Rows)
	if p.batchMessages {
		if len(b.Rows)+len(b.Events) == 0 {
			return nil
		}
		return service.MessageBatch{p.changesMessage(b)}
	}
	rows := b.Rows
	rowMsgs := make([]*service.Message, len(rows))
	changes := make([]msg.Change, len(rows))
	p.eachRow(rows, func(i int) *msg.Change { return &changes[i] }, func(text *textCache, i int, c *msg.Change) {
		rowMsgs[i] = p.rowMessage(text, &rows[i], b.RowTx[i], c, b.Epoch, b.Seq)
	})
	out := make(service.MessageBatch, 0, len(rows)+len(b.Events))
	ev := 0
	for i, m := range rowMsgs {
		for ev < len(b.Events) && b.Events[ev].Before <= i {
			out = append(out, p.eventMessage(&b.Events[ev], b.Epoch, b.Seq))
			ev++
		}
		out = append(out, m)
	}
	for ; ev < len(b.Events); ev++ {
		out = append(out, p.eventMessage(&b.Events[ev], b.Epoch, b.Seq))
	}
	return out
}

// eachRow calls row for every row on the pool's workers, each over a
// contiguous run of rows with its own text cache, with the row's change
// (change(i)) numbered within its WAL record and flagged when it is a
// half of a key change.
func (p *decodeProcessor) eachRow(rows []decode.RowChange, change func(i int) *msg.Change, row func(text *textCache, i int, c *msg.Change)) {
	// The change's position among the changes of its WAL record (a
	// multi-insert's tuples, an update's delete and insert halves): a
	// record is decoded whole within one batch, so a replay numbers them
	// the same.
	for i := 1; i < len(rows); i++ {
		if rows[i-1].LSN == rows[i].LSN {
			change(i).RecordIndex = change(i-1).RecordIndex + 1
		}
	}
	workers := p.dec.Workers()
	if len(p.rowText) < workers {
		p.rowText = make([]textCache, workers)
	}
	parallelRuns(len(rows), workers, func(w, from, to int) {
		text := &p.rowText[w]
		for i := from; i < to; i++ {
			c := change(i)
			// The delete of the old key and the update that follows it: a
			// consumer carries the update's unchanged TOAST columns over from
			// the deleted row (PostgreSQL logged only the old key).
			c.KeyChanged = keyChange(rows, i)
			row(text, i, c)
		}
	})
}

// countRows counts a batch's rows by operation: per batch, as a labelled
// counter's lookup per row costs more than the row's metadata.
func (p *decodeProcessor) countRows(rows []decode.RowChange) {
	var counts [decode.OpFail + 1]int64
	for i := range rows {
		if op := rows[i].Op; int(op) < len(counts) {
			counts[op]++
		}
	}
	for op, n := range counts {
		if n > 0 {
			p.m.rows.Incr(n, opName(decode.Op(op)))
		}
	}
}

// changesMessage is a batch's output as one change batch message
// (messages: batch): the changes messages would carry, in the same order,
// with the same metadata and payloads, built on the pool's workers.
func (p *decodeProcessor) changesMessage(b *batchdecode.Batch) *service.Message {
	rows := b.Rows
	n := len(rows) + len(b.Events)
	cs := &msg.Changes{Epoch: b.Epoch, Seq: b.Seq, Changes: make([]msg.Change, n), Payloads: make([]map[string]any, n)}
	// Row i goes after the events placed at or before it; event j after
	// the Before rows and the j events ahead of it.
	pos := make([]int, len(rows))
	ev := 0
	for i := range rows {
		for ev < len(b.Events) && b.Events[ev].Before <= i {
			ev++
		}
		pos[i] = i + ev
	}
	p.eachRow(rows, func(i int) *msg.Change { return &cs.Changes[pos[i]] }, func(text *textCache, i int, c *msg.Change) {
		cs.Payloads[pos[i]], _ = p.rowChange(text, &rows[i], b.RowTx[i], c, b.Epoch, b.Seq)
	})
	for j := range b.Events {
		c, payload := p.eventChange(&b.Events[j], b.Epoch, b.Seq)
		at := b.Events[j].Before + j
		cs.Changes[at], cs.Payloads[at] = *c, payload
	}
	m := service.NewMessage(nil)
	msg.SetChanges(m, cs)
	return m
}

// parallelMinRows: fewer rows than this are built on the caller's
// goroutine.
const parallelMinRows = 512

// parallelRuns calls fn over [0, n) cut into at most workers contiguous
// runs, concurrently, and returns when all are done; w numbers the run.
func parallelRuns(n, workers int, fn func(w, from, to int)) {
	if workers <= 1 || n < parallelMinRows {
		fn(0, 0, n)
		return
	}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		from, to := n*w/workers, n*(w+1)/workers
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(w, from, to)
		}()
	}
	wg.Wait()
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

// rowChange fills c with a row change's metadata (a failure's when r
// failed) and returns its payload: the columns, or an empty object for a
// failure (logged once here); rm is its relation's cached metadata.
func (p *decodeProcessor) rowChange(text *textCache, r *decode.RowChange, tx *batchdecode.Tx, c *msg.Change, epoch, seq uint64) (payload map[string]any, rm *relationMeta) {
	rm = text.relation(r.Desc)
	c.Op = opName(r.Op)
	c.Rel = rm.rel
	c.LSN, c.Tx, c.DescVersion, c.Epoch, c.Seq = r.LSN, tx.Typed, r.DescFrom, epoch, seq
	c.TID = msg.TID(r.TID)
	if r.Op == decode.OpUpdate {
		c.OldTID = msg.TID(r.OldTID)
	}
	c.Filenode = r.Filenode
	if r.Op == decode.OpFail {
		c.Error = "unknown failure"
		if r.Err != nil {
			c.Error = r.Err.Error()
		}
		p.log.Errorf("table %s.%s (oid %d) failed in transaction %d (commit %s); its changes from %s on are not decoded until it is reloaded: %s",
			r.Desc.Namespace, r.Desc.Name, r.Desc.Oid, tx.TopXID, tx.CommitLSNText, r.LSN, c.Error)
		return map[string]any{}, rm
	}
	payload = make(map[string]any, len(r.Fields))
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
	c.UnchangedToast = omitted
	if r.Op == decode.OpTruncate {
		c.Event = EventTruncate
	}
	return payload, rm
}

// rowMessage is a row change's message (a failure's when r failed): the
// columns as a structured payload, c (filled here) as its typed metadata,
// and the routing strings.
func (p *decodeProcessor) rowMessage(text *textCache, r *decode.RowChange, tx *batchdecode.Tx, c *msg.Change, epoch, seq uint64) *service.Message {
	m := service.NewMessage(nil)
	payload, rm := p.rowChange(text, r, tx, c, epoch, seq)
	m.SetStructuredMut(payload)
	m.MetaSetMut(MetaChange, c)
	// Truncates and failures are rare: they carry every string.
	if p.allMeta || r.Op == decode.OpFail || r.Op == decode.OpTruncate {
		c.AppendStrings(true, func(k, v string) { m.MetaSetMut(k, v) })
	} else {
		// The routing strings from the cache: no formatting, no boxing.
		m.MetaSetMut(MetaOperation, c.Op)
		if c.Event != "" {
			m.MetaSetMut(MetaEvent, c.Event)
		}
		m.MetaSetMut(MetaSchema, rm.schema)
		m.MetaSetMut(MetaTable, rm.table)
		m.MetaSetMut(MetaLSN, text.lsn(r.LSN))
		m.MetaSetMut(MetaCommitLSN, tx.CommitLSNText)
	}
	return m
}

// textCache keeps the metadata values consecutive rows share (the rows of
// one multi-insert have one LSN; a relation's rows one schema, name and
// key), formatted and boxed into an interface once: each MetaSetMut of a
// fresh string would allocate.
type textCache struct {
	lastLSN   wal.LSN
	lsnText   any
	relations map[*desclog.Descriptor]*relationMeta
}

// relationMeta is a descriptor's typed relation and its boxed strings.
type relationMeta struct {
	rel           *msg.Relation
	schema, table any
}

func (c *textCache) lsn(l wal.LSN) any {
	if l != c.lastLSN || c.lsnText == nil {
		c.lastLSN, c.lsnText = l, l.String()
	}
	return c.lsnText
}

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
	rm := &relationMeta{rel: &msg.Relation{Schema: d.Namespace, Table: d.Name, Oid: d.Oid, Key: keyNames(d)},
		schema: d.Namespace, table: d.Name}
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

// eventChange is a schema event's metadata and payload: the relation's
// shape (and, for a change, the previous shape and the difference).
func (p *decodeProcessor) eventChange(placed *batchdecode.Event, epoch, seq uint64) (*msg.Change, map[string]any) {
	ev := placed.Event
	kind := ev.Kind.String()
	payload := map[string]any{
		"format":       schemaPayloadFormat,
		"event":        kind,
		"relation_oid": int64(ev.Oid),
		"valid_from":   ev.ValidFrom.String(),
	}
	c := &msg.Change{Op: OperationSchema, Event: kind, LSN: ev.ValidFrom, Tx: placed.Tx.Typed,
		DescVersion: ev.ValidFrom, RecordIndex: -1, Epoch: epoch, Seq: seq}
	if ev.Desc != nil {
		for k, v := range relationPayload(ev.Desc) {
			payload[k] = v
		}
		c.Rel = p.text.relation(ev.Desc).rel
	} else {
		c.Rel = &msg.Relation{Oid: ev.Oid}
	}
	if ev.Kind == desclog.EventChanged && ev.Prev != nil {
		payload["previous"] = relationPayload(ev.Prev)
		payload["diff"] = diffPayload(ev.Diff, ev.Desc, ev.Prev)
		if p.rewritten(ev) {
			c.Rewritten, c.Filenode = true, ev.Desc.Rfn.RelNum
		}
	}
	p.m.events.Incr(1, kind)
	return c, payload
}

// eventMessage is a schema event's message: its shape as a structured
// payload, and every metadata string (events are few).
func (p *decodeProcessor) eventMessage(placed *batchdecode.Event, epoch, seq uint64) *service.Message {
	c, payload := p.eventChange(placed, epoch, seq)
	m := service.NewMessage(nil)
	m.SetStructuredMut(payload)
	m.MetaSetMut(MetaChange, c)
	c.AppendStrings(true, func(k, v string) { m.MetaSetMut(k, v) })
	return m
}

// rewritten reports a changed event whose transaction wrote every row of
// the relation into its new file as row changes (msg.KeyRewritten): the
// file changed, the relation is logged after (an UNLOGGED table's rows
// are not in the WAL; SET LOGGED rewrites into a logged file), and no
// page of the new file was copied whole. Within one ALTER TABLE transaction a relation's file is
// replaced by ATRewriteTable (a type change, a volatile default, SET
// LOGGED, SET ACCESS METHOD: every live row inserted into the new file,
// WAL-logged since the new file is permanent),
// by TRUNCATE (an empty file) or by SET TABLESPACE (the old file's pages
// copied as page images; VACUUM FULL and CLUSTER cannot run inside a
// transaction block and change no shape): the page copies are what tells
// the last apart, so a file with one is never called rewritten.
func (p *decodeProcessor) rewritten(ev *desclog.Event) bool {
	prev, d := ev.Prev, ev.Desc
	return d != nil && prev.Rfn != d.Rfn && d.Rfn.RelNum != 0 && (prev.Persistence == 'p' || prev.Persistence == 'u') && d.Persistence == 'p' &&
		!p.sess.PageCopied(d.Rfn)
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
