/*
 * server_int: what the two files of the HTTP server share (server.c,
 * requests, streams and the daemon; server_ws.c, websockets). Not for
 * other modules: use server.h.
 *
 * Locking: hserver.lock guards what the field comments say; functions
 * marked "Lock held" expect the caller to hold it.
 */
#ifndef HYPD_SERVER_INT_H
#define HYPD_SERVER_INT_H

#include <microhttpd.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "framing.h"
#include "jobs.h"
#include "server.h"
#include "websocket.h"

struct wslink; /* a websocket in hserver.ws (server_ws.c) */
struct hs_deadline; /* server_deadline.h */

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
	const char *target;          /* the same in libmicrohttpd's read buffer, borrowed
				      * until the first call (framing.h) */
	size_t target_len;           /* its strlen() */
	struct fr_verdict verdict;   /* why the request is refused, once known (framing.h) */
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
	struct hs_deadline *headers; /* the first headers' deadline (server_deadline.h) */
};

/* --- server.c --- */

/* Frees what a holds and zeroes it. */
void hs_free_answer(struct answer *a);

/* Copies status, header lines and body into a; -1 when out of memory
 * (free a with hs_free_answer either way). */
int hs_make_answer(struct answer *a, int status, const char *const *headers,
		   const char *body, size_t len);

/* Adds the answer's header lines to resp (not Content-Length). */
void hs_add_headers(struct MHD_Response *resp, struct answer *a);

/* The open request id, or NULL. Lock held. */
struct req *hs_find(hserver *s, uint64_t id);

/* Resumes q's connection if it is parked. Lock held; any thread. */
void hs_wake(struct req *q);

/* The run step of a job that did its work before it was posted. */
void hs_job_run(job *j);

/* --- server_ws.c --- */

/* Sets q->ws_status (and q->ws_accept) for the WebSocket opening
 * handshake: 0 valid, 426 wrong version, else 400. Server thread. */
void hs_check_upgrade(struct req *q, struct MHD_Connection *c, const char *method,
		      const char *version);

/* Queues the 101 the engine chose for q; the websocket takes over. */
enum MHD_Result hs_queue_upgrade(struct req *q, struct MHD_Connection *c);

/* Takes l out of the registry (hserver_stop waits for it to empty). Lock held. */
void hs_ws_unlink(hserver *s, struct wslink *l);

/* Posts l's closed event with code, which owns its connection, and frees
 * l. Unlinked first; no lock needed. */
void hs_ws_end(struct wslink *l, int code);

/* Ends every websocket for hserver_stop (see server_ws.c). Lock held. */
void hs_ws_stop(hserver *s);

#endif
