package filter

import (
	"slices"

	"github.com/walshadow/walshadow/internal/wal"
)

// FirstNormalObjectID is FirstNormalObjectId (access/transam.h): every oid
// and relfilenode below it belongs to the system (catalogs, their indexes
// and TOAST tables, information_schema), everything from it on to users.
const FirstNormalObjectID = 16384

// Catalog oids the filter must recognise (src/include/catalog/*.h).
const (
	pgClassOid = 1259 // pg_class, a mapped catalog
	// Statistics catalogs and their TOAST tables: ANALYZE rewrites them
	// without changing any relation's shape, so their writes never dirty a
	// transaction.
	pgStatisticOid          = 2619
	pgStatisticToastOid     = 2840
	pgStatisticExtDataOid   = 3429
	pgStatisticExtDataToast = 3430
)

func isStatisticsCatalog(oid uint32) bool {
	switch oid {
	case pgStatisticOid, pgStatisticToastOid, pgStatisticExtDataOid, pgStatisticExtDataToast:
		return true
	}
	return false
}

// relKey names a relation file within a database. The tablespace is left out
// on purpose: two relations of one database share a relfilenode only in
// different tablespaces, and mistaking a user file for a catalog one only
// keeps its records on the shadow, while the reverse would lose catalog data.
type relKey struct{ db, rel uint32 }

// CatalogTracker knows which relation files hold catalogs. Files numbered
// below FirstNormalObjectID always do, and so does every file of a shared
// relation (database 0: users cannot create shared relations). The tracker
// adds the catalog files that moved to new numbers, per database:
//
//   - XLOG_RELMAP_UPDATE: every mapping of the new map file (pg_class,
//     pg_attribute, pg_type, pg_proc, their indexes, the shared catalogs);
//     the mapping of pg_class also tells where that database's pg_class is;
//   - pg_class rows written to that pg_class (INSERT, UPDATE, HOT_UPDATE,
//     MULTI_INSERT): a row with oid below FirstNormalObjectID whose
//     relfilenode is a normal number (VACUUM FULL, CLUSTER, REINDEX);
//   - storage created by a transaction that rewrites catalogs (see
//     Filter): a rewrite writes the new file before the pg_class update or
//     relmap update that names it, so those come too late to keep its pages;
//   - Seed / SeedRelMap with what was read from the source at attach.
//
// Files are forgotten when a commit or abort record drops them and when
// their database is dropped. The zero value is an empty tracker.
type CatalogTracker struct {
	files   map[relKey]uint32 // relocated catalog file → catalog oid, 0 when not known
	pgClass map[uint32]uint32 // database → pg_class relfilenode, when not 1259
}

// IsCatalog reports whether the relation file holds a catalog.
func (t *CatalogTracker) IsCatalog(rfn wal.RelFileNode) bool {
	if rfn.DbOid == 0 || rfn.RelNum < FirstNormalObjectID {
		return true
	}
	if len(t.files) == 0 {
		return false
	}
	_, ok := t.files[relKey{rfn.DbOid, rfn.RelNum}]
	return ok
}

// CatalogOid returns the oid of the catalog stored in rfn when the tracker
// knows it: the file number itself below FirstNormalObjectID (a catalog's
// original file is numbered after its oid), the learned oid otherwise.
func (t *CatalogTracker) CatalogOid(rfn wal.RelFileNode) (oid uint32, known bool) {
	if rfn.RelNum < FirstNormalObjectID {
		return rfn.RelNum, true
	}
	oid = t.files[relKey{rfn.DbOid, rfn.RelNum}]
	return oid, oid != 0
}

// PgClassRelNum is the relfilenode of pg_class in database db.
func (t *CatalogTracker) PgClassRelNum(db uint32) uint32 {
	if n, ok := t.pgClass[db]; ok {
		return n
	}
	return pgClassOid
}

// Relocated returns the tracked catalog files of database db (0: shared),
// sorted.
func (t *CatalogTracker) Relocated(db uint32) []uint32 {
	var out []uint32
	for k := range t.files {
		if k.db == db {
			out = append(out, k.rel)
		}
	}
	slices.Sort(out)
	return out
}

// Len is the number of tracked relocated catalog files over all databases.
func (t *CatalogTracker) Len() int { return len(t.files) }

// Seed adds the relocated catalog files of database db read from the source
// at attach (e.g. pg_relation_filenode(oid) of every pg_class row with oid
// below FirstNormalObjectID). Numbers below FirstNormalObjectID need no
// tracking and are ignored.
func (t *CatalogTracker) Seed(db uint32, catalogRelNums []uint32) {
	for _, n := range catalogRelNums {
		t.add(db, n, 0)
	}
}

// SeedRelMap applies a database's pg_filenode.map (db 0: global/), e.g. as
// read from the base backup, as a RELMAP_UPDATE would.
func (t *CatalogTracker) SeedRelMap(db uint32, m *wal.RelMapFile) {
	t.applyRelMap(db, m)
}

func (t *CatalogTracker) add(db, rel, oid uint32) bool {
	if rel < FirstNormalObjectID {
		return false
	}
	if t.files == nil {
		t.files = make(map[relKey]uint32)
	}
	k := relKey{db, rel}
	if old, ok := t.files[k]; ok && (oid == 0 || old == oid) {
		return false
	}
	t.files[k] = oid
	return true
}

func (t *CatalogTracker) forget(db, rel uint32) {
	if len(t.files) != 0 {
		delete(t.files, relKey{db, rel})
	}
}

// applyRelMap records every mapping of a database's new map file and
// returns how many were new.
func (t *CatalogTracker) applyRelMap(db uint32, m *wal.RelMapFile) int {
	added := 0
	for i := 0; i < m.Len(); i++ {
		mp := m.At(i)
		if mp.MapOid == pgClassOid && db != 0 {
			t.setPgClass(db, mp.MapFileNode)
		}
		if t.add(db, mp.MapFileNode, mp.MapOid) {
			added++
		}
	}
	return added
}

func (t *CatalogTracker) setPgClass(db, rel uint32) {
	if rel == pgClassOid {
		delete(t.pgClass, db)
		return
	}
	if t.pgClass == nil {
		t.pgClass = make(map[uint32]uint32)
	}
	t.pgClass[db] = rel
}

// copyDatabase gives database dst the tracked files of src, as CREATE
// DATABASE ... STRATEGY FILE_COPY copies src's directory file by file.
func (t *CatalogTracker) copyDatabase(src, dst uint32) {
	for k, oid := range t.files {
		if k.db == src {
			t.add(dst, k.rel, oid)
		}
	}
	if n, ok := t.pgClass[src]; ok {
		t.setPgClass(dst, n)
	}
}

// dropDatabase forgets everything about database db.
func (t *CatalogTracker) dropDatabase(db uint32) {
	for k := range t.files {
		if k.db == db {
			delete(t.files, k)
		}
	}
	delete(t.pgClass, db)
}
