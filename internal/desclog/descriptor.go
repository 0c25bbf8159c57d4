package desclog

import (
	"github.com/walshadow/walshadow/internal/wal"
)

// Descriptor is the shape of one relation at a point in WAL: everything a
// decoder needs to turn its heap tuples into values, and an output needs to
// name and type its columns. It is captured from the shadow's catalogs (the
// bridge's SCAN, or SQL on the committed view) at a catalog boundary.
//
// Descriptors are immutable once published: readers share them.
type Descriptor struct {
	Oid   uint32
	DbOid uint32
	// Rfn is the relation's physical storage as WAL names it: tablespace 0
	// (the database default) resolved to the database's tablespace.
	Rfn          wal.RelFileNode
	NamespaceOid uint32
	Namespace    string
	Name         string
	Kind         byte // pg_class.relkind: 'r', 'p', 'm', 't'
	Persistence  byte // pg_class.relpersistence: 'p', 'u', 't'
	ReplIdent    byte // pg_class.relreplident: 'd', 'n', 'f', 'i'
	ToastOid     uint32
	// Columns are pg_attribute rows with attnum >= 1, in attnum order,
	// dropped columns included (they keep their physical slot).
	Columns []Column
	// KeyAttnums are the replica identity's columns: the primary key for
	// 'd', the identity index for 'i', none for 'f' and 'n'.
	KeyAttnums       []int16
	IdentityIndexOid uint32
}

// Column is one pg_attribute row (plus what its type says about storage).
type Column struct {
	Num     int16
	Name    string
	TypeOid uint32
	TypMod  int32
	// TypeName is format_type(atttypid, atttypmod), e.g. "numeric(10,2)";
	// for a composite type, followed by its attributes in parentheses
	// ("pair (a integer, b text)"): PostgreSQL reads stored values with
	// the type's current attributes, so a change of the type is a change
	// of the column.
	TypeName string
	// TypeKind is pg_type.typtype ('b' base, 'c' composite, 'd' domain,
	// 'e' enum, 'r' range, 'm' multirange, 'p' pseudo); BaseTypeOid is a
	// domain's base type (else 0); ElemTypeOid an array's element (else 0).
	TypeKind    byte
	BaseTypeOid uint32
	ElemTypeOid uint32
	NotNull     bool
	Dropped     bool
	ByVal       bool
	Len         int16 // attlen: > 0 fixed, -1 varlena, -2 cstring
	Align       byte  // attalign: 'c', 's', 'i', 'd'
	Storage     byte  // attstorage: 'p', 'e', 'm', 'x'
	// HasMissing and Missing: the value rows written before an ADD COLUMN
	// with a default read for this column (attmissingval's element, in the
	// type's text form; nil when it is NULL).
	HasMissing bool
	Missing    *string
}

// AlignOffset is off rounded up to the alignment typalign align asks for
// ('s' 2, 'i' 4, 'd' 8 bytes; 'c' none), as heap_fill_tuple and
// heap_deform_tuple place a column's datum.
func AlignOffset(off int, align byte) int {
	var a int
	switch align {
	case 's':
		a = 2
	case 'i':
		a = 4
	case 'd':
		a = 8
	default:
		return off
	}
	return (off + a - 1) &^ (a - 1)
}
