# Two commands for a fresh machine:  `make run` (the main evaluation) and `make test` (the test suite).
# Both create .venv and install everything from this repository's own files first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Stamps: the venv with pip and torch; plus the project with what `make run` needs; plus every extra.
BASE := $(VENV)/.base
RUN_STAMP := $(VENV)/.installed-run
STAMP := $(VENV)/.installed
# The CPU wheel of torch is found locally on the project's machines; on a GPU machine the same pin
# from PyPI is a CUDA build (or set TORCH_SPEC to the build you want).
TORCH_SPEC ?= torch==2.13.0
# Test processes (pytest-xdist): one per core by default; each test module runs whole on one worker, the
# modules marked `long` first (tests/conftest.py).
TEST_WORKERS ?= auto

.PHONY: install system-packages run test bench clean

$(BASE):
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet "$(TORCH_SPEC)"
	touch $(BASE)

# The evaluation needs the core dependencies and sb3-contrib (Table 2's MaskablePPO column), not Ray or RLlib:
# a newcomer's first command skips them (36 s of installing instead of 49 s with a warm pip cache).
$(RUN_STAMP): pyproject.toml $(BASE)
	$(BIN)/pip install --quiet -e ".[sb3]"
	touch $(RUN_STAMP)

$(STAMP): pyproject.toml $(BASE)
	$(BIN)/pip install --quiet -e ".[test,curves,ray,sb3,rllib,supersuit]"
	touch $(STAMP) $(RUN_STAMP)

install: $(STAMP)

system-packages:
	@bash tools/install-system-packages.sh

run: $(RUN_STAMP)
	$(BIN)/python evaluate.py

test: install system-packages
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder

bench: install
	$(BIN)/python -m benchmarks.env_bench

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
