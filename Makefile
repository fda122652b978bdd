# Everything runs from a local virtualenv that these targets create on first use.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
RUNTIME_STAMP := $(VENV)/.runtime-stamp
EXAMPLE_OUT ?= policies-example

.PHONY: install lint typecheck docs test test-fast example bench clean proto image

# cpg and its runtime dependencies only (what `make example` needs).
# uv installs the versions pip would pick, in seconds where pip takes a minute and a half (most
# of a fresh `make test`'s set-up); where uv cannot be had, pip does it.
PIP := $(BIN)/python -m pip --disable-pip-version-check
define pip_install
	{ $(PIP) install --quiet uv && $(BIN)/uv pip install --quiet --python $(BIN)/python $(1); } \
		|| { echo "make: uv could not install $(1); pip does it instead"; $(PIP) install --quiet $(1); }
endef

$(RUNTIME_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(call pip_install,-e .)
	touch $(RUNTIME_STAMP)

# Plus the development tools (tests, linters, type checker).
# The wheelhouse holds cpg's wheel, its dependencies (with every extra) and its build backend,
# so that the pre-commit hooks' environment and the image (make image OFFLINE=1) install with
# no index: tests use no network.
WHEEL_EXTRAS := s3,gcs,azure,dask
$(STAMP): $(RUNTIME_STAMP)
	$(call pip_install,-e '.[dev]')
	$(PIP) wheel --quiet -w $(VENV)/wheelhouse '.[$(WHEEL_EXTRAS)]' hatchling
	touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/lint-imports --no-cache

typecheck: $(STAMP)
	$(BIN)/mypy

# The manual as a site (mkdocs.yml): strict, so a broken link or a page left out fails.
# scripts/docs_reference.py makes the command reference and the exit codes again.
docs: $(STAMP)
	$(BIN)/mkdocs build --strict --quiet --site-dir $(VENV)/site

# The whole suite: lint, types, the manual, then every test.
test: lint typecheck docs
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

# The container image (Containerfile): podman build, tagged with cpg's version. One image runs
# every overlay under deploy/ (s3 extra, git and ssh); set EXTRAS and TOOLS for another.
#   make image                       # localhost/cpg:VERSION, on the public python slim image
#   make image EXTRAS= TOOLS=        # cpg alone: no object storage, no cpg propose
#   make image EXTRAS=s3,dask        # extras: s3, gcs, azure, dask
#   make image BASE=IMAGE            # another base with python3 and its venv module
#   make image OFFLINE=1             # no network: dependencies from the wheelhouse (make install)
#   make image IMAGE=NAME:TAG        # another name
comma    := ,
VERSION  := $(shell sed -n 's/^version = "\(.*\)"$$/\1/p' pyproject.toml)
REVISION := $(shell git rev-parse HEAD 2>/dev/null)
SOURCE   := $(filter https://%,$(shell git remote get-url origin 2>/dev/null))
EXTRAS   ?= s3
TOOLS    ?= git openssh-client
IMAGE    ?= localhost/cpg:$(VERSION)
image: $(if $(OFFLINE),$(STAMP))
	podman build --tag $(IMAGE) $(if $(BASE),--build-arg BASE=$(BASE)) \
	  --build-arg EXTRAS="$(EXTRAS)" --build-arg TOOLS="$(TOOLS)" \
	  --label org.opencontainers.image.version=$(VERSION) \
	  $(if $(REVISION),--label org.opencontainers.image.revision=$(REVISION)) \
	  $(if $(SOURCE),--label org.opencontainers.image.source=$(SOURCE)) \
	  $(if $(OFFLINE),--network=none --volume $(abspath $(VENV))/wheelhouse:/mnt:ro \
	    --build-arg PIP_OPTIONS="--no-index --find-links /mnt") .
