package output

import (
	"context"
	"errors"
	"maps"

	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/desclog"
)

// A value its column's mapped ClickHouse type cannot hold (numeric NaN in
// a Decimal, a timestamp past Int64 microseconds, a multi-dimensional
// array in an Array) fails its table like any change it cannot take, and
// the reload that repairs it maps that column to String: PostgreSQL's
// text form, which holds every value of every type, so nothing is
// guessed or rounded. Without it the reload would meet the same value
// and fail again, forever. A column the configuration gives a type
// (column_types) is the operator's choice and never widened. The
// widening lives as long as the table's agreement does (ClickHouse keeps
// the String column); a reload from scratch after a restart maps the
// column afresh and widens it again at its first such value.

// widenFor picks the column of relation d that cause (an error applying a
// change to prev, the table's agreement) says cannot hold a value, and
// records that the table's next agreement maps it to String. It returns
// the source column's name, or false when cause is not such a value or
// the column cannot be widened (String already, configured, unknown).
func (o *chOutput) widenFor(d *desclog.Descriptor, prev *clickhouse.Agreed, cause error) (string, bool) {
	c, override, ok := o.widening(d, prev, cause)
	if !ok {
		return "", false
	}
	if o.widened == nil {
		o.widened = map[uint32]map[string]string{}
	}
	if o.widened[d.Oid] == nil {
		o.widened[d.Oid] = map[string]string{}
	}
	o.widened[d.Oid][c] = override
	return c, true
}

// widening is widenFor without recording: the column and its override.
func (o *chOutput) widening(d *desclog.Descriptor, prev *clickhouse.Agreed, cause error) (column, override string, ok bool) {
	var ve *clickhouse.ValueError
	if !errors.As(cause, &ve) || ve.Null || ve.Column == "" || ve.Type == "String" || prev == nil || o.conn == nil {
		return "", "", false // a NULL where none may be is no value String would hold better
	}
	var attnum int16
	inKey := false
	for _, m := range prev.Columns {
		if m.Spec.Name == ve.Column {
			attnum, inKey = m.Attnum, m.Key
		}
	}
	if attnum == 0 {
		return "", "", false
	}
	for _, c := range d.Columns {
		if c.Num != attnum || c.Dropped {
			continue
		}
		cfg := o.scope.config(d.Namespace, d.Name)
		if _, configured := cfg.Types[c.Name]; configured || o.widened[d.Oid][c.Name] != "" {
			return "", "", false
		}
		override = "Nullable(String)"
		if c.NotNull || inKey {
			override = "String"
		}
		if _, _, err := clickhouse.OverrideColumn(o.conn.Dialect(), c, override); err != nil {
			return "", "", false
		}
		return c.Name, override, true
	}
	return "", "", false
}

// widenLoad takes a load's failure on a value its column's type cannot
// hold: when the column can be widened, the table fails (failTable: its
// load starts over on a new delta table with the column as String) and
// widenLoad reports true.
func (o *chOutput) widenLoad(ctx context.Context, oid uint32, cause error) (bool, error) {
	var ve *clickhouse.ValueError
	if !errors.As(cause, &ve) {
		return false, nil // (most load failures: no need to wait for the output's lock)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	a := o.store.Get(oid)
	log := o.sess.DescLog()
	if a == nil || a.Dropped || log == nil {
		return false, nil
	}
	l := log.DescriptorByOidInDBAt(log.Identity().DbOid, oid, a.ValidFrom)
	if l.Result != desclog.Present || l.Desc == nil {
		return false, nil
	}
	if _, _, ok := o.widening(l.Desc, a, cause); !ok {
		return false, nil
	}
	return true, o.failTable(ctx, oid, a.ValidFrom, cause)
}

// withWidened is cfg with the String overrides widenFor recorded for
// relation oid.
func (o *chOutput) withWidened(oid uint32, cfg clickhouse.TableConfig) clickhouse.TableConfig {
	w := o.widened[oid]
	if len(w) == 0 {
		return cfg
	}
	types := maps.Clone(cfg.Types)
	if types == nil {
		types = map[string]string{}
	}
	for col, t := range w {
		if _, ok := types[col]; !ok {
			types[col] = t
		}
	}
	cfg.Types = types
	return cfg
}
