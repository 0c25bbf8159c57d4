package filter

import (
	"github.com/walshadow/walshadow/internal/wal"
)

// xidState is what the filter knows about one (sub)transaction. Only xids
// that matter get one: those linked to a parent or holding dirt, a catalog
// lock or oids. A user record of an xid without state costs one map miss.
type xidState struct {
	top uint32 // the top-level xid; 0 while unknown (the xid is its own root)

	dirty      bool    // wrote catalogs of the followed database
	firstTouch wal.LSN // its first such write, 0 if none seen
	oids       []uint32
	rewrite    bool // rewrites catalog storage (see Filter.standbyRecord)

	// Root only: its linked subxids (aborted ones may linger: their state
	// is gone, so they count for nothing) and how many members, the root
	// included, are dirty or rewriting. Counts rather than flags, so that a
	// subtransaction abort costs only its own members.
	subs         []uint32
	dirtyCount   int
	rewriteCount int
	prepared     bool
}

// xactTrees tracks transaction trees: subxid → top links and, per xid, the
// catalog dirt that decides boundaries.
//
// Links come from a record's XLR_BLOCK_ID_TOPLEVEL_XID, XLOG_XACT_ASSIGNMENT,
// a PREPARE's subxact list, HEAP2_NEW_CID's top_xid and, at the end, the
// commit or abort record's subxact list. Every source names the top-level
// xid directly, so trees are one level deep.
type xactTrees struct {
	m map[uint32]*xidState
}

// treeAggregate is a drained tree's combined state.
type treeAggregate struct {
	dirty      bool
	firstTouch wal.LSN
	oids       []uint32 // appended to the caller's buffer
	members    []uint32 // appended to the caller's buffer
}

func (t *xactTrees) ensure(xid uint32) *xidState {
	if s := t.m[xid]; s != nil {
		return s
	}
	if t.m == nil {
		t.m = make(map[uint32]*xidState)
	}
	s := &xidState{}
	t.m[xid] = s
	return s
}

// rootState returns the root of xid's tree and its state, creating both.
func (t *xactTrees) rootState(xid uint32) (uint32, *xidState) {
	s := t.ensure(xid)
	if s.top == 0 {
		return xid, s
	}
	return s.top, t.ensure(s.top)
}

// link records that sub is a subtransaction of top.
func (t *xactTrees) link(sub, top uint32) {
	if sub == 0 || top == 0 || sub == top {
		return
	}
	s := t.ensure(sub)
	if s.top != 0 {
		return // already linked; links are facts and never change
	}
	r := t.ensure(top)
	if r.top != 0 {
		// top was itself linked as a subxact: PostgreSQL never nests links,
		// but keep trees one level deep whatever the input says.
		top, r = r.top, t.ensure(r.top)
		if top == sub {
			return
		}
	}
	s.top = top
	r.subs = append(r.subs, sub)
	// sub was its own root until now: its counts, and the links it had
	// collected, go to the real root.
	r.dirtyCount += s.dirtyCount
	r.rewriteCount += s.rewriteCount
	for _, c := range s.subs {
		cs := t.m[c]
		if cs == nil || cs.top != sub {
			// Gone (aborted or pruned) or re-born with state of its own:
			// no longer a member of sub's tree, so it must not follow it
			// (re-pointing a re-born top at itself would corrupt the tree).
			continue
		}
		cs.top = top
		r.subs = append(r.subs, c)
	}
	s.subs, s.dirtyCount, s.rewriteCount = nil, 0, 0
}

// dirty marks xid as having written catalogs of the followed database at lsn.
func (t *xactTrees) dirty(xid uint32, lsn wal.LSN) {
	if xid == 0 {
		return
	}
	s := t.ensure(xid)
	if s.firstTouch == 0 || lsn < s.firstTouch {
		s.firstTouch = lsn
	}
	if !s.dirty {
		s.dirty = true
		_, r := t.rootState(xid)
		r.dirtyCount++
	}
}

// addOid remembers a user relation oid whose pg_class row xid wrote.
// Duplicates are removed when the tree drains.
func (t *xactTrees) addOid(xid, oid uint32) {
	if xid == 0 {
		return
	}
	s := t.ensure(xid)
	s.oids = append(s.oids, oid)
}

// markRewrite flags xid's tree as one that rewrites catalog storage.
func (t *xactTrees) markRewrite(xid uint32) {
	if xid == 0 {
		return
	}
	s := t.ensure(xid)
	if !s.rewrite {
		s.rewrite = true
		_, r := t.rootState(xid)
		r.rewriteCount++
	}
}

func (t *xactTrees) markPrepared(xid uint32) {
	if xid != 0 {
		t.ensure(xid).prepared = true
	}
}

// rootFlags returns the tree-wide flags of xid's tree without creating state.
func (t *xactTrees) rootFlags(xid uint32) (dirty, rewrite bool) {
	if len(t.m) == 0 {
		return false, false
	}
	s := t.m[xid]
	if s == nil {
		return false, false
	}
	if s.top != 0 {
		if s = t.m[s.top]; s == nil {
			return false, false
		}
	}
	return s.dirtyCount > 0, s.rewriteCount > 0
}

// collect appends xid, its linked subxids and the subxids in extra (with
// theirs) to members[start:], sorted and without duplicates. A transaction
// may have many thousands of subtransactions: nothing here is quadratic.
func (t *xactTrees) collect(members []uint32, xid uint32, extra wal.XIDList) []uint32 {
	start := len(members)
	add := func(x uint32) {
		if x == 0 {
			return
		}
		members = append(members, x)
		if s := t.m[x]; s != nil {
			for _, c := range s.subs {
				// A lingering link whose xid has state under another root
				// (re-born after an abort) is not a member any more.
				if cs := t.m[c]; cs == nil || cs.top == x {
					members = append(members, c)
				}
			}
		}
	}
	add(xid)
	for i := 0; i < extra.Len(); i++ {
		add(extra.At(i))
	}
	tail := sortUnique(members[start:])
	return members[:start+len(tail)]
}

// drain ends the tree rooted at top (a commit): it aggregates and then
// forgets the states of top, its linked subxids and the committed subxids.
func (t *xactTrees) drain(top uint32, subxacts wal.XIDList, agg *treeAggregate) {
	agg.members = t.collect(agg.members, top, subxacts)
	for _, x := range agg.members {
		s := t.m[x]
		if s == nil {
			continue
		}
		if s.dirty {
			agg.dirty = true
			if agg.firstTouch == 0 || s.firstTouch < agg.firstTouch {
				agg.firstTouch = s.firstTouch
			}
		}
		agg.oids = append(agg.oids, s.oids...)
		delete(t.m, x)
	}
}

// abort forgets xid's (sub)tree: xid, its linked subxids and the subxids the
// abort record lists. For a subtransaction, its parent keeps its own state
// and its counts lose the forgotten members'. It appends the forgotten xids
// (sorted) to members and returns it.
func (t *xactTrees) abort(xid uint32, subxacts wal.XIDList, members []uint32) []uint32 {
	start := len(members)
	parent := uint32(0)
	if s := t.m[xid]; s != nil {
		parent = s.top
	}
	members = t.collect(members, xid, subxacts)
	var r *xidState
	if parent != 0 {
		r = t.m[parent]
	}
	for _, x := range members[start:] {
		s := t.m[x]
		if s == nil {
			continue
		}
		if r != nil && s.top == parent {
			if s.dirty {
				r.dirtyCount--
			}
			if s.rewrite {
				r.rewriteCount--
			}
		}
		delete(t.m, x)
	}
	return members
}

// xidPrecedes is TransactionIdPrecedes for normal xids: modulo-2^32 order.
func xidPrecedes(a, b uint32) bool { return int32(a-b) < 0 }

// prune forgets trees whose root precedes oldestRunning and is not
// prepared: an XLOG_RUNNING_XACTS record is inserted after every transaction
// older than its oldestRunningXid wrote its commit or abort record, so such
// state belongs to transactions whose end the filter will never see (a
// backend crash writes no abort record; the stream may have started after
// the commit). It returns how many xids were forgotten.
func (t *xactTrees) prune(oldestRunning uint32) int {
	n := 0
	for x, s := range t.m {
		if s.top != 0 || s.prepared || !xidPrecedes(x, oldestRunning) {
			continue
		}
		for _, c := range s.subs {
			delete(t.m, c)
			n++
		}
		delete(t.m, x)
		n++
	}
	return n
}

// size is the number of xids with state.
func (t *xactTrees) size() int { return len(t.m) }
