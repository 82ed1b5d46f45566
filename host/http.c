/* http: libcurl multi transport (see http.h). */
#include "http.h"

#include <ctype.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define DEFAULT_MAX_BODY (64u << 20)
#define DEFAULT_TIMEOUT_MS 60000L

struct xfer {
	CURL *easy;                  /* the transfer */
	struct curl_slist *headers;  /* request headers, owned */
	char *body;                  /* request body copy, owned */
	uint64_t id;                 /* handed to the caller */
	int cancelled;               /* httpc_cancel was called */
	size_t max_body;             /* response body cap (a stream: pending bytes) */
	int too_large;               /* the cap was hit */
	int stream;                  /* resp.body holds only undelivered bytes */
	int head_done;               /* the final response's headers are complete */
	int head_sent;               /* the headers went to the data callback */
	int paused;                  /* on_body returned CURL_WRITEFUNC_PAUSE */
	int held;                    /* httpc_pause: the consumer is full */
	httpc_response resp;         /* filled as data arrives */
	size_t body_cap;             /* allocated bytes of resp.body */
	struct xfer *next;           /* in httpc.list */
};

struct httpc {
	CURLM *multi;        /* the multi handle */
	struct xfer *list;   /* transfers in flight */
	struct xfer *dead;   /* cancelled transfers, reported on next poll */
	int inflight;        /* length of list */
	int nstreams;        /* streams in list (no scan for data without one) */
	uint64_t next_id;    /* last id handed out */
};

static int global_init_done;

httpc *httpc_new(int max_connections)
{
	httpc *h;

	if (!global_init_done) {
		if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
			return NULL;
		global_init_done = 1;
	}
	h = calloc(1, sizeof *h);
	if (!h)
		return NULL;
	h->multi = curl_multi_init();
	if (!h->multi) {
		free(h);
		return NULL;
	}
	curl_multi_setopt(h->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS,
			  (long)(max_connections > 0 ? max_connections : 64));
	curl_multi_setopt(h->multi, CURLMOPT_MAXCONNECTS,
			  (long)(max_connections > 0 ? max_connections : 64));
	return h;
}

static void free_response(httpc_response *r)
{
	for (size_t i = 0; i < r->nheaders; i++) {
		free(r->headers[i].name);
		free(r->headers[i].value);
	}
	free(r->headers);
	free(r->body);
	memset(r, 0, sizeof *r);
}

static void xfer_free(httpc *h, struct xfer *x)
{
	if (x->easy) {
		curl_multi_remove_handle(h->multi, x->easy);
		curl_easy_cleanup(x->easy);
	}
	curl_slist_free_all(x->headers);
	free(x->body);
	free_response(&x->resp);
	free(x);
}

void httpc_free(httpc *h)
{
	if (!h)
		return;
	while (h->list || h->dead) {
		struct xfer *x = h->list ? h->list : h->dead;

		if (x == h->list)
			h->list = x->next;
		else
			h->dead = x->next;
		xfer_free(h, x);
	}
	curl_multi_cleanup(h->multi);
	free(h);
}

static size_t on_body(char *data, size_t size, size_t n, void *ud)
{
	struct xfer *x = ud;
	size_t len = size * n, need = x->resp.body_len + len + 1;

	if (x->stream) {
		/* libcurl keeps the refused bytes and offers them again after
		 * curl_easy_pause(CONT); an empty buffer takes any write so a
		 * small cap cannot stall the stream */
		if (x->held || (x->resp.body_len && x->resp.body_len + len > x->max_body)) {
			x->paused = 1;
			return CURL_WRITEFUNC_PAUSE;
		}
	} else if (x->resp.body_len + len > x->max_body) {
		x->too_large = 1;
		return 0;
	}
	if (need > x->body_cap) {
		size_t cap = x->body_cap ? x->body_cap : 4096;
		char *grown;

		while (cap < need)
			cap *= 2;
		grown = realloc(x->resp.body, cap);
		if (!grown)
			return 0;
		x->resp.body = grown;
		x->body_cap = cap;
	}
	memcpy(x->resp.body + x->resp.body_len, data, len);
	x->resp.body_len += len;
	x->resp.body[x->resp.body_len] = 0;
	return len;
}

static void clear_headers(httpc_response *r)
{
	for (size_t i = 0; i < r->nheaders; i++) {
		free(r->headers[i].name);
		free(r->headers[i].value);
	}
	r->nheaders = 0;
}

static size_t on_header(char *data, size_t size, size_t n, void *ud)
{
	struct xfer *x = ud;
	size_t len = size * n, nl, vl;
	const char *colon = memchr(data, ':', len), *v;
	httpc_header *grown;

	if (len >= 5 && strncmp(data, "HTTP/", 5) == 0) {
		clear_headers(&x->resp); /* a new response (redirect, 100) */
		return len;
	}
	if (!colon) {
		long code = 0;

		/* the blank line ends a header block; 1xx blocks are interim */
		curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &code);
		if ((data[0] == '\r' || data[0] == '\n') && code >= 200)
			x->head_done = 1;
		return len;
	}
	if (x->stream && x->head_done)
		return len; /* trailers: the stream has reported its headers */
	nl = (size_t)(colon - data);
	v = colon + 1;
	vl = len - nl - 1;
	while (vl && isspace((unsigned char)*v))
		v++, vl--;
	while (vl && isspace((unsigned char)v[vl - 1]))
		vl--;
	grown = realloc(x->resp.headers, (x->resp.nheaders + 1) * sizeof *grown);
	if (!grown)
		return 0;
	x->resp.headers = grown;
	grown[x->resp.nheaders].name = strndup(data, nl);
	grown[x->resp.nheaders].value = strndup(v, vl);
	if (!grown[x->resp.nheaders].name || !grown[x->resp.nheaders].value) {
		free(grown[x->resp.nheaders].name);
		free(grown[x->resp.nheaders].value);
		return 0;
	}
	for (size_t i = 0; i < nl; i++)
		grown[x->resp.nheaders].name[i] =
			(char)tolower((unsigned char)data[i]);
	x->resp.nheaders++;
	return len;
}

static int has_header(const char *const *headers, const char *name)
{
	size_t n = strlen(name);

	for (const char *const *hp = headers; hp && *hp; hp++)
		if (strncasecmp(*hp, name, n) == 0 && (*hp)[n] == ':')
			return 1;
	return 0;
}

static int setup_easy(struct xfer *x, const httpc_request *req, char *err,
		      size_t errlen)
{
	CURL *e = x->easy;
	const char *method = req->method ? req->method : "GET";

	for (const char *const *hp = req->headers; hp && *hp; hp++) {
		struct curl_slist *l = curl_slist_append(x->headers, *hp);

		if (!l)
			goto oom;
		x->headers = l;
	}
	/* libcurl adds these unless told not to; AWS signs exact headers */
	x->headers = curl_slist_append(x->headers, "Expect:");
	if (x->headers && req->body && !has_header(req->headers, "content-type"))
		x->headers = curl_slist_append(x->headers, "Content-Type:");
	if (!x->headers)
		goto oom;
	curl_easy_setopt(e, CURLOPT_URL, req->url);
	curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L); /* send the path that was signed */
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->headers);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	/* a watch or a followed log runs as long as the server keeps it open */
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, req->timeout_ms > 0 ? req->timeout_ms :
			 req->stream ? 0L : DEFAULT_TIMEOUT_MS);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
			 req->connect_timeout_ms > 0 ? req->connect_timeout_ms : 10000L);
	if (req->idle_timeout > 0) {
		curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, req->idle_timeout);
	}
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(e, CURLOPT_PRIVATE, x);
	curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "");
	/* a proxy's CONNECT answer is not the response (head_done) */
	curl_easy_setopt(e, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L);
	if (req->fresh_connection)
		curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);
	if (req->ca_file)
		curl_easy_setopt(e, CURLOPT_CAINFO, req->ca_file);
	if (req->ca_pem) {
		struct curl_blob blob = { (void *)req->ca_pem, strlen(req->ca_pem),
					  CURL_BLOB_COPY };

		curl_easy_setopt(e, CURLOPT_CAINFO_BLOB, &blob);
	}
	if (req->body) {
		x->body = malloc(req->body_len ? req->body_len : 1);
		if (!x->body)
			goto oom;
		memcpy(x->body, req->body, req->body_len);
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, x->body);
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
				 (curl_off_t)req->body_len);
	}
	if (strcmp(method, "GET") == 0 && !req->body)
		curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
	else if (strcmp(method, "HEAD") == 0)
		curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
	else if (strcmp(method, "POST") != 0 || !req->body)
		curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
	return 0;
oom:
	snprintf(err, errlen, "out of memory");
	return -1;
}

int httpc_start(httpc *h, const httpc_request *req, uint64_t *id, char *err,
		size_t errlen)
{
	struct xfer *x;

	if (!req->url || (strncmp(req->url, "http://", 7) != 0 &&
			  strncmp(req->url, "https://", 8) != 0)) {
		snprintf(err, errlen, "url must start with http:// or https://");
		return -1;
	}
	x = calloc(1, sizeof *x);
	if (!x || !(x->easy = curl_easy_init())) {
		free(x);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	x->max_body = req->max_body ? req->max_body : DEFAULT_MAX_BODY;
	x->stream = req->stream != 0;
	if (setup_easy(x, req, err, errlen) != 0)
		goto fail;
	if (curl_multi_add_handle(h->multi, x->easy) != CURLM_OK) {
		snprintf(err, errlen, "cannot add transfer");
		goto fail;
	}
	x->id = ++h->next_id;
	x->next = h->list;
	h->list = x;
	h->inflight++;
	h->nstreams += x->stream;
	*id = x->id;
	return 0;
fail:
	curl_easy_cleanup(x->easy);
	x->easy = NULL;
	curl_slist_free_all(x->headers);
	free(x->body);
	free(x);
	return -1;
}

int httpc_inflight(const httpc *h) { return h->inflight; }

static void unlink_xfer(httpc *h, struct xfer *x)
{
	for (struct xfer **p = &h->list; *p; p = &(*p)->next)
		if (*p == x) {
			*p = x->next;
			h->inflight--;
			h->nstreams -= x->stream;
			return;
		}
}

static void classify(struct xfer *x, CURLcode rc)
{
	httpc_response *r = &x->resp;

	if (x->cancelled) {
		r->error_code = "CANCELLED";
		snprintf(r->error, sizeof r->error, "request cancelled");
	} else if (x->too_large) {
		r->error_code = "TOO_LARGE";
		snprintf(r->error, sizeof r->error,
			 "response body exceeds %zu bytes", x->max_body);
	} else if (rc == CURLE_OPERATION_TIMEDOUT) {
		r->error_code = "TIMEOUT";
		snprintf(r->error, sizeof r->error, "%s", curl_easy_strerror(rc));
	} else if (rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST ||
		   rc == CURLE_COULDNT_RESOLVE_PROXY) {
		/* nothing was sent */
		r->error_code = "CONNECT";
		snprintf(r->error, sizeof r->error, "%s", curl_easy_strerror(rc));
	} else if (rc == CURLE_GOT_NOTHING || rc == CURLE_SEND_ERROR ||
		   rc == CURLE_RECV_ERROR || rc == CURLE_PARTIAL_FILE) {
		/* the connection broke: the request may have reached the server */
		r->error_code = "RESET";
		snprintf(r->error, sizeof r->error, "%s", curl_easy_strerror(rc));
	} else if (rc == CURLE_SSL_CONNECT_ERROR) {
		/* the TLS handshake broke (a reset in it, a server that
		 * stopped): no byte of the request was sent, so it is as safe
		 * to send again as a connection never made */
		r->error_code = "CONNECT";
		snprintf(r->error, sizeof r->error, "TLS handshake: %s",
			 curl_easy_strerror(rc));
	} else if (rc == CURLE_PEER_FAILED_VERIFICATION ||
		   rc == CURLE_SSL_CACERT_BADFILE || rc == CURLE_SSL_CERTPROBLEM) {
		r->error_code = "TLS";
		snprintf(r->error, sizeof r->error, "%s", curl_easy_strerror(rc));
	} else if (rc != CURLE_OK) {
		r->error_code = "HTTP";
		snprintf(r->error, sizeof r->error, "%s", curl_easy_strerror(rc));
	}
	if (r->error_code)
		r->status = 0;
}

/*
 * Hands a stream's undelivered bytes to data, with the status and, the
 * first time, the headers (alone when no body byte has come yet).
 * Returns 1 when data was called.
 */
static int flush_stream(struct xfer *x, httpc_data_fn data, void *ud)
{
	httpc_chunk c = { .id = x->id, .data = x->resp.body, .len = x->resp.body_len };

	if (!x->resp.body_len && (x->head_sent || !x->head_done))
		return 0;
	curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &c.status);
	if (!x->head_sent) {
		c.headers = x->resp.headers;
		c.nheaders = x->resp.nheaders;
		x->head_sent = 1;
	}
	if (!c.data)
		c.data = "";
	data(ud, &c);
	x->resp.body_len = 0;
	if (x->resp.body)
		x->resp.body[0] = 0;
	return 1;
}

/* Lets a paused stream run again; libcurl may write into it right away. */
static void resume(struct xfer *x)
{
	x->paused = 0;
	curl_easy_pause(x->easy, CURLPAUSE_CONT);
}

/* Delivers what every running stream received; resumes those whose
 * buffer was full and whose consumer does not hold them. */
static int flush_streams(httpc *h, httpc_data_fn data, void *ud)
{
	int n = 0;

	if (!h->nstreams || !data)
		return 0;
	for (struct xfer *x = h->list; x; x = x->next) {
		if (!x->stream)
			continue;
		n += flush_stream(x, data, ud);
		if (x->paused && !x->held)
			resume(x);
	}
	return n;
}

static int drain(httpc *h, httpc_done_fn done, httpc_data_fn data, void *ud)
{
	CURLMsg *m;
	int left, n = 0;

	while ((m = curl_multi_info_read(h->multi, &left))) {
		struct xfer *x;
		double secs = 0;

		if (m->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&x);
		curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &x->resp.status);
		curl_easy_getinfo(x->easy, CURLINFO_TOTAL_TIME, &secs);
		x->resp.seconds = secs;
		x->resp.id = x->id;
		classify(x, m->data.result);
		/* a stream's last bytes (even before a failure) come first */
		if (x->stream && data)
			n += flush_stream(x, data, ud);
		if (!x->resp.body) {
			x->resp.body = calloc(1, 1);
			x->resp.body_len = 0;
		}
		unlink_xfer(h, x);
		done(ud, &x->resp);
		xfer_free(h, x);
		n++;
	}
	return n;
}

int httpc_cancel(httpc *h, uint64_t id)
{
	for (struct xfer **p = &h->list; *p; p = &(*p)->next)
		if ((*p)->id == id) {
			struct xfer *x = *p;

			*p = x->next;
			h->inflight--; /* nobody waits for it any more */
			h->nstreams -= x->stream;
			curl_multi_remove_handle(h->multi, x->easy);
			x->cancelled = 1;
			x->next = h->dead;
			h->dead = x;
			return 0;
		}
	return -1;
}

int httpc_pause(httpc *h, uint64_t id, int paused)
{
	for (struct xfer *x = h->list; x; x = x->next)
		if (x->id == id) {
			if (!x->stream)
				return -1;
			x->held = paused != 0;
			/* with bytes still pending, the next flush resumes it */
			if (!x->held && x->paused && !x->resp.body_len)
				resume(x);
			return 0;
		}
	return -1;
}

/* Reports cancelled transfers (no longer counted in flight). */
static int drain_dead(httpc *h, httpc_done_fn done, void *ud)
{
	int n = 0;

	while (h->dead) {
		struct xfer *x = h->dead;

		h->dead = x->next;
		x->resp.id = x->id;
		classify(x, CURLE_OK);
		done(ud, &x->resp);
		xfer_free(h, x);
		n++;
	}
	return n;
}

int httpc_poll(httpc *h, int timeout_ms, httpc_done_fn done, httpc_data_fn data,
	       void *ud)
{
	int running, n;

	n = drain_dead(h, done, ud) + drain(h, done, data, ud) +
	    flush_streams(h, data, ud);
	if (n)
		return n;
	if (curl_multi_perform(h->multi, &running) != CURLM_OK)
		return -1;
	n = drain(h, done, data, ud) + flush_streams(h, data, ud);
	if (n)
		return n;
	if (curl_multi_poll(h->multi, NULL, 0, timeout_ms < 0 ? 3600 * 1000 : timeout_ms,
			    NULL) != CURLM_OK)
		return -1;
	if (curl_multi_perform(h->multi, &running) != CURLM_OK)
		return -1;
	return drain(h, done, data, ud) + flush_streams(h, data, ud);
}

void httpc_wakeup(httpc *h) { curl_multi_wakeup(h->multi); }
