/*
 * websocket: RFC 6455 on the server's upgraded connections.
 *
 * Two layers. The framing core is pure (no I/O, no threads, no Lua): the
 * handshake's accept value, UTF-8 validation, frame headers, close codes.
 *
 * A connection (wsconn) runs one I/O thread on an upgraded socket. The
 * thread reads frames, unmasks them, reassembles fragmented messages,
 * answers pings, and fails the connection with the RFC's close codes
 * (unmasked or malformed frame: 1002, message over max_message: 1009, text
 * that is not UTF-8: 1007). It pings the client every `ping` seconds and
 * drops it after `idle` seconds without a byte. Frames other threads queue
 * with ws_send()/ws_close() go out from a bounded queue the thread writes,
 * so a slow client never blocks the caller: past WS_OUT_MAX unsent bytes
 * the connection is dropped. The thread knows neither Lua nor
 * libmicrohttpd: messages and the end leave through callbacks.
 *
 * Ownership: ws_run() copies the bytes it is given. message() hands the
 * callee a malloc'd buffer. closed() hands the callee the wsconn itself:
 * the thread is done with the socket and returns right after; the callee
 * frees it with ws_free() from another thread. ws_send(), ws_close() and
 * ws_shutdown() must not race with closed() (the server holds its lock
 * around both).
 */
#ifndef HYPD_WEBSOCKET_H
#define HYPD_WEBSOCKET_H

#include <stddef.h>
#include <stdint.h>

/* --- framing (pure) --- */

enum {
	WS_CONT = 0x0,    /* continuation of a fragmented message */
	WS_TEXT = 0x1,    /* a UTF-8 text message */
	WS_BINARY = 0x2,  /* a binary message */
	WS_CLOSE = 0x8,   /* close, with an optional code and reason */
	WS_PING = 0x9,    /* ping: the peer answers with a pong */
	WS_PONG = 0xA,    /* pong */
};

#define WS_ACCEPT_LEN 28                    /* base64 of a SHA-1 digest */
#define WS_CONTROL_MAX 125                  /* payload cap of control frames */
#define WS_REASON_MAX 123                   /* a close reason, after the code */
#define WS_OUT_MAX ((size_t)8 << 20)        /* unsent bytes before a drop */

struct ws_frame {
	int fin;               /* the last frame of its message */
	int rsv;               /* RSV1-3 (no extension is negotiated: must be 0) */
	int opcode;            /* WS_* */
	int masked;            /* the mask bit (every client frame sets it) */
	unsigned char mask[4]; /* the masking key */
	uint64_t len;          /* payload bytes */
	size_t hlen;           /* header bytes */
};

/* Sec-WebSocket-Accept for a client's key: base64(SHA-1(key GUID)) into
 * out (WS_ACCEPT_LEN + 1 bytes, NUL-terminated). Returns -1 if OpenSSL
 * fails. */
int ws_accept_key(const char *key, char *out);

/* Is key a Sec-WebSocket-Key: base64 of 16 bytes (24 characters)? */
int ws_key_valid(const char *key);

/* Is s[0..n) well-formed UTF-8 (no overlongs, surrogates, or code points
 * past U+10FFFF)? One pass, no allocation. */
int ws_utf8_valid(const unsigned char *s, size_t n);

/* May a close frame carry code (RFC 6455 7.4)? Not 1004-1006, 1015, or
 * anything outside 1000-1014 and 3000-4999. */
int ws_close_code_valid(int code);

/* Parses the frame header at buf[0..n): 0 when more bytes are needed,
 * (size_t)-1 when malformed (a 64-bit length with its top bit set),
 * else f->hlen. Checks nothing else: the caller applies the rules. */
size_t ws_parse_header(const unsigned char *buf, size_t n, struct ws_frame *f);

/* Writes the header of a final, unmasked (server) frame into out (at
 * least 10 bytes); returns its length. */
size_t ws_put_header(unsigned char *out, int opcode, uint64_t len);

/* XORs p[0..n) with the mask (in place). */
void ws_unmask(unsigned char *p, size_t n, const unsigned char mask[4]);

/* --- connections --- */

typedef struct wsconn wsconn;

struct ws_conf {
	size_t max_message;    /* largest message a client may send; 0: 1 MiB */
	double ping;           /* seconds between pings to the client; 0: 30 */
	double idle;           /* seconds without a byte before a drop; 0: 90 */
};

struct ws_events {
	/* A complete message; data (malloc'd) is the callee's now. I/O thread.
	 * Returns -1 when it cannot take it: the connection closes (1011). */
	int (*message)(void *cls, int binary, char *data, size_t len);
	/* The end: code is the peer's close code (1005 when it sent none), the
	 * one the server sent (ws_close, 1001 for ws_shutdown, 1002/1007/1009
	 * for a protocol failure), or 1006 when the connection just dropped
	 * (EOF, idle, too slow). The thread no longer uses the socket; the
	 * callee owns w (ws_free() later, from another thread). */
	void (*closed)(void *cls, wsconn *w, int code);
	void *cls;             /* both callbacks' first argument */
};

/* A connection not yet running: frames queued now go out once it runs.
 * NULL when out of memory. */
wsconn *ws_new(const struct ws_conf *conf, const struct ws_events *ev);

/*
 * Starts the I/O thread on fd (a connected socket, made non-blocking,
 * never closed here), first treating extra[0..extra_len) as received
 * bytes. -1 when out of memory or threads: no callback runs, and w is
 * still the caller's to ws_free().
 */
int ws_run(wsconn *w, int fd, const char *extra, size_t extra_len);

/* Queues one final frame (WS_TEXT, WS_BINARY, WS_PING) and wakes the
 * thread; costs one copy. Returns -1 when a close is under way or the
 * queue would pass WS_OUT_MAX (the connection is then dropped). Text is
 * not checked here. */
int ws_send(wsconn *w, int opcode, const char *data, size_t len);

/* Starts the close handshake with code and reason (at most
 * WS_REASON_MAX bytes): the close frame is queued, the thread waits up to
 * 5 s for the client's answer. -1 when a close is already under way. */
int ws_close(wsconn *w, int code, const char *reason, size_t len);

/* Asks the thread to close with 1001 (going away) and to give the client
 * at most 1 s to answer. Never blocks on the network. */
void ws_shutdown(wsconn *w);

/* The peer's close reason (NUL-terminated, may be empty); valid until
 * ws_free. Only after closed(). */
const char *ws_reason(const wsconn *w);

/* Waits for the thread to return (after closed(), never from the I/O
 * thread); idempotent. */
void ws_join(wsconn *w);

/* Joins the (finished) thread and frees w: after closed(), never from the
 * I/O thread; or at once when it never ran. */
void ws_free(wsconn *w);

#endif
