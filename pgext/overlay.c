/*
 * overlay.c — SCAN: catalog projections as one transaction tree sees them.
 *
 * A catalog is read under SnapshotAny and every row version is put to one
 * predicate, "seen by the tree rooted at top_xid": its inserter committed or
 * belongs to the tree (and did not abort), and no committed or tree-member
 * writer deleted it. top_xid 0 owns nothing, so every in-progress writer is
 * foreign and the predicate is the committed view an MVCC snapshot has.
 *
 * Tree membership is the hard part on a standby: pg_subtrans only holds the
 * parents XLOG_XACT_ASSIGNMENT records carried (sent past 64 cached
 * subxids), so an ordinary savepoint's subxact has no recorded parent and
 * looks like a foreign top-level writer. A parent chain that roots
 * elsewhere proves foreign; no parent proves nothing. When the scan is
 * keyed by relation oids, the relation's DDL lock is the argument that no
 * other tree writes those rows, so an unresolvable writer is trusted as the
 * tree's (and counted). Other scans have no such argument and fail as
 * inconclusive rather than guess.
 *
 * Only catalogs are opened (AccessShareLock, bounded by lock_timeout =
 * walshadow.lock_timeout_ms): never the user relation, whose replaying DDL
 * holds AccessExclusiveLock against us.
 */
#include "walshadow.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/multixact.h"
#include "access/relscan.h"
#include "access/subtrans.h"
#include "access/table.h"
#include "access/transam.h"
#include "access/xact.h"
#include "catalog/pg_attribute.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/procarray.h"
#include "utils/array.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#define WS_MAX_COLS 13

/* Above this many oids one sequential scan beats one index probe per oid. */
#define WS_INDEX_PROBE_LIMIT 1024

typedef struct WsProjection
{
	const char *name;
	Oid			relid;
	Oid			key_index;		/* index whose first column is key_attnum */
	AttrNumber	key_attnum;		/* the column the oid list filters */
	bool		relation_keyed; /* oids name relations: the lock argument holds */
	int			ncols;
	AttrNumber	cols[WS_MAX_COLS];
} WsProjection;

static const WsProjection ws_projections[] = {
	[WS_CATALOG_CLASS] = {
		"pg_class", RelationRelationId, ClassOidIndexId, Anum_pg_class_oid, true, 9,
		{Anum_pg_class_oid, Anum_pg_class_relnamespace, Anum_pg_class_relname, Anum_pg_class_relkind,
			Anum_pg_class_relpersistence, Anum_pg_class_relreplident, Anum_pg_class_reltoastrelid,
		Anum_pg_class_reltablespace, Anum_pg_class_relfilenode}
	},
	[WS_CATALOG_ATTRIBUTE] = {
		"pg_attribute", AttributeRelationId, AttributeRelidNumIndexId, Anum_pg_attribute_attrelid, true, 13,
		{Anum_pg_attribute_attrelid, Anum_pg_attribute_attnum, Anum_pg_attribute_attname,
			Anum_pg_attribute_atttypid, Anum_pg_attribute_atttypmod, Anum_pg_attribute_attnotnull,
			Anum_pg_attribute_attisdropped, Anum_pg_attribute_attbyval, Anum_pg_attribute_attlen,
			Anum_pg_attribute_attalign, Anum_pg_attribute_attstorage, Anum_pg_attribute_atthasmissing,
		Anum_pg_attribute_attmissingval}
	},
	[WS_CATALOG_INDEX] = {
		"pg_index", IndexRelationId, IndexIndrelidIndexId, Anum_pg_index_indrelid, true, 5,
		{Anum_pg_index_indexrelid, Anum_pg_index_indrelid, Anum_pg_index_indisprimary,
		Anum_pg_index_indisreplident, Anum_pg_index_indkey}
	},
	[WS_CATALOG_NAMESPACE] = {
		"pg_namespace", NamespaceRelationId, NamespaceOidIndexId, Anum_pg_namespace_oid, false, 2,
		{Anum_pg_namespace_oid, Anum_pg_namespace_nspname}
	},
	[WS_CATALOG_TYPE] = {
		"pg_type", TypeRelationId, TypeOidIndexId, Anum_pg_type_oid, false, 9,
		{Anum_pg_type_oid, Anum_pg_type_typname, Anum_pg_type_typtype, Anum_pg_type_typbasetype,
			Anum_pg_type_typelem, Anum_pg_type_typlen, Anum_pg_type_typbyval, Anum_pg_type_typalign,
		Anum_pg_type_typcategory}
	},
};

typedef enum WsWriter
{
	WS_WRITER_COMMITTED,
	WS_WRITER_ABORTED,
	WS_WRITER_OURS,
	WS_WRITER_FOREIGN
} WsWriter;

typedef struct WsScan
{
	const WsProjection *proj;
	TransactionId top;
	bool		trust_unresolved;
	uint32		scanned;
	uint32		emitted;
	uint32		subtrans_mismatch;
	Oid		   *oids;			/* sorted, distinct */
	int			noids;
	FmgrInfo	out[WS_MAX_COLS];
} WsScan;

/* ws_tree_member decides whether in-progress xid belongs to st->top's tree. */
static WsWriter
ws_tree_member(WsScan *st, TransactionId xid)
{
	TransactionId cur = xid;
	int			depth;

	for (depth = 0; depth < 1024; depth++)
	{
		TransactionId parent = SubTransGetParent(cur);

		if (!TransactionIdIsValid(parent))
			break;
		if (TransactionIdEquals(parent, st->top))
			return WS_WRITER_OURS;
		if (TransactionIdPrecedes(parent, TransactionXmin))
			break;
		cur = parent;
	}
	if (!TransactionIdEquals(cur, xid))
		return WS_WRITER_FOREIGN;	/* the chain roots at another top */
	if (!st->trust_unresolved)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("inconclusive %s scan for transaction %u: in-progress writer %u has no recorded parent",
						st->proj->name, st->top, xid),
				 errdetail("Only scans keyed by relation oids may attribute such a writer to the transaction.")));
	st->subtrans_mismatch++;
	return WS_WRITER_OURS;
}

static WsWriter
ws_classify(WsScan *st, TransactionId xid)
{
	if (!TransactionIdIsValid(xid))
		return WS_WRITER_ABORTED;
	if (!TransactionIdIsNormal(xid))
		return WS_WRITER_COMMITTED; /* bootstrap or frozen */
	/* In progress first: clog may say committed before the xid leaves the
	 * running set, as an MVCC snapshot would still see it running. */
	if (TransactionIdIsInProgress(xid))
	{
		if (!TransactionIdIsValid(st->top))
			return WS_WRITER_FOREIGN;
		if (TransactionIdEquals(xid, st->top))
			return WS_WRITER_OURS;
		return ws_tree_member(st, xid);
	}
	return TransactionIdDidCommit(xid) ? WS_WRITER_COMMITTED : WS_WRITER_ABORTED;
}

/* ws_visible applies the tree predicate to a stable copy of a row header. */
static bool
ws_visible(WsScan *st, HeapTupleHeader h)
{
	uint16		mask = h->t_infomask;
	TransactionId xmax;
	WsWriter	w;

	if (!HeapTupleHeaderXminFrozen(h))
	{
		if (mask & HEAP_XMIN_INVALID)
			return false;
		if (!(mask & HEAP_XMIN_COMMITTED))
		{
			w = ws_classify(st, HeapTupleHeaderGetRawXmin(h));
			if (w == WS_WRITER_ABORTED || w == WS_WRITER_FOREIGN)
				return false;
		}
	}
	if ((mask & HEAP_XMAX_INVALID) || HEAP_XMAX_IS_LOCKED_ONLY(mask))
		return true;
	if (mask & HEAP_XMAX_IS_MULTI)
		xmax = HeapTupleGetUpdateXid(h);
	else
	{
		if (mask & HEAP_XMAX_COMMITTED)
			return false;
		xmax = HeapTupleHeaderGetRawXmax(h);
	}
	if (!TransactionIdIsValid(xmax))
		return true;
	w = ws_classify(st, xmax);
	return w != WS_WRITER_COMMITTED && w != WS_WRITER_OURS;
}

static void
ws_put_cell(StringInfo resp, const char *text)
{
	if (text == NULL)
	{
		ws_put_u32(resp, 0xFFFFFFFFU);	/* i32 -1 */
		return;
	}
	ws_put_text(resp, text);
}

/* ws_first_missing renders attmissingval's first element, or NULL. */
static char *
ws_first_missing(Datum value)
{
	ArrayType  *arr = DatumGetArrayTypeP(value);
	Oid			elem = ARR_ELEMTYPE(arr);
	int16		elen;
	bool		ebyval;
	char		ealign;
	Datum	   *values;
	bool	   *nulls;
	int			n;
	Oid			typoutput;
	bool		isvarlena;

	get_typlenbyvalalign(elem, &elen, &ebyval, &ealign);
	deconstruct_array(arr, elem, elen, ebyval, ealign, &values, &nulls, &n);
	if (n < 1 || nulls[0])
		return NULL;
	getTypeOutputInfo(elem, &typoutput, &isvarlena);
	return OidOutputFunctionCall(typoutput, values[0]);
}

static void
ws_emit(WsScan *st, HeapTuple tuple, TupleDesc desc, StringInfo resp)
{
	int			i;

	for (i = 0; i < st->proj->ncols; i++)
	{
		AttrNumber	attnum = st->proj->cols[i];
		bool		isnull;
		Datum		value = heap_getattr(tuple, attnum, desc, &isnull);

		if (isnull)
			ws_put_cell(resp, NULL);
		else if (st->proj->relid == AttributeRelationId && attnum == Anum_pg_attribute_attmissingval)
			ws_put_cell(resp, ws_first_missing(value));
		else
			ws_put_cell(resp, OutputFunctionCall(&st->out[i], value));
	}
	st->emitted++;
}

static int
ws_oid_cmp(const void *a, const void *b)
{
	Oid			x = *(const Oid *) a;
	Oid			y = *(const Oid *) b;

	return x < y ? -1 : (x > y ? 1 : 0);
}

static bool
ws_wanted(WsScan *st, HeapTuple tuple, TupleDesc desc)
{
	bool		isnull;
	Datum		key;
	Oid			oid;

	if (st->proj->relid == AttributeRelationId)
	{
		Datum		attnum = heap_getattr(tuple, Anum_pg_attribute_attnum, desc, &isnull);

		if (isnull || DatumGetInt16(attnum) < 1)
			return false;
	}
	if (st->noids == 0)
		return true;
	key = heap_getattr(tuple, st->proj->key_attnum, desc, &isnull);
	if (isnull)
		return false;
	oid = DatumGetObjectId(key);
	return bsearch(&oid, st->oids, st->noids, sizeof(Oid), ws_oid_cmp) != NULL;
}

/*
 * ws_scan_one runs one systable scan (keyed by oid when key is valid) and
 * emits the rows the tree sees. Each row is copied under its buffer's share
 * lock, so the predicate reads a header that replay cannot change under it.
 */
static void
ws_scan_one(WsScan *st, Relation rel, bool use_index, Oid key, MemoryContext rowcxt, StringInfo resp)
{
	ScanKeyData skey;
	SysScanDesc sd;
	HeapTuple	tuple;
	TupleDesc	desc = RelationGetDescr(rel);

	ScanKeyInit(&skey, st->proj->key_attnum, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(key));
	sd = systable_beginscan(rel, st->proj->key_index, use_index, SnapshotAny, use_index ? 1 : 0, &skey);
	while ((tuple = systable_getnext(sd)) != NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(rowcxt);
		HeapTuple	copy;

		CHECK_FOR_INTERRUPTS();
		if (TTS_IS_BUFFERTUPLE(sd->slot) && BufferIsValid(((BufferHeapTupleTableSlot *) sd->slot)->buffer))
		{
			Buffer		buf = ((BufferHeapTupleTableSlot *) sd->slot)->buffer;

			LockBuffer(buf, BUFFER_LOCK_SHARE);
			copy = heap_copytuple(tuple);
			LockBuffer(buf, BUFFER_LOCK_UNLOCK);
		}
		else
			copy = heap_copytuple(tuple);
		st->scanned++;
		if (ws_wanted(st, copy, desc) && ws_visible(st, copy->t_data))
			ws_emit(st, copy, desc, resp);
		MemoryContextSwitchTo(old);
		MemoryContextReset(rowcxt);
	}
	systable_endscan(sd);
}

void
ws_op_scan(WsReader *r, StringInfo resp)
{
	uint8		catalog = ws_get_u8(r, "SCAN catalog");
	TransactionId top = ws_get_u32(r, "SCAN top_xid");
	uint32		noids = ws_get_u32(r, "SCAN oid count");
	WsScan		st;
	int			lsn_at;
	XLogRecPtr	lsn_start;
	XLogRecPtr	lsn_end;
	Relation	rel;
	MemoryContext rowcxt;
	uint32		i;
	int			n;

	if (catalog < WS_CATALOG_CLASS || catalog > WS_CATALOG_TYPE)
		ereport(ERROR, (errcode(ERRCODE_PROTOCOL_VIOLATION),
						errmsg("walshadow bridge: SCAN of unknown catalog %u", catalog)));
	if (noids > WS_MAX_SCAN_OIDS)
		ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						errmsg("walshadow bridge: SCAN of %u oids exceeds the limit of %d", noids, WS_MAX_SCAN_OIDS)));
	memset(&st, 0, sizeof(st));
	st.proj = &ws_projections[catalog];
	st.top = top;
	st.oids = palloc(sizeof(Oid) * Max(noids, 1));
	for (i = 0; i < noids; i++)
		st.oids[i] = ws_get_u32(r, "SCAN oid");
	ws_expect_end(r, "SCAN");
	qsort(st.oids, noids, sizeof(Oid), ws_oid_cmp);
	for (i = 0, n = 0; i < noids; i++)
		if (n == 0 || st.oids[n - 1] != st.oids[i])
			st.oids[n++] = st.oids[i];
	st.noids = n;
	st.trust_unresolved = st.proj->relation_keyed && st.noids > 0;

	StartTransactionCommand();
	/* A snapshot sets TransactionXmin, below which pg_subtrans is not read. */
	PushActiveSnapshot(GetTransactionSnapshot());

	ws_put_u8(resp, WS_STATUS_OK);
	lsn_at = resp->len;
	ws_put_u64(resp, 0);
	ws_put_u64(resp, 0);
	ws_put_u16(resp, (uint16) st.proj->ncols);

	lsn_start = ws_current_lsn();
	rel = table_open(st.proj->relid, AccessShareLock);
	for (i = 0; i < (uint32) st.proj->ncols; i++)
	{
		Oid			typoutput;
		bool		isvarlena;

		getTypeOutputInfo(TupleDescAttr(RelationGetDescr(rel), st.proj->cols[i] - 1)->atttypid,
						  &typoutput, &isvarlena);
		fmgr_info(typoutput, &st.out[i]);
	}
	rowcxt = AllocSetContextCreate(CurrentMemoryContext, "walshadow scan row", ALLOCSET_DEFAULT_SIZES);
	if (st.noids > 0 && st.noids <= WS_INDEX_PROBE_LIMIT)
	{
		for (n = 0; n < st.noids; n++)
			ws_scan_one(&st, rel, true, st.oids[n], rowcxt, resp);
	}
	else
		ws_scan_one(&st, rel, false, InvalidOid, rowcxt, resp);
	MemoryContextDelete(rowcxt);
	table_close(rel, AccessShareLock);
	lsn_end = ws_current_lsn();

	PopActiveSnapshot();
	CommitTransactionCommand();

	for (i = 0; i < 8; i++)
	{
		resp->data[lsn_at + i] = (char) (lsn_start >> (56 - 8 * i));
		resp->data[lsn_at + 8 + i] = (char) (lsn_end >> (56 - 8 * i));
	}
	ereport(DEBUG1,
			(errmsg("walshadow bridge: SCAN %s top %u oids %d: %u row versions, %u emitted, %u unresolved writers trusted",
					st.proj->name, top, st.noids, st.scanned, st.emitted, st.subtrans_mismatch)));
}
