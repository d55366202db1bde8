import os
import urllib.request

import pytest
import redis
from django.db import connection

from tests.emptying import empty_by_truncating_what_was_written

# The store tests (marked `store`) run on PostgreSQL with the rest, and again on SQLite, the
# demo's embedded database, with this variable set (the Makefile's test target does both).
STORE_TESTS_ON_SQLITE = "STORE_TESTS_ON_SQLITE"


@pytest.fixture(autouse=True)
def _fresh_metric_counts():
    # Each test's database starts over; so do the metrics' counts of history, which a
    # process keeps between scrapes (observability.history_counts): a count kept from an
    # earlier test's committed runs would be added to this one's.
    from observability.metrics import recount_history

    recount_history()


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "store: runs.store's tests, run on PostgreSQL and on SQLite (make test)")
    config.addinivalue_line(
        "markers", "demo_database: a rule the demo's SQLite database is tested for too (make "
                   "test runs them there beside the store tests)")
    broker_per_test_process()
    fast_password_hashing()
    empty_by_truncating_what_was_written()


def fast_password_hashing():
    """Users made by the tests get a hasher that costs microseconds: production's PBKDF2
    costs about 0.3 s a password, most of the console tests' time. Logging in still checks
    the password; the production settings (tests/test_settings.py runs them in a process
    of their own) keep Django's default hashers."""
    from django.conf import settings

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def broker_per_test_process():
    """Under pytest-xdist (make test runs `-n 3`) each test process has its own database
    (pytest-django's suffix) and here its own Redis database for the broker and the rate
    windows: the tests about workers flush the broker and count what is queued, which must
    not be the other process's hints. Test process gwN takes the configured index plus N."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return
    from django.conf import settings

    from console.celery import app as celery_app

    url = settings.CELERY_BROKER_URL
    if not url.startswith(("redis://", "rediss://")):
        return
    base, _, index = url.rpartition("/")
    number = int(index or 0) + int(worker.removeprefix("gw"))
    if number > 15:
        raise pytest.UsageError(f"CELERY_BROKER_URL {url}: test process {worker} would use "
                                f"Redis database {number}; choose a lower index")
    # Celery's conf reads the variable CELERY_BROKER_URL before any setting.
    os.environ["CELERY_BROKER_URL"] = settings.CELERY_BROKER_URL = f"{base}/{number}"
    celery_app.conf.broker_url = settings.CELERY_BROKER_URL
    if settings.RUNS_LIMITS_REDIS_URL == url:
        settings.RUNS_LIMITS_REDIS_URL = settings.CELERY_BROKER_URL


@pytest.fixture(autouse=True, scope="session")
def _require_postgresql(request, django_db_setup, django_db_blocker):
    # Concurrency, locking and the audit trigger are tested for real: on PostgreSQL only,
    # except the store tests and those marked demo_database, which also run on the demo's
    # SQLite when asked to (and only they: a session that selected anything else stops
    # here, nothing is skipped).
    with django_db_blocker.unblock():
        if connection.vendor == "postgresql":
            return
    others = [item.nodeid for item in request.session.items
              if item.get_closest_marker("store") is None
              and item.get_closest_marker("demo_database") is None]
    if os.environ.get(STORE_TESTS_ON_SQLITE) and not others:
        return
    pytest.exit("the tests run on PostgreSQL: set DATABASE_URL=postgres://... (make test "
                "does); on SQLite only the store tests and those marked demo_database run, with "
                f"{STORE_TESTS_ON_SQLITE}=1 and -m 'store or demo_database'", returncode=2)


@pytest.fixture(autouse=True)
def _clock_estimate_fresh(django_db_blocker):
    """A process measures the database's clock once every 30 s (runs.store's now()): a query
    that no transition or page pays for itself. Measured afresh before each test (not only
    when due: one due a moment into the test would be counted there), it never falls inside
    a test's count of queries shorter than that."""
    from runs import store

    with django_db_blocker.unblock():
        store.current().measure_clock()


@pytest.fixture(autouse=True)
def _fresh_script():
    from tests.workflows import script

    script.reset()
    yield script
    script.reset()


@pytest.fixture
def empty_broker(settings):
    """An empty broker: no wake-up hint left by another test reaches this test's workers
    (the test process's own Redis database, see broker_per_test_process)."""
    redis.Redis.from_url(settings.CELERY_BROKER_URL).flushdb()


@pytest.fixture
def live_sandbox(live_server, settings):
    """The sandbox served by the test's live server; the settings (and so the demo clients
    and any child process started through tests.processes) point at it."""
    settings.SANDBOX_BASE_URL = f"{live_server.url}/sandbox"
    settings.MODEL_BASE_URL = f"{live_server.url}/sandbox/model/v1"
    settings.SANDBOX_HOLD_SECONDS = 3
    settings.EXTERNAL_TIMEOUT_SECONDS = 1
    # One request first, without the 1 s timeout: a cold live server's first answer (its
    # thread, the URLconf, the sandbox's views imported) took longer than that under load,
    # and a test counting the model's requests counted the one asked again.
    with urllib.request.urlopen(f"{settings.SANDBOX_BASE_URL}/stats", timeout=60) as warm:
        assert warm.status == 200
    return settings.SANDBOX_BASE_URL


@pytest.fixture
def script():
    from tests.workflows import script

    return script


# Registers the test workflows in this process (worker subprocesses get
# RUNS_EXTRA_WORKFLOW_MODULES=tests.workflows instead).
import tests.workflows  # noqa: E402, F401


@pytest.fixture
def declared_schedule():
    """Schedules registered for one test, removed after it (a tick and the schedules page
    work the whole registry): declared_schedule(name, **Schedule options) on the test
    workflow `nightly`, every minute with the slot as input unless told otherwise."""
    from datetime import timedelta

    from runs.waiting import schedules
    from tests.workflows import nightly

    added = []

    def declare(name, **options):
        options.setdefault("every", timedelta(minutes=1))
        options.setdefault("input", lambda slot: {"slot": slot.isoformat()})
        schedule = schedules.Schedule(nightly, name, register=False, **options)
        schedules.registry.add(schedule)
        added.append(schedule)
        return schedule

    yield declare
    for schedule in added:
        schedules.registry.remove(schedule)
