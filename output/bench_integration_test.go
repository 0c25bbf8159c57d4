package output

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/msg"
	"github.com/walshadow/walshadow/internal/statefile"
	"github.com/walshadow/walshadow/internal/testrig"
	"github.com/walshadow/walshadow/internal/wal"
)

// The pgbench_accounts-shaped relation the benchmark replicates.
const (
	pgbenchOid       = 16400
	pgbenchDB        = 5
	pgbenchSchema    = "public"
	pgbenchTable     = "pgbench_accounts"
	pgbenchFillerLen = 84
	// pgbenchTxRows is the rows of one source transaction and of one
	// WriteBatch (and one clickhouse-go batch in the baseline).
	pgbenchTxRows = 10_000
	// pgbenchRowBytes is one row's column data as inserted: aid, bid,
	// abalance (Int32), filler (84-byte String), _lsn (UInt64), _xid
	// (UInt32), the commit time (UInt64 µs or DateTime64) and _is_deleted
	// (UInt8).
	pgbenchRowBytes = 3*4 + pgbenchFillerLen + 8 + 4 + 8 + 1
	// pgbenchValidFrom and pgbenchFirstLSN: the seed's descriptor version
	// and the first row's LSN after it.
	pgbenchValidFrom = wal.LSN(0x1000000)
	pgbenchFirstLSN  = wal.LSN(0x2000000)
	// pgbenchRowWAL is the LSN step between rows (about one heap insert
	// record of this shape).
	pgbenchRowWAL = 0xA0
)

var pgbenchCommitBase = time.Date(2024, 5, 1, 12, 0, 0, 123456000, time.UTC)

// pgbenchRow is one source row with the transaction metadata
// walshadow_decode attaches to it.
type pgbenchRow struct {
	aid, bid, abalance int32
	filler             string
	lsn, commitLSN     wal.LSN
	xid                uint32
	commitTime         time.Time
}

// pgbenchRows builds n rows as pgbench -i lays them out (bid one per
// 100,000 accounts, a blank-padded filler) with varied balances so sums and
// samples can tell rows apart, in transactions of pgbenchTxRows rows.
func pgbenchRows(n int) []pgbenchRow {
	rows := make([]pgbenchRow, n)
	for i := range rows {
		aid := int32(i + 1)
		tx := i / pgbenchTxRows
		lastOfTx := min((tx+1)*pgbenchTxRows, n) - 1
		rows[i] = pgbenchRow{
			aid:        aid,
			bid:        (aid-1)/100_000 + 1,
			abalance:   int32(int64(aid)*7919%20_001 - 10_000),
			filler:     fmt.Sprintf("%-*s", pgbenchFillerLen, "account "+strconv.Itoa(int(aid))),
			lsn:        pgbenchFirstLSN + wal.LSN(i)*pgbenchRowWAL,
			commitLSN:  pgbenchFirstLSN + wal.LSN(lastOfTx)*pgbenchRowWAL + 0x30,
			xid:        uint32(1000 + tx),
			commitTime: pgbenchCommitBase.Add(time.Duration(tx) * time.Millisecond),
		}
	}
	return rows
}

// pgbenchMessages are the rows as walshadow_decode emits them
// (processor.rowMessage): a structured payload of column values and the
// change's metadata.
func pgbenchMessages(rows []pgbenchRow, shift wal.LSN) []*service.Message {
	rel := &msg.Relation{Schema: pgbenchSchema, Table: pgbenchTable, Oid: pgbenchOid, Key: []string{"aid"}}
	msgs := make([]*service.Message, len(rows))
	changes := make([]msg.Change, len(rows))
	var tx *msg.Tx
	for i := range rows {
		r := &rows[i]
		m := service.NewMessage(nil)
		m.SetStructuredMut(map[string]any{
			"aid": int64(r.aid), "bid": int64(r.bid), "abalance": int64(r.abalance), "filler": r.filler,
		})
		if tx == nil || tx.CommitLSN != r.commitLSN+shift {
			// Later runs' transactions are later ones: fresh xids too.
			tx = &msg.Tx{TopXID: r.xid + uint32(shift/pgbenchRowWAL), CommitLSN: r.commitLSN + shift, CommitTime: r.commitTime}
		}
		c := &changes[i]
		*c = msg.Change{Op: msg.OperationInsert, Rel: rel, LSN: r.lsn + shift, Tx: tx, DescVersion: pgbenchValidFrom, RecordIndex: -1}
		m.MetaSetMut(msg.KeyChange, c)
		c.AppendStrings(false, func(k, v string) { m.MetaSetMut(k, v) })
		msgs[i] = m
	}
	return msgs
}

// pgbenchDescriptor is pgbench_accounts as the descriptor log holds it.
func pgbenchDescriptor() desclog.Descriptor {
	int4 := func(num int16, name string) desclog.Column {
		return desclog.Column{Num: num, Name: name, TypeOid: 23, TypMod: -1, TypeName: "integer", TypeKind: 'b',
			Len: 4, Align: 'i', ByVal: true, Storage: 'p'}
	}
	aid := int4(1, "aid")
	aid.NotNull = true
	return desclog.Descriptor{
		Oid: pgbenchOid, DbOid: pgbenchDB, Rfn: wal.RelFileNode{SpcOid: 1663, DbOid: pgbenchDB, RelNum: pgbenchOid},
		NamespaceOid: 2200, Namespace: pgbenchSchema, Name: pgbenchTable,
		Kind: 'r', Persistence: 'p', ReplIdent: 'd',
		Columns: []desclog.Column{
			aid, int4(2, "bid"), int4(3, "abalance"),
			{Num: 4, Name: "filler", TypeOid: 1042, TypMod: pgbenchFillerLen + 4, TypeName: "character", TypeKind: 'b',
				Len: -1, Align: 'i', Storage: 'x'},
		},
		KeyAttnums: []int16{1}, IdentityIndexOid: pgbenchOid + 1,
	}
}

// pgbenchRig is a ClickHouse and a connected clickhouse_ddl output whose
// session knows pgbench_accounts.
type pgbenchRig struct {
	ch     *testrig.ClickHouse
	conn   clickhouse.ConnConfig
	out    *chOutput
	target clickhouse.Target // the output's table
	cols   []clickhouse.ColumnSpec
}

func newPgbenchRig(tb testing.TB, database string, more ...desclog.Descriptor) *pgbenchRig {
	tb.Helper()
	ch := testrig.StartClickHouse(tb)
	dir := tb.TempDir()
	log, err := desclog.Open(dir+"/desclog", desclog.Identity{PGMajor: 15, SystemID: 7300000000000000001, Timeline: 1,
		DbOid: pgbenchDB, SegmentSize: 16 << 20})
	if err != nil {
		tb.Fatalf("opening the descriptor log: %v", err)
	}
	tb.Cleanup(func() { log.Close() })
	if _, err := log.Seed(pgbenchValidFrom, pgbenchValidFrom, append([]desclog.Descriptor{pgbenchDescriptor()}, more...)); err != nil {
		tb.Fatalf("seeding the descriptor log: %v", err)
	}
	// (The change-log tests' table asks for a change log.)
	sc, err := newScope([]string{"*.*"}, nil, map[string]clickhouse.TableConfig{"public.events": {ChangeLog: true}})
	if err != nil {
		tb.Fatal(err)
	}
	r := &pgbenchRig{ch: ch, conn: clickhouse.ConnConfig{DSN: "clickhouse://default:@" + ch.NativeAddr() + "/default", Compression: "lz4"}}
	r.out = newOutput(settings{
		conn:          r.conn,
		database:      database,
		drop:          clickhouse.DropRetain,
		maxInFlight:   4,
		batchRows:     65536,
		batchBytes:    16 << 20,
		retry:         clickhouse.RetryPolicy{MaxAttempts: 5, Initial: 250 * time.Millisecond, Max: 10 * time.Second},
		insertTimeout: 30 * time.Second,
		stateDir:      statefile.StateDir(dir).Output(),
	}, sc, &fakeSession{log: log, stateDir: dir}, service.MockResources())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := r.out.Connect(ctx); err != nil {
		tb.Fatalf("connecting the output: %v", err)
	}
	tb.Cleanup(func() { r.out.Close(context.Background()) })
	a := r.out.store.Get(pgbenchOid)
	if a == nil {
		tb.Fatalf("the output agreed on no table for %s.%s after Connect", pgbenchSchema, pgbenchTable)
	}
	r.target = a.Target
	r.cols = newTableState(r.out.conn.Dialect(), a).Cols
	return r
}

// writeThroughOutput hands the rows to the output as walshadow_decode's
// messages, in WriteBatch calls of pgbenchTxRows messages. Each batch's
// messages are built by build (the benchmark builds them outside its
// timer) just before their WriteBatch, as the pipeline hands the output a
// batch the processor just made: the run's other batches are not alive
// meanwhile.
func writeThroughOutput(ctx context.Context, out *chOutput, rows []pgbenchRow, shift wal.LSN, build func(func())) error {
	for start := 0; start < len(rows); start += pgbenchTxRows {
		var batch service.MessageBatch
		build(func() { batch = pgbenchMessages(rows[start:min(start+pgbenchTxRows, len(rows))], shift) })
		if err := out.WriteBatch(ctx, batch); err != nil {
			return fmt.Errorf("writing rows %d..%d through the output: %w", start, start+len(batch)-1, err)
		}
	}
	return nil
}

// plainInserter writes the same rows with clickhouse-go alone: one
// PrepareBatch, an Append per row and a Send per pgbenchTxRows rows, the
// values already of the columns' Go types.
type plainInserter struct {
	conn       *clickhouse.Conn
	insert     string
	dateTime64 bool // the commit time column is _commit_ts, else _commit_ts_us
}

func newPlainInserter(ctx context.Context, r *pgbenchRig, target clickhouse.Target) (*plainInserter, error) {
	conn, err := clickhouse.Open(ctx, r.conn)
	if err != nil {
		return nil, fmt.Errorf("connecting clickhouse-go: %w", err)
	}
	names := make([]string, len(r.cols))
	for i, c := range r.cols {
		names[i] = clickhouse.QuoteIdent(c.Name)
	}
	return &plainInserter{conn: conn, insert: "INSERT INTO " + clickhouse.QuoteQualified(target) + " (" + strings.Join(names, ", ") + ")",
		dateTime64: r.cols[len(r.cols)-2].Name == clickhouse.ColCommitTS}, nil
}

func (p *plainInserter) write(ctx context.Context, rows []pgbenchRow, untimed func(func())) error {
	for start := 0; start < len(rows); start += pgbenchTxRows {
		untimed(func() {}) // as the output's benchmark builds each batch
		end := min(start+pgbenchTxRows, len(rows))
		batch, err := p.conn.Native().PrepareBatch(ctx, p.insert)
		if err != nil {
			return fmt.Errorf("%s: %w", p.insert, err)
		}
		for i := start; i < end; i++ {
			r := &rows[i]
			var commit any = uint64(r.commitTime.UnixMicro())
			if p.dateTime64 {
				commit = r.commitTime
			}
			if err := batch.Append(r.aid, r.bid, r.abalance, r.filler, uint64(r.lsn), r.xid, commit, uint8(0)); err != nil {
				batch.Abort()
				return fmt.Errorf("%s: row aid %d: %w", p.insert, r.aid, err)
			}
		}
		if err := batch.Send(); err != nil {
			return fmt.Errorf("%s: sending rows %d..%d: %w", p.insert, start, end-1, err)
		}
	}
	return nil
}

// createPlainTable creates a table of the output table's columns and
// engine for the clickhouse-go baseline.
func (r *pgbenchRig) createPlainTable(tb testing.TB) clickhouse.Target {
	tb.Helper()
	plain := clickhouse.Target{Database: r.target.Database, Table: "plain_pgbench_accounts"}
	r.ch.HTTPQuery(tb, fmt.Sprintf("CREATE TABLE %s AS %s", clickhouse.QuoteQualified(plain), clickhouse.QuoteQualified(r.target)))
	return plain
}

// finalCount is the table's row count after deduplication.
func (r *pgbenchRig) finalCount(tb testing.TB, t clickhouse.Target) int {
	tb.Helper()
	out := r.ch.HTTPQuery(tb, "SELECT count() FROM "+clickhouse.QuoteQualified(t)+" FINAL")
	n, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		tb.Fatalf("count() of %s: %q: %v", clickhouse.QuoteQualified(t), out, err)
	}
	return n
}

// benchRows is the rows of one run: WALSHADOW_BENCH_ROWS, else 200,000.
func benchRows() int {
	if v, err := strconv.Atoi(os.Getenv("WALSHADOW_BENCH_ROWS")); err == nil && v > 0 {
		return v
	}
	return 200_000
}

// BenchmarkOutputPgbenchAccounts measures writing a pgbench_accounts-shaped
// table into ClickHouse two ways, alternately in each iteration (which
// goes first alternates too), so that neither is favoured by drift in the
// machine or the server: `output` through the clickhouse_ddl output
// (WriteBatch of walshadow_decode's messages, 10,000 a batch), `plain` the
// same rows with clickhouse-go's PrepareBatch/Append/Send of the same
// batch size into a table of the same shape and engine. Each writes
// WALSHADOW_BENCH_ROWS rows (200,000 by default) per iteration into its
// emptied table and checks that ClickHouse holds every row. The output's
// messages for a batch are built just before its WriteBatch, outside what
// is measured, as the pipeline hands the output a batch the processor just
// made; before each batch, both paths collect garbage outside the
// measurement, so neither is charged the collection of the other's or of
// the message building. Metrics per path: rows/s (wall), cpu-µs/row (this
// process's CPU, getrusage: the client's cost, steadier than wall time on
// a machine whose cores ClickHouse shares) and allocs/row, B/row; and the
// ratios x-slower (plain's rows/s over the output's) and cpu-x-slower (the
// output's CPU per row over plain's), over all iterations.
func BenchmarkOutputPgbenchAccounts(b *testing.B) {
	n := benchRows()
	r := newPgbenchRig(b, "walshadow_bench")
	plainTable := r.createPlainTable(b)
	rows := pgbenchRows(n)
	ctx := context.Background()
	p, err := newPlainInserter(ctx, r, plainTable)
	if err != nil {
		b.Fatal(err)
	}
	defer p.conn.Close()

	// tally is one path's measurements over every iteration.
	type tally struct {
		wall, cpu           time.Duration
		mallocs, allocBytes uint64
	}
	var out, plain tally
	var ms runtime.MemStats
	// measure empties t, then runs write(untimed) into it, adding its wall
	// time, CPU and allocations to tl, less what write runs through
	// untimed.
	measure := func(tl *tally, t clickhouse.Target, write func(untimed func(func())) error) {
		r.ch.HTTPQuery(b, "TRUNCATE TABLE "+clickhouse.QuoteQualified(t))
		runtime.GC() // what an earlier run left is not this run's to collect
		untimed := func(f func()) {
			start, cpu0 := time.Now(), processCPU(b)
			runtime.ReadMemStats(&ms)
			m0, b0 := ms.Mallocs, ms.TotalAlloc
			f()
			runtime.GC()
			runtime.ReadMemStats(&ms)
			tl.mallocs -= ms.Mallocs - m0
			tl.allocBytes -= ms.TotalAlloc - b0
			tl.cpu -= processCPU(b) - cpu0
			tl.wall -= time.Since(start)
		}
		runtime.ReadMemStats(&ms)
		m0, b0 := ms.Mallocs, ms.TotalAlloc
		start, cpu0 := time.Now(), processCPU(b)
		if err := write(untimed); err != nil {
			b.Fatal(err)
		}
		tl.wall += time.Since(start)
		tl.cpu += processCPU(b) - cpu0
		runtime.ReadMemStats(&ms)
		tl.mallocs += ms.Mallocs - m0
		tl.allocBytes += ms.TotalAlloc - b0
		if got := r.finalCount(b, t); got != n {
			b.Fatalf("%s holds %d rows after writing %d", clickhouse.QuoteQualified(t), got, n)
		}
	}
	// Each iteration writes the rows as later transactions: the same ones
	// again would be a replay, which the output skips.
	writeOutput := func(run int) {
		shift := wal.LSN(run) * wal.LSN(n+1) * pgbenchRowWAL
		measure(&out, r.target, func(untimed func(func())) error {
			return writeThroughOutput(ctx, r.out, rows, shift, untimed)
		})
	}
	writePlain := func() {
		measure(&plain, plainTable, func(untimed func(func())) error { return p.write(ctx, rows, untimed) })
	}
	b.SetBytes(2 * int64(n) * pgbenchRowBytes)
	b.ResetTimer()
	for run := range b.N {
		if run%2 == 0 {
			writeOutput(run)
			writePlain()
		} else {
			writePlain()
			writeOutput(run)
		}
	}
	b.StopTimer()
	total := float64(n) * float64(b.N)
	for _, m := range []struct {
		name string
		tl   *tally
	}{{"output", &out}, {"plain", &plain}} {
		b.ReportMetric(total/m.tl.wall.Seconds(), m.name+"-rows/s")
		b.ReportMetric(float64(m.tl.cpu.Nanoseconds())/1e3/total, m.name+"-cpu-µs/row")
		b.ReportMetric(float64(m.tl.mallocs)/total, m.name+"-allocs/row")
		b.ReportMetric(float64(m.tl.allocBytes)/total, m.name+"-B/row")
	}
	wallRatio := out.wall.Seconds() / plain.wall.Seconds()
	cpuRatio := out.cpu.Seconds() / plain.cpu.Seconds()
	b.ReportMetric(wallRatio, "x-slower")
	b.ReportMetric(cpuRatio, "cpu-x-slower")
	b.Logf("%d rows, %d iterations: output %.0f rows/s and %.3f cpu-µs/row, clickhouse-go %.0f rows/s and %.3f cpu-µs/row: the output takes %.2fx the time and %.2fx the CPU",
		n, b.N, total/out.wall.Seconds(), out.cpu.Seconds()*1e6/total, total/plain.wall.Seconds(), plain.cpu.Seconds()*1e6/total, wallRatio, cpuRatio)
}

// TestOutputWritesPgbenchRows runs the benchmark's two paths with 5,000
// rows and checks what ClickHouse holds: every row once, the balances'
// sum, one row column by column, and the clickhouse-go baseline table equal
// to the output's (so the benchmark compares equal work).
func TestOutputWritesPgbenchRows(t *testing.T) {
	const n = 5000
	r := newPgbenchRig(t, "walshadow_bench")
	rows := pgbenchRows(n)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := writeThroughOutput(ctx, r.out, rows, 0, func(f func()) { f() }); err != nil {
		t.Fatal(err)
	}
	if got := r.finalCount(t, r.target); got != n {
		t.Fatalf("%s holds %d rows, want %d", clickhouse.QuoteQualified(r.target), got, n)
	}
	table := clickhouse.QuoteQualified(r.target)
	var wantSum int64
	for _, row := range rows {
		wantSum += int64(row.abalance)
	}
	if got := r.ch.HTTPQuery(t, "SELECT sum(abalance), sum(_is_deleted), uniqExact(aid) FROM "+table+" FINAL"); got != fmt.Sprintf("%d\t0\t%d", wantSum, n) {
		t.Errorf("sum(abalance), sum(_is_deleted), uniqExact(aid) of %s = %q, want %d, 0, %d", table, got, wantSum, n)
	}

	commitCol := r.cols[len(r.cols)-2].Name
	sample := rows[4321-1]
	wantCommit := strconv.FormatInt(sample.commitTime.UnixMicro(), 10)
	if commitCol == clickhouse.ColCommitTS {
		wantCommit = sample.commitTime.Format("2006-01-02 15:04:05.000000")
	}
	want := strings.Join([]string{"4321", strconv.Itoa(int(sample.bid)), strconv.Itoa(int(sample.abalance)), sample.filler,
		strconv.FormatUint(uint64(sample.lsn), 10), strconv.FormatUint(uint64(sample.xid), 10), wantCommit, "0"}, "\t")
	got := r.ch.HTTPQuery(t, fmt.Sprintf("SELECT aid, bid, abalance, filler, _lsn, _xid, %s, _is_deleted FROM %s FINAL WHERE aid = 4321",
		clickhouse.QuoteIdent(commitCol), table))
	if got != want {
		t.Errorf("row aid 4321 of %s:\n got %q\nwant %q", table, got, want)
	}

	plain := r.createPlainTable(t)
	p, err := newPlainInserter(ctx, r, plain)
	if err != nil {
		t.Fatal(err)
	}
	defer p.conn.Close()
	if err := p.write(ctx, rows, func(f func()) { f() }); err != nil {
		t.Fatal(err)
	}
	digest := func(tbl clickhouse.Target) string {
		return r.ch.HTTPQuery(t, fmt.Sprintf("SELECT count(), sum(cityHash64(aid, bid, abalance, filler, _lsn, _xid, %s, _is_deleted)) FROM %s FINAL",
			clickhouse.QuoteIdent(commitCol), clickhouse.QuoteQualified(tbl)))
	}
	if a, b := digest(r.target), digest(plain); a != b || !strings.HasPrefix(a, strconv.Itoa(n)+"\t") {
		t.Errorf("count and row hash: output table %q, clickhouse-go table %q; want equal, of %d rows", a, b, n)
	}
}

// processCPU is this process's own user and system CPU time so far, to
// the microsecond (getrusage: /proc's clock ticks are 10 ms, too coarse
// for the many short windows the benchmark leaves out).
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
