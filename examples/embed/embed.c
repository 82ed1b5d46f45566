/*
 * embed: a C program that embeds hypd through host/hypd.h.
 *
 *   make build/embed && build/embed [PLAYBOOK [JSON-ARGS]]
 *
 * Opens a host (state in $HYPD_STATE or ~/.hypd), calls a playbook with JSON
 * arguments, prints the JSON result, closes the host. Exit status 1 when the
 * call fails (the JSON error goes to stderr).
 */
#include <stdio.h>

#include "hypd.h"

int main(int argc, char **argv)
{
	const char *name = argc > 1 ? argv[1] : "hello";
	const char *args = argc > 2 ? argv[2] : "{\"name\":\"embedder\"}";
	hypd_options opts = { 0 };
	char *err = NULL, *out = NULL;
	hypd *h;
	int rc;

	h = hypd_open(&opts, &err);
	if (!h) {
		fprintf(stderr, "embed: %s\n", err ? err : "cannot open hypd");
		hypd_free(err);
		return 1;
	}
	rc = hypd_call(h, name, args, &out);
	fprintf(rc == 0 ? stdout : stderr, "%s\n", out ? out : "(no output)");
	hypd_free(out);
	hypd_close(h);
	return rc == 0 ? 0 : 1;
}
