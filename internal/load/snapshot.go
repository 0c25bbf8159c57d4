package load

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/walshadow/walshadow/internal/wal"
)

// pgSnapshot is a snapshot as pg_current_snapshot() shows it.
type pgSnapshot struct {
	xmin, xmax uint64
	xip        []uint64
	// seenBy: every transaction the snapshot sees has its commit record
	// before it (the WAL insert position read once the snapshot was taken).
	seenBy wal.LSN
}

func parsePGSnapshot(s string) (pgSnapshot, error) {
	var snap pgSnapshot
	parts := strings.SplitN(s, ":", 3)
	if len(parts) != 3 {
		return snap, fmt.Errorf("snapshot %q: want xmin:xmax:xip", s)
	}
	var err error
	if snap.xmin, err = strconv.ParseUint(parts[0], 10, 64); err != nil {
		return snap, fmt.Errorf("snapshot %q: %w", s, err)
	}
	if snap.xmax, err = strconv.ParseUint(parts[1], 10, 64); err != nil {
		return snap, fmt.Errorf("snapshot %q: %w", s, err)
	}
	if parts[2] != "" {
		for _, x := range strings.Split(parts[2], ",") {
			v, err := strconv.ParseUint(x, 10, 64)
			if err != nil {
				return snap, fmt.Errorf("snapshot %q: %w", s, err)
			}
			snap.xip = append(snap.xip, v)
		}
	}
	return snap, nil
}

// sees reports whether the snapshot sees transaction xid (a 32-bit xid as
// WAL carries it) as committed, assuming it committed: it began before the
// snapshot and was not running when it was taken. Xids compare modulo
// 2^32, as PostgreSQL's do.
func (s pgSnapshot) sees(xid uint32) bool {
	xmin32 := uint32(s.xmin)
	d := xid - xmin32
	if int32(d) < 0 {
		return true // before xmin: ended before the snapshot
	}
	if d >= uint32(s.xmax)-xmin32 {
		return false // began after it
	}
	for _, x := range s.xip {
		if uint32(x) == xid {
			return false
		}
	}
	return true
}

// invisibleSQL is a ClickHouse condition on _xid (a 32-bit xid, as WAL
// carries it) true for transactions the snapshot does not see: in
// progress when it was taken, or begun after. Xids compare modulo 2^32,
// as PostgreSQL's do: the streamed ones are all recent.
func (s pgSnapshot) invisibleSQL() string {
	xmin32 := uint32(s.xmin)
	span := uint32(s.xmax) - xmin32
	dist := fmt.Sprintf("bitAnd(toInt64(_xid) - %d, 4294967295)", xmin32)
	cond := fmt.Sprintf("(%s < 2147483648 AND %s >= %d)", dist, dist, span)
	if len(s.xip) > 0 {
		ids := make([]string, len(s.xip))
		for i, x := range s.xip {
			ids[i] = strconv.FormatUint(uint64(uint32(x)), 10)
		}
		cond = fmt.Sprintf("(%s OR _xid IN (%s))", cond, strings.Join(ids, ", "))
	}
	return cond
}

// RestoreFilters reads the snapshots of the ledger's loads whose
// transactions may still be streamed (a restart replays from the session's
// resume point, never below writtenBefore).
func (l *Engine) RestoreFilters(writtenBefore wal.LSN) error {
	for _, e := range l.ledger.All() {
		if e.Snapshot == "" || e.SeenBy <= writtenBefore {
			continue
		}
		snap, err := parsePGSnapshot(e.Snapshot)
		if err != nil {
			return fmt.Errorf("%s: the load of %s.%s: %w", LedgerFile, e.Schema, e.Table, err)
		}
		snap.seenBy = e.SeenBy
		l.setFilter(e.Oid, snap)
	}
	return nil
}

// setFilter records the snapshot a load of oid took.
func (l *Engine) setFilter(oid uint32, snap pgSnapshot) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.filters[oid] = snap
	l.nfilters.Store(int32(len(l.filters)))
}

// dropFilterLocked forgets oid's snapshot (l.mu held), keeping nfilters
// equal to len(filters).
func (l *Engine) dropFilterLocked(oid uint32) {
	delete(l.filters, oid)
	l.nfilters.Store(int32(len(l.filters)))
}

// Reflected reports whether the streamed transaction xid, committed at
// commit, is in the load of oid: committed before the load's snapshot was
// taken and seen by it. Its changes are then skipped (its rows are loaded;
// replaying its TRUNCATE would remove rows the load holds).
func (l *Engine) Reflected(oid uint32, commit wal.LSN, xid uint32) bool {
	if l == nil || l.nfilters.Load() == 0 {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	snap, ok := l.filters[oid]
	return ok && commit < snap.seenBy && snap.sees(xid)
}

// Prune forgets the snapshots whose transactions are all written.
func (l *Engine) Prune(writtenBefore wal.LSN) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for oid, snap := range l.filters {
		if snap.seenBy <= writtenBefore {
			l.dropFilterLocked(oid)
		}
	}
}
