/*
 * tap.h: the smallest TAP producer for C unit tests.
 *
 *   ok(cond, "a sentence naming the behaviour");
 *   skip("why it cannot run here", "a sentence naming the behaviour");
 *   return tap_done();     (prints the plan; exit status 1 if any failed)
 *
 * A skip prints "ok N - name # SKIP why" (TAP's skip directive): tests/run
 * counts it as skipped, never as passed, and it does not fail the test.
 */
#ifndef HYPD_TAP_H
#define HYPD_TAP_H

#include <stdio.h>

static int tap_n, tap_failed;

#define ok(cond, ...) tap_ok(!!(cond), __FILE__, __LINE__, __VA_ARGS__)

static void tap_ok(int pass, const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#include <stdarg.h>
static void tap_ok(int pass, const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	printf("%s %d - ", pass ? "ok" : "not ok", ++tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	if (!pass) {
		tap_failed++;
		printf("#   failed at %s:%d\n", file, line);
	}
	fflush(stdout);
}

#define skip(reason, ...) tap_skip(reason, __VA_ARGS__)

static void tap_skip(const char *reason, const char *fmt, ...)
	__attribute__((format(printf, 2, 3), unused));

static void tap_skip(const char *reason, const char *fmt, ...)
{
	va_list ap;

	printf("ok %d - ", ++tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf(" # SKIP %s\n", reason);
	fflush(stdout);
}

static int tap_done(void)
{
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}

#endif
