# disque-py: `make run` starts a node on 127.0.0.1:7711 (PORT=N for
# another port) and installs redis-cli to talk to it, `make test` runs
# everything, `make soak` plays 10,000 seeds of the cluster simulation and
# `make chaos` kills and pauses a 5-node loopback cluster under load for
# CHAOS_SECONDS (10 minutes) and checks no acknowledged job is lost. Every
# target creates .venv when it is missing and installs what it needs
# (Python packages into the venv, Debian packages with apt when absent).
# Installing compiles the engine (disque_py/engine, Cython): a C compiler
# and the Python headers are installed first when missing, and an edited
# engine source makes the next target rebuild it (`make build` alone too).

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PORT   ?= 7711
APT_PACKAGES := redis-tools netcat-openbsd openssl iproute2
JAVA_PACKAGE := openjdk-17-jre-headless
NODE_PACKAGES := nodejs npm
BROWSER_PACKAGES := chromium chromium-driver
NODE_CLIENTS := tests/clients/node
PROMTOOL := $(BIN)/promtool
SUDO   := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)

CHAOS_SECONDS ?= 600
CHAOS_ARGS ?=
SOAK_SEEDS ?= 10000
SOAK_JOBS  ?= 2

ENGINE_SOURCES := setup.py disque_py/engine/_sources.py \
	$(wildcard disque_py/engine/*.pyx disque_py/engine/*.pxd disque_py/engine/*.pxi disque_py/engine/*.h \
	           disque_py/engine/*/*.pxd disque_py/engine/*/*.pxi)
BUILD_PACKAGES := gcc libc6-dev python3-dev python3-venv

.PHONY: run build test bench chaos soak build-deps redis-cli-deps system-deps node-deps clean

# What installing needs before the venv exists: venv itself, a C compiler
# and the headers of $(PYTHON) (Debian's python3; another interpreter must
# bring its own headers, and the check says so).
build-deps:
	@if ! command -v cc >/dev/null || ! $(PYTHON) -c "import venv, ensurepip" 2>/dev/null || \
		! $(PYTHON) -c "import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h')))"; then \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $(BUILD_PACKAGES); \
	fi
	@$(PYTHON) -c "import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h')))" || \
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
	@if ! command -v redis-cli >/dev/null; then \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends redis-tools; \
	fi

# Command-line tools the tests drive: redis-cli (redis-tools) and nc; openssl
# (the TLS tests make their certificates) and ip (iproute2: the protected-mode
# tests make a network namespace); Java
# for the Spark tests (pyspark starts a JVM); node and npm for the Node.js
# client libraries; Debian's chromium and its chromedriver for the
# dashboard's browser tests (selenium drives them; no browser is downloaded).
system-deps: redis-cli-deps $(PROMTOOL)
	@if ! command -v redis-cli >/dev/null || ! command -v nc >/dev/null || \
		! command -v openssl >/dev/null || ! command -v ip >/dev/null; then \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $(APT_PACKAGES); \
	fi
	@if ! command -v java >/dev/null; then \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $(JAVA_PACKAGE); \
	fi
	@if ! command -v node >/dev/null || ! command -v npm >/dev/null; then \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $(NODE_PACKAGES); \
	fi
	@if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $(BROWSER_PACKAGES); \
	fi

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
run: $(VENV)/.installed redis-cli-deps
	$(BIN)/disque-server --port $(PORT) --bind 127.0.0.1

# The layer contract first (seconds): a layer that imports upward fails
# before the suite runs.
test: $(VENV)/.installed-test system-deps node-deps
	$(BIN)/lint-imports
	$(BIN)/python -m pytest

# Benchmarks compare against redis-server from Debian's packages.
bench: $(VENV)/.installed-test system-deps
	@command -v redis-server >/dev/null || { $(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends redis-server; }
	$(BIN)/python benchmarks/bench_server.py

# Extra options in CHAOS_ARGS, e.g. CHAOS_ARGS="--seed 42 --keep" (disque-py chaos --help).
chaos: $(VENV)/.installed
	$(BIN)/disque-py chaos --duration $(CHAOS_SECONDS) $(CHAOS_ARGS)

# The deterministic cluster simulation (tests/sim) over SOAK_SEEDS seeds in
# SOAK_JOBS processes; a failing seed is printed with its replay command.
soak: $(VENV)/.installed
	$(BIN)/python -m tests.sim --seeds $(SOAK_SEEDS) --jobs $(SOAK_JOBS)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache disque_py/engine/*.c disque_py/engine/*.so
