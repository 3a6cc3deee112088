# Two entry points: `make demo` (the main job on embedded defaults) and `make test` (installs what the tests
# need, then runs every gate). Everything is installed into .venv. The package is installed (not linked) so
# that its codec is the compiled build; it is reinstalled whenever a source file changes. pyproject.toml states
# compatible ranges; constraints.txt pins the versions this project's CI runs with.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
SOURCES := pyproject.toml setup.py constraints.txt $(sort $(shell find src -type f \( -name '*.py' -o -name '*.tsv' -o -name '*.js' -o -name '*.j2' \)))
STAMP := $(VENV)/.installed-$(shell cat $(SOURCES) | cksum | cut -d' ' -f1)
# The codec tests run a second time on the pure-Python fallback, straight from the source tree.
PURE_TESTS := tests/test_codec_build.py tests/test_codec_vectors.py tests/test_codec_properties.py tests/test_codec_hostile.py
# Tests run in worker processes side by side (pytest-xdist): most of a test's time is waiting on brokers, deadlines
# and timers, so there are more workers than cores. A module's tests go to one worker (its fixtures are made once),
# and so do the tests that read the whole library's runs (tests/library_runs.py); tests/conftest.py hands the longest
# out first. Tests marked `alone` run afterwards, one at a time.
TEST_WORKERS ?= 4
PARALLEL := -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder

.PHONY: install build-deps system-deps demo test lint typecheck unit bench clean

$(STAMP): $(SOURCES)
	bash scripts/install-build-deps.sh $(PYTHON)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	rm -rf build  # a module no longer compiled must not come back from an earlier build
	PIP_CONSTRAINT=constraints.txt $(PY) -m pip install --quiet '.[all,test,bench]'
	rm -f $(VENV)/.installed-*
	touch $@

install: $(STAMP)

system-deps:
	bash scripts/install-test-deps.sh

demo: install
	$(VENV)/bin/mqttaudit demo

lint: install
	$(PY) -m ruff check src tests bench setup.py
	$(PY) -m ruff format --check src tests bench setup.py

typecheck: install
	$(PY) -m mypy

unit: install system-deps
	$(PY) -m pytest $(PARALLEL) -m "not alone" --durations=10
	$(PY) -m pytest -m alone
	PYTHONPATH=src MQTTAUDIT_EXPECT_BUILD=pure $(PY) -m pytest -q $(PARALLEL) $(PURE_TESTS)

test: lint typecheck unit

bench: install
	bash scripts/install-bench-deps.sh
	$(PY) bench/codec_throughput.py
	$(PY) bench/trie_throughput.py
	$(PY) bench/capture_gen.py
	$(PY) bench/audit_bench.py
	$(PY) bench/probe_bench.py
	$(PY) bench/transport_bench.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis build src/*.egg-info
