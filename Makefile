# The two commands of vulcan: `make test` (the CI test command) and `make demo`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test lint unit demo crds clean

# Creates its own virtual environment, installs vulcan with its test extras, lints, runs the suite.
test: lint unit

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

# Regenerate manifests/crds from the models (a test fails when they differ).
crds: $(STAMP)
	$(BIN)/vulcan crds --out manifests/crds

demo: $(STAMP)
	@echo "make demo will bring up the embedded cluster (API server, kube-scheduler stand-in,"
	@echo "hollow kubelets, the vulcan extender and controllers) and run a gang scenario."
	@echo "It arrives with the embedded-cluster issue. Today you can already run:"
	@echo "  $(BIN)/vulcan validate ../shared/fixtures/volcano/*.yaml"
	$(BIN)/vulcan validate $(wildcard ../shared/fixtures/volcano/*.yaml) manifests/examples/*.yaml

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
