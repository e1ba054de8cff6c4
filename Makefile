# Two commands on a fresh machine: `make demo` and `make test`.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test venv lint clean

$(STAMP): pyproject.toml
	@command -v $(PY) >/dev/null 2>&1 || { echo "need $(PY) on PATH"; exit 1; }
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	@touch $(STAMP)

venv: $(STAMP)

# Lint, types and import contracts first: they fail in seconds where the tests take minutes.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports

# The suite runs TEST_JOBS tests at a time (pytest-xdist, work stealing so the long end-to-end
# tests do not end up queued behind each other): most of an end-to-end test's or scenario's
# timeline is waiting on a whole stack. Scenario checks are timed against the wall clock of a
# shared 2-core machine, so a failed scenario file is run once more (pytest-rerunfailures, marked
# in tests/e2e/test_scenarios.py; a rerun is reported, and a file that fails twice fails the run).
TEST_JOBS ?= 3

# The sources are byte-compiled first: where PYTHONDONTWRITEBYTECODE is set, every process the
# tests start (eight per scenario) compiled every kq module it imported again, ~0.15-0.25 s of CPU
# each; .pyc files already there are still read.
test: lint
	$(BIN)/python -m compileall -q shared services kubesim
	$(BIN)/python -m pytest -q -n $(TEST_JOBS) --dist worksteal $(PYTEST_ARGS)

demo: $(STAMP)
	$(BIN)/python -m kq.demo

clean:
	rm -rf $(VENV) .pytest_cache
