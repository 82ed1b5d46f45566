# hypd: `make` builds build/hypd, `make run` starts it, `make test` runs every
# suite, `make asan` runs them all under AddressSanitizer and UBSan.

PKGS    := lua5.4 libcurl libcjson openssl libmicrohttpd sqlite3 expat yaml-0.1 zlib
BUILD   ?= build
CC      ?= cc
OPT     ?= -O2
SAN     ?=
CFLAGS  ?=
Q       := $(if $(V),,@)

# Install missing Debian packages before anything needs them (not for `deps`
# and `clean`, which must work on a bare machine).
ifeq ($(filter deps clean,$(MAKECMDGOALS)),)
ifneq ($(shell pkg-config --exists $(PKGS) 2>/dev/null && mk/deps.sh check 2>/dev/null && echo ok),ok)
$(info hypd: libraries or test tools are missing; running make deps)
ifneq ($(shell mk/deps.sh >&2; echo $$?),0)
$(error missing Debian packages: see the command above, then run make again)
endif
endif
endif

PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lm
WARN       := -std=c11 -Wall -Wextra -Wstrict-prototypes -Werror
ALL_CFLAGS := $(WARN) $(OPT) -g $(SAN) -D_POSIX_C_SOURCE=200809L \
              -Ihost -I$(BUILD) $(PKG_CFLAGS) -MMD -MP $(CFLAGS)
LDFLAGS    += $(SAN)

HOST_SRC := $(filter-out host/main.c,$(wildcard host/*.c))
HOST_OBJ := $(HOST_SRC:%.c=$(BUILD)/%.o) $(BUILD)/lua_embed.o
# what the binary carries (mk/embed.c): the Lua tree with its YAML, the
# recipes, the skills' SKILL.md and the web UI's files
EMBED_SRC := $(shell find lua -name '*.lua' | LC_ALL=C sort) $(shell find lua -name '*.yaml' | LC_ALL=C sort) \
             $(shell find recipes -name '*.lua' | LC_ALL=C sort) \
             $(shell find skills -name SKILL.md | LC_ALL=C sort) \
             $(shell find web -type f ! -name '.*' 2>/dev/null | LC_ALL=C sort)
CTESTS   := $(patsubst tests/c/%.c,$(BUILD)/tests/%,$(wildcard tests/c/test_*.c))
FUZZ_C   := sigv4 xml yaml json framing websocket
FUZZ_LUA := rest_query mcp regex sandbox_sigv4 eks_token k8s_protobuf cli_words
FUZZERS  := $(FUZZ_C:%=$(BUILD)/fuzz/fuzz_%) $(FUZZ_LUA:%=$(BUILD)/fuzz/fuzz_lua_%)
TESTBINS := $(CTESTS) $(BUILD)/tests/echo_server $(BUILD)/embed $(BUILD)/tests/sigv4_diff

.PHONY: all run test bench asan deps lint clean fuzz-smoke web-vendor k8s-proto deploy-template docs
all: $(BUILD)/hypd

$(BUILD)/hypd: $(BUILD)/host/main.o $(BUILD)/libhypd.a
	@echo "  LINK    $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)

$(BUILD)/libhypd.a: $(HOST_OBJ)
	@echo "  AR      $@"
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(BUILD)/lua_embed.o: $(BUILD)/lua_embed.c
	@echo "  CC      $<"
	$(Q)$(CC) $(ALL_CFLAGS) -c -o $@ $<

# Every file of EMBED_SRC as a C array with its module name and chunk name
# (host/embedded.h): the binary serves the tree from memory.
$(BUILD)/lua_embed.c: $(BUILD)/embedgen $(EMBED_SRC)
	@echo "  EMBED   $(words $(EMBED_SRC)) files"
	$(Q)$(BUILD)/embedgen $@ $(EMBED_SRC)

$(BUILD)/embedgen: mk/embed.c
	@mkdir -p $(dir $@)
	$(Q)cc -std=c11 -O1 -o $@ $<

$(BUILD)/tests/%: tests/c/%.c tests/c/tap.h $(BUILD)/libhypd.a
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(ALL_CFLAGS) -Itests/c $(LDFLAGS) -o $@ $< $(BUILD)/libhypd.a $(PKG_LIBS)

# The embedding example links the library exactly as an outside program would.
$(BUILD)/embed: examples/embed/embed.c host/hypd.h $(BUILD)/libhypd.a
	@echo "  CC      $<"
	$(Q)$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libhypd.a $(PKG_LIBS)

# The REST API, MCP and metrics on 127.0.0.1:3099 (RUN_LISTEN) with the
# simulated AWS account in the same process, its durations RUN_SPEED times
# faster (an EKS cluster in well under a minute); state in RUN_STATE. Prints
# the URL, a fresh admin token and the sandbox's export lines; Ctrl-C stops it.
# the web UI's vendored library (committed; run after changing its pin in mk/web-vendor/)
web-vendor:
	@mk/web-vendor.sh

RUN_STATE  ?= /tmp/hypd-run
RUN_LISTEN ?= 127.0.0.1:3099
RUN_SPEED  ?= 30
run: $(BUILD)/hypd
	$(BUILD)/hypd serve --sandbox --speed $(RUN_SPEED) --state $(RUN_STATE) --listen $(RUN_LISTEN)

test: $(BUILD)/hypd $(TESTBINS) $(if $(SAN),,$(FUZZERS))
	@BUILD=$(BUILD) SAN="$(SAN)" tests/run

$(BUILD)/tests/sigv4_bench: tests/bench/sigv4_bench.c $(BUILD)/libhypd.a
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libhypd.a $(PKG_LIBS)

# Throughput and memory numbers (never pass/fail on speed). wrk (for
# tests/bench/http_bench.lua) is installed when missing, as root; without it
# that measurement says it is skipped.
bench: $(BUILD)/hypd $(BUILD)/tests/echo_server $(BUILD)/tests/sigv4_bench
	@mk/deps.sh bench || echo "hypd: without wrk, make bench skips the wrk measurement"
	@state=$$(mktemp -d /tmp/hypd-bench.XXXXXX); \
	env $$(env | sed -n 's/^\(AWS_[A-Z0-9_]*\)=.*/-u \1/p') AWS_ACCESS_KEY_ID=AKIDEXAMPLE \
	  AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY AWS_REGION=us-west-2 \
	  AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_EC2_METADATA_DISABLED=true \
	  HYPD_STATE=$$state HYPD_BUILD=$(BUILD) $(BUILD)/hypd --log-level warn test tests/bench/*.lua >$$state/out; \
	rc=$$?; grep -v '^ok ' $$state/out; rm -rf $$state; \
	HYPD_BUILD=$(BUILD) tests/bench/sigv4_compare.sh || rc=1; exit $$rc

# libFuzzer targets (clang): the SigV4 canonicalizer, the XML, YAML and JSON
# decoders, the HTTP head checks, WebSocket frames (tests/fuzz/).
# make fuzz-smoke runs each for FUZZ_TIME seconds; make test runs a short pass.
FUZZ_CC   ?= clang
FUZZ_TIME ?= 20
FUZZ_SAN   := -fsanitize=address,undefined
FUZZ_FLAGS := -std=c11 -g -O1 -fsanitize=fuzzer $(FUZZ_SAN) -D_POSIX_C_SOURCE=200809L -Ihost $(PKG_CFLAGS)
$(BUILD)/fuzz/fuzz_sigv4: tests/fuzz/fuzz_sigv4.c host/sigv4.c host/sigv4.h
	@mkdir -p $(dir $@)
	@echo "  FUZZCC  $@"
	$(Q)$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ tests/fuzz/fuzz_sigv4.c host/sigv4.c $(PKG_LIBS)

$(BUILD)/fuzz/fuzz_xml: tests/fuzz/fuzz_xml.c tests/fuzz/lua_harness.h host/xml.c host/xml.h host/luax.c
	@mkdir -p $(dir $@)
	@echo "  FUZZCC  $@"
	$(Q)$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ tests/fuzz/fuzz_xml.c host/xml.c host/luax.c $(PKG_LIBS)

$(BUILD)/fuzz/fuzz_yaml: tests/fuzz/fuzz_yaml.c tests/fuzz/lua_harness.h host/lua_yaml.c host/yml.c host/yml.h host/json.c host/luax.c
	@mkdir -p $(dir $@)
	@echo "  FUZZCC  $@"
	$(Q)$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ tests/fuzz/fuzz_yaml.c host/lua_yaml.c host/yml.c host/json.c host/luax.c $(PKG_LIBS)

$(BUILD)/fuzz/fuzz_json: tests/fuzz/fuzz_json.c tests/fuzz/lua_harness.h host/json.c host/json.h host/luax.c
	@mkdir -p $(dir $@)
	@echo "  FUZZCC  $@"
	$(Q)$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ tests/fuzz/fuzz_json.c host/json.c host/luax.c $(PKG_LIBS)

$(BUILD)/fuzz/fuzz_framing: tests/fuzz/fuzz_framing.c host/framing.c host/framing.h
	@mkdir -p $(dir $@)
	@echo "  FUZZCC  $@"
	$(Q)$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ tests/fuzz/fuzz_framing.c host/framing.c

$(BUILD)/fuzz/fuzz_websocket: tests/fuzz/fuzz_websocket.c host/websocket.c host/websocket.h
	@mkdir -p $(dir $@)
	@echo "  FUZZCC  $@"
	$(Q)$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ tests/fuzz/fuzz_websocket.c host/websocket.c $(PKG_LIBS) -lpthread

# The Lua-level targets (tests/fuzz/lua_targets.lua) run in a whole engine:
# the host's objects again, instrumented for libFuzzer and the sanitizers,
# with the embedded Lua tree. fuzz_lua_NAME is a link to fuzz_lua; the name
# picks the target.
FUZZ_OBJ := $(HOST_SRC:%.c=$(BUILD)/fuzzobj/%.o)
$(BUILD)/fuzzobj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  FUZZCC  $<"
	$(Q)$(FUZZ_CC) $(FUZZ_FLAGS:-fsanitize=fuzzer=-fsanitize=fuzzer-no-link) -I$(BUILD) -MMD -MP -c -o $@ $<

$(BUILD)/fuzz/fuzz_lua: tests/fuzz/fuzz_lua.c $(FUZZ_OBJ) $(BUILD)/lua_embed.o
	@mkdir -p $(dir $@)
	@echo "  FUZZCC  $@"
	$(Q)$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ tests/fuzz/fuzz_lua.c $(FUZZ_OBJ) $(BUILD)/lua_embed.o $(PKG_LIBS) -lpthread

$(BUILD)/fuzz/fuzz_lua_%: $(BUILD)/fuzz/fuzz_lua
	$(Q)ln -sf fuzz_lua $@

fuzz-smoke: $(FUZZERS)
	@FUZZ_TIME=$(FUZZ_TIME) BUILD=$(BUILD) tests/fuzz_smoke.sh

asan:
	$(Q)$(MAKE) --no-print-directory BUILD=build-asan OPT=-O1 \
	    SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" test

lint:
	luacheck --no-color -q lua tests examples

deps:
	mk/deps.sh

# the policy embedded in deploy/cloudformation/hypd.yaml, rewritten from
# `hypd iam-policy` (tests/deploy/ fails while it is stale)
deploy-template: $(BUILD)/hypd
	$(Q)HYPD=$(BUILD)/hypd mk/cfn_policy.sh deploy/cloudformation/hypd.yaml

# docs/tools.md, the tool reference, from the registry of the built-in tools
# only (no operator playbook directory, a scratch state directory); the test
# tests/lua/docs_tools_test.lua fails while the committed file differs
docs: $(BUILD)/hypd
	$(Q)state=$$(mktemp -d) && env -u HYPD_PLAYBOOKS HYPD_STATE=$$state/state HYPD_LOG_LEVEL=off \
	    $(BUILD)/hypd tools --markdown > docs/tools.md.tmp && mv docs/tools.md.tmp docs/tools.md; \
	    rc=$$?; rm -rf "$$state" docs/tools.md.tmp; exit $$rc

# the sandbox's Kubernetes protobuf descriptors and field docs
# (lua/sandbox/k8s/proto, committed), regenerated from checkouts or bare git
# directories of github.com/kubernetes/api and github.com/kubernetes/apimachinery
K8S_API ?= ../kubernetes-api
K8S_APIMACHINERY ?= ../kubernetes-apimachinery
k8s-proto:
	python3 mk/k8s_proto.py --api $(K8S_API) --apimachinery $(K8S_APIMACHINERY) --out lua/sandbox/k8s/proto

clean:
	rm -rf build build-asan

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
