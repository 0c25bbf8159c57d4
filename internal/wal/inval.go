package wal

import (
	"encoding/binary"
	"fmt"
)

// InvalMessageSize is sizeof(SharedInvalidationMessage).
const InvalMessageSize = 16

// SharedInvalidationMessage ids other than catcache ids (storage/sinval.h).
const (
	SharedInvalCatalogID  = -1
	SharedInvalRelcacheID = -2
	SharedInvalSmgrID     = -3
	SharedInvalRelmapID   = -4
	SharedInvalSnapshotID = -5
	SharedInvalRelSyncID  = -6 // PG18+
)

// InvalKind classifies a SharedInvalidationMessage by its id byte.
type InvalKind uint8

const (
	InvalCatcache InvalKind = iota + 1 // id >= 0: a syscache id
	InvalCatalog                       // -1: a whole catalog
	InvalRelcache                      // -2: a relcache entry, or all of them
	InvalSmgr                          // -3: a relation's smgr state
	InvalRelmap                        // -4: a database's relation map
	InvalSnapshot                      // -5: catalog snapshot
	InvalRelSync                       // -6: logical replication relsync cache (PG18+)
)

var invalKindNames = [...]string{"", "catcache", "catalog", "relcache", "smgr", "relmap", "snapshot", "relsync"}

func (k InvalKind) String() string {
	if int(k) < len(invalKindNames) && k != 0 {
		return invalKindNames[k]
	}
	return fmt.Sprintf("InvalKind(%d)", uint8(k))
}

// InvalMessage is one decoded SharedInvalidationMessage. Which fields are
// meaningful depends on Kind:
//
//	catcache: CacheID, DbOid, HashValue
//	catalog:  DbOid, ObjOid (the catalog's OID)
//	relcache: DbOid, ObjOid (the relation's OID; 0 means every relation)
//	smgr:     Backend, Rel (DbOid repeats Rel.DbOid)
//	relmap:   DbOid (0 for the shared map)
//	snapshot: DbOid, ObjOid (the catalog's OID)
//	relsync:  DbOid, ObjOid (the relation's OID)
//
// DbOid 0 means a shared catalog or relation.
type InvalMessage struct {
	Kind      InvalKind
	ID        int8 // the raw id byte; the syscache id for catcache messages
	DbOid     uint32
	HashValue uint32 // catcache: hash of the invalidated key
	ObjOid    uint32
	Backend   int32 // smgr: owning backend of a temp relation, -1 otherwise
	Rel       RelFileNode
}

// CacheID returns the syscache id of a catcache message, -1 otherwise.
func (m InvalMessage) CacheID() int {
	if m.Kind != InvalCatcache {
		return -1
	}
	return int(m.ID)
}

// decodeInvalMessage reads one 16-byte message whose id Decode validated.
func decodeInvalMessage(p []byte) InvalMessage {
	m := InvalMessage{ID: int8(p[0])}
	switch {
	case m.ID >= 0:
		m.Kind = InvalCatcache
		m.DbOid = binary.LittleEndian.Uint32(p[4:])
		m.HashValue = binary.LittleEndian.Uint32(p[8:])
	case m.ID == SharedInvalSmgrID:
		m.Kind = InvalSmgr
		// backend_hi is a signed byte so that InvalidBackendId (-1)
		// round-trips: hi 0xFF, lo 0xFFFF.
		m.Backend = int32(int8(p[1]))<<16 | int32(binary.LittleEndian.Uint16(p[2:]))
		m.Rel = DecodeRelFileNode(p[4:16])
		m.DbOid = m.Rel.DbOid
	default:
		m.Kind = InvalKind(1 - int(m.ID)) // -1 → catalog ... -6 → relsync
		m.DbOid = binary.LittleEndian.Uint32(p[4:])
		if m.ID != SharedInvalRelmapID {
			m.ObjOid = binary.LittleEndian.Uint32(p[8:])
		}
	}
	return m
}

// InvalMessages is a packed array of SharedInvalidationMessages inside a
// record (commit, prepare, xact/standby INVALIDATIONS, PG18 heap INPLACE),
// decoded on access so that a commit's messages cost no allocation.
type InvalMessages struct{ b []byte }

// Decode takes the first n messages of src, which belongs to rec (for the
// error LSN and the version's set of message ids). Every message id is
// validated here, so At never fails. The result aliases src.
func (dst *InvalMessages) Decode(rec *Record, src []byte, n int) error {
	*dst = InvalMessages{}
	if n < 0 {
		return errorf(rec.LSN, KindCorrupt, "invalidation messages: negative count %d", n)
	}
	if n > len(src)/InvalMessageSize {
		return errorf(rec.LSN, KindCorrupt, "invalidation messages: %d messages need %d bytes, have %d", n, n*InvalMessageSize, len(src))
	}
	layout, err := layoutOf(rec, "invalidation messages")
	if err != nil {
		return err
	}
	minID := int8(SharedInvalSnapshotID)
	if layout.HasRelSyncInval {
		minID = SharedInvalRelSyncID
	}
	b := src[: n*InvalMessageSize : n*InvalMessageSize]
	for i := 0; i < len(b); i += InvalMessageSize {
		if id := int8(b[i]); id < minID {
			return errorf(rec.LSN, KindCorrupt, "invalidation message %d: unrecognized id %d", i/InvalMessageSize, id)
		}
	}
	dst.b = b
	return nil
}

// Len returns the number of messages.
func (src InvalMessages) Len() int { return len(src.b) / InvalMessageSize }

// At returns the i-th message; it panics if i is out of range.
func (src InvalMessages) At(i int) InvalMessage {
	return decodeInvalMessage(src.b[i*InvalMessageSize : (i+1)*InvalMessageSize])
}

// Bytes returns the raw messages, aliasing the record.
func (src InvalMessages) Bytes() []byte { return src.b }
