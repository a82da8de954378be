# One venv, pinned by requirements.lock; every target uses it.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install lint docs go-proto test test-unit test-random chaos chaos-small cluster-up cluster-down cluster-build prometheus image image-push image-if-possible image-test image-reproduce proto demo demo-down bench lock clean

install: $(STAMP)

# Recipes that other targets depend on are silent on stdout, so `make cluster-up` prints one line.
$(STAMP): pyproject.toml requirements.lock
	@echo "installing the pinned environment into $(VENV)" >&2
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/pip install --quiet --disable-pip-version-check -c requirements.lock -e '.[test,dev]' >&2
	@# The editable install resolves imports through an import hook that mypy cannot see; a plain
	@# .pth path entry for the checkout lets type checkers of out-of-repo adapters find vkprovider.
	@$(BIN)/python -c 'import site, sys; open(site.getsitepackages()[0] + "/vkprovider-typing.pth", "w").write(sys.argv[1] + "\n")' $(CURDIR)
	@touch $(STAMP)

# requirements.lock: every pin (runtime + test + dev), pip's constraints for `make install` (pip
# refuses hashes in a constraints file). requirements-image.lock: the same pins (-c) for the
# runtime dependencies and the build backend only, with hashes, for the image's
# `pip install --require-hashes` (tests/unit/deploy/test_deploy_lock.py checks they agree).
lock:  ## re-resolve requirements.lock and requirements-image.lock from pyproject.toml (needs uv)
	uv pip compile pyproject.toml --extra test --extra dev --python-version 3.11 -o requirements.lock
	uv pip compile pyproject.toml deploy/image/build-backend.in --python-version 3.11 --python-platform linux --generate-hashes -c requirements.lock -o requirements-image.lock

docs: install  ## regenerate docs/plugin-api.md and docs/configuration.md from the code (tests check they are current)
	$(BIN)/python -m vkprovider.contract.apidoc docs/plugin-api.md
	$(BIN)/python -m vkprovider.config_doc docs/configuration.md

# The Go starter's generated messages (sdk/go/README.md): pinned protoc-gen-go + grpcio-tools' protoc.
GO_MODULE := github.com/vkprovider/vkprovider/sdk/go
go-proto: install
	cd sdk/go && GOBIN=$(CURDIR)/sdk/go/.bin go install google.golang.org/protobuf/cmd/protoc-gen-go
	$(BIN)/python -m grpc_tools.protoc --plugin=protoc-gen-go=sdk/go/.bin/protoc-gen-go -Iproto \
	  --go_out=sdk/go --go_opt=module=$(GO_MODULE) \
	  --go_opt=Mvkprovider/v1/provider.proto=$(GO_MODULE)/vkproviderv1 proto/vkprovider/v1/provider.proto

proto: install
	$(BIN)/python -m vkprovider.plugins.grpc.generate

lint: install
	$(BIN)/ruff check vkprovider providers tests bench
	$(BIN)/ruff format --check vkprovider providers tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports

# pytest exits 5 when it collects no tests: report it plainly instead of failing obscurely.
# The suite mostly waits on real control planes (leases, grace periods, HPA syncs), so it runs in
# TEST_WORKERS pytest-xdist processes, one test file per worker at a time (each worker starts its
# own session cluster; module-scoped clusters stay one per file). TEST_WORKERS=0 runs it serially.
TEST_WORKERS ?= 3
test: install cluster-build prometheus image-if-possible
	$(BIN)/lint-imports
	@$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --durations=25; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest: no tests were collected"; exit 0; fi; exit $$rc

# The fault-injection runs (tests/chaos, docs in tests/chaos/README.md), outside `make test`:
# chaos-small (5-8 minutes, one replica) and chaos (the long one). SEED=n replays a run;
# for the long one CHAOS_SECONDS=n sets the length of its fault phase, FAULTS=a,b restricts the
# fault kinds.
chaos: install cluster-build
	$(if $(SEED),VKPROVIDER_CHAOS_SEED=$(SEED)) $(if $(CHAOS_SECONDS),VKPROVIDER_CHAOS_SECONDS=$(CHAOS_SECONDS)) \
	$(if $(FAULTS),VKPROVIDER_CHAOS_FAULTS=$(FAULTS)) \
	VKPROVIDER_CHAOS_LONG=1 $(BIN)/python -m pytest -q -s -rxXs --timeout=0 tests/chaos/test_chaos_long.py

chaos-small: install cluster-build
	$(if $(SEED),VKPROVIDER_CHAOS_SEED=$(SEED)) \
	VKPROVIDER_CHAOS_SMALL=1 $(BIN)/python -m pytest -q -s -rxXs --timeout=0 tests/chaos/test_chaos_small.py

test-unit: install
	$(BIN)/python -m pytest -q -m "not cluster"

# The unit and contract tests in a shuffled order (pytest-randomly): results must not depend on
# test order. SEED=n replays one order (default: a new seed, printed in the header).
test-random: install
	$(BIN)/python -m pytest -q -p randomly $(if $(SEED),--randomly-seed=$(SEED)) -m "not cluster" tests/unit tests/contract

cluster-build: install
	@$(BIN)/python -m vkprovider.devcluster build

# Debian's prometheus for the gate's tests, installed only where missing; never run as a service.
prometheus: install
	@command -v prometheus >/dev/null 2>&1 || $(BIN)/python -m vkprovider.devcluster.prometheus install

# The shipped Dockerfile built with buildah (docs/deploy.md, "The image"): podman, buildah, runc and
# mmdebstrap from Debian where missing; with no registry, PYTHON_IMAGE is a base made from Debian's
# archive (Python 3.11) by mmdebstrap, tagged by its inputs' digest. Images and the layer cache live
# in ~/.cache/vkprovider/containers; unchanged inputs rebuild nothing. Prints size and packages.
# IMAGE=registry.example.com/vkprovider:0.1.0 tags it with that name too (`make image-push` pushes
# it); PYTHON_IMAGE=<registry base> builds on that base (pulled) instead of the Debian one.
image: install
	@$(BIN)/python -m vkprovider.devcluster.image build $(if $(IMAGE),--tag $(IMAGE)) $(if $(PYTHON_IMAGE),--base $(PYTHON_IMAGE))

image-push: image
	$(if $(IMAGE),,$(error image-push needs IMAGE=<registry>/vkprovider:<tag>))
	$(BIN)/python -m vkprovider.devcluster.image podman push $(IMAGE)

# For `make test`: the same build, or one line saying why containers cannot run here (then
# tests/image skip, naming the same reason). A failing build fails `make test`.
image-if-possible: install
	@$(BIN)/python -m vkprovider.devcluster.image build --if-possible >&2

# The image run as the Deployment runs it, against the dev cluster (tests/image/test_image.py), and
# installed with kubectl apply -k as pods of a real kubelet node (tests/image/test_real_node.py).
image-test: image cluster-build
	$(BIN)/python -m pytest -q -s -n 0 -rs tests/image

# Build again with --no-cache and compare the layer digests with the cached build's.
image-reproduce: image
	@$(BIN)/python -m vkprovider.devcluster.image reproduce

cluster-up: cluster-build
	@$(BIN)/python -m vkprovider.devcluster up

cluster-down: install
	$(BIN)/python -m vkprovider.devcluster down

# SCENARIO=path.yaml runs another scenario (docs/simulation.md); the default takes ~5 minutes.
SCENARIO ?= deploy/examples/scenarios/krea-day.yaml

demo: cluster-build
	@$(BIN)/python -m vkprovider.sim.demo up --scenario $(SCENARIO)

demo-down: install
	$(BIN)/python -m vkprovider.sim.demo down

bench: install
	$(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
