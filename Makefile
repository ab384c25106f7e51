# Two entry points: `make demo` and `make test`. Each sets up .venv by itself.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-dev
DEMO   := $(VENV)/.installed-demo

# Test files run side by side, each whole in one worker: most tests wait on servers and
# subprocesses, not on the CPU.
TEST_WORKERS ?= 2

.PHONY: demo test lint typecheck unit bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# The demo needs only the light extras; the tests need the development set.
$(DEMO): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[demo,prometheus]'
	touch $(DEMO)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP) $(DEMO)

demo: $(DEMO)
	$(BIN)/ragpulse demo

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples
	$(BIN)/ruff format --check src tests bench examples

typecheck: $(STAMP)
	$(BIN)/mypy

# -rs ends the run with each skipped test's reason (a server absent outside CI); under CI=true
# nothing that needs a server may skip.
test: lint typecheck
	$(BIN)/python -m pytest -q -rs -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python bench/overhead.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
