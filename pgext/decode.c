/*
 * decode.c — DECODE: on-disk datum bytes → the type's typoutput text.
 *
 * Each item is exactly what a heap tuple stores for one attribute: a
 * varlena with its header (1-byte or 4-byte, possibly inline-compressed),
 * a cstring with its terminator, or typlen bytes of a fixed-length type.
 * The Datum is rebuilt from typlen/typbyval in palloc'd (MAXALIGNed) memory
 * and handed to the output function, the way printtup would.
 *
 * The envelope is validated (lengths agree with the varlena header, no
 * external TOAST pointer, a known compression method); the type-specific
 * content is trusted as PostgreSQL trusts its own heap. Each item runs in
 * its own subtransaction, so an item whose output function raises fails
 * alone and the batch goes on.
 */
#include "walshadow.h"

#include "access/detoast.h"
#include "access/toast_compression.h"
#include "access/tupmacs.h"
#include "access/xact.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#if PG_VERSION_NUM >= 160000
#include "varatt.h"				/* varlena macros left postgres.h in 16 */
#endif

typedef struct WsItem
{
	Oid			type_oid;
	uint32		len;
	const uint8 *data;
} WsItem;

/* ws_item_datum rebuilds the Datum of one item, or raises. */
static Datum
ws_item_datum(const WsItem *item, int16 typlen, bool typbyval)
{
	char	   *copy;

	if (typlen == -1)
	{
		if (item->len < 1)
			ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED),
							errmsg("empty varlena datum")));
		copy = palloc(item->len);
		memcpy(copy, item->data, item->len);
		if (VARATT_IS_EXTERNAL(copy))
			ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
							errmsg("external TOAST pointer (vartag %u): the value lives in the source's TOAST relation, which the shadow does not have",
								   (unsigned) VARTAG_EXTERNAL(copy))));
		if (VARATT_IS_1B(copy))
		{
			if (VARSIZE_1B(copy) != item->len)
				ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED),
								errmsg("short varlena header says %u bytes, the item has %u",
									   (unsigned) VARSIZE_1B(copy), item->len)));
			return PointerGetDatum(copy);
		}
		if (item->len < VARHDRSZ || VARSIZE_4B(copy) != item->len)
			ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED),
							errmsg("varlena header says %u bytes, the item has %u",
								   item->len < VARHDRSZ ? 0 : (unsigned) VARSIZE_4B(copy), item->len)));
		if (VARATT_IS_COMPRESSED(copy))
		{
			ToastCompressionId method;

			if (item->len < VARHDRSZ_COMPRESSED)
				ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED),
								errmsg("compressed varlena of %u bytes is shorter than its header", item->len)));
			method = VARDATA_COMPRESSED_GET_COMPRESS_METHOD(copy);
			if (method != TOAST_PGLZ_COMPRESSION_ID && method != TOAST_LZ4_COMPRESSION_ID)
				ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED),
								errmsg("unknown compression method %d", (int) method)));
		}
		return PointerGetDatum(copy);
	}
	if (typlen == -2)
	{
		if (item->len < 1 || item->data[item->len - 1] != '\0' ||
			memchr(item->data, '\0', item->len - 1) != NULL)
			ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED),
							errmsg("cstring datum of %u bytes is not one NUL-terminated string", item->len)));
		copy = palloc(item->len);
		memcpy(copy, item->data, item->len);
		return CStringGetDatum(copy);
	}
	if (typlen <= 0 || item->len != (uint32) typlen)
		ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED),
						errmsg("fixed-length type of %d bytes got %u bytes", (int) typlen, item->len)));
	copy = palloc(item->len);
	memcpy(copy, item->data, item->len);
	if (typbyval)
		return fetch_att(copy, true, typlen);
	return PointerGetDatum(copy);
}

static char *
ws_item_text(const WsItem *item)
{
	Oid			typoutput;
	bool		typisvarlena;
	int16		typlen;
	bool		typbyval;
	char	   *text;

	getTypeOutputInfo(item->type_oid, &typoutput, &typisvarlena);
	get_typlenbyval(item->type_oid, &typlen, &typbyval);
	text = OidOutputFunctionCall(typoutput, ws_item_datum(item, typlen, typbyval));
	return ws_to_utf8(text);
}

/*
 * ws_decode_item appends one result: the text, or the error the item
 * raised. itemcxt holds the item's garbage and is reset by the caller.
 */
static void
ws_decode_item(const WsItem *item, StringInfo resp, MemoryContext itemcxt)
{
	MemoryContext outer = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(itemcxt);
	PG_TRY();
	{
		char	   *text = ws_item_text(item);
		size_t		n = strlen(text);

		ws_put_u8(resp, WS_ITEM_TEXT);
		ws_put_u32(resp, (uint32) n);
		appendBinaryStringInfo(resp, text, n);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(outer);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(itemcxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(outer);
		CurrentResourceOwner = owner;
		ws_put_u8(resp, WS_ITEM_ERROR);
		ws_put_text(resp, edata->message ? edata->message : "unknown error");
	}
	PG_END_TRY();
}

void
ws_op_decode(WsReader *r, StringInfo resp)
{
	uint32		n = ws_get_u32(r, "DECODE item count");
	WsItem	   *items;
	MemoryContext itemcxt;
	uint32		i;

	/* Every item takes at least 8 bytes: refuse absurd counts up front. */
	if ((uint64) n * 8 > ws_remaining(r))
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("walshadow bridge: truncated request: DECODE of %u items needs at least %llu bytes, %zu left",
						n, (unsigned long long) n * 8, ws_remaining(r))));
	items = palloc_extended(sizeof(WsItem) * Max(n, 1), MCXT_ALLOC_HUGE);
	for (i = 0; i < n; i++)
	{
		items[i].type_oid = ws_get_u32(r, "DECODE item type oid");
		items[i].len = ws_get_u32(r, "DECODE item length");
		items[i].data = ws_get_bytes(r, items[i].len, "DECODE item datum");
	}
	ws_expect_end(r, "DECODE");

	ws_put_u8(resp, WS_STATUS_OK);
	ws_put_u32(resp, n);
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	itemcxt = AllocSetContextCreate(CurrentMemoryContext, "walshadow decode item", ALLOCSET_DEFAULT_SIZES);
	for (i = 0; i < n; i++)
	{
		CHECK_FOR_INTERRUPTS();
		ws_decode_item(&items[i], resp, itemcxt);
		MemoryContextReset(itemcxt);
	}
	MemoryContextDelete(itemcxt);
	PopActiveSnapshot();
	CommitTransactionCommand();
}
