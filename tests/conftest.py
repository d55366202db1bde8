import pytest
from django.db import connection


@pytest.fixture(autouse=True, scope="session")
def _require_postgresql(django_db_setup, django_db_blocker):
    # Concurrency, locking and the audit trigger are tested for real: on PostgreSQL only.
    with django_db_blocker.unblock():
        if connection.vendor != "postgresql":
            pytest.exit("the tests run on PostgreSQL: set DATABASE_URL=postgres://... "
                        "(make test does)", returncode=2)


@pytest.fixture(autouse=True)
def _fresh_script():
    from tests.workflows import script

    script.reset()
    yield script
    script.reset()


@pytest.fixture
def live_sandbox(live_server, settings):
    """The sandbox served by the test's live server; the settings (and so the demo clients
    and any child process started through tests.processes) point at it."""
    settings.SANDBOX_BASE_URL = f"{live_server.url}/sandbox"
    settings.MODEL_BASE_URL = f"{live_server.url}/sandbox/model/v1"
    settings.SANDBOX_HOLD_SECONDS = 3
    settings.EXTERNAL_TIMEOUT_SECONDS = 1
    return settings.SANDBOX_BASE_URL


@pytest.fixture
def script():
    from tests.workflows import script

    return script


# Registers the test workflows in this process (worker subprocesses get
# RUNS_EXTRA_WORKFLOW_MODULES=tests.workflows instead).
import tests.workflows  # noqa: E402, F401
