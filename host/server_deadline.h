/*
 * server_deadline: a deadline for the headers of a connection's first
 * request. libmicrohttpd 0.9.75 times a connection out only when it is
 * idle (MHD_OPTION_CONNECTION_TIMEOUT counts from the last byte), so a
 * client sending its headers a byte every few seconds (slowloris) keeps
 * its connection forever. This module remembers when each connection was
 * accepted and, from a thread of its own, shuts down the socket of one
 * whose headers have not all arrived by the deadline: libmicrohttpd then
 * reads the end of the stream and closes it as if the client had left.
 *
 * Only the first request's headers are timed: once they arrive the
 * connection is the server's business (suspended while the engine works,
 * a stream, a websocket after its upgrade, keep-alive idle), which the
 * idle timeout and the websocket's own limits cover.
 *
 * Threads: hsd_notify runs on libmicrohttpd's threads, hsd_headers_done
 * on the one serving the request, the sweep on its own; one mutex guards
 * the list. A socket is shut down only while its record is in the list,
 * and libmicrohttpd removes the record (NOTIFY_CLOSED) before it closes
 * the descriptor, so the sweep never touches a reused descriptor.
 */
#ifndef HYPD_SERVER_DEADLINE_H
#define HYPD_SERVER_DEADLINE_H

#include <microhttpd.h>

struct hs_deadline;

/* Starts the sweep for a deadline of seconds (> 0). NULL when out of
 * memory or no thread could start. The caller frees it with hsd_free. */
struct hs_deadline *hsd_new(double seconds);

/* MHD_OPTION_NOTIFY_CONNECTION's callback; cls is the hs_deadline. */
void hsd_notify(void *cls, struct MHD_Connection *c, void **socket_context,
		enum MHD_ConnectionNotificationCode code);

/* The headers of c's first request arrived: its deadline no longer applies. */
void hsd_headers_done(struct hs_deadline *d, struct MHD_Connection *c);

/* Connections shut down for their deadline so far (for tests and metrics). */
unsigned long hsd_count(struct hs_deadline *d);

/* Stops the sweep and frees d (after MHD_stop_daemon: no callbacks left). NULL is fine. */
void hsd_free(struct hs_deadline *d);

#endif
