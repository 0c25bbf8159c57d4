/*
 * walshadow.h — the bridge between walshadow and its shadow PostgreSQL.
 *
 * The module is loaded through shared_preload_libraries (it is not an
 * extension: the shadow's catalogs are a read-only copy of the source's, so
 * CREATE EXTENSION could never run there). Its background worker serves an
 * owner-only unix socket at walshadow.socket_path.
 *
 * Framing, both directions:
 *
 *   +----------------+---------------------------------------------+
 *   | length u32 BE  | payload (length bytes, 1 .. max_request_mb) |
 *   +----------------+---------------------------------------------+
 *
 * A request payload starts with the opcode byte; a response payload with a
 * status byte. Integers are big-endian. Bytes left over after a request's
 * last field are an error. One request is answered before the next frame
 * of that connection is read.
 *
 *   HELLO      0x01  req: -
 *                    resp: status u8, protocol u32 (=1), server_version_num
 *                          u32, in_recovery u8
 *   DECODE     0x02  req: n u32, n × (type oid u32, length u32, on-disk
 *                          datum bytes)
 *                    resp: status u8, n u32, n × (kind u8 (0 text, 1 error),
 *                          length u32, UTF-8 bytes)
 *   SCAN       0x03  req: catalog u8, top_xid u32, noids u32 (<= 65536),
 *                          noids × oid u32
 *                    resp: status u8, lsn_start u64, lsn_end u64, ncols u16,
 *                          then rows of ncols cells until the end of the
 *                          payload; a cell is length i32 (-1 = NULL) + text
 *   REPLAY_LSN 0x04  req: -
 *                    resp: status u8, lsn u64
 *
 * Any failed request is answered with status 1, length u32, then the
 * message "SQLSTATE: text" in UTF-8; the connection stays usable unless the
 * framing itself was broken (oversized or truncated frame), in which case
 * the error is sent and the connection closed.
 */
#ifndef WALSHADOW_H
#define WALSHADOW_H

#include "postgres.h"

#include "access/xlogdefs.h"
#include "lib/stringinfo.h"

#define WS_PROTOCOL_VERSION 1

#define WS_OP_HELLO			0x01
#define WS_OP_DECODE		0x02
#define WS_OP_SCAN			0x03
#define WS_OP_REPLAY_LSN	0x04

#define WS_STATUS_OK		0
#define WS_STATUS_ERROR		1

#define WS_ITEM_TEXT		0
#define WS_ITEM_ERROR		1

#define WS_CATALOG_CLASS		1
#define WS_CATALOG_ATTRIBUTE	2
#define WS_CATALOG_INDEX		3
#define WS_CATALOG_NAMESPACE	4
#define WS_CATALOG_TYPE			5

#define WS_MAX_SCAN_OIDS	65536
#define WS_MAX_CLIENTS		8

/* GUCs (worker.c) */
extern char *ws_socket_path;
extern char *ws_database;
extern int	ws_io_timeout_ms;
extern int	ws_lock_timeout_ms;
extern int	ws_max_request_mb;

/*
 * WsReader walks a request payload. Every getter raises an ERROR naming the
 * field when the payload ends early, so a truncated request fails as a
 * whole before any work is done.
 */
typedef struct WsReader
{
	const uint8 *data;
	size_t		len;
	size_t		pos;
} WsReader;

static inline size_t
ws_remaining(const WsReader *r)
{
	return r->len - r->pos;
}

static inline void
ws_need(const WsReader *r, size_t n, const char *field)
{
	if (ws_remaining(r) < n)
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("walshadow bridge: truncated request: %s needs %zu bytes at offset %zu, %zu left",
						field, n, r->pos, ws_remaining(r))));
}

static inline uint8
ws_get_u8(WsReader *r, const char *field)
{
	ws_need(r, 1, field);
	return r->data[r->pos++];
}

static inline uint32
ws_get_u32(WsReader *r, const char *field)
{
	const uint8 *p;

	ws_need(r, 4, field);
	p = r->data + r->pos;
	r->pos += 4;
	return ((uint32) p[0] << 24) | ((uint32) p[1] << 16) | ((uint32) p[2] << 8) | (uint32) p[3];
}

static inline const uint8 *
ws_get_bytes(WsReader *r, size_t n, const char *field)
{
	const uint8 *p;

	ws_need(r, n, field);
	p = r->data + r->pos;
	r->pos += n;
	return p;
}

static inline void
ws_expect_end(const WsReader *r, const char *op)
{
	if (ws_remaining(r) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("walshadow bridge: %s request has %zu trailing bytes", op, ws_remaining(r))));
}

static inline void
ws_put_u8(StringInfo s, uint8 v)
{
	appendStringInfoCharMacro(s, (char) v);
}

static inline void
ws_put_u16(StringInfo s, uint16 v)
{
	char		b[2];

	b[0] = (char) (v >> 8);
	b[1] = (char) v;
	appendBinaryStringInfo(s, b, 2);
}

static inline void
ws_put_u32(StringInfo s, uint32 v)
{
	char		b[4];

	b[0] = (char) (v >> 24);
	b[1] = (char) (v >> 16);
	b[2] = (char) (v >> 8);
	b[3] = (char) v;
	appendBinaryStringInfo(s, b, 4);
}

static inline void
ws_put_u64(StringInfo s, uint64 v)
{
	ws_put_u32(s, (uint32) (v >> 32));
	ws_put_u32(s, (uint32) v);
}

/* ws_put_text appends length u32 + bytes converted to UTF-8. */
extern void ws_put_text(StringInfo s, const char *str);

/* ws_to_utf8 converts a server-encoding string to UTF-8 (palloc'd or str). */
extern char *ws_to_utf8(const char *str);

/* ws_current_lsn: replay LSN in recovery, else the insert LSN. */
extern XLogRecPtr ws_current_lsn(void);

/* Ops: each parses the rest of the request and appends its response. */
extern void ws_op_decode(WsReader *r, StringInfo resp);
extern void ws_op_scan(WsReader *r, StringInfo resp);

#endif							/* WALSHADOW_H */
