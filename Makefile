# Two entry points do all set-up on a fresh machine:
#   make run   - create .venv on first use, then serve the appliance
#   make test  - create .venv on first use, then run the test suite
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test clean

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip
	# llama-cpp-python compiles from source (about 5 minutes on first use).
	$(BIN)/pip install -e '.[test]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/appliance serve $(if $(CONFIG),--config $(CONFIG))

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

clean:
	rm -rf $(VENV)
