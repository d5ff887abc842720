# finchmq: the two commands that work on a fresh machine with only Python >= 3.11.
#   make demo   installs what is needed and runs the main job
#   make test   installs and runs every check: ruff, mypy, import contracts, the pytest suite

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
PYTEST_ARGS ?=

.PHONY: demo test lint typecheck imports pytest bench clean

$(STAMP): pyproject.toml
	@if [ -z "$(PYTHON)" ]; then echo "finchmq needs Python >= 3.11 on PATH" >&2; exit 1; fi
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

$(CPP_STAMP):
	@if [ -z "$(PYTHON)" ]; then echo "finchmq needs Python >= 3.11 on PATH" >&2; exit 1; fi
	$(PYTHON) -m venv $(CPP_VENV)
	$(CPP_VENV)/bin/python -m pip install --quiet --disable-pip-version-check rocketmq==0.4.4
	$(CPP_VENV)/bin/python -c "from rocketmq.client import Producer, PushConsumer, PullConsumer"
	touch $(CPP_STAMP)

demo: $(STAMP)
	$(BIN)/finchmq demo

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

imports: $(STAMP)
	$(BIN)/lint-imports

pytest: $(STAMP) $(CPP_STAMP)
	$(BIN)/pytest $(PYTEST_ARGS)

test: lint typecheck imports pytest

bench: $(STAMP)
	$(BIN)/python -m benchmarks.remoting_rtt

clean:
	rm -rf $(VENV) $(CPP_VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis build dist src/*.egg-info
