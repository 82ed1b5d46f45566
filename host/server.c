/* server: libmicrohttpd front door feeding the engine (see server.h). */
#include "server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <lauxlib.h>
#include <lua.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <openssl/crypto.h>

#include "websocket.h"

struct answer {
	int status;            /* HTTP status */
	char **headers;        /* "Name: value" lines, owned */
	size_t nheaders;       /* lines in headers */
	char *body;            /* owned */
	size_t len;            /* bytes of body */
};

/* Stream bytes the engine queued and libmicrohttpd has not taken yet. */
struct outq {
	char *buf;             /* unsent bytes start at buf + off */
	size_t off, len, cap;  /* offset, unsent bytes, allocated */
	int ended;             /* the engine finished: end once drained */
	int failed;            /* cut the connection (client too slow, stream error) */
};

/*
 * One request. The connection holds a reference until libmicrohttpd
 * completes it (on_done); a stream response holds another until the
 * response is destroyed, which may come later. Fields the engine thread
 * reads or writes are guarded by hserver.lock.
 */
struct req {
	uint64_t id;                 /* handed to the engine */
	hserver *srv;                /* the server (its lock, for callbacks) */
	struct MHD_Connection *conn; /* the connection */
	char *uri;                   /* the raw request target (path?query) */
	char *body;                  /* upload so far */
	size_t len, cap;             /* body bytes, allocated */
	int too_large;               /* body exceeded max_body */
	int started;                 /* the first (header) call was seen */
	int posted;                  /* handed to the engine (lock) */
	int answered;                /* answer is ready (lock) */
	int streaming;               /* the answer is a stream (lock) */
	int suspended;               /* we suspended conn and not yet resumed it (lock) */
	int refs;                    /* connection + stream response (lock) */
	int ws_status;               /* WebSocket handshake: 0 valid, else 400 or 426 */
	char ws_accept[WS_ACCEPT_LEN + 1]; /* its Sec-WebSocket-Accept, when valid */
	int upgrading;               /* the answer is a 101 to a websocket (lock) */
	int upgraded;                /* the socket went to an I/O thread; unlinked */
	struct wslink *ws_link;      /* its websocket, until upgraded (lock) */
	struct answer ans;           /* the engine's answer (status, headers, body) */
	struct outq out;             /* stream bytes (lock) */
	struct req *next;            /* in hserver.open (lock) */
};

/* What the engine gets: a copy of the request, freed by the job. */
struct req_job {
	job j;                       /* the job (first member) */
	long long server;            /* the server's tag */
	uint64_t id;                 /* request id */
	char *method, *path, *query; /* owned */
	char **hnames, **hvalues;    /* headers, owned */
	size_t nh;                   /* header count */
	char *body;                  /* owned */
	size_t len;                  /* body bytes */
	char peer[64];               /* client address */
	int websocket;               /* a valid WebSocket opening handshake */
};

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

struct hserver {
	struct MHD_Daemon *d;  /* the daemon */
	jobs *q;               /* the engine's job queue */
	size_t max_body;       /* request body cap */
	long long tag;         /* req.server in Lua */
	char *cert, *key;      /* PEM copies (TLS), or NULL */
	pthread_mutex_t lock;  /* guards open, nopen, next_id, stopping, and req fields */
	struct req *open;      /* requests not yet completed */
	int nopen;             /* posted and unanswered */
	uint64_t next_id;      /* last id */
	int stopping;          /* hserver_stop began: suspend nothing more */
	int port;              /* bound port */
	struct ws_conf wsc;    /* websocket limits and timers */
	struct wslink *ws;     /* open websockets (lock) */
	pthread_cond_t ws_gone; /* a websocket left ws */
};

static void free_answer(struct answer *a)
{
	for (size_t i = 0; i < a->nheaders; i++)
		free(a->headers[i]);
	free(a->headers);
	free(a->body);
	memset(a, 0, sizeof *a);
}

static void job_free(job *j)
{
	struct req_job *r = (struct req_job *)j;

	for (size_t i = 0; i < r->nh; i++) {
		free(r->hnames[i]);
		free(r->hvalues[i]);
	}
	free(r->hnames);
	free(r->hvalues);
	free(r->method);
	free(r->path);
	free(r->query);
	free(r->body);
	free(r);
}

static void job_run(job *j) { (void)j; }

/* Pushes {server = tag, id, method, path, query, headers, body, peer}. */
static void job_push(job *j, void *ls)
{
	struct req_job *r = (struct req_job *)j;
	lua_State *L = ls;

	lua_createtable(L, 0, 8);
	lua_pushinteger(L, (lua_Integer)r->server);
	lua_setfield(L, -2, "server");
	lua_pushinteger(L, (lua_Integer)r->id);
	lua_setfield(L, -2, "id");
	lua_pushstring(L, r->method);
	lua_setfield(L, -2, "method");
	lua_pushstring(L, r->path);
	lua_setfield(L, -2, "path");
	lua_pushstring(L, r->query);
	lua_setfield(L, -2, "query");
	lua_createtable(L, 0, (int)r->nh);
	for (size_t i = 0; i < r->nh; i++) {
		/* repeated headers join with "," as SigV4 canonicalization does */
		if (lua_getfield(L, -1, r->hnames[i]) == LUA_TSTRING) {
			lua_pushfstring(L, "%s,%s", lua_tostring(L, -1), r->hvalues[i]);
			lua_remove(L, -2);
		} else {
			lua_pop(L, 1);
			lua_pushstring(L, r->hvalues[i]);
		}
		lua_setfield(L, -2, r->hnames[i]);
	}
	lua_setfield(L, -2, "headers");
	lua_pushlstring(L, r->body ? r->body : "", r->len);
	lua_setfield(L, -2, "body");
	lua_pushstring(L, r->peer);
	lua_setfield(L, -2, "peer");
	if (r->websocket) {
		lua_pushboolean(L, 1);
		lua_setfield(L, -2, "websocket");
	}
}

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
		r->j.run = job_run;
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
static void ws_unlink(hserver *s, struct wslink *l)
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
static void ws_end(struct wslink *l, int code)
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
	ws_unlink(s, l);
	pthread_mutex_unlock(&s->lock);
	ws_end(l, code);
}

struct hdr_collect {
	struct req_job *r;  /* where headers go */
	int failed;         /* out of memory */
};

static enum MHD_Result collect_header(void *cls, enum MHD_ValueKind kind,
				      const char *key, const char *value)
{
	struct hdr_collect *c = cls;
	struct req_job *r = c->r;
	char **n, **v;

	(void)kind;
	n = realloc(r->hnames, (r->nh + 1) * sizeof *n);
	if (n)
		r->hnames = n;
	v = n ? realloc(r->hvalues, (r->nh + 1) * sizeof *v) : NULL;
	if (v)
		r->hvalues = v;
	if (!n || !v) {
		c->failed = 1;
		return MHD_NO;
	}
	r->hnames[r->nh] = strdup(key);
	r->hvalues[r->nh] = strdup(value ? value : "");
	if (!r->hnames[r->nh] || !r->hvalues[r->nh]) {
		free(r->hnames[r->nh]);
		free(r->hvalues[r->nh]);
		c->failed = 1;
		return MHD_NO;
	}
	for (char *p = r->hnames[r->nh]; *p; p++)
		*p = (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
	r->nh++;
	return MHD_YES;
}

static struct req_job *make_job(hserver *s, struct req *q, struct MHD_Connection *c,
				const char *method)
{
	struct req_job *r = calloc(1, sizeof *r);
	struct hdr_collect hc = { r, 0 };
	const union MHD_ConnectionInfo *ci;
	const char *qm;

	if (!r)
		return NULL;
	r->j.run = job_run;
	r->j.push = job_push;
	r->j.destroy = job_free;
	r->server = s->tag;
	r->id = q->id;
	qm = strchr(q->uri, '?');
	r->method = strdup(method);
	r->path = qm ? strndup(q->uri, (size_t)(qm - q->uri)) : strdup(q->uri);
	r->query = strdup(qm ? qm + 1 : "");
	r->body = q->body;
	r->len = q->len;
	q->body = NULL;
	q->len = q->cap = 0;
	MHD_get_connection_values(c, MHD_HEADER_KIND, collect_header, &hc);
	ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	if (ci && ci->client_addr && ci->client_addr->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)ci->client_addr)->sin_addr,
			  r->peer, sizeof r->peer);
	r->websocket = q->ws_status == 0;
	if (!r->method || !r->path || !r->query || hc.failed) {
		job_free(&r->j);
		return NULL;
	}
	return r;
}

/* the Content-Length an answer declares, or -1 */
static long long declared_length(const struct answer *a)
{
	for (size_t i = 0; i < a->nheaders; i++)
		if (strncasecmp(a->headers[i], "content-length:", 15) == 0)
			return atoll(a->headers[i] + 15);
	return -1;
}

static ssize_t never_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)cls;
	(void)pos;
	(void)buf;
	(void)max;
	return MHD_CONTENT_READER_END_WITH_ERROR;
}

/* Adds the answer's header lines; libmicrohttpd sets Content-Length itself. */
static void add_headers(struct MHD_Response *resp, struct answer *a)
{
	for (size_t i = 0; i < a->nheaders; i++) {
		char *colon = strchr(a->headers[i], ':');

		if (!colon)
			continue;
		*colon = 0;
		if (strcasecmp(a->headers[i], "content-length") != 0)
			MHD_add_response_header(resp, a->headers[i], colon + 1 + strspn(colon + 1, " "));
		*colon = ':';
	}
}

static enum MHD_Result send_answer(struct MHD_Connection *c, int status, struct answer *a,
				   const char *text, int head)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;
	long long declared;

	if (a && head && (declared = declared_length(a)) > 0)
		/* HEAD: libmicrohttpd announces the size of a body it never reads */
		resp = MHD_create_response_from_callback((uint64_t)declared, 4096, never_read, NULL, NULL);
	else if (a)
		resp = MHD_create_response_from_buffer(a->len, a->body, MHD_RESPMEM_MUST_COPY);
	else
		resp = MHD_create_response_from_buffer(strlen(text), (void *)text,
						       MHD_RESPMEM_PERSISTENT);
	if (!resp)
		return MHD_NO;
	if (a)
		add_headers(resp, a);
	ret = MHD_queue_response(c, (unsigned)status, resp);
	MHD_destroy_response(resp);
	return ret;
}

/* --- request lifetime --- */

static void req_free(struct req *q)
{
	free_answer(&q->ans);
	free(q->uri);
	free(q->body);
	free(q->out.buf);
	free(q);
}

/* Drops one reference; the last one frees q. Server thread. */
static void req_unref(struct req *q)
{
	hserver *s = q->srv;
	int left;

	pthread_mutex_lock(&s->lock);
	left = --q->refs;
	pthread_mutex_unlock(&s->lock);
	if (left == 0)
		req_free(q);
}

/*
 * Suspends q's connection until wake(). Lock held; server thread, and only
 * from the access handler or the content reader (libmicrohttpd's rule).
 * The flag exists because resuming a connection that is not suspended is
 * undefined in libmicrohttpd.
 */
static void park(struct req *q)
{
	q->suspended = 1;
	MHD_suspend_connection(q->conn);
}

/* Resumes q's connection if it is parked. Lock held; any thread. */
static void wake(struct req *q)
{
	if (q->suspended) {
		q->suspended = 0;
		MHD_resume_connection(q->conn);
	}
}

/* The open request id, or NULL. Lock held. */
static struct req *find(hserver *s, uint64_t id)
{
	for (struct req *q = s->open; q; q = q->next)
		if (q->id == id)
			return q;
	return NULL;
}

/* --- streams --- */

/* Queues len bytes; -1 when out of memory. Lock held. */
static int outq_append(struct outq *o, const char *data, size_t len)
{
	if (len == 0)
		return 0;
	if (o->off + o->len + len > o->cap && o->off) {
		memmove(o->buf, o->buf + o->off, o->len);
		o->off = 0;
	}
	if (o->len + len > o->cap) {
		size_t cap = o->cap ? o->cap : 4096;
		char *b;

		while (cap < o->len + len)
			cap *= 2;
		b = realloc(o->buf, cap);
		if (!b)
			return -1;
		o->buf = b;
		o->cap = cap;
	}
	memcpy(o->buf + o->off + o->len, data, len);
	o->len += len;
	return 0;
}

/* Cuts the stream: the reader ends with an error and the connection closes. */
static void fail_stream(struct req *q)
{
	q->out.failed = 1;
	free(q->out.buf);
	q->out.buf = NULL;
	q->out.off = q->out.len = q->out.cap = 0;
	wake(q);
}

/*
 * Has the client closed its end? Asked only of a parked connection, whose
 * socket no server thread reads or writes then: a peek that sees EOF or an
 * error means gone. A sending connection finds out by itself (the send
 * fails and libmicrohttpd closes it). Lock held.
 */
static int peer_closed(struct req *q)
{
	const union MHD_ConnectionInfo *ci;
	ssize_t n;
	char b;

	if (!q->suspended)
		return 0;
	ci = MHD_get_connection_info(q->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (!ci)
		return 0;
	n = recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
	return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/*
 * The content reader of a stream (server thread). With nothing queued it
 * parks the connection and returns 0, the documented way to wait without
 * spinning; the next write or the end wakes it.
 */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct req *q = cls;
	hserver *s = q->srv;
	ssize_t n;

	(void)pos;
	pthread_mutex_lock(&s->lock);
	if (q->out.failed || s->stopping) {
		n = MHD_CONTENT_READER_END_WITH_ERROR;
	} else if (q->out.len) {
		size_t k = q->out.len < max ? q->out.len : max;

		memcpy(buf, q->out.buf + q->out.off, k);
		q->out.off += k;
		q->out.len -= k;
		if (q->out.len == 0)
			q->out.off = 0;
		n = (ssize_t)k;
	} else if (q->out.ended) {
		n = MHD_CONTENT_READER_END_OF_STREAM;
	} else {
		park(q);
		n = 0;
	}
	pthread_mutex_unlock(&s->lock);
	return n;
}

/* The stream response is destroyed (it may outlive the request's on_done). */
static void stream_release(void *cls)
{
	req_unref(cls);
}

/* Queues a stream response: no Content-Length, the body comes from stream_read. */
static enum MHD_Result queue_stream(struct req *q, struct MHD_Connection *c)
{
	hserver *s = q->srv;
	struct MHD_Response *resp;
	enum MHD_Result ret;

	pthread_mutex_lock(&s->lock);
	q->refs++; /* the response's, dropped by stream_release */
	pthread_mutex_unlock(&s->lock);
	resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_read, q,
						 stream_release);
	if (!resp) {
		req_unref(q);
		return MHD_NO;
	}
	add_headers(resp, &q->ans);
	ret = MHD_queue_response(c, (unsigned)q->ans.status, resp);
	MHD_destroy_response(resp);
	return ret;
}

/* --- websockets --- */

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
static void check_upgrade(struct req *q, struct MHD_Connection *c, const char *method,
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
			ws_unlink(s, l);
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
		ws_end(l, 1011);
}

/* Queues the 101 whose headers the engine chose; on_upgrade takes over. */
static enum MHD_Result queue_upgrade(struct req *q, struct MHD_Connection *c)
{
	struct MHD_Response *resp = MHD_create_response_for_upgrade(on_upgrade, q);
	enum MHD_Result ret;

	if (!resp)
		return MHD_NO;
	add_headers(resp, &q->ans);
	ret = MHD_queue_response(c, MHD_HTTP_SWITCHING_PROTOCOLS, resp);
	MHD_destroy_response(resp);
	return ret;
}

/* --- libmicrohttpd callbacks --- */

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
	hserver *s = cls;
	struct req *q = calloc(1, sizeof *q);

	if (!q)
		return NULL;
	q->uri = strdup(uri ? uri : "/");
	q->conn = c;
	q->srv = s;
	q->refs = 1; /* the connection's, dropped by on_done */
	pthread_mutex_lock(&s->lock);
	q->id = ++s->next_id;
	q->next = s->open;
	s->open = q;
	pthread_mutex_unlock(&s->lock);
	return q;
}

/* Sends what the engine answered. Once answered is set the engine no
 * longer touches q->ans, so the server thread reads it unlocked. */
static enum MHD_Result send_engine_answer(struct req *q, struct MHD_Connection *c,
					  const char *method)
{
	enum MHD_Result ret;

	if (q->ans.status == 0)
		ret = MHD_NO; /* the engine asked to drop the connection (a reset) */
	else if (q->streaming)
		ret = queue_stream(q, c);
	else if (q->upgrading)
		ret = queue_upgrade(q, c);
	else
		ret = send_answer(c, q->ans.status, &q->ans, NULL, strcmp(method, "HEAD") == 0);
	free_answer(&q->ans);
	return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version,
				  const char *data, size_t *data_size, void **req_cls)
{
	hserver *s = cls;
	struct req *q = *req_cls;
	struct req_job *r;
	int answered, posted;

	(void)url;
	if (!q || !q->uri)
		return MHD_NO;
	if (!q->started) {
		q->started = 1; /* headers only; the body (if any) follows */
		return MHD_YES;
	}
	if (*data_size) {
		if (q->len + *data_size > s->max_body) {
			q->too_large = 1;
		} else {
			if (q->len + *data_size + 1 > q->cap) {
				size_t cap = (q->len + *data_size + 1) * 2;
				char *b = realloc(q->body, cap);

				if (!b)
					return MHD_NO;
				q->body = b;
				q->cap = cap;
			}
			memcpy(q->body + q->len, data, *data_size);
			q->len += *data_size;
		}
		*data_size = 0;
		return MHD_YES;
	}
	pthread_mutex_lock(&s->lock);
	answered = q->answered;
	posted = q->posted;
	pthread_mutex_unlock(&s->lock);
	if (answered)
		return send_engine_answer(q, c, method);
	if (posted)
		return MHD_YES; /* woken without an answer: keep waiting */
	if (q->too_large)
		return send_answer(c, 413, NULL, "request body too large", 0);
	check_upgrade(q, c, method, version);
	r = make_job(s, q, c, method);
	if (!r)
		return send_answer(c, 503, NULL, "server out of memory", 0);
	pthread_mutex_lock(&s->lock);
	if (s->stopping) {
		/* hserver_stop resumes only what it saw parked: park nothing new */
		pthread_mutex_unlock(&s->lock);
		job_free(&r->j);
		return send_answer(c, 503, NULL, "server stopping", 0);
	}
	q->posted = 1;
	s->nopen++;
	park(q); /* before the post, so the engine always finds it parked */
	pthread_mutex_unlock(&s->lock);
	jobs_post_done(s->q, &r->j);
	return MHD_YES;
}

static void on_done(void *cls, struct MHD_Connection *c, void **req_cls,
		    enum MHD_RequestTerminationCode toe)
{
	hserver *s = cls;
	struct req *q = *req_cls;
	struct wslink *l;

	(void)c;
	(void)toe;
	if (!q)
		return;
	*req_cls = NULL;
	if (q->upgraded) {
		/* unlinked by on_upgrade, and nobody else holds it */
		req_free(q);
		return;
	}
	pthread_mutex_lock(&s->lock);
	/* unlinked, the request is gone for the engine: answers and writes fail */
	for (struct req **p = &s->open; *p; p = &(*p)->next)
		if (*p == q) {
			*p = q->next;
			break;
		}
	if (q->posted && !q->answered)
		s->nopen--;
	q->suspended = 0;
	l = q->ws_link; /* answered with a 101 that never happened */
	if (l)
		ws_unlink(s, l);
	pthread_mutex_unlock(&s->lock);
	if (l)
		ws_end(l, 1006);
	req_unref(q);
}

/* keep the path exactly as sent: SigV4 signs the encoded form */
static size_t no_unescape(void *cls, struct MHD_Connection *c, char *s)
{
	(void)cls;
	(void)c;
	return strlen(s);
}

/* --- the API --- */

static void free_server(hserver *s)
{
	if (s->key)
		OPENSSL_cleanse(s->key, strlen(s->key));
	free(s->key);
	free(s->cert);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->ws_gone);
	free(s);
}

hserver *hserver_start(const struct hserver_opts *o, jobs *q, char *err, size_t errlen)
{
	hserver *s = calloc(1, sizeof *s);
	struct sockaddr_in sa;
	const union MHD_DaemonInfo *info;
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_ALLOW_SUSPEND_RESUME |
			 MHD_ALLOW_UPGRADE;
	struct MHD_OptionItem tls[3];

	if (!s) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->ws_gone, NULL);
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)o->port);
	if (inet_pton(AF_INET, o->addr, &sa.sin_addr) != 1) {
		snprintf(err, errlen, "listen address '%s' is not an IPv4 address", o->addr);
		goto fail;
	}
	memset(tls, 0, sizeof tls);
	tls[0].option = MHD_OPTION_END;
	if (o->cert_pem || o->key_pem) {
		if (!o->cert_pem || !o->key_pem) {
			snprintf(err, errlen, "TLS needs both a certificate and a key");
			goto fail;
		}
		if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
			snprintf(err, errlen, "this libmicrohttpd was built without TLS");
			goto fail;
		}
		/* copies: libmicrohttpd keeps the pointers for the daemon's life */
		s->cert = strdup(o->cert_pem);
		s->key = strdup(o->key_pem);
		if (!s->cert || !s->key) {
			snprintf(err, errlen, "out of memory");
			goto fail;
		}
		flags |= MHD_USE_TLS;
		tls[0] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_CERT, 0, s->cert };
		tls[1] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_KEY, 0, s->key };
		tls[2].option = MHD_OPTION_END;
	}
	s->q = q;
	s->tag = o->tag;
	s->max_body = o->max_body ? o->max_body : (size_t)64 << 20;
	s->wsc = (struct ws_conf){ o->ws_max_message, o->ws_ping, o->ws_idle };
	s->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s,
				MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
				MHD_OPTION_URI_LOG_CALLBACK, on_uri, s,
				MHD_OPTION_NOTIFY_COMPLETED, on_done, s,
				MHD_OPTION_UNESCAPE_CALLBACK, no_unescape, NULL,
				MHD_OPTION_CONNECTION_LIMIT, (unsigned)1000,
				MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120,
				MHD_OPTION_ARRAY, tls,
				MHD_OPTION_END);
	if (!s->d) {
		snprintf(err, errlen, "cannot listen on %s:%d (in use, or not allowed%s)", o->addr,
			 o->port, s->cert ? ", or the certificate and key are not valid PEM" : "");
		goto fail;
	}
	info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
	s->port = info ? info->port : o->port;
	return s;
fail:
	free_server(s);
	return NULL;
}

int hserver_port(const hserver *s) { return s->port; }

int hserver_open_requests(hserver *s)
{
	int n;

	pthread_mutex_lock(&s->lock);
	n = s->nopen;
	pthread_mutex_unlock(&s->lock);
	return n;
}

/* Copies status, header lines and body into a; -1 when out of memory. */
static int make_answer(struct answer *a, int status, const char *const *headers,
		       const char *body, size_t len)
{
	size_t n = 0;

	memset(a, 0, sizeof *a);
	for (const char *const *h = headers; h && *h; h++)
		n++;
	a->status = status;
	a->headers = calloc(n + 1, sizeof *a->headers);
	a->body = malloc(len ? len : 1);
	if (!a->headers || !a->body)
		return -1;
	for (a->nheaders = 0; a->nheaders < n; a->nheaders++)
		if (!(a->headers[a->nheaders] = strdup(headers[a->nheaders])))
			return -1;
	if (len)
		memcpy(a->body, body, len);
	a->len = len;
	return 0;
}

/* Gives a to the unanswered request id and wakes it; -1 when there is none. */
static int hand_over(hserver *s, uint64_t id, struct answer *a, int streaming)
{
	struct req *q;
	int rc = -1;

	pthread_mutex_lock(&s->lock);
	q = find(s, id);
	if (q && q->posted && !q->answered) {
		q->ans = *a;
		memset(a, 0, sizeof *a);
		q->answered = 1;
		q->streaming = streaming;
		s->nopen--;
		wake(q);
		rc = 0;
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int hserver_respond(hserver *s, uint64_t id, int status, const char *const *headers,
		    const char *body, size_t len)
{
	struct answer a;
	int rc = -1;

	if (make_answer(&a, status, headers, body, len) == 0)
		rc = hand_over(s, id, &a, 0);
	free_answer(&a);
	return rc;
}

int hserver_stream_start(hserver *s, uint64_t id, int status, const char *const *headers)
{
	struct answer a;
	int rc = -1;

	if (make_answer(&a, status, headers, NULL, 0) == 0)
		rc = hand_over(s, id, &a, 1);
	free_answer(&a);
	return rc;
}

/* The stream id while it takes bytes, or NULL. Lock held. */
static struct req *find_stream(hserver *s, uint64_t id)
{
	struct req *q = find(s, id);

	return q && q->streaming && !q->out.ended && !q->out.failed ? q : NULL;
}

int hserver_stream_write(hserver *s, uint64_t id, const char *data, size_t len)
{
	struct req *q;
	int rc = -1;

	pthread_mutex_lock(&s->lock);
	q = find_stream(s, id);
	if (!q)
		goto out;
	if (peer_closed(q) || len > HSERVER_STREAM_MAX - q->out.len ||
	    outq_append(&q->out, data, len) != 0) {
		fail_stream(q);
		goto out;
	}
	if (len)
		wake(q);
	rc = 0;
out:
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int hserver_stream_end(hserver *s, uint64_t id, int failed)
{
	struct req *q;
	int rc = -1;

	pthread_mutex_lock(&s->lock);
	q = find_stream(s, id);
	if (q && failed) {
		fail_stream(q);
		rc = 0;
	} else if (q) {
		q->out.ended = 1;
		wake(q);
		rc = 0;
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

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
	q = find(s, id);
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
	if (make_answer(&a, 101, lines, NULL, 0) != 0 || !(l = ws_link_new(s, id)))
		goto out;
	pthread_mutex_lock(&s->lock);
	q = find(s, id);
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
		wake(q);
		rc = 0;
	}
	pthread_mutex_unlock(&s->lock);
out:
	free_answer(&a);
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

void hserver_stop(hserver *s)
{
	wsconn **ended;
	size_t nws = 0;

	if (!s)
		return;
	/* libmicrohttpd must not stop with parked connections: wake them all,
	 * and with stopping set nothing parks again */
	pthread_mutex_lock(&s->lock);
	s->stopping = 1;
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
			ws_unlink(s, l);
			ws_end(l, 1001);
		}
	}
	while (s->ws)
		pthread_cond_wait(&s->ws_gone, &s->lock);
	/* their closed events own them, but are not destroyed before this
	 * engine thread returns: join the threads now */
	for (size_t i = 0; i < nws; i++)
		ws_join(ended[i]);
	free(ended);
	for (struct req *q = s->open; q; q = q->next) {
		if (q->posted && !q->answered) {
			q->ans.status = 503;
			q->answered = 1;
			s->nopen--;
		}
		wake(q);
	}
	pthread_mutex_unlock(&s->lock);
	MHD_stop_daemon(s->d);
	free_server(s);
}
