// Package filter decides, record by record, what the catalog-only shadow
// standby receives, and finds the catalog boundaries the pipeline must hold
// publication at. It is pure: records in, decisions out, no I/O.
//
// # Routes
//
// Every record keeps its place and length in the WAL, so the shadow's LSNs
// equal the source's. A record either goes to the shadow verbatim
// (RouteShadow) or is replaced by an XLOG_NOOP of the same length
// (RouteNoop), while the decoder always gets the original:
//
//	special rmgr (XLOG, XACT, SMGR, CLOG, DBASE, TBLSPC,
//	  MULTIXACT, RELMAP, STANDBY, COMMIT_TS, REPLORIGIN) ...... shadow
//	    except XLOG_FPI / FPI_FOR_HINT with only user blocks .. noop
//	    and STANDBY LOCK (read, then noop: see standbyRecord)
//	any block on a catalog file ............................ shadow (whole record)
//	blocks, all on user files .............................. noop
//	no blocks: HEAP2_NEW_CID (locator @16), BTREE_REUSE_PAGE
//	  and GIST_PAGE_REUSE (@0) by their relation;
//	  HEAP_TRUNCATE (oids; redo is a no-op) and LOGICAL_MESSAGE noop
//	  when they name only user relations; anything else ...... shadow
//
// A catalog file is one numbered below FirstNormalObjectId (16384), one of a
// shared relation (database 0), or one the CatalogTracker learned: relocated
// by VACUUM FULL, CLUSTER or REINDEX of a catalog, through RELMAP_UPDATE,
// pg_class rows and the storage created by catalog-rewriting transactions.
//
// # The NOOP rewrite
//
// NoopRecord builds the replacement and Scatter writes it over the original
// bytes, skipping the page headers the record crosses, so records that span
// pages and segments are rewritten in place. The NOOP keeps xl_tot_len,
// xl_prev and xl_xid. Keeping xl_xid is deliberate: xlogrecovery.c
// ApplyWalRecord calls AdvanceNextFullTransactionIdPastXid(xl_xid) and, in
// hot standby, RecordKnownAssignedTransactionIds(xl_xid) (procarray.c) for
// every record whatever its rmgr. With the xid kept, the shadow's nextXid,
// pg_subtrans extension and KnownAssignedXids are exactly those of a standby
// of the source: a transaction that only wrote user data is seen as running
// until its commit or abort record, which is always kept, expires it.
// Zeroing the xid would not break replay (a later xid fills the gap), but
// would make the shadow's snapshots differ from the source's for no gain.
//
// # Transaction trees and boundaries
//
// A content write (heap INSERT, UPDATE, HOT_UPDATE, DELETE, MULTI_INSERT,
// NEW_CID) to a catalog of the followed database, or a RELMAP_UPDATE of it,
// makes the writing xid dirty (statistics catalogs excepted: ANALYZE changes
// no shape). Subtransactions are linked to their top-level xid through
// XLR_BLOCK_ID_TOPLEVEL_XID, XLOG_XACT_ASSIGNMENT, PREPARE and NEW_CID, and
// the commit's subxact list. User records of a dirty tree are flagged
// DeferCatalogDecode. The commit (or COMMIT PREPARED) of a dirty tree, or one
// whose invalidations name a relation, a pg_namespace entry or a whole
// catalog of the followed database, is a boundary (BoundaryInfo). Aborts
// clear their (sub)tree and report the aborted xids.
package filter
