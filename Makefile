# Two commands matter: `make demo` runs the product, `make test` runs the tests.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
# Tests and the benchmark run on the machine's PostgreSQL and Redis (see bin/ensure-services).
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/durable
# pytest runs in three processes (pytest-xdist) on the two cores: many tests wait on real
# workers, browsers and timers, and a third process fills those waits (9 min 12 s against
# 11 min 34 s for two, on a 2-core machine). Process gwN takes the Redis database of
# TEST_BROKER_URL plus N (tests/conftest.py) and a test database of its own.
TEST_PROCESSES ?= 3
TEST_BROKER_URL ?= redis://127.0.0.1:6379/11
PROJECT_PACKAGES := console api observability archive approvals runs audit demo tests
# Modules whose tests share a node id, which pytest-xdist would run once: run without -n.
SERIAL_TESTS := tests/api/test_schemathesis.py
# make test runs the store tests (runs.store) again on SQLite, the demo's embedded database,
# kept here with its lock files, and the tests of the other rules marked demo_database.
STORE_TEST_DIR ?= /tmp/durable-store-tests
SQLITE_TESTS := tests/runs/test_store.py \
	tests/console/test_an_address_naming_an_id_no_row_can_have_is_not_found.py \
	tests/audit/test_an_admin_list_given_a_filter_no_row_can_hold_answers_with_the_list_and_a_message.py \
	tests/audit/test_an_admin_action_on_a_selection_naming_no_id_does_nothing_and_says_so.py \
	tests/console/test_a_time_outside_the_calendar_answers_no_server_error_on_the_demo_database.py
BENCH_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/durable_bench
# The runtime's figures (WAL per step among them) are measured on a database made afresh
# each time; the console's on the million runs seed_scale keeps in BENCH_DATABASE_URL.
BENCH_RUNTIME_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/durable_bench_runtime
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
	# Compiled once here: where the environment sets PYTHONDONTWRITEBYTECODE, each of the
	# hundreds of workers and commands the tests start compiled the project's modules anew
	# (about 0.3 s of CPU each).
	$(BIN)/python -m compileall -q -j 0 $(PROJECT_PACKAGES)
	DATABASE_URL=$(TEST_DATABASE_URL) CELERY_BROKER_URL=$(TEST_BROKER_URL) $(BIN)/pytest -q \
		-n $(TEST_PROCESSES) --dist loadfile $(SERIAL_TESTS:%=--ignore=%)
	DATABASE_URL=$(TEST_DATABASE_URL) CELERY_BROKER_URL=$(TEST_BROKER_URL) $(BIN)/pytest -q \
		$(SERIAL_TESTS)
	rm -rf $(STORE_TEST_DIR) && mkdir -p $(STORE_TEST_DIR)
	DATABASE_URL=sqlite:///$(STORE_TEST_DIR)/durable.sqlite3 VAR_DIR=$(STORE_TEST_DIR) \
		CELERY_BROKER_URL=$(TEST_BROKER_URL) STORE_TESTS_ON_SQLITE=1 \
		$(BIN)/pytest -q -m 'store or demo_database' $(SQLITE_TESTS)

# bin/demo checks the port, migrates, seeds and starts everything.
demo: install
	bin/demo

bench: install
	bin/ensure-services
	DATABASE_URL=$(BENCH_RUNTIME_DATABASE_URL) CELERY_BROKER_URL=$(BENCH_BROKER_URL) \
		$(BIN)/python manage.py bench_runtime --fresh-database
	DATABASE_URL=$(BENCH_DATABASE_URL) $(BIN)/python manage.py bench_console

clean:
	rm -rf $(VENV) var *.egg-info
