package output

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/msg"
	"github.com/walshadow/walshadow/internal/shadow"
	"github.com/walshadow/walshadow/internal/statefile"
	"github.com/walshadow/walshadow/internal/wal"
)

// The writer's batching and barriers, against fakeConn: no server.

// fakeSession is the session as the output sees it: a seeded descriptor
// log and a state directory.
type fakeSession struct {
	log      *desclog.Log
	stateDir string
}

func (s *fakeSession) DescLog() *desclog.Log { return s.log }
func (s *fakeSession) Live(uint64) bool      { return true }
func (s *fakeSession) AwaitEarlier(context.Context, uint64, uint64) (bool, error) {
	return true, nil
}
func (s *fakeSession) OldestUnacked(uint64) (uint64, bool) { return 0, false }
func (s *fakeSession) StateDir() string                    { return s.stateDir }
func (s *fakeSession) SourceDSN() string                   { return "" }
func (s *fakeSession) Bridge() *shadow.Bridge              { return nil }

// fakeConn is ClickHouse as a log of what the output did: every statement
// and every insert (its rows as ConvertValue values), in order. Tables
// are absent until created; LookupLatest answers from the inserted rows
// and from held (rows a test says ClickHouse already has).
type fakeConn struct {
	dialect clickhouse.Dialect
	mu      sync.Mutex
	events  []string // "exec <sql>" or "insert <table> <rows>"
	inserts []fakeInsert
	lookups int
	// boot is the server's boot time Boot reports (a fixed one unless a
	// test restarts it); boots counts the readings. mutations are the
	// unfinished ones UnfinishedMutations reports.
	boot      clickhouse.Boot
	boots     int
	mutations []clickhouse.Mutation
}

type fakeInsert struct {
	target clickhouse.Target
	cols   []clickhouse.ColumnSpec
	rows   [][]any
}

func newFakeConn(t *testing.T) *fakeConn {
	d, err := clickhouse.ParseDialect("23.8.1.1")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(-time.Hour)
	return &fakeConn{dialect: d, boot: clickhouse.Boot{Earliest: start, Latest: start.Add(time.Second), Read: start.Add(time.Hour)}}
}

func (f *fakeConn) Dialect() clickhouse.Dialect { return f.dialect }
func (f *fakeConn) Database() string            { return "default" }
func (f *fakeConn) Close() error                { return nil }
func (f *fakeConn) Exec(_ context.Context, sql string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, "exec "+sql)
	return nil
}
func (f *fakeConn) CreateLike(ctx context.Context, t, like clickhouse.Target) error {
	return f.Exec(ctx, "CREATE TABLE "+clickhouse.QuoteQualified(t)+" AS "+clickhouse.QuoteQualified(like))
}
func (f *fakeConn) RepairNodes(context.Context, []clickhouse.Target) ([]string, []string, error) {
	return nil, nil, nil
}
func (f *fakeConn) Boot(context.Context) (clickhouse.Boot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.boots++
	return f.boot, nil
}
func (f *fakeConn) UnfinishedMutations(_ context.Context, targets []clickhouse.Target) ([]clickhouse.Mutation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []clickhouse.Mutation
	for _, m := range f.mutations {
		for _, t := range targets {
			if m.Target == t {
				out = append(out, m)
			}
		}
	}
	return out, nil
}
func (f *fakeConn) Table(context.Context, clickhouse.Target) (clickhouse.CHTable, error) {
	return clickhouse.CHTable{}, nil
}
func (f *fakeConn) TableExists(context.Context, clickhouse.Target) (bool, error) { return false, nil }
func (f *fakeConn) TableUUID(context.Context, clickhouse.Target) (string, error) { return "", nil }
func (f *fakeConn) DatabaseEngine(context.Context, string) (string, error) {
	return "Atomic", nil
}
func (f *fakeConn) Insert(_ context.Context, t clickhouse.Target, cols []clickhouse.ColumnSpec, rows [][]any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, fmt.Sprintf("insert %s %d", t.Table, len(rows)))
	f.inserts = append(f.inserts, fakeInsert{t, cols, rows})
	return nil
}
func (f *fakeConn) InsertRetrying(ctx context.Context, t clickhouse.Target, cols []clickhouse.ColumnSpec, rows [][]any, _ clickhouse.RetryPolicy, _ func(int, error)) error {
	return f.Insert(ctx, t, cols, rows)
}
func (f *fakeConn) InsertBlockRetrying(ctx context.Context, t clickhouse.Target, b *clickhouse.Block, _ clickhouse.RetryPolicy, _ func(int, error)) error {
	rows := make([][]any, b.Len())
	for i := range rows {
		rows[i] = b.Row(i)
	}
	return f.Insert(ctx, t, b.Columns(), rows)
}

// LookupLatest answers from the inserted rows: per key, the want columns
// of the row with the highest _lsn (FINAL).
func (f *fakeConn) LookupLatest(_ context.Context, t clickhouse.Target, key []clickhouse.ColumnSpec, keys [][]any, want []clickhouse.ColumnSpec) ([][]any, error) {
	out := make([][]any, len(keys))
	best := make([]uint64, len(keys))
	f.lookup(t, key, keys, func(k int, row []any, idx map[string]int) {
		if lsn := row[idx[clickhouse.ColLSN]].(uint64); out[k] == nil || lsn >= best[k] {
			out[k], best[k] = pick(row, idx, want), lsn
		}
	})
	return out, nil
}

// LookupVersions answers from the inserted rows: per key, the want
// columns of every row of it (nothing is ever merged away here).
func (f *fakeConn) LookupVersions(_ context.Context, t clickhouse.Target, key []clickhouse.ColumnSpec, keys [][]any, want []clickhouse.ColumnSpec) ([][][]any, error) {
	out := make([][][]any, len(keys))
	f.lookup(t, key, keys, func(k int, row []any, idx map[string]int) {
		out[k] = append(out[k], pick(row, idx, want))
	})
	return out, nil
}

// lookup calls found with every inserted row of t whose key columns hold
// keys[k], and its columns' indexes by name.
func (f *fakeConn) lookup(t clickhouse.Target, key []clickhouse.ColumnSpec, keys [][]any, found func(k int, row []any, idx map[string]int)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lookups++
	for _, in := range f.inserts {
		if in.target != t {
			continue
		}
		idx := map[string]int{}
		for i, c := range in.cols {
			idx[c.Name] = i
		}
		for _, row := range in.rows {
			for k, kv := range keys {
				match := true
				for j, kc := range key {
					if !reflect.DeepEqual(row[idx[kc.Name]], kv[j]) {
						match = false
					}
				}
				if match {
					found(k, row, idx)
				}
			}
		}
	}
}

// pick is row's values of want.
func pick(row []any, idx map[string]int, want []clickhouse.ColumnSpec) []any {
	got := make([]any, len(want))
	for w, wc := range want {
		got[w] = row[idx[wc.Name]]
	}
	return got
}

// take is what the output did since the last take.
func (f *fakeConn) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	ev := f.events
	f.events = nil
	return ev
}

// rowsOf is every row inserted into table so far, as column name → value.
func (f *fakeConn) rowsOf(table string) []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []map[string]any
	for _, in := range f.inserts {
		if in.target.Table != table {
			continue
		}
		for _, row := range in.rows {
			m := map[string]any{}
			for i, c := range in.cols {
				m[c.Name] = row[i]
			}
			out = append(out, m)
		}
	}
	return out
}

// The ClickHouse tables of the two test relations.
const (
	accountsTable = pgbenchSchema + "." + pgbenchTable
	notesTable    = pgbenchSchema + ".notes"
)

// keylessDescriptor is a table without a replica identity key (physical
// layout).
func keylessDescriptor() desclog.Descriptor {
	return desclog.Descriptor{
		Oid: pgbenchOid + 10, DbOid: pgbenchDB, Rfn: wal.RelFileNode{SpcOid: 1663, DbOid: pgbenchDB, RelNum: pgbenchOid + 10},
		NamespaceOid: 2200, Namespace: pgbenchSchema, Name: "notes", Kind: 'r', Persistence: 'p', ReplIdent: 'd',
		Columns: []desclog.Column{{Num: 1, Name: "note", TypeOid: 25, TypMod: -1, TypeName: "text", TypeKind: 'b',
			Len: -1, Align: 'i', Storage: 'x'}},
	}
}

// newFakeOutput is a connected clickhouse_ddl output over a fakeConn whose
// descriptor log knows pgbench_accounts (a key: aid) and notes (no key),
// writing at most batchRows rows per insert.
func newFakeOutput(t *testing.T, batchRows int) (*chOutput, *fakeConn) {
	t.Helper()
	dir := t.TempDir()
	log, err := desclog.Open(dir+"/desclog", desclog.Identity{PGMajor: 15, SystemID: 7300000000000000001, Timeline: 1,
		DbOid: pgbenchDB, SegmentSize: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	if _, err := log.Seed(pgbenchValidFrom, pgbenchValidFrom, []desclog.Descriptor{pgbenchDescriptor(), keylessDescriptor()}); err != nil {
		t.Fatal(err)
	}
	sc, err := newScope([]string{"*.*"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	conn := newFakeConn(t)
	o := newOutput(settings{
		database:      "walshadow_test",
		drop:          clickhouse.DropRetain,
		maxInFlight:   1,
		batchRows:     batchRows,
		batchBytes:    16 << 20,
		retry:         clickhouse.RetryPolicy{MaxAttempts: 1},
		insertTimeout: 5 * time.Second,
		stateDir:      statefile.StateDir(dir).Output(),
	}, sc, &fakeSession{log: log, stateDir: dir}, service.MockResources())
	o.conn = conn
	if err := o.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	conn.take() // the tables' creation
	return o, conn
}

// testChange is one row change of the test tables.
type testChange struct {
	op       string
	oid      uint32
	lsn      wal.LSN
	fields   map[string]any
	toast    []string // unchanged TOAST columns
	keyChg   bool
	tid, old msg.TID // a keyless table's
}

// batchOf builds the messages of changes, all of one transaction that
// commits after the last.
func batchOf(changes ...testChange) service.MessageBatch {
	last := changes[len(changes)-1].lsn
	tx := &msg.Tx{TopXID: uint32(last), CommitLSN: last + 0x30, CommitTime: pgbenchCommitBase}
	var out service.MessageBatch
	for i, ch := range changes {
		rel := &msg.Relation{Schema: pgbenchSchema, Table: pgbenchTable, Oid: ch.oid, Key: []string{"aid"}}
		if ch.oid == keylessDescriptor().Oid {
			rel = &msg.Relation{Schema: pgbenchSchema, Table: "notes", Oid: ch.oid}
		}
		m := service.NewMessage(nil)
		m.SetStructuredMut(ch.fields)
		c := &msg.Change{Op: ch.op, Rel: rel, LSN: ch.lsn, Tx: tx, DescVersion: pgbenchValidFrom, RecordIndex: i,
			UnchangedToast: ch.toast, KeyChanged: ch.keyChg, TID: ch.tid, OldTID: ch.old}
		if ch.tid.Valid() {
			c.Filenode = keylessDescriptor().Rfn.RelNum
		}
		m.MetaSetMut(msg.KeyChange, c)
		out = append(out, m)
	}
	return out
}

func account(aid int64, balance int64, filler string) map[string]any {
	return map[string]any{"aid": aid, "bid": int64(1), "abalance": balance, "filler": filler}
}

func ins(lsn wal.LSN, fields map[string]any) testChange {
	return testChange{op: msg.OperationInsert, oid: pgbenchOid, lsn: lsn, fields: fields}
}

func write(t *testing.T, o *chOutput, b service.MessageBatch) {
	t.Helper()
	if err := o.WriteBatch(context.Background(), b); err != nil {
		t.Fatal(err)
	}
}

// TestWriterOneInsertPerTable: the rows of a batch reach ClickHouse as one
// insert per table, in order, with typed values and version columns.
func TestWriterOneInsertPerTable(t *testing.T) {
	o, conn := newFakeOutput(t, 1000)
	write(t, o, batchOf(
		ins(0x3000100, account(1, 10, "a")),
		testChange{op: msg.OperationInsert, oid: keylessDescriptor().Oid, lsn: 0x3000200, fields: map[string]any{"note": "n"}, tid: msg.TID{Block: 0, Off: 1}},
		ins(0x3000300, account(2, -20, "b")),
	))
	if got, want := conn.take(), []string{"insert " + accountsTable + " 2", "insert " + notesTable + " 1"}; !sameSet(got, want) {
		t.Fatalf("inserts %q, want %q (in any order)", got, want)
	}
	rows := conn.rowsOf(accountsTable)
	if rows[0]["aid"] != int32(1) || rows[1]["abalance"] != int32(-20) || rows[1]["filler"] != "b" ||
		rows[0][clickhouse.ColLSN] != uint64(0x3000100) || rows[1][clickhouse.ColIsDeleted] != uint8(0) {
		t.Errorf("rows %v", rows)
	}
	notes := conn.rowsOf(notesTable)
	if notes[0]["note"] != "n" || notes[0][clickhouse.ColOffset] != uint16(1) {
		t.Errorf("notes %v", notes)
	}
	if w, _, err := ReadWritten(o.s.stateDir); err != nil || w != 0x3000330 {
		t.Errorf("written position %s (%v), want 0/3000330", w, err)
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]int{}
	for _, s := range a {
		seen[s]++
	}
	for _, s := range b {
		seen[s]--
	}
	for _, n := range seen {
		if n != 0 {
			return false
		}
	}
	return true
}

// TestWriterFlushesAtBatchRows: a table's pending block is inserted when it
// reaches batch_rows, the rest at the batch's end; the halves of a
// key-changing update are never inserted apart.
func TestWriterFlushesAtBatchRows(t *testing.T) {
	o, conn := newFakeOutput(t, 3)
	var changes []testChange
	for i := range 7 {
		changes = append(changes, ins(wal.LSN(0x3000000+0x100*i), account(int64(i+1), 0, "x")))
	}
	write(t, o, batchOf(changes...))
	if got, want := strings.Join(conn.take(), ","), strings.Repeat("insert "+accountsTable+" 3,", 2)+"insert "+accountsTable+" 1"; got != want {
		t.Errorf("inserts %s, want %s", got, want)
	}
	// Two rows, then a key change's delete half (the third row) and update
	// half: the delete half fills the block, but is not inserted without
	// the update half.
	write(t, o, batchOf(
		ins(0x4000000, account(20, 0, "x")),
		ins(0x4000100, account(21, 0, "x")),
		testChange{op: msg.OperationDelete, oid: pgbenchOid, lsn: 0x4000200, fields: map[string]any{"aid": int64(20)}, keyChg: true},
		testChange{op: msg.OperationUpdate, oid: pgbenchOid, lsn: 0x4000200, fields: account(22, 5, "y"), keyChg: true},
	))
	if got, want := strings.Join(conn.take(), ","), "insert "+accountsTable+" 4"; got != want {
		t.Errorf("inserts %s, want %s", got, want)
	}
}

// TestWriterTruncateIsABarrier: rows before a TRUNCATE are inserted before
// it, rows after it after it; the TRUNCATE is TRUNCATE TABLE and the
// mutation deleting every row older than the TRUNCATE's position (what a
// ClickHouse restart may bring back).
func TestWriterTruncateIsABarrier(t *testing.T) {
	o, conn := newFakeOutput(t, 1000)
	write(t, o, batchOf(
		ins(0x3000100, account(1, 0, "a")),
		testChange{op: msg.OperationTruncate, oid: pgbenchOid, lsn: 0x3000200},
		ins(0x3000300, account(2, 0, "b")),
	))
	got := conn.take()
	want := []string{
		"insert " + accountsTable + " 1",
		"exec TRUNCATE TABLE IF EXISTS `walshadow_test`.`public.pgbench_accounts`",
		"exec ALTER TABLE `walshadow_test`.`public.pgbench_accounts` DELETE WHERE `_lsn` < 50332160", // 0x3000200
		"insert " + accountsTable + " 1",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ClickHouse saw %q, want %q", got, want)
	}
}

// TestWriterWaitsAfterClickHouseRestart: a batch reads ClickHouse's boot
// time at most once per interval (and after a failure); when ClickHouse
// restarted it writes nothing until no truncate mutation of its tables is
// unfinished (a user's mutation is not waited for).
func TestWriterWaitsAfterClickHouseRestart(t *testing.T) {
	o, conn := newFakeOutput(t, 1000)
	o.restart.every = time.Hour
	o.restart.poll = 10 * time.Millisecond
	bootsAtStart := conn.boots
	if bootsAtStart != 1 {
		t.Errorf("Connect read the boot time %d times, want once", bootsAtStart)
	}
	write(t, o, batchOf(ins(0x3000100, account(1, 0, "a"))))
	write(t, o, batchOf(ins(0x3000200, account(2, 0, "a"))))
	if conn.boots != bootsAtStart {
		t.Errorf("within the interval, batches read the boot time %d times", conn.boots-bootsAtStart)
	}
	conn.take()

	// A restart: the new boot is after every time the old server was seen
	// up. A truncate mutation of the table is unfinished for a while.
	accounts := clickhouse.Target{Database: "walshadow_test", Table: "public.pgbench_accounts"}
	conn.mu.Lock()
	now := time.Now()
	conn.boot = clickhouse.Boot{Earliest: now.Add(-time.Second), Latest: now, Read: now}
	conn.mutations = []clickhouse.Mutation{
		{Target: accounts, ID: "mutation_7.txt", Command: "DELETE WHERE _lsn < 50332160", PartsToDo: 3},
		{Target: accounts, ID: "mutation_8.txt", Command: "DELETE WHERE abalance < 0", PartsToDo: 1}, // not walshadow's
	}
	conn.mu.Unlock()
	o.restart.every = 0 // the default interval: long past since the last check
	o.restart.checked = time.Now().Add(-time.Minute)
	done := make(chan error, 1)
	go func() { done <- o.WriteBatch(context.Background(), batchOf(ins(0x3000300, account(3, 0, "a")))) }()
	time.Sleep(100 * time.Millisecond)
	if got := conn.take(); len(got) != 0 {
		t.Fatalf("written while a truncate mutation was unfinished after a restart: %q", got)
	}
	select {
	case err := <-done:
		t.Fatalf("WriteBatch returned (%v) while the truncate mutation was unfinished", err)
	default:
	}
	conn.mu.Lock()
	conn.mutations = conn.mutations[1:] // the truncate mutation is done
	conn.mu.Unlock()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WriteBatch still waits once no truncate mutation is unfinished")
	}
	if got := conn.take(); len(got) != 1 || got[0] != "insert "+accountsTable+" 1" {
		t.Errorf("after the wait ClickHouse saw %q, want the insert", got)
	}
	if o.restart.waiting || o.restart.boot.Latest != now {
		t.Errorf("guard state after the wait: %+v", o.restart)
	}
}

// TestWriterDeleteThenUpsertAtOneLSN: a delete marker followed by an
// upsert of the same key at the same LSN (REPLICA IDENTITY FULL logs an
// update so) leaves the upsert alone: two equal versions would leave
// ReplacingMergeTree free to keep either.
func TestWriterDeleteThenUpsertAtOneLSN(t *testing.T) {
	o, conn := newFakeOutput(t, 1000)
	write(t, o, batchOf(
		ins(0x3000100, account(1, 0, "a")),
		testChange{op: msg.OperationDelete, oid: pgbenchOid, lsn: 0x3000200, fields: account(1, 0, "a")},
		testChange{op: msg.OperationUpdate, oid: pgbenchOid, lsn: 0x3000200, fields: account(1, 7, "a")},
	))
	rows := conn.rowsOf(accountsTable)
	if len(rows) != 2 || rows[1][clickhouse.ColIsDeleted] != uint8(0) || rows[1]["abalance"] != int32(7) {
		t.Errorf("rows %v, want the insert and the update, no delete marker", rows)
	}
}

// TestWriterUnchangedToast: an update's unchanged TOAST column is taken
// from the pending earlier row of its key, else read back from
// ClickHouse; a replay ClickHouse holds a newer version of is superseded.
func TestWriterUnchangedToast(t *testing.T) {
	o, conn := newFakeOutput(t, 1000)
	noFiller := map[string]any{"aid": int64(1), "bid": int64(1), "abalance": int64(5)}
	write(t, o, batchOf(
		ins(0x3000100, account(1, 0, "long text")),
		testChange{op: msg.OperationUpdate, oid: pgbenchOid, lsn: 0x3000200, fields: noFiller, toast: []string{"filler"}},
	))
	rows := conn.rowsOf(accountsTable)
	if len(rows) != 2 || rows[1]["filler"] != "long text" || conn.lookups != 0 {
		t.Fatalf("rows %v (%d lookups), want the update with the pending row's filler, no lookup", rows, conn.lookups)
	}
	// Not pending any more: read back.
	noFiller2 := map[string]any{"aid": int64(1), "bid": int64(1), "abalance": int64(6)}
	write(t, o, batchOf(testChange{op: msg.OperationUpdate, oid: pgbenchOid, lsn: 0x3000300, fields: noFiller2, toast: []string{"filler"}}))
	rows = conn.rowsOf(accountsTable)
	if len(rows) != 3 || rows[2]["filler"] != "long text" || rows[2]["abalance"] != int32(6) || conn.lookups != 1 {
		t.Fatalf("rows %v (%d lookups), want the update with ClickHouse's filler, one lookup", rows, conn.lookups)
	}
	// A replay of an older update after a restart forgot the written
	// position: ClickHouse holds 0/3000300, newer.
	o.writtenBefore = 0
	write(t, o, batchOf(testChange{op: msg.OperationUpdate, oid: pgbenchOid, lsn: 0x3000200, fields: noFiller, toast: []string{"filler"}}))
	if rows := conn.rowsOf(accountsTable); len(rows) != 3 {
		t.Errorf("the superseded replay was written: %v", rows[3:])
	}
}

// TestWriterKeylessUpdate: an update of a table without a key writes a
// delete marker at the tuple it replaced and the row at the new one.
func TestWriterKeylessUpdate(t *testing.T) {
	o, conn := newFakeOutput(t, 1000)
	notes := keylessDescriptor().Oid
	write(t, o, batchOf(
		testChange{op: msg.OperationInsert, oid: notes, lsn: 0x3000100, fields: map[string]any{"note": "a"}, tid: msg.TID{Block: 0, Off: 1}},
		testChange{op: msg.OperationUpdate, oid: notes, lsn: 0x3000200, fields: map[string]any{"note": "b"}, tid: msg.TID{Block: 0, Off: 2}, old: msg.TID{Block: 0, Off: 1}},
	))
	rows := conn.rowsOf(notesTable)
	if len(rows) != 3 {
		t.Fatalf("rows %v, want the insert, a marker and the update", rows)
	}
	marker, row := rows[1], rows[2]
	if marker[clickhouse.ColIsDeleted] != uint8(1) || marker[clickhouse.ColOffset] != uint16(1) || marker[clickhouse.ColLSN] != uint64(0x3000200) || marker["note"] != nil {
		t.Errorf("marker %v", marker)
	}
	if row[clickhouse.ColIsDeleted] != uint8(0) || row[clickhouse.ColOffset] != uint16(2) || row["note"] != "b" {
		t.Errorf("row %v", row)
	}
}

// TestWriterRefusedValueDropsOnlyItsRow: a value the column cannot hold
// leaves no partial row in the block: the rows before it are written.
func TestWriterRefusedValueDropsOnlyItsRow(t *testing.T) {
	o, conn := newFakeOutput(t, 1000)
	ts := func() *tableState { return o.tables[pgbenchOid] }
	write(t, o, batchOf(ins(0x3000100, account(1, 0, "a"))))
	conn.take()
	c := change{op: msg.OperationInsert, oid: pgbenchOid, lsn: 0x3000200, version: pgbenchValidFrom, commitLSN: 0x3000230, recordIndex: -1}
	bad := service.NewMessage(nil)
	bad.SetStructuredMut(account(2, 1<<40, "b")) // abalance is an int4
	if err := o.addRow(context.Background(), &parsedChange{c: c, m: bad}, c, nil); err == nil || !strings.Contains(err.Error(), "abalance") {
		t.Fatalf("addRow of an out-of-range int4: %v", err)
	}
	if n := ts().rowCount(); n != 0 || ts().block.Filled(0) {
		t.Errorf("after the refusal: %d pending rows, open row filled %v", n, ts().block.Filled(0))
	}
	good := service.NewMessage(nil)
	good.SetStructuredMut(account(3, 1, "c"))
	if err := o.addRow(context.Background(), &parsedChange{c: c, payload: account(3, 1, "c")}, c, nil); err != nil {
		t.Fatal(err)
	}
	if err := o.flush(context.Background(), ts()); err != nil {
		t.Fatal(err)
	}
	if rows := conn.rowsOf(accountsTable); len(rows) != 2 || rows[1]["aid"] != int32(3) {
		t.Errorf("rows %v", rows)
	}
}
