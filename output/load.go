package output

import (
	"context"

	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/load"
)

// The initial loads run in internal/load's engine; this is what the
// output gives it: the session as its source, and loadDestination.

// newLoadEngine makes the engine of the loads ledger records (in Connect,
// once ClickHouse and the agreed shapes are open).
func (o *chOutput) newLoadEngine(ledger *load.Ledger) *load.Engine {
	cfg := load.Config{Workers: o.s.load.workers, SplitBytes: o.s.load.splitBytes, MaxRate: o.s.load.maxRate,
		BatchRows: o.s.batchRows, BatchBytes: o.s.batchBytes, Retry: o.s.retry, SpillDir: o.s.stateDir.LoadSpill()}
	return load.New(cfg, o.sess, loadDestination{o}, o.store, ledger, o.log, o.mgr.Metrics())
}

// loadDestination is the output as the engine's load.Destination.
type loadDestination struct{ o *chOutput }

var _ load.Destination = loadDestination{}

// Conn is nil while the output is not connected (a nil chConn is a nil
// load.Conn).
func (d loadDestination) Conn() load.Conn { return d.o.conn }

func (d loadDestination) WithLock(ctx context.Context, fn func() error) error {
	d.o.mu.Lock()
	defer d.o.mu.Unlock()
	if d.o.conn != nil {
		// A publish copies the delta table's rows: never while rows a
		// ClickHouse restart brought back of a truncated table show.
		if err := d.o.guardRestart(ctx, true); err != nil {
			return err
		}
	}
	return fn()
}

func (d loadDestination) Forget(oid uint32) { delete(d.o.tables, oid) }

func (d loadDestination) SetState(table string, loading bool) {
	if loading {
		d.o.states.set(table, stateLoading)
	} else {
		d.o.states.set(table, stateFollowing)
	}
}

func (d loadDestination) InsertRetried() { d.o.m.retries.Incr(1) }

func (d loadDestination) Widen(ctx context.Context, oid uint32, cause error) (bool, error) {
	return d.o.widenLoad(ctx, oid, cause)
}

func (d loadDestination) Local(err error) bool { return tableLocal(err) }

func (d loadDestination) ParkingFor(e load.Entry, cause error) load.Parking {
	return d.o.parkingFor(e.Oid, e.Schema, e.Table, cause)
}

func (d loadDestination) Parked(e load.Entry) {
	d.o.mu.Lock()
	defer d.o.mu.Unlock()
	d.o.noteParked(e)
}

var _ load.Agreements = (*clickhouse.Store)(nil)
