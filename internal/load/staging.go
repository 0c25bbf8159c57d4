package load

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/wal"
)

// progressLogger logs a load's progress every few seconds until stop, and
// records it in the ledger through persist (nil: not recorded).
func (l *Engine) progressLogger(name string, p *Progress, persist func()) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(progressInterval * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				s := p.Snapshot(now)
				l.log.Infof("initial load of %s: %s", name, s)
				l.m.observe(name, s)
				if persist != nil {
					persist()
				}
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// loadedRowMeta fills a loaded row's synthetic columns: _lsn = S, _xid 0
// and commit time 0 (the row's last writer is not known), not deleted,
// and for a change log a sequence number unique within the load.
func loadedRowMeta(ts *clickhouse.RowLayout, row []any, s wal.LSN, seq uint32) {
	// (A physical table's row identity is the loaded tuple's: set by the
	// caller.)
	row[ts.LSNIdx] = uint64(s)
	row[ts.XIDIdx] = uint32(0)
	if ts.Cols[ts.TSIdx].Name == clickhouse.ColCommitTS {
		row[ts.TSIdx] = time.Unix(0, 0).UTC()
	} else {
		row[ts.TSIdx] = uint64(0)
	}
	row[ts.DelIdx] = uint8(0)
	if ts.SeqIdx >= 0 {
		row[ts.SeqIdx] = seq
	}
}

// stagingInserter batches one table's loaded rows into the staging table.
// One block is inserted while the next one fills: reading the source and
// ClickHouse's insert overlap.
type stagingInserter struct {
	l        *Engine
	ts       *clickhouse.RowLayout
	target   clickhouse.Target
	rows     [][]any
	bytes    int
	inflight chan error // the block being inserted, nil when none
}

func (si *stagingInserter) add(ctx context.Context, row []any, size int) error {
	si.rows = append(si.rows, row)
	si.bytes += size
	if len(si.rows) >= si.l.cfg.BatchRows || si.bytes >= si.l.cfg.BatchBytes {
		return si.send(ctx)
	}
	return nil
}

// send starts inserting the pending block once the previous one is in.
func (si *stagingInserter) send(ctx context.Context) error {
	if len(si.rows) == 0 {
		return nil
	}
	if err := si.wait(); err != nil {
		return err
	}
	rows := si.rows
	si.rows, si.bytes = make([][]any, 0, len(rows)), 0
	done := make(chan error, 1)
	si.inflight = done
	go func() { done <- si.insert(ctx, rows) }()
	return nil
}

// wait waits for the block being inserted.
func (si *stagingInserter) wait() error {
	if si.inflight == nil {
		return nil
	}
	err := <-si.inflight
	si.inflight = nil
	return err
}

// flush inserts every pending row and waits until all are in.
func (si *stagingInserter) flush(ctx context.Context) error {
	if err := si.send(ctx); err != nil {
		return err
	}
	return si.wait()
}

// abandon waits for an insert in flight (its context is ending).
func (si *stagingInserter) abandon() { _ = si.wait() }

func (si *stagingInserter) insert(ctx context.Context, rows [][]any) error {
	l := si.l
	err := l.dst.Conn().InsertRetrying(ctx, si.target, si.ts.Cols, rows, l.cfg.Retry, func(attempt int, err error) {
		l.dst.InsertRetried()
		si.l.log.Warnf("insert into %s failed (attempt %d), retrying: %v", clickhouse.QuoteQualified(si.target), attempt, err)
	})
	if err != nil {
		return fmt.Errorf("inserting loaded rows into %s: %w", clickhouse.QuoteQualified(si.target), err)
	}
	return nil
}
