/* server: libmicrohttpd front door feeding the engine (see server.h); the
 * websocket half is server_ws.c. */
#include "server_int.h"
#include "server_deadline.h"

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

void hs_free_answer(struct answer *a)
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

void hs_job_run(job *j) { (void)j; }

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
	r->j.run = hs_job_run;
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
void hs_add_headers(struct MHD_Response *resp, struct answer *a)
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

/* what the server answers itself, before any handler sees the request */
static const char TOO_LARGE[] =
	"{\"error\":{\"code\":\"TOO_LARGE\",\"message\":\"request body too large\"}}\n";
static const char OUT_OF_MEMORY[] =
	"{\"error\":{\"code\":\"UNAVAILABLE\",\"message\":\"server out of memory\"}}\n";
static const char STOPPING[] =
	"{\"error\":{\"code\":\"UNAVAILABLE\",\"message\":\"server stopping\"}}\n";

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
		hs_add_headers(resp, a);
	else if (text[0] == '{')
		/* the server's own answers (413, 503) are JSON error objects */
		MHD_add_response_header(resp, "Content-Type", "application/json");
	ret = MHD_queue_response(c, (unsigned)status, resp);
	MHD_destroy_response(resp);
	return ret;
}

/*
 * Refuses a request whose head is an error (framing.h): a JSON error like
 * the 413 above, and Connection: close. Queued from the first call,
 * before any body byte is read, so libmicrohttpd reads nothing more from
 * the connection and closes it once the answer is sent.
 */
static enum MHD_Result refuse(struct MHD_Connection *c, const struct fr_verdict *v)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;
	char body[256];
	int len;

	len = snprintf(body, sizeof body, "{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}\n",
		       v->code, v->message);
	if (len < 0 || (size_t)len >= sizeof body)
		return MHD_NO;
	resp = MHD_create_response_from_buffer((size_t)len, body, MHD_RESPMEM_MUST_COPY);
	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, "Content-Type", "application/json");
	MHD_add_response_header(resp, "Connection", "close");
	ret = MHD_queue_response(c, (unsigned)v->status, resp);
	MHD_destroy_response(resp);
	return ret;
}

struct field_list {
	struct fr_field *f; /* room for every header field, owned */
	size_t n, cap;      /* fields in f, room */
};

static enum MHD_Result add_field(void *cls, enum MHD_ValueKind kind, const char *key,
				 size_t key_size, const char *value, size_t value_size)
{
	struct field_list *l = cls;

	(void)kind;
	if (l->n == l->cap)
		return MHD_NO;
	l->f[l->n++] = (struct fr_field){ key, key_size, value ? value : "", value ? value_size : 0 };
	return MHD_YES;
}

/*
 * The first call, with the head in and no body read: the checks
 * libmicrohttpd does not make (framing.h), against its read buffer,
 * where method starts and the head's header_size bytes lie (that size is
 * known from the first call on). MHD_YES lets the body come.
 */
static enum MHD_Result check_head(hserver *s, struct req *q, struct MHD_Connection *c,
				  const char *method, const char *version)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
	int count = MHD_get_connection_values(c, MHD_HEADER_KIND, NULL, NULL);
	struct field_list l = { NULL, 0, count > 0 ? (size_t)count : 0 };
	struct fr_verdict v = q->verdict;
	enum MHD_Result ret = MHD_YES;

	l.f = calloc(l.cap ? l.cap : 1, sizeof *l.f);
	if (!l.f)
		return send_answer(c, 503, NULL, OUT_OF_MEMORY, 0);
	MHD_get_connection_values_n(c, MHD_HEADER_KIND, add_field, &l);
	if (!v.status)
		fr_check_target(q->target, q->target_len, version, &v);
	if (!v.status && ci)
		fr_check_head(version + strlen(version), method + ci->header_size, l.f, l.n, &v);
	if (!v.status)
		fr_check_length(l.f, l.n, strcmp(version, MHD_HTTP_VERSION_1_0) == 0, s->max_body, &v);
	if (v.status)
		ret = refuse(c, &v);
	q->target = NULL; /* libmicrohttpd may reuse its buffer from here on */
	free(l.f);
	return ret;
}

/* --- request lifetime --- */

static void req_free(struct req *q)
{
	hs_free_answer(&q->ans);
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
 * Suspends q's connection until hs_wake(). Lock held; server thread, and
 * only from the access handler or the content reader (libmicrohttpd's rule).
 * The flag exists because resuming a connection that is not suspended is
 * undefined in libmicrohttpd.
 */
static void park(struct req *q)
{
	q->suspended = 1;
	MHD_suspend_connection(q->conn);
}

/* Resumes q's connection if it is parked. Lock held; any thread. */
void hs_wake(struct req *q)
{
	if (q->suspended) {
		q->suspended = 0;
		MHD_resume_connection(q->conn);
	}
}

/* The open request id, or NULL. Lock held. */
struct req *hs_find(hserver *s, uint64_t id)
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
	hs_wake(q);
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
	hs_add_headers(resp, &q->ans);
	ret = MHD_queue_response(c, (unsigned)q->ans.status, resp);
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
	q->target = uri;
	q->target_len = uri ? fr_scan_target(uri, &q->verdict) : 0;
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
		ret = hs_queue_upgrade(q, c);
	else
		ret = send_answer(c, q->ans.status, &q->ans, NULL, strcmp(method, "HEAD") == 0);
	hs_free_answer(&q->ans);
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
		hsd_headers_done(s->headers, c);
		return check_head(s, q, c, method, version);
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
		return send_answer(c, 413, NULL, TOO_LARGE, 0);
	hs_check_upgrade(q, c, method, version);
	r = make_job(s, q, c, method);
	if (!r)
		return send_answer(c, 503, NULL, OUT_OF_MEMORY, 0);
	pthread_mutex_lock(&s->lock);
	if (s->stopping) {
		/* hserver_stop resumes only what it saw parked: park nothing new */
		pthread_mutex_unlock(&s->lock);
		job_free(&r->j);
		return send_answer(c, 503, NULL, STOPPING, 0);
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
		hs_ws_unlink(s, l);
	pthread_mutex_unlock(&s->lock);
	if (l)
		hs_ws_end(l, 1006);
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
	hsd_free(s->headers);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->ws_gone);
	free(s);
}

hserver *hserver_start(const struct hserver_opts *o, jobs *q, char *err, size_t errlen)
{
	hserver *s = calloc(1, sizeof *s);
	struct sockaddr_in sa;
	const union MHD_DaemonInfo *info;
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_ALLOW_UPGRADE;
	int threads = o->threads ? o->threads : HSERVER_THREADS;
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
	s->headers = hsd_new(o->header_timeout > 0 ? o->header_timeout : HSERVER_HEADER_TIMEOUT);
	if (!s->headers) {
		snprintf(err, errlen, "out of memory (or no thread for the header deadline)");
		goto fail;
	}
	/* one thread: poll(); a pool shares the listening socket with epoll */
	flags |= threads > 1 ? MHD_USE_EPOLL : MHD_USE_POLL;
	s->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s,
				MHD_OPTION_THREAD_POOL_SIZE, (unsigned)(threads > 1 ? threads : 0),
				MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
				MHD_OPTION_URI_LOG_CALLBACK, on_uri, s,
				MHD_OPTION_NOTIFY_COMPLETED, on_done, s,
				MHD_OPTION_UNESCAPE_CALLBACK, no_unescape, NULL,
				MHD_OPTION_NOTIFY_CONNECTION, hsd_notify, s->headers,
				MHD_OPTION_CONNECTION_LIMIT, (unsigned)HSERVER_CONNECTIONS,
				MHD_OPTION_PER_IP_CONNECTION_LIMIT,
				(unsigned)(o->max_per_client > 0 ? o->max_per_client : HSERVER_PER_CLIENT),
				/* idle seconds; the first headers have their deadline too */
				MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120,
				/* not strict: its two checks answer badly in 0.9.75;
				 * framing.h makes them and the rest of RFC 9112's */
				MHD_OPTION_STRICT_FOR_CLIENT, (int)0,
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
int hs_make_answer(struct answer *a, int status, const char *const *headers,
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
	q = hs_find(s, id);
	if (q && q->posted && !q->answered) {
		q->ans = *a;
		memset(a, 0, sizeof *a);
		q->answered = 1;
		q->streaming = streaming;
		s->nopen--;
		hs_wake(q);
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

	if (hs_make_answer(&a, status, headers, body, len) == 0)
		rc = hand_over(s, id, &a, 0);
	hs_free_answer(&a);
	return rc;
}

int hserver_stream_start(hserver *s, uint64_t id, int status, const char *const *headers)
{
	struct answer a;
	int rc = -1;

	if (hs_make_answer(&a, status, headers, NULL, 0) == 0)
		rc = hand_over(s, id, &a, 1);
	hs_free_answer(&a);
	return rc;
}

/* The stream id while it takes bytes, or NULL. Lock held. */
static struct req *find_stream(hserver *s, uint64_t id)
{
	struct req *q = hs_find(s, id);

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
		hs_wake(q);
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
		hs_wake(q);
		rc = 0;
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

void hserver_stop(hserver *s)
{
	if (!s)
		return;
	/* libmicrohttpd must not stop with parked connections: wake them all,
	 * and with stopping set nothing parks again */
	pthread_mutex_lock(&s->lock);
	s->stopping = 1;
	hs_ws_stop(s);
	for (struct req *q = s->open; q; q = q->next) {
		if (q->posted && !q->answered) {
			q->ans.status = 503;
			q->answered = 1;
			s->nopen--;
		}
		hs_wake(q);
	}
	pthread_mutex_unlock(&s->lock);
	MHD_stop_daemon(s->d);
	free_server(s);
}
