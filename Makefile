# disque-py: `make run` starts a node on 127.0.0.1:7711 (PORT=N for
# another port) with its files in run/7711/ (run/N/) and installs
# redis-cli to talk to it, `make test` runs everything, `make soak` plays
# 10,000 seeds of the cluster simulation and `make chaos` runs the chaos
# matrix (fault sets x workloads on 5 real nodes, CHAOS_SEEDS runs of
# CHAOS_SECONDS each per row: about 70 minutes) and checks no acknowledged
# job is lost. `make test-asan` runs the suites on an
# engine built with AddressSanitizer and UBSan, `make fuzz` each fuzz target
# for FUZZ_SECONDS (docs/checking.md). Every target creates .venv when it
# is missing and installs what it needs (Python packages into the venv;
# with apt, the Debian package of each command that is missing, and never
# an upgrade of a package you have).
# Installing compiles the engine (disque_py/engine, Cython): a C compiler
# and the Python headers are installed first when missing, and an edited
# engine source makes the next target rebuild it (`make build` alone too).

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PORT   ?= 7711
RUN_DIR = run/$(PORT)
# Commands the targets need, each as command=the Debian package that brings it.
RUN_COMMANDS := redis-cli=redis-tools
TEST_COMMANDS := $(RUN_COMMANDS) nc=netcat-openbsd openssl=openssl ip=iproute2 nft=nftables \
	faketime=faketime java=openjdk-17-jre-headless node=nodejs npm=npm \
	chromium=chromium chromedriver=chromium-driver
BENCH_COMMANDS := redis-server=redis-server
NODE_CLIENTS := tests/clients/node
PROMTOOL := $(BIN)/promtool
SUDO   := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)

# The sanitized engine (make test-asan, make fuzz, and a bounded part of both
# in make test): built by clang with ASan, UBSan and libFuzzer's coverage
# into its own venv, from a copy of the checkout in ASAN_TREE, so that the
# normal build in place (.venv) is never overwritten by it. Its runtime is
# preloaded by tests/sanitized.py, which fails the run on any report.
CLANG      ?= clang-14
SANITIZERS := address,undefined,fuzzer-no-link
ASAN_VENV  ?= .venv-asan
ASAN_TREE  := build/asan-tree
ASAN_PY    := $(CURDIR)/$(ASAN_VENV)/bin/python
SANITIZED  := cd $(ASAN_TREE) && $(ASAN_PY) -m tests.sanitized
# The whole sanitized run, and the part make test runs (the engine's and the
# unit tests: the engine's every path, a few minutes). Left out of it:
# the browser tests (chromedriver and chromium cannot start with the ASan
# runtime preloaded: its shadow memory does not fit their address space;
# they read pages, not the engine), `make run` (it builds a normal venv in
# the copy, over the sanitized engine), the test that measures a
# server's RSS for leaks (ASan's allocator holds freed memory back), the
# chaos checker's clock faults (libfaketime, preloaded beside the ASan
# runtime, recurses in clock_gettime at start and the node hangs) and the
# bound on a PING's wait behind a million arguments (a latency of the
# normal build: the instrumented engine is several times slower).
ASAN_SUITES       ?= tests/engine tests/unit tests/persistence tests/integration tests/cluster \
	tests/sim tests/fuzz
ASAN_LEFT_OUT     := --ignore=tests/integration/test_dashboard_browser.py \
	--deselect=tests/integration/test_make_targets.py::test_make_run_keeps_the_nodes_files_in_run_port \
	--deselect=tests/integration/test_protocol.py::test_half_commands_then_disconnect_do_not_leak_memory \
	--deselect=tests/cluster/test_chaos_node_faults.py::test_clock_jumps_and_drifts_lose_nothing_and_are_measured \
	--deselect=tests/integration/test_fairness.py::test_pings_are_answered_while_another_client_sends_a_million_arguments
ASAN_QUICK_SUITES := tests/engine tests/unit tests/fuzz
FUZZ_TARGETS := resp connection bus aof
FUZZ_SECONDS ?= 600
# make test's fuzzing: each target this many executions from its seeds.
FUZZ_QUICK_RUNS ?= 5000

# make chaos: each row's seeds and seconds of faults, only some rows
# (CHAOS_ROWS=kp-plain,network; `disque-py chaos-matrix --list`), and Disque
# C's disque-server for its comparison rows (found in a Disque checkout
# built beside this one; not run without it).
CHAOS_SECONDS ?= 120
CHAOS_SEEDS ?= 2
CHAOS_ROWS ?=
DISQUE_C ?= $(wildcard $(CURDIR)/../disque-c/src/disque-server)
# What the matrix's faults need: namespaces and rules, and libfaketime.
CHAOS_COMMANDS := ip=iproute2 nft=nftables faketime=faketime
SOAK_SEEDS ?= 10000
SOAK_JOBS  ?= 2

ENGINE_SOURCES := setup.py disque_py/engine/_sources.py \
	$(wildcard disque_py/engine/*.pyx disque_py/engine/*.pxd disque_py/engine/*.pxi disque_py/engine/*.h \
	           disque_py/engine/*/*.pxd disque_py/engine/*/*.pxi)
HAS_PYTHON_H := $(PYTHON) -c "import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h')))"

.PHONY: run build test bench chaos soak build-deps redis-cli-deps system-deps test-commands \
	node-deps clean sanitizer-deps asan-tree test-asan test-asan-quick fuzz fuzz-quick

# $(call apt_install,WORDS): installs with apt-get the Debian packages that
# the shell expands WORDS to, when there are any. apt-get install upgrades a
# package it is given that is installed already, and the libraries that
# package needs with it (`make test` once upgraded a user's openssl and
# libssl that way): callers name only packages that are missing, and
# --no-upgrade makes sure. A package that is new can still need a newer
# version of a library than the one installed; apt-get then upgrades it.
define apt_install
if [ -n "$(strip $(1))" ]; then \
	$(SUDO) apt-get update -qq && \
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends \
		--no-upgrade $(1); \
fi
endef

# $(call install_missing,command=package ...): the package of each command
# that is not on PATH, and nothing for the commands that are.
define install_missing
@missing=""; for pair in $(1); do \
	command -v "$${pair%%=*}" >/dev/null || missing="$$missing $${pair#*=}"; \
done; \
$(call apt_install,$$missing)
endef

# What installing needs before the venv exists: venv itself, a C compiler,
# the C library's headers, xxHash's (the AOF records' checksum) and the
# headers of $(PYTHON) (Debian's python3;
# another interpreter must bring its own headers, and the check says so).
build-deps:
	@missing=""; \
	command -v cc >/dev/null || missing="$$missing gcc"; \
	[ -e /usr/include/stdio.h ] || missing="$$missing libc6-dev"; \
	[ -e /usr/include/xxhash.h ] || missing="$$missing libxxhash-dev"; \
	$(PYTHON) -c "import venv, ensurepip" 2>/dev/null || missing="$$missing python3-venv"; \
	$(HAS_PYTHON_H) || missing="$$missing python3-dev"; \
	$(call apt_install,$$missing)
	@$(HAS_PYTHON_H) || \
		{ echo "no Python.h for $(PYTHON): install its development headers" >&2; exit 1; }

$(BIN)/python: | build-deps
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml $(ENGINE_SOURCES) | $(BIN)/python build-deps
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml $(ENGINE_SOURCES) | $(BIN)/python build-deps
	$(BIN)/python -m pip install --quiet -e '.[test,spark]'
	touch $@ $(VENV)/.installed

build: $(VENV)/.installed

# redis-cli alone (redis-tools), for `make run`: the README's next step
# talks to the node with it. Silent, and nothing to do, once installed.
redis-cli-deps:
	$(call install_missing,$(RUN_COMMANDS))

# Command-line tools the tests drive: redis-cli (redis-tools) and nc; openssl
# (the TLS tests make their certificates) and ip (iproute2: the protected-mode
# tests make a network namespace, the chaos checker's network faults one per
# node) with nft (nftables: the partitions' and lossy links' rules);
# faketime (its libfaketime moves a node's clock in the chaos clock faults); Java
# for the Spark tests (pyspark starts a JVM); node and npm for the Node.js
# client libraries; Debian's chromium and its chromedriver for the
# dashboard's browser tests (selenium drives them; no browser is downloaded).
# Each is TEST_COMMANDS' command=package: only the missing ones' packages
# are installed.
test-commands:
	$(call install_missing,$(TEST_COMMANDS))

system-deps: test-commands $(PROMTOOL)

# promtool, which checks /metrics in the suite, is taken out of Debian's
# prometheus package (apt-get download, no root needed once the package lists
# are there) rather than installed with it: the package's postinst starts a
# Prometheus server (invoke-rc.d) and it brings a dozen web libraries, where
# promtool is one binary. It lands in the venv, beside the test runner.
$(PROMTOOL): | $(BIN)/python
	@tmp=$$(mktemp -d) && cd $$tmp && \
		{ apt-get download prometheus >/dev/null 2>&1 || \
		  { $(SUDO) apt-get update -qq && apt-get download prometheus >/dev/null 2>&1; }; } && \
		dpkg-deb --fsys-tarfile prometheus_*.deb | tar -x ./usr/bin/promtool && \
		mv usr/bin/promtool $(CURDIR)/$(PROMTOOL); status=$$?; rm -rf $$tmp; exit $$status

# The Node.js Disque clients the tests drive, exactly as package-lock.json
# pins them, into $(NODE_CLIENTS)/node_modules (again only when the lock changed).
$(NODE_CLIENTS)/node_modules/.installed: $(NODE_CLIENTS)/package.json $(NODE_CLIENTS)/package-lock.json | system-deps
	@command -v node >/dev/null && command -v npm >/dev/null || \
		{ echo "node and npm are required for tests/integration/test_node_clients.py" >&2; exit 1; }
	cd $(NODE_CLIENTS) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

node-deps: $(NODE_CLIENTS)/node_modules/.installed

# Another port: make run PORT=7712 (the cluster bus takes PORT + 10000).
# The node keeps its files (nodes.conf; the AOF, when on) in RUN_DIR, which
# git ignores: --dir makes it the node's working directory, where relative
# paths land, as Disque's dir does (and, as in Disque, it must exist).
run: $(VENV)/.installed redis-cli-deps
	mkdir -p $(RUN_DIR)
	$(BIN)/disque-server --port $(PORT) --bind 127.0.0.1 --dir $(RUN_DIR)

# The layer contract first (seconds): a layer that imports upward fails
# before the suite runs. Then the engine under the sanitizers and each fuzz
# target for a bounded number of runs (a few minutes in all).
test: $(VENV)/.installed-test system-deps node-deps sanitizer-deps
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(BIN)/python -m pytest
	$(MAKE) test-asan-quick fuzz-quick

# clang and its sanitizer runtimes (Debian's clang-14, libclang-rt-14-dev),
# each only when missing.
sanitizer-deps:
	@missing=""; \
	command -v $(CLANG) >/dev/null || missing="$$missing clang-14"; \
	ls /usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.asan-x86_64.so >/dev/null 2>&1 || \
		missing="$$missing libclang-rt-14-dev"; \
	$(call apt_install,$$missing)

# The checkout's files (tracked, and new ones git does not ignore) copied
# into ASAN_TREE; what was deleted here goes there too. The sanitized build
# there (the engine's .so) stays until its sources change.
asan-tree:
	@mkdir -p $(ASAN_TREE)
	@find $(ASAN_TREE) -type f ! -name '_core.*.so' -delete
	@git ls-files -co --exclude-standard -z | tar --null -cf - -T - | tar -xf - -C $(ASAN_TREE)
	@mkdir -p $(ASAN_TREE)/tests/clients/node
	@ln -sfn $(CURDIR)/$(NODE_CLIENTS)/node_modules $(ASAN_TREE)/$(NODE_CLIENTS)/node_modules

$(ASAN_VENV)/.installed: pyproject.toml $(ENGINE_SOURCES) | build-deps sanitizer-deps asan-tree
	[ -x $(ASAN_PY) ] || { $(PYTHON) -m venv $(ASAN_VENV) && \
		$(ASAN_PY) -m pip install --quiet --upgrade pip; }
	cd $(ASAN_TREE) && DISQUE_ENGINE_SANITIZE=$(SANITIZERS) CC=$(CLANG) \
		$(ASAN_PY) -m pip install --quiet -e '.[test,spark,fuzz]'
	touch $@

# The suites on the sanitized engine, and the servers they start: any
# sanitizer report, in any process, fails the run (tests/sanitized.py).
test-asan: $(ASAN_VENV)/.installed system-deps node-deps | asan-tree
	@ln -sf $(CURDIR)/$(PROMTOOL) $(ASAN_VENV)/bin/promtool
	$(SANITIZED) -- $(ASAN_PY) -m pytest -q -p no:cacheprovider $(ASAN_LEFT_OUT) $(ASAN_SUITES)

test-asan-quick: $(ASAN_VENV)/.installed | asan-tree
	$(SANITIZED) -- $(ASAN_PY) -m pytest -q -p no:cacheprovider $(ASAN_QUICK_SUITES)

# Each fuzz target for FUZZ_SECONDS, one after the other (tests/fuzz/).
fuzz: $(ASAN_VENV)/.installed | asan-tree
	@for target in $(FUZZ_TARGETS); do \
		($(SANITIZED) --fuzzer -- $(ASAN_PY) -m tests.fuzz $$target --seconds $(FUZZ_SECONDS) \
			--work $(CURDIR)/build/fuzz) \
			|| exit 1; \
	done

fuzz-quick: $(ASAN_VENV)/.installed | asan-tree
	@for target in $(FUZZ_TARGETS); do \
		($(SANITIZED) --fuzzer -- $(ASAN_PY) -m tests.fuzz $$target --runs $(FUZZ_QUICK_RUNS) \
			--work $(CURDIR)/build/fuzz) \
			|| exit 1; \
	done

# Benchmarks compare against redis-server from Debian's packages.
bench: $(VENV)/.installed-test system-deps
	$(call install_missing,$(BENCH_COMMANDS))
	$(BIN)/python benchmarks/bench_server.py

# The chaos matrix (docs/checking.md); one row at a time is `disque-py chaos`.
chaos: $(VENV)/.installed
	$(call install_missing,$(CHAOS_COMMANDS))
	$(BIN)/disque-py chaos-matrix --seconds $(CHAOS_SECONDS) --seeds $(CHAOS_SEEDS) \
		$(if $(CHAOS_ROWS),--rows $(CHAOS_ROWS)) $(if $(DISQUE_C),--disque-c $(DISQUE_C))

# The deterministic cluster simulation (tests/sim) over SOAK_SEEDS seeds in
# SOAK_JOBS processes; a failing seed is printed with its replay command.
soak: $(VENV)/.installed
	$(BIN)/python -m tests.sim --seeds $(SOAK_SEEDS) --jobs $(SOAK_JOBS)

clean:
	rm -rf $(VENV) $(ASAN_VENV) build *.egg-info .pytest_cache disque_py/engine/*.c disque_py/engine/*.so
