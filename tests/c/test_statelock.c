/* test_statelock: the lock of a state directory and its file modes, without Lua. */
#include "statedir.h"
#include "statelock.h"
#include "tap.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char root[64], err[512], warn[512];
static const char *self; /* argv[0]: the child processes are this program again */

static int mode_of(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0 ? (int)(sb.st_mode & 07777) : -1;
}

static void sub(char *out, size_t n, const char *name)
{
	snprintf(out, n, "%s/%s", root, name);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* A child that takes the lock of dir, says so on the pipe, then acts. */
enum { CHILD_EXIT, CHILD_HANG, CHILD_STOPPING };
static pid_t holder_child(const char *dir, int what)
{
	int p[2];
	char c = 0;
	pid_t pid;

	if (pipe(p) != 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		char e[256];

		close(p[0]);
		c = statelock_acquire(dir, "test child", NULL, e, sizeof e) == STATELOCK_HELD ? 'y' : 'n';
		if (what == CHILD_STOPPING)
			statelock_update("http://127.0.0.1:1", 1, 0.3);
		if (write(p[1], &c, 1) != 1)
			_exit(2);
		if (what == CHILD_HANG)
			pause();
		if (what == CHILD_STOPPING)
			sleep_ms(400);
		_exit(0);
	}
	close(p[1]);
	if (read(p[0], &c, 1) != 1 || c != 'y') {
		close(p[0]);
		return -1;
	}
	close(p[0]);
	return pid;
}

static void test_modes(void)
{
	char dir[128], db[160];
	mode_t old = umask(0);
	int st;

	sub(dir, sizeof dir, "fresh/state");
	ok(statedir_prepare(dir, err, sizeof err, warn, sizeof warn) == 0, "a missing state directory is created: %s", err);
	ok(mode_of(dir) == 0700, "with mode 0700 under umask 000 (got %04o)", mode_of(dir));
	ok(warn[0] == '\0', "and no warning");
	sub(db, sizeof db, "fresh/state/hypd.db");
	st = statedir_create_private(db, err, sizeof err);
	ok(st == 0 && mode_of(db) == 0600, "a private file is created 0600 under umask 000 (got %04o)", mode_of(db));
	umask(old);

	chmod(dir, 0777);
	ok(statedir_prepare(dir, err, sizeof err, warn, sizeof warn) != 0 &&
	   strstr(err, "other users can write it") && strstr(err, "chmod 700 "),
	   "a world-writable directory is refused with its fix: %s", err);
	chmod(dir, 0770);
	ok(statedir_prepare(dir, err, sizeof err, warn, sizeof warn) != 0 && strstr(err, "its group can write"),
	   "so is a group-writable one: %s", err);
	chmod(dir, 0755);
	ok(statedir_prepare(dir, err, sizeof err, warn, sizeof warn) == 0 && strstr(warn, "can read the state") &&
	   strstr(warn, "chmod 700 "), "a world-readable one is a warning: %s", warn);
	chmod(dir, 0700);
	chmod(db, 0666);
	ok(statedir_prepare(dir, err, sizeof err, warn, sizeof warn) != 0 && strstr(err, "hypd.db") &&
	   strstr(err, "chmod 600 "), "a world-writable store is refused with its fix: %s", err);
	chmod(db, 0644);
	ok(statedir_prepare(dir, err, sizeof err, warn, sizeof warn) == 0 && warn[0] == '\0',
	   "a readable store inside a 0700 directory is no warning: no one else can reach it");
	chmod(dir, 0711);
	ok(statedir_prepare(dir, err, sizeof err, warn, sizeof warn) == 0 && strstr(warn, "hypd.db"),
	   "but it is in a directory others may enter: %s", warn);
	chmod(dir, 0700);
	chmod(db, 0600);
}

static void test_lock(void)
{
	statelock_info h;
	char dir[128], lockf[160];
	pid_t pid;
	int st, fd, cloexec = 0;
	double t0;

	sub(dir, sizeof dir, "fresh/state");
	sub(lockf, sizeof lockf, "fresh/state/lock");
	err[0] = '\0';
	ok(statelock_dir() == NULL, "no lock is held at first");
	ok(statelock_acquire(dir, "hypd test --listen 127.0.0.1:1", &h, err, sizeof err) == STATELOCK_HELD,
	   "the lock is taken: %s", err);
	ok(statelock_dir() && !strcmp(statelock_dir(), dir), "and this process knows it holds it");
	ok(mode_of(lockf) == 0600, "the lock file is 0600 (got %04o)", mode_of(lockf));
	ok(statelock_acquire(dir, "again", &h, err, sizeof err) == STATELOCK_HELD, "taking it again is a no-op");
	ok(statelock_acquire(root, "other", &h, err, sizeof err) == STATELOCK_ERROR && strstr(err, "already holds"),
	   "a second directory in the same process is an error: %s", err);
	ok(statelock_read(dir, &h) == 0 && h.pid == (long)getpid() && !strcmp(h.command,
	   "hypd test --listen 127.0.0.1:1") && h.since > 0 && !h.stopping, "the file names pid, command and start");
	for (fd = 3; fd < 1024; fd++) {
		struct stat a, b;

		if (fstat(fd, &a) == 0 && stat(lockf, &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev)
			cloexec = fcntl(fd, F_GETFD) & FD_CLOEXEC;
	}
	ok(cloexec, "its descriptor is close-on-exec: no child process inherits the lock");

	pid = fork();
	if (pid == 0) {
		execl(self, self, "busy", dir, (char *)NULL);
		_exit(3);
	}
	ok(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	   "another process is refused and told who holds it (status %d)", WEXITSTATUS(st));
	ok(statelock_update("http://127.0.0.1:9", 1, 7) == 0 && statelock_read(dir, &h) == 0 && h.stopping &&
	   h.grace == 7 && !strcmp(h.url, "http://127.0.0.1:9"), "stopping, its grace and the URL are recorded");
	statelock_release(dir);
	ok(statelock_dir() == NULL && statelock_read(dir, &h) == 0 && h.pid == 0, "release empties the file");

	pid = holder_child(dir, CHILD_HANG);
	ok(pid > 0, "a child holds the lock");
	ok(statelock_acquire(dir, "parent", &h, err, sizeof err) == STATELOCK_BUSY && h.pid == (long)pid,
	   "so this process is refused, naming the child");
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	ok(statelock_acquire(dir, "parent", &h, err, sizeof err) == STATELOCK_HELD,
	   "a holder killed with SIGKILL leaves the lock free at once");
	statelock_release(NULL);

	pid = holder_child(dir, CHILD_STOPPING);
	t0 = now();
	st = statelock_wait(dir, "parent", 3, 0, NULL, &h, err, sizeof err);
	t0 = now() - t0;
	ok(st == STATELOCK_HELD && t0 > 0.2, "a stopping holder is waited for, then the lock is taken (%.2f s)", t0);
	waitpid(pid, &st, 0);
	statelock_release(NULL);

	pid = holder_child(dir, CHILD_HANG);
	t0 = now();
	st = statelock_wait(dir, "parent", 3, 0.3, NULL, &h, err, sizeof err);
	t0 = now() - t0;
	ok(st == STATELOCK_BUSY && t0 >= 0.25 && t0 < 2,
	   "a holder that is not stopping is waited for only the settle time (%.2f s)", t0);
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
}

int main(int argc, char **argv)
{
	char cmd[128];

	self = argv[0];
	if (argc == 3 && !strcmp(argv[1], "busy")) {
		/* a separate process: refused, and told who holds the lock */
		statelock_info c;
		char e[256];

		return statelock_acquire(argv[2], "child", &c, e, sizeof e) == STATELOCK_BUSY &&
		       c.pid == (long)getppid() && !strcmp(c.command, "hypd test --listen 127.0.0.1:1") ? 0 : 1;
	}

	snprintf(root, sizeof root, "/tmp/hypd-statelock.XXXXXX");
	if (!mkdtemp(root))
		return 1;
	test_modes();
	test_lock();
	snprintf(cmd, sizeof cmd, "rm -rf %s", root);
	if (system(cmd) != 0)
		ok(0, "cleanup");
	return tap_done();
}
