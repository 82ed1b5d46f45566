/* server: libmicrohttpd front door feeding the engine (see server.h). */
#include "server.h"

#include <arpa/inet.h>
#include <lauxlib.h>
#include <lua.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct answer {
	int status;            /* HTTP status */
	char **headers;        /* "Name: value" lines, owned */
	size_t nheaders;       /* lines in headers */
	char *body;            /* owned */
	size_t len;            /* bytes of body */
};

/* One request: owned by the server until MHD completes the connection. */
struct req {
	uint64_t id;                 /* handed to the engine */
	struct MHD_Connection *conn; /* the suspended connection */
	char *uri;                   /* the raw request target (path?query) */
	char *body;                  /* upload so far */
	size_t len, cap;             /* body bytes, allocated */
	int too_large;               /* body exceeded max_body */
	int started;                 /* the first (header) call was seen */
	int posted;                  /* handed to the engine */
	int answered;                /* answer is ready */
	struct answer ans;           /* the engine's answer */
	struct req *next;            /* in hserver.open */
};

/* What the engine gets: a copy of the request, freed by the job. */
struct req_job {
	job j;                       /* the job (first member) */
	uint64_t id;                 /* request id */
	char *method, *path, *query; /* owned */
	char **hnames, **hvalues;    /* headers, owned */
	size_t nh;                   /* header count */
	char *body;                  /* owned */
	size_t len;                  /* body bytes */
	char peer[64];               /* client address */
};

struct hserver {
	struct MHD_Daemon *d;  /* the daemon */
	jobs *q;               /* the engine's job queue */
	size_t max_body;       /* request body cap */
	pthread_mutex_t lock;  /* guards open and next_id */
	struct req *open;      /* requests not yet completed */
	int nopen;             /* posted and unanswered */
	uint64_t next_id;      /* last id */
	int port;              /* bound port */
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

/* Pushes {server = true, id, method, path, query, headers, body, peer}. */
static void job_push(job *j, void *ls)
{
	struct req_job *r = (struct req_job *)j;
	lua_State *L = ls;

	lua_createtable(L, 0, 8);
	lua_pushboolean(L, 1);
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

static struct req_job *make_job(struct req *q, struct MHD_Connection *c, const char *method)
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
	for (size_t i = 0; a && i < a->nheaders; i++) {
		char *colon = strchr(a->headers[i], ':');

		if (!colon)
			continue;
		*colon = 0;
		if (strcasecmp(a->headers[i], "content-length") != 0)
			MHD_add_response_header(resp, a->headers[i], colon + 1 + strspn(colon + 1, " "));
		*colon = ':';
	}
	ret = MHD_queue_response(c, (unsigned)status, resp);
	MHD_destroy_response(resp);
	return ret;
}

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
	hserver *s = cls;
	struct req *q = calloc(1, sizeof *q);

	if (!q)
		return NULL;
	q->uri = strdup(uri ? uri : "/");
	q->conn = c;
	pthread_mutex_lock(&s->lock);
	q->id = ++s->next_id;
	q->next = s->open;
	s->open = q;
	pthread_mutex_unlock(&s->lock);
	return q;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version,
				  const char *data, size_t *data_size, void **req_cls)
{
	hserver *s = cls;
	struct req *q = *req_cls;
	struct req_job *r;
	enum MHD_Result ret;

	(void)url;
	(void)version;
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
	if (q->answered && q->ans.status == 0) {
		free_answer(&q->ans);
		return MHD_NO; /* the engine asked to drop the connection (a reset) */
	}
	if (q->answered) {
		ret = send_answer(c, q->ans.status, &q->ans, NULL, strcmp(method, "HEAD") == 0);
		free_answer(&q->ans);
		return ret;
	}
	if (q->posted)
		return MHD_YES; /* woken without an answer: keep waiting */
	if (q->too_large)
		return send_answer(c, 413, NULL, "request body too large", 0);
	r = make_job(q, c, method);
	if (!r)
		return send_answer(c, 503, NULL, "server out of memory", 0);
	q->posted = 1;
	pthread_mutex_lock(&s->lock);
	s->nopen++;
	pthread_mutex_unlock(&s->lock);
	MHD_suspend_connection(c);
	jobs_post_done(s->q, &r->j);
	return MHD_YES;
}

static void on_done(void *cls, struct MHD_Connection *c, void **req_cls,
		    enum MHD_RequestTerminationCode toe)
{
	hserver *s = cls;
	struct req *q = *req_cls;

	(void)c;
	(void)toe;
	if (!q)
		return;
	pthread_mutex_lock(&s->lock);
	for (struct req **p = &s->open; *p; p = &(*p)->next)
		if (*p == q) {
			*p = q->next;
			break;
		}
	if (q->posted && !q->answered)
		s->nopen--;
	pthread_mutex_unlock(&s->lock);
	free_answer(&q->ans);
	free(q->uri);
	free(q->body);
	free(q);
	*req_cls = NULL;
}

/* keep the path exactly as sent: SigV4 signs the encoded form */
static size_t no_unescape(void *cls, struct MHD_Connection *c, char *s)
{
	(void)cls;
	(void)c;
	return strlen(s);
}

hserver *hserver_start(const char *addr, int port, jobs *q, size_t max_body,
		       char *err, size_t errlen)
{
	hserver *s = calloc(1, sizeof *s);
	struct sockaddr_in sa;
	const union MHD_DaemonInfo *info;

	if (!s) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) {
		snprintf(err, errlen, "listen address '%s' is not an IPv4 address", addr);
		free(s);
		return NULL;
	}
	pthread_mutex_init(&s->lock, NULL);
	s->q = q;
	s->max_body = max_body ? max_body : (size_t)64 << 20;
	s->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
				MHD_ALLOW_SUSPEND_RESUME,
				0, NULL, NULL, on_request, s,
				MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
				MHD_OPTION_URI_LOG_CALLBACK, on_uri, s,
				MHD_OPTION_NOTIFY_COMPLETED, on_done, s,
				MHD_OPTION_UNESCAPE_CALLBACK, no_unescape, NULL,
				MHD_OPTION_CONNECTION_LIMIT, (unsigned)1000,
				MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120,
				MHD_OPTION_END);
	if (!s->d) {
		snprintf(err, errlen, "cannot listen on %s:%d (in use, or not allowed)", addr, port);
		pthread_mutex_destroy(&s->lock);
		free(s);
		return NULL;
	}
	info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
	s->port = info ? info->port : port;
	return s;
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

int hserver_respond(hserver *s, uint64_t id, int status, const char *const *headers,
		    const char *body, size_t len)
{
	struct answer a;
	size_t n = 0;
	int rc = -1;

	memset(&a, 0, sizeof a);
	for (const char *const *h = headers; h && *h; h++)
		n++;
	a.status = status;
	a.headers = calloc(n + 1, sizeof *a.headers);
	a.body = malloc(len ? len : 1);
	if (!a.headers || !a.body)
		goto done;
	for (a.nheaders = 0; a.nheaders < n; a.nheaders++)
		if (!(a.headers[a.nheaders] = strdup(headers[a.nheaders])))
			goto done;
	if (len)
		memcpy(a.body, body, len);
	a.len = len;
	pthread_mutex_lock(&s->lock);
	for (struct req *q = s->open; q; q = q->next)
		if (q->id == id && q->posted && !q->answered) {
			q->ans = a;
			q->answered = 1;
			s->nopen--;
			memset(&a, 0, sizeof a);
			MHD_resume_connection(q->conn);
			rc = 0;
			break;
		}
	pthread_mutex_unlock(&s->lock);
done:
	free_answer(&a);
	return rc;
}

void hserver_stop(hserver *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	for (struct req *q = s->open; q; q = q->next)
		if (q->posted && !q->answered) {
			q->ans.status = 503;
			q->answered = 1;
			MHD_resume_connection(q->conn);
		}
	pthread_mutex_unlock(&s->lock);
	MHD_stop_daemon(s->d);
	pthread_mutex_destroy(&s->lock);
	free(s);
}
