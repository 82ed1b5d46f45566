/*
 * echo_server: a loopback HTTP server for the engine tests.
 *
 *   echo_server [SECONDS [CERT.pem KEY.pem]]
 *       listens on 127.0.0.1 on a free port (HTTPS with the given certificate
 *       and key), prints "PORT <n> PID <pid>", exits after SECONDS (60)
 *
 * GET/POST /echo/...      -> 200, body "<METHOD> <path> <request body>"
 * GET /delay/<ms>         -> 200 after ms milliseconds
 * GET /big/<bytes>        -> 200 with that many 'x'
 * GET /status/<code>      -> that status, body "status <code>"
 * GET /header             -> 200, body = value of request header x-test
 * Tests kill it when they are done; the lifetime cap covers a dying test.
 */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct req {
	char *body;    /* request body so far */
	size_t len;    /* bytes of body */
};

static enum MHD_Result reply(struct MHD_Connection *c, unsigned code,
			     const char *body, size_t len)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(
		len, (void *)body, MHD_RESPMEM_MUST_COPY);
	enum MHD_Result ret;

	MHD_add_response_header(r, "Content-Type", "text/plain");
	MHD_add_response_header(r, "X-Echo", "yes");
	ret = MHD_queue_response(c, code, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c,
			      const char *url, const char *method,
			      const char *version, const char *data,
			      size_t *data_size, void **req_cls)
{
	struct req *q = *req_cls;
	enum MHD_Result ret;
	char *out;
	size_t n;

	(void)cls;
	(void)version;
	if (!q) {
		*req_cls = calloc(1, sizeof *q);
		return *req_cls ? MHD_YES : MHD_NO;
	}
	if (*data_size) {
		char *grown = realloc(q->body, q->len + *data_size + 1);

		if (!grown)
			return MHD_NO;
		q->body = grown;
		memcpy(q->body + q->len, data, *data_size);
		q->len += *data_size;
		q->body[q->len] = 0;
		*data_size = 0;
		return MHD_YES;
	}
	if (!strncmp(url, "/delay/", 7)) {
		struct timespec ts = { 0, 0 };
		long ms = atol(url + 7);

		ts.tv_sec = ms / 1000;
		ts.tv_nsec = (ms % 1000) * 1000000L;
		nanosleep(&ts, NULL);
		return reply(c, 200, "slept", 5);
	}
	if (!strncmp(url, "/big/", 5)) {
		n = (size_t)atol(url + 5);
		out = malloc(n + 1);
		if (!out)
			return MHD_NO;
		memset(out, 'x', n);
		ret = reply(c, 200, out, n);
		free(out);
		return ret;
	}
	if (!strncmp(url, "/status/", 8)) {
		char b[32];

		snprintf(b, sizeof b, "status %d", atoi(url + 8));
		return reply(c, (unsigned)atoi(url + 8), b, strlen(b));
	}
	if (!strcmp(url, "/header")) {
		const char *v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "x-test");

		return reply(c, 200, v ? v : "", v ? strlen(v) : 0);
	}
	n = strlen(method) + strlen(url) + q->len + 3;
	out = malloc(n);
	if (!out)
		return MHD_NO;
	snprintf(out, n, "%s %s %s", method, url, q->body ? q->body : "");
	ret = reply(c, 200, out, strlen(out));
	free(out);
	return ret;
}

static void done(void *cls, struct MHD_Connection *c, void **req_cls,
		 enum MHD_RequestTerminationCode toe)
{
	struct req *q = *req_cls;

	(void)cls;
	(void)c;
	(void)toe;
	if (q) {
		free(q->body);
		free(q);
	}
	*req_cls = NULL;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (buf = calloc(1, (size_t)n + 1)) && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

int main(int argc, char **argv)
{
	struct MHD_Daemon *d;
	const union MHD_DaemonInfo *info;
	struct sockaddr_in addr;
	unsigned life = argc > 1 ? (unsigned)atoi(argv[1]) : 60;
	unsigned int flags;
	char *cert, *key;

	memset(&addr, 0, sizeof addr);
	addr.sin_family = AF_INET;
	addr.sin_addr.s_addr = htonl(0x7f000001);
	cert = argc > 3 ? slurp(argv[2]) : NULL;
	key = argc > 3 ? slurp(argv[3]) : NULL;
	if (argc > 3 && (!cert || !key)) {
		fprintf(stderr, "echo_server: cannot read %s or %s\n", argv[2], argv[3]);
		return 1;
	}
	flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL;
	if (cert)
		d = MHD_start_daemon(flags | MHD_USE_TLS, 0, NULL, NULL, handle, NULL,
				     MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
				     MHD_OPTION_NOTIFY_COMPLETED, done, NULL,
				     MHD_OPTION_HTTPS_MEM_CERT, cert,
				     MHD_OPTION_HTTPS_MEM_KEY, key,
				     MHD_OPTION_END);
	else
		d = MHD_start_daemon(flags, 0, NULL, NULL, handle, NULL,
				     MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
				     MHD_OPTION_NOTIFY_COMPLETED, done, NULL,
				     MHD_OPTION_CONNECTION_LIMIT, (unsigned)2000,
				     MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned)1024,
				     MHD_OPTION_END);
	if (!d) {
		fprintf(stderr, "echo_server: cannot start\n");
		return 1;
	}
	info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	printf("PORT %u PID %ld\n", (unsigned)info->port, (long)getpid());
	fflush(stdout);
	sleep(life);
	MHD_stop_daemon(d);
	free(cert);
	free(key);
	return 0;
}
