# crawlstack: the two commands are `make demo` and `make test`.
# Everything installs from the project's own files: Python packages into
# .venv (pyproject.toml), the AWS CDK CLI into node_modules (package-lock.json).

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: setup browser test unit integration lint typecheck demo bench clean

include make/infra.mk

setup: $(STAMP)

$(STAMP): pyproject.toml package.json package-lock.json
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	npm ci --no-audit --no-fund --loglevel=error
	$(MAKE) --no-print-directory browser
	touch $@

## Debian's chromium and chromedriver, for the report's browser test (apt as root, or through sudo)
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { \
	  SUDO=$$(test "$$(id -u)" = 0 || echo sudo); \
	  $$SUDO apt-get install -y --no-install-recommends chromium chromium-driver \
	  || { $$SUDO apt-get update && $$SUDO apt-get install -y --no-install-recommends chromium chromium-driver; }; }

## The whole suite: lint, types, unit, integration and infra tests
test: setup lint typecheck
	$(PY) -m pytest -q $(PYTEST_ARGS) tests

unit: setup
	$(PY) -m pytest -q tests/unit

integration: setup
	$(PY) -m pytest -q tests/integration

lint: setup
	$(VENV)/bin/ruff check crawlstack functions infra tests app.py scripts bench

typecheck: setup
	$(VENV)/bin/mypy crawlstack functions

## Serve the bundled demo site on loopback, crawl it locally, print the records
demo: setup
	$(PY) -m crawlstack.demo --out demo-out

## Run bench/ (each benchmark in a fresh interpreter, one after another) and rewrite BENCHMARKS.md
bench: setup
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	$(PY) bench/run.py

clean:
	rm -rf demo-out .pytest_cache .mypy_cache .ruff_cache
