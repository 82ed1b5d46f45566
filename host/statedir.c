/* statedir: the file modes of the state directory (see statedir.h). */
#include "statedir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define OTHERS_WRITE (S_IWGRP | S_IWOTH)
#define OTHERS_READ  (S_IRGRP | S_IROTH)
#define OTHERS_ENTER (S_IXGRP | S_IXOTH)

/* The files of the directory that are checked, and the mode each should have. */
static const struct {
	const char *name;  /* under the state directory */
	const char *fix;   /* the chmod mode that fixes it */
} members[] = {
	{ "hypd.db", "600" },
	{ "hypd.db-wal", "600" },
	{ "hypd.db-shm", "600" },
	{ "lock", "600" },
	{ "secrets", "700" },
};

char *statedir_default(void)
{
	const char *home = getenv("HOME");
	const char *env = getenv("HYPD_STATE");
	char *d;

	if (env && *env)
		return strdup(env);
	if (!home || !*home)
		home = ".";
	d = malloc(strlen(home) + sizeof("/.hypd"));
	if (d)
		sprintf(d, "%s/.hypd", home);
	return d;
}

/* mkdir -p with mode 0700 for every directory it creates, whatever the umask */
static int mkdirs(const char *dir, char *err, size_t errlen)
{
	char *p = strdup(dir), *c, end;
	int rc = 0;

	if (!p) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (c = p + 1; ; c++) {
		if (*c != '/' && *c)
			continue;
		end = *c;
		*c = '\0';
		if (mkdir(p, 0700) == 0) {
			if (chmod(p, 0700) != 0) {
				snprintf(err, errlen, "chmod 700 %s: %s", p, strerror(errno));
				rc = -1;
				break;
			}
		} else if (errno != EEXIST) {
			snprintf(err, errlen, "cannot create the state directory %s: %s", p,
				 strerror(errno));
			rc = -1;
			break;
		}
		*c = end;
		if (!end)
			break;
	}
	free(p);
	return rc;
}

/* "group", "others" or "group and others" for the bits of mask set in mode */
static const char *who(mode_t mode, mode_t mask)
{
	int g = (mode & mask & 0070) != 0, o = (mode & mask & 0007) != 0;

	return g && o ? "its group and other users" : g ? "its group" : "other users";
}

int statedir_prepare(const char *dir, char *err, size_t errlen, char *warn, size_t warnlen)
{
	struct stat sb, fb;
	char path[4096];

	if (warn && warnlen)
		warn[0] = '\0';
	if (!dir || !*dir) {
		snprintf(err, errlen, "the state directory is empty");
		return -1;
	}
	if (mkdirs(dir, err, errlen) != 0)
		return -1;
	if (stat(dir, &sb) != 0) {
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(sb.st_mode)) {
		snprintf(err, errlen, "the state directory %s is not a directory", dir);
		return -1;
	}
	if (sb.st_mode & OTHERS_WRITE) {
		snprintf(err, errlen, "refusing the state directory %s: %s can write it (mode %04o),"
			 " so they could replace the store, the secrets or the lock; fix it with:"
			 "  chmod 700 %s", dir, who(sb.st_mode, OTHERS_WRITE),
			 (unsigned)(sb.st_mode & 07777), dir);
		return -1;
	}
	for (size_t i = 0; i < sizeof members / sizeof members[0]; i++) {
		if (snprintf(path, sizeof path, "%s/%s", dir, members[i].name) >= (int)sizeof path) {
			snprintf(err, errlen, "the state directory path is too long");
			return -1;
		}
		if (stat(path, &fb) != 0)
			continue;
		if (fb.st_mode & OTHERS_WRITE) {
			snprintf(err, errlen, "refusing the state directory %s: %s can write %s"
				 " (mode %04o); fix it with:  chmod %s %s", dir,
				 who(fb.st_mode, OTHERS_WRITE), path, (unsigned)(fb.st_mode & 07777),
				 members[i].fix, path);
			return -1;
		}
		if (warn && !warn[0] && (sb.st_mode & OTHERS_ENTER) && (fb.st_mode & OTHERS_READ))
			snprintf(warn, warnlen, "%s can read %s (mode %04o): it holds operations, their"
				 " parameters and the token hashes; fix it with:  chmod %s %s",
				 who(fb.st_mode, OTHERS_READ), path, (unsigned)(fb.st_mode & 07777),
				 members[i].fix, path);
	}
	if (warn && (sb.st_mode & OTHERS_READ))
		snprintf(warn, warnlen, "%s can read the state directory %s (mode %04o): it holds"
			 " the store, the secrets of running operations and the lock; fix it with:"
			 "  chmod 700 %s", who(sb.st_mode, OTHERS_READ), dir,
			 (unsigned)(sb.st_mode & 07777), dir);
	return 0;
}

int statedir_create_private(const char *path, char *err, size_t errlen)
{
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);

	if (fd < 0) {
		if (errno == EEXIST)
			return 0;
		snprintf(err, errlen, "cannot create %s: %s", path, strerror(errno));
		return -1;
	}
	if (fchmod(fd, 0600) != 0) {
		snprintf(err, errlen, "chmod 600 %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}
