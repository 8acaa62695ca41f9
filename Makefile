# The two commands of vulcan: `make test` (the CI test command) and `make demo`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test lint unit demo crds clean kubectl bench image

# Creates its own virtual environment, installs vulcan with its test extras, lints, runs the suite.
test: lint kubectl unit

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

unit: $(STAMP)
	$(BIN)/python -m pytest -q

# The kubectl tests use the real kubectl; install Debian's if the machine has none. When that is
# impossible the tests skip with a message saying so.
kubectl:
	@command -v kubectl >/dev/null 2>&1 || { \
		echo "kubectl not found: installing Debian's kubernetes-client"; \
		( apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			kubernetes-client ) >/dev/null 2>&1 || echo "could not install kubectl"; }

# Benchmarks are not part of the test command.
bench: $(STAMP)
	$(BIN)/python -m bench.apiserver_scale

# Regenerate manifests/crds from the models (a test fails when they differ).
crds: $(STAMP)
	$(BIN)/vulcan crds --out manifests/crds

# Two GPU jobs on the embedded cluster: deadlocked by the scheduler alone, run in turn with vulcan;
# then a Volcano Job from submission to its TTL clean-up.
demo: $(STAMP)
	$(BIN)/vulcan demo gang
	$(BIN)/vulcan demo job
	$(BIN)/vulcan demo flow

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache

# The container image vulcan:$(VERSION) (default dev) from the Dockerfile, with the first builder
# that can build here: docker (when its engine answers), podman, buildah. With none, one line says
# so and the target succeeds: the image is built on a machine that has one.
image: IMAGE = vulcan:$(or $(VERSION),dev)
image: BUILD_ARGS = --build-arg VERSION=$(or $(VERSION),dev)
image:
	@if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then set -- docker build; \
	elif command -v podman >/dev/null 2>&1; then set -- podman build; \
	elif command -v buildah >/dev/null 2>&1; then set -- buildah bud; \
	else echo "make image: no container builder here (looked for docker with a running engine, podman, buildah); build it elsewhere from this checkout with: docker build -t $(IMAGE) ."; exit 0; fi; \
	echo "$$* $(BUILD_ARGS) -t $(IMAGE) ."; "$$@" $(BUILD_ARGS) -t $(IMAGE) .
