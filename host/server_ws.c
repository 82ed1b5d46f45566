/* server_ws: the websockets of the HTTP server (see server.h): the opening
 * handshake, the 101, the registry of open websockets and their events. */
#include "server_int.h"

#include <lua.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

/* A websocket event for the engine: a message, or the end (closed != 0). */
struct ws_job {
	job j;                       /* the job (first member) */
	long long server;            /* the server's tag */
	uint64_t id;                 /* the websocket (its request id) */
	char *data;                  /* the message, owned */
	size_t len;                  /* its bytes */
	int binary;                  /* a binary message (else text) */
	int closed;                  /* the close code; 0: a message */
	wsconn *w;                   /* the ended connection, freed with the job */
};

/*
 * A websocket in hserver.ws, from the engine's 101 until its I/O thread
 * ends (or the upgrade never happens). The engine queues frames on it
 * before the thread runs; the thread reports through it.
 */
struct wslink {
	uint64_t id;                           /* the websocket (its request id) */
	wsconn *w;                             /* the connection */
	struct MHD_UpgradeResponseHandle *urh; /* gives the socket back */
	hserver *srv;                          /* for its lock, until unlinked */
	jobs *q;                               /* the engine's job queue */
	long long tag;                         /* the server's tag */
	struct ws_job *end;                    /* the closed event, prepared */
	struct req *req;                       /* the request, until upgraded (lock) */
	int started;                           /* its I/O thread runs (lock) */
	struct wslink *next;                   /* in hserver.ws (lock) */
};

/* --- websocket events --- */

static void ws_job_free(job *j)
{
	struct ws_job *r = (struct ws_job *)j;

	free(r->data);
	ws_free(r->w); /* joins its finished thread */
	free(r);
}

/* Pushes {server, ws, data, binary} or {server, ws, closed, reason}. */
static void ws_job_push(job *j, void *ls)
{
	struct ws_job *r = (struct ws_job *)j;
	lua_State *L = ls;

	lua_createtable(L, 0, 4);
	lua_pushinteger(L, (lua_Integer)r->server);
	lua_setfield(L, -2, "server");
	lua_pushinteger(L, (lua_Integer)r->id);
	lua_setfield(L, -2, "ws");
	if (r->closed) {
		lua_pushinteger(L, r->closed);
		lua_setfield(L, -2, "closed");
		lua_pushstring(L, r->w ? ws_reason(r->w) : "");
		lua_setfield(L, -2, "reason");
	} else {
		lua_pushlstring(L, r->data, r->len);
		lua_setfield(L, -2, "data");
		lua_pushboolean(L, r->binary);
		lua_setfield(L, -2, "binary");
	}
}

static struct ws_job *ws_job_new(long long server, uint64_t id)
{
	struct ws_job *r = calloc(1, sizeof *r);

	if (r) {
		r->j.run = hs_job_run;
		r->j.push = ws_job_push;
		r->j.destroy = ws_job_free;
		r->server = server;
		r->id = id;
	}
	return r;
}

/* A message from an I/O thread becomes a job. */
static int ws_on_message(void *cls, int binary, char *data, size_t len)
{
	struct wslink *l = cls;
	struct ws_job *r = ws_job_new(l->tag, l->id);

	if (!r) {
		free(data);
		return -1;
	}
	r->data = data;
	r->len = len;
	r->binary = binary;
	jobs_post_done(l->q, &r->j);
	return 0;
}

/* Takes l out of the registry (hserver_stop waits for it to empty). Lock held. */
void hs_ws_unlink(hserver *s, struct wslink *l)
{
	for (struct wslink **p = &s->ws; *p; p = &(*p)->next)
		if (*p == l) {
			*p = l->next;
			break;
		}
	if (l->req)
		l->req->ws_link = NULL;
	l->req = NULL;
	pthread_cond_broadcast(&s->ws_gone);
}

/* Posts l's closed event, which owns its connection, and frees l. */
void hs_ws_end(struct wslink *l, int code)
{
	l->end->closed = code;
	l->end->w = l->w;
	jobs_post_done(l->q, &l->end->j);
	free(l);
}

/*
 * The I/O thread is done: give the socket back to libmicrohttpd, leave the
 * registry, post the end. Nothing here may touch the server after the
 * unlock.
 */
static void ws_on_closed(void *cls, wsconn *w, int code)
{
	struct wslink *l = cls;
	hserver *s = l->srv;

	(void)w;
	MHD_upgrade_action(l->urh, MHD_UPGRADE_ACTION_CLOSE);
	pthread_mutex_lock(&s->lock);
	hs_ws_unlink(s, l);
	pthread_mutex_unlock(&s->lock);
	hs_ws_end(l, code);
}

/* --- the opening handshake and the 101 --- */

/* Does the comma-separated list hold token (any case)? */
static int has_token(const char *list, const char *token)
{
	size_t n = strlen(token);

	while (list && *list) {
		list += strspn(list, " \t,");
		if (strncasecmp(list, token, n) == 0 && strchr(" \t,", list[n]))
			return 1;
		list = strchr(list, ',');
	}
	return 0;
}

/*
 * Sets q->ws_status for the WebSocket opening handshake (RFC 6455 4.2.1):
 * 0 and the accept value when valid; 426 for an upgrade to websocket of
 * another version; else 400. Server thread.
 */
void hs_check_upgrade(struct req *q, struct MHD_Connection *c, const char *method,
		      const char *version)
{
	const char *up = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Upgrade");
	const char *conn = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Connection");
	const char *ver = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Sec-WebSocket-Version");
	const char *key = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Sec-WebSocket-Key");

	q->ws_status = 400;
	if (!up || !has_token(up, "websocket"))
		return;
	if (!ver || strcmp(ver, "13") != 0)
		q->ws_status = 426;
	else if (conn && has_token(conn, "upgrade") && key && ws_key_valid(key) &&
		 strcmp(method, "GET") == 0 && strcmp(version, MHD_HTTP_VERSION_1_1) == 0 &&
		 ws_accept_key(key, q->ws_accept) == 0)
		q->ws_status = 0;
}

/*
 * libmicrohttpd sent the 101 and hands over the socket (server thread,
 * not under its locks): the websocket's I/O thread starts. The request
 * leaves the open list here, so its on_done (which for upgraded
 * connections runs under libmicrohttpd's cleanup lock) frees it without
 * taking ours.
 */
static void on_upgrade(void *cls, struct MHD_Connection *c, void *req_cls, const char *extra,
		       size_t extra_len, MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
	struct req *q = cls;
	hserver *s = q->srv;
	struct wslink *l;
	int started = 0;

	(void)c;
	(void)req_cls;
	pthread_mutex_lock(&s->lock);
	for (struct req **p = &s->open; *p; p = &(*p)->next)
		if (*p == q) {
			*p = q->next;
			break;
		}
	q->upgraded = 1;
	l = q->ws_link; /* NULL when hserver_stop already ended it */
	q->ws_link = NULL;
	if (l) {
		l->req = NULL;
		l->urh = urh;
		/* under the lock, so the thread's end cannot overtake this */
		started = l->started = ws_run(l->w, sock, extra, extra_len) == 0;
		if (!started)
			hs_ws_unlink(s, l);
	}
	pthread_mutex_unlock(&s->lock);
	if (started)
		return;
	{
		/* stopping (1001 going away) or out of threads (1011): close now */
		unsigned char f[4] = { 0x88, 2, 0x03, l ? 0xF3 : 0xE9 };

		if (send(sock, f, sizeof f, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
			/* the client is gone too */
		}
	}
	MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
	if (l)
		hs_ws_end(l, 1011);
}

/* Queues the 101 whose headers the engine chose; on_upgrade takes over. */
enum MHD_Result hs_queue_upgrade(struct req *q, struct MHD_Connection *c)
{
	struct MHD_Response *resp = MHD_create_response_for_upgrade(on_upgrade, q);
	enum MHD_Result ret;

	if (!resp)
		return MHD_NO;
	hs_add_headers(resp, &q->ans);
	ret = MHD_queue_response(c, MHD_HTTP_SWITCHING_PROTOCOLS, resp);
	MHD_destroy_response(resp);
	return ret;
}

/* --- the API --- */

/* Header names the 101 sets itself (a handler's copies are dropped). */
static int ws_own_header(const char *line)
{
	static const char *const own[] = { "upgrade:", "connection:", "sec-websocket-accept:",
					   "sec-websocket-version:", NULL };

	for (const char *const *o = own; *o; o++)
		if (strncasecmp(line, *o, strlen(*o)) == 0)
			return 1;
	return 0;
}

/* A websocket link for request id, its connection not yet running. */
static struct wslink *ws_link_new(hserver *s, uint64_t id)
{
	struct wslink *l = calloc(1, sizeof *l);
	struct ws_events ev;

	if (!l)
		return NULL;
	*l = (struct wslink){ .id = id, .srv = s, .q = s->q, .tag = s->tag };
	ev = (struct ws_events){ ws_on_message, ws_on_closed, l };
	l->end = ws_job_new(s->tag, id);
	l->w = l->end ? ws_new(&s->wsc, &ev) : NULL;
	if (!l->w) {
		free(l->end);
		free(l);
		return NULL;
	}
	return l;
}

int hserver_ws_accept(hserver *s, uint64_t id, const char *const *headers)
{
	static const char *const h400[] = { "Content-Type: text/plain", NULL };
	static const char *const h426[] = { "Content-Type: text/plain", "Sec-WebSocket-Version: 13", NULL };
	const char **lines = NULL;
	struct wslink *l = NULL;
	struct answer a;
	struct req *q;
	char accept[64];
	size_t n = 0;
	int status, rc = -1;

	memset(&a, 0, sizeof a);
	pthread_mutex_lock(&s->lock);
	q = hs_find(s, id);
	status = q && q->posted && !q->answered ? q->ws_status : -1;
	if (status == 0)
		snprintf(accept, sizeof accept, "Sec-WebSocket-Accept: %s", q->ws_accept);
	pthread_mutex_unlock(&s->lock);
	if (status == 400)
		return hserver_respond(s, id, 400, h400, "a WebSocket handshake was expected\n", 35) ? -1 : 400;
	if (status == 426)
		return hserver_respond(s, id, 426, h426, "WebSocket version 13 is required\n", 33) ? -1 : 426;
	if (status != 0)
		return -1;
	for (const char *const *h = headers; h && *h; h++)
		n++;
	lines = calloc(n + 4, sizeof *lines);
	if (!lines)
		goto out;
	n = 0;
	for (const char *const *h = headers; h && *h; h++)
		if (!ws_own_header(*h))
			lines[n++] = *h;
	lines[n++] = "Upgrade: websocket";
	lines[n++] = "Connection: Upgrade";
	lines[n++] = accept;
	if (hs_make_answer(&a, 101, lines, NULL, 0) != 0 || !(l = ws_link_new(s, id)))
		goto out;
	pthread_mutex_lock(&s->lock);
	q = hs_find(s, id);
	if (q && q->posted && !q->answered && !s->stopping) {
		q->ans = a;
		memset(&a, 0, sizeof a);
		q->answered = 1;
		q->upgrading = 1;
		q->ws_link = l;
		l->req = q;
		l->next = s->ws;
		s->ws = l;
		l = NULL;
		s->nopen--;
		hs_wake(q);
		rc = 0;
	}
	pthread_mutex_unlock(&s->lock);
out:
	hs_free_answer(&a);
	free(lines);
	if (l) {
		ws_free(l->w);
		free(l->end);
		free(l);
	}
	return rc;
}

/* The open websocket id, or NULL. Lock held. */
static struct wslink *ws_find(hserver *s, uint64_t id)
{
	for (struct wslink *l = s->ws; l; l = l->next)
		if (l->id == id)
			return l;
	return NULL;
}

int hserver_ws_send(hserver *s, uint64_t id, int opcode, const char *data, size_t len)
{
	struct wslink *l;
	int rc = -1;

	pthread_mutex_lock(&s->lock);
	l = ws_find(s, id);
	if (l)
		rc = ws_send(l->w, opcode, data, len);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int hserver_ws_close(hserver *s, uint64_t id, int code, const char *reason, size_t len)
{
	struct wslink *l;
	int rc = -1;

	pthread_mutex_lock(&s->lock);
	l = ws_find(s, id);
	if (l)
		rc = ws_close(l->w, code, reason, len);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/*
 * Ends every websocket for hserver_stop: running ones close with 1001 and
 * are joined, those still waiting for their upgrade end at once. Lock
 * held (released while it waits for the I/O threads to leave).
 */
void hs_ws_stop(hserver *s)
{
	wsconn **ended;
	size_t nws = 0;

	/* running websockets close with 1001: each thread gives its socket
	 * back to libmicrohttpd and leaves the list within about a second;
	 * those still waiting for their upgrade end here */
	for (struct wslink *l = s->ws; l; l = l->next)
		nws++;
	ended = calloc(nws ? nws : 1, sizeof *ended);
	nws = 0;
	for (struct wslink **p = &s->ws; *p;) {
		struct wslink *l = *p;

		if (l->started) {
			ws_shutdown(l->w);
			if (ended)
				ended[nws++] = l->w;
			p = &l->next;
		} else {
			hs_ws_unlink(s, l);
			hs_ws_end(l, 1001);
		}
	}
	while (s->ws)
		pthread_cond_wait(&s->ws_gone, &s->lock);
	/* their closed events own them, but are not destroyed before this
	 * engine thread returns: join the threads now */
	for (size_t i = 0; i < nws; i++)
		ws_join(ended[i]);
	free(ended);
}
