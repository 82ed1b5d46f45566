/* statelock: the lock of a state directory (see statelock.h). */
#include "statelock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

static struct {
	int fd;              /* the open, locked file; -1 when not held */
	char *dir;           /* the state directory it locks (malloc'd) */
	statelock_info me;   /* what the file says about this process */
} held = { .fd = -1 };

static void nap(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* copies a line into dst with control characters made spaces */
static void copy_line(char *dst, size_t cap, const char *src)
{
	size_t i = 0;

	for (; src && src[i] && i + 1 < cap; i++)
		dst[i] = (unsigned char)src[i] < 0x20 ? ' ' : src[i];
	dst[i] = '\0';
}

/* Rewrites the file from held.me. */
static int write_info(void)
{
	char buf[1024];
	int n = snprintf(buf, sizeof buf, "pid %ld\ncommand %s\nsince %.3f\nstatus %s\n",
			 held.me.pid, held.me.command, held.me.since,
			 held.me.stopping ? "stopping" : "running");

	if (held.me.stopping)
		n += snprintf(buf + n, sizeof buf - (size_t)n, "grace %g\n", held.me.grace);
	if (held.me.url[0])
		n += snprintf(buf + n, sizeof buf - (size_t)n, "url %s\n", held.me.url);
	if (ftruncate(held.fd, 0) != 0 || pwrite(held.fd, buf, (size_t)n, 0) != n)
		return -1;
	return 0;
}

/* Parses the text of a lock file; 0 when it named a pid. */
static int parse_info(const char *text, statelock_info *out)
{
	const char *line = text;

	memset(out, 0, sizeof *out);
	while (line && *line) {
		const char *nl = strchr(line, '\n'), *sp = strchr(line, ' ');
		char value[256];
		size_t klen, vlen;

		if (!nl)
			break; /* a line still being written */
		if (sp && sp < nl) {
			klen = (size_t)(sp - line);
			vlen = (size_t)(nl - sp - 1);
			if (vlen >= sizeof value)
				vlen = sizeof value - 1;
			memcpy(value, sp + 1, vlen);
			value[vlen] = '\0';
			if (klen == 3 && !strncmp(line, "pid", 3))
				out->pid = strtol(value, NULL, 10);
			else if (klen == 7 && !strncmp(line, "command", 7))
				copy_line(out->command, sizeof out->command, value);
			else if (klen == 5 && !strncmp(line, "since", 5))
				out->since = strtod(value, NULL);
			else if (klen == 6 && !strncmp(line, "status", 6))
				out->stopping = !strcmp(value, "stopping");
			else if (klen == 5 && !strncmp(line, "grace", 5))
				out->grace = strtod(value, NULL);
			else if (klen == 3 && !strncmp(line, "url", 3))
				copy_line(out->url, sizeof out->url, value);
		}
		line = nl + 1;
	}
	return out->pid > 0 ? 0 : -1;
}

/* Reads the holder from fd; the holder may be rewriting it, so a few tries. */
static void read_holder(int fd, statelock_info *out)
{
	char buf[2048];

	for (int i = 0; i < 20; i++) {
		ssize_t n = pread(fd, buf, sizeof buf - 1, 0);

		buf[n > 0 ? n : 0] = '\0';
		if (parse_info(buf, out) == 0)
			return;
		nap(10);
	}
}

int statelock_acquire(const char *dir, const char *command, statelock_info *holder,
		      char *err, size_t errlen)
{
	char path[4096];
	int fd;

	if (holder)
		memset(holder, 0, sizeof *holder);
	if (held.fd >= 0) {
		if (!strcmp(held.dir, dir))
			return STATELOCK_HELD;
		snprintf(err, errlen, "this process already holds the lock of the state directory %s",
			 held.dir);
		return STATELOCK_ERROR;
	}
	if (snprintf(path, sizeof path, "%s/lock", dir) >= (int)sizeof path) {
		snprintf(err, errlen, "the state directory path is too long");
		return STATELOCK_ERROR;
	}
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		snprintf(err, errlen, "cannot open the lock %s: %s", path, strerror(errno));
		return STATELOCK_ERROR;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		int e = errno;

		if (e == EWOULDBLOCK) {
			statelock_info other;

			read_holder(fd, holder ? holder : &other);
			close(fd);
			return STATELOCK_BUSY;
		}
		close(fd);
		snprintf(err, errlen, "cannot lock %s: %s", path, strerror(e));
		return STATELOCK_ERROR;
	}
	held.dir = strdup(dir);
	if (!held.dir) {
		close(fd);
		snprintf(err, errlen, "out of memory");
		return STATELOCK_ERROR;
	}
	held.fd = fd;
	memset(&held.me, 0, sizeof held.me);
	held.me.pid = (long)getpid();
	copy_line(held.me.command, sizeof held.me.command, command ? command : "hypd");
	held.me.since = hclock_wall();
	if (write_info() != 0) {
		snprintf(err, errlen, "cannot write the lock %s: %s", path, strerror(errno));
		statelock_release(dir);
		return STATELOCK_ERROR;
	}
	return STATELOCK_HELD;
}

int statelock_wait(const char *dir, const char *command, double seconds, double settle,
		   int (*give_up)(void), statelock_info *holder, char *err, size_t errlen)
{
	double start = hclock_mono(), now;
	statelock_info other;
	int rc;

	if (!holder)
		holder = &other;
	for (;;) {
		rc = statelock_acquire(dir, command, holder, err, errlen);
		now = hclock_mono();
		if (rc != STATELOCK_BUSY || (give_up && give_up()))
			return rc;
		/* no pid: the holder is between taking (or releasing) it and writing the file */
		if (now - start >= (holder->stopping || holder->pid <= 0 ? (seconds > settle ? seconds : settle)
									   : settle))
			return rc;
		nap(50);
	}
}

const char *statelock_dir(void) { return held.fd >= 0 ? held.dir : NULL; }

int statelock_update(const char *url, int stopping, double grace)
{
	if (held.fd < 0)
		return -1;
	if (url)
		copy_line(held.me.url, sizeof held.me.url, url);
	if (stopping) {
		held.me.stopping = 1;
		held.me.grace = grace;
	}
	return write_info();
}

void statelock_release(const char *dir)
{
	if (held.fd < 0 || (dir && strcmp(dir, held.dir)))
		return;
	if (ftruncate(held.fd, 0) != 0) {
		/* the kernel drops the lock at close all the same */
	}
	close(held.fd);
	held.fd = -1;
	free(held.dir);
	held.dir = NULL;
}

int statelock_read(const char *dir, statelock_info *out)
{
	char path[4096];
	int fd;

	memset(out, 0, sizeof *out);
	if (snprintf(path, sizeof path, "%s/lock", dir) >= (int)sizeof path)
		return -1;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -1;
	read_holder(fd, out);
	close(fd);
	return 0;
}
