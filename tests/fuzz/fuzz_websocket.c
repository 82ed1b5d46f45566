/*
 * fuzz_websocket: libFuzzer target for the WebSocket framing core and a
 * connection's reader (host/websocket.c).
 *
 *   make build/fuzz/fuzz_websocket && build/fuzz/fuzz_websocket -max_total_time=60 tests/fuzz/corpus/websocket
 *
 * The input is what a client sent after the handshake. The contract checked:
 *   - ws_utf8_valid and ws_close_code_valid agree with the independent
 *     versions here (a decoder of code points; RFC 6455 7.4), and
 *     ws_parse_header with a byte-by-byte reading of RFC 6455 5.2, on the
 *     input's bytes (copied to an exact-size buffer, so ASan sees any read
 *     past its end);
 *   - a connection handed the input as its first bytes (ws_run's extra, the
 *     peer's writing side shut, so EOF follows) delivers only messages of
 *     at most max_message bytes, text ones UTF-8, and ends with a code a
 *     close frame may carry, or 1005 / 1006; its close reason is UTF-8 of
 *     at most WS_REASON_MAX bytes. Every buffer it took is freed (LSan).
 */
#include "websocket.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_MESSAGE 2048

/* UTF-8 by decoding: no overlong form, surrogate or code point past U+10FFFF. */
static int ref_utf8(const unsigned char *s, size_t n)
{
	static const uint32_t min[5] = { 0, 0, 0x80, 0x800, 0x10000 };
	size_t i = 0, k, j;
	uint32_t cp;

	while (i < n) {
		unsigned c = s[i];

		k = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
		if (k == 0 || n - i < k)
			return 0;
		cp = k == 1 ? c : c & (0x7F >> k);
		for (j = 1; j < k; j++) {
			if ((s[i + j] & 0xC0) != 0x80)
				return 0;
			cp = cp << 6 | (s[i + j] & 0x3F);
		}
		if (cp < min[k] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
			return 0;
		i += k;
	}
	return 1;
}

static int ref_close_code(int code)
{
	static const int ok[] = { 1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014 };

	for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
		if (code == ok[i])
			return 1;
	return code >= 3000 && code <= 4999;
}

static void check_header(const unsigned char *b, size_t n)
{
	struct ws_frame f;
	size_t got = ws_parse_header(b, n, &f), need, ext;
	uint64_t len;

	if (n < 2) {
		if (got != 0)
			abort();
		return;
	}
	len = b[1] & 0x7F;
	ext = len == 126 ? 2 : len == 127 ? 8 : 0;
	need = 2 + ext + (b[1] & 0x80 ? 4 : 0);
	if (n < need) {
		if (got != 0)
			abort();
		return;
	}
	if (ext) {
		len = 0;
		for (size_t i = 0; i < ext; i++)
			len = len << 8 | b[2 + i];
	}
	if (len >> 63) {
		if (got != (size_t)-1)
			abort();
		return;
	}
	if (got != need || f.hlen != need || f.len != len || f.fin != b[0] >> 7 || f.rsv != ((b[0] >> 4) & 7) ||
	    f.opcode != (b[0] & 15) || f.masked != b[1] >> 7 || (f.masked && memcmp(f.mask, b + need - 4, 4)))
		abort();
}

struct seen {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int done, code;
	wsconn *w;
};

static int on_message(void *cls, int binary, char *data, size_t len)
{
	(void)cls;
	if (len > MAX_MESSAGE || (!binary && !ref_utf8((const unsigned char *)data, len)))
		abort();
	free(data);
	return 0;
}

static void on_closed(void *cls, wsconn *w, int code)
{
	struct seen *s = cls;

	pthread_mutex_lock(&s->lock);
	s->done = 1;
	s->code = code;
	s->w = w;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

static void connection(const unsigned char *data, size_t size)
{
	struct seen s = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, NULL };
	struct ws_conf conf = { MAX_MESSAGE, 0, 0 };
	struct ws_events ev = { on_message, on_closed, &s };
	const char *reason;
	wsconn *w;
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
		return;
	shutdown(sv[1], SHUT_WR); /* the client sent nothing but the input */
	if (!(w = ws_new(&conf, &ev)))
		goto out;
	if (ws_run(w, sv[0], (const char *)data, size) != 0) {
		ws_free(w);
		goto out;
	}
	pthread_mutex_lock(&s.lock);
	while (!s.done)
		pthread_cond_wait(&s.cond, &s.lock);
	pthread_mutex_unlock(&s.lock);
	reason = ws_reason(s.w);
	if (!(ref_close_code(s.code) || s.code == 1005 || s.code == 1006) || strlen(reason) > WS_REASON_MAX ||
	    !ref_utf8((const unsigned char *)reason, strlen(reason)))
		abort();
	ws_free(s.w);
out:
	close(sv[0]);
	close(sv[1]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned char *b = malloc(size ? size : 1);

	if (!b)
		return 0;
	memcpy(b, data, size);
	if (ws_utf8_valid(b, size) != ref_utf8(b, size))
		abort();
	if (size >= 2 && ws_close_code_valid(b[0] << 8 | b[1]) != ref_close_code(b[0] << 8 | b[1]))
		abort();
	check_header(b, size);
	free(b);
	connection(data, size);
	return 0;
}
