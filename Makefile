# Two entry points: `make demo` (the main job on embedded defaults) and `make test` (installs what the tests
# need, then runs every gate). Everything is installed into .venv, keyed on the pyproject.toml it came from.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: install system-deps demo test lint typecheck unit bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,bench]'
	rm -f $(VENV)/.installed-*
	touch $@

install: $(STAMP)

system-deps:
	bash scripts/install-system-deps.sh

demo: install
	$(VENV)/bin/mqttaudit demo

lint: install
	$(PY) -m ruff check src tests bench
	$(PY) -m ruff format --check src tests bench

typecheck: install
	$(PY) -m mypy

unit: install system-deps
	$(PY) -m pytest

test: lint typecheck unit

bench: install
	$(PY) bench/codec_throughput.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis build src/*.egg-info
