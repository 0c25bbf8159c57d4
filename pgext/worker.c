/*
 * worker.c — module entry, GUCs, the bridge background worker, its socket
 * and framing. See walshadow.h for the protocol.
 *
 * The worker is single-threaded: one WaitEventSet watches the latch
 * (signals), postmaster death, the listening socket and up to
 * WS_MAX_CLIENTS connections. Connections are non-blocking; a complete
 * request frame is served synchronously, its response queued on the
 * connection, and that connection's next frame is read only once the
 * response is out. A peer that stalls mid-frame for walshadow.io_timeout_ms
 * is dropped.
 */
#include "walshadow.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "access/xact.h"
#include "access/xlog.h"
#include "access/xlogrecovery.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "portability/instr_time.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

PG_MODULE_MAGIC;

void		_PG_init(void);
PGDLLEXPORT void ws_worker_main(Datum main_arg);

char	   *ws_socket_path = NULL;
char	   *ws_database = NULL;
int			ws_io_timeout_ms = 30000;
int			ws_lock_timeout_ms = 1000;
int			ws_max_request_mb = 64;

/* Seconds the postmaster waits before restarting a worker that exited. */
#define WS_RESTART_SECONDS 5

typedef enum WsConnState
{
	WS_READ_HEADER,
	WS_READ_PAYLOAD,
	WS_WRITE
} WsConnState;

typedef struct WsConn
{
	pgsocket	fd;
	WsConnState state;
	uint8		header[4];
	size_t		got;			/* bytes of header or payload read */
	uint32		payload_len;
	uint8	   *payload;		/* in cxt */
	StringInfoData out;			/* response frame, in cxt */
	size_t		sent;
	bool		close_after_write;
	TimestampTz last_progress;	/* of a partial frame or pending write */
	MemoryContext cxt;			/* reset after every request */
} WsConn;

static WsConn *ws_conns[WS_MAX_CLIENTS];
static pgsocket ws_listen_fd = PGINVALID_SOCKET;
static bool ws_socket_created = false;
static MemoryContext ws_request_cxt;

/* ---- GUCs ---------------------------------------------------------------- */

static bool
ws_check_socket_path(char **newval, void **extra, GucSource source)
{
	const char *v = *newval;

	if (v == NULL || v[0] == '\0')
		return true;			/* _PG_init reports the missing setting */
	if (v[0] != '/')
	{
		GUC_check_errdetail("walshadow.socket_path must be an absolute path.");
		return false;
	}
	if (strlen(v) >= sizeof(((struct sockaddr_un *) NULL)->sun_path))
	{
		GUC_check_errdetail("walshadow.socket_path is %zu bytes, over the %zu a unix socket path allows.",
							strlen(v), sizeof(((struct sockaddr_un *) NULL)->sun_path) - 1);
		return false;
	}
	return true;
}

static void
ws_define_gucs(void)
{
	DefineCustomStringVariable("walshadow.socket_path",
							   "Unix socket the walshadow bridge worker listens on.",
							   NULL, &ws_socket_path, "",
							   PGC_POSTMASTER, 0,
							   ws_check_socket_path, NULL, NULL);
	DefineCustomStringVariable("walshadow.database",
							   "Database the walshadow bridge worker connects to.",
							   NULL, &ws_database, "postgres",
							   PGC_POSTMASTER, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("walshadow.io_timeout_ms",
							"Drop a bridge client that stalls this long inside a frame.",
							NULL, &ws_io_timeout_ms, 30000, 100, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("walshadow.lock_timeout_ms",
							"lock_timeout of the bridge worker's catalog reads.",
							NULL, &ws_lock_timeout_ms, 1000, 0, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("walshadow.max_request_mb",
							"Largest request frame the bridge accepts, in MiB.",
							NULL, &ws_max_request_mb, 64, 1, 1023,
							PGC_SIGHUP, 0, NULL, NULL, NULL);
	MarkGUCPrefixReserved("walshadow");
}

void
_PG_init(void)
{
	BackgroundWorker worker;

	ws_define_gucs();
	/* LOAD in a session only defines the settings; the worker needs preload. */
	if (!process_shared_preload_libraries_in_progress)
		return;
	if (ws_socket_path == NULL || ws_socket_path[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("walshadow: walshadow.socket_path is not set"),
				 errhint("Set walshadow.socket_path in postgresql.conf to the unix socket the bridge should serve.")));

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_ConsistentState;
	worker.bgw_restart_time = WS_RESTART_SECONDS;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "walshadow");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "ws_worker_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "walshadow bridge");
	snprintf(worker.bgw_type, BGW_MAXLEN, "walshadow bridge");
	RegisterBackgroundWorker(&worker);
}

/* ---- Settings ------------------------------------------------------------ */

static void
ws_set(const char *name, const char *value)
{
	SetConfigOption(name, value, PGC_SUSET, PGC_S_OVERRIDE);
}

/*
 * ws_pin_settings fixes everything typoutput depends on at override
 * priority, so neither a reload nor a replicated ALTER DATABASE/ROLE SET can
 * change how a value renders.
 */
static void
ws_pin_settings(void)
{
	ws_set("TimeZone", "UTC");
	ws_set("DateStyle", "ISO, MDY");
	ws_set("IntervalStyle", "postgres");
	ws_set("extra_float_digits", "1");
	ws_set("bytea_output", "hex");
	ws_set("lc_numeric", "C");
	ws_set("lc_time", "C");
	ws_set("lc_monetary", "C");
	/* reg* output qualifies whatever pg_catalog does not resolve. */
	ws_set("search_path", "pg_catalog");
	ws_set("application_name", "walshadow bridge");
}

static void
ws_apply_reloadable(void)
{
	char		buf[32];

	snprintf(buf, sizeof(buf), "%d", ws_lock_timeout_ms);
	ws_set("lock_timeout", buf);
}

/* ---- Helpers shared by the ops ------------------------------------------- */

XLogRecPtr
ws_current_lsn(void)
{
	if (RecoveryInProgress())
		return GetXLogReplayRecPtr(NULL);
	return GetXLogInsertRecPtr();
}

char *
ws_to_utf8(const char *str)
{
	return pg_server_to_any(str, strlen(str), PG_UTF8);
}

void
ws_put_text(StringInfo s, const char *str)
{
	char	   *u = ws_to_utf8(str);
	size_t		n = strlen(u);

	ws_put_u32(s, (uint32) n);
	appendBinaryStringInfo(s, u, n);
	if (u != str)
		pfree(u);
}

/* ---- Ops served here ----------------------------------------------------- */

static void
ws_op_hello(WsReader *r, StringInfo resp)
{
	const char *ver = GetConfigOption("server_version_num", false, false);

	ws_expect_end(r, "HELLO");
	ws_put_u8(resp, WS_STATUS_OK);
	ws_put_u32(resp, WS_PROTOCOL_VERSION);
	ws_put_u32(resp, (uint32) strtoul(ver, NULL, 10));
	ws_put_u8(resp, RecoveryInProgress() ? 1 : 0);
}

static void
ws_op_replay_lsn(WsReader *r, StringInfo resp)
{
	ws_expect_end(r, "REPLAY_LSN");
	ws_put_u8(resp, WS_STATUS_OK);
	ws_put_u64(resp, ws_current_lsn());
}

static void
ws_dispatch(const uint8 *payload, size_t len, StringInfo resp)
{
	WsReader	r = {payload, len, 0};
	uint8		op = ws_get_u8(&r, "opcode");

	switch (op)
	{
		case WS_OP_HELLO:
			ws_op_hello(&r, resp);
			break;
		case WS_OP_DECODE:
			ws_op_decode(&r, resp);
			break;
		case WS_OP_SCAN:
			ws_op_scan(&r, resp);
			break;
		case WS_OP_REPLAY_LSN:
			ws_op_replay_lsn(&r, resp);
			break;
		default:
			ereport(ERROR,
					(errcode(ERRCODE_PROTOCOL_VIOLATION),
					 errmsg("walshadow bridge: unknown opcode 0x%02x", op)));
	}
}

/* ---- Responses ----------------------------------------------------------- */

/* ws_begin_frame starts a response frame: a length placeholder. */
static void
ws_begin_frame(StringInfo s)
{
	resetStringInfo(s);
	ws_put_u32(s, 0);
}

static void
ws_end_frame(StringInfo s)
{
	uint32		n = (uint32) (s->len - 4);

	s->data[0] = (char) (n >> 24);
	s->data[1] = (char) (n >> 16);
	s->data[2] = (char) (n >> 8);
	s->data[3] = (char) n;
}

static void
ws_put_error(StringInfo s, int sqlerrcode, const char *message)
{
	char	   *m = psprintf("%s: %s", unpack_sql_state(sqlerrcode), message ? message : "unknown error");

	ws_begin_frame(s);
	ws_put_u8(s, WS_STATUS_ERROR);
	ws_put_text(s, m);
	ws_end_frame(s);
}

/*
 * ws_serve runs one request and leaves its response frame in c->out. Any
 * ERROR becomes an error response; the transaction it left is aborted.
 */
static void
ws_serve(WsConn *c)
{
	MemoryContext old = MemoryContextSwitchTo(ws_request_cxt);

	ws_begin_frame(&c->out);
	PG_TRY();
	{
		ws_dispatch(c->payload, c->payload_len, &c->out);
		ws_end_frame(&c->out);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(ws_request_cxt);
		edata = CopyErrorData();
		FlushErrorState();
		AbortOutOfAnyTransaction();
		ereport(DEBUG1, (errmsg("walshadow bridge: request failed: %s", edata->message)));
		ws_put_error(&c->out, edata->sqlerrcode, edata->message);
	}
	PG_END_TRY();
	MemoryContextSwitchTo(old);
	MemoryContextReset(ws_request_cxt);
}

/* ---- Connections --------------------------------------------------------- */

/* ws_reset_out gives c a fresh, empty response buffer in its context. */
static void
ws_reset_out(WsConn *c)
{
	MemoryContext old = MemoryContextSwitchTo(c->cxt);

	initStringInfo(&c->out);
	MemoryContextSwitchTo(old);
}

static void
ws_close(int slot)
{
	WsConn	   *c = ws_conns[slot];

	closesocket(c->fd);
	MemoryContextDelete(c->cxt);
	pfree(c);
	ws_conns[slot] = NULL;
}

static void
ws_start_write(WsConn *c)
{
	c->state = WS_WRITE;
	c->sent = 0;
	c->last_progress = GetCurrentTimestamp();
}

/*
 * ws_fail_frame answers a frame that cannot be read and closes the
 * connection afterwards: past a broken frame the stream is out of step.
 */
static void
ws_fail_frame(WsConn *c, const char *msg)
{
	ereport(LOG, (errmsg("walshadow bridge: %s", msg)));
	ws_put_error(&c->out, ERRCODE_PROTOCOL_VIOLATION, msg);
	c->close_after_write = true;
	ws_start_write(c);
}

/* ws_write sends what it can; returns false when the connection is done. */
static bool
ws_write(WsConn *c)
{
	while (c->sent < (size_t) c->out.len)
	{
		ssize_t		n = send(c->fd, c->out.data + c->sent, c->out.len - c->sent, MSG_NOSIGNAL);

		if (n < 0)
		{
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return true;
			return false;
		}
		c->sent += n;
		c->last_progress = GetCurrentTimestamp();
	}
	if (c->close_after_write)
		return false;
	MemoryContextReset(c->cxt);
	ws_reset_out(c);
	c->payload = NULL;
	c->state = WS_READ_HEADER;
	c->got = 0;
	return true;
}

/*
 * ws_read reads what is available; when a frame is complete it is served
 * and the response starts going out. Returns false when the connection is
 * done (peer closed, error).
 */
static bool
ws_read(WsConn *c)
{
	for (;;)
	{
		uint8	   *dst;
		size_t		want;
		ssize_t		n;

		if (c->state == WS_READ_HEADER)
		{
			dst = c->header + c->got;
			want = 4 - c->got;
		}
		else
		{
			dst = c->payload + c->got;
			want = c->payload_len - c->got;
		}
		n = recv(c->fd, dst, want, 0);
		if (n < 0)
		{
			if (errno == EINTR)
				continue;
			return errno == EAGAIN || errno == EWOULDBLOCK;
		}
		if (n == 0)
		{
			if (c->state == WS_READ_HEADER && c->got == 0)
				return false;	/* clean close between frames */
			if (c->state == WS_READ_HEADER)
				ws_fail_frame(c, psprintf("truncated frame: the peer closed after %zu of 4 length bytes", c->got));
			else
				ws_fail_frame(c, psprintf("truncated frame: the peer closed after %zu of %u payload bytes",
										  c->got, c->payload_len));
			return ws_write(c);
		}
		c->got += n;
		c->last_progress = GetCurrentTimestamp();
		if (c->state == WS_READ_HEADER)
		{
			uint32		len;

			if (c->got < 4)
				continue;
			len = ((uint32) c->header[0] << 24) | ((uint32) c->header[1] << 16) |
				((uint32) c->header[2] << 8) | (uint32) c->header[3];
			if (len == 0)
			{
				/* The stream is still in step: answer and carry on. */
				ws_put_error(&c->out, ERRCODE_PROTOCOL_VIOLATION, "empty frame: a request needs at least an opcode");
				ws_start_write(c);
				return ws_write(c);
			}
			if (len > (uint32) ws_max_request_mb * 1024U * 1024U)
			{
				ws_fail_frame(c, psprintf("frame of %u bytes exceeds walshadow.max_request_mb (%d MiB)",
										  len, ws_max_request_mb));
				return ws_write(c);
			}
			c->payload_len = len;
			c->payload = MemoryContextAlloc(c->cxt, len);
			c->state = WS_READ_PAYLOAD;
			c->got = 0;
			continue;
		}
		if (c->got < c->payload_len)
			continue;
		ws_serve(c);
		ws_start_write(c);
		return ws_write(c);
	}
}

static void
ws_accept(void)
{
	for (;;)
	{
		pgsocket	fd = accept(ws_listen_fd, NULL, NULL);
		int			slot;
		WsConn	   *c;

		if (fd == PGINVALID_SOCKET)
		{
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
				ereport(LOG, (errcode_for_socket_access(),
							  errmsg("walshadow bridge: accept on %s: %m", ws_socket_path)));
			return;
		}
		for (slot = 0; slot < WS_MAX_CLIENTS && ws_conns[slot] != NULL; slot++)
			;
		if (slot == WS_MAX_CLIENTS || !pg_set_noblock(fd))
		{
			StringInfoData s;

			/* A fresh socket's buffer takes the short refusal whole. */
			initStringInfo(&s);
			ws_put_error(&s, ERRCODE_TOO_MANY_CONNECTIONS, "walshadow bridge: too many clients");
			(void) send(fd, s.data, s.len, MSG_NOSIGNAL | MSG_DONTWAIT);
			pfree(s.data);
			closesocket(fd);
			continue;
		}
		c = MemoryContextAllocZero(TopMemoryContext, sizeof(WsConn));
		c->fd = fd;
		c->cxt = AllocSetContextCreate(TopMemoryContext, "walshadow bridge connection", ALLOCSET_DEFAULT_SIZES);
		ws_reset_out(c);
		c->state = WS_READ_HEADER;
		ws_conns[slot] = c;
	}
}

/* ---- Listening socket ---------------------------------------------------- */

static void
ws_remove_socket(int code, Datum arg)
{
	if (ws_socket_created)
		(void) unlink(ws_socket_path);
}

static void
ws_listen(void)
{
	struct sockaddr_un addr;
	struct stat st;
	pgsocket	fd;
	mode_t		oldmask;
	int			rc;

	memset(&addr, 0, sizeof(addr));
	addr.sun_family = AF_UNIX;
	/*
	 * snprintf, not strlcpy: a module built against a newer major's headers
	 * (which expect the C library's strlcpy) on an older C library lacks it.
	 */
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", ws_socket_path);

	if (lstat(ws_socket_path, &st) == 0)
	{
		if (!S_ISSOCK(st.st_mode))
			ereport(ERROR,
					(errmsg("walshadow bridge: %s exists and is not a socket", ws_socket_path)));
		/* A live server there would lose its clients to us: refuse. */
		fd = socket(AF_UNIX, SOCK_STREAM, 0);
		if (fd != PGINVALID_SOCKET)
		{
			rc = connect(fd, (struct sockaddr *) &addr, sizeof(addr));
			closesocket(fd);
			if (rc == 0)
				ereport(ERROR,
						(errmsg("walshadow bridge: another server is listening on %s", ws_socket_path)));
		}
		if (unlink(ws_socket_path) != 0 && errno != ENOENT)
			ereport(ERROR, (errcode_for_file_access(),
							errmsg("walshadow bridge: removing stale socket %s: %m", ws_socket_path)));
	}

	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (fd == PGINVALID_SOCKET)
		ereport(ERROR, (errcode_for_socket_access(), errmsg("walshadow bridge: socket: %m")));
	oldmask = umask(S_IRWXG | S_IRWXO);
	rc = bind(fd, (struct sockaddr *) &addr, sizeof(addr));
	umask(oldmask);
	if (rc != 0)
	{
		closesocket(fd);
		ereport(ERROR, (errcode_for_socket_access(),
						errmsg("walshadow bridge: bind %s: %m", ws_socket_path)));
	}
	ws_socket_created = true;
	if (chmod(ws_socket_path, S_IRUSR | S_IWUSR) != 0 || listen(fd, 16) != 0 || !pg_set_noblock(fd) ||
		fcntl(fd, F_SETFD, FD_CLOEXEC) != 0)
	{
		closesocket(fd);
		ereport(ERROR, (errcode_for_socket_access(),
						errmsg("walshadow bridge: listening on %s: %m", ws_socket_path)));
	}
	ws_listen_fd = fd;
}

/* ---- Main loop ----------------------------------------------------------- */

static WaitEventSet *
ws_build_wait_set(void)
{
	WaitEventSet *set;
	int			i;

#if PG_VERSION_NUM >= 170000
	set = CreateWaitEventSet(NULL, 3 + WS_MAX_CLIENTS);
#else
	set = CreateWaitEventSet(TopMemoryContext, 3 + WS_MAX_CLIENTS);
#endif
	AddWaitEventToSet(set, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	AddWaitEventToSet(set, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
	AddWaitEventToSet(set, WL_SOCKET_READABLE, ws_listen_fd, NULL, NULL);
	for (i = 0; i < WS_MAX_CLIENTS; i++)
	{
		WsConn	   *c = ws_conns[i];

		if (c != NULL)
			AddWaitEventToSet(set, c->state == WS_WRITE ? WL_SOCKET_WRITEABLE : WL_SOCKET_READABLE,
							  c->fd, NULL, (void *) (intptr_t) (i + 1));
	}
	return set;
}

/* ws_expire drops connections stalled inside a frame past io_timeout_ms. */
static void
ws_expire(void)
{
	TimestampTz now = GetCurrentTimestamp();
	int			i;

	for (i = 0; i < WS_MAX_CLIENTS; i++)
	{
		WsConn	   *c = ws_conns[i];
		bool		busy;

		if (c == NULL)
			continue;
		busy = c->state != WS_READ_HEADER || c->got > 0;
		if (busy && TimestampDifferenceExceeds(c->last_progress, now, ws_io_timeout_ms))
		{
			ereport(LOG, (errmsg("walshadow bridge: dropping a client stalled for over %d ms inside a frame",
								 ws_io_timeout_ms)));
			ws_close(i);
		}
	}
}

/*
 * ws_snapshot_states lets the loop notice which connections changed (fd or
 * direction), so the wait set is rebuilt only then.
 */
static void
ws_snapshot_states(int *states)
{
	int			i;

	for (i = 0; i < WS_MAX_CLIENTS; i++)
		states[i] = ws_conns[i] == NULL ? -1 : ws_conns[i]->fd * 2 + (ws_conns[i]->state == WS_WRITE);
}

void
ws_worker_main(Datum main_arg)
{
	WaitEventSet *set = NULL;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(ws_database, NULL, 0);

	ws_pin_settings();
	ws_apply_reloadable();
	ws_request_cxt = AllocSetContextCreate(TopMemoryContext, "walshadow bridge request", ALLOCSET_DEFAULT_SIZES);
	before_shmem_exit(ws_remove_socket, 0);
	ws_listen();
	ereport(LOG, (errmsg("walshadow bridge listening on %s (database %s)", ws_socket_path, ws_database)));

	for (;;)
	{
		WaitEvent	events[3 + WS_MAX_CLIENTS];
		int			before[WS_MAX_CLIENTS];
		int			after[WS_MAX_CLIENTS];
		int			n;
		int			i;

		if (set == NULL)
			set = ws_build_wait_set();
		ws_snapshot_states(before);
		n = WaitEventSetWait(set, 1000L, events, lengthof(events), PG_WAIT_EXTENSION);
		for (i = 0; i < n; i++)
		{
			WaitEvent  *e = &events[i];

			if (e->events & WL_LATCH_SET)
			{
				ResetLatch(MyLatch);
				continue;
			}
			if (e->fd == ws_listen_fd)
			{
				ws_accept();
				continue;
			}
			if (e->user_data != NULL)
			{
				int			slot = (int) (intptr_t) e->user_data - 1;
				WsConn	   *c = ws_conns[slot];
				bool		alive;

				/* A connection closed earlier in this round may be reused. */
				if (c == NULL || c->fd != e->fd)
					continue;
				CHECK_FOR_INTERRUPTS();
				alive = c->state == WS_WRITE ? ws_write(c) : ws_read(c);
				if (!alive)
					ws_close(slot);
			}
		}
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			ws_apply_reloadable();
		}
		ws_expire();
		ws_snapshot_states(after);
		if (memcmp(before, after, sizeof(before)) != 0)
		{
			FreeWaitEventSet(set);
			set = NULL;
		}
	}
}
