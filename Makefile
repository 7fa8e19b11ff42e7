# codespace front door. On a fresh Debian 12 machine, as root:
#   make run    installs what is needed, builds, and runs the main job
#   make test   installs what is needed, builds, and passes every test
SHELL := /bin/bash
BUILD ?= build
PREFIX ?= /usr/local
STATE_DIR ?= $(CURDIR)/var/state

# Debian packages the build, the runs and the tests need.
DEBS := build-essential cmake ninja-build pkg-config clang-format \
        bubblewrap iproute2 nftables util-linux procps python3 \
        libfmt-dev nlohmann-json3-dev libcli11-dev libsqlite3-dev sqlite3 libssl-dev \
        libnftables-dev libmnl-dev libseccomp-dev \
        libgtest-dev libgmock-dev publicsuffix \
        libtomlplusplus-dev help2man

.PHONY: deps agents build run test unit lanes release install install-files deb test-deploy format clean mutate bench fuzz

# Installs only what is missing, so a warm machine pays nothing.
deps:
	@missing=$$(for p in $(DEBS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing: $$missing"; \
	  if [ "$$(id -u)" != 0 ]; then echo "run as root to install: $$missing" >&2; exit 1; fi; \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; \
	fi

# The real agent CLIs the lanes run in the sandbox, from the npm registry (nothing else is
# fetched). Node.js and npm come from Debian when the machine has none.
AGENTS_DIR := /var/cache/codespace-agents
AGENTS := @anthropic-ai/claude-code @openai/codex
agents:
	@if [ ! -x $(AGENTS_DIR)/node_modules/.bin/claude ] || [ ! -x $(AGENTS_DIR)/node_modules/.bin/codex ]; then \
	  command -v npm >/dev/null || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q nodejs npm; }; \
	  mkdir -p $(AGENTS_DIR) && npm install --no-audit --no-fund --prefix $(AGENTS_DIR) $(AGENTS); \
	fi

build: deps
	cmake --preset default >/dev/null
	cmake --build --preset default -j$$(nproc)

# The main job: the posture line, then one demonstration run per egress policy with its record.
run: build
	./deploy/demo.sh $(BUILD)/codespace $(STATE_DIR)

test: build agents
	ctest --test-dir $(BUILD) --output-on-failure -j$$(nproc) --timeout 300

unit: build
	ctest --test-dir $(BUILD) --output-on-failure -j$$(nproc) -L unit

lanes: build
	ctest --test-dir $(BUILD) --output-on-failure -L lane

# A release build (the `release` preset: -O3, no tests), stripped. DESTDIR stages it (make deb).
BUILD_RELEASE ?= build-release
release: deps
	cmake --preset release >/dev/null
	cmake --build --preset release -j$$(nproc) --target codespace codespace-init

install: release install-files

install-files:
	install -D -s -m 0755 $(BUILD_RELEASE)/codespace $(DESTDIR)$(PREFIX)/bin/codespace
	install -D -s -m 0755 $(BUILD_RELEASE)/codespace-init $(DESTDIR)$(PREFIX)/libexec/codespace/codespace-init
	install -D -m 0644 deploy/worker.toml.example $(DESTDIR)$(PREFIX)/share/doc/codespace/examples/worker.toml.example

# The Debian package: build-release/codespace_VERSION_ARCH.deb (deploy/make-deb.sh says what is in it).
deb: release
	./deploy/make-deb.sh $(BUILD_RELEASE)

# The deployment lanes (issue 16; docs/deployment.md): Dockerfile.worker in both postures,
# docker-compose.yml, and the .deb in a clean container, on a dockerd of their own.
# Not in DEBS: the worker image's build stage installs DEBS, and needs no docker in it.
DEPLOY_DEBS := docker.io docker-compose mmdebstrap
test-deploy:
	@missing=$$(for p in $(DEPLOY_DEBS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing: $$missing"; \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; \
	fi
	./tests/deploy/run.sh

format:
	clang-format -i $$(git ls-files '*.cc' '*.h')

clean:
	rm -rf $(BUILD) build-release build-asan

# Mutation check (issue 8; not part of `make test`: it takes minutes). Each mutation of
# tools/mutate/mutations.toml is applied to a scratch copy of the tree, built and tested; one line
# per mutation, then a total; fails if any survives. The working tree is never modified.
# MUTATE_ARGS passes options through, e.g. MUTATE_ARGS="--only dns-gate" (see tools/mutate/README.md).
mutate: deps
	python3 tools/mutate/run.py $(MUTATE_ARGS)

# Benchmarks (issue 7; not part of `make test`). A release build (build-release/, tests off), then
# codespace side by side with its baselines -- bwrap with the same flags, an ip+nft script, socat,
# srt (npm, into build-release/srt) -- every command inside network namespaces the benchmark makes
# and removes. A table on stdout, JSON in build-release/bench.json; a few minutes on 2 cores.
# BENCH_ARGS passes options through (python3 bench/run_bench.py --help).
# -Wno-restrict: GCC 12 at -O3 warns falsely on `"literal" + std::string&&` (GCC PR 105329).
BENCH_DEBS := socat ripgrep
SRT_DIR := build-release/srt
bench: deps
	@missing=$$(for p in $(BENCH_DEBS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing: $$missing"; \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; \
	fi
	cmake --preset release -DCMAKE_CXX_FLAGS=-Wno-restrict >/dev/null
	cmake --build --preset release -j$$(nproc)
	@if [ ! -x build-release/bench/relay_bench ]; then \
	  cmake -S bench -B build-release/bench-tools -G Ninja -DCODESPACE_BUILD_DIR=$(CURDIR)/build-release >/dev/null && \
	  cmake --build build-release/bench-tools; \
	fi
	@if [ ! -x $(SRT_DIR)/node_modules/.bin/srt ]; then \
	  if command -v npm >/dev/null; then \
	    npm install --prefix $(SRT_DIR) --no-audit --no-fund --loglevel=error @anthropic-ai/sandbox-runtime || \
	      echo "bench: srt did not install; its row says so" >&2; \
	  else echo "bench: no npm; the srt row says so" >&2; fi; \
	fi
	python3 bench/run_bench.py --build build-release $(BENCH_ARGS)

# The API's fuzz target (src/api request parsing and run-spec validation) under clang's
# libFuzzer and ASan, for FUZZ_SECONDS, from the seed corpus in fuzz/corpus (new finds go to
# $(BUILD)/fuzz-corpus, not into the repo). `make test` runs a deterministic replay instead.
FUZZ_SECONDS ?= 60
FUZZ_BUILD := $(BUILD)/fuzz
fuzz: deps
	@command -v clang++ >/dev/null && [ -n "$$(ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a 2>/dev/null)" ] || \
	  { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q clang libclang-rt-14-dev; }
	mkdir -p $(FUZZ_BUILD) $(BUILD)/fuzz-corpus
	clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -Isrc \
	  fuzz/api_request_fuzzer.cc src/api/http.cc src/api/spec_check.cc \
	  src/store/record_json.cc src/store/run_record.cc src/run/run_spec.cc \
	  src/policy/egress_policy.cc src/relay/relay.cc src/plan/plan.cc src/plan/admission.cc \
	  src/posture/host_facts.cc src/base/status.cc src/base/unique_fd.cc \
	  -lfmt -o $(FUZZ_BUILD)/api_request_fuzzer
	$(FUZZ_BUILD)/api_request_fuzzer -max_total_time=$(FUZZ_SECONDS) -max_len=8192 \
	  -timeout=10 $(BUILD)/fuzz-corpus fuzz/corpus
