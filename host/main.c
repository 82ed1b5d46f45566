/* main: the hypd command line. */
#include <cJSON.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <lauxlib.h>

#include "ekstoken.h"
#include "host.h"
#include "hypd.h"
#include "json.h"
#include "luax.h"

static const char usage[] =
	"usage: hypd [--state DIR] [--playbooks DIR] [--log-level LEVEL]\n"
	"            [--region REGION] [--profile PROFILE] COMMAND [ARGS]\n"
	"\n"
	"commands:\n"
	"  run PLAYBOOK [key=value | key:=json ...]   run a playbook's main and print its JSON result\n"
	"  eks-token --cluster NAME                   print an EKS ExecCredential (kubectl exec plugin)\n"
	"  kubeconfig --cluster NAME [--write FILE]   a kubeconfig that uses hypd eks-token\n"
	"  doctor [--json]                            check the region, credentials, identity, endpoints\n"
	"  sandbox [--listen ADDR:PORT] [--speed N | --virtual-clock] [--faults FILE]\n"
	"                                             serve a simulated AWS account on loopback\n"
	"  serve [--listen ADDR:PORT] [--sandbox]     REST, MCP, /ws and metrics on one port\n"
	"  tools [--json]                             list the tools (--json: with their schemas)\n"
	"  call TOOL [key=value ...] [--api URL] [--wait | --detach]\n"
	"                                             call a tool, in this process or on a server\n"
	"  token create|list|revoke                   bearer tokens for serve (see hypd token --help)\n"
	"  mcp [--api URL]                            MCP over stdio, in-process or through a server\n"
	"  version                                    print the version\n"
	"  help                                       this text\n"
	"\n"
	"PLAYBOOK is a file ending in .lua, or the name of a playbook in the playbook\n"
	"directory or compiled into hypd (try: hypd run hello).\n"
	"\n"
	"environment: HYPD_STATE (default ~/.hypd), HYPD_PLAYBOOKS, HYPD_LOG_LEVEL,\n"
	"HYPD_TOKEN (for --api),\n"
	"HYPD_CLOCK=virtual (simulated time), and the AWS SDK variables (AWS_REGION,\n"
	"AWS_PROFILE, AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_<SERVICE>, ...).\n";

static const char eks_token_usage[] =
	"usage: hypd eks-token --cluster NAME [--region REGION] [--profile PROFILE]\n"
	"\n"
	"Prints a client.authentication.k8s.io/v1beta1 ExecCredential with an EKS\n"
	"bearer token, like `aws eks get-token`, so kubectl can use hypd as its\n"
	"exec plugin (see hypd kubeconfig in a later release).\n";

static const char sandbox_usage[] =
	"usage: hypd [--state DIR] sandbox [--listen ADDR:PORT] [--speed N | --virtual-clock]\n"
	"                                  [--faults FILE]\n"
	"\n"
	"Serves a simulated AWS account (STS, IAM, EC2, S3, EKS, SageMaker HyperPod,\n"
	"FSx) on loopback, default 127.0.0.1:4566, plain HTTP like LocalStack. Prints\n"
	"the environment to use it. Every request must be signed with the printed\n"
	"keys. State survives restarts (in --state DIR). --speed N runs simulated\n"
	"durations N times faster; --virtual-clock makes them instant. --faults FILE\n"
	"is JSON: throttling, 5xx and latency per service, capacity shortages,\n"
	"failing nodes, with a seed. Ctrl-C stops it. Like hypd serve, it owns its\n"
	"state directory: a second process on it is refused.\n";

static const char kubeconfig_usage[] =
	"usage: hypd kubeconfig --cluster NAME [--region REGION] [--profile PROFILE] [--write FILE]\n"
	"\n"
	"Prints (or writes to FILE, mode 0600) a kubeconfig for the EKS cluster that\n"
	"runs `hypd eks-token` as its exec credential plugin, like\n"
	"`aws eks update-kubeconfig`. The cluster must be ACTIVE.\n";

static const char doctor_usage[] =
	"usage: hypd doctor [--json] [--region REGION] [--profile PROFILE]\n"
	"\n"
	"Reports the AWS region and where it came from, the credential source (never\n"
	"a secret), the caller identity from STS GetCallerIdentity, and the endpoint\n"
	"of every service hypd uses. Exits 1 when something is missing or fails.\n";

static const char run_usage[] =
	"usage: hypd run [--timeout SECONDS] [--args JSON] PLAYBOOK [key=value | key:=json ...]\n"
	"\n"
	"Runs the playbook's main(args) and prints its result as JSON.\n"
	"key=value passes a string; key:=json passes any JSON value (numbers,\n"
	"booleans, arrays, objects). --args gives all arguments as one JSON object.\n"
	"Exits 1 with the error on stderr when the playbook fails.\n";

static const char serve_usage[] =
	"usage: hypd serve [--listen ADDR:PORT] [--state DIR] [--playbooks DIR] [--grace SECONDS]\n"
	"                  [--sandbox [--speed N]]\n"
	"\n"
	"Serves the REST API (/api/v1), MCP (/mcp), WebSocket events (/ws) and\n"
	"Prometheus metrics (/metrics) on one port, default 127.0.0.1:3099 (port 0\n"
	"picks a free one). Every request but GET /api/v1/health needs a bearer\n"
	"token. The first start with no token creates an admin token and prints it\n"
	"once; a non-loopback address is refused until a token exists (hypd token\n"
	"create). Operations left running resume. --sandbox also runs the simulated\n"
	"AWS account in this process, points the AWS layer at it and prints a fresh\n"
	"admin token (--speed N: simulated durations N times faster). SIGTERM or\n"
	"Ctrl-C stops it: no new requests, running operations get --grace seconds\n"
	"(default 10) to reach their next phase, and resume at the next start.\n"
	"\n"
	"One process at a time owns a state directory: a second hypd serve on it\n"
	"exits 1 naming the one that holds it (use --api URL to talk to that one);\n"
	"started while the holder is stopping, it waits for it (its grace + 5 s).\n";

static const char tools_usage[] =
	"usage: hypd tools [--json] [--state DIR] [--playbooks DIR]\n"
	"\n"
	"Lists the tools: name, kind (read, mutating, destructive) and summary.\n"
	"--json prints the whole registry with input and output JSON Schemas.\n";

static const char call_usage[] =
	"usage: hypd call TOOL [key=value | key:=json ...] [--json ARGS] [--api URL]\n"
	"                 [--wait | --detach] [--state DIR] [--playbooks DIR]\n"
	"\n"
	"Calls a tool and prints its result as JSON. key=value is read by the tool's\n"
	"schema (integers, numbers, booleans; arrays and objects as JSON); key:=json\n"
	"is always JSON; --json gives all arguments as one object. In this process\n"
	"by default (the configured AWS account), or with --api URL on a running\n"
	"hypd serve with the token in HYPD_TOKEN. A staged tool answers with an\n"
	"operation: --wait follows it, printing each phase on stderr, then prints\n"
	"the operation; in-process the command does not exit before the operation\n"
	"ends unless --detach, which leaves it to the next hypd serve on this state.\n"
	"In-process, a mutating or destructive tool needs the state directory: while\n"
	"another process (a hypd serve) owns it, the call exits 1 naming it; use --api.\n"
	"Exits 1 with the error on stderr when the call fails, 2 on a usage error.\n";

static const char token_usage[] =
	"usage: hypd token create --scope read|operate|admin --name NAME\n"
	"       hypd token list [--json]\n"
	"       hypd token revoke NAME|ID\n"
	"       (each also takes --state DIR)\n"
	"\n"
	"Bearer tokens for hypd serve. create prints the token once; only its\n"
	"SHA-256 is stored. read may call read tools, operate also mutating ones,\n"
	"admin also destructive ones. list shows names, scopes, dates and ids,\n"
	"never a token.\n";

static const char mcp_usage[] =
	"usage: hypd mcp [--api URL] [--state DIR] [--playbooks DIR]\n"
	"\n"
	"Speaks MCP over stdin and stdout: the tools run in this process, or with\n"
	"--api URL on a running hypd serve (token in HYPD_TOKEN). In-process while\n"
	"another process (a hypd serve) owns the state directory, only read tools\n"
	"work; the others answer LOCKED, naming it.\n";

static hypd *running;

static void on_signal(int sig)
{
	(void)sig;
	hypd_interrupt(running);
}

static int fail(const char *fmt, const char *arg)
{
	fprintf(stderr, "hypd: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n");
	return 2;
}

static int wants_help(int argc, char **argv)
{
	for (int i = 0; i < argc; i++)
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
			return 1;
	return 0;
}

/* Builds the argument object from --args and key=value words. */
static char *build_args(const char *base, int argc, char **argv)
{
	cJSON *obj = base ? cJSON_Parse(base) : cJSON_CreateObject();
	char *out = NULL;

	if (!obj || !cJSON_IsObject(obj)) {
		fail("--args must be a JSON object: %s", base ? base : "");
		goto done;
	}
	for (int i = 0; i < argc; i++) {
		char *eq = strchr(argv[i], '=');
		cJSON *v;

		if (!eq || eq == argv[i] || (eq == argv[i] + 1 && argv[i][0] == ':')) {
			fail("argument '%s' is not key=value or key:=json", argv[i]);
			goto done;
		}
		if (eq[-1] == ':') {
			v = cJSON_Parse(eq + 1);
			if (!v) {
				fail("argument '%s' has a value that is not JSON", argv[i]);
				goto done;
			}
			eq[-1] = 0;
		} else {
			v = cJSON_CreateString(eq + 1);
			*eq = 0;
		}
		cJSON_DeleteItemFromObjectCaseSensitive(obj, argv[i]);
		cJSON_AddItemToObject(obj, argv[i], v);
	}
	out = cJSON_PrintUnformatted(obj);
done:
	cJSON_Delete(obj);
	return out;
}

/* Prints a JSON error object as "hypd: CODE: message" (and fields). */
static void print_error(const char *json)
{
	cJSON *e = cJSON_Parse(json), *code, *msg;

	code = cJSON_GetObjectItemCaseSensitive(e, "code");
	msg = cJSON_GetObjectItemCaseSensitive(e, "message");
	if (cJSON_IsString(code) && cJSON_IsString(msg))
		fprintf(stderr, "hypd: %s: %s\n", code->valuestring, msg->valuestring);
	else
		fprintf(stderr, "hypd: %s\n", json);
	cJSON_Delete(e);
}

static int cmd_run(hypd_options *o, int argc, char **argv)
{
	const char *args_json = NULL;
	char *args, *out, *err, *pretty;
	hypd *h;
	int i = 0, rc;

	if (wants_help(argc, argv)) {
		fputs(run_usage, stdout);
		return 0;
	}
	for (; i < argc && argv[i][0] == '-' && argv[i][1] == '-'; i += 2) {
		if (i + 1 >= argc)
			return fail("%s needs a value", argv[i]);
		if (!strcmp(argv[i], "--timeout")) {
			char *end;

			o->timeout = strtod(argv[i + 1], &end);
			if (*end || o->timeout <= 0)
				return fail("--timeout must be a positive number of seconds, not '%s'",
					    argv[i + 1]);
		} else if (!strcmp(argv[i], "--args")) {
			args_json = argv[i + 1];
		} else {
			return fail("unknown option '%s' for run (see hypd run --help)", argv[i]);
		}
	}
	if (i >= argc)
		return fail("%s", "run needs a PLAYBOOK (see hypd run --help)");
	args = build_args(args_json, argc - i - 1, argv + i + 1);
	if (!args)
		return 2;
	h = hypd_open(o, &err);
	if (!h) {
		fail("%s", err ? err : "cannot start");
		hypd_free(err);
		free(args);
		return 1;
	}
	running = h;
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	rc = hypd_call(h, argv[i], args, &out);
	running = NULL;
	if (rc == 0) {
		lua_State *L = hypd_lua(h);
		char jerr[128];

		pretty = NULL;
		if (hj_decode(L, out, strlen(out), jerr, sizeof jerr) == 0)
			pretty = hj_encode(L, -1, 1, jerr, sizeof jerr);
		lua_settop(L, 0);
		puts(pretty ? pretty : out);
		free(pretty);
	} else {
		print_error(out ? out : "{}");
	}
	hypd_free(out);
	free(args);
	hypd_close(h);
	return rc == 0 ? 0 : 1;
}

/*
 * Parses "--name value" options of a subcommand into the slots of names[]
 * (values[] parallel); flags (no value) are listed in flags[]. Returns 0, or
 * 2 after printing a one-line error.
 */
static int sub_options(int argc, char **argv, const char *const *names,
		       const char **values, const char *const *flags, int *set,
		       const char *cmd)
{
	for (int i = 0; i < argc; i++) {
		int found = 0;

		for (int k = 0; flags && flags[k]; k++)
			if (!strcmp(argv[i], flags[k]))
				set[k] = found = 1;
		for (int k = 0; !found && names[k]; k++)
			if (!strcmp(argv[i], names[k])) {
				if (i + 1 >= argc) {
					fprintf(stderr, "hypd: %s needs a value\n", argv[i]);
					return 2;
				}
				values[k] = argv[++i];
				found = 1;
			}
		if (!found) {
			fprintf(stderr, "hypd: unknown argument '%s' for %s (see hypd %s --help)\n",
				argv[i], cmd, cmd);
			return 2;
		}
	}
	return 0;
}

/* Runs module.fn(args table on top of L) as a task; 0 and the result on top, or -1 and the error */
static int invoke(hypd *h, const char *module, const char *fn)
{
	lua_State *L = hypd_lua(h);

	lua_createtable(L, 0, 3);
	lua_pushstring(L, module);
	lua_setfield(L, -2, "module");
	lua_pushstring(L, fn);
	lua_setfield(L, -2, "fn");
	lua_insert(L, -2);
	lua_setfield(L, -2, "args");
	return hypd_call_module(h, "hypd.runner", "invoke");
}

static hypd *open_or_say(hypd_options *o)
{
	char *err = NULL;
	hypd *h = hypd_open(o, &err);

	if (!h) {
		fail("%s", err ? err : "cannot start");
		hypd_free(err);
	}
	return h;
}

static int cmd_eks_token(hypd_options *o, int argc, char **argv)
{
	static const char *const names[] = { "--cluster", "--region", "--profile", NULL };
	const char *v[3] = { NULL, NULL, NULL };
	char err[256], *token = NULL, stamp[32];
	time_t expires;
	struct tm tm;
	lua_State *L;
	hypd *h;
	int rc;

	if (wants_help(argc, argv)) {
		fputs(eks_token_usage, stdout);
		return 0;
	}
	if ((rc = sub_options(argc, argv, names, v, NULL, NULL, "eks-token")) != 0)
		return rc;
	if (!v[0])
		return fail("%s", "eks-token needs --cluster NAME (see hypd eks-token --help)");
	if (v[1])
		o->region = v[1];
	if (v[2])
		o->profile = v[2];
	if (!(h = open_or_say(o)))
		return 1;
	L = hypd_lua(h);
	lua_createtable(L, 0, 1);
	lua_pushstring(L, v[0]);
	lua_setfield(L, -2, "cluster");
	if (invoke(h, "hypd.aws.eks", "prepare") != 0) {
		fprintf(stderr, "hypd: %s\n", hx_tostring_error(L, -1));
		hypd_close(h);
		return 1;
	}
	lua_getfield(L, -1, "sts_url");
	lua_getfield(L, -2, "region");
	lua_getfield(L, -3, "profile");
	rc = eks_token(lua_tostring(L, -3), v[0], lua_tostring(L, -2), lua_tostring(L, -1),
		       time(NULL), &token, &expires, err, sizeof err);
	if (rc == 0) {
		/* kubectl refreshes a minute early; `aws eks get-token` says 14 minutes */
		expires -= 60;
		gmtime_r(&expires, &tm);
		strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
		printf("{\"kind\": \"ExecCredential\", "
		       "\"apiVersion\": \"client.authentication.k8s.io/v1beta1\", "
		       "\"spec\": {}, \"status\": {\"expirationTimestamp\": \"%s\", "
		       "\"token\": \"%s\"}}\n", stamp, token);
		free(token);
	} else {
		fprintf(stderr, "hypd: CREDENTIALS: %s\n", err);
	}
	hypd_close(h);
	return rc == 0 ? 0 : 1;
}

static int cmd_doctor(hypd_options *o, int argc, char **argv)
{
	static const char *const names[] = { "--region", "--profile", NULL };
	static const char *const flags[] = { "--json", NULL };
	const char *v[2] = { NULL, NULL };
	int json_out[1] = { 0 }, rc, ok;
	char jerr[128], *text;
	lua_State *L;
	hypd *h;

	if (wants_help(argc, argv)) {
		fputs(doctor_usage, stdout);
		return 0;
	}
	if ((rc = sub_options(argc, argv, names, v, flags, json_out, "doctor")) != 0)
		return rc;
	if (v[0])
		o->region = v[0];
	if (v[1])
		o->profile = v[1];
	if (!(h = open_or_say(o)))
		return 1;
	L = hypd_lua(h);
	lua_newtable(L);
	if (invoke(h, "hypd.aws.doctor", "run") != 0) {
		fprintf(stderr, "hypd: %s\n", hx_tostring_error(L, -1));
		hypd_close(h);
		return 1;
	}
	lua_getfield(L, -1, "ok");
	ok = lua_toboolean(L, -1);
	lua_pop(L, 1);
	if (json_out[0]) {
		text = hj_encode(L, -1, 1, jerr, sizeof jerr);
		puts(text ? text : jerr);
		free(text);
	} else {
		lua_pushvalue(L, -1);
		if (invoke(h, "hypd.aws.doctor", "format") == 0)
			puts(lua_tostring(L, -1));
		else
			fprintf(stderr, "hypd: %s\n", hx_tostring_error(L, -1));
	}
	hypd_close(h);
	return ok ? 0 : 1;
}

static int cmd_sandbox(hypd_options *o, int argc, char **argv)
{
	static const char *const names[] = { "--listen", "--speed", "--faults", NULL };
	static const char *const flags[] = { "--virtual-clock", NULL };
	const char *v[3] = { NULL, NULL, NULL };
	int virt[1] = { 0 }, rc;
	char jerr[256];
	lua_State *L;
	hypd *h;

	if (wants_help(argc, argv)) {
		fputs(sandbox_usage, stdout);
		return 0;
	}
	if ((rc = sub_options(argc, argv, names, v, flags, virt, "sandbox")) != 0)
		return rc;
	if (virt[0] && v[1])
		return fail("%s", "--speed and --virtual-clock cannot be combined");
	if (virt[0])
		o->virtual_clock = 1;
	if (!(h = open_or_say(o)))
		return 1;
	L = hypd_lua(h);
	lua_createtable(L, 0, 3);
	lua_pushstring(L, v[0] ? v[0] : "127.0.0.1:4566");
	lua_setfield(L, -2, "listen");
	if (v[1]) {
		char *end;
		double speed = strtod(v[1], &end);

		if (*end || speed <= 0) {
			hypd_close(h);
			return fail("--speed must be a positive number, not '%s'", v[1]);
		}
		lua_pushnumber(L, speed);
		lua_setfield(L, -2, "speed");
	}
	if (v[2]) {
		FILE *f = fopen(v[2], "rb");
		char buf[65536];
		size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;

		if (f)
			fclose(f);
		buf[n] = 0;
		if (!f || hj_decode(L, buf, n, jerr, sizeof jerr) != 0) {
			hypd_close(h);
			return fail("--faults: cannot read a JSON object from %s", v[2]);
		}
		lua_setfield(L, -2, "faults");
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	running = h;
	rc = invoke(h, "sandbox", "serve");
	running = NULL;
	if (rc != 0) {
		lua_getfield(L, -1, "code");
		if (!lua_isstring(L, -1) || strcmp(lua_tostring(L, -1), "CANCELLED") != 0) {
			fprintf(stderr, "hypd: %s\n", hx_tostring_error(L, -2));
			hypd_close(h);
			return 1;
		}
	}
	hypd_close(h);
	return 0;
}

/* Writes text to path through a temporary file and rename, mode 0600. */
static int write_private(const char *path, const char *text)
{
	size_t n = strlen(path) + 8;
	char *tmp = malloc(n);
	FILE *f;
	int fd, ok;

	if (!tmp)
		return -1;
	snprintf(tmp, n, "%s.tmpXX", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	f = fd >= 0 ? fdopen(fd, "w") : NULL;
	ok = f && fputs(text, f) >= 0;
	if (f)
		ok = fclose(f) == 0 && ok;
	else if (fd >= 0)
		close(fd);
	ok = ok && rename(tmp, path) == 0;
	if (!ok)
		unlink(tmp);
	free(tmp);
	return ok ? 0 : -1;
}

static int cmd_kubeconfig(hypd_options *o, int argc, char **argv)
{
	static const char *const names[] = { "--cluster", "--region", "--profile", "--write", NULL };
	const char *v[4] = { NULL, NULL, NULL, NULL };
	char self[4096];
	ssize_t len;
	lua_State *L;
	hypd *h;
	int rc;

	if (wants_help(argc, argv)) {
		fputs(kubeconfig_usage, stdout);
		return 0;
	}
	if ((rc = sub_options(argc, argv, names, v, NULL, NULL, "kubeconfig")) != 0)
		return rc;
	if (!v[0])
		return fail("%s", "kubeconfig needs --cluster NAME (see hypd kubeconfig --help)");
	if (v[1])
		o->region = v[1];
	if (v[2])
		o->profile = v[2];
	len = readlink("/proc/self/exe", self, sizeof self - 1);
	self[len > 0 ? len : 0] = 0;
	if (!(h = open_or_say(o)))
		return 1;
	L = hypd_lua(h);
	lua_createtable(L, 0, 2);
	lua_pushstring(L, v[0]);
	lua_setfield(L, -2, "cluster");
	lua_pushstring(L, len > 0 ? self : "hypd");
	lua_setfield(L, -2, "command");
	if (invoke(h, "hypd.aws.kubeconfig", "build") != 0) {
		fprintf(stderr, "hypd: %s\n", hx_tostring_error(L, -1));
		hypd_close(h);
		return 1;
	}
	if (!v[3]) {
		fputs(lua_tostring(L, -1), stdout);
		rc = 0;
	} else if ((rc = write_private(v[3], lua_tostring(L, -1))) != 0) {
		fprintf(stderr, "hypd: cannot write %s\n", v[3]);
	} else {
		fprintf(stderr, "hypd: wrote %s for cluster %s\n", v[3], v[0]);
	}
	hypd_close(h);
	return rc == 0 ? 0 : 1;
}

/* Takes --state DIR and --playbooks DIR given after a command. */
static void common_options(hypd_options *o, const char *state, const char *playbooks)
{
	if (state)
		o->state_dir = state;
	if (playbooks)
		o->playbooks_dir = playbooks;
}

/* Quiet by default: a command's output is its result, not the log. */
static void quiet_log(hypd_options *o)
{
	const char *env = getenv("HYPD_LOG_LEVEL");

	if (!o->log_level && !(env && *env))
		o->log_level = "warn";
}

/*
 * Calls hypd.cli.fn (or module.fn) with the table on top of L (popped) and
 * returns the exit status it returned; 1 after printing the error when it
 * raised.
 */
static int run_cli(hypd *h, const char *module, const char *fn)
{
	lua_State *L = hypd_lua(h);
	int rc;

	running = h;
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	rc = hypd_call_module(h, module, fn);
	running = NULL;
	if (rc != 0) {
		lua_getfield(L, -1, "code");
		if (lua_isstring(L, -1) && !strcmp(lua_tostring(L, -1), "CANCELLED")) {
			lua_settop(L, 0);
			return 0;
		}
		fprintf(stderr, "hypd: %s\n", hx_tostring_error(L, -2));
		lua_settop(L, 0);
		return 1;
	}
	rc = lua_isinteger(L, -1) ? (int)lua_tointeger(L, -1) : 0;
	lua_settop(L, 0);
	return rc;
}

static int cmd_serve(hypd_options *o, int argc, char **argv)
{
	static const char *const names[] = { "--listen", "--state", "--playbooks", "--speed", "--grace", NULL };
	static const char *const flags[] = { "--sandbox", NULL };
	const char *v[5] = { NULL, NULL, NULL, NULL, NULL };
	int sandbox[1] = { 0 }, rc;
	double speed = 0, grace = -1;
	lua_State *L;
	hypd *h;

	if (wants_help(argc, argv)) {
		fputs(serve_usage, stdout);
		return 0;
	}
	if ((rc = sub_options(argc, argv, names, v, flags, sandbox, "serve")) != 0)
		return rc;
	common_options(o, v[1], v[2]);
	if (v[3]) {
		char *end;

		speed = strtod(v[3], &end);
		if (*end || speed <= 0)
			return fail("--speed must be a positive number, not '%s'", v[3]);
		if (!sandbox[0])
			return fail("%s", "--speed is for the sandbox: give --sandbox too");
	}
	if (v[4]) {
		char *end;

		grace = strtod(v[4], &end);
		if (*end || !*v[4] || grace < 0)
			return fail("--grace must be a number of seconds, 0 or more, not '%s'", v[4]);
	}
	if (!(h = open_or_say(o)))
		return 1;
	L = hypd_lua(h);
	lua_createtable(L, 0, 3);
	lua_pushstring(L, v[0] ? v[0] : "127.0.0.1:3099");
	lua_setfield(L, -2, "listen");
	lua_pushboolean(L, sandbox[0]);
	lua_setfield(L, -2, "sandbox");
	if (speed > 0) {
		lua_pushnumber(L, speed);
		lua_setfield(L, -2, "speed");
	}
	if (grace >= 0) {
		lua_pushnumber(L, grace);
		lua_setfield(L, -2, "grace");
	}
	rc = run_cli(h, "hypd.serve", "main");
	hypd_close(h);
	return rc;
}

static int cmd_tools(hypd_options *o, int argc, char **argv)
{
	static const char *const names[] = { "--state", "--playbooks", NULL };
	static const char *const flags[] = { "--json", NULL };
	const char *v[2] = { NULL, NULL };
	int json_out[1] = { 0 }, rc;
	lua_State *L;
	hypd *h;

	if (wants_help(argc, argv)) {
		fputs(tools_usage, stdout);
		return 0;
	}
	if ((rc = sub_options(argc, argv, names, v, flags, json_out, "tools")) != 0)
		return rc;
	common_options(o, v[0], v[1]);
	quiet_log(o);
	if (!(h = open_or_say(o)))
		return 1;
	L = hypd_lua(h);
	lua_createtable(L, 0, 1);
	lua_pushboolean(L, json_out[0]);
	lua_setfield(L, -2, "json");
	rc = run_cli(h, "hypd.cli", "tools");
	hypd_close(h);
	return rc;
}

static int cmd_call(hypd_options *o, int argc, char **argv)
{
	const char *tool = NULL, *args = NULL, *api = NULL, *state = NULL, *playbooks = NULL;
	int wait = 0, detach = 0, nwords = 0, rc;
	lua_State *L;
	hypd *h;

	if (wants_help(argc, argv)) {
		fputs(call_usage, stdout);
		return 0;
	}
	for (int i = 0; i < argc; i++) {
		const char **slot = !strcmp(argv[i], "--json") ? &args
			: !strcmp(argv[i], "--api") ? &api
			: !strcmp(argv[i], "--state") ? &state
			: !strcmp(argv[i], "--playbooks") ? &playbooks : NULL;

		if (slot) {
			if (i + 1 >= argc)
				return fail("%s needs a value", argv[i]);
			*slot = argv[++i];
		} else if (!strcmp(argv[i], "--wait")) {
			wait = 1;
		} else if (!strcmp(argv[i], "--detach")) {
			detach = 1;
		} else if (argv[i][0] == '-' && argv[i][1] == '-') {
			return fail("unknown option '%s' for call (see hypd call --help)", argv[i]);
		} else if (!tool) {
			tool = argv[i];
		} else {
			argv[nwords++] = argv[i]; /* key=value words, compacted in place */
		}
	}
	if (!tool)
		return fail("%s", "call needs a TOOL (see hypd tools)");
	if (wait && detach)
		return fail("%s", "--wait and --detach cannot be combined");
	common_options(o, state, playbooks);
	quiet_log(o);
	if (!(h = open_or_say(o)))
		return 1;
	L = hypd_lua(h);
	lua_createtable(L, 0, 6);
	lua_pushstring(L, tool);
	lua_setfield(L, -2, "tool");
	lua_createtable(L, nwords, 0);
	for (int i = 0; i < nwords; i++) {
		lua_pushstring(L, argv[i]);
		lua_seti(L, -2, i + 1);
	}
	lua_setfield(L, -2, "words");
	if (args) {
		lua_pushstring(L, args);
		lua_setfield(L, -2, "json");
	}
	if (api) {
		lua_pushstring(L, api);
		lua_setfield(L, -2, "api");
	}
	lua_pushboolean(L, wait);
	lua_setfield(L, -2, "wait");
	lua_pushboolean(L, detach);
	lua_setfield(L, -2, "detach");
	rc = run_cli(h, "hypd.cli", "call");
	hypd_close(h);
	return rc;
}

static int cmd_token(hypd_options *o, int argc, char **argv)
{
	static const char *const names[] = { "--scope", "--name", "--state", NULL };
	static const char *const flags[] = { "--json", NULL };
	const char *v[3] = { NULL, NULL, NULL }, *which = NULL;
	int json_out[1] = { 0 }, rc, first;
	lua_State *L;
	hypd *h;

	if (argc < 1 || wants_help(argc, argv)) {
		fputs(token_usage, argc < 1 ? stderr : stdout);
		return argc < 1 ? 2 : 0;
	}
	if (strcmp(argv[0], "create") && strcmp(argv[0], "list") && strcmp(argv[0], "revoke"))
		return fail("unknown token command '%s' (create, list or revoke)", argv[0]);
	first = 1;
	if (!strcmp(argv[0], "revoke") && argc > 1 && strncmp(argv[1], "--", 2)) {
		which = argv[1];
		first = 2;
	}
	if ((rc = sub_options(argc - first, argv + first, names, v, flags, json_out, "token")) != 0)
		return rc;
	common_options(o, v[2], NULL);
	quiet_log(o);
	if (!strcmp(argv[0], "create") && (!v[0] || !v[1]))
		return fail("%s", "token create needs --scope read|operate|admin and --name NAME");
	if (!strcmp(argv[0], "revoke") && !which)
		return fail("%s", "token revoke needs a NAME or ID (see hypd token list)");
	if (!(h = open_or_say(o)))
		return 1;
	L = hypd_lua(h);
	lua_createtable(L, 0, 5);
	lua_pushstring(L, argv[0]);
	lua_setfield(L, -2, "action");
	if (v[0]) {
		lua_pushstring(L, v[0]);
		lua_setfield(L, -2, "scope");
	}
	if (v[1]) {
		lua_pushstring(L, v[1]);
		lua_setfield(L, -2, "name");
	}
	if (which) {
		lua_pushstring(L, which);
		lua_setfield(L, -2, "which");
	}
	lua_pushboolean(L, json_out[0]);
	lua_setfield(L, -2, "json");
	rc = run_cli(h, "hypd.cli", "token");
	hypd_close(h);
	return rc;
}

static int cmd_mcp(hypd_options *o, int argc, char **argv)
{
	static const char *const names[] = { "--api", "--state", "--playbooks", NULL };
	const char *v[3] = { NULL, NULL, NULL };
	lua_State *L;
	hypd *h;
	int rc;

	if (wants_help(argc, argv)) {
		fputs(mcp_usage, stdout);
		return 0;
	}
	if ((rc = sub_options(argc, argv, names, v, NULL, NULL, "mcp")) != 0)
		return rc;
	common_options(o, v[1], v[2]);
	quiet_log(o); /* stdout carries the protocol; the log goes to stderr */
	if (!(h = open_or_say(o)))
		return 1;
	L = hypd_lua(h);
	lua_createtable(L, 0, 1);
	if (v[0]) {
		lua_pushstring(L, v[0]);
		lua_setfield(L, -2, "api");
	}
	rc = run_cli(h, "hypd.cli", "mcp");
	hypd_close(h);
	return rc;
}

/* hypd test FILE...: runs Lua test files inside the host (TAP output). */
static int cmd_test(hypd_options *o, int argc, char **argv)
{
	char *err;
	hypd *h;
	int failed = 0;

	if (argc < 1 || wants_help(argc, argv)) {
		fputs("usage: hypd test FILE.lua...   (runs Lua tests inside the host; TAP output)\n",
		      argc < 1 ? stderr : stdout);
		return argc < 1 ? 2 : 0;
	}
	h = hypd_open(o, &err);
	if (!h) {
		fail("%s", err ? err : "cannot start");
		hypd_free(err);
		return 1;
	}
	lua_State *L = hypd_lua(h);
	lua_createtable(L, argc, 0);
	for (int i = 0; i < argc; i++) {
		lua_pushstring(L, argv[i]);
		lua_seti(L, -2, i + 1);
	}
	if (hypd_call_module(h, "hypd.tap", "run_files") != 0) {
		fprintf(stderr, "hypd: %s\n", hx_tostring_error(L, -1));
		lua_getfield(L, -2, "traceback");
		fprintf(stderr, "%s\n", lua_isstring(L, -1) ? lua_tostring(L, -1) : "");
		failed = 1;
	} else {
		failed = lua_toboolean(L, -1) ? 0 : 1;
	}
	hypd_close(h);
	return failed;
}

int main(int argc, char **argv)
{
	hypd_options o = { 0 };
	int i = 1;

	for (; i < argc && argv[i][0] == '-'; i += 2) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(usage, stdout);
			return 0;
		}
		if (!strcmp(argv[i], "--version")) {
			puts("hypd " HYPD_VERSION);
			return 0;
		}
		if (i + 1 >= argc)
			return fail("%s needs a value", argv[i]);
		if (!strcmp(argv[i], "--state"))
			o.state_dir = argv[i + 1];
		else if (!strcmp(argv[i], "--playbooks"))
			o.playbooks_dir = argv[i + 1];
		else if (!strcmp(argv[i], "--log-level"))
			o.log_level = argv[i + 1];
		else if (!strcmp(argv[i], "--region"))
			o.region = argv[i + 1];
		else if (!strcmp(argv[i], "--profile"))
			o.profile = argv[i + 1];
		else
			return fail("unknown option '%s' (see hypd --help)", argv[i]);
	}
	if (i >= argc) {
		fputs(usage, stderr);
		return 2;
	}
	if (!strcmp(argv[i], "help")) {
		fputs(usage, stdout);
		return 0;
	}
	if (!strcmp(argv[i], "version")) {
		if (wants_help(argc - i - 1, argv + i + 1)) {
			puts("usage: hypd version   (prints the version)");
			return 0;
		}
		puts("hypd " HYPD_VERSION);
		return 0;
	}
	if (!strcmp(argv[i], "run"))
		return cmd_run(&o, argc - i - 1, argv + i + 1);
	if (!strcmp(argv[i], "test"))
		return cmd_test(&o, argc - i - 1, argv + i + 1);
	if (!strcmp(argv[i], "eks-token"))
		return cmd_eks_token(&o, argc - i - 1, argv + i + 1);
	if (!strcmp(argv[i], "doctor"))
		return cmd_doctor(&o, argc - i - 1, argv + i + 1);
	if (!strcmp(argv[i], "kubeconfig"))
		return cmd_kubeconfig(&o, argc - i - 1, argv + i + 1);
	if (!strcmp(argv[i], "sandbox"))
		return cmd_sandbox(&o, argc - i - 1, argv + i + 1);
	if (!strcmp(argv[i], "serve"))
		return cmd_serve(&o, argc - i - 1, argv + i + 1);
	if (!strcmp(argv[i], "tools"))
		return cmd_tools(&o, argc - i - 1, argv + i + 1);
	if (!strcmp(argv[i], "call"))
		return cmd_call(&o, argc - i - 1, argv + i + 1);
	if (!strcmp(argv[i], "token"))
		return cmd_token(&o, argc - i - 1, argv + i + 1);
	if (!strcmp(argv[i], "mcp"))
		return cmd_mcp(&o, argc - i - 1, argv + i + 1);
	return fail("unknown command '%s' (see hypd help)", argv[i]);
}
