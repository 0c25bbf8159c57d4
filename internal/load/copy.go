package load

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/decode"
	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/load/copybin"
	"github.com/walshadow/walshadow/internal/wal"
)

// connectSource opens a plain connection to the source with the settings
// the shadow's bridge renders values under.
func (l *Engine) connectSource(ctx context.Context) (*pgx.Conn, error) {
	dsn := l.src.SourceDSN()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("connecting to the source: %w", err)
	}
	set := []string{"SET application_name = '" + applicationName + "'"}
	for _, s := range copybin.SessionSettings {
		set = append(set, fmt.Sprintf("SET %s = '%s'", s.Name, strings.ReplaceAll(s.Value, "'", "''")))
	}
	for _, s := range set {
		if _, err := conn.Exec(ctx, s); err != nil {
			conn.Close(context.Background())
			return nil, fmt.Errorf("%s on the source: %w", s, err)
		}
	}
	return conn, nil
}

// coverage picks a load's S (see the package doc): L0 = the WAL insert position,
// then an xid of its own, then a wait until every transaction with an
// older xid has ended. It returns S = L0 - 1 and that xid.
func (l *Engine) coverage(ctx context.Context, conn *pgx.Conn, name string) (wal.LSN, uint64, error) {
	var l0 string
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&l0); err != nil {
		return 0, 0, fmt.Errorf("reading the source's WAL position: %w", err)
	}
	lsn, err := wal.ParseLSN(l0)
	if err != nil {
		return 0, 0, err
	}
	var n0 uint64
	tx, err := conn.Begin(ctx)
	if err != nil {
		return 0, 0, err
	}
	var n0Text string
	if err := tx.QueryRow(ctx, "SELECT pg_current_xact_id()::text").Scan(&n0Text); err != nil {
		_ = tx.Rollback(ctx)
		return 0, 0, fmt.Errorf("taking an xid on the source: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, 0, err
	}
	if n0, err = strconv.ParseUint(n0Text, 10, 64); err != nil {
		return 0, 0, fmt.Errorf("xid %q: %w", n0Text, err)
	}
	logged := time.Now()
	for {
		var ready bool
		if err := conn.QueryRow(ctx, "SELECT pg_snapshot_xmin(pg_current_snapshot()) > $1::text::xid8", n0Text).Scan(&ready); err != nil {
			return 0, 0, fmt.Errorf("waiting for older transactions: %w", err)
		}
		if ready {
			return lsn - 1, n0, nil
		}
		if time.Since(logged) > 10*time.Second {
			logged = time.Now()
			l.log.Warnf("initial load of %s waits for transactions begun before it to end: %s", name, oldestRunning(ctx, conn))
		}
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// oldestRunning describes the oldest open transaction of the source.
func oldestRunning(ctx context.Context, conn *pgx.Conn) string {
	var pid int
	var xid, state, age string
	err := conn.QueryRow(ctx, `SELECT pid, backend_xid::text, coalesce(state, ''), coalesce((now() - xact_start)::text, '')
		FROM pg_stat_activity WHERE backend_xid IS NOT NULL ORDER BY age(backend_xid) DESC LIMIT 1`).Scan(&pid, &xid, &state, &age)
	if err == nil {
		return fmt.Sprintf("the oldest is xid %s (pid %d, %s, open for %s)", xid, pid, state, age)
	}
	var gid string
	if err := conn.QueryRow(ctx, `SELECT gid || ' (xid ' || transaction::text || ', prepared ' || prepared::text || ')' FROM pg_prepared_xacts ORDER BY age(transaction) DESC LIMIT 1`).Scan(&gid); err == nil {
		return "the oldest is the prepared transaction " + gid
	}
	return "no open transaction seen yet"
}

// sourceRelation is a relation as the load's snapshot sees it.
type sourceRelation struct {
	schema, name string
	pages        uint32
	tuples       int64
	bytes        int64
	filenode     uint32 // its heap generation in the snapshot
}

// relationInSnapshot reads the relation's name, size and columns in the
// snapshot and checks the columns against the agreed shape: a load reads
// the shape the target has, or none.
func relationInSnapshot(ctx context.Context, tx pgx.Tx, a *clickhouse.Agreed) (sourceRelation, error) {
	var rel sourceRelation
	var pages int64
	var tuples float64
	var filenode int64
	err := tx.QueryRow(ctx, `SELECT n.nspname, c.relname, c.relpages::bigint, c.reltuples::float8, pg_relation_size(c.oid), c.relfilenode::bigint
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1`, a.Oid).Scan(&rel.schema, &rel.name, &pages, &tuples, &rel.bytes, &filenode)
	rel.filenode = uint32(filenode)
	if errors.Is(err, pgx.ErrNoRows) {
		return rel, fmt.Errorf("%w: relation %d is not in the source (its drop has not been streamed yet)", errReload, a.Oid)
	}
	if err != nil {
		return rel, fmt.Errorf("reading relation %d: %w", a.Oid, err)
	}
	rel.pages = uint32(max(pages, rel.bytes/8192))
	rel.tuples = max(int64(tuples), 0)
	rows, err := tx.Query(ctx, `SELECT attnum, attname, atttypid FROM pg_attribute WHERE attrelid = $1 AND attnum > 0 AND NOT attisdropped ORDER BY attnum`, a.Oid)
	if err != nil {
		return rel, fmt.Errorf("reading the columns of %s.%s: %w", rel.schema, rel.name, err)
	}
	defer rows.Close()
	var live []desclog.Column
	for rows.Next() {
		var c desclog.Column
		if err := rows.Scan(&c.Num, &c.Name, &c.TypeOid); err != nil {
			return rel, err
		}
		live = append(live, c)
	}
	if err := rows.Err(); err != nil {
		return rel, err
	}
	var agreed []desclog.Column
	for _, c := range a.Shape {
		if !c.Dropped {
			agreed = append(agreed, c)
		}
	}
	same := len(live) == len(agreed)
	for i := 0; same && i < len(live); i++ {
		same = live[i].Num == agreed[i].Num && live[i].Name == agreed[i].Name && live[i].TypeOid == agreed[i].TypeOid
	}
	if !same {
		return rel, fmt.Errorf("%w: the columns of %s.%s on the source differ from the agreed shape (version %s): the change is still to be streamed", errReload, rel.schema, rel.name, a.ValidFrom)
	}
	return rel, nil
}

// loadColumns are the source columns a load reads: the agreed mapped
// columns, in ClickHouse column order.
func loadColumns(a *clickhouse.Agreed) ([]*desclog.Column, error) {
	byNum := map[int16]*desclog.Column{}
	for i := range a.Shape {
		byNum[a.Shape[i].Num] = &a.Shape[i]
	}
	cols := make([]*desclog.Column, len(a.Columns))
	for i, mc := range a.Columns {
		c := byNum[mc.Attnum]
		if c == nil {
			return nil, fmt.Errorf("%s.%s: mapped column %s (attnum %d) is not in the agreed shape", a.Schema, a.Table, mc.Spec.Name, mc.Attnum)
		}
		cols[i] = c
	}
	return cols, nil
}

// loadCopy loads one table with COPY in one snapshot, its ranges in
// parallel, then publishes it.
func (l *Engine) loadCopy(ctx context.Context, oid uint32) error {
	e, ok := l.ledger.Get(oid)
	if !ok {
		return nil
	}
	gen := l.generation(oid)
	a := l.store.Get(oid)
	if a == nil || a.Dropped {
		return fmt.Errorf("%w: no agreement", errReload)
	}
	a = a.Clone()
	name := describeLoad(e)
	if err := l.prepareStaging(ctx, &e, a); err != nil {
		return err
	}
	coord, err := l.sources.get(ctx)
	if err != nil {
		return err
	}
	defer l.sources.put(coord)
	s, n0, err := l.coverage(ctx, coord, name)
	if err != nil {
		return err
	}
	tx, err := coord.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	var snapID, snapText, seenText string
	if err := tx.QueryRow(ctx, "SELECT pg_export_snapshot(), pg_current_snapshot()::text, pg_current_wal_insert_lsn()::text").Scan(&snapID, &snapText, &seenText); err != nil {
		return fmt.Errorf("exporting the load's snapshot: %w", err)
	}
	snap, err := parsePGSnapshot(snapText)
	if err != nil {
		return err
	}
	// Every transaction the snapshot sees committed before this position.
	if snap.seenBy, err = wal.ParseLSN(seenText); err != nil {
		return err
	}
	if snap.xmin <= n0 {
		return fmt.Errorf("the load's snapshot %s still sees xid %d running (want every xid up to it ended)", snapText, n0)
	}
	rel, err := relationInSnapshot(ctx, tx, a)
	if err != nil {
		return err
	}
	cols, err := loadColumns(a)
	if err != nil {
		return err
	}
	// A physical table's rows are keyed by the snapshot's heap generation.
	a.Filenode = rel.filenode
	e.Coverage, e.Snapshot, e.SeenBy = s, snapText, snap.seenBy
	if err := l.ledger.putLoad(e); err != nil {
		return err
	}
	l.setFilter(oid, snap)
	ranges := SplitBlocks(rel.pages, l.cfg.SplitBytes)
	l.log.Infof("initial load of %s: copying about %d rows (%d MB) in %d range(s), snapshot %s, rows tagged _lsn %s", name, rel.tuples, rel.bytes>>20, len(ranges), snapText, s)
	rl := clickhouse.NewRowLayout(l.dst.Conn().Dialect(), a)
	ts := &rl
	// COPY's bytes are not the heap's (no tuple headers, no free space):
	// the percentage goes by rows when the statistics know them.
	estBytes := rel.bytes
	if rel.tuples > 0 {
		estBytes = 0
	}
	progress := NewProgress(rel.tuples, estBytes, time.Now())
	var seq atomic.Uint32
	var rows, bytes atomic.Int64
	running := e
	stop := l.progressLogger(name, progress, func() {
		running.Rows, running.Bytes = rows.Load(), bytes.Load()
		if err := l.ledger.putLoad(running); err != nil {
			l.log.Warnf("initial load of %s: recording progress: %v", name, err)
		}
	})
	err = l.copyRanges(ctx, ranges, func(ctx context.Context, r CtidRange) error {
		return l.copyRange(ctx, snapID, rel, r, cols, ts, clickhouse.Target{Database: e.Database, Table: e.Staging}, s, &seq, func(n, b int64) {
			rows.Add(n)
			bytes.Add(b)
			progress.Add(n, b)
			l.m.rows.Incr(n, name)
			l.m.bytes.Incr(b, name)
		})
	})
	progress.Done(time.Now())
	stop()
	if err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("ending the load's snapshot: %w", err)
	}
	e.Rows, e.Bytes = rows.Load(), bytes.Load()
	return l.publish(ctx, &e, a, gen, snap)
}

// copyRanges runs fn for every range, up to workers streams at once
// (shared by all loads); the first error cancels the rest.
func (l *Engine) copyRanges(ctx context.Context, ranges []CtidRange, fn func(context.Context, CtidRange) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	fail := func(err error) {
		once.Do(func() { first = err; cancel() })
	}
	for _, r := range ranges {
		select {
		case l.streams <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-l.streams }()
			if err := fn(ctx, r); err != nil {
				fail(err)
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}

// copyRange streams one ctid range of the relation in the exported
// snapshot into the staging table.
func (l *Engine) copyRange(ctx context.Context, snapID string, rel sourceRelation, r CtidRange, cols []*desclog.Column,
	ts *clickhouse.RowLayout, staging clickhouse.Target, s wal.LSN, seq *atomic.Uint32, counted func(rows, bytes int64)) error {
	conn, err := l.sources.get(ctx)
	if err != nil {
		return err
	}
	defer l.sources.put(conn)
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx, "SET TRANSACTION SNAPSHOT '"+strings.ReplaceAll(snapID, "'", "''")+"'"); err != nil {
		return fmt.Errorf("importing the load's snapshot: %w", err)
	}
	exprs := copybin.SelectExprs(cols)
	if ts.Layout == clickhouse.LayoutPhysical {
		// Each row's TID: its block and line pointer.
		exprs = append(exprs, "((ctid::text::point)[0])::int8", "((ctid::text::point)[1])::int8")
		cols = append(cols[:len(cols):len(cols)], tidColumns...)
	}
	sql := fmt.Sprintf("COPY (SELECT %s FROM ONLY %s.%s", strings.Join(exprs, ", "), copybin.QuoteIdent(rel.schema), copybin.QuoteIdent(rel.name))
	if w := r.Where(); w != "" {
		sql += " WHERE " + w
	}
	sql += ") TO STDOUT (FORMAT binary)"
	pr, pw := io.Pipe()
	copyDone := make(chan error, 1)
	go func() {
		_, err := conn.PgConn().CopyTo(ctx, pw, sql)
		pw.CloseWithError(err)
		copyDone <- err
	}()
	err = l.readCopy(ctx, pr, rel, cols, ts, staging, s, seq, counted)
	pr.CloseWithError(errors.New("copy reader stopped"))
	cerr := <-copyDone
	if err != nil {
		return err
	}
	if cerr != nil {
		return fmt.Errorf("COPY of %s.%s (%s): %w", rel.schema, rel.name, rangeText(r), cerr)
	}
	return tx.Commit(ctx)
}

func rangeText(r CtidRange) string {
	if r.To == 0 {
		return fmt.Sprintf("blocks %d..end", r.From)
	}
	return fmt.Sprintf("blocks %d..%d", r.From, r.To-1)
}

// tidColumns stand for the two int8 values of a physical table's ctid that
// a copy selects after the mapped columns.
var tidColumns = []*desclog.Column{
	{Num: -1, Name: "ctid block", TypeOid: decode.OidInt8, TypeName: "bigint", TypeKind: 'b', Len: 8, ByVal: true, Align: 'd', NotNull: true},
	{Num: -1, Name: "ctid offset", TypeOid: decode.OidInt8, TypeName: "bigint", TypeKind: 'b', Len: 8, ByVal: true, Align: 'd', NotNull: true},
}

// readCopy decodes a COPY stream into staging rows.
func (l *Engine) readCopy(ctx context.Context, src io.Reader, rel sourceRelation, cols []*desclog.Column,
	ts *clickhouse.RowLayout, staging clickhouse.Target, s wal.LSN, seq *atomic.Uint32, counted func(rows, bytes int64)) error {
	rd, err := copybin.NewReader(src, cols)
	if err != nil {
		return fmt.Errorf("COPY of %s.%s: %w", rel.schema, rel.name, err)
	}
	ins := &stagingInserter{l: l, ts: ts, target: staging}
	defer ins.abandon()
	vals := make([]any, len(cols))
	var lastBytes, pendingRows int64
	account := func() error {
		b := rd.Bytes() - lastBytes
		lastBytes = rd.Bytes()
		counted(pendingRows, b)
		pendingRows = 0
		return l.limiter.Wait(ctx, int(b))
	}
	for {
		err := rd.Next(vals)
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("COPY of %s.%s: %w", rel.schema, rel.name, err)
		}
		row := make([]any, len(ts.Cols))
		size := 24
		mapped := vals
		if ts.Layout == clickhouse.LayoutPhysical {
			mapped = vals[:len(vals)-2]
			block, _ := vals[len(vals)-2].(int64)
			off, _ := vals[len(vals)-1].(int64)
			if block < 0 || block > math.MaxUint32 || off <= 0 || off > math.MaxUint16 {
				return fmt.Errorf("initial load of %s.%s, row %d: ctid (%v, %v) is not a tuple identity", rel.schema, rel.name, rd.Rows(), vals[len(vals)-2], vals[len(vals)-1])
			}
			ts.SetTID(row, rel.filenode, uint32(block), uint16(off))
		}
		for i, v := range mapped {
			cv, err := clickhouse.ConvertValue(ts.Cols[i], v)
			if err != nil {
				return fmt.Errorf("initial load of %s.%s, row %d: column %s: %w", rel.schema, rel.name, rd.Rows(), ts.Cols[i].Name, err)
			}
			row[i] = cv
			size += clickhouse.ValueSize(cv)
		}
		loadedRowMeta(ts, row, s, seq.Add(1))
		if err := ins.add(ctx, row, size); err != nil {
			return err
		}
		pendingRows++
		if rd.Bytes()-lastBytes >= 1<<20 {
			if err := account(); err != nil {
				return err
			}
		}
	}
	if err := ins.flush(ctx); err != nil {
		return err
	}
	return account()
}
