package output

// The output's side of the retry economy (internal/load/park.go): a table
// whose failure recurs identically after a reload is parked — logged once
// with the reason, the position and a remedy, listed by `walshadow
// status` under FAILED, walshadow_table_state{table,state="parked"} — and
// neither loaded nor written until something that could cure it changes:
// a schema event of it (applyEvent), its configuration or the ClickHouse
// server (compared at every start — a restart, or `run -w` reloading the
// pipeline — and the server also every minute while a table is parked),
// or the operator's request (`walshadow reload`, a file under the state
// directory this output looks for at its start and every few seconds:
// internal/load/request.go says why a file).
//
// A parked table keeps its load's entry in the ledger (phase loading,
// with the parking) and its agreement on the load's delta table, so that
// un-parking is starting that load: a snapshot that sees every change
// made meanwhile. Its streamed changes are dropped while it is parked
// (addRow): the load that un-parks it holds them.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	clickhousego "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/desclog"
	"github.com/walshadow/walshadow/internal/load"
	"github.com/walshadow/walshadow/internal/wal"
)

const (
	// requestInterval is how often the output looks for reload requests.
	requestInterval = 5 * time.Second
	// serverCheckEvery: every this many request sweeps, while a table is
	// parked, the ClickHouse server's identity is read again.
	serverCheckEvery = 12
)

// serverIdentity is one run of the ClickHouse server.
type serverIdentity struct {
	version string
	boot    time.Time
}

// nativeConn is a connection that reaches clickhouse-go's (a real one;
// the writer tests' fake does not).
type nativeConn interface{ Native() driver.Conn }

// readServer reads the server's version and boot time (now minus its
// uptime); nil when the connection cannot tell.
func (o *chOutput) readServer(ctx context.Context) (*serverIdentity, error) {
	n, ok := o.conn.(nativeConn)
	if !ok || n.Native() == nil {
		return nil, nil
	}
	var version string
	var uptime uint32
	if err := n.Native().QueryRow(ctx, "SELECT version(), uptime()").Scan(&version, &uptime); err != nil {
		return nil, fmt.Errorf("reading ClickHouse's version and uptime: %w", err)
	}
	return &serverIdentity{version: version, boot: time.Now().Add(-time.Duration(uptime) * time.Second).UTC().Truncate(time.Second)}, nil
}

// noteServer reads the server's identity and keeps it (what parking
// records and compares); a failure to read it keeps the last known.
func (o *chOutput) noteServer(ctx context.Context) {
	s, err := o.readServer(ctx)
	if err != nil {
		o.log.Warnf("%v (a parked table is not retried for a restart of ClickHouse until it is known)", err)
		return
	}
	if s != nil {
		o.server.Store(s)
	}
}

// configDigest is a digest of what the configuration says of
// schema.table: its settings under tables, its load mode, and the
// output's settings a failure may depend on. A start under another digest
// un-parks the table.
func (o *chOutput) configDigest(schema, table string) string {
	name := qualified(schema, table)
	v := struct {
		Table                 clickhouse.TableConfig
		Mode                  load.Mode
		OnError               OnError
		Database              string
		BatchRows, BatchBytes int
		SplitBytes            int64
	}{o.scope.config(schema, table), o.s.load.modeFor(o.s.tableLoad[name], schema, table), o.onErrorFor(schema, table),
		o.s.database, o.s.batchRows, o.s.batchBytes, o.s.load.splitBytes}
	b, err := json.Marshal(v)
	if err != nil {
		return "" // (strings, lists and maps: cannot fail) unknown: never un-parks
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// conditions are what could cure a failure of relation oid now.
func (o *chOutput) conditions(oid uint32, schema, table string) load.Conditions {
	c := load.Conditions{Config: o.configDigest(schema, table)}
	if o.store != nil {
		if a := o.store.Get(oid); a != nil {
			c.Shape = a.ValidFrom
		}
	}
	if s := o.server.Load(); s != nil {
		c.ServerVersion, c.ServerBoot = s.version, s.boot
	}
	return c
}

// parkingFor is what parking relation oid for cause records, but the
// engine's part (since, reason, position, count).
func (o *chOutput) parkingFor(oid uint32, schema, table string, cause error) load.Parking {
	return load.Parking{Remedy: remedyFor(cause, qualified(schema, table)), Under: o.conditions(oid, schema, table)}
}

// remedyFor is what the operator can do about a table parked for cause.
func remedyFor(cause error, name string) string {
	var what string
	switch reloadClass(cause) {
	case load.ReloadValueRefused:
		what = fmt.Sprintf("a value its ClickHouse column's type cannot hold (a column typed under %s.%s.%s is never widened to String): give the column a type that holds every value, or correct the value on the source", FieldTables, name, fieldTTypes)
	case load.ReloadClickHouseRefused:
		what = fmt.Sprintf("ClickHouse refuses the table's rows or statements: correct what its error names (a column's name or type under %s.%s, a server setting such as max_memory_usage, or %s/%s for a very wide table)", FieldTables, name, fieldBatchRows, fieldBatchBytes)
	case load.ReloadDecodeFailed:
		what = "walshadow cannot decode the table's change: see the error (the shadow's bridge, a type it cannot render), and correct the cause"
	case load.ReloadToastMissing:
		what = "an unchanged TOAST value is found nowhere: reload the table once its rows are readable on the source"
	default:
		what = "remove the cause the error names"
	}
	return what + fmt.Sprintf("; then change the table's configuration (a restart or `walshadow run -w` picks it up) or run `walshadow reload <config.yaml> %s`", name)
}

// noteParked records, logs (once) and shows that the table of e is
// parked; o.mu held.
func (o *chOutput) noteParked(e load.Entry) {
	p := e.Parked
	if p == nil {
		return
	}
	name := qualified(e.Schema, e.Table)
	if o.parked == nil {
		o.parked = map[uint32]string{}
	}
	o.parked[e.Oid] = p.Reason
	delete(o.tables, e.Oid)
	o.states.set(name, stateParked)
	at := ""
	if p.At != 0 {
		at = " at " + p.At.String()
	}
	o.log.Errorf("%s is parked: it failed%s the same way %d times, a reload between (%d loads of it so far): %s. It is neither loaded nor written until its shape, its configuration or the ClickHouse server changes, or `walshadow reload <config.yaml> %s` asks for it (walshadow status lists it under FAILED). Remedy: %s",
		name, at, p.Count, e.Loads, p.Reason, name, p.Remedy)
}

// parkedNow reports whether relation oid is parked: its changes are not
// written. A parking whose load entry went since (the relation dropped,
// out of scope, loaded afresh) is forgotten. o.mu held.
func (o *chOutput) parkedNow(oid uint32) bool {
	if o.parked[oid] == "" {
		return false
	}
	if e, ok := o.loads.Ledger().Get(oid); ok && e.Parked != nil && e.Phase == load.PhaseLoading {
		return true
	}
	delete(o.parked, oid)
	return false
}

// restoreParked, at a start (after reconciliation, before the loads
// resume): a parked table whose conditions changed is un-parked (its load
// resumes with the others), the rest stay parked.
func (o *chOutput) restoreParked(ctx context.Context) error {
	for _, e := range o.loads.Ledger().All() {
		if e.Parked == nil || e.Phase != load.PhaseLoading {
			continue
		}
		name := qualified(e.Schema, e.Table)
		if a := o.store.Get(e.Oid); a == nil || a.Dropped || a.Left {
			continue // its load is discarded (Resume, leaveScopeAtStart)
		}
		if why, ok := e.Parked.Unpark(o.conditions(e.Oid, e.Schema, e.Table)); ok {
			if err := o.freshDelta(ctx, e.Oid); err != nil {
				return err
			}
			if _, _, err := o.loads.Ledger().Update(e.Oid, func(x *load.Entry) bool { x.Parked = nil; return true }); err != nil {
				return globalf("un-parking %s: %w", name, err)
			}
			o.log.Infof("%s is no longer parked: %s; loading it again (it was parked for: %s)", name, why, e.Parked.Reason)
			continue
		}
		if o.parked == nil {
			o.parked = map[uint32]string{}
		}
		o.parked[e.Oid] = e.Parked.Reason
		o.states.set(name, stateParked)
		o.log.Warnf("%s stays parked (since %s): nothing that could cure its failure changed (%s); `walshadow reload <config.yaml> %s` tries it again",
			name, e.Parked.Since.Format(time.RFC3339), e.Parked.Reason, name)
	}
	return nil
}

// freshDelta gives a parked relation's load a new delta table agreed on
// under the configuration and shape now (the one it was parked with was
// agreed under those it failed with): the load then starts on it. What
// the old delta table held committed before the load's snapshot, so the
// publish would discard it anyway. o.mu held.
func (o *chOutput) freshDelta(ctx context.Context, oid uint32) error {
	delta, ok := o.loads.DeltaTarget(oid)
	prev := o.store.Get(oid)
	log := o.sess.DescLog()
	if !ok || prev == nil || prev.Target != delta || log == nil {
		return nil
	}
	l := log.DescriptorByOidInDBAt(log.Identity().DbOid, oid, max(log.LastCapturedAt(), log.CoveredThrough()))
	if l.Result != desclog.Present || l.Desc == nil {
		return nil // dropped meanwhile: its event comes
	}
	if err := o.execAll(ctx, []string{clickhouse.DropTable(delta)}); err != nil {
		return fmt.Errorf("%s.%s: dropping its delta table to load it again: %w", prev.Schema, prev.Table, err)
	}
	if err := o.store.Delete(oid); err != nil {
		return globalf("%w", err)
	}
	delete(o.tables, oid)
	if err := o.agree(ctx, l.Desc, l.ValidFrom, "loaded again after being parked"); err != nil {
		if tableLocal(err) {
			o.markBroken(l.Desc, err)
			return nil
		}
		return err
	}
	return nil
}

// unpark starts the parked load of oid again, for why, on a fresh delta
// table; o.mu held.
func (o *chOutput) unpark(ctx context.Context, oid uint32, why string) error {
	e, ok := o.loads.Ledger().Get(oid)
	if !ok || e.Parked == nil {
		delete(o.parked, oid)
		return nil
	}
	if err := o.freshDelta(ctx, oid); err != nil {
		return err
	}
	e, ok, err := o.loads.Ledger().Update(oid, func(x *load.Entry) bool {
		if x.Parked == nil {
			return false
		}
		x.Parked = nil
		return true
	})
	if err != nil {
		return globalf("un-parking relation %d: %w", oid, err)
	}
	delete(o.parked, oid)
	if !ok || e.Phase != load.PhaseLoading {
		return nil
	}
	o.log.Infof("%s.%s is no longer parked: %s; loading it again", e.Schema, e.Table, why)
	o.loads.Launch(e)
	return nil
}

// unparkOnShape: a schema event of relation oid was applied at lsn; a
// parked table tries again under its new shape. o.mu held.
func (o *chOutput) unparkOnShape(ctx context.Context, oid uint32, lsn wal.LSN) error {
	if !o.parkedNow(oid) {
		return nil
	}
	return o.unpark(ctx, oid, "its shape changed at "+lsn.String())
}

// checkServer un-parks the parked tables if the ClickHouse server is
// another run or version than they were parked under; o.mu held.
func (o *chOutput) checkServer(ctx context.Context) error {
	if len(o.parked) == 0 {
		return nil
	}
	o.noteServer(ctx)
	for oid := range o.parked {
		e, ok := o.loads.Ledger().Get(oid)
		if !ok || e.Parked == nil {
			delete(o.parked, oid)
			continue
		}
		now := o.conditions(oid, e.Schema, e.Table)
		now.Shape, now.Config = 0, "" // (those are compared at starts and schema events)
		if why, ok := e.Parked.Unpark(now); ok {
			if err := o.unpark(ctx, oid, why); err != nil {
				return err
			}
		}
	}
	return nil
}

// takeRequests acts on the operator's reload requests waiting in the
// state directory; o.mu held.
func (o *chOutput) takeRequests(ctx context.Context) error {
	reqs, bad, err := load.ReloadRequests(o.s.stateDir)
	if err != nil {
		return err
	}
	for path, why := range bad {
		o.log.Warnf("a reload request cannot be read and is removed: %v", why)
		if err := load.RemoveRequestFile(path); err != nil {
			return err
		}
	}
	if len(reqs) == 0 {
		return nil
	}
	log := o.sess.DescLog()
	if log == nil {
		return nil
	}
	for _, r := range reqs {
		var d *desclog.Descriptor
		for _, x := range log.ActivePresent() {
			if qualified(x.Namespace, x.Name) == r.Table && replicable(x) && o.scope.in(x.Namespace, x.Name) {
				d = x
				break
			}
		}
		if d == nil {
			o.log.Warnf("a reload of %s was requested (%s), but this output replicates no table of that name: the request is dropped", r.Table, r.At.Format(time.RFC3339))
		} else if err := o.reloadNow(ctx, d, r.At); err != nil {
			if !tableLocal(err) {
				return err // the request waits for the next sweep
			}
			o.log.Errorf("the reload of %s requested at %s failed: %v", r.Table, r.At.Format(time.RFC3339), err)
		}
		if err := r.Done(); err != nil {
			return err
		}
	}
	return nil
}

// reloadNow reloads relation d at the operator's request (made at):
// un-parks it, starts its load in progress over, or reloads a table that
// follows the source; o.mu held.
func (o *chOutput) reloadNow(ctx context.Context, d *desclog.Descriptor, at time.Time) error {
	name := qualified(d.Namespace, d.Name)
	why := "the operator asked for it at " + at.UTC().Format(time.RFC3339)
	switch {
	case o.parkedNow(d.Oid):
		o.loads.CountReload(load.ReloadRequested)
		return o.unpark(ctx, d.Oid, why)
	case o.loads.Running(d.Oid):
		if !o.loads.Loading(d.Oid) {
			return globalf("%s: its earlier load is still stopping: the reload waits", name)
		}
		o.log.Infof("%s: %s: its load in progress starts over", name, why)
		o.loads.InvalidateFor(d.Oid, load.ReloadRequested)
		return nil
	case o.loads.Loading(d.Oid):
		e, _ := o.loads.Ledger().Get(d.Oid)
		o.log.Infof("%s: %s: loading it", name, why)
		o.loads.CountReload(load.ReloadRequested)
		o.loads.Launch(e)
		return nil
	}
	log := o.sess.DescLog()
	l := log.DescriptorByOidInDBAt(log.Identity().DbOid, d.Oid, max(log.LastCapturedAt(), log.CoveredThrough()))
	if l.Result != desclog.Present || l.Desc == nil {
		return fmt.Errorf("%s has no shape in the descriptor log to reload it under (%v)", name, l.Result)
	}
	prev := o.store.Get(d.Oid)
	delete(o.broken, d.Oid) // tried again, as a schema event would
	o.log.Infof("%s: %s: reloading it", name, why)
	return o.startReload(ctx, l.Desc, l.ValidFrom, prev, reloadPlan{reason: "reloaded as " + why, class: load.ReloadRequested})
}

// reloadClass is the reason class (load.ReloadReasons) of a reload for
// cause: a table's failure, or a change no statement follows.
func reloadClass(cause error) string {
	var tc *clickhouse.TypeChangeError
	var ve *clickhouse.ValueError
	var ex *clickhousego.Exception
	var df *decodeFailure
	msg := cause.Error()
	switch {
	case errors.As(cause, &df):
		return load.ReloadDecodeFailed
	case errors.Is(cause, errRewritten):
		return load.ReloadRewrite
	case errors.As(cause, &tc):
		if strings.Contains(tc.Reason, "composite type") {
			return load.ReloadCompositeType
		}
		return load.ReloadTypeChange
	case strings.Contains(msg, "replica identity key") && strings.Contains(msg, "is gone"):
		return load.ReloadKeyDropped
	case errors.As(cause, &ve):
		return load.ReloadValueRefused
	case errors.As(cause, &ex):
		return load.ReloadClickHouseRefused
	case strings.Contains(msg, "unchanged TOAST"):
		return load.ReloadToastMissing
	}
	return load.ReloadOther
}

// whyClass is the reason class of a load planned for a table that starts
// being followed again (followEvent's and reconcileAll's reasons).
func whyClass(why string) string {
	switch {
	case strings.Contains(why, "LOGGED"):
		return load.ReloadMadeLogged
	case strings.Contains(why, "rewritten"):
		return load.ReloadRewrite
	case strings.Contains(why, "scope"):
		return load.ReloadScope
	}
	return load.ReloadOther
}

// sweep looks for reload requests every requestInterval and, while a
// table is parked, at the ClickHouse server every serverCheckEvery
// sweeps, until ctx ends.
func (o *chOutput) sweep(ctx context.Context) {
	t := time.NewTicker(requestInterval)
	defer t.Stop()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		o.mu.Lock()
		if o.ready && o.loads != nil && o.conn != nil {
			if err := o.takeRequests(ctx); err != nil && ctx.Err() == nil {
				o.log.Warnf("reload requests: %v", err)
			}
			if n%serverCheckEvery == 0 {
				if err := o.checkServer(ctx); err != nil && ctx.Err() == nil {
					o.log.Warnf("%v", err)
				}
			}
		}
		o.mu.Unlock()
	}
}
