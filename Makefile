# Everything runs from a local virtualenv that these targets create on first use.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
RUNTIME_STAMP := $(VENV)/.runtime-stamp
EXAMPLE_OUT ?= policies-example

.PHONY: install lint typecheck test test-fast example bench clean proto

# cpg and its runtime dependencies only (what `make example` needs).
$(RUNTIME_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e .
	touch $(RUNTIME_STAMP)

# Plus the development tools (tests, linters, type checker).
# The wheelhouse holds cpg's wheel, its dependencies and its build backend, so the test of the
# pre-commit hooks installs the hook environment offline (no index: tests use no network).
$(STAMP): $(RUNTIME_STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	$(BIN)/python -m pip wheel --quiet --disable-pip-version-check -w $(VENV)/wheelhouse . hatchling
	touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

# The whole suite: lint, types, then every test.
test: lint typecheck
	$(BIN)/pytest

# The unit tests only (tests/core and the repository rules): seconds, for the edit loop.
test-fast: $(STAMP)
	$(BIN)/pytest -m unit

# Run cpg on the example capture shipped in examples/.
example: $(RUNTIME_STAMP)
	$(BIN)/cpg replay examples/drops.jsonl --output-dir $(EXAMPLE_OUT)

bench: $(STAMP)
	$(BIN)/python benchmarks/replay.py 1000000

clean:
	rm -rf $(VENV) $(EXAMPLE_OUT) .pytest_cache .mypy_cache .ruff_cache

# Regenerate the protobuf/gRPC stubs from the project's own .proto subset (a test checks that
# the committed stubs match the .proto files).
PROTOS := src/cpg_io/_proto/flow/flow.proto src/cpg_io/_proto/relay/relay.proto src/cpg_io/_proto/observer/observer.proto
proto: $(STAMP)
	$(BIN)/python -m grpc_tools.protoc -I src --python_out=src --pyi_out=src --grpc_python_out=src $(PROTOS)
