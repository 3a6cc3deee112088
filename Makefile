# Two entry points: `make demo` (the main job on embedded defaults) and `make test` (installs what the tests
# need, then runs every gate). Everything is installed into .venv. For the tests the package is installed (not
# linked) so that its codec is the compiled build; it is reinstalled whenever a source file changes. The demo
# installs only what it runs, as pure Python (see demo-install). pyproject.toml states compatible ranges;
# constraints.txt pins the versions this project's CI runs with.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
SOURCES := pyproject.toml setup.py constraints.txt $(sort $(shell find src -type f \( -name '*.py' -o -name '*.tsv' -o -name '*.js' -o -name '*.j2' -o -name '*.c' -o -name '*.pyi' \)))
STAMP := $(VENV)/.installed-$(shell cat $(SOURCES) | cksum | cut -d' ' -f1)
DEMO_STAMP := $(VENV)/.demo-installed-$(shell cat $(SOURCES) | cksum | cut -d' ' -f1)
# The codec tests run a second time on the pure-Python fallback, straight from the source tree.
PURE_TESTS := tests/test_codec_build.py tests/test_codec_vectors.py tests/test_codec_properties.py tests/test_codec_hostile.py
# Tests run in worker processes side by side (pytest-xdist): most of a test's time is waiting on brokers, deadlines
# and timers, so there are more workers than cores. A module's tests go to one worker (its fixtures are made once),
# and so do the tests that read the whole library's runs (tests/library_runs.py) and those that read the Spark audit
# of the shared captures (tests/shared_captures_on_spark.py); tests/conftest.py hands the longest out first. Tests
# marked `alone` run afterwards, one at a time.
TEST_WORKERS ?= 4
# Executions of the native reading path's differential fuzzer in `make bench` (scripts/fuzz-native.sh): guided by
# the pure-Python parsers' coverage (FUZZ_RUNS), then beside the installed compiled parsers (FUZZ_COMPILED_RUNS).
FUZZ_RUNS ?= 20000
FUZZ_COMPILED_RUNS ?= 10000
PARALLEL := -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder

.PHONY: install demo-install build-deps system-deps demo wheel test lint typecheck unit bench clean

$(STAMP): $(SOURCES)
	bash scripts/install-build-deps.sh $(PYTHON)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	rm -rf build  # a module no longer compiled must not come back from an earlier build
	@echo "== installing mqttaudit[all,test,bench], its codec compiled with mypyc (several minutes, quiet)"
	PIP_CONSTRAINT=constraints.txt $(PY) -m pip install --quiet '.[all,test,bench]'
	rm -f $(VENV)/.installed-* $(VENV)/.demo-installed-*
	touch $@

install: $(STAMP)

# The demo's install: the demo extra only (the audit's Spark, real clients, amqtt when there is no mosquitto), none
# of the test and benchmark tools, and no compile: nothing the demo runs waits on the codec (the probe waits on the
# broker's deadlines, the audit of a few hundred packets on Spark), and mypyc at -O3 took most of its time. A line
# on screen for every step; pip shows what it downloads and installs. After `make install` the demo runs on that.
$(DEMO_STAMP): $(SOURCES)
	@echo "== make demo: a virtual environment in $(VENV)"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	@echo "== make demo: installing mqttaudit[demo] as pure Python (pyspark, pyarrow, pandas, paho-mqtt, amqtt; pyspark alone unpacks to about 500 MB)"
	rm -rf build  # a compiled module of an earlier build must not come into this one
	MQTTAUDIT_PURE_PYTHON=1 PIP_CONSTRAINT=constraints.txt $(PY) -m pip install '.[demo]'
	rm -f $(VENV)/.installed-* $(VENV)/.demo-installed-*
	touch $@

demo-install: $(if $(wildcard $(STAMP)),$(STAMP),$(DEMO_STAMP))

system-deps:
	bash scripts/install-test-deps.sh

demo: demo-install
	@echo "== make demo: running .venv/bin/mqttaudit demo"
	$(VENV)/bin/mqttaudit demo

# A pure-Python wheel (py3-none-any) in dist/, to install where there is no checkout: pip install dist/mqttaudit-*.whl
# Built with .venv's pip when there is one, else with $(PYTHON)'s.
wheel:
	rm -rf build
	MQTTAUDIT_PURE_PYTHON=1 $(if $(wildcard $(PY)),$(PY),$(PYTHON)) -m pip wheel --no-deps --wheel-dir dist $(WHEEL_OPTIONS) .

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
	PYTHON=$(PY) bash scripts/fuzz-native.sh -runs=$(FUZZ_RUNS)
	PYTHON=$(PY) bash scripts/fuzz-native.sh --compiled -runs=$(FUZZ_COMPILED_RUNS)
	$(PY) bench/fixed_cost_bench.py
	$(PY) bench/memory_growth.py
	$(PY) bench/probe_bench.py
	$(PY) bench/transport_bench.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis build dist src/*.egg-info
