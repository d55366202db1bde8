# Two commands matter: `make demo` runs the product, `make test` runs the tests.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
# Tests and the benchmark run on the machine's PostgreSQL and Redis (see bin/ensure-services).
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/durable
TEST_BROKER_URL ?= redis://127.0.0.1:6379/15
BENCH_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/durable_bench
BENCH_BROKER_URL ?= redis://127.0.0.1:6379/14
# The migration linter only reads migration files; sqlmigrate needs a connection to quote
# values, to any database of the server.
LINT_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/postgres

.PHONY: install test lint demo bench clean

$(BIN)/.installed: pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "$(PYTHON) not found: install Python 3.11"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

install: $(BIN)/.installed

lint: install
	$(BIN)/ruff check .
	$(BIN)/lint-imports

test: install
	bin/ensure-services
	bin/ensure-chromium
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	DATABASE_URL=$(LINT_DATABASE_URL) $(BIN)/python manage.py lint_migrations
	DATABASE_URL=$(TEST_DATABASE_URL) CELERY_BROKER_URL=$(TEST_BROKER_URL) $(BIN)/pytest -q

# bin/demo checks the port, migrates, seeds and starts everything.
demo: install
	bin/demo

bench: install
	bin/ensure-services
	DATABASE_URL=$(BENCH_DATABASE_URL) CELERY_BROKER_URL=$(BENCH_BROKER_URL) \
		$(BIN)/python manage.py bench_runtime
	DATABASE_URL=$(BENCH_DATABASE_URL) $(BIN)/python manage.py bench_console

clean:
	rm -rf $(VENV) var *.egg-info
