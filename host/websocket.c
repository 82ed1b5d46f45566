/* websocket: RFC 6455 framing and the per-connection I/O thread (see websocket.h). */
#include "websocket.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
#define CLOSE_WAIT 5.0   /* seconds to wait for the answer to our close */
#define STOP_WAIT 1.0    /* the same when the server stops */
#define READ_CHUNK 65536 /* bytes asked of one recv */

/* --- framing --- */

int ws_accept_key(const char *key, char *out)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	size_t klen = strlen(key), glen = strlen(WS_GUID);
	char *buf = malloc(klen + glen);
	int ok;

	if (!buf)
		return -1;
	memcpy(buf, key, klen);
	memcpy(buf + klen, WS_GUID, glen);
	ok = EVP_Digest(buf, klen + glen, md, &mdlen, EVP_sha1(), NULL) == 1 && mdlen == 20;
	free(buf);
	if (!ok)
		return -1;
	EVP_EncodeBlock((unsigned char *)out, md, 20);
	out[WS_ACCEPT_LEN] = 0;
	return 0;
}

int ws_key_valid(const char *key)
{
	static const char b64[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

	if (strlen(key) != 24 || strcmp(key + 22, "==") != 0)
		return 0;
	for (int i = 0; i < 22; i++)
		if (!key[i] || !strchr(b64, key[i]))
			return 0;
	return 1;
}

int ws_utf8_valid(const unsigned char *s, size_t n)
{
	size_t i = 0;

	while (i < n) {
		unsigned c = s[i];
		size_t k;
		unsigned lo = 0x80, hi = 0xBF; /* range of the second byte */

		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xC2 && c <= 0xDF) {
			k = 1;
		} else if (c >= 0xE0 && c <= 0xEF) {
			k = 2;
			if (c == 0xE0)
				lo = 0xA0; /* overlong */
			else if (c == 0xED)
				hi = 0x9F; /* surrogates */
		} else if (c >= 0xF0 && c <= 0xF4) {
			k = 3;
			if (c == 0xF0)
				lo = 0x90; /* overlong */
			else if (c == 0xF4)
				hi = 0x8F; /* past U+10FFFF */
		} else {
			return 0; /* continuation byte, C0/C1 overlongs, F5..FF */
		}
		if (n - i <= k)
			return 0;
		if (s[i + 1] < lo || s[i + 1] > hi)
			return 0;
		for (size_t j = 2; j <= k; j++)
			if ((s[i + j] & 0xC0) != 0x80)
				return 0;
		i += k + 1;
	}
	return 1;
}

int ws_close_code_valid(int code)
{
	if (code >= 3000 && code <= 4999)
		return 1;
	return code >= 1000 && code <= 1014 && code != 1004 && code != 1005 && code != 1006;
}

size_t ws_parse_header(const unsigned char *buf, size_t n, struct ws_frame *f)
{
	size_t need = 2;
	uint64_t len;

	if (n < 2)
		return 0;
	f->fin = buf[0] >> 7;
	f->rsv = (buf[0] >> 4) & 7;
	f->opcode = buf[0] & 0x0F;
	f->masked = buf[1] >> 7;
	len = buf[1] & 0x7F;
	need += len == 126 ? 2 : len == 127 ? 8 : 0;
	need += f->masked ? 4 : 0;
	if (n < need)
		return 0;
	if (len == 126) {
		len = (uint64_t)buf[2] << 8 | buf[3];
	} else if (len == 127) {
		len = 0;
		for (int i = 0; i < 8; i++)
			len = len << 8 | buf[2 + i];
		if (len >> 63)
			return (size_t)-1;
	}
	if (f->masked)
		memcpy(f->mask, buf + need - 4, 4);
	f->len = len;
	f->hlen = need;
	return need;
}

size_t ws_put_header(unsigned char *out, int opcode, uint64_t len)
{
	out[0] = (unsigned char)(0x80 | (opcode & 0x0F));
	if (len < 126) {
		out[1] = (unsigned char)len;
		return 2;
	}
	if (len <= 0xFFFF) {
		out[1] = 126;
		out[2] = (unsigned char)(len >> 8);
		out[3] = (unsigned char)len;
		return 4;
	}
	out[1] = 127;
	for (int i = 0; i < 8; i++)
		out[2 + i] = (unsigned char)(len >> (56 - 8 * i));
	return 10;
}

void ws_unmask(unsigned char *p, size_t n, const unsigned char mask[4])
{
	for (size_t i = 0; i < n; i++)
		p[i] ^= mask[i & 3];
}

/* --- connections --- */

/* A byte buffer: data at p + off, len bytes, cap allocated. */
struct buf {
	unsigned char *p;      /* allocation */
	size_t off, len, cap;  /* start of the data, its bytes, allocated */
};

/*
 * The connection. Fields marked (lock) are shared with the threads that
 * queue frames; the rest belong to the I/O thread.
 */
struct wsconn {
	int fd;                    /* the upgraded socket (not ours to close) */
	int wake[2];               /* self-pipe: queuers wake the thread */
	pthread_t thread;          /* the I/O thread */
	int started;               /* ws_run started it; 0 again once joined */
	pthread_mutex_t lock;      /* guards the (lock) fields */
	struct buf out;            /* frames to write (lock) */
	int sent_close;            /* a close frame is queued: data frames refused (lock) */
	int report;                /* the code closed() gets, once decided (lock) */
	int stop;                  /* ws_shutdown was called (lock) */
	int overflow;              /* the queue passed WS_OUT_MAX: drop (lock) */
	struct ws_conf conf;       /* limits and timers */
	struct ws_events ev;       /* where messages and the end go */
	struct buf in;             /* bytes read, not yet parsed */
	struct buf msg;            /* the message being reassembled */
	int msg_op;                /* its opcode (WS_TEXT, WS_BINARY), 0: none */
	int reading;               /* still reading frames (not after a close or a failure) */
	int got_close;             /* the peer's close frame arrived */
	int fail_after_flush;      /* protocol failure: drop once the close is out */
	char reason[WS_REASON_MAX + 1]; /* the peer's close reason */
};

/* Makes room for n more bytes after the data; -1 when out of memory. */
static int buf_reserve(struct buf *b, size_t n)
{
	if (b->off && b->off + b->len + n > b->cap) {
		memmove(b->p, b->p + b->off, b->len);
		b->off = 0;
	}
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		unsigned char *p;

		while (cap < b->len + n)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p)
			return -1;
		b->p = p;
		b->cap = cap;
	}
	return 0;
}

static int buf_add(struct buf *b, const void *data, size_t n)
{
	if (n == 0)
		return 0;
	if (buf_reserve(b, n) != 0)
		return -1;
	memcpy(b->p + b->off + b->len, data, n);
	b->len += n;
	return 0;
}

static void buf_free(struct buf *b)
{
	free(b->p);
	memset(b, 0, sizeof *b);
}

static double mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void poke(wsconn *w)
{
	char b = 1;

	if (write(w->wake[1], &b, 1) < 0) {
		/* full pipe: the thread is already due to wake */
	}
}

/* Queues a frame; past WS_OUT_MAX marks the connection for a drop. Lock held. */
static int put_frame(wsconn *w, int opcode, const void *data, size_t len)
{
	unsigned char h[10];
	size_t hl = ws_put_header(h, opcode, len);

	if (w->overflow || len > WS_OUT_MAX || w->out.len + hl + len > WS_OUT_MAX ||
	    buf_reserve(&w->out, hl + len) != 0) {
		w->overflow = 1;
		return -1;
	}
	buf_add(&w->out, h, hl);
	buf_add(&w->out, data, len);
	return 0;
}

/* Queues a close frame (code 0: none) and refuses data from now on. Lock held. */
static void put_close(wsconn *w, int code, const char *reason, size_t len)
{
	unsigned char p[2 + WS_REASON_MAX];

	if (len > WS_REASON_MAX)
		len = WS_REASON_MAX;
	p[0] = (unsigned char)(code >> 8);
	p[1] = (unsigned char)code;
	if (len)
		memcpy(p + 2, reason, len);
	put_frame(w, WS_CLOSE, p, code ? 2 + len : 0);
	w->sent_close = 1;
	if (!w->report)
		w->report = code ? code : 1005;
}

int ws_send(wsconn *w, int opcode, const char *data, size_t len)
{
	int rc = -1;

	pthread_mutex_lock(&w->lock);
	if (!w->sent_close && !w->overflow)
		rc = put_frame(w, opcode, data, len);
	pthread_mutex_unlock(&w->lock);
	poke(w);
	return rc;
}

int ws_close(wsconn *w, int code, const char *reason, size_t len)
{
	int rc = -1;

	pthread_mutex_lock(&w->lock);
	if (!w->sent_close && !w->overflow) {
		put_close(w, code, reason, len);
		rc = 0;
	}
	pthread_mutex_unlock(&w->lock);
	poke(w);
	return rc;
}

void ws_shutdown(wsconn *w)
{
	pthread_mutex_lock(&w->lock);
	w->stop = 1;
	pthread_mutex_unlock(&w->lock);
	poke(w);
}

const char *ws_reason(const wsconn *w) { return w->reason; }

/* Fails the connection: close with code, read nothing more, drop once sent. */
static void fail(wsconn *w, int code)
{
	pthread_mutex_lock(&w->lock);
	if (!w->sent_close)
		put_close(w, code, NULL, 0);
	pthread_mutex_unlock(&w->lock);
	w->reading = 0;
	w->fail_after_flush = 1;
}

/* Queues a control answer (pong, close echo) unless a close went out. */
static void answer(wsconn *w, int opcode, const unsigned char *p, size_t n)
{
	pthread_mutex_lock(&w->lock);
	if (!w->sent_close)
		put_frame(w, opcode, p, n);
	pthread_mutex_unlock(&w->lock);
}

/* A complete message: checked, then handed over with its buffer (unless
 * we are closing). */
static void deliver(wsconn *w)
{
	int closing, binary = w->msg_op == WS_BINARY;
	size_t len = w->msg.len;
	char *data;

	if (!binary && !ws_utf8_valid(w->msg.p, len)) {
		fail(w, 1007);
		return;
	}
	pthread_mutex_lock(&w->lock);
	closing = w->sent_close;
	pthread_mutex_unlock(&w->lock);
	/* the buffer only grows at its end, so the message starts at p */
	data = (char *)w->msg.p;
	w->msg.p = NULL;
	buf_free(&w->msg);
	w->msg_op = 0;
	if (closing) {
		free(data);
		return;
	}
	if (!data)
		data = malloc(1); /* an empty message */
	if (!data || w->ev.message(w->ev.cls, binary, data, len) != 0)
		fail(w, 1011);
}

/* The peer's close frame: checked, echoed (unless we closed first). */
static void on_close(wsconn *w, const unsigned char *p, size_t n)
{
	int code = 0;

	if (n == 1) {
		fail(w, 1002);
		return;
	}
	if (n >= 2) {
		code = p[0] << 8 | p[1];
		if (!ws_close_code_valid(code)) {
			fail(w, 1002);
			return;
		}
		if (!ws_utf8_valid(p + 2, n - 2)) {
			fail(w, 1007);
			return;
		}
		memcpy(w->reason, p + 2, n - 2);
		w->reason[n - 2] = 0;
	}
	w->got_close = 1;
	w->reading = 0;
	pthread_mutex_lock(&w->lock);
	if (!w->sent_close)
		put_close(w, code, NULL, 0); /* the echo carries the peer's code */
	pthread_mutex_unlock(&w->lock);
}

/* Applies the rules to one frame header; 0 when it may proceed. */
static int check_frame(wsconn *w, const struct ws_frame *f)
{
	int control = f->opcode >= WS_CLOSE;

	if (f->rsv || !f->masked)
		return 1002;
	if (f->opcode > WS_BINARY && (f->opcode < WS_CLOSE || f->opcode > WS_PONG))
		return 1002;
	if (control && (!f->fin || f->len > WS_CONTROL_MAX))
		return 1002;
	if (f->opcode == WS_CONT && !w->msg_op)
		return 1002;
	if ((f->opcode == WS_TEXT || f->opcode == WS_BINARY) && w->msg_op)
		return 1002;
	if (!control && f->len > w->conf.max_message - w->msg.len)
		return 1009;
	return 0;
}

/* Parses and handles every complete frame in w->in. */
static void parse_input(wsconn *w)
{
	while (w->reading) {
		struct ws_frame f;
		unsigned char *p = w->in.p + w->in.off;
		size_t hl = ws_parse_header(p, w->in.len, &f);
		int code;

		if (hl == 0)
			break;
		if (hl == (size_t)-1) {
			fail(w, 1002);
			break;
		}
		if ((code = check_frame(w, &f)) != 0) {
			fail(w, code);
			break;
		}
		if (w->in.len - hl < f.len) {
			/* wait for the payload: make room for it in one piece */
			if (buf_reserve(&w->in, hl + (size_t)f.len - w->in.len) != 0)
				fail(w, 1011);
			break;
		}
		p += hl;
		ws_unmask(p, (size_t)f.len, f.mask);
		switch (f.opcode) {
		case WS_CONT:
		case WS_TEXT:
		case WS_BINARY:
			if (f.opcode != WS_CONT)
				w->msg_op = f.opcode;
			if (buf_add(&w->msg, p, (size_t)f.len) != 0)
				fail(w, 1011);
			else if (f.fin)
				deliver(w);
			break;
		case WS_PING:
			answer(w, WS_PONG, p, (size_t)f.len);
			break;
		case WS_CLOSE:
			on_close(w, p, (size_t)f.len);
			break;
		default: /* WS_PONG */
			break;
		}
		w->in.off += hl + (size_t)f.len;
		w->in.len -= hl + (size_t)f.len;
	}
	if (w->in.len == 0)
		w->in.off = 0;
}

/* Writes what the queue holds; -1 when the socket failed. */
static int flush(wsconn *w)
{
	int rc = 0;

	pthread_mutex_lock(&w->lock);
	while (w->out.len) {
		ssize_t n = send(w->fd, w->out.p + w->out.off, w->out.len, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n > 0) {
			w->out.off += (size_t)n;
			w->out.len -= (size_t)n;
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else {
			if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
				rc = -1;
			break;
		}
	}
	if (w->out.len == 0)
		w->out.off = 0;
	pthread_mutex_unlock(&w->lock);
	return rc;
}

/* Reads once; -1 on EOF or error. */
static int fill(wsconn *w)
{
	ssize_t n;

	if (buf_reserve(&w->in, READ_CHUNK) != 0)
		return -1;
	n = recv(w->fd, w->in.p + w->in.off + w->in.len, READ_CHUNK, MSG_DONTWAIT);
	if (n > 0) {
		w->in.len += (size_t)n;
		return 1;
	}
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return 0;
	return -1;
}

/* The code decided so far, or 1006 (the connection just dropped). */
static int reported(wsconn *w)
{
	int code;

	pthread_mutex_lock(&w->lock);
	code = w->report ? w->report : 1006;
	pthread_mutex_unlock(&w->lock);
	return code;
}

/* The I/O loop; returns the code closed() reports. */
static int run(wsconn *w)
{
	double now = mono_now();
	double last_rx = now, next_ping = now + w->conf.ping, deadline = 0;

	parse_input(w); /* the bytes libmicrohttpd had read already */
	for (;;) {
		struct pollfd pf[2];
		int sent, pending, report, stop, overflow, ms;
		double until;

		pthread_mutex_lock(&w->lock);
		if (w->stop && !w->sent_close)
			put_close(w, 1001, "server stopping", 15);
		sent = w->sent_close;
		pending = w->out.len > 0;
		report = w->report;
		stop = w->stop;
		overflow = w->overflow;
		pthread_mutex_unlock(&w->lock);
		if (overflow)
			return 1006;
		if (sent && (deadline == 0 || (stop && deadline > now + STOP_WAIT)))
			deadline = now + (stop ? STOP_WAIT : CLOSE_WAIT);
		if (sent && !pending && (w->got_close || w->fail_after_flush))
			return report;
		if (deadline && now >= deadline)
			return report;
		if (!sent && now - last_rx >= w->conf.idle)
			return 1006;
		if (!sent && now >= next_ping) {
			answer(w, WS_PING, (const unsigned char *)"hypd", 4);
			next_ping = now + w->conf.ping;
			continue;
		}
		until = deadline ? deadline : next_ping < last_rx + w->conf.idle ? next_ping : last_rx + w->conf.idle;
		ms = until <= now ? 0 : until - now > 60 ? 60000 : (int)((until - now) * 1000) + 1;
		pf[0].fd = w->fd;
		pf[0].events = (short)((w->reading ? POLLIN : 0) | (pending ? POLLOUT : 0));
		pf[0].revents = 0;
		pf[1].fd = w->wake[0];
		pf[1].events = POLLIN;
		pf[1].revents = 0;
		if (poll(pf, 2, ms) < 0 && errno != EINTR)
			return 1006;
		now = mono_now();
		if (pf[1].revents & POLLIN) {
			char drain[64];

			while (read(w->wake[0], drain, sizeof drain) > 0)
				;
		}
		if (w->reading && (pf[0].revents & (POLLIN | POLLERR | POLLHUP))) {
			int n = fill(w);

			if (n < 0)
				return reported(w); /* EOF, or the socket failed */
			if (n > 0) {
				last_rx = now;
				parse_input(w);
			}
		}
		/* a non-blocking write: what the poll saw, or what was queued since */
		if (flush(w) != 0)
			return reported(w);
	}
}

static void *io_main(void *arg)
{
	wsconn *w = arg;
	int code = run(w);

	/* the last touch of w on this thread: the callee owns it now */
	w->ev.closed(w->ev.cls, w, code);
	return NULL;
}

static void conn_free(wsconn *w)
{
	if (w->wake[0] >= 0)
		close(w->wake[0]);
	if (w->wake[1] >= 0)
		close(w->wake[1]);
	buf_free(&w->out);
	buf_free(&w->in);
	buf_free(&w->msg);
	pthread_mutex_destroy(&w->lock);
	free(w);
}

wsconn *ws_new(const struct ws_conf *conf, const struct ws_events *ev)
{
	wsconn *w = calloc(1, sizeof *w);

	if (!w)
		return NULL;
	w->fd = w->wake[0] = w->wake[1] = -1;
	pthread_mutex_init(&w->lock, NULL);
	w->ev = *ev;
	w->conf = *conf;
	if (!w->conf.max_message)
		w->conf.max_message = (size_t)1 << 20;
	if (!(w->conf.ping > 0))
		w->conf.ping = 30;
	if (!(w->conf.idle > 0))
		w->conf.idle = 90;
	w->reading = 1;
	if (pipe(w->wake) != 0) {
		w->wake[0] = w->wake[1] = -1;
		conn_free(w);
		return NULL;
	}
	for (int i = 0; i < 2; i++) {
		fcntl(w->wake[i], F_SETFL, fcntl(w->wake[i], F_GETFL) | O_NONBLOCK);
		fcntl(w->wake[i], F_SETFD, FD_CLOEXEC);
	}
	return w;
}

int ws_run(wsconn *w, int fd, const char *extra, size_t extra_len)
{
	pthread_attr_t attr;
	sigset_t all, old;
	int rc;

	if (buf_add(&w->in, extra, extra_len) != 0)
		return -1;
	w->fd = fd;
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	/* signals go to the engine's threads, never to this one */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, (size_t)256 << 10);
	rc = pthread_create(&w->thread, &attr, io_main, w);
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0)
		return -1;
	w->started = 1;
	return 0;
}

void ws_join(wsconn *w)
{
	if (w->started)
		pthread_join(w->thread, NULL);
	w->started = 0;
}

void ws_free(wsconn *w)
{
	if (!w)
		return;
	ws_join(w);
	conn_free(w);
}
