package output

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/msg"
	"github.com/walshadow/walshadow/internal/wal"
)

const eventsOid = 16500

// eventsDescriptor: a table without a key (REPLICA IDENTITY FULL, no
// primary key), whose ClickHouse table is a change log.
func eventsDescriptor() desclog.Descriptor {
	return desclog.Descriptor{
		Oid: eventsOid, DbOid: pgbenchDB, Rfn: wal.RelFileNode{SpcOid: 1663, DbOid: pgbenchDB, RelNum: eventsOid},
		NamespaceOid: 2200, Namespace: "public", Name: "events", Kind: 'r', Persistence: 'p', ReplIdent: 'f',
		Columns: []desclog.Column{
			{Num: 1, Name: "v", TypeOid: 23, TypMod: -1, TypeName: "integer", TypeKind: 'b', Len: 4, Align: 'i', ByVal: true, Storage: 'p'},
			{Num: 2, Name: "note", TypeOid: 25, TypMod: -1, TypeName: "text", TypeKind: 'b', Len: -1, Align: 'i', Storage: 'x'},
		},
	}
}

func eventMessage(op string, lsn wal.LSN, index int, v int64, note string, keyChanged bool) *service.Message {
	m := service.NewMessage(nil)
	m.SetStructuredMut(map[string]any{"v": v, "note": note})
	m.MetaSetMut(msg.KeyOperation, op)
	m.MetaSetMut(msg.KeySchema, "public")
	m.MetaSetMut(msg.KeyTable, "events")
	m.MetaSetMut(msg.KeyRelationOid, strconv.Itoa(eventsOid))
	m.MetaSetMut(msg.KeyLSN, lsn.String())
	m.MetaSetMut(msg.KeyCommitLSN, (lsn + 0x1000).String())
	m.MetaSetMut(msg.KeyXID, "900")
	m.MetaSetMut(msg.KeyCommitTime, time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC).Format(time.RFC3339Nano))
	m.MetaSetMut(msg.KeyDescVersion, pgbenchValidFrom.String())
	m.MetaSetMut(msg.KeyRecordIndex, strconv.Itoa(index))
	if keyChanged {
		m.MetaSetMut(msg.KeyKeyChanged, "true")
	}
	return m
}

// TestChangeLogReplayIsIdempotent: a table without a key keeps every row
// image, duplicates included (a multi-insert of two equal rows), and the
// same changes written again — what a restart replays — replace
// themselves instead of counting twice.
func TestChangeLogReplayIsIdempotent(t *testing.T) {
	r := newPgbenchRig(t, "walshadow_changelog", eventsDescriptor())
	const l1, l2 = wal.LSN(0x3000000), wal.LSN(0x3000100)
	batch := func() service.MessageBatch {
		return service.MessageBatch{
			// One multi-insert record: three images, two of them equal.
			eventMessage(msg.OperationInsert, l1, 0, 1, "a", false),
			eventMessage(msg.OperationInsert, l1, 1, 1, "a", false),
			eventMessage(msg.OperationInsert, l1, 2, 2, "b", false),
			// One update under REPLICA IDENTITY FULL: the old image
			// deleted, the new one inserted.
			eventMessage(msg.OperationDelete, l2, 0, 1, "a", true),
			eventMessage(msg.OperationUpdate, l2, 1, 3, "c", true),
		}
	}
	a := r.out.store.Get(eventsOid)
	if a == nil || len(a.OrderBy) != 0 {
		t.Fatalf("events agreement %+v, want a change log", a)
	}
	table := clickhouse.QuoteQualified(a.Target)
	contents := func() string {
		return strings.TrimSpace(r.ch.HTTPQuery(t, "SELECT v, note, sum(if(_is_deleted = 1, -1, 1)) AS n FROM "+table+
			" FINAL GROUP BY v, note HAVING n != 0 ORDER BY v FORMAT CSV"))
	}
	const want = "1,\"a\",1\n2,\"b\",1\n3,\"c\",1"
	ctx := context.Background()
	if err := r.out.WriteBatch(ctx, batch()); err != nil {
		t.Fatal(err)
	}
	if got := contents(); got != want {
		t.Fatalf("after one write:\n%s\nwant\n%s", got, want)
	}
	// Replayed after a restart that found them in written.json: skipped.
	if err := r.out.WriteBatch(ctx, batch()); err != nil {
		t.Fatal(err)
	}
	// (The last transaction of a batch may continue in the next one: it
	// is applied again, idempotently.)
	if got := strings.TrimSpace(r.ch.HTTPQuery(t, "SELECT count() FROM "+table+" WHERE _lsn = "+strconv.FormatUint(uint64(l1), 10))); got != "3" {
		t.Errorf("%s images of the first transaction stored after its replay, want the 3 of the first write", got)
	}
	for i := 0; i < 2; i++ {
		// As if the crash came before written.json recorded the batch.
		r.out.writtenBefore = 0
		if err := r.out.WriteBatch(ctx, batch()); err != nil {
			t.Fatal(err)
		}
	}
	r.ch.HTTPQuery(t, "OPTIMIZE TABLE "+table+" FINAL")
	if got := contents(); got != want {
		t.Errorf("after the same changes replayed twice:\n%s\nwant\n%s", got, want)
	}
	if got := strings.TrimSpace(r.ch.HTTPQuery(t, "SELECT count() FROM "+table)); got != "5" {
		t.Errorf("%s images stored after merging, want 5", got)
	}
}

// TestChangeLogReplayOlderThanAgreement: after a restart the agreement can
// be newer than the replayed rows (a column added since, with a default).
// An old row's inserted and deleted images must both read the column's
// missing value, or the delete would not cancel the insert.
func TestChangeLogReplayOlderThanAgreement(t *testing.T) {
	r := newPgbenchRig(t, "walshadow_changelog_old", eventsDescriptor())
	newer := eventsDescriptor()
	five := "5"
	newer.Columns = append(newer.Columns, desclog.Column{Num: 3, Name: "x", TypeOid: 23, TypMod: -1, TypeName: "integer",
		TypeKind: 'b', Len: 4, Align: 'i', ByVal: true, Storage: 'p', HasMissing: true, Missing: &five})
	ctx := context.Background()
	if err := r.out.agree(ctx, &newer, wal.LSN(0x5000000), "test: a column added since"); err != nil {
		t.Fatal(err)
	}
	table := clickhouse.QuoteQualified(r.out.store.Get(eventsOid).Target)
	// Rows decoded with the older shape (no x), as a replay delivers them.
	batch := service.MessageBatch{
		eventMessage(msg.OperationInsert, 0x3000000, 0, 7, "old", false),
		eventMessage(msg.OperationDelete, 0x3000100, 0, 7, "old", true),
		eventMessage(msg.OperationUpdate, 0x3000100, 1, 8, "new", true),
	}
	if err := r.out.WriteBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	got := strings.TrimSpace(r.ch.HTTPQuery(t, "SELECT v, note, x, sum(if(_is_deleted = 1, -1, 1)) AS n FROM "+table+
		" FINAL GROUP BY v, note, x HAVING n != 0 ORDER BY v FORMAT CSV"))
	if want := "8,\"new\",5,1"; got != want {
		t.Errorf("change log holds\n%s\nwant\n%s", got, want)
	}
}

const itemsOid = 16510

// itemsDescriptor: a table without a key (no primary key, REPLICA
// IDENTITY DEFAULT), keyed in ClickHouse by physical identity.
func itemsDescriptor() desclog.Descriptor {
	d := eventsDescriptor()
	d.Oid, d.Name, d.ReplIdent = itemsOid, "items", 'd'
	d.Rfn.RelNum = 16511
	return d
}

func itemMessage(op string, lsn wal.LSN, tid, oldTID string, v int64, note string, omitNote bool) *service.Message {
	m := eventMessage(op, lsn, 0, v, note, false)
	m.MetaSetMut(msg.KeyTable, "items")
	m.MetaSetMut(msg.KeyRelationOid, strconv.Itoa(itemsOid))
	m.MetaSetMut(msg.KeyFilenode, "16511")
	m.MetaSetMut(msg.KeyTID, tid)
	if oldTID != "" {
		m.MetaSetMut(msg.KeyOldTID, oldTID)
	}
	switch {
	case op == msg.OperationDelete:
		m.SetStructuredMut(map[string]any{}) // no replica identity: no old row
	case omitNote:
		m.SetStructuredMut(map[string]any{"v": v})
		m.MetaSetMut(msg.KeyUnchangedToast, "note")
	}
	return m
}

// TestPhysicalReplayIsIdempotent: a table without a key is keyed by its
// rows' physical identity: equal rows stay two rows, an update moves a row
// to its new tuple (its unchanged TOAST value carried from the old one), a
// delete without any old row removes the tuple it names — and the same
// changes replayed, whole or from the middle, change nothing (a replayed
// update whose old tuple ClickHouse already holds as deleted is
// superseded, not an error).
func TestPhysicalReplayIsIdempotent(t *testing.T) {
	r := newPgbenchRig(t, "walshadow_physical", itemsDescriptor())
	a := r.out.store.Get(itemsOid)
	if a == nil || clickhouse.LayoutOf(a.OrderBy) != clickhouse.LayoutPhysical {
		t.Fatalf("items agreement %+v, want one keyed by physical identity", a)
	}
	table := clickhouse.QuoteQualified(a.Target)
	first := service.MessageBatch{
		itemMessage(msg.OperationInsert, 0x3000000, "0:1", "", 1, "same", false),
		itemMessage(msg.OperationInsert, 0x3000000, "0:2", "", 1, "same", false),
		itemMessage(msg.OperationInsert, 0x3000000, "0:3", "", 2, "other", false),
	}
	second := service.MessageBatch{
		itemMessage(msg.OperationUpdate, 0x3000100, "0:4", "0:1", 5, "", true),
		itemMessage(msg.OperationDelete, 0x3000200, "0:2", "", 0, "", false),
		itemMessage(msg.OperationUpdate, 0x3000300, "1:1", "0:4", 6, "", true),
	}
	contents := func() string {
		return strings.TrimSpace(r.ch.HTTPQuery(t, "SELECT _block, _offset, v, note FROM "+table+
			" FINAL WHERE _is_deleted = 0 ORDER BY _block, _offset FORMAT CSV"))
	}
	const want = "0,3,2,\"other\"\n1,1,6,\"same\""
	ctx := context.Background()
	for _, b := range []service.MessageBatch{first, second} {
		if err := r.out.WriteBatch(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if got := contents(); got != want {
		t.Fatalf("after one write:\n%s\nwant\n%s", got, want)
	}
	for _, replay := range []service.MessageBatch{append(append(service.MessageBatch{}, first...), second...), second, second[2:]} {
		// As if the crash came before written.json recorded the batches.
		r.out.writtenBefore = 0
		r.out.tables = map[uint32]*tableState{}
		if err := r.out.WriteBatch(ctx, replay); err != nil {
			t.Fatalf("replay: %v", err)
		}
		if got := contents(); got != want {
			t.Fatalf("after a replay:\n%s\nwant\n%s", got, want)
		}
	}
}

const docsOid = 16520

// docsDescriptor: a keyed table (primary key id) with a TOASTable column.
func docsDescriptor() desclog.Descriptor {
	d := eventsDescriptor()
	d.Oid, d.Name, d.ReplIdent, d.KeyAttnums = docsOid, "docs", 'd', []int16{1}
	d.Rfn.RelNum = 16521
	d.Columns[0].Name, d.Columns[0].NotNull = "id", true
	return d
}

func docMessage(op string, lsn, commit wal.LSN, index int, id int64, note string, omitNote, keyChanged bool) *service.Message {
	m := eventMessage(op, lsn, index, 0, "", keyChanged)
	m.MetaSetMut(msg.KeyTable, "docs")
	m.MetaSetMut(msg.KeyRelationOid, strconv.Itoa(docsOid))
	m.MetaSetMut(msg.KeyCommitLSN, commit.String())
	switch {
	case op == msg.OperationDelete:
		m.SetStructuredMut(map[string]any{"id": id})
	case omitNote:
		m.SetStructuredMut(map[string]any{"id": id})
		m.MetaSetMut(msg.KeyUnchangedToast, "note")
	default:
		m.SetStructuredMut(map[string]any{"id": id, "note": note})
	}
	return m
}

// TestKeyedReplayAtEveryKillPoint: transactions touching one TOASTed key
// several times (insert, updates leaving the TOASTed value out, a key
// change, delete, insert again) are applied up to each point a crash can
// stop them at, then replayed whole from the resume point: every replay
// succeeds (a change whose key ClickHouse holds at its own or a newer
// _lsn is superseded) and the table ends as the source has it.
func TestKeyedReplayAtEveryKillPoint(t *testing.T) {
	r := newPgbenchRig(t, "walshadow_killpoints", docsDescriptor())
	a := r.out.store.Get(docsOid)
	if a == nil || clickhouse.LayoutOf(a.OrderBy) != clickhouse.LayoutKeyed {
		t.Fatalf("docs agreement %+v, want one keyed by id", a)
	}
	table := clickhouse.QuoteQualified(a.Target)
	const c1, c2, c3 = wal.LSN(0x3001000), wal.LSN(0x3002000), wal.LSN(0x3003000)
	changes := service.MessageBatch{
		// Transaction 1: insert, two updates leaving note out.
		docMessage(msg.OperationInsert, 0x3000100, c1, 0, 1, "big text", false, false),
		docMessage(msg.OperationUpdate, 0x3000200, c1, 0, 1, "", true, false),
		docMessage(msg.OperationUpdate, 0x3000300, c1, 0, 1, "", true, false),
		// Transaction 2: the key changes (1 → 2, note left out), then 2
		// is updated again and deleted.
		docMessage(msg.OperationDelete, 0x3001100, c2, 0, 1, "", false, true),
		docMessage(msg.OperationUpdate, 0x3001100, c2, 1, 2, "", true, true),
		docMessage(msg.OperationUpdate, 0x3001200, c2, 0, 2, "", true, false),
		docMessage(msg.OperationDelete, 0x3001300, c2, 0, 2, "", false, false),
		// Transaction 3: 2 comes back, then is updated leaving note out.
		docMessage(msg.OperationInsert, 0x3002100, c3, 0, 2, "again", false, false),
		docMessage(msg.OperationUpdate, 0x3002200, c3, 0, 2, "", true, false),
	}
	contents := func() string {
		return strings.TrimSpace(r.ch.HTTPQuery(t, "SELECT id, note FROM "+table+" FINAL WHERE _is_deleted = 0 ORDER BY id FORMAT CSV"))
	}
	const want = "2,\"again\""
	ctx := context.Background()
	lsnOf := func(m *service.Message) string { s, _ := m.MetaGet(msg.KeyLSN); return s }
	for kill := 0; kill <= len(changes); kill++ {
		if kill > 0 && kill < len(changes) && lsnOf(changes[kill-1]) == lsnOf(changes[kill]) {
			continue // one record's changes are delivered, and inserted, together
		}
		r.ch.HTTPQuery(t, "TRUNCATE TABLE "+table)
		r.out.writtenBefore = 0
		r.out.tables = map[uint32]*tableState{}
		if kill > 0 {
			// Applied up to the kill point (inserted, not yet recorded).
			if err := r.out.WriteBatch(ctx, changes[:kill]); err != nil {
				t.Fatalf("kill point %d: the first run: %v", kill, err)
			}
		}
		// The restart replays from the resume point: the transaction the
		// kill cut (the ones before it are recorded as written).
		r.out.writtenBefore = 0
		if kill > 0 {
			r.out.writtenBefore = wal.LSN(0)
			if s, ok := changes[kill-1].MetaGet(msg.KeyCommitLSN); ok {
				r.out.writtenBefore, _ = wal.ParseLSN(s)
			}
		}
		r.out.tables = map[uint32]*tableState{}
		if err := r.out.WriteBatch(ctx, changes); err != nil {
			t.Fatalf("kill point %d: the replay failed: %v", kill, err)
		}
		if got := contents(); got != want {
			t.Errorf("kill point %d: after the replay:\n%s\nwant\n%s", kill, got, want)
		}
		if n := len(r.out.loads.Ledger().All()); n != 0 {
			t.Fatalf("kill point %d: %d loads planned: a replay failed the table", kill, n)
		}
	}
}

// TestPhysicalReplayAfterTruncate: rows of the heap generation a TRUNCATE
// began, replayed after a restart that moved the agreement to a newer
// shape, are written (they are not older than their generation), and the
// rows of the generation before the TRUNCATE stay truncated.
func TestPhysicalReplayAfterTruncate(t *testing.T) {
	r := newPgbenchRig(t, "walshadow_physical_truncate", itemsDescriptor())
	table := clickhouse.QuoteQualified(r.out.store.Get(itemsOid).Target)
	onFilenode := func(m *service.Message, fn string) *service.Message {
		m.MetaSetMut(msg.KeyFilenode, fn)
		return m
	}
	before := service.MessageBatch{
		itemMessage(msg.OperationInsert, 0x3000000, "0:1", "", 1, "old", false),
		itemMessage(msg.OperationInsert, 0x3000000, "0:2", "", 2, "old", false),
	}
	truncate := eventMessage(msg.OperationTruncate, 0x3000100, 0, 0, "", false)
	truncate.MetaSetMut(msg.KeyTable, "items")
	truncate.MetaSetMut(msg.KeyRelationOid, strconv.Itoa(itemsOid))
	after := service.MessageBatch{
		truncate,
		onFilenode(itemMessage(msg.OperationInsert, 0x3000200, "0:1", "", 3, "new", false), "16600"),
		onFilenode(itemMessage(msg.OperationUpdate, 0x3000300, "0:2", "0:1", 4, "newer", false), "16600"),
	}
	contents := func() string {
		return strings.TrimSpace(r.ch.HTTPQuery(t, "SELECT _filenode, _block, _offset, v, note FROM "+table+
			" FINAL WHERE _is_deleted = 0 ORDER BY _filenode, _block, _offset FORMAT CSV"))
	}
	const want = "16600,0,2,4,\"newer\""
	ctx := context.Background()
	for _, b := range []service.MessageBatch{before, after} {
		if err := r.out.WriteBatch(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if got := contents(); got != want {
		t.Fatalf("after one write:\n%s\nwant\n%s", got, want)
	}
	// A restart: the agreement on the newest shape, the rows since the
	// resume point replayed.
	d := itemsDescriptor()
	if err := r.out.agree(ctx, &d, 0x5000000, "test: a restart"); err != nil {
		t.Fatal(err)
	}
	for _, replay := range []service.MessageBatch{append(append(service.MessageBatch{}, before...), after...), after[1:]} {
		r.out.writtenBefore = 0
		r.out.tables = map[uint32]*tableState{}
		if err := r.out.WriteBatch(ctx, replay); err != nil {
			t.Fatalf("replay: %v", err)
		}
		if got := contents(); got != want {
			t.Fatalf("after a replay:\n%s\nwant\n%s", got, want)
		}
		if n := len(r.out.loads.Ledger().All()); n != 0 {
			t.Fatalf("%d loads planned: a replay failed the table", n)
		}
	}
}
