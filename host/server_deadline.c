/* server_deadline: a deadline for a connection's first headers (see server_deadline.h). */
#include "server_deadline.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#define SWEEP_MS 200 /* how often the sweep looks: the deadline's precision */

struct rec {
	MHD_socket fd;         /* the connection's socket (libmicrohttpd's) */
	double deadline;       /* monotonic seconds */
	int done;              /* its headers arrived */
	int shut;              /* the sweep shut it down */
	struct rec *prev, *next;
};

struct hs_deadline {
	double seconds;         /* the deadline after accept */
	pthread_mutex_t lock;   /* guards everything below */
	pthread_cond_t wake;    /* stopping */
	pthread_t thread;       /* the sweep */
	int stopping;
	struct rec *head;       /* connections libmicrohttpd has not closed */
	unsigned long shut;     /* connections shut down so far */
};

/* The real monotonic clock (never the virtual one: sockets run in real time). */
static double mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *sweep(void *arg)
{
	struct hs_deadline *d = arg;
	struct timespec at;

	pthread_mutex_lock(&d->lock);
	while (!d->stopping) {
		double now = mono();

		for (struct rec *r = d->head; r; r = r->next)
			if (!r->done && !r->shut && now >= r->deadline) {
				/* libmicrohttpd reads the end of the stream and closes it */
				shutdown(r->fd, SHUT_RDWR);
				r->shut = 1;
				d->shut++;
			}
		clock_gettime(CLOCK_MONOTONIC, &at);
		at.tv_nsec += SWEEP_MS * 1000000L;
		if (at.tv_nsec >= 1000000000L) {
			at.tv_sec++;
			at.tv_nsec -= 1000000000L;
		}
		while (!d->stopping && pthread_cond_timedwait(&d->wake, &d->lock, &at) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

struct hs_deadline *hsd_new(double seconds)
{
	struct hs_deadline *d = calloc(1, sizeof *d);
	pthread_condattr_t ca;

	if (!d)
		return NULL;
	d->seconds = seconds;
	pthread_mutex_init(&d->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&d->wake, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&d->thread, NULL, sweep, d) != 0) {
		pthread_cond_destroy(&d->wake);
		pthread_mutex_destroy(&d->lock);
		free(d);
		return NULL;
	}
	return d;
}

void hsd_notify(void *cls, struct MHD_Connection *c, void **socket_context,
		enum MHD_ConnectionNotificationCode code)
{
	struct hs_deadline *d = cls;
	struct rec *r;

	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);

		*socket_context = NULL;
		if (!ci || !(r = calloc(1, sizeof *r)))
			return; /* untimed: the idle timeout still applies */
		r->fd = ci->connect_fd;
		r->deadline = mono() + d->seconds;
		pthread_mutex_lock(&d->lock);
		r->next = d->head;
		if (d->head)
			d->head->prev = r;
		d->head = r;
		pthread_mutex_unlock(&d->lock);
		*socket_context = r;
	} else if (code == MHD_CONNECTION_NOTIFY_CLOSED && (r = *socket_context)) {
		pthread_mutex_lock(&d->lock);
		if (r->prev)
			r->prev->next = r->next;
		else
			d->head = r->next;
		if (r->next)
			r->next->prev = r->prev;
		pthread_mutex_unlock(&d->lock);
		free(r);
		*socket_context = NULL;
	}
}

void hsd_headers_done(struct hs_deadline *d, struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci;
	struct rec *r;

	if (!d || !(ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT)) ||
	    !(r = ci->socket_context))
		return;
	pthread_mutex_lock(&d->lock);
	r->done = 1;
	pthread_mutex_unlock(&d->lock);
}

unsigned long hsd_count(struct hs_deadline *d)
{
	unsigned long n;

	if (!d)
		return 0;
	pthread_mutex_lock(&d->lock);
	n = d->shut;
	pthread_mutex_unlock(&d->lock);
	return n;
}

void hsd_free(struct hs_deadline *d)
{
	if (!d)
		return;
	pthread_mutex_lock(&d->lock);
	d->stopping = 1;
	pthread_cond_signal(&d->wake);
	pthread_mutex_unlock(&d->lock);
	pthread_join(d->thread, NULL);
	while (d->head) { /* none after MHD_stop_daemon; kept safe anyway */
		struct rec *r = d->head;

		d->head = r->next;
		free(r);
	}
	pthread_cond_destroy(&d->wake);
	pthread_mutex_destroy(&d->lock);
	free(d);
}
