# Every target sets itself up: a fresh machine with python3 and make needs nothing else.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# The CPU build of torch; a bare `torch` would pull a multi-GB CUDA build.
TORCH  := torch==2.13.0

.PHONY: demo check test docs lab bench lint clean pretrained

$(VENV)/.base: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(TORCH)
	$(PY) -m pip install -q -e ".[corpus,lab]"
	touch $@

# The test extra's llama-cpp-python (the GGUF oracle) compiles llama.cpp from source, once:
# pip's wheel cache keeps the build for every later install, a fresh venv included. Only its
# library is built (no multimodal, tests, examples or tools), which computes the same. It is
# built for generic x86-64 (AVX2), not -march=native: a native build on a VM that reports
# AMX and AVX512-BF16 segfaulted inside llama_decode (2026-12-01).
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
	-DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF

$(VENV)/.test: $(VENV)/.base
	@command -v g++ >/dev/null || bash .ci/install-system-deps
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PY) -m pip install -q -e ".[test]"
	touch $@

demo: $(VENV)/.base
	$(VENV)/bin/gptlab demo

# The edit loop: lint and the fast tier, every test not marked slow (no long training,
# torchrun, llama.cpp or browser; pyproject.toml registers the markers). One pytest-xdist
# worker per core: most tests are one-threaded work.
check: $(VENV)/.test
	$(VENV)/bin/ruff check src tests bench tools
	$(PY) -m pytest -q -n auto -m "not slow"

# Everything, as CI runs it (.ci/run): pyproject's testpaths include notebooks/, which nbmake
# runs in quick mode (notebooks/conftest.py). --dist loadfile: a module's tests share one
# worker, so its module fixtures (a trained model, a lab server and its browser) run once;
# --no-loadscope-reorder: the files go out in tests/conftest.py's order, the slow ones first.
test: $(VENV)/.test
	@command -v chromium >/dev/null || bash .ci/install-system-deps
	$(VENV)/bin/ruff check src tests bench tools
	$(PY) -m pytest -q -n auto --dist loadfile --no-loadscope-reorder

# The documentation site (mkdocs.yml; the pages are docs/, the API reference comes from the
# docstrings) into site/, offline. --strict: a broken link, anchor or reference fails.
$(VENV)/.docs: $(VENV)/.base
	$(PY) -m pip install -q -e ".[corpus,docs]"
	touch $@

docs: $(VENV)/.docs
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

lab: $(VENV)/.base
	$(VENV)/bin/gptlab lab

# The model gptlab ships (src/gptlab/pretrained/shakespeare): retrained from the embedded corpus
# with the recipe shakespeare-char-cpu-hour (about an hour on 2 CPU cores), rounded to float16,
# evaluated on the whole val split, checksummed (tools/pretrained.py). PRETRAINED_ARGS="--max-iters
# N" makes a shorter placeholder with the same recipe.
PRETRAINED_ARGS ?=

pretrained: $(VENV)/.base
	$(PY) -m tools.pretrained $(PRETRAINED_ARGS)

# time_to_quality trains on tiny Shakespeare: the copy the repository ships with its tests.
TINY_SHAKESPEARE ?= tests/assets/tinyshakespeare/input.txt
BENCH_ARGS ?= --text $(TINY_SHAKESPEARE)

bench: $(VENV)/.test
	$(PY) -m bench $(BENCH_ARGS)

lint: $(VENV)/.test
	$(VENV)/bin/ruff check src tests bench tools

clean:
	rm -rf $(VENV) build dist site src/*.egg-info
