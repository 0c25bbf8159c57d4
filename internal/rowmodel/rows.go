package rowmodel

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/walshadow/walshadow/internal/wal"
)

// rowChange is a row message translated onto the table's current columns.
type rowChange struct {
	op   string
	lsn  wal.LSN
	vals values
	// keyNames in today's names; empty for REPLICA IDENTITY FULL.
	keyNames []string
	// unchanged: today's names of omitted unchanged-TOAST columns.
	unchanged []string
	// inVersion: today's names of the columns the row's descriptor had
	// (nil when the version is unknown).
	inVersion map[string]bool
	where     string
	// keyChanged: one half of a key-changing update (walshadow_key_changed):
	// the update's unchanged TOAST columns come from the row its delete
	// retired.
	keyChanged bool
}

func (m *Model) applyRow(op string, oid uint32, msg Message) error {
	lsn, err := metaLSN(msg.Meta, MetaLSN)
	if err != nil {
		return fmt.Errorf("%s of relation %d: %w", op, oid, err)
	}
	where := fmt.Sprintf("%s of %s.%s (oid %d) at %s", op, msg.Meta[MetaSchema], msg.Meta[MetaTable], oid, lsn)
	if at, ok := m.dropped[oid]; ok && lsn <= at {
		m.stats.Duplicates++
		return nil
	}
	t := m.tables[oid]
	if t == nil {
		return fmt.Errorf("%s: no schema event described the table first", where)
	}
	if op == OpTruncate {
		m.stats.Truncates++
		t.truncate(lsn)
		return nil
	}
	if lsn < t.truncatedAt {
		m.stats.Duplicates++ // replayed from before a TRUNCATE
		return nil
	}
	rc, err := t.translate(op, lsn, msg)
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	rc.where = where
	rc.keyChanged = msg.Meta[MetaKeyChanged] == "true"
	if len(rc.keyNames) == 0 {
		return m.applyFull(t, rc)
	}
	if strings.Join(rc.keyNames, ",") != strings.Join(t.keyNames, ",") {
		t.keyNames = rc.keyNames
		if err := t.rekey(); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
	}
	return m.applyKeyed(t, rc)
}

// versionAt is the column list of the schema version a row was decoded
// with: the latest version at or before v whose columns hold every name the
// payload carries. Versions are named by their valid-from LSN, which two
// versions can share (a rename biased back onto a TRUNCATE's new filenode),
// and a version no event announced (a TRUNCATE keeps the columns) reads as
// the one before it.
func (t *table) versionAt(v wal.LSN, payload map[string]any) []Column {
	ats := make([]wal.LSN, 0, len(t.versions))
	for at := range t.versions {
		if at <= v {
			ats = append(ats, at)
		}
	}
	slices.SortFunc(ats, func(a, b wal.LSN) int { return cmp.Compare(b, a) })
	for _, at := range ats {
		cols := t.versions[at]
		names := make(map[string]bool, len(cols))
		for _, c := range cols {
			names[c.Name] = true
		}
		fits := true
		for n := range payload {
			fits = fits && names[n]
		}
		if fits {
			return cols
		}
	}
	if len(ats) > 0 {
		return t.versions[ats[0]]
	}
	return nil
}

// translate maps the payload's names (as of the row's descriptor version)
// onto the table's current columns and renders every value as text.
func (t *table) translate(op string, lsn wal.LSN, msg Message) (rowChange, error) {
	rc := rowChange{op: op, lsn: lsn, vals: values{}}
	// nameNow: payload name -> today's name; kinds by payload name.
	nameNow := map[string]string{}
	kinds := map[string]valueKind{}
	current := map[string]Column{}
	byNum := map[int16]Column{}
	for _, c := range t.cols {
		current[c.Name] = c
		if c.Num != 0 {
			byNum[c.Num] = c
		}
	}
	var versionCols []Column
	if s := msg.Meta[MetaDescriptorVersion]; s != "" {
		if v, err := wal.ParseLSN(s); err == nil {
			versionCols = t.versionAt(v, msg.Payload)
		}
	}
	if versionCols != nil {
		rc.inVersion = map[string]bool{}
		for _, vc := range versionCols {
			now, ok := "", false
			if vc.Num != 0 && len(byNum) > 0 {
				var c Column
				if c, ok = byNum[vc.Num]; ok {
					now = c.Name
				}
			} else if _, ok = current[vc.Name]; ok {
				now = vc.Name
			}
			kinds[vc.Name] = vc.kind
			if ok {
				nameNow[vc.Name] = now
				rc.inVersion[now] = true
			} else {
				nameNow[vc.Name] = "" // dropped since: its values are discarded
			}
		}
	}
	mapName := func(n string) (string, bool, error) {
		if now, ok := nameNow[n]; ok {
			return now, now != "", nil
		}
		if _, ok := current[n]; ok {
			return n, true, nil
		}
		return "", false, fmt.Errorf("column %q is not a column of the table (columns: %s)", n, t.columnNames())
	}
	for n, v := range msg.Payload {
		now, keep, err := mapName(n)
		if err != nil {
			return rc, err
		}
		if !keep {
			continue
		}
		kind, ok := kinds[n]
		if !ok {
			kind = current[now].kind
		}
		text, err := canonical(v, kind)
		if err != nil {
			return rc, fmt.Errorf("column %q: %w", n, err)
		}
		rc.vals[now] = text
	}
	for _, list := range []struct {
		meta string
		dst  *[]string
	}{{MetaKey, &rc.keyNames}, {MetaUnchangedToast, &rc.unchanged}} {
		s := msg.Meta[list.meta]
		if s == "" {
			continue
		}
		for _, n := range strings.Split(s, ",") {
			now, keep, err := mapName(n)
			if err != nil {
				return rc, fmt.Errorf("%s: %w", list.meta, err)
			}
			if keep {
				*list.dst = append(*list.dst, now)
			}
		}
	}
	return rc, nil
}

func (t *table) columnNames() string {
	names := make([]string, len(t.cols))
	for i, c := range t.cols {
		names[i] = c.Name
	}
	return strings.Join(names, ", ")
}

// complete fills the columns an insert or update did not carry: a column
// the row's descriptor did not have yet reads its missing value (or NULL); an
// unchanged TOAST column keeps prev's value (unknown without one). A column
// the descriptor had that is neither is a contract violation.
func (t *table) complete(rc rowChange, prev values) error {
	unchanged := map[string]bool{}
	for _, n := range rc.unchanged {
		unchanged[n] = true
	}
	for _, c := range t.cols {
		if _, ok := rc.vals[c.Name]; ok {
			continue
		}
		switch {
		case unchanged[c.Name] && rc.op == OpUpdate:
			if v, ok := prev[c.Name]; ok {
				rc.vals[c.Name] = v
			}
		case rc.inVersion == nil || !rc.inVersion[c.Name]:
			rc.vals[c.Name] = c.Missing
		default:
			return fmt.Errorf("column %q is missing from the payload and not listed in %s", c.Name, MetaUnchangedToast)
		}
	}
	return nil
}

func (m *Model) applyKeyed(t *table, rc rowChange) error {
	k, ok := keyText(rc.keyNames, rc.vals)
	if !ok {
		return fmt.Errorf("%s: payload lacks a key column of (%s)", rc.where, strings.Join(rc.keyNames, ", "))
	}
	prev := t.rows[k]
	// Equal LSN is a duplicate too: one record changes one version of a key
	// (a key-changing update's delete and update name two different keys).
	if prev != nil && prev.lsn >= rc.lsn {
		m.stats.Duplicates++
		return nil
	}
	switch rc.op {
	case OpDelete:
		m.stats.Deletes++
		if rc.keyChanged && prev != nil && !prev.deleted {
			t.carry = carried{lsn: rc.lsn, vals: prev.vals}
		}
		key := values{}
		for _, n := range rc.keyNames {
			key[n] = rc.vals[n]
		}
		t.rows[k] = &keyedRow{vals: key, lsn: rc.lsn, deleted: true}
		return nil
	case OpInsert:
		m.stats.Inserts++
	case OpUpdate:
		m.stats.Updates++
	}
	var prevVals values
	if prev != nil && !prev.deleted {
		prevVals = prev.vals
	}
	if rc.keyChanged && rc.op == OpUpdate && t.carry.lsn == rc.lsn {
		prevVals = t.carry.vals
	}
	if err := t.complete(rc, prevVals); err != nil {
		return fmt.Errorf("%s: %w", rc.where, err)
	}
	t.rows[k] = &keyedRow{vals: rc.vals, lsn: rc.lsn}
	return nil
}

// applyFull applies a change to a REPLICA IDENTITY FULL table, whose rows
// form a multiset of whole rows. An update is read as the insert of its new
// row (its old row comes as a delete of the same LSN).
func (m *Model) applyFull(t *table, rc rowChange) error {
	if rc.op == OpDelete {
		if err := t.complete(rowChange{op: OpInsert, vals: rc.vals, inVersion: rc.inVersion}, nil); err != nil {
			return fmt.Errorf("%s: %w", rc.where, err)
		}
		k := t.wholeRowKey(rc.vals)
		r := t.multi[k]
		if r != nil && r.deletes[rc.lsn] {
			m.stats.Duplicates++
			return nil
		}
		var victim wal.LSN
		found := false
		if r != nil {
			for _, l := range sortedLSNs(r.live) {
				if l < rc.lsn {
					victim, found = l, true
					break
				}
			}
		}
		if !found {
			return fmt.Errorf("%s: deletes a row the model does not hold", rc.where)
		}
		m.stats.Deletes++
		r.deletes[rc.lsn] = true
		delete(r.live, victim)
		r.dead[victim] = true
		return nil
	}
	if len(rc.unchanged) > 0 {
		return fmt.Errorf("%s: unchanged TOAST columns (%s) on a REPLICA IDENTITY FULL table: the old row was logged whole, nothing may be omitted", rc.where, strings.Join(rc.unchanged, ", "))
	}
	if err := t.complete(rc, nil); err != nil {
		return fmt.Errorf("%s: %w", rc.where, err)
	}
	k := t.wholeRowKey(rc.vals)
	r := t.multi[k]
	if r == nil {
		r = &multiRow{vals: rc.vals, live: map[wal.LSN]bool{}, dead: map[wal.LSN]bool{}, deletes: map[wal.LSN]bool{}}
		t.multi[k] = r
	}
	if r.live[rc.lsn] || r.dead[rc.lsn] {
		m.stats.Duplicates++
		return nil
	}
	if rc.op == OpInsert {
		m.stats.Inserts++
	} else {
		m.stats.Updates++
	}
	r.live[rc.lsn] = true
	return nil
}
