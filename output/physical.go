package output

import (
	"errors"
	"fmt"

	"github.com/walshadow/walshadow/internal/clickhouse"
	"github.com/walshadow/walshadow/internal/msg"
)

// A relation without a replica identity key lands in a LayoutPhysical
// table: each row keyed by where its tuple lives, (_filenode, _block,
// _offset), as every heap record names it. An insert writes the row at
// its tuple, a delete a marker there, an update both (a marker at the
// version it replaced, the row at the new one), so FINAL WHERE
// _is_deleted = 0 is the table, duplicate rows included.
//
// TIDs mean something only within one heap generation: VACUUM FULL,
// CLUSTER and rewrites move every tuple (a new filenode) without row
// records. The agreement records the generation its rows belong to
// (Agreed.Filenode, adopted from the first row while the table is empty)
// and where it began (FilenodeFrom); a row of another generation reloads
// the table, unless it is older than the generation's beginning (a
// replay), which supersedes it.

// rowIdentity is a physical table's row change's tuple identity.
type rowIdentity struct {
	filenode uint32
	block    uint32
	off      uint16
	hasOld   bool // an update: the version it replaced
	oldBlock uint32
	oldOff   uint16
	stale    bool // a replay older than the table's generation: skip it
}

// physicalIdentity reads a row change's identity and checks it against
// the table's generation.
func (o *chOutput) physicalIdentity(ts *tableState, c change) (rowIdentity, error) {
	var id rowIdentity
	mc := c.meta
	if mc.Filenode == 0 || !mc.TID.Valid() || c.op == msg.OperationUpdate && !mc.OldTID.Valid() {
		return id, fmt.Errorf("%s of %s at %s: no physical identity (metadata %s, %s, and %s for an update): a table without a key is keyed by its rows' physical identity",
			c.op, ts.label, c.lsn, msg.KeyFilenode, msg.KeyTID, msg.KeyOldTID)
	}
	id.filenode, id.block, id.off = mc.Filenode, mc.TID.Block, mc.TID.Off
	if c.op == msg.OperationUpdate {
		id.oldBlock, id.oldOff, id.hasOld = mc.OldTID.Block, mc.OldTID.Off, true
	}
	switch a := ts.agreed; {
	case a.Filenode == id.filenode:
	case c.lsn < a.FilenodeFrom:
		// Replayed from before the table's generation began (a TRUNCATE,
		// a reload published since): superseded.
		id.stale = true
	case a.Filenode == 0 && (c.op == msg.OperationInsert || o.loads.Loading(c.oid)):
		// An empty table takes its first row's generation; a table being
		// loaded, the stream's (its load's must be the same to publish).
		next := a.Clone()
		next.Filenode, next.FilenodeFrom = id.filenode, c.lsn
		if err := o.store.Put(next); err != nil {
			return id, globalf("recording the heap generation of %s: %w", ts.label, err)
		}
		ts.agreed = next
	default:
		return id, &reloadNeeded{cause: fmt.Errorf("%s of %s at %s is in heap generation (filenode) %d, the table's rows in %d: %w, so their physical identities changed",
			c.op, ts.label, c.lsn, id.filenode, a.Filenode, errRewritten)}
	}
	return id, nil
}

// errRewritten: a table keyed by physical identity had every row moved.
var errRewritten = errors.New("VACUUM FULL, CLUSTER or a rewrite moved every row")

// physical reports whether an agreement keys its rows by physical identity.
func physical(a *clickhouse.Agreed) bool {
	return clickhouse.LayoutOf(a.OrderBy) == clickhouse.LayoutPhysical
}
