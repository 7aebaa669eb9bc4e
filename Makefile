# Two commands: `make quickstart` and `make test`. Both create .venv and install on a fresh machine.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install quickstart test lint clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# No GPU: pin torch==2.13.0 first, so installing the rest (torch>=2.6) keeps it. Which build pip picks is pip's
	# choice: the CPU wheel where pip's config finds it locally (find-links, as on this project's machines); on
	# stock PyPI (Linux) the multi-GB CUDA build (README: put the CPU wheel in first from the PyTorch CPU index).
	if ! command -v nvidia-smi >/dev/null 2>&1; then $(BIN)/pip install -q torch==2.13.0; fi
	$(BIN)/pip install -q -e ".[test]"
	touch $(STAMP)

install: $(STAMP)

quickstart: $(STAMP)
	$(BIN)/mathmix quickstart -o quickstart-run

# The package code type-checked in CI: all of it (bench/ scripts and tests are not in it).
TYPED := mathmix pipelines curate shards midtrain evals classifiers

# Two pytest workers (pytest-xdist), one test file per worker at a time (`--dist loadfile`): most of the suite's
# time is spent waiting on subprocesses (Slurm jobs, torchrun, servers), so on CI's 2 cores the suite takes ~9 min
# instead of ~16. A file's tests stay in one worker, so the Slurm tests never share the one queue with each other.
# `make test TEST_WORKERS=0` runs it in one process.
TEST_WORKERS ?= 2

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy $(TYPED)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile tests

lint: $(STAMP)
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/mypy $(TYPED)

clean:
	rm -rf quickstart-run .pytest_cache
