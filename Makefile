# Quick start: `make demo`, then `make test`. Each creates or refreshes .venv.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP_RUN := $(VENV)/.stamp-run
STAMP_TEST := $(VENV)/.stamp-test
STAMP_BENCH := $(VENV)/.stamp-bench
# an edited C source reinstalls the package, which rebuilds its compiled parts (setup.py)
CPU_SRC := src/shapeflow/backend/cpu
NATIVE := setup.py $(CPU_SRC)/isa.h $(CPU_SRC)/kernels.c $(CPU_SRC)/kernels_common.h \
	$(CPU_SRC)/kernels_attention.c $(CPU_SRC)/kernels_bf16.c $(CPU_SRC)/kernels_conv.c \
	$(CPU_SRC)/kernels_loss.c $(CPU_SRC)/kernels_norm.c $(CPU_SRC)/kernels_optim.c \
	$(CPU_SRC)/kernels_rnn.c $(CPU_SRC)/kernels_softmax.c \
	$(CPU_SRC)/qgemm.c $(CPU_SRC)/bf16gemm.c $(CPU_SRC)/conv_kernels.c $(CPU_SRC)/alloc.c \
	$(CPU_SRC)/paged_attention.c $(CPU_SRC)/rnn_cell_kernels.c $(CPU_SRC)/norm_act_kernels.c

.PHONY: demo test bench lint clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(STAMP_RUN): pyproject.toml $(NATIVE) | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	touch $@

$(STAMP_TEST): pyproject.toml $(NATIVE) | $(BIN)/python
	@command -v dot >/dev/null 2>&1 || (command -v apt-get >/dev/null 2>&1 && \
		(apt-get update -qq && apt-get install -y -qq graphviz >/dev/null) || \
		echo "graphviz not installed: rendering tests will be skipped")
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@ $(STAMP_RUN)

demo: $(STAMP_RUN)
	$(BIN)/shapeflow demo

test: $(STAMP_TEST)
	$(BIN)/python -m pytest -n 2 tests

$(STAMP_BENCH): $(STAMP_TEST)
	@command -v clang >/dev/null 2>&1 || (command -v apt-get >/dev/null 2>&1 && \
		(apt-get update -qq && apt-get install -y -qq clang >/dev/null) || \
		echo "clang not installed: the benchmark's tinygrad column will be empty")
	$(BIN)/pip install --quiet -e '.[test,bench]'
	touch $@

bench: $(STAMP_BENCH)
	$(BIN)/python benchmarks/run.py $(ARGS)

lint: $(STAMP_TEST)
	$(BIN)/ruff check src tests benchmarks

clean:
	rm -rf $(VENV) build src/*.egg-info
