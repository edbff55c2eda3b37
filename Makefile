# Two commands for a fresh machine:  `make run` (the main evaluation) and `make test` (the test suite).
# Both create .venv and install everything from this repository's own files first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The CPU wheel of torch is found locally on the project's machines; on a GPU machine the same pin
# from PyPI is a CUDA build (or set TORCH_SPEC to the build you want).
TORCH_SPEC ?= torch==2.13.0

.PHONY: install system-packages run test bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet "$(TORCH_SPEC)"
	$(BIN)/pip install --quiet -e ".[test,curves,ray,sb3,rllib,supersuit]"
	touch $(STAMP)

install: $(STAMP)

system-packages:
	@bash tools/install-system-packages.sh

run: install
	$(BIN)/python evaluate.py

test: install system-packages
	$(BIN)/python -m pytest -q

bench: install
	$(BIN)/python -m mara_env.bench

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
