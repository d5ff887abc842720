# finchmq: the two commands that work on a fresh machine with only Python >= 3.11.
#   make demo   installs what is needed and runs the main job
#   make test   installs and runs every check: ruff, mypy, import contracts, the pytest suite
# Both install finchmq with its dev, spark and connect extras (pyspark, pyarrow, Spark Connect's
# client) into .venv, and make sure Java 17+ is there for Spark (installed with apt-get when it is
# missing and we are root), and chromium for the web console's browser tests (likewise).

SHELL := /bin/bash
PYTHON ?= $(shell for p in python3.13 python3.12 python3.11 python3; do \
	if command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; \
	then echo $$p; break; fi; done)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The official C++ client (PyPI rocketmq==0.4.4 bundles librocketmq) lives in its own venv:
# compatibility tests drive it as a separate process against a real finchmq server.
CPP_VENV := .venv-cpp
CPP_STAMP := $(CPP_VENV)/.installed
# The official RocketMQ 5.x Python SDK (PyPI rocketmq-python-client, gRPC) likewise: the tests in
# tests/grpc5 drive it as a separate process against finchmq's gRPC server.
V5_VENV := .venv-v5
V5_STAMP := $(V5_VENV)/.installed
PYTEST_ARGS ?=
JAVA_MIN := 17
# The real Apache RocketMQ 4.9.8 (Java) for the interop tests in tests/java; they skip, saying why,
# where it is absent (a user's clone). setup.sh installs its jars and a JDK once.
JAVA_ROCKETMQ ?= $(or $(FINCHMQ_JAVA_ROCKETMQ),$(abspath ../shared/java-rocketmq))

.PHONY: demo test test-stress lint typecheck imports pytest bench clean java java-rocketmq chromium

$(STAMP): pyproject.toml setup.py $(wildcard src/finchmq/grpc/_pb/*.proto) $(wildcard src/finchmq/*/*.pyx)
	@if [ -z "$(PYTHON)" ]; then echo "finchmq needs Python >= 3.11 on PATH" >&2; exit 1; fi
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev,spark,connect]'
	touch $(STAMP)

# Spark runs on a JVM: Java 17 or newer. Missing or older: apt-get installs a headless JRE when
# it can (root, Debian/Ubuntu); otherwise this stops with what to install.
java:
	@v=$$(java -version 2>&1 | sed -n 's/.*version "\(1\.\)\{0,1\}\([0-9]*\)[."].*/\2/p' | head -1); \
	if [ -n "$$v" ] && [ "$$v" -ge $(JAVA_MIN) ]; then exit 0; fi; \
	if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
		echo "Spark needs Java $(JAVA_MIN)+ (found: $${v:-none}); installing openjdk-17-jre-headless"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null \
			|| { echo "apt-get could not install openjdk-17-jre-headless" >&2; exit 1; }; \
		v=$$(java -version 2>&1 | sed -n 's/.*version "\(1\.\)\{0,1\}\([0-9]*\)[."].*/\2/p' | head -1); \
		if [ -z "$$v" ] || [ "$$v" -lt $(JAVA_MIN) ]; then \
			echo "java on PATH is still $${v:-missing} after the install: point PATH or JAVA_HOME at Java $(JAVA_MIN)+" >&2; exit 1; fi; \
	else \
		echo "finchmq's Spark pipeline needs Java $(JAVA_MIN)+ on PATH (found: $${v:-none})." >&2; \
		echo "Install one (e.g. apt-get install openjdk-17-jre-headless, or a JDK from your vendor) and retry." >&2; \
		exit 1; \
	fi

# The web console's browser tests (tests/console) drive Debian's chromium through Playwright
# (never a browser Playwright downloads). Missing: apt-get installs it when it can (root); else
# those tests skip, printing why, and the rest of the suite runs.
chromium:
	@if command -v chromium >/dev/null 2>&1; then exit 0; fi; \
	if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
		echo "the console's browser tests need chromium; installing it with apt-get"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null \
			|| echo "apt-get could not install chromium: the browser tests will skip" >&2; \
	else \
		echo "chromium is missing (install it, e.g. apt-get install chromium): the browser tests will skip" >&2; \
	fi

java-rocketmq:
	@if [ -x "$(JAVA_ROCKETMQ)/setup.sh" ] && [ ! -f "$${TMPDIR:-/tmp}/rocketmq-java.classpath" ]; then \
		echo "setting up Apache RocketMQ 4.9.8 (Java) from $(JAVA_ROCKETMQ) for the interop tests"; \
		"$(JAVA_ROCKETMQ)/setup.sh" >/dev/null; \
	fi

$(CPP_STAMP):
	@if [ -z "$(PYTHON)" ]; then echo "finchmq needs Python >= 3.11 on PATH" >&2; exit 1; fi
	$(PYTHON) -m venv $(CPP_VENV)
	$(CPP_VENV)/bin/python -m pip install --quiet --disable-pip-version-check rocketmq==0.4.4
	$(CPP_VENV)/bin/python -c "from rocketmq.client import Producer, PushConsumer, PullConsumer"
	touch $(CPP_STAMP)

$(V5_STAMP):
	@if [ -z "$(PYTHON)" ]; then echo "finchmq needs Python >= 3.11 on PATH" >&2; exit 1; fi
	$(PYTHON) -m venv $(V5_VENV)
	$(V5_VENV)/bin/python -m pip install --quiet --disable-pip-version-check rocketmq-python-client==5.1.2
	$(V5_VENV)/bin/python -c "from rocketmq import Producer, SimpleConsumer, PushConsumer, ClientConfiguration, Credentials, Message"
	touch $(V5_STAMP)

demo: $(STAMP) java
	$(BIN)/finchmq demo

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

imports: $(STAMP)
	$(BIN)/lint-imports

# The suite runs on the build pip made: the compiled (Cython) twins where a C compiler was there.
# Beside it, the tests of the code that has compiled twins run again on the pure-Python package
# (FINCHMQ_NO_EXTENSIONS=1), which is what installs where no compiler is; its log is printed after.
PURE_TESTS ?= tests/protocol tests/store tests/remoting tests/broker/test_processors.py tests/broker/test_send_pull.py
pytest: $(STAMP) $(CPP_STAMP) $(V5_STAMP) java java-rocketmq chromium
	@$(BIN)/python -c "from finchmq.protocol import _compiled, batch, codec, headers, message, stored; \
		print('finchmq build under test:', ', '.join(_compiled.loaded()) or 'pure Python (no compiled twins built)')"
	@FINCHMQ_NO_EXTENSIONS=1 $(BIN)/pytest -q -p no:cacheprovider $(PURE_TESTS) > .pytest-pure.log 2>&1 & pure=$$!; \
	FINCHMQ_JAVA_ROCKETMQ="$(JAVA_ROCKETMQ)" $(BIN)/pytest $(PYTEST_ARGS); status=$$?; \
	wait $$pure; pure_status=$$?; \
	echo "== the same tests on the pure-Python build (FINCHMQ_NO_EXTENSIONS=1): $(PURE_TESTS)"; \
	if [ $$pure_status -eq 0 ]; then tail -n 1 .pytest-pure.log; else cat .pytest-pure.log; fi; \
	[ $$status -eq 0 ] && [ $$pure_status -eq 0 ]

test: lint typecheck imports pytest

# The pytest suite on a machine that is busy on purpose, in a shuffled order: one busy loop per core
# runs beside it, and modules and their tests run in an order drawn from SEED (printed; the same SEED
# gives the same order). A test that relies on timing or on another test's leftovers fails here
# before it fails in CI. `make test-stress SEED=1234` repeats a run's order.
test-stress: $(STAMP) $(CPP_STAMP) $(V5_STAMP) java java-rocketmq chromium
	@seed=$${SEED:-$$(date +%s)}; cores=$$(nproc); \
	echo "test-stress: $$cores busy loops beside the suite, order shuffled by seed $$seed (make test-stress SEED=$$seed)"; \
	busy=(); for _ in $$(seq $$cores); do ( while :; do :; done ) & busy+=($$!); done; \
	trap 'kill $${busy[*]} 2>/dev/null' EXIT; \
	FINCHMQ_JAVA_ROCKETMQ="$(JAVA_ROCKETMQ)" $(BIN)/pytest --shuffle=$$seed $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python -m benchmarks.remoting_rtt

clean:
	rm -rf $(VENV) $(CPP_VENV) $(V5_VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis build dist src/*.egg-info \
		src/finchmq/*/*.so src/finchmq/*/_*_c.c .pytest-pure.log
