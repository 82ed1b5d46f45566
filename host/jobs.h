/*
 * jobs: blocking work (credential fetches, file reads) on worker threads,
 * with results handed back to the engine thread. Pure C (pthreads).
 *
 * A job is a struct the caller embeds in its own allocation. `run` executes
 * on a worker thread; when it returns, the job moves to the done list and
 * `notify` is called (the engine uses it to wake its poll). The engine thread
 * takes done jobs with jobs_take_done(), reads their results, and calls
 * `destroy`, which frees the caller's allocation.
 */
#ifndef HYPD_JOBS_H
#define HYPD_JOBS_H

#include <stdint.h>

typedef struct job job;
struct job {
	void (*run)(job *j);                   /* the blocking work (worker thread) */
	void (*push)(job *j, void *lua_state); /* pushes the result (engine thread) */
	void (*destroy)(job *j);               /* frees the job (engine thread) */
	uint64_t id;                           /* set by jobs_submit */
	int arrival;                           /* set by jobs_post_done: news, not work */
	job *next;                             /* list link, owned by jobs */
};

typedef struct jobs jobs;

/* Up to nthreads workers start on demand. notify(ud) runs on a worker after
 * each job finishes; it must be thread-safe. */
jobs *jobs_new(int nthreads, void (*notify)(void *ud), void *ud);

/* Queues a job; returns its id (never 0), or 0 when no thread can start. */
uint64_t jobs_submit(jobs *q, job *j);

/* Hands the engine a job that finished elsewhere (e.g. an HTTP request
 * that arrived on a server thread): it joins the done list at once and
 * notify runs. Any thread. Returns its id. */
uint64_t jobs_post_done(jobs *q, job *j);

/* The next finished job, or NULL. Engine thread only. */
job *jobs_take_done(jobs *q);

/* Jobs submitted or posted and not yet taken. */
int jobs_pending(jobs *q);

/* Of those, the ones jobs_post_done handed in (arrivals such as a request
 * or a closed WebSocket) and not yet taken: news the engine has not read,
 * not work anyone waits for. */
int jobs_arrivals(jobs *q);

/* Waits for running jobs, then destroys every job and the queue. */
void jobs_free(jobs *q);

#endif
