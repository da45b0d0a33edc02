# toolscale: `make demo` runs the main job on the embedded catalog, `make test` runs the tests.
# Both create a local virtualenv (.venv) on first use; nothing needs a GPU, network to model hubs or an API key.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev
TEST_STAMP := $(VENV)/.installed-test

.PHONY: setup setup-train setup-sandbox demo test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e ".[dev]"
	touch $(STAMP)

setup: $(STAMP)

# The tests also run Hugging Face checkpoints in process and train them with TRL (a tiny Qwen3 built
# from a config):
# torch is pinned first so pip takes the CPU build on local disk, not an open range's CUDA build.
$(TEST_STAMP): $(STAMP)
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[dev,local,train]"
	touch $(TEST_STAMP)

# Training extras: pin torch first, so that pip takes the CPU build on local disk and no range
# pulls a multi-GB CUDA build.
setup-train: $(STAMP)
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[dev,train]"

# The code interpreter runs model-written code under bubblewrap (Debian/Ubuntu package).
setup-sandbox:
	command -v bwrap >/dev/null || (apt-get install -y bubblewrap || sudo apt-get install -y bubblewrap)

demo: $(STAMP)
	$(BIN)/toolscale synth all
	$(BIN)/toolscale info

lint: $(STAMP)
	$(BIN)/ruff check toolscale tests benchmarks
	$(BIN)/ruff format --check toolscale tests benchmarks

test: $(TEST_STAMP) lint
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python benchmarks/engine.py
	$(BIN)/python benchmarks/synth.py

clean:
	rm -rf $(VENV) data/toolscale.duckdb* dist build *.egg-info
