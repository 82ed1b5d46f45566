/* jobs: a small worker pool (see jobs.h). */
#include "jobs.h"

#include <pthread.h>
#include <stdlib.h>

struct jobs {
	pthread_mutex_t lock;      /* guards everything below */
	pthread_cond_t wake;       /* signals workers: work or stop */
	job *todo, *todo_tail;     /* queued jobs, FIFO */
	job *done, *done_tail;     /* finished jobs, FIFO */
	int pending;               /* submitted or posted and not yet taken */
	int arrivals;              /* of those, posted (jobs_post_done) */
	int nthreads, maxthreads;  /* workers started, allowed */
	int idle;                  /* workers waiting for work */
	int stopping;              /* jobs_free was called */
	pthread_t *threads;        /* started workers */
	uint64_t next_id;          /* last id handed out */
	void (*notify)(void *);    /* called after each job finishes */
	void *ud;                  /* notify's argument */
};

static void append(job **head, job **tail, job *j)
{
	j->next = NULL;
	if (*tail)
		(*tail)->next = j;
	else
		*head = j;
	*tail = j;
}

static job *pop(job **head, job **tail)
{
	job *j = *head;

	if (j) {
		*head = j->next;
		if (!*head)
			*tail = NULL;
	}
	return j;
}

static void *worker(void *arg)
{
	jobs *q = arg;

	pthread_mutex_lock(&q->lock);
	for (;;) {
		job *j;

		while (!q->todo && !q->stopping) {
			q->idle++;
			pthread_cond_wait(&q->wake, &q->lock);
			q->idle--;
		}
		j = pop(&q->todo, &q->todo_tail);
		if (!j)
			break;
		pthread_mutex_unlock(&q->lock);
		j->run(j);
		pthread_mutex_lock(&q->lock);
		append(&q->done, &q->done_tail, j);
		if (q->notify)
			q->notify(q->ud);
	}
	pthread_mutex_unlock(&q->lock);
	return NULL;
}

jobs *jobs_new(int nthreads, void (*notify)(void *ud), void *ud)
{
	jobs *q = calloc(1, sizeof *q);

	if (!q)
		return NULL;
	q->maxthreads = nthreads > 0 ? nthreads : 4;
	q->threads = calloc((size_t)q->maxthreads, sizeof *q->threads);
	if (!q->threads) {
		free(q);
		return NULL;
	}
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->wake, NULL);
	q->notify = notify;
	q->ud = ud;
	return q;
}

uint64_t jobs_submit(jobs *q, job *j)
{
	uint64_t id;

	pthread_mutex_lock(&q->lock);
	if (q->idle == 0 && q->nthreads < q->maxthreads &&
	    pthread_create(&q->threads[q->nthreads], NULL, worker, q) == 0)
		q->nthreads++;
	if (q->nthreads == 0) {
		pthread_mutex_unlock(&q->lock);
		return 0;
	}
	id = j->id = ++q->next_id;
	j->arrival = 0;
	append(&q->todo, &q->todo_tail, j);
	q->pending++;
	pthread_cond_signal(&q->wake);
	pthread_mutex_unlock(&q->lock);
	return id;
}

uint64_t jobs_post_done(jobs *q, job *j)
{
	uint64_t id;

	pthread_mutex_lock(&q->lock);
	id = j->id = ++q->next_id;
	j->arrival = 1;
	q->pending++;
	q->arrivals++;
	append(&q->done, &q->done_tail, j);
	if (q->notify)
		q->notify(q->ud);
	pthread_mutex_unlock(&q->lock);
	return id;
}

job *jobs_take_done(jobs *q)
{
	job *j;

	pthread_mutex_lock(&q->lock);
	j = pop(&q->done, &q->done_tail);
	if (j) {
		q->pending--;
		q->arrivals -= j->arrival;
	}
	pthread_mutex_unlock(&q->lock);
	return j;
}

int jobs_pending(jobs *q)
{
	int n;

	pthread_mutex_lock(&q->lock);
	n = q->pending;
	pthread_mutex_unlock(&q->lock);
	return n;
}

int jobs_arrivals(jobs *q)
{
	int n;

	pthread_mutex_lock(&q->lock);
	n = q->arrivals;
	pthread_mutex_unlock(&q->lock);
	return n;
}

void jobs_free(jobs *q)
{
	job *j;

	if (!q)
		return;
	pthread_mutex_lock(&q->lock);
	q->stopping = 1;
	/* jobs not started yet are dropped */
	while ((j = pop(&q->todo, &q->todo_tail)))
		j->destroy(j);
	pthread_cond_broadcast(&q->wake);
	pthread_mutex_unlock(&q->lock);
	for (int i = 0; i < q->nthreads; i++)
		pthread_join(q->threads[i], NULL);
	while ((j = pop(&q->done, &q->done_tail)))
		j->destroy(j);
	pthread_cond_destroy(&q->wake);
	pthread_mutex_destroy(&q->lock);
	free(q->threads);
	free(q);
}
