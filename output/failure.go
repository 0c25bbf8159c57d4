package output

// Per-table failure. A change one table cannot take — a value its
// ClickHouse column refuses, a shape change no ALTER can follow, a decode
// failure the processor reports for that relation, an unchanged TOAST
// value found nowhere — never stops the other tables: that table is
// failed (logged once, with the position and the reason), the change and
// the table's pending rows are dropped, and with on_error reload (the
// default) the table is reloaded at once by the initial-load machinery: a
// new snapshot that sees the failed change, the stream's later changes
// into the delta table, one publish. Its agreement moves to the delta
// table in the same step, so the batch goes on and the resume floor keeps
// moving for every table. on_error stop fails the batch instead, as
// every error did before: the session stops and retries from its resume
// point.
//
// What is local to one table is decided by the error, not by where it
// happened (tableLocal): ClickHouse refusing a statement or a block of one
// table, walshadow's own conversions and lookups are; a connection that
// failed, a timeout, ClickHouse out of memory or disk or denying access,
// the output's own state and anything marked errGlobal concern every
// table, and fail the batch as before.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	clickhousego "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/load"
	"github.com/walshadow/walshadow/internal/wal"
)

// OnError is what a table that cannot take a change does.
type OnError string

const (
	OnErrorReload OnError = "reload" // fail the table, reload it; the others go on
	OnErrorStop   OnError = "stop"   // fail the batch: the session stops at the change
)

const (
	fieldOnError  = "on_error"
	fieldTOnError = "on_error"
)

func onErrorField() *service.ConfigField {
	return service.NewStringEnumField(fieldOnError, string(OnErrorReload), string(OnErrorStop)).
		Description("What a table that cannot take a change does (a value ClickHouse refuses, a column type change ClickHouse cannot follow exactly, a change the decoder could not read for that table): `reload` marks that table failed, drops the change and reloads the table with a fresh snapshot (the initial load's copy, or its configured mode) while every other table goes on; `stop` stops the whole output at the change, to be retried from the session's resume point. `tables.<name>.on_error` overrides it per table.").
		Default(string(OnErrorReload))
}

// reloadNeeded: a change no statement follows exactly (a column type
// change ClickHouse cannot convert exactly): the table is reloaded under
// its new shape. Not a failure: on_error does not apply.
type reloadNeeded struct{ cause error }

func (e *reloadNeeded) Error() string {
	return e.cause.Error() + ": reloading the table under its new shape"
}
func (e *reloadNeeded) Unwrap() error { return e.cause }

// errGlobal marks errors that concern every table (the output's own
// state, the session's descriptor log): they fail the batch.
var errGlobal = errors.New("walshadow output")

// globalf is an error that fails the batch whatever its table.
func globalf(format string, args ...any) error {
	return fmt.Errorf("%w: %w", errGlobal, fmt.Errorf(format, args...))
}

// globalServerCodes are ClickHouse exception codes that say the server or
// the account, not one table, is in trouble.
var globalServerCodes = map[int32]bool{
	164: true, // READONLY
	192: true, // UNKNOWN_USER
	194: true, // REQUIRED_PASSWORD
	236: true, // ABORTED
	241: true, // MEMORY_LIMIT_EXCEEDED
	243: true, // NOT_ENOUGH_SPACE
	291: true, // DATABASE_ACCESS_DENIED
	497: true, // ACCESS_DENIED
	516: true, // AUTHENTICATION_FAILED
}

// tableLocal reports whether err concerns only the table it arose for.
func tableLocal(err error) bool {
	if err == nil || errors.Is(err, errGlobal) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, service.ErrNotConnected) || clickhouse.IsRetryable(err) {
		return false
	}
	var exception *clickhousego.Exception
	if errors.As(err, &exception) {
		if exception.Code == 241 && strings.Contains(exception.Message, "(for query)") {
			// The one query's limit (a block of a very wide table): that
			// table's; the server's total limit concerns every table.
			return true
		}
		return !globalServerCodes[exception.Code]
	}
	return true
}

// onErrorFor is the configured on_error of relation schema.table.
func (o *chOutput) onErrorFor(schema, table string) OnError {
	if v, ok := o.s.tableOnError[qualified(schema, table)]; ok {
		return v
	}
	return o.s.onError
}

// contain decides what an error met while applying a change of relation
// oid at lsn does: a local one fails that table (nil: the batch goes on),
// anything else is returned and fails the batch.
func (o *chOutput) contain(ctx context.Context, oid uint32, lsn wal.LSN, err error) error {
	if !tableLocal(err) || oid == 0 {
		return err
	}
	if o.failedInBatch[oid] {
		return nil // failed already in this batch: its reload holds this change too
	}
	if o.failedInBatch == nil {
		o.failedInBatch = map[uint32]bool{}
	}
	o.failedInBatch[oid] = true
	return o.failTable(ctx, oid, lsn, err)
}

// failTable fails relation oid at lsn for err and, per on_error, reloads
// it or returns err (stop). Its pending rows and the failed change are
// dropped: the reload's snapshot sees them (they committed before it is
// taken).
func (o *chOutput) failTable(ctx context.Context, oid uint32, lsn wal.LSN, cause error) error {
	log := o.sess.DescLog()
	if log == nil {
		return globalf("the session's descriptor log is not open")
	}
	l := log.DescriptorByOidInDBAt(log.Identity().DbOid, oid, lsn)
	if l.Result != desclog.Present || l.Desc == nil {
		// No shape at the change (the processor could not prove one): the
		// reload is under the newest.
		l = log.DescriptorByOidInDBAt(log.Identity().DbOid, oid, max(log.LastCapturedAt(), log.CoveredThrough(), lsn))
	}
	prev := o.store.Get(oid)
	d := l.Desc
	if l.Result != desclog.Present || d == nil {
		if prev == nil || prev.Dropped || prev.Left {
			return nil // not a table this output follows
		}
		return globalf("relation %s.%s (oid %d) failed at %s (%v) and has no shape in the descriptor log to reload it under", prev.Schema, prev.Table, oid, lsn, cause)
	}
	if !o.scope.in(d.Namespace, d.Name) || !replicable(d) {
		return nil // not followed: nothing of it is written
	}
	name := qualified(d.Namespace, d.Name)
	var rn *reloadNeeded
	reshape := errors.As(cause, &rn)
	reason := fmt.Sprintf("failed at %s: %v", lsn, cause)
	if reshape {
		reason = fmt.Sprintf("changed at %s: %v", lsn, rn)
	} else {
		o.m.tableFailures.Incr(1, name)
	}
	if !reshape && o.onErrorFor(d.Namespace, d.Name) == OnErrorStop {
		o.states.set(name, stateFailed)
		return fmt.Errorf("%s %s (%s.%s.%s is %s)", name, reason, FieldTables, name, fieldTOnError, OnErrorStop)
	}
	widened := false
	if !reshape {
		if col, ok := o.widenFor(d, prev, cause); ok {
			reason += fmt.Sprintf(" (its reload maps column %q to String, PostgreSQL's text form, which holds the value)", col)
			widened = true
		}
	}
	delete(o.tables, oid) // its pending rows: in the reload
	class := reloadClass(cause)
	if o.loads.Loading(oid) {
		// Its load in progress starts over with a snapshot that sees the
		// failed change, and a new delta table: all the old one holds
		// committed before that snapshot, so the publish would discard it.
		// The same failure after the load started over (a streamed change
		// failing into its delta table the same way, say) parks it.
		wasParked := o.parkedNow(oid)
		e, _, err := o.loads.Ledger().Update(oid, func(e *load.Entry) bool {
			e.LastError = reason
			if reshape || e.Parked != nil {
				return true
			}
			e.Streak = e.Streak.Next(load.Failure{Signature: load.Signature(cause)}, e.Attempt > e.Streak.Attempt)
			e.Streak.Attempt = e.Attempt
			if e.Streak.Parks() && !widened {
				p := o.parkingFor(oid, d.Namespace, d.Name, cause)
				p.Since, p.Reason, p.At, p.Count = time.Now().UTC(), reason, lsn, e.Streak.Count
				e.Parked = &p
			}
			return true
		})
		if err != nil {
			return globalf("recording the failure of %s: %w", name, err)
		}
		parkNow := !reshape && e.Parked != nil && !wasParked
		switch {
		case reshape:
			o.log.Infof("%s %s; its initial load in progress starts over under the new shape", name, reason)
		case parkNow:
		case wasParked:
			o.log.Infof("%s %s while it is parked", name, reason)
		default:
			o.log.Errorf("%s %s; its initial load in progress starts over and repairs it", name, reason)
		}
		o.loads.InvalidateFor(oid, class)
		if delta, ok := o.loads.DeltaTarget(oid); ok && prev != nil && prev.Target == delta {
			if err := o.execAll(ctx, []string{clickhouse.DropTable(delta)}); err != nil {
				return fmt.Errorf("%s %s, and dropping its delta table failed: %w", name, reason, err)
			}
			if err := o.store.Delete(oid); err != nil {
				return globalf("%w", err)
			}
			if err := o.agree(ctx, d, l.ValidFrom, "reload after "+reason); err != nil {
				return fmt.Errorf("%s %s, and agreeing on its new delta table failed: %w", name, reason, err)
			}
		}
		if parkNow {
			o.noteParked(e)
		}
		return nil
	}
	if o.loads.Running(oid) {
		// An abandoned load of it is still stopping: its goroutine would
		// discard the new one's ledger entry.
		return globalf("%s %s while its earlier initial load is still stopping: retrying", name, reason)
	}
	rp := reloadPlan{reason: reason, failedAt: lsn, class: class}
	if reshape {
		rp.failedAt = 0 // not a failure: the shape changed
		o.log.Infof("%s %s", name, reason)
	} else {
		// The same failure at the same change after the reload the last
		// one started parks the table instead of reloading it again.
		old, reloaded := o.loads.Ledger().Get(oid)
		rp.streak = old.Streak.Next(load.Failure{Signature: load.Signature(cause), At: lsn}, reloaded)
		rp.streak.Attempt = 0 // (the new load's)
		if rp.streak.Parks() && !widened {
			p := o.parkingFor(oid, d.Namespace, d.Name, cause)
			p.Since, p.Reason, p.At, p.Count = time.Now().UTC(), reason, lsn, rp.streak.Count
			rp.park = &p
		} else {
			o.log.Errorf("%s %s; its changes are not written until it is reloaded, which starts now (set %s.%s.%s: stop to stop at such a change instead)",
				name, reason, FieldTables, name, fieldTOnError)
			o.states.set(name, stateFailed)
		}
	}
	return o.startReload(ctx, d, l.ValidFrom, prev, rp)
}

// reloadPlan is why and how a followed table is reloaded.
type reloadPlan struct {
	reason   string
	failedAt wal.LSN // the change it failed at (0: it did not fail)
	class    string  // load.ReloadReasons
	streak   load.Streak
	// park: the reload is recorded but parked, not started (the same
	// failure came again after the last reload).
	park *load.Parking
}

// startReload records and starts the reload of relation d (its shape
// valid from validFrom, prev its agreement so far): its load in the
// ledger, its agreement on the load's delta table, then the load; o.mu
// held.
func (o *chOutput) startReload(ctx context.Context, d *desclog.Descriptor, validFrom wal.LSN, prev *clickhouse.Agreed, rp reloadPlan) error {
	oid, name := d.Oid, qualified(d.Namespace, d.Name)
	planned, ok, err := o.planReload(d, prev, rp.reason, rp.failedAt)
	if err != nil {
		return globalf("planning the reload of %s: %w", name, err)
	}
	if ok && rp.streak.Count > 0 {
		if planned, _, err = o.loads.Ledger().Update(oid, func(e *load.Entry) bool { e.Streak = rp.streak; return true }); err != nil {
			return globalf("recording the failure of %s: %w", name, err)
		}
	}
	if err := o.agree(ctx, d, validFrom, "reload after "+rp.reason); err != nil {
		if !tableLocal(err) {
			if ok && rp.park == nil {
				// The load stays planned, and the retried batch starts it
				// when its rows agree on the delta table (table()), which
				// knows not why: counted here.
				o.loads.CountReload(rp.class)
			}
			return err
		}
		// Not even a fresh table can be agreed on: nothing of it is
		// written until its shape changes or the configuration does.
		if e, ok := o.loads.Ledger().Get(oid); ok {
			if derr := o.loads.Discard(ctx, e); derr != nil {
				return globalf("%w", derr)
			}
		}
		if prev != nil && o.store.Get(oid) == nil {
			// Its ClickHouse table stays this relation's (a DROP of it
			// applies the drop_strategy, a new relation of its name
			// moves it aside), not a table nobody knows.
			if perr := o.store.Put(prev); perr != nil {
				return globalf("%w", perr)
			}
		}
		o.markBroken(d, err)
		return nil
	}
	o.loads.Invalidate(oid)
	if !ok {
		return nil
	}
	if rp.park != nil {
		// Parked under the agreement just made.
		p := *rp.park
		p.Under = o.conditions(oid, d.Namespace, d.Name)
		e, _, err := o.loads.Ledger().Update(oid, func(e *load.Entry) bool { e.Parked = &p; return true })
		if err != nil {
			return globalf("parking %s: %w", name, err)
		}
		o.noteParked(e)
		return nil
	}
	o.loads.CountReload(rp.class)
	o.states.set(name, stateLoading)
	o.loads.Launch(planned)
	return nil
}

// markBroken stops writing relation d, which no table can be agreed on
// for: logged once; a schema event of it, or a restart, tries again.
func (o *chOutput) markBroken(d *desclog.Descriptor, err error) {
	name := qualified(d.Namespace, d.Name)
	if o.broken == nil {
		o.broken = map[uint32]string{}
	}
	o.broken[d.Oid] = err.Error()
	o.states.set(name, stateFailed)
	o.log.Errorf("%s cannot be replicated and is not written until its shape or the configuration changes: %v", name, err)
}

// planReload records the load that repairs failed relation d (prev its
// agreement, nil if none was made yet): the configured load mode, copy
// where that is none (a failed table is never left with a gap).
func (o *chOutput) planReload(d *desclog.Descriptor, prev *clickhouse.Agreed, reason string, at wal.LSN) (load.Entry, bool, error) {
	mode := o.loadMode(d)
	if mode == load.ModeNone && d.Persistence != 'u' {
		mode = load.ModeCopy
	}
	return o.planLoadMode(d, prev, mode, reason, at)
}

// decodeFailure is the processor's report that it could not decode a
// change of one relation.
type decodeFailure struct{ msg string }

func (e *decodeFailure) Error() string { return e.msg }

// applyFail takes the processor's report that it could not decode a
// change of one relation (its later changes in the transaction are not
// in the batch): the relation fails like any table that cannot take a
// change.
func (o *chOutput) applyFail(ctx context.Context, c change) error {
	reason := c.meta.Error
	if reason == "" {
		reason = "the processor could not decode it"
	}
	return o.contain(ctx, c.oid, c.lsn, &decodeFailure{reason})
}
